// kiln/backends/toolchain.h - what makes a device's code: Kernel IR to bytes, bytes to kernels.
//
// A backend is a toolchain and a device (backend.h). The toolchain renders Kernel IR with a
// schedule in the device's language, builds it into bytes that the disk can keep, and loads
// bytes into kernels the device launches. It caches nothing: its kernel store
// (kiln/runtime/kernel_store.h) asks it to build or load only what memory and disk do not
// hold, and Backend::compile_all (backends/compile_all.cpp) is the one path from a plan's
// kernels to the store. Thread-safe: kernels build at once on the machine's cores.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kiln/codegen/kernel_ir.h"
#include "kiln/codegen/schedule.h"
#include "kiln/runtime/kernel_store.h"

namespace kiln {

class CompiledKernel;

class Toolchain {
 public:
  /// A toolchain whose store keeps its kernels in the cache folder `cache_namespace` (its
  /// registry row's), for `device` as logs and errors name it ("opencl:1").
  Toolchain(std::string cache_namespace, std::string device);
  virtual ~Toolchain();
  Toolchain(const Toolchain&) = delete;
  Toolchain& operator=(const Toolchain&) = delete;

  /// Everything compiled code depends on besides the kernel and its schedule (compiler
  /// version, target, features, driver): part of every kernel cache key.
  virtual std::string fingerprint() const = 0;
  /// The source it generates for `k` at KILN_DUMP stage `stage` (one of its registry row's),
  /// or "" for a stage that is not its own.
  virtual std::string render(const kir::Kernel& /*k*/, const kir::Schedule& /*s*/, std::string_view /*stage*/) {
    return {};
  }
  /// Throws kiln::Error naming the kernel when the device cannot run it (a dtype it lacks,
  /// more scalar bytes than it takes), before anything is built.
  virtual void check_kernel(const kir::Kernel& /*k*/) const {}

  /// Whether the kernels of a plan that no cache holds build together as one group (an
  /// OpenCL program: a build costs about as much for one kernel as for ten), or each alone,
  /// the distinct ones at once on the machine's cores.
  virtual bool builds_together() const { return false; }
  /// Builds `kernels[i]` run with `schedules[i]` into one group, the kernel at position i
  /// (one kernel unless builds_together), which the store keeps under `key` (what load()
  /// is later given). Throws kiln::Error naming them when they do not compile.
  virtual KernelStore::Built build(std::span<const kir::Kernel* const> kernels,
                                   std::span<const kir::Schedule* const> schedules, std::string_view key) = 0;
  /// The group that bytes a build wrote (maybe another process's, another driver's) hold,
  /// stored under `key`; throws kiln::Error when they are not this toolchain's.
  virtual KernelStore::Object load(std::string_view bytes, std::string_view key) = 0;
  /// The kernel at `position` of `group`, compiled from `k` run with `s`; throws kiln::Error
  /// when the group holds none there.
  virtual std::shared_ptr<const CompiledKernel> member(const KernelStore::Object& group, size_t position,
                                                       const kir::Kernel& k, const kir::Schedule& s) = 0;

  /// The store of this toolchain's kernels, and of the code its device's library steps
  /// (GEMM, attention) compile.
  KernelStore& store() { return store_; }

 private:
  KernelStore store_;
};

}  // namespace kiln
