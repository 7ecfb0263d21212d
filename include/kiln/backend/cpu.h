// kiln/backend/cpu.h - the `cpu` backend: LLVM for the host CPU, oneTBB across its cores.
#pragma once

#include <string>

#include "kiln/backend/backend.h"

namespace kiln {

/// The backend of device `cpu`: kernels are compiled by LLVM for the host CPU and its
/// features (kept in memory and on disk), split across cores with oneTBB; GEMM steps run
/// Eigen on row blocks. See docs/backends.md.
Backend& cpu_backend();

/// The LLVM IR (before or after optimization) or the assembly of one kernel run with `s`.
std::string cpu_kernel_llvm_ir(const kir::Kernel& k, const kir::Schedule& s, bool optimized = true);
std::string cpu_kernel_assembly(const kir::Kernel& k, const kir::Schedule& s);
/// "x86_64-pc-linux-gnu znver4 (64-byte vectors)"
std::string cpu_target_description();
/// Kernels the in-memory LRU holds (KILN_KERNEL_CACHE_SIZE).
size_t cpu_cached_kernels();

}  // namespace kiln
