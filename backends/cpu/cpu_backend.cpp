// backends/cpu/cpu_backend.cpp - the `cpu` device: host memory, JIT-compiled kernels run
// across cores with oneTBB, Eigen for GEMM steps.
#include <algorithm>
#include <cstring>
#include <thread>

#include <Eigen/Core>
#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include "cpu_jit.h"
#include "kiln/backend/cpu.h"
#include "kiln/backend/host_memory.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/support/error.h"

// oneTBB synchronizes its workers inside libtbb.so, which ThreadSanitizer builds do not
// instrument: the happens-before edges of a parallel_for (the spawn publishes what the body
// reads; the join publishes what the workers wrote) are stated to TSan here, so that it
// checks kiln's code and not TBB's plumbing (scripts/tsan.sh, scripts/tsan.supp).
#if defined(__SANITIZE_THREAD__)
#define KILN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KILN_TSAN 1
#endif
#endif
#ifdef KILN_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace kiln {
namespace {

/// Runs `body(begin, end)` over [0, n) in tasks of at least `grain` iterations on oneTBB.
template <class Body>
void parallel_range(int64_t n, int64_t grain, const Body& body) {
#ifdef KILN_TSAN
  int spawned = 0, joined = 0;
  __tsan_release(&spawned);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, static_cast<size_t>(grain)), [&](const tbb::blocked_range<int64_t>& r) {
    __tsan_acquire(&spawned);
    body(r.begin(), r.end());
    __tsan_release(&joined);
  });
  __tsan_acquire(&joined);
#else
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, static_cast<size_t>(grain)),
                    [&](const tbb::blocked_range<int64_t>& r) { body(r.begin(), r.end()); });
#endif
}

// Element offsets of batch `batch`'s A and B matrices (broadcast batch dims have stride 0).
std::pair<int64_t, int64_t> batch_offsets(const LaunchPlan::Gemm& g, int64_t batch) {
  int64_t aoff = 0, boff = 0, rem = batch;
  for (int j = g.batch.rank() - 1; j >= 0; --j) {
    const int64_t idx = rem % g.batch[j];
    rem /= g.batch[j];
    aoff += idx * g.a_batch_stride[static_cast<size_t>(j)];
    boff += idx * g.b_batch_stride[static_cast<size_t>(j)];
  }
  return {aoff, boff};
}

template <class T>
void gemm_rows(const LaunchPlan::Gemm& g, const std::byte* a, const std::byte* b, std::byte* c, int64_t batch,
               int64_t row0, int64_t row1) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const auto [aoff, boff] = batch_offsets(g, batch);
  const T* am = reinterpret_cast<const T*>(a) + aoff;
  const T* bm = reinterpret_cast<const T*>(b) + boff;
  T* cm = reinterpret_cast<T*>(c) + batch * g.m * g.n;
  Eigen::Map<const Mat> A(am + row0 * g.k, row1 - row0, g.k);
  Eigen::Map<const Mat> B(bm, g.k, g.n);
  Eigen::Map<Mat> C(cm + row0 * g.n, row1 - row0, g.n);
  C.noalias() = A * B;
}

// Integers wrap (the interpreter's semantics): multiply and add as unsigned 64-bit, then
// truncate. Eigen's signed arithmetic would overflow, which C++ leaves undefined.
template <class T>
void gemm_rows_int(const LaunchPlan::Gemm& g, const std::byte* a, const std::byte* b, std::byte* c, int64_t batch,
                   int64_t row0, int64_t row1) {
  const auto [aoff, boff] = batch_offsets(g, batch);
  const T* am = reinterpret_cast<const T*>(a) + aoff;
  const T* bm = reinterpret_cast<const T*>(b) + boff;
  T* cm = reinterpret_cast<T*>(c) + batch * g.m * g.n;
  for (int64_t i = row0; i < row1; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      uint64_t acc = 0;
      for (int64_t p = 0; p < g.k; ++p)
        acc += static_cast<uint64_t>(static_cast<int64_t>(am[i * g.k + p])) *
               static_cast<uint64_t>(static_cast<int64_t>(bm[p * g.n + j]));
      cm[i * g.n + j] = static_cast<T>(acc);
    }
}

// Generated code has no UBSan function-type prologue, which -fsanitize=function (part of
// clang's -fsanitize=undefined) reads in front of every function called through a pointer.
#if defined(__clang__)
__attribute__((no_sanitize("function")))
#endif
void call_kernel(cpu::KernelFn fn, void* const* args, int64_t begin, int64_t end) {
  fn(args, begin, end);
}

// A scalar argument as the kernel reads it: one element of its dtype (bool: one byte).
void store_scalar(const Scalar& v, DType t, std::byte* out) {
  auto put = [&](auto x) { std::memcpy(out, &x, sizeof x); };
  switch (t) {
    case DType::F32: return put(static_cast<float>(v.as_double()));
    case DType::F64: return put(v.as_double());
    case DType::I32: return put(static_cast<int32_t>(v.as_int()));
    case DType::I64: return put(v.as_int());
    case DType::Bool: return put(static_cast<uint8_t>(v.as_int() != 0));
  }
}

class CpuBackend final : public Backend {
 public:
  CpuBackend() {
    const cpu::HostTarget& t = cpu::Jit::instance().target();
    caps_.fp64 = caps_.int64 = true;
    caps_.local_memory = false;
    caps_.subgroup_size = 1;
    caps_.max_work_group = 1;
    caps_.vector_bytes = t.vector_bytes;
    caps_.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }

  std::string_view name() const override { return "cpu"; }
  std::string fingerprint() const override { return cpu::Jit::instance().fingerprint(); }
  const Capabilities& capabilities() const override { return caps_; }
  // Reductions to few values become block partials, so that they run on every core.
  std::vector<const PassInfo*> extra_passes() const override { return {find_pass("split-reductions")}; }

  std::shared_ptr<const CompiledKernel> compile(const kir::Kernel& k, const kir::Schedule& s) override {
    return cpu::Jit::instance().kernel(k, s);
  }

  std::string kernel_source(const kir::Kernel& k, const kir::Schedule& s, std::string_view stage) override {
    return stage == "llvm" ? cpu::Jit::instance().llvm_ir(k, s, /*optimized=*/true) : std::string();
  }

  std::shared_ptr<DeviceMemory> alloc(int64_t bytes) override {
    KILN_ASSERT(bytes >= 0, "buffer sizes are non-negative");
    return std::make_shared<HostMemory>(HostBuffer(static_cast<size_t>(bytes)));
  }
  std::shared_ptr<DeviceMemory> adopt(HostBuffer& bytes) override { return std::make_shared<HostMemory>(std::move(bytes)); }
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
    // Buffers, then a pointer per scalar argument into `values` (8 bytes each).
    std::vector<void*> args(buffers.size() + scalars.size());
    std::vector<uint64_t> values(scalars.size());
    for (size_t i = 0; i < buffers.size(); ++i) args[i] = buffers[i]->host_data();
    for (size_t i = 0; i < scalars.size(); ++i) args[buffers.size() + i] = &values[i];
    if (!scalars.empty()) fill_scalars(k, scalars, values);
    if (s.grain >= s.iterations) {
      call_kernel(fn, args.data(), 0, s.iterations);
      return;
    }
    parallel_range(s.iterations, s.grain, [&](int64_t begin, int64_t end) { call_kernel(fn, args.data(), begin, end); });
  }

  bool gemm(const LaunchPlan::Gemm& g, std::span<DeviceMemory* const> buffers) override {
    const int64_t batches = g.batch.numel();
    const int64_t block = std::max<int64_t>(16, 65536 / std::max<int64_t>(1, g.n * g.k / 64));
    const int64_t blocks = (g.m + block - 1) / block;
    const std::byte* a = buffers[static_cast<size_t>(g.a)]->host_data();
    const std::byte* b = buffers[static_cast<size_t>(g.b)]->host_data();
    std::byte* c = buffers[static_cast<size_t>(g.c)]->host_data();
    auto one = [&](int64_t i) {
      const int64_t bi = i / blocks, r0 = (i % blocks) * block, r1 = std::min(g.m, r0 + block);
      switch (g.dtype) {
        case DType::F32: return gemm_rows<float>(g, a, b, c, bi, r0, r1);
        case DType::F64: return gemm_rows<double>(g, a, b, c, bi, r0, r1);
        case DType::I32: return gemm_rows_int<int32_t>(g, a, b, c, bi, r0, r1);
        case DType::I64: return gemm_rows_int<int64_t>(g, a, b, c, bi, r0, r1);
        case DType::Bool: throw Error("matmul of bool tensors is not supported on the cpu device");
      }
    };
    const int64_t n = batches * blocks;
    if (g.m * g.n * g.k < (1 << 18)) {
      for (int64_t i = 0; i < n; ++i) one(i);
      return true;
    }
    parallel_range(n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) one(i);
    });
    return true;
  }

 private:
  static void fill_scalars(const CompiledKernel& k, std::span<const Scalar> scalars, std::vector<uint64_t>& values) {
    const auto& types = static_cast<const cpu::CpuKernel&>(k).scalar_types();
    for (size_t i = 0; i < scalars.size(); ++i)
      store_scalar(scalars[i], types[i], reinterpret_cast<std::byte*>(&values[i]));
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
std::string cpu_target_description() { return cpu::Jit::instance().target().describe(); }
size_t cpu_cached_kernels() { return cpu::Jit::instance().cached_kernels(); }

}  // namespace kiln
