// codegen/cpu/cpu_jit.h - compiled kernels for the host CPU, and their caches.
//
// A kernel's machine code is found, in order: in this process (by kernel hash), in the
// on-disk cache (an object file, linked into the JIT without running LLVM's optimizer or
// code generator), or compiled: Kernel IR -> LLVM IR -> O2 for the host CPU and its features
// -> object file, written to the disk cache and linked.
#pragma once

#include <memory>
#include <string>

#include "kiln/codegen/kernel_ir.h"
#include "llvm_codegen.h"

namespace kiln::cpu {

struct HostTarget {
  std::string triple;
  std::string cpu;        // "znver4"
  std::string features;   // "+avx2,+avx512f,..."
  int vector_bytes = 16;  // widest vector register used: 64 (AVX-512), 32 (AVX2) or 16
  /// "x86_64-pc-linux-gnu znver4 avx512 (64-byte vectors)"
  std::string describe() const;
};

class Jit {
 public:
  static Jit& instance();

  const HostTarget& target() const;

  /// The machine code of `k`, from the caches or compiled now. Thread-safe. Throws
  /// kiln::Error when LLVM fails, or when compiling is needed and KILN_NO_COMPILE=1.
  KernelFn kernel(const kir::Kernel& k);

  /// The LLVM IR of `k` before or after optimization (compiles nothing into the JIT).
  std::string llvm_ir(const kir::Kernel& k, bool optimized);
  /// The host assembly of `k`.
  std::string assembly(const kir::Kernel& k);

  ~Jit();

 private:
  Jit();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::cpu
