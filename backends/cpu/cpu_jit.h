// backends/cpu/cpu_jit.h - compiled kernels for the host CPU.
//
// A kernel's machine code comes from the cpu's kernel store (kiln/runtime/kernel_store.h):
// alive in this process, an object file from the disk cache (linked into the JIT without
// running LLVM's optimizer or code generator), or compiled here: Kernel IR + schedule ->
// LLVM IR -> the schedule's pass pipeline (Schedule::pipeline) for the host CPU and its
// features -> object file, stored and linked. Code no one holds any more is unlinked.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/backends/backend.h"
#include "kiln/backends/toolchain.h"
#include "kiln/codegen/kernel_ir.h"
#include "kiln/codegen/schedule.h"
#include "kernel_abi.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace kiln::cpu {

struct HostTarget {
  std::string triple;
  std::string cpu;        // "znver4"
  std::string features;   // "+avx2,+avx512f,..."
  int vector_bytes = 16;  // widest vector register used: 64 (AVX-512), 32 (AVX2) or 16
  bool f16c = false;      // x86's vector f32 <-> f16 conversions
  /// "x86_64-pc-linux-gnu znver4 (64-byte vectors)"
  std::string describe() const;
};

/// Machine code linked into the JIT: its entry point, and what unlinks it when the last
/// holder lets go. The kernel store's group of one kernel.
struct LinkedCode {
  KernelFn fn = nullptr;
  std::shared_ptr<void> code;
};

/// Machine code of one kernel, linked into the JIT while this object lives.
class CpuKernel final : public CompiledKernel {
 public:
  CpuKernel(KernelFn fn, std::vector<DType> scalar_types, std::shared_ptr<void> code)
      : fn_(fn), scalar_types_(std::move(scalar_types)), code_(std::move(code)) {}
  KernelFn fn() const { return fn_; }
  /// Kernel::scalars: how each scalar argument is passed.
  const std::vector<DType>& scalar_types() const { return scalar_types_; }

 private:
  KernelFn fn_;
  std::vector<DType> scalar_types_;
  std::shared_ptr<void> code_;  // unlinks the code when the last holder lets go
};

/// The cpu's toolchain (kiln/backends/toolchain.h): LLVM for the host CPU, objects linked by
/// ORC. Its store also holds the code of the GEMM and attention steps, and of custom kernels
/// as the interpreter runs them. Thread-safe.
class Jit final : public Toolchain {
 public:
  static Jit& instance();

  const HostTarget& target() const;
  /// Everything the machine code depends on besides the kernel and its schedule.
  std::string fingerprint() const override;
  /// `llvm`: the kernel's optimized LLVM IR.
  std::string render(const kir::Kernel& k, const kir::Schedule& s, std::string_view stage) override;
  /// One kernel's object file (the store's bytes), linked (a LinkedCode).
  KernelStore::Built build(std::span<const kir::Kernel* const> kernels,
                           std::span<const kir::Schedule* const> schedules, std::string_view key) override;
  /// An object file linked; throws kiln::Error when it does not link.
  KernelStore::Object load(std::string_view bytes, std::string_view key) override;
  /// The CpuKernel of linked code, taking `k`'s scalars.
  std::shared_ptr<const CompiledKernel> member(const KernelStore::Object& group, size_t position, const kir::Kernel& k,
                                               const kir::Schedule& s) override;

  /// The GEMM micro-kernel for `s`'s register tile and `t` (gemm_codegen.h; called as
  /// fn(args, kc, ldc)), from the same caches as kernels.
  /// With a `form`, the variant that reads A or B where they lie (gemm_codegen.h).
  std::shared_ptr<const CpuKernel> gemm_microkernel(const kir::GemmSchedule& s, DType t,
                                                    const MicroKernelForm& form = {});

  /// The online-softmax step of the attention kernel for `vector_width` lanes
  /// (attention_codegen.h; called as fn(args, rows, ld)), from the same caches.
  std::shared_ptr<const CpuKernel> attention_softmax(int vector_width);

  /// The micro-kernel's LLVM IR (before or after optimization) and host assembly.
  std::string gemm_llvm_ir(const kir::GemmSchedule& s, DType t, bool optimized);
  std::string gemm_assembly(const kir::GemmSchedule& s, DType t);

  /// Custom kernel `k` at its default macros on elements [begin, end) of arrays: args are
  /// its parameters' arrays then the result's (bool as one byte). What the reference
  /// interpreter runs for `custom` (kiln/ir/custom_kernel.h).
  std::shared_ptr<const CpuKernel> custom_host_function(const CustomKernel& k);

  /// Kernels kept alive by the in-memory LRU (KILN_KERNEL_CACHE_SIZE, default 4096).
  size_t cached_kernels();

  /// The LLVM IR of `k` before or after optimization (compiles nothing into the JIT).
  std::string llvm_ir(const kir::Kernel& k, const kir::Schedule& s, bool optimized);
  /// The host assembly of `k`.
  std::string assembly(const kir::Kernel& k, const kir::Schedule& s);

  ~Jit();

 private:
  Jit();
  using ModuleBuilder = std::function<std::unique_ptr<llvm::Module>(const std::string& symbol, llvm::LLVMContext&)>;
  /// The machine code `canonical` describes (its hash is the cache key), from the caches or
  /// built by `build` now; `what` names it in logs and errors.
  std::shared_ptr<const CpuKernel> code(const std::string& canonical, const std::string& what,
                                        const std::vector<DType>& scalar_types, kir::CpuPipeline pipeline,
                                        const ModuleBuilder& build);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::cpu
