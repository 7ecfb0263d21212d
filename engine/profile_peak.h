// engine/profile_peak.h - a device's peak for the profiler (kiln/runtime/profile.h).
#pragma once

#include "kiln/engine/engine.h"
#include "kiln/runtime/profile.h"

namespace kiln::engine {

/// The copy bandwidth and multiply-add rate of `e`'s device, from the disk cache when it
/// holds them for this device's fingerprint, else measured and stored there: a copy kernel
/// over 64 MiB (the fastest of 5 runs), and the backend's own f32 FMA rate
/// (Backend::fma_peak_gflops) or, where it has none, a 512^3 f32 matmul (the fastest of 3).
profile::Peak device_peak(Engine& e, Backend& backend, const std::string& fingerprint);

}  // namespace kiln::engine
