// benchmarks/workload_bench.cpp - the peer workload suite (W1-W5b, W8) timed in one process
// for kiln, the hand-written fused loops and Eigen, so that kiln's rows line up with the peers.
//
// Workloads, inputs, timing method, checksums and "minimal bytes" are those of
// ../shared/peers/README.md: `hand` is P6 (bench_hand.cpp: one fused OpenMP pass per workload),
// `eigen-array` and `eigen-tensor-tpN` are P5 (bench_eigen.cpp). Every implementation's checksum
// is compared with the hand loop's (1e-3 relative, as the peers' report.py does).
//
//   kiln_workload_bench [--only W1,W3] [--impl kiln,hand,eigen] [--quick] [--small]
//                       [--size-scale K] [--threads N] [--device D] [--json FILE]
//
// Prints a markdown table to stdout and progress to stderr; exits 1 when a checksum
// disagrees or an implementation throws.
#define EIGEN_USE_THREADS
// Warnings inside these headers are not ours: GCC 12's -Wmaybe-uninitialized in its own AVX-512
// intrinsics (_mm512_undefined_ps, GCC bug 105593) as Eigen's Tensor inlines them, and Eigen 3.4's
// unused variables and C++20 deprecations when it is not included as a system header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wdeprecated"
#include <immintrin.h>

#include <Eigen/Dense>
#include <unsupported/Eigen/CXX11/Tensor>
#pragma GCC diagnostic pop

#include <fmt/format.h>
#include <kiln/kiln.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "peer_inputs.h"

namespace {

// ---- sizes ---------------------------------------------------------------------------------

constexpr long kCols = 4096;  // row length of W2-W5b; never scaled, so rows stay L1-sized
constexpr long kN8 = 64;      // W8: elements ...
constexpr int kIt8 = 100;     // ... and iterations of y = y * 1.0001 + 0.5 (2 ops each)

/// The peers' sizes divided by `scale` (--size-scale, --small): W1/W5a take the first n1
/// elements, W2-W5b the first `rows` rows. W8 is never scaled.
struct Sizes {
  long scale = 1;
  long n1 = 16777216;
  long rows = 4096;
  long n2() const { return rows * kCols; }
};

// ---- buffers and inputs (as ../shared/peers/cpp/common.hpp) ----------------------------------

/// A float buffer; ones >= 4 MiB are 2 MiB-aligned and madvise(MADV_HUGEPAGE)d, as numpy and
/// the peers' `Buf` do (PEERS_THP=0 turns that off), so every row here sees the same page size.
class Buf {
 public:
  explicit Buf(long n) : n_(n) {
    const char* thp = std::getenv("PEERS_THP");
    size_t bytes = (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64;
    const bool huge = bytes >= (4u << 20) && !(thp && thp[0] == '0');
    const size_t align = huge ? (2u << 20) : 64;
    bytes = std::max<size_t>((bytes + align - 1) / align * align, 64);
    p_ = static_cast<float*>(std::aligned_alloc(align, bytes));
    if (!p_) {
      std::fprintf(stderr, "workload_bench: out of memory (%zu bytes)\n", bytes);
      std::exit(2);
    }
    if (huge) madvise(p_, bytes, MADV_HUGEPAGE);
    std::memset(p_, 0, bytes);  // touch every page now, not inside a timed call
  }
  ~Buf() { std::free(p_); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  float* data() const { return p_; }
  long size() const { return n_; }

 private:
  float* p_ = nullptr;
  long n_ = 0;
};

/// The peers' input `seed` (peer_inputs.h), generated in parallel.
void gen(float* out, long n, uint64_t seed, double lo, double hi) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) out[i] = peer_input(seed, i, lo, hi);
}

/// Keeps the compiler from dropping stores nobody reads.
inline void escape(const void* p) {
  asm volatile("" : : "g"(p) : "memory");
}

/// Sets OpenMP's thread count for a scope (the hand loops and the checksums use it).
class OmpThreads {
 public:
  explicit OmpThreads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~OmpThreads() { omp_set_num_threads(saved_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_;
};

// ---- timing (the peers' method) ------------------------------------------------------------

/// Warm-up calls, then an inner loop calibrated so one sample takes >= target_s, then
/// >= min_reps samples, more until min_total_s, at most max_reps (the peers' bench()).
struct TimingConfig {
  int warmup = 3;
  int min_reps = 7;
  int max_reps = 41;
  double min_total_s = 1.0;
  double target_s = 0.002;
  bool calibrate = true;

  static TimingConfig full() { return {}; }
  /// For smoke tests: one warm-up, three samples.
  static TimingConfig quick() { return {1, 3, 3, 0.0, 0.002, true}; }
  /// A single call, for the reference checksum.
  static TimingConfig once() { return {0, 1, 1, 0.0, 0.0, false}; }
};

struct Stat {
  double med_s = 0, min_s = 0, max_s = 0;
  double first_s = 0;  // the first warm-up call alone: for kiln it includes compiling
  int reps = 0;
  long inner = 1;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// The shared timing helper: seconds per call of `call`.
template <class F>
Stat time_calls(const TimingConfig& cfg, F&& call) {
  Stat st;
  double last_warmup_s = 0;
  for (int i = 0; i < cfg.warmup; ++i) {
    const double t0 = now_s();
    call();
    last_warmup_s = now_s() - t0;
    if (i == 0) st.first_s = last_warmup_s;
  }
  long inner = 1;
  // A warm-up that already took >= target_s is the calibration's first step (inner = 1): this
  // saves a call of the slow implementations and changes nothing else.
  while (cfg.calibrate && !(cfg.warmup > 0 && last_warmup_s >= cfg.target_s)) {
    const double t0 = now_s();
    for (long i = 0; i < inner; ++i) call();
    const double dt = now_s() - t0;
    if (dt >= cfg.target_s || inner >= (1L << 24)) break;
    inner *= dt <= 0 ? 16
                     : std::min<long>(
                           16, std::max<long>(2, static_cast<long>(cfg.target_s / dt * 1.2) + 1));
  }
  std::vector<double> samples;
  double total = 0;
  while (static_cast<int>(samples.size()) < cfg.min_reps ||
         (total < cfg.min_total_s && static_cast<int>(samples.size()) < cfg.max_reps)) {
    const double t0 = now_s();
    for (long i = 0; i < inner; ++i) call();
    const double dt = now_s() - t0;
    total += dt;
    samples.push_back(dt / static_cast<double>(inner));
  }
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  st.med_s = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  st.min_s = samples.front();
  st.max_s = samples.back();
  st.reps = static_cast<int>(n);
  st.inner = inner;
  if (cfg.warmup == 0) st.first_s = samples.front();
  return st;
}

/// float64 sum and sum of squares of an output, as every peer reports them.
struct Checksum {
  double sum = 0, sumsq = 0;
};

Checksum checksum(const float* p, long n) {
  double s = 0, q = 0;
#pragma omp parallel for reduction(+ : s, q) schedule(static)
  for (long i = 0; i < n; ++i) {
    s += p[i];
    q += static_cast<double>(p[i]) * p[i];
  }
  return {s, q};
}

Checksum checksum_of_scalar(float v) {
  return {v, static_cast<double>(v) * v};
}

/// The peers' report.py measure: the larger relative error of sum and sum of squares.
double relative_error(const Checksum& got, const Checksum& ref) {
  const double e1 = std::fabs(got.sum - ref.sum) / std::max(std::fabs(ref.sum), 1.0);
  const double e2 = std::fabs(got.sumsq - ref.sumsq) / std::max(std::fabs(ref.sumsq), 1e-30);
  return std::max(e1, e2);
}
constexpr double kTolerance = 1e-3;

struct Measurement {
  Stat stat;
  Checksum chk;
  std::string note;
};

// ---- the inputs every implementation reads ---------------------------------------------------

/// kiln tensors holding the same inputs, created from host vectors and evaluated once.
struct KilnInputs {
  kiln::Tensor x1, x2, r2, b, gamma, beta, x8;
};

/// Where the kiln rows run (--device): their inputs live there, so each timed call is the
/// device's work alone, as the peers' are.
kiln::Device g_kiln_device = kiln::Device::cpu();
bool g_kiln_captured = false;  // measure_kiln times a kiln::capture of the workload

kiln::Tensor kiln_input(const Buf& buf, long n, kiln::Shape shape) {
  kiln::Tensor t = kiln::from_vector<float>(std::vector<float>(buf.data(), buf.data() + n), shape, g_kiln_device);
  t.eval();
  return t;
}

/// Inputs (seeds and ranges of the peers' README) and output buffers. x, r and y hold n1 ==
/// rows * kCols floats: W1/W5a read x flat, W2-W5b read it as rows x kCols.
struct Env {
  Sizes sz;
  Buf x, r, y, b, gamma, beta, v1, v2, x8, y8;
  std::optional<KilnInputs> kiln_inputs;

  explicit Env(Sizes s)
      : sz(s),
        x(s.n1),
        r(s.n1),
        y(s.n1),
        b(kCols),
        gamma(kCols),
        beta(kCols),
        v1(kCols),
        v2(kCols),
        x8(kN8),
        y8(kN8) {
    gen(x.data(), s.n1, 1, -2, 2);
    gen(r.data(), s.n1, 2, -2, 2);
    gen(b.data(), kCols, 3, -1, 1);
    gen(gamma.data(), kCols, 4, 0.5, 1.5);
    gen(beta.data(), kCols, 5, -0.5, 0.5);
    gen(x8.data(), kN8, 16, -1, 1);
  }

  /// Created on first use, so runs without kiln do not hold the copies.
  const KilnInputs& kiln() {
    if (!kiln_inputs) {
      const long rows = sz.rows;
      kiln_inputs = KilnInputs{kiln_input(x, sz.n1, {sz.n1}),
                               kiln_input(x, sz.n2(), {rows, kCols}),
                               kiln_input(r, sz.n2(), {rows, kCols}),
                               kiln_input(b, kCols, {kCols}),
                               kiln_input(gamma, kCols, {kCols}),
                               kiln_input(beta, kCols, {kCols}),
                               kiln_input(x8, kN8, {kN8})};
    }
    return *kiln_inputs;
  }
};

// ---- hand: P6's fused loops (../shared/peers/cpp/bench_hand.cpp) ------------------------------
// Plain functions, not lambdas: GCC vectorizes these cleanly.

/// tanh: Eigen 3.4's rational approximation (FMA clamp variant), branch-free.
inline float tanh_fast(float a) {
  const float x = std::min(std::max(a, -7.99881172180175781f), 7.99881172180175781f);
  const float x2 = x * x;
  float p = x2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
  p = x2 * p + -8.60467152213735e-11f;
  p = x2 * p + 5.12229709037114e-08f;
  p = x2 * p + 1.48572235717979e-05f;
  p = x2 * p + 6.37261928875436e-04f;
  p = x2 * p + 4.89352455891786e-03f;
  p = x * p;
  float q = x2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
  q = x2 * q + 2.26843463243900e-03f;
  q = x2 * q + 4.89352518554385e-03f;
  const float res = p / q;
  return std::fabs(a) < 0.0004f ? a : res;
}

/// exp: Cephes-style range reduction + degree-6 polynomial, ~1-2 ulp.
inline float exp_fast(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // round to nearest with the 1.5*2^23 trick (std::floor blocks GCC 12's vectorizer)
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * r * r + r + 1.0f;
  const int32_t e = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(e);
}

constexpr long kBlock = 4096;  // elementwise work is split in 16 KiB blocks
constexpr int kLanes = 64;     // row reductions: 4 x 16 lane accumulators

// log2 tree reduction of the lane accumulators
inline float lanes_sum(float* acc) {
  for (int w = kLanes / 2; w >= 1; w /= 2)
#pragma omp simd
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}
inline float lanes_max(float* acc) {
  for (int w = kLanes / 2; w >= 1; w /= 2)
#pragma omp simd
    for (int l = 0; l < w; ++l) acc[l] = std::max(acc[l], acc[l + w]);
  return acc[0];
}
inline float row_max(const float* __restrict xr) {
  float acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = -INFINITY;
  for (long j = 0; j < kCols; j += kLanes)
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) acc[l] = std::max(acc[l], xr[j + l]);
  return lanes_max(acc);
}
inline float row_sum(const float* __restrict xr) {
  float acc[kLanes] = {};
  for (long j = 0; j < kCols; j += kLanes)
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) acc[l] += xr[j + l];
  return lanes_sum(acc);
}

void k_w1(const float* __restrict x, float* __restrict y, long n) {
#pragma omp parallel for schedule(static)
  for (long b0 = 0; b0 < n; b0 += kBlock) {
    const float* __restrict xb = x + b0;
    float* __restrict yb = y + b0;
#pragma omp simd
    for (long i = 0; i < kBlock; ++i) {
      const float xi = xb[i];
      const float v = tanh_fast(xi * 1.5f + 0.25f) * xi - 0.1f;
      yb[i] = v > 0.f ? v : 0.f;
    }
  }
}

void k_w2(const float* __restrict x, const float* __restrict bb, const float* __restrict r,
          float* __restrict y, long rows) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < rows; ++i) {
    const float* __restrict xr = x + i * kCols;
    const float* __restrict rr = r + i * kCols;
    float* __restrict yr = y + i * kCols;
#pragma omp simd
    for (long j = 0; j < kCols; ++j) {
      const float u = xr[j] + bb[j];
      const float t = tanh_fast(0.7978845608f * (u + 0.044715f * u * u * u));
      yr[j] = 0.5f * u * (1.f + t) + rr[j];
    }
  }
}

// one pass over DRAM: the row stays in L1 between max, exp+sum and scale
void k_w3(const float* __restrict x, float* __restrict y, long rows) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < rows; ++i) {
    const float* __restrict xr = x + i * kCols;
    float* __restrict yr = y + i * kCols;
    const float m = row_max(xr);
    float acc[kLanes] = {};
    for (long j = 0; j < kCols; j += kLanes)
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) {
        const float e = exp_fast(xr[j + l] - m);
        yr[j + l] = e;
        acc[l] += e;
      }
    const float inv = 1.f / lanes_sum(acc);
#pragma omp simd
    for (long j = 0; j < kCols; ++j) yr[j] *= inv;
  }
}

void k_w4(const float* __restrict x, const float* __restrict gg, const float* __restrict bt,
          float* __restrict y, long rows) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < rows; ++i) {
    const float* __restrict xr = x + i * kCols;
    float* __restrict yr = y + i * kCols;
    const float mean = row_sum(xr) * (1.0f / kCols);
    float acc[kLanes] = {};
    for (long j = 0; j < kCols; j += kLanes)
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) {
        const float d = xr[j + l] - mean;
        acc[l] += d * d;
      }
    const float rstd = 1.0f / std::sqrt(lanes_sum(acc) * (1.0f / kCols) + 1e-5f);
#pragma omp simd
    for (long j = 0; j < kCols; ++j) yr[j] = (xr[j] - mean) * rstd * gg[j] + bt[j];
  }
}

// per-thread lane accumulators over the thread's whole range, one tree reduction per thread
float k_w5a(const float* __restrict x, long n) {
  float total = 0.f;
#pragma omp parallel reduction(+ : total)
  {
    float acc[kLanes] = {};
#pragma omp for schedule(static) nowait
    for (long b0 = 0; b0 < n; b0 += kLanes) {
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) acc[l] += x[b0 + l];
    }
    total += lanes_sum(acc);
  }
  return total;
}

// `partial` holds kCols floats per thread
void k_w5b(const float* __restrict x, float* __restrict colsum, float* __restrict partial,
           long rows) {
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    float* __restrict acc = partial + static_cast<size_t>(tid) * kCols;
    for (long j = 0; j < kCols; ++j) acc[j] = 0.f;
#pragma omp for schedule(static) nowait
    for (long i = 0; i < rows; ++i) {
      const float* __restrict xr = x + i * kCols;
#pragma omp simd
      for (long j = 0; j < kCols; ++j) acc[j] += xr[j];
    }
#pragma omp barrier
#pragma omp for schedule(static)
    for (long j = 0; j < kCols; ++j) {
      float s = 0.f;
      for (int t = 0; t < nt; ++t) s += partial[static_cast<size_t>(t) * kCols + j];
      colsum[j] = s;
    }
  }
}

// each element runs the 100-step recurrence in registers
void k_w8(const float* __restrict x, float* __restrict y) {
#pragma omp simd
  for (long i = 0; i < kN8; ++i) {
    float v = x[i];
    for (int it = 0; it < kIt8; ++it) v = v * 1.0001f + 0.5f;
    y[i] = v;
  }
}

Measurement hand_w1(Env& e, const TimingConfig& cfg, int threads) {
  OmpThreads team(threads);
  const Stat st = time_calls(cfg, [&] {
    k_w1(e.x.data(), e.y.data(), e.sz.n1);
    escape(e.y.data());
  });
  return {st, checksum(e.y.data(), e.sz.n1), ""};
}

Measurement hand_w2(Env& e, const TimingConfig& cfg, int threads) {
  OmpThreads team(threads);
  const Stat st = time_calls(cfg, [&] {
    k_w2(e.x.data(), e.b.data(), e.r.data(), e.y.data(), e.sz.rows);
    escape(e.y.data());
  });
  return {st, checksum(e.y.data(), e.sz.n2()), ""};
}

Measurement hand_w3(Env& e, const TimingConfig& cfg, int threads) {
  OmpThreads team(threads);
  const Stat st = time_calls(cfg, [&] {
    k_w3(e.x.data(), e.y.data(), e.sz.rows);
    escape(e.y.data());
  });
  return {st, checksum(e.y.data(), e.sz.n2()), ""};
}

Measurement hand_w4(Env& e, const TimingConfig& cfg, int threads) {
  OmpThreads team(threads);
  const Stat st = time_calls(cfg, [&] {
    k_w4(e.x.data(), e.gamma.data(), e.beta.data(), e.y.data(), e.sz.rows);
    escape(e.y.data());
  });
  return {st, checksum(e.y.data(), e.sz.n2()), ""};
}

Measurement hand_w5a(Env& e, const TimingConfig& cfg, int threads) {
  OmpThreads team(threads);
  float out = 0;
  const Stat st = time_calls(cfg, [&] {
    out = k_w5a(e.x.data(), e.sz.n1);
    escape(&out);
  });
  return {st, checksum_of_scalar(out), ""};
}

Measurement hand_w5b(Env& e, const TimingConfig& cfg, int threads) {
  OmpThreads team(threads);
  Buf partial(static_cast<long>(threads) * kCols);
  const Stat st = time_calls(cfg, [&] {
    k_w5b(e.x.data(), e.v1.data(), partial.data(), e.sz.rows);
    escape(e.v1.data());
  });
  return {st, checksum(e.v1.data(), kCols), ""};
}

Measurement hand_w8(Env& e, const TimingConfig& cfg, int /*threads: always 1*/) {
  const Stat st = time_calls(cfg, [&] {
    k_w8(e.x8.data(), e.y8.data());
    escape(e.y8.data());
  });
  return {st, checksum(e.y8.data(), kN8), "whole recurrence in registers"};
}

// ---- Eigen 3.4: P5's expressions (../shared/peers/cpp/bench_eigen.cpp) ------------------------

using ArrayMap = Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64>;
using RowMajorArrayXXf = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Array2Map = Eigen::Map<RowMajorArrayXXf, Eigen::Aligned64>;
using RowArrayMap = Eigen::Map<Eigen::Array<float, 1, Eigen::Dynamic>, Eigen::Aligned64>;
using Tensor0Map = Eigen::TensorMap<Eigen::Tensor<float, 0, Eigen::RowMajor>>;
using Tensor1Map = Eigen::TensorMap<Eigen::Tensor<float, 1, Eigen::RowMajor>, Eigen::Aligned64>;
using Tensor2Map = Eigen::TensorMap<Eigen::Tensor<float, 2, Eigen::RowMajor>, Eigen::Aligned64>;
using Dims1 = Eigen::array<Eigen::Index, 1>;
using Dims2 = Eigen::array<Eigen::Index, 2>;

/// A ThreadPoolDevice for one measurement: its threads exist only while it is timed, so they
/// do not spin against the other implementations' threads.
struct EigenPool {
  Eigen::ThreadPool pool;
  Eigen::ThreadPoolDevice device;
  explicit EigenPool(int threads) : pool(threads), device(&pool, threads) {}
};

Measurement eigen_array_w1(Env& e, const TimingConfig& cfg, int) {
  ArrayMap x(e.x.data(), e.sz.n1), y(e.y.data(), e.sz.n1);
  const Stat st = time_calls(cfg, [&] {
    y = ((x * 1.5f + 0.25f).tanh() * x - 0.1f).max(0.f);
    escape(e.y.data());
  });
  return {st, checksum(e.y.data(), e.sz.n1), ""};
}

Measurement eigen_tensor_w1(Env& e, const TimingConfig& cfg, int threads) {
  EigenPool tp(threads);
  Tensor1Map x(e.x.data(), e.sz.n1), y(e.y.data(), e.sz.n1);
  const Stat st = time_calls(cfg, [&] {
    y.device(tp.device) = ((x * 1.5f + 0.25f).tanh() * x - 0.1f).cwiseMax(0.f);
    escape(e.y.data());
  });
  return {st, checksum(e.y.data(), e.sz.n1), ""};
}

Measurement eigen_array_w2(Env& e, const TimingConfig& cfg, int) {
  Array2Map x(e.x.data(), e.sz.rows, kCols), r(e.r.data(), e.sz.rows, kCols),
      y(e.y.data(), e.sz.rows, kCols);
  RowArrayMap b(e.b.data(), kCols);
  const Stat st = time_calls(cfg, [&] {
    auto u = x.rowwise() + b;
    y = 0.5f * u * (1.f + (0.7978845608f * (u + 0.044715f * u * u * u)).tanh()) + r;
    escape(e.y.data());
  });
  return {st, checksum(e.y.data(), e.sz.n2()), ""};
}

Measurement eigen_tensor_w2(Env& e, const TimingConfig& cfg, int threads) {
  EigenPool tp(threads);
  Tensor2Map x(e.x.data(), e.sz.rows, kCols), r(e.r.data(), e.sz.rows, kCols),
      y(e.y.data(), e.sz.rows, kCols);
  Tensor1Map b(e.b.data(), kCols);
  const Dims2 as_row{1, kCols}, down_rows{e.sz.rows, 1};
  const Stat st = time_calls(cfg, [&] {
    auto u = x + b.reshape(as_row).broadcast(down_rows);
    y.device(tp.device) =
        0.5f * u * (1.f + (0.7978845608f * (u + 0.044715f * u * u * u)).tanh()) + r;
    escape(e.y.data());
  });
  return {st, checksum(e.y.data(), e.sz.n2()), ""};
}

Measurement eigen_array_w3(Env& e, const TimingConfig& cfg, int) {
  Array2Map x(e.x.data(), e.sz.rows, kCols), y(e.y.data(), e.sz.rows, kCols);
  Eigen::ArrayXf m(e.sz.rows), s(e.sz.rows);
  const Stat st = time_calls(cfg, [&] {
    m = x.rowwise().maxCoeff();
    y = (x.colwise() - m).exp();
    s = y.rowwise().sum();
    y.colwise() /= s;
    escape(e.y.data());
  });
  return {st, checksum(e.y.data(), e.sz.n2()), "4 passes (max, exp, sum, scale)"};
}

Measurement eigen_tensor_w3(Env& e, const TimingConfig& cfg, int threads) {
  EigenPool tp(threads);
  Tensor2Map x(e.x.data(), e.sz.rows, kCols), y(e.y.data(), e.sz.rows, kCols);
  Tensor1Map m(e.v1.data(), e.sz.rows), s(e.v2.data(), e.sz.rows);
  const Dims2 as_col{e.sz.rows, 1}, across_cols{1, kCols};
  const Dims1 last{1};
  const Stat st = time_calls(cfg, [&] {
    m.device(tp.device) = x.maximum(last);
    y.device(tp.device) = (x - m.reshape(as_col).broadcast(across_cols)).exp();
    s.device(tp.device) = y.sum(last);
    y.device(tp.device) = y / s.reshape(as_col).broadcast(across_cols);
    escape(e.y.data());
  });
  return {st, checksum(e.y.data(), e.sz.n2()), "4 passes (max, exp, sum, scale)"};
}

Measurement eigen_array_w4(Env& e, const TimingConfig& cfg, int) {
  Array2Map x(e.x.data(), e.sz.rows, kCols), y(e.y.data(), e.sz.rows, kCols);
  RowArrayMap g(e.gamma.data(), kCols), bt(e.beta.data(), kCols);
  Eigen::ArrayXf mean(e.sz.rows), rstd(e.sz.rows);
  const Stat st = time_calls(cfg, [&] {
    mean = x.rowwise().mean();
    rstd = ((x.colwise() - mean).square().rowwise().mean() + 1e-5f).rsqrt();
    y = (((x.colwise() - mean).colwise() * rstd).rowwise() * g).rowwise() + bt;
    escape(e.y.data());
  });
  return {st, checksum(e.y.data(), e.sz.n2()), "3 passes (mean, var, out)"};
}

Measurement eigen_tensor_w4(Env& e, const TimingConfig& cfg, int threads) {
  EigenPool tp(threads);
  Tensor2Map x(e.x.data(), e.sz.rows, kCols), y(e.y.data(), e.sz.rows, kCols);
  Tensor1Map g(e.gamma.data(), kCols), bt(e.beta.data(), kCols);
  Tensor1Map mean(e.v1.data(), e.sz.rows), rstd(e.v2.data(), e.sz.rows);
  const Dims2 as_row{1, kCols}, down_rows{e.sz.rows, 1}, as_col{e.sz.rows, 1},
      across_cols{1, kCols};
  const Dims1 last{1};
  const Stat st = time_calls(cfg, [&] {
    mean.device(tp.device) = x.mean(last);
    auto xc = x - mean.reshape(as_col).broadcast(across_cols);
    rstd.device(tp.device) = (xc.square().mean(last) + 1e-5f).rsqrt();
    y.device(tp.device) =
        xc * rstd.reshape(as_col).broadcast(across_cols) * g.reshape(as_row).broadcast(down_rows) +
        bt.reshape(as_row).broadcast(down_rows);
    escape(e.y.data());
  });
  return {st, checksum(e.y.data(), e.sz.n2()), "3 passes (mean, var, out)"};
}

Measurement eigen_array_w5a(Env& e, const TimingConfig& cfg, int) {
  ArrayMap x(e.x.data(), e.sz.n1);
  float out = 0;
  const Stat st = time_calls(cfg, [&] {
    out = x.sum();
    escape(&out);
  });
  return {st, checksum_of_scalar(out), ""};
}

Measurement eigen_tensor_w5a(Env& e, const TimingConfig& cfg, int threads) {
  EigenPool tp(threads);
  Tensor1Map x(e.x.data(), e.sz.n1);
  float out = 0;
  Tensor0Map result(&out);
  const Stat st = time_calls(cfg, [&] {
    result.device(tp.device) = x.sum();
    escape(&out);
  });
  return {st, checksum_of_scalar(out), ""};
}

Measurement eigen_array_w5b(Env& e, const TimingConfig& cfg, int) {
  Array2Map x(e.x.data(), e.sz.rows, kCols);
  RowArrayMap colsum(e.v1.data(), kCols);
  const Stat st = time_calls(cfg, [&] {
    colsum = x.colwise().sum();
    escape(e.v1.data());
  });
  return {st, checksum(e.v1.data(), kCols), ""};
}

Measurement eigen_tensor_w5b(Env& e, const TimingConfig& cfg, int threads) {
  EigenPool tp(threads);
  Tensor2Map x(e.x.data(), e.sz.rows, kCols);
  Tensor1Map colsum(e.v1.data(), kCols);
  const Dims1 first{0};
  const Stat st = time_calls(cfg, [&] {
    colsum.device(tp.device) = x.sum(first);
    escape(e.v1.data());
  });
  return {st, checksum(e.v1.data(), kCols), ""};
}

Measurement eigen_array_w8(Env& e, const TimingConfig& cfg, int) {
  ArrayMap x(e.x8.data(), kN8), y(e.y8.data(), kN8);
  const Stat st = time_calls(cfg, [&] {
    y = x;
    for (int it = 0; it < kIt8; ++it) {
      y = y * 1.0001f + 0.5f;
      escape(e.y8.data());  // keeps the 100 statements as 100 separate passes
    }
  });
  return {st, checksum(e.y8.data(), kN8), "100 statements, each one fused pass"};
}

// ---- kiln through its public frontend ----------------------------------------------------------
// Each timed call records the workload on evaluated input tensors and forces it with
// Tensor::eval(), which computes the value on its device without copying it to the host. The
// checksum comes from one more call, copied out with to_vector.

template <class Record>
Measurement measure_kiln(const TimingConfig& cfg, Record&& record) {
  if (g_kiln_captured) {
    // The "kiln-captured" row: the same code through kiln::capture, its inputs read as the
    // capture's constants. A call replays: nothing is recorded, hashed or looked up.
    const kiln::CapturedFunction f =
        kiln::capture([&](const std::vector<kiln::Tensor>&) { return std::vector<kiln::Tensor>{record()}; });
    const Stat st = time_calls(cfg, [&] {
      f({});
      kiln::synchronize(g_kiln_device);
    });
    const std::vector<float> out = f({})[0].template to_vector<float>();
    return {st, checksum(out.data(), static_cast<long>(out.size())), ""};
  }
  const Stat st = time_calls(cfg, [&] {
    record().eval();
    kiln::synchronize(g_kiln_device);  // queue devices return once the kernels are enqueued
  });
  const std::vector<float> out = record().template to_vector<float>();
  return {st, checksum(out.data(), static_cast<long>(out.size())), ""};
}

Measurement kiln_w1(Env& e, const TimingConfig& cfg, int) {
  const KilnInputs& in = e.kiln();
  return measure_kiln(cfg, [&] { return ((in.x1 * 1.5f + 0.25f).tanh() * in.x1 - 0.1f).relu(); });
}

Measurement kiln_w2(Env& e, const TimingConfig& cfg, int) {
  const KilnInputs& in = e.kiln();
  return measure_kiln(cfg,
                      [&] { return (in.x2 + in.b).gelu(kiln::GeluApproximation::Tanh) + in.r2; });
}

Measurement kiln_w3(Env& e, const TimingConfig& cfg, int) {
  const KilnInputs& in = e.kiln();
  return measure_kiln(cfg, [&] { return in.x2.softmax(-1); });
}

Measurement kiln_w4(Env& e, const TimingConfig& cfg, int) {
  const KilnInputs& in = e.kiln();
  return measure_kiln(cfg, [&] { return kiln::layer_norm(in.x2, in.gamma, in.beta, 1e-5); });
}

Measurement kiln_w5a(Env& e, const TimingConfig& cfg, int) {
  const KilnInputs& in = e.kiln();
  return measure_kiln(cfg, [&] { return in.x1.sum(); });
}

Measurement kiln_w5b(Env& e, const TimingConfig& cfg, int) {
  const KilnInputs& in = e.kiln();
  return measure_kiln(cfg, [&] { return in.x2.sum({0}); });
}

Measurement kiln_w8(Env& e, const TimingConfig& cfg, int) {
  const KilnInputs& in = e.kiln();
  return measure_kiln(cfg, [&] {
    kiln::Tensor y = in.x8;
    for (int it = 0; it < kIt8; ++it) y = y * 1.0001f + 0.5f;
    return y;
  });
}

// ---- the suite ----------------------------------------------------------------------------------

using RunFn = Measurement (*)(Env&, const TimingConfig&, int threads);

/// One workload and its implementations (nullptr: the peers have none either).
struct Workload {
  const char* id;
  double (*min_bytes)(const Sizes&);  // each input read once, the output written once
  int ops_per_call;                   // > 0: reported as time per op (W8), not per call
  RunFn hand, eigen_array, eigen_tensor, kiln;
};

// Minimal bytes as in the peers' report.py; the definitions are in ../shared/peers/README.md.
const Workload kWorkloads[] = {
    {"W1", [](const Sizes& s) { return 4.0 * 2 * s.n1; }, 0, hand_w1, eigen_array_w1,
     eigen_tensor_w1, kiln_w1},
    {"W2", [](const Sizes& s) { return 4.0 * (3 * s.n2() + kCols); }, 0, hand_w2, eigen_array_w2,
     eigen_tensor_w2, kiln_w2},
    {"W3", [](const Sizes& s) { return 4.0 * 2 * s.n2(); }, 0, hand_w3, eigen_array_w3,
     eigen_tensor_w3, kiln_w3},
    {"W4", [](const Sizes& s) { return 4.0 * (2 * s.n2() + 2 * kCols); }, 0, hand_w4,
     eigen_array_w4, eigen_tensor_w4, kiln_w4},
    {"W5a", [](const Sizes& s) { return 4.0 * (s.n1 + 1); }, 0, hand_w5a, eigen_array_w5a,
     eigen_tensor_w5a, kiln_w5a},
    {"W5b", [](const Sizes& s) { return 4.0 * (s.n2() + kCols); }, 0, hand_w5b, eigen_array_w5b,
     eigen_tensor_w5b, kiln_w5b},
    {"W8", [](const Sizes&) { return 4.0 * 2 * kN8; }, 2 * kIt8, hand_w8, eigen_array_w8, nullptr,
     kiln_w8},
};

/// One row of the result table: an implementation at a thread count.
struct Variant {
  std::string impl;    // "hand-2t", "eigen-tensor-tp2", "kiln", ...
  std::string family;  // what --impl selects: "hand", "eigen" or "kiln"
  int threads;         // 0: kiln decides
  RunFn run;
};

std::vector<Variant> variants_of(const Workload& w, int threads) {
  std::vector<Variant> v;
  // W8 is single-threaded in the peers (P6 "hand-fused-1t")
  if (w.ops_per_call == 0) v.push_back({fmt::format("hand-{}t", threads), "hand", threads, w.hand});
  if (threads != 1 || w.ops_per_call != 0) v.push_back({"hand-1t", "hand", 1, w.hand});
  if (w.eigen_array) v.push_back({"eigen-array", "eigen", 1, w.eigen_array});
  if (w.eigen_tensor)
    v.push_back({fmt::format("eigen-tensor-tp{}", threads), "eigen", threads, w.eigen_tensor});
  if (w.kiln) v.push_back({"kiln", "kiln", 0, w.kiln});
  if (w.kiln) v.push_back({"kiln-captured", "kiln", 0, w.kiln});
  return v;
}

struct Row {
  const Workload* w;
  Variant v;
  Measurement m;
  std::string error;  // what the implementation threw, if it did
  Checksum ref;
  double rel_err = 0;
  std::optional<double> ratio;  // median / the hand row's median
  bool ok() const { return error.empty() && rel_err <= kTolerance; }
  /// The figure reported: ms per call, or µs per op for W8.
  double value(double seconds) const {
    return w->ops_per_call > 0 ? seconds * 1e6 / w->ops_per_call : seconds * 1e3;
  }
};

struct Options {
  std::vector<std::string> only;   // workloads; empty: all
  std::vector<std::string> impls;  // families or exact variant names; empty: all
  bool quick = false;
  Sizes sizes;
  int threads = 2;
  std::string json_path;
};

std::vector<std::string> split_commas(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const size_t comma = s.find(',');
    if (comma != 0) out.emplace_back(s.substr(0, comma));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

bool contains(const std::vector<std::string>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

[[noreturn]] void usage(int status) {
  std::fputs(
      "usage: kiln_workload_bench [options]\n"
      "  --only W1,W3          workloads to run (W1 W2 W3 W4 W5a W5b W8; default all)\n"
      "  --impl kiln,hand,eigen  implementations (families, or exact names such as hand-1t)\n"
      "  --quick               1 warm-up and 3 samples instead of 3 and 7..41 (smoke tests)\n"
      "  --size-scale K        divide the peers' sizes by K (a power of two <= 4096; W8 unscaled)\n"
      "  --small               the same as --size-scale 16\n"
      "  --threads N           threads of the multi-threaded variants (default 2)\n"
      "  --device D            the device of the kiln rows: cpu (default), opencl:N, vulkan:N\n"
      "  --json FILE           also write one JSON line per measurement to FILE\n",
      status == 0 ? stdout : stderr);
  std::exit(status);
}

Options parse_options(int argc, char** argv) {
  Options o;
  long scale = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "workload_bench: %s needs a value\n", argv[i]);
        usage(2);
      }
      return argv[++i];
    };
    if (a == "--only")
      o.only = split_commas(value());
    else if (a == "--impl")
      o.impls = split_commas(value());
    else if (a == "--quick")
      o.quick = true;
    else if (a == "--small")
      scale = 16;
    else if (a == "--size-scale")
      scale = std::atol(std::string(value()).c_str());
    else if (a == "--threads")
      o.threads = std::atoi(std::string(value()).c_str());
    else if (a == "--device")
      g_kiln_device = kiln::Device::parse(value());
    else if (a == "--json")
      o.json_path = value();
    else if (a == "--help" || a == "-h")
      usage(0);
    else {
      std::fprintf(stderr, "workload_bench: unknown option %s\n", argv[i]);
      usage(2);
    }
  }
  if (scale < 1 || scale > 4096 || !std::has_single_bit(static_cast<unsigned long>(scale))) {
    std::fprintf(stderr, "workload_bench: --size-scale must be a power of two in [1, 4096]\n");
    std::exit(2);
  }
  if (o.threads < 1) {
    std::fprintf(stderr, "workload_bench: --threads must be >= 1\n");
    std::exit(2);
  }
  o.sizes.scale = scale;
  o.sizes.n1 /= scale;
  o.sizes.rows /= scale;
  for (const std::string& w : o.only) {
    const bool known = std::any_of(std::begin(kWorkloads), std::end(kWorkloads),
                                   [&](const Workload& k) { return w == k.id; });
    if (!known) {
      std::fprintf(stderr, "workload_bench: unknown workload %s (W1 W2 W3 W4 W5a W5b W8)\n",
                   w.c_str());
      std::exit(2);
    }
  }
  for (const std::string& name : o.impls) {
    bool known = name == "hand" || name == "eigen" || name == "kiln";
    for (const Workload& w : kWorkloads)
      for (const Variant& v : variants_of(w, o.threads)) known = known || v.impl == name;
    if (!known) {
      std::fprintf(stderr, "workload_bench: unknown implementation %s\n", name.c_str());
      std::exit(2);
    }
  }
  return o;
}

bool selected(const Options& o, const Variant& v) {
  return o.impls.empty() || contains(o.impls, v.family) || contains(o.impls, v.impl);
}

std::string threads_str(int threads) {
  return threads == 0 ? "auto" : std::to_string(threads);
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + '"';
}

std::optional<double> gbps_of(const Row& r, const Sizes& s) {
  if (r.w->ops_per_call > 0 || !r.error.empty() || r.m.stat.med_s <= 0) return std::nullopt;
  return r.w->min_bytes(s) / r.m.stat.med_s / 1e9;
}

/// One JSON object per line; figures are null when the implementation threw.
void write_json(std::FILE* f, const Row& r, const Options& o) {
  const Stat& st = r.m.stat;
  const bool timed = r.error.empty();
  const auto num = [](std::optional<double> v) {
    return v ? fmt::format("{:.9g}", *v) : std::string("null");
  };
  const auto figure = [&](double v) {
    return num(timed ? std::optional<double>{v} : std::nullopt);
  };
  const std::pair<const char*, std::string> fields[] = {
      {"workload", json_quote(r.w->id)},
      {"impl", json_quote(r.v.impl)},
      {"threads", r.v.threads == 0 ? "null" : std::to_string(r.v.threads)},
      {"median_ms", figure(st.med_s * 1e3)},
      {"min_ms", figure(st.min_s * 1e3)},
      {"max_ms", figure(st.max_s * 1e3)},
      {"first_call_ms", figure(st.first_s * 1e3)},
      {"us_per_op", r.w->ops_per_call > 0 ? figure(r.value(st.med_s)) : "null"},
      {"reps", std::to_string(st.reps)},
      {"inner", std::to_string(st.inner)},
      {"gbps", num(gbps_of(r, o.sizes))},
      {"ratio_to_hand", num(r.ratio)},
      {"chk_sum", figure(r.m.chk.sum)},
      {"chk_sumsq", figure(r.m.chk.sumsq)},
      {"ref_sum", num(r.ref.sum)},
      {"ref_sumsq", num(r.ref.sumsq)},
      {"chk_rel_err", figure(r.rel_err)},
      {"chk_ok", r.ok() ? "true" : "false"},
      {"size_scale", std::to_string(o.sizes.scale)},
      {"quick", o.quick ? "true" : "false"},
      {"note", json_quote(r.m.note)},
      {"error", json_quote(r.error)},
  };
  std::string line;
  for (const auto& [key, value] : fields)
    line += fmt::format("{}\"{}\": {}", line.empty() ? "{" : ", ", key, value);
  fmt::print(f, "{}}}\n", line);
  std::fflush(f);
}

/// The 1-minute load average: the machine is shared, and a busy neighbour shows up as 2-thread
/// runs quantized to the 4 ms scheduler tick.
std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string one;
  return f >> one ? one : "?";
}

void print_table(const std::vector<Row>& rows, const Options& o, const TimingConfig& cfg,
                 const std::string& load_before) {
  fmt::print("## Workload suite: kiln, hand-written loops (P6), Eigen (P5)\n\n");
  fmt::print("Sizes: W1/W5a {} floats, W2-W5b {}x{}{}; W8 64 floats x 200 ops. ", o.sizes.n1,
             o.sizes.rows, kCols,
             o.sizes.scale == 1 ? " (the peers' sizes)"
                                : fmt::format(" (the peers' sizes / {})", o.sizes.scale));
  if (o.quick)
    fmt::print("Timing (--quick): {} warm-up, {} samples of >= {:g} ms, median. ", cfg.warmup,
               cfg.min_reps, cfg.target_s * 1e3);
  else
    fmt::print("Timing: {} warm-ups, >= {} samples of >= {:g} ms (until {:g} s, <= {}), median. ",
               cfg.warmup, cfg.min_reps, cfg.target_s * 1e3, cfg.min_total_s, cfg.max_reps);
  fmt::print("Load average {} before, {} after.\n\n", load_before, load_average());
  fmt::print("| workload | impl | threads | median | min | max | GB/s | x hand | 1st call ms |");
  fmt::print(" checksum |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    const std::string unit = r.w->ops_per_call > 0 ? " µs/op" : " ms";
    const auto fig = [&](double s) {
      if (!r.error.empty()) return std::string("-");
      const double v = r.value(s);
      return (v >= 1000 ? fmt::format("{:.0f}", v) : fmt::format("{:.4g}", v)) + unit;
    };
    const std::optional<double> gb = gbps_of(r, o.sizes);
    const std::string check = !r.error.empty() ? "ERROR"
                              : r.ok()         ? "ok"
                                               : fmt::format("MISMATCH {:.1e}", r.rel_err);
    fmt::print("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", r.w->id, r.v.impl,
               threads_str(r.v.threads), fig(r.m.stat.med_s), fig(r.m.stat.min_s),
               fig(r.m.stat.max_s), gb ? fmt::format("{:.3g}", *gb) : "-",
               r.ratio ? fmt::format("{:.{}f}", *r.ratio, *r.ratio < 100 ? 2 : 0) : "-",
               r.error.empty() ? fmt::format("{:.4g}", r.m.stat.first_s * 1e3) : "-", check);
  }
  fmt::print(
      "\nx hand: median / the hand row's median (hand-{}t; hand-1t for W8). W8 times the whole "
      "100-iteration call and divides by 200 ops; kiln's figure includes recording. kiln runs "
      "through Tensor::eval() (no host copy); its checksum comes from one more call.\n",
      o.threads);
  bool all_ok = true;
  for (const Row& r : rows) {
    if (!r.error.empty()) {
      fmt::print("ERROR {} {}: {}\n", r.w->id, r.v.impl, r.error);
      all_ok = false;
    } else if (!r.ok()) {
      fmt::print("MISMATCH {} {}: sum {:.9g} vs hand {:.9g}, sumsq {:.9g} vs hand {:.9g}", r.w->id,
                 r.v.impl, r.m.chk.sum, r.ref.sum, r.m.chk.sumsq, r.ref.sumsq);
      fmt::print(" (relative error {:.2e} > {:g})\n", r.rel_err, kTolerance);
      all_ok = false;
    }
  }
  if (all_ok)
    fmt::print("All checksums agree with the hand loop within {:g} (relative).\n", kTolerance);
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_options(argc, argv);
  const TimingConfig cfg = opt.quick ? TimingConfig::quick() : TimingConfig::full();
  omp_set_num_threads(opt.threads);

  std::FILE* json = nullptr;
  if (!opt.json_path.empty() && !(json = std::fopen(opt.json_path.c_str(), "w"))) {
    std::fprintf(stderr, "workload_bench: cannot write %s\n", opt.json_path.c_str());
    return 2;
  }

  const std::string load_before = load_average();
  Env env(opt.sizes);
  std::vector<Row> rows;
  for (const Workload& w : kWorkloads) {
    if (!opt.only.empty() && !contains(opt.only, w.id)) continue;
    // The reference: one call of the hand loop, whichever implementations are selected.
    const Checksum ref = w.hand(env, TimingConfig::once(), opt.threads).chk;
    std::optional<double> hand_median;
    for (const Variant& v : variants_of(w, opt.threads)) {
      if (!selected(opt, v)) continue;
      Row r{&w, v, {}, {}, ref, 0, std::nullopt};
      try {
        g_kiln_captured = v.impl == "kiln-captured";
        r.m = v.run(env, cfg, v.threads);
        r.rel_err = relative_error(r.m.chk, ref);
      } catch (const std::exception& e) {
        r.error = e.what();
      }
      if (r.error.empty() && v.family == "hand" && !hand_median) hand_median = r.m.stat.med_s;
      if (r.error.empty() && hand_median) r.ratio = r.m.stat.med_s / *hand_median;
      if (r.error.empty())
        fmt::print(stderr, "[{}] {:<18} median {:.4g} {} ({} x {} calls){}\n", w.id, v.impl,
                   r.value(r.m.stat.med_s), w.ops_per_call > 0 ? "µs/op" : "ms", r.m.stat.reps,
                   r.m.stat.inner,
                   r.ok() ? "" : fmt::format("  MISMATCH rel err {:.2e}", r.rel_err));
      else
        fmt::print(stderr, "[{}] {:<18} ERROR {}\n", w.id, v.impl, r.error);
      if (json) write_json(json, r, opt);
      rows.push_back(std::move(r));
    }
  }
  if (json) std::fclose(json);
  print_table(rows, opt, cfg, load_before);
  return std::all_of(rows.begin(), rows.end(), [](const Row& r) { return r.ok(); }) ? 0 : 1;
}
