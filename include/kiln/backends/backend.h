// kiln/backends/backend.h - what a device backend implements, and nothing more.
//
// A backend is a toolchain (kiln/backends/toolchain.h: Kernel IR rendered, built to bytes,
// loaded; its kernel store holds every cache tier) and a device: memory, launches, library
// steps. compile() and compile_all() are written once, over the toolchain and its store
// (backends/compile_all.cpp). Everything else (the plan cache, the pass pipeline,
// memory planning, lowering, the launch list, dumps) is the engine's and shared by every
// backend (engine/kernel_engine.cpp). Adding a device is one folder under backends/, one row
// in the registry (engine/registry.cpp: its name, cache folder, dump stages, description)
// and a column in docs/backends.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backends/toolchain.h"
#include "kiln/codegen/kernel_ir.h"
#include "kiln/codegen/lower.h"
#include "kiln/codegen/schedule.h"
#include "kiln/ir/attrs.h"
#include "kiln/ir/host_tensor.h"
#include "kiln/support/allocator.h"

namespace kiln {

struct PassInfo;

/// A block of device memory. Host backends (cpu) return its bytes from host_data(); device
/// backends return nullptr and move bytes with upload/download.
class DeviceMemory {
 public:
  virtual ~DeviceMemory();
  int64_t bytes() const { return bytes_; }
  virtual std::byte* host_data() { return nullptr; }
  /// Memory the device shares with its caller rather than owns (a host tensor used in
  /// place, Backend::borrow): never written, so never donated to a run.
  virtual bool borrowed() const { return false; }
  /// Whether its bytes never change again: borrowed memory, or an executable's constants
  /// once uploaded (set_immutable). A backend may then keep what it derives from them (a
  /// GEMM operand's packed panels), keyed by id().
  bool immutable() const { return immutable_ || borrowed(); }
  void set_immutable() { immutable_ = true; }
  /// Unique in the process, never reused: a key that outlives the memory safely.
  uint64_t id() const { return id_; }

 protected:
  /// Counts `bytes` in the process's device memory gauge (kiln/runtime/stats.h) until freed.
  explicit DeviceMemory(int64_t bytes);

 private:
  static uint64_t next_id();
  int64_t bytes_;
  uint64_t id_;
  bool immutable_ = false;
};

/// A kernel compiled for one backend with one schedule, ready to launch. Backends derive
/// from it; the engine keeps it alive as long as a cached executable uses it.
class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // ---- identity ----
  /// The device kind: "cpu".
  virtual std::string_view name() const = 0;
  /// What makes this device's code, and keeps it (its store).
  virtual Toolchain& toolchain() = 0;
  /// The toolchain's (Toolchain::fingerprint): everything compiled code depends on besides
  /// the kernel and its schedule; part of every kernel cache key.
  virtual std::string fingerprint() const = 0;
  virtual const Capabilities& capabilities() const = 0;
  /// The device and its driver without kiln's own version (vendor, name, driver, compute
  /// units): what the autotuner files timings under, so that a rebuilt kiln keeps them and
  /// `kiln cache export` can ship them to a machine of the same kind.
  virtual std::string device_fingerprint() const { return fingerprint(); }
  /// The device as people name it: "znver4, 2 cores", "llvmpipe (LLVM 15.0.6, 256 bits)".
  virtual std::string device_name() const { return std::string(name()); }
  /// Passes this target runs after -O2 and before fusion (e.g. split-reductions on CPU).
  virtual std::vector<const PassInfo*> extra_passes() const { return {}; }

  // ---- compile ----
  /// `k` compiled to run with `s`, from the toolchain's store or built now
  /// (backends/compile_all.cpp). Throws kiln::Error naming the kernel on failure, or when
  /// KILN_NO_COMPILE=1 and nothing cached holds it. Thread-safe. Virtual only so that a test
  /// can wrap a backend and make compiles fail.
  virtual std::shared_ptr<const CompiledKernel> compile(const kir::Kernel& k, const kir::Schedule& s);
  /// Every kernel of a launch plan, `kernels[i]` run with `s[i]`: the engine compiles a plan
  /// through this. Where the toolchain builds together (Toolchain::builds_together), the
  /// kernels no cache holds build as one group per set whose custom kernels agree on their
  /// macros; otherwise compile() runs once for each distinct kernel and schedule, the distinct
  /// ones at once on the machine's cores (a model's repeated blocks compile once, its other
  /// kernels in parallel). Throws the error of the first kernel in plan order that fails.
  std::vector<std::shared_ptr<const CompiledKernel>> compile_all(std::span<const kir::Kernel> kernels,
                                                                 std::span<const kir::Schedule> s);

  // ---- buffers ----
  /// Uninitialized memory; throws kiln::Error naming the size and device when it cannot.
  virtual std::shared_ptr<DeviceMemory> alloc(int64_t bytes) = 0;
  /// Host bytes taken over as device memory without a copy, for backends whose memory is
  /// host memory; nullptr (the default) means upload a copy instead.
  virtual std::shared_ptr<DeviceMemory> adopt(HostBuffer& /*bytes*/) { return nullptr; }
  /// `host`'s bytes used in place, kept alive by the memory (a model's weights on a
  /// host-memory device, which a copy would double), or nullptr where the device has memory
  /// of its own and the caller uploads a copy.
  virtual std::shared_ptr<DeviceMemory> borrow(std::shared_ptr<const HostTensor> /*host*/) { return nullptr; }
  virtual void upload(DeviceMemory& dst, const std::byte* src, int64_t bytes) = 0;
  virtual void download(const DeviceMemory& src, std::byte* dst, int64_t bytes) = 0;
  virtual void copy(const DeviceMemory& src, DeviceMemory& dst, int64_t bytes) = 0;

  // ---- launch ----
  /// Runs `k` over its schedule's iterations with `buffers` (Kernel::buffers order) and
  /// `scalars` (Kernel::scalars order, already converted to their dtypes). Returns when the
  /// results are visible to the next launch.
  virtual void launch(const CompiledKernel& k, const kir::Schedule& s, std::span<DeviceMemory* const> buffers,
                      std::span<const Scalar> scalars) = 0;
  /// Blocks until every launch and copy issued so far has completed: launches on queue
  /// devices (opencl) return once enqueued. The default is for backends whose launches
  /// return complete (cpu).
  virtual void finish() {}

  /// The multiply-add rate of the device in f32 GFLOP/s, measured on its own arithmetic
  /// (the profiler's peak: kiln/runtime/profile.h), or 0 when the backend has no such
  /// measurement (the profiler then takes its GEMM's rate).
  virtual double fma_peak_gflops() { return 0; }

  // ---- optional library steps ----
  /// C = A x B as LaunchPlan::Gemm says; `buffers` is the whole plan's buffer table. A
  /// backend without a GEMM returns false and the engine reports the matmul as unsupported.
  virtual bool gemm(const LaunchPlan::Gemm&, std::span<DeviceMemory* const> /*buffers*/) { return false; }

  /// The attention step `a` (LaunchPlan::Attention); `buffers` is the whole plan's buffer
  /// table. False when this backend has no attention kernel: the engine reports it.
  virtual bool attention(const LaunchPlan::Attention& /*a*/, std::span<DeviceMemory* const> /*buffers*/) {
    return false;
  }

  /// Compiles now (or finds in this backend's caches) the code gemm() runs for this step's
  /// dtype and blocking, which gemm() would otherwise compile at its first run: the
  /// autotuner times and caps this compile per candidate blocking. Throws kiln::Error when
  /// the code does not compile; does nothing for a backend without generated GEMM code.
  virtual void prepare_gemm(const LaunchPlan::Gemm& /*g*/) {}

  /// The kernel of a GEMM step's epilogue (gemm_epilogue_iterations_per_row): iterations
  /// [r * per_row, (r + 1) * per_row) cover row r of the product.
  struct GemmEpilogue {
    const CompiledKernel& kernel;
    const kir::Schedule& schedule;
    std::span<DeviceMemory* const> buffers;  // the kernel's, as for launch()
    /// The compiled kernel's, as for launch(): `ir`'s scalars, then its number of rows where
    /// it was compiled for every number (Kernel::rows_arg, kir::rows_at_launch).
    std::span<const Scalar> scalars;
    int64_t iterations_per_row = 0;
    /// The columns each iteration covers (gemm_epilogue_columns_per_iteration): a block of
    /// columns from a multiple of it is a run of iterations of each of its rows.
    int64_t columns_per_iteration = 0;
    /// The epilogue's Kernel IR at this launch's sizes (what `kernel` was compiled from, or its
    /// class), for a backend that computes it inside the product's own kernel, on each element.
    const kir::Kernel* ir = nullptr;
    /// Whether a later step or the caller reads the product itself: when not, a backend
    /// that computes the epilogue in registers need not store it.
    bool product_read_later = true;
    /// The epilogue's buffer parameter that reads the product (-1: none), as
    /// kir::gemm_epilogue_source finds it in the plan.
    int32_t product_param = -1;
  };
  /// The GEMM and its epilogue together: the epilogue runs on each block of rows as soon as
  /// it is computed, while in cache (cpu), or on each element of the product in registers
  /// (opencl). False when this backend (or this product's blocking) cannot: the engine then
  /// runs gemm() and launches the epilogue after it.
  virtual bool gemm_with_epilogue(const LaunchPlan::Gemm&, std::span<DeviceMemory* const> /*buffers*/,
                                  const GemmEpilogue& /*epilogue*/) {
    return false;
  }
};

}  // namespace kiln
