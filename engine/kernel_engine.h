// engine/kernel_engine.h - the engine of every compiling device, over its Backend.
#pragma once

#include <memory>

#include "kiln/backends/backend.h"
#include "kiln/engine/engine.h"

namespace kiln::engine {

/// An Engine that compiles graphs for `backend` (plan cache, pipeline, memory plan,
/// lowering, schedules, KILN_DUMP) and runs their launch lists on it.
std::unique_ptr<Engine> make_kernel_engine(Device device, Backend& backend);

/// The engine that runs graphs on the reference interpreter (device `interp`).
std::unique_ptr<Engine> make_interpreter_engine();

/// Plan-cache control for the engines made above (a no-op on others).
size_t plan_cache_size(Engine& e);
size_t plan_cache_capacity(Engine& e);
void plan_cache_clear(Engine& e);

}  // namespace kiln::engine
