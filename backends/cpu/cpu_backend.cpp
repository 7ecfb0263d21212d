// backends/cpu/cpu_backend.cpp - the `cpu` device: host memory, JIT-compiled kernels run
// across cores with oneTBB, GEMM steps on generated micro-kernels (cpu_gemm.h), attention
// steps on the same micro-kernels with an online softmax (cpu_attention.h).
#include <algorithm>
#include <cstring>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

#include "cpu_attention.h"
#include "cpu_gemm.h"
#include "cpu_jit.h"
#include "parallel.h"
#include "kiln/backends/cpu.h"
#include "kiln/backends/host_memory.h"
#include "kiln/backends/scalar_abi.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/support/error.h"

namespace kiln {
namespace {

// A scalar argument as the generated code reads it: a bool is an i8.
constexpr ScalarAbi kScalarAbi{.bool_bytes = 1};

// A generated kernel's `args` (kernel_abi.h): the buffers, then a pointer per scalar
// argument to its value stored in the kernel's dtype (8 bytes each, held here).
class KernelArgs {
 public:
  KernelArgs(const CompiledKernel& k, std::span<DeviceMemory* const> buffers, std::span<const Scalar> scalars)
      : args_(buffers.size() + scalars.size()), values_(scalars.size()) {
    for (size_t i = 0; i < buffers.size(); ++i) args_[i] = buffers[i]->host_data();
    const auto& types = static_cast<const cpu::CpuKernel&>(k).scalar_types();
    for (size_t i = 0; i < scalars.size(); ++i) {
      write_scalar(scalars[i], types[i], kScalarAbi, reinterpret_cast<std::byte*>(&values_[i]));
      args_[buffers.size() + i] = &values_[i];
    }
  }
  void* const* data() const { return args_.data(); }

 private:
  std::vector<void*> args_;
  std::vector<uint64_t> values_;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend() {
    const cpu::HostTarget& t = cpu::Jit::instance().target();
    caps_.fp64 = caps_.int64 = true;
    caps_.custom_c = caps_.custom_opencl_c = true;
    caps_.family = DeviceFamily::Cpu;
    caps_.local_memory = false;
    caps_.subgroup_size = 1;
    caps_.max_work_group = 1;
    caps_.vector_bytes = t.vector_bytes;
    caps_.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    caps_.l2_bytes = std::max<long>(0, sysconf(_SC_LEVEL2_CACHE_SIZE));
    // A launch of 64 parts has 128 cut compares (kir::kMaxLaneCuts allows 160: 80 parts).
    caps_.horizontal_parts = 64;
  }

  std::string_view name() const override { return "cpu"; }
  Toolchain& toolchain() override { return cpu::Jit::instance(); }
  std::string fingerprint() const override { return cpu::Jit::instance().fingerprint(); }
  std::string device_fingerprint() const override {
    const cpu::HostTarget& t = cpu::Jit::instance().target();
    return fmt::format("cpu|{}|{}|{}|{} cores", t.triple, t.cpu, t.features, caps_.cores);
  }
  std::string device_name() const override {
    return fmt::format("{}, {} cores", cpu::Jit::instance().target().cpu, caps_.cores);
  }
  const Capabilities& capabilities() const override { return caps_; }
  double fma_peak_gflops() override { return cpu::fma_peak_gflops(caps_); }
  // Reductions to few values become block partials, so that they run on every core.
  std::vector<const PassInfo*> extra_passes() const override { return {find_pass("split-reductions")}; }

  std::shared_ptr<DeviceMemory> alloc(int64_t bytes) override {
    KILN_ASSERT(bytes >= 0, "buffer sizes are non-negative");
    return std::make_shared<HostMemory>(HostBuffer(static_cast<size_t>(bytes)));
  }
  std::shared_ptr<DeviceMemory> adopt(HostBuffer& bytes) override { return std::make_shared<HostMemory>(std::move(bytes)); }
  std::shared_ptr<DeviceMemory> borrow(std::shared_ptr<const HostTensor> host) override {
    return std::make_shared<BorrowedHostMemory>(std::move(host));
  }
  void upload(DeviceMemory& dst, const std::byte* src, int64_t bytes) override {
    if (bytes > 0) std::memcpy(dst.host_data(), src, static_cast<size_t>(bytes));
  }
  void download(const DeviceMemory& src, std::byte* dst, int64_t bytes) override {
    if (bytes > 0) std::memcpy(dst, const_cast<DeviceMemory&>(src).host_data(), static_cast<size_t>(bytes));
  }
  void copy(const DeviceMemory& src, DeviceMemory& dst, int64_t bytes) override {
    if (bytes > 0) std::memcpy(dst.host_data(), const_cast<DeviceMemory&>(src).host_data(), static_cast<size_t>(bytes));
  }

  void launch(const CompiledKernel& k, const kir::Schedule& s, std::span<DeviceMemory* const> buffers,
              std::span<const Scalar> scalars) override {
    const cpu::KernelFn fn = static_cast<const cpu::CpuKernel&>(k).fn();
    const KernelArgs args(k, buffers, scalars);
    const int64_t grain = s.task_grain();
    if (grain >= s.iterations) {
      cpu::call_kernel(fn, args.data(), 0, s.iterations);
      return;
    }
    cpu::parallel_range(
        s.iterations, grain, [&](int64_t begin, int64_t end) { cpu::call_kernel(fn, args.data(), begin, end); },
        s.cpu.threads);
  }

  bool gemm_with_epilogue(const LaunchPlan::Gemm& g, std::span<DeviceMemory* const> buffers,
                          const GemmEpilogue& epilogue) override {
    const cpu::KernelFn fn = static_cast<const cpu::CpuKernel&>(epilogue.kernel).fn();
    const KernelArgs args(epilogue.kernel, epilogue.buffers, epilogue.scalars);
    const int64_t per_row = epilogue.iterations_per_row, granule = epilogue.columns_per_iteration;
    return cpu::run_gemm_by_blocks(
        g, buffers[static_cast<size_t>(g.a)]->host_data(), buffers[static_cast<size_t>(g.b)]->host_data(),
        buffers[static_cast<size_t>(g.c)]->host_data(),
        [&](int64_t row_begin, int64_t row_end, int64_t column_begin, int64_t column_end) {
          if (row_begin >= row_end || column_begin >= column_end) return;
          if (column_begin == 0 && column_end == g.n) {  // whole rows: one run of iterations
            cpu::call_kernel(fn, args.data(), row_begin * per_row, row_end * per_row);
            return;
          }
          const int64_t first = column_begin / granule, last = (column_end + granule - 1) / granule;
          for (int64_t r = row_begin; r < row_end; ++r)
            cpu::call_kernel(fn, args.data(), r * per_row + first, r * per_row + last);
        },
        granule < g.n ? granule : 0, immutable_operands(g, buffers));
  }

  void prepare_gemm(const LaunchPlan::Gemm& g) override { cpu::prepare_gemm(g); }

  bool gemm(const LaunchPlan::Gemm& g, std::span<DeviceMemory* const> buffers) override {
    cpu::run_gemm(g, buffers[static_cast<size_t>(g.a)]->host_data(), buffers[static_cast<size_t>(g.b)]->host_data(),
                  buffers[static_cast<size_t>(g.c)]->host_data(), immutable_operands(g, buffers));
    return true;
  }

  bool attention(const LaunchPlan::Attention& a, std::span<DeviceMemory* const> buffers) override {
    auto data = [&](int32_t b) {
      return b < 0 ? nullptr : reinterpret_cast<float*>(buffers[static_cast<size_t>(b)]->host_data());
    };
    cpu::run_attention(a, data(a.q.buffer), data(a.k.buffer), data(a.v.buffer), data(a.bias.buffer), data(a.out));
    return true;
  }

 private:
  static cpu::ImmutableOperands immutable_operands(const LaunchPlan::Gemm& g, std::span<DeviceMemory* const> buffers) {
    const DeviceMemory& a = *buffers[static_cast<size_t>(g.a)];
    const DeviceMemory& b = *buffers[static_cast<size_t>(g.b)];
    return {a.immutable() ? a.id() : 0, b.immutable() ? b.id() : 0};
  }

  Capabilities caps_;
};


CpuBackend& backend() {
  static CpuBackend* b = new CpuBackend();  // never destroyed: kernels may run during exit
  return *b;
}

}  // namespace

Backend& cpu_backend() { return backend(); }
std::string cpu_kernel_llvm_ir(const kir::Kernel& k, const kir::Schedule& s, bool optimized) {
  return cpu::Jit::instance().llvm_ir(k, s, optimized);
}
std::string cpu_kernel_assembly(const kir::Kernel& k, const kir::Schedule& s) {
  return cpu::Jit::instance().assembly(k, s);
}
std::string cpu_gemm_llvm_ir(const kir::GemmSchedule& s, DType t, bool optimized) {
  return cpu::Jit::instance().gemm_llvm_ir(s, t, optimized);
}
std::string cpu_gemm_assembly(const kir::GemmSchedule& s, DType t) { return cpu::Jit::instance().gemm_assembly(s, t); }
std::string cpu_target_description() { return cpu::Jit::instance().target().describe(); }
CustomHostFn cpu_custom_host_function(const CustomKernel& k) {
  std::shared_ptr<const cpu::CpuKernel> fn = cpu::Jit::instance().custom_host_function(k);
  return [fn](const std::vector<const void*>& args, void* result, int64_t count) {
    std::vector<void*> all;
    for (const void* a : args) all.push_back(const_cast<void*>(a));
    all.push_back(result);
    cpu::call_kernel(fn->fn(), all.data(), 0, count);
  };
}

size_t cpu_cached_kernels() { return cpu::Jit::instance().cached_kernels(); }

}  // namespace kiln
