// kiln/kiln.h - everything a kiln user needs: tensors, sync, capture, the IR, its passes and
// its interpreter, devices, plan caches and counters, ONNX, training. What this header
// reaches, and the backend interface (kiln/backends/), is kiln's public API: the headers
// installed. The rest of kiln's headers are internal (internal/kiln/), for its own modules.
#pragma once

#include "kiln/engine/compile.h"
#include "kiln/engine/device.h"
#include "kiln/engine/engine.h"
#include "kiln/frontend/autodiff.h"
#include "kiln/frontend/capture.h"
#include "kiln/frontend/custom_op.h"
#include "kiln/frontend/lazy.h"
#include "kiln/frontend/tensor.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/host_tensor.h"
#include "kiln/ir/interpreter.h"
#include "kiln/ir/text.h"
#include "kiln/onnx/onnx.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/ir/npy.h"
#include "kiln/runtime/stats.h"
#include "kiln/support/error.h"
#include "kiln/train/loss.h"
#include "kiln/train/optim.h"
#include "kiln/version.h"
