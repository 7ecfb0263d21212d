// engine/profile_peak.h - a device's peak for the profiler (kiln/runtime/profile.h).
#pragma once

#include "kiln/engine/engine.h"
#include "kiln/runtime/profile.h"

namespace kiln::engine {

/// The copy bandwidth and GEMM rate of `e`'s device, from the disk cache when it holds them
/// for this device's fingerprint, else measured (a copy of 64 MiB, a 512^3 f32 matmul;
/// median of 5 and 3 runs) and stored there.
profile::Peak device_peak(Engine& e, const std::string& fingerprint);

}  // namespace kiln::engine
