// kiln/kiln.h - everything a kiln user needs: tensors, sync, capture, the IR and devices.
#pragma once

#include "kiln/frontend/autodiff.h"
#include "kiln/frontend/capture.h"
#include "kiln/frontend/custom_op.h"
#include "kiln/frontend/lazy.h"
#include "kiln/frontend/tensor.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/text.h"
#include "kiln/engine/device.h"
#include "kiln/engine/engine.h"
#include "kiln/ir/host_tensor.h"
#include "kiln/onnx/onnx.h"
#include "kiln/support/error.h"
#include "kiln/train/loss.h"
#include "kiln/train/optim.h"
#include "kiln/version.h"
