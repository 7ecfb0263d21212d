// benchmarks/custom_kernel_bench.cpp - what a custom kernel costs against the same function
// written with kiln's own ops, and against a hand-written fused loop.
//
// y = f(2x + b) - x over n f32 elements (x: n, b: 4096, broadcast along rows), for two f:
//   softsign  x / (1 + |x|)                     straight-line: the cpu backend widens it
//   softplus  max(x, 0) + log1p(exp(-|x|))      libm calls: one call per lane
// Each as a custom C kernel (`custom`), composed of kiln's ops (`ops`: softplus by
// relu + log(1 + exp(-abs)), which kiln computes with its vector math), and as one OpenMP
// loop built -O3 -march=native (`hand`, libm for softplus). The timings are medians of --reps
// runs in one process, in alternation; every result is checked against `hand` (1e-5).
//
//   kiln_custom_kernel_bench [--n ELEMENTS] [--reps R] [--device D]
#include <fmt/format.h>
#include <kiln/kiln.h>
#include <omp.h>

#include "timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

constexpr long kCols = 4096;

const char* kSoftsign = R"(float softsign(float x) { return x / (1.0f + (x < 0.0f ? -x : x)); })";
const char* kSoftplus = R"(#ifdef __OPENCL_C_VERSION__
#define expf exp
#define fabsf fabs
#define fmaxf fmax
#define log1pf log1p
#else
#include <math.h>
#endif
float softplus(float x) { return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))); })";

using kiln::bench::median;
using kiln::bench::seconds;

}  // namespace

int main(int argc, char** argv) try {
  long n = 1L << 24;
  int reps = 9;
  std::string device = "cpu";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--n") n = std::atol(argv[i + 1]) / kCols * kCols;
    else if (a == "--reps") reps = std::atoi(argv[i + 1]);
    else if (a == "--device") device = argv[i + 1];
    else throw kiln::Error("unknown flag " + a);
  }
  const kiln::Device d = kiln::Device::parse(device);
  const bool opencl = d.kind == kiln::Device::Kind::OpenCL;
  auto source = [&](const char* text) { return opencl ? kiln::CustomSource::opencl(text) : kiln::CustomSource::c(text); };
  const kiln::CustomOp softsign = kiln::custom_op("softsign", source(kSoftsign), "(f32) -> f32");
  const kiln::CustomOp softplus = kiln::custom_op("softplus", source(kSoftplus), "(f32) -> f32");

  std::vector<float> xs(static_cast<size_t>(n)), bs(kCols);
  for (long i = 0; i < n; ++i) xs[static_cast<size_t>(i)] = static_cast<float>(std::sin(0.001 * static_cast<double>(i)) * 8.0);
  for (long j = 0; j < kCols; ++j) bs[static_cast<size_t>(j)] = static_cast<float>(std::cos(0.01 * static_cast<double>(j)));
  const kiln::Tensor x = kiln::from_vector(xs, {n / kCols, kCols}, d);
  const kiln::Tensor b = kiln::from_vector(bs, {kCols}, d);
  std::vector<float> out(static_cast<size_t>(n));

  // The hand loop, specialized on `f` (a lambda: inlined and vectorized as one would write it).
  auto hand_loop = [&](auto f) {
    return [&, f] {
      const long rows = n / kCols;
#pragma omp parallel for schedule(static)
      for (long r = 0; r < rows; ++r) {
        const float* xr = xs.data() + r * kCols;
        float* yr = out.data() + r * kCols;
#pragma omp simd
        for (long j = 0; j < kCols; ++j) yr[j] = f(2.0f * xr[j] + bs[static_cast<size_t>(j)]) - xr[j];
      }
    };
  };
  struct Case {
    std::string name;
    std::function<void()> hand;
    std::function<kiln::Tensor(const kiln::Tensor&)> custom, ops;
  };
  const std::vector<Case> cases = {
      {"softsign", hand_loop([](float v) { return v / (1.0f + std::fabs(v)); }),
       [&](const kiln::Tensor& v) { return softsign(v); }, [](const kiln::Tensor& v) { return v / (v.abs() + 1.0f); }},
      {"softplus", hand_loop([](float v) { return std::fmax(v, 0.0f) + std::log1p(std::exp(-std::fabs(v))); }),
       [&](const kiln::Tensor& v) { return softplus(v); },
       [](const kiln::Tensor& v) { return v.relu() + ((-v.abs()).exp() + 1.0f).log(); }}};

  std::printf("| f | n | kiln custom | kiln ops | hand loop (%d threads) | custom / hand | custom / ops |\n",
              omp_get_max_threads());
  std::printf("|---|---|---|---|---|---|---|\n");
  int status = 0;
  for (const Case& c : cases) {
    const std::function<void()>& hand = c.hand;
    kiln::Tensor y_custom, y_ops;
    // Named before eval(): the statement's temporaries (x * 2 + b, f of it) would be alive
    // during eval() and stored too, as values a tensor still refers to.
    auto run_custom = [&] {
      kiln::Tensor y = c.custom(x * 2.0f + b) - x;
      y_custom = y.eval();
    };
    auto run_ops = [&] {
      kiln::Tensor y = c.ops(x * 2.0f + b) - x;
      y_ops = y.eval();
    };
    run_custom(), run_ops(), hand();  // compiles, warms the caches
    const std::vector<float> got_custom = y_custom.to_vector<float>(), got_ops = y_ops.to_vector<float>();
    std::vector<double> tc, to, th;
    for (int r = 0; r < reps; ++r) {
      tc.push_back(seconds(run_custom));
      to.push_back(seconds(run_ops));
      th.push_back(seconds(hand));
    }
    for (long i = 0; i < n; ++i) {
      const float want = out[static_cast<size_t>(i)];
      for (const std::vector<float>* got : {&got_custom, &got_ops})
        if (std::fabs((*got)[static_cast<size_t>(i)] - want) > 1e-5f * (1.0f + std::fabs(want))) {
          std::fprintf(stderr, "%s: element %ld is %g, the hand loop's %g\n", c.name.c_str(), i,
                       static_cast<double>((*got)[static_cast<size_t>(i)]), static_cast<double>(want));
          status = 1;
          break;
        }
    }
    const double mc = median(tc), mo = median(to), mh = median(th);
    std::printf("| %s | %ld | %.2f ms | %.2f ms | %.2f ms | %.2fx | %.2fx |\n", c.name.c_str(), n, mc * 1e3, mo * 1e3,
                mh * 1e3, mc / mh, mc / mo);
  }
  std::printf("\n(kiln's times are eval(): the result stays in the device's memory, host memory on cpu.)\n");
  return status;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
