// kiln/backends/cpu.h - the `cpu` backend: LLVM for the host CPU, oneTBB across its cores.
#pragma once

#include <string>

#include "kiln/backends/backend.h"
#include "kiln/ir/custom_kernel.h"

namespace kiln {

/// The backend of device `cpu`: kernels are compiled by LLVM for the host CPU and its
/// features (kept in memory and on disk), split across cores with oneTBB; GEMM steps run
/// packed panels through a register-tiled micro-kernel generated for the host. See
/// docs/backends.md and docs/runtime.md.
Backend& cpu_backend();

/// The LLVM IR (before or after optimization) or the assembly of one kernel run with `s`.
std::string cpu_kernel_llvm_ir(const kir::Kernel& k, const kir::Schedule& s, bool optimized = true);
std::string cpu_kernel_assembly(const kir::Kernel& k, const kir::Schedule& s);
/// The same for the GEMM micro-kernel of blocking `s` and element type `t`.
std::string cpu_gemm_llvm_ir(const kir::GemmSchedule& s, DType t, bool optimized = true);
std::string cpu_gemm_assembly(const kir::GemmSchedule& s, DType t);
/// Compiles custom kernel `k` with Clang at its default macros (and at every value of each
/// tunable macro) and checks its function against the signature; throws kiln::Error with
/// Clang's diagnostics (file:line:col inside the source) otherwise. An OpenCL C builtin that
/// `cpu` cannot provide is not an error here, only when a cpu kernel calls the function.
void cpu_check_custom_kernel(const CustomKernel& k);
/// The LLVM IR Clang makes of `k`'s source at its default macros (before kiln links it).
std::string cpu_custom_kernel_llvm_ir(const CustomKernel& k);
/// "x86_64-pc-linux-gnu znver4 (64-byte vectors)"
std::string cpu_target_description();
/// Custom kernel `k`'s function compiled for the host, as the reference interpreter runs it
/// (kiln/ir/custom_kernel.h; kiln::register_custom_host installs this).
CustomHostFn cpu_custom_host_function(const CustomKernel& k);
/// Kernels the in-memory LRU holds (KILN_KERNEL_CACHE_SIZE).
size_t cpu_cached_kernels();

}  // namespace kiln
