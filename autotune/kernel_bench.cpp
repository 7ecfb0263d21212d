// autotune/kernel_bench.cpp - see kiln/autotune/kernel_bench.h.
#include "kiln/autotune/kernel_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "kiln/ir/host_tensor.h"
#include "kiln/support/error.h"

namespace kiln::autotune {
namespace {

// Copies of the buffers cycled through while timing: together at least this many bytes,
// past the last-level caches of the machines kiln runs on...
constexpr int64_t kRotationBytes = int64_t{96} << 20;
// ...but never more copies than this, nor more than this many bytes in all.
constexpr int kMostCopies = 8;
constexpr int64_t kMostBytes = int64_t{1} << 30;

// splitmix64: a few cycles per value, where std::mt19937_64 and its distributions take ten
// times that, which shows on the 64 MiB inputs of a memory-bound kernel.
struct FastRng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
};

template <typename T>
void fill(std::string& bytes, FastRng& rng) {
  const size_t n = bytes.size() / sizeof(T);
  std::vector<T> v(n);
  for (T& x : v) {
    const uint64_t r = rng.next();
    if constexpr (std::is_floating_point_v<T>) {
      x = static_cast<T>(static_cast<double>(r >> 11) * 0x1.0p-52 - 1.0);  // [-1, 1)
    } else if constexpr (std::is_same_v<T, uint8_t>) {  // bool: one byte, 0 or 1
      x = static_cast<uint8_t>(r & 1);
    } else {
      x = static_cast<T>(static_cast<int64_t>(r >> 60) - 8);  // [-8, 8)
    }
  }
  if (n > 0) std::memcpy(bytes.data(), v.data(), n * sizeof(T));
}

// Storage types (dtype.h): the same values as their compute type's fill would give.
void fill_storage(std::string& bytes, const TensorType& type, FastRng& rng) {
  HostTensor t(type);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const uint64_t r = rng.next();
    if (is_float(type.dtype)) t.set_double(i, static_cast<double>(r >> 11) * 0x1.0p-52 - 1.0);
    else t.set_int(i, is_unsigned(type.dtype) ? static_cast<int64_t>(r >> 60) : static_cast<int64_t>(r >> 60) - 8);
  }
  if (t.nbytes()) std::memcpy(bytes.data(), t.data(), t.nbytes());
}

std::string as_f32(const std::string& bytes, const TensorType& type) {
  HostTensor t = HostTensor::uninitialized(type);
  if (t.nbytes()) std::memcpy(t.data(), bytes.data(), t.nbytes());
  std::string out(static_cast<size_t>(t.numel()) * sizeof(float), '\0');
  for (int64_t i = 0; i < t.numel(); ++i) {
    const auto v = static_cast<float>(t.get_double(i));
    std::memcpy(out.data() + static_cast<size_t>(i) * sizeof(float), &v, sizeof v);
  }
  return out;
}

template <class T>
std::optional<std::string> compare_floats(const std::string& want, const std::string& got, size_t buffer, double rel,
                                          double abs) {
  const size_t n = want.size() / sizeof(T);
  std::vector<T> a(n), b(n);
  std::memcpy(a.data(), want.data(), n * sizeof(T));
  std::memcpy(b.data(), got.data(), n * sizeof(T));
  double largest = 0;
  for (T x : a)
    if (std::isfinite(x)) largest = std::max(largest, std::abs(static_cast<double>(x)));
  const double floor = abs * largest;
  for (size_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) return fmt::format("buffer #{} element {}: {} vs {}", buffer, i, y, x);
      continue;
    }
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) return fmt::format("buffer #{} element {}: {} vs {}", buffer, i, y, x);
      continue;
    }
    if (std::abs(x - y) > std::max(floor, rel * std::max(std::abs(x), std::abs(y))))
      return fmt::format("buffer #{} element {}: {} vs {}", buffer, i, y, x);
  }
  return std::nullopt;
}

// The bytes of a tensor of `type` with made-up values (the header's distributions).
std::string made_up(const TensorType& type, FastRng& rng) {
  std::string bytes(static_cast<size_t>(type.bytes()), '\0');
  switch (type.dtype) {
    case DType::Bool: fill<uint8_t>(bytes, rng); break;
    case DType::I32: fill<int32_t>(bytes, rng); break;
    case DType::I64: fill<int64_t>(bytes, rng); break;
    case DType::F32: fill<float>(bytes, rng); break;
    case DType::F64: fill<double>(bytes, rng); break;
    default: fill_storage(bytes, type, rng); break;
  }
  return bytes;
}

// Copies of a working set of `bytes` that rotating through keeps out of cache.
int copies_for(int64_t bytes) {
  const int64_t set = std::max<int64_t>(1, bytes);
  return static_cast<int>(std::clamp<int64_t>((kRotationBytes + set - 1) / set, 1,
                                              std::min<int64_t>(kMostCopies, std::max<int64_t>(1, kMostBytes / set))));
}

std::shared_ptr<DeviceMemory> upload(Backend& backend, const std::string& bytes) {
  auto m = backend.alloc(std::max<int64_t>(1, static_cast<int64_t>(bytes.size())));
  if (!bytes.empty())
    backend.upload(*m, reinterpret_cast<const std::byte*>(bytes.data()), static_cast<int64_t>(bytes.size()));
  return m;
}

// Copies of buffers with the bytes `initial` on `backend`, as many as rotating through keeps
// out of cache ([copy][buffer]).
std::vector<std::vector<std::shared_ptr<DeviceMemory>>> upload_copies(Backend& backend,
                                                                      const std::vector<std::string>& initial) {
  int64_t working_set = 0;  // bytes of one copy
  for (const std::string& bytes : initial) working_set += static_cast<int64_t>(bytes.size());
  std::vector<std::vector<std::shared_ptr<DeviceMemory>>> copies;
  for (int c = copies_for(working_set); c > 0; --c) {
    std::vector<std::shared_ptr<DeviceMemory>> bufs;
    for (const std::string& bytes : initial) bufs.push_back(upload(backend, bytes));
    copies.push_back(std::move(bufs));
  }
  backend.finish();
  return copies;
}

// The median of `repeats` (at least 3) timed calls of `launch(copy)` after `warm_up_ms` of
// warm-up calls (at least one: code, page tables, the task scheduler, a GPU's clocks), fewer
// when they pass `budget_ms`.
template <class Launch>
double median_of(Launch launch, size_t copies, int repeats, double budget_ms, double warm_up_ms) {
  using clock = std::chrono::steady_clock;
  const auto warm_until = clock::now() + std::chrono::duration<double, std::milli>(warm_up_ms);
  do launch(copies - 1);
  while (clock::now() < warm_until);
  std::vector<double> times;
  const auto start = clock::now();
  for (int r = 0; r < std::max(3, repeats); ++r) {
    const auto t0 = clock::now();
    launch(static_cast<size_t>(r) % copies);
    times.push_back(std::chrono::duration<double, std::nano>(clock::now() - t0).count());
    if (r >= 2 && std::chrono::duration<double, std::milli>(clock::now() - start).count() > budget_ms) break;
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::optional<std::string> compare_buffer(const TensorType& type, const std::string& want, const std::string& got,
                                          size_t buffer) {
  switch (type.dtype) {
    case DType::F32: return compare_floats<float>(want, got, buffer, 1e-3, 1e-4);
    case DType::F64: return compare_floats<double>(want, got, buffer, 1e-9, 1e-12);
    case DType::F16:
    case DType::BF16:  // a rounding of f32 results: one unit in the last place apart is the same
      return compare_floats<float>(as_f32(want, type), as_f32(got, type), buffer, 1e-2, 1e-3);
    default:
      if (want != got) {
        size_t i = 0;
        while (want[i] == got[i]) ++i;
        return fmt::format("buffer #{} differs at byte {}", buffer, i);
      }
      return std::nullopt;
  }
}

}  // namespace

KernelBench::KernelBench(Backend& backend, const kir::Kernel& k, uint64_t seed) : backend_(backend), kernel_(k) {
  FastRng rng{seed};
  for (const kir::BufferParam& p : k.buffers) initial_.push_back(made_up(p.type, rng));
  // Scalar arguments: a value every op accepts (no division by it, no log of it fails).
  for (DType t : k.scalars) scalars_.push_back(is_float(t) ? Scalar::from_float(0.5) : Scalar::from_int(1));
  copies_ = upload_copies(backend_, initial_);
}

void KernelBench::launch(const CompiledKernel& compiled, const kir::Schedule& s, size_t copy) {
  std::vector<DeviceMemory*> bound;
  for (const auto& m : copies_[copy]) bound.push_back(m.get());
  backend_.launch(compiled, s, bound, scalars_);
}

std::vector<std::string> KernelBench::outputs(const CompiledKernel& compiled, const kir::Schedule& s) {
  // Only written buffers change (timing launches may have written over them since).
  for (size_t b = 0; b < initial_.size(); ++b)
    if (kernel_.buffers[b].written && !initial_[b].empty())
      backend_.upload(*copies_[0][b], reinterpret_cast<const std::byte*>(initial_[b].data()),
                      static_cast<int64_t>(initial_[b].size()));
  launch(compiled, s, 0);
  backend_.finish();
  std::vector<std::string> out;
  for (size_t b = 0; b < kernel_.buffers.size(); ++b) {
    if (!kernel_.buffers[b].written) continue;
    std::string bytes(initial_[b].size(), '\0');
    if (!bytes.empty())
      backend_.download(*copies_[0][b], reinterpret_cast<std::byte*>(bytes.data()), static_cast<int64_t>(bytes.size()));
    out.push_back(std::move(bytes));
  }
  return out;
}

double KernelBench::launch_ns(const CompiledKernel& compiled, const kir::Schedule& s) {
  const auto t0 = std::chrono::steady_clock::now();
  launch(compiled, s, 0);
  backend_.finish();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

double KernelBench::median_ns(const CompiledKernel& compiled, const kir::Schedule& s, int repeats, double budget_ms,
                              double warm_up_ms) {
  return median_of(
      [&](size_t copy) {
        launch(compiled, s, copy);
        backend_.finish();
      },
      copies_.size(), repeats, budget_ms, warm_up_ms);
}

GemmBench::GemmBench(Backend& backend, const LaunchPlan::Gemm& g, uint64_t seed) : backend_(backend), gemm_(g) {
  gemm_.a = 0;
  gemm_.b = 1;
  gemm_.c = 2;
  // Operands laid out as the step reads them (a transposed view stays transposed).
  FastRng rng{seed};
  const std::string a = made_up(TensorType{g.dtype, Shape{g.a_extent()}}, rng);
  const std::string b = made_up(TensorType{g.dtype, Shape{g.b_extent()}}, rng);
  c_bytes_ = g.batch.numel() * g.m * g.n * static_cast<int64_t>(dtype_size(g.dtype));
  const std::string c(static_cast<size_t>(c_bytes_), '\0');
  for (int n = copies_for(static_cast<int64_t>(a.size() + b.size()) + c_bytes_); n > 0; --n)
    copies_.push_back({upload(backend_, a), upload(backend_, b), upload(backend_, c)});
  backend_.finish();
}

void GemmBench::launch(const kir::GemmSchedule& s, size_t copy) {
  gemm_.schedule = s;
  std::vector<DeviceMemory*> bound;
  for (const auto& m : copies_[copy]) bound.push_back(m.get());
  if (!backend_.gemm(gemm_, bound)) throw Error(fmt::format("{} runs no GEMM step", backend_.name()));
  backend_.finish();
}

std::string GemmBench::product(const kir::GemmSchedule& s) {
  launch(s, 0);
  std::string out(static_cast<size_t>(c_bytes_), '\0');
  if (!out.empty()) backend_.download(*copies_[0][2], reinterpret_cast<std::byte*>(out.data()), c_bytes_);
  return out;
}

double GemmBench::launch_ns(const kir::GemmSchedule& s) {
  const auto t0 = std::chrono::steady_clock::now();
  launch(s, 0);
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

double GemmBench::median_ns(const kir::GemmSchedule& s, int repeats, double budget_ms, double warm_up_ms) {
  return median_of([&](size_t copy) { launch(s, copy); }, copies_.size(), repeats, budget_ms, warm_up_ms);
}

PlanBench::PlanBench(Backend& backend, std::vector<TensorType> params, uint64_t seed)
    : backend_(backend), params_(std::move(params)) {
  FastRng rng{seed};
  std::vector<std::string> initial;
  for (const TensorType& t : params_) initial.push_back(made_up(t, rng));
  copies_ = upload_copies(backend_, initial);
}

void PlanBench::run(const LaunchPlan& plan, Kernels kernels, size_t copy,
                    std::vector<std::shared_ptr<DeviceMemory>>* outputs) {
  if (!plan.overwritten_params.empty()) throw Error("PlanBench: the plan overwrites a parameter");
  std::vector<std::shared_ptr<DeviceMemory>> owned(plan.buffers.size());
  std::vector<DeviceMemory*> mem(plan.buffers.size(), nullptr);
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const LaunchPlan::Buffer& buf = plan.buffers[b];
    if (buf.kind == LaunchPlan::Buffer::Kind::Param) {
      if (buf.index < 0 || static_cast<size_t>(buf.index) >= params_.size() || !(params_[static_cast<size_t>(buf.index)] == buf.type))
        throw Error(fmt::format("PlanBench: the plan's parameter {} is not of the bench's types", buf.index));
      mem[b] = copies_[copy][static_cast<size_t>(buf.index)].get();
      continue;
    }
    const bool constant = buf.kind == LaunchPlan::Buffer::Kind::Constant;
    const int64_t bytes = constant ? static_cast<int64_t>(buf.data.size())
                          : buf.kind == LaunchPlan::Buffer::Kind::Output ? buf.type.bytes() : buf.bytes;
    owned[b] = backend_.alloc(std::max<int64_t>(1, bytes));
    if (constant && bytes > 0) backend_.upload(*owned[b], buf.data.data(), bytes);
    mem[b] = owned[b].get();
  }
  std::vector<DeviceMemory*> bound;
  for (const LaunchPlan::Step& step : plan.steps) {
    if (step.attention) {
      if (!backend_.attention(*step.attention, mem))
        throw Error(fmt::format("{} runs no attention step", backend_.name()));
      continue;
    }
    if (step.kernel < 0) {
      if (!backend_.gemm(step.gemm, mem)) throw Error(fmt::format("{} runs no GEMM step", backend_.name()));
      continue;
    }
    if (!step.scalar_bindings.empty()) throw Error("PlanBench: the plan binds launch scalars");
    const auto k = static_cast<size_t>(step.kernel);
    bound.assign(step.bindings.size(), nullptr);
    for (size_t i = 0; i < bound.size(); ++i) bound[i] = mem[static_cast<size_t>(step.bindings[i])];
    backend_.launch(*kernels[k], plan.schedules[k], bound, step.fixed_scalars);
  }
  backend_.finish();
  if (outputs) {
    outputs->clear();
    for (int32_t b : plan.outputs)
      outputs->push_back(owned[static_cast<size_t>(b)] ? owned[static_cast<size_t>(b)]
                                                       : copies_[copy][static_cast<size_t>(plan.buffers[static_cast<size_t>(b)].index)]);
  }
}

std::vector<std::string> PlanBench::outputs(const LaunchPlan& plan, Kernels kernels) {
  std::vector<std::shared_ptr<DeviceMemory>> results;
  run(plan, kernels, 0, &results);
  std::vector<std::string> out;
  for (size_t i = 0; i < results.size(); ++i) {
    std::string bytes(static_cast<size_t>(plan.output_types[i].bytes()), '\0');
    if (!bytes.empty())
      backend_.download(*results[i], reinterpret_cast<std::byte*>(bytes.data()), static_cast<int64_t>(bytes.size()));
    out.push_back(std::move(bytes));
  }
  return out;
}

double PlanBench::launch_ns(const LaunchPlan& plan, Kernels kernels) {
  const auto t0 = std::chrono::steady_clock::now();
  run(plan, kernels, 0);
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

double PlanBench::median_ns(const LaunchPlan& plan, Kernels kernels, int repeats, double budget_ms,
                            double warm_up_ms) {
  return median_of([&](size_t copy) { run(plan, kernels, copy); }, copies_.size(), repeats, budget_ms, warm_up_ms);
}

std::optional<std::string> compare_outputs(const kir::Kernel& k, const std::vector<std::string>& want,
                                           const std::vector<std::string>& got) {
  size_t out = 0;
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    if (!k.buffers[b].written) continue;
    KILN_ASSERT(out < want.size() && out < got.size() && want[out].size() == got[out].size(),
                "compare_outputs takes two results of the same kernel");
    if (std::optional<std::string> diff = compare_buffer(k.buffers[b].type, want[out], got[out], b)) return diff;
    ++out;
  }
  return std::nullopt;
}

std::optional<std::string> compare_tensors(std::span<const TensorType> types, const std::vector<std::string>& want,
                                           const std::vector<std::string>& got) {
  KILN_ASSERT(want.size() == types.size() && got.size() == types.size(), "compare_tensors takes a result per type");
  for (size_t i = 0; i < types.size(); ++i) {
    KILN_ASSERT(want[i].size() == got[i].size(), "compare_tensors takes results of the same types");
    if (std::optional<std::string> diff = compare_buffer(types[i], want[i], got[i], i)) return diff;
  }
  return std::nullopt;
}

std::optional<std::string> compare_products(DType dtype, const std::string& want, const std::string& got) {
  KILN_ASSERT(want.size() == got.size(), "compare_products takes two products of the same GEMM step");
  const int64_t n = static_cast<int64_t>(want.size() / dtype_size(dtype));
  return compare_buffer(TensorType{dtype, Shape{n}}, want, got, 0);
}

}  // namespace kiln::autotune
