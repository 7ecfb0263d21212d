// benchmarks/conv_bench.cpp - the convolution workloads: kiln against hand-written loops,
// inputs from the peers' generator (peer_inputs.h), one process; torch's conv2d (oneDNN) is
// timed on the same workloads by benchmarks/conv_peers.py in alternating processes
// (benchmarks/run.sh).
//
//   W9   relu(conv3x3(x[4,64,56,56], w[64,64,3,3], pad 1) + bias[64])   a ResNet stage
//   W10  depthwise conv3x3(x[1,96,112,112], w[96,1,3,3], pad 1)          a MobileNet layer
//
// The hand loops are what a careful C++ programmer writes without a library: W9 a direct
// convolution, one output row of one filter at a time, its inner loop over the row
// vectorized by the compiler (-O3 -march=native), filters split over OpenMP threads; W10
// the same per channel.
//
//   kiln_conv_bench [--only W9,W10] [--impl kiln,hand] [--runs N] [--device D]
// One line per workload and implementation: median, min and max ms over N calls after 3
// warm-ups, GFLOP/s, and the checksum (the sum of the output), which must agree within 1e-3.
#include <fmt/format.h>
#include <kiln/kiln.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "peer_inputs.h"
#include "timing.h"

namespace {

kiln::Device g_device = kiln::Device::cpu();

struct Conv {  // one 2-D convolution, stride 1, square padding
  long n, c, h, w, m, k, pad, groups;
  long oh() const { return h + 2 * pad - k + 1; }
  long ow() const { return w + 2 * pad - k + 1; }
  double flops() const { return 2.0 * n * m * oh() * ow() * (c / groups) * k * k; }
};

// The hand loop: for each (image, filter) an output plane, accumulated row by row from
// the window's rows of each input channel of the filter's group.
void hand_conv(const Conv& cv, const float* x, const float* w, const float* bias, bool relu, float* y) {
  const long oh = cv.oh(), ow = cv.ow(), cg = cv.c / cv.groups, mg = cv.m / cv.groups;
#pragma omp parallel for collapse(2) schedule(static)
  for (long b = 0; b < cv.n; ++b)
    for (long f = 0; f < cv.m; ++f) {
      float* out = y + (b * cv.m + f) * oh * ow;
      const float b0 = bias ? bias[f] : 0.0f;
      for (long i = 0; i < oh * ow; ++i) out[i] = b0;
      const long g = f / mg;
      for (long ci = 0; ci < cg; ++ci) {
        const float* plane = x + (b * cv.c + g * cg + ci) * cv.h * cv.w;
        const float* wk = w + (f * cg + ci) * cv.k * cv.k;
        for (long r = 0; r < oh; ++r)
          for (long kr = 0; kr < cv.k; ++kr) {
            const long ir = r + kr - cv.pad;
            if (ir < 0 || ir >= cv.h) continue;
            const float* in = plane + ir * cv.w;
            float* o = out + r * ow;
            for (long kc = 0; kc < cv.k; ++kc) {
              const float wv = wk[kr * cv.k + kc];
              const long lo = std::max(0L, cv.pad - kc), hi = std::min(ow, cv.w + cv.pad - kc);
              for (long col = lo; col < hi; ++col) o[col] += wv * in[col + kc - cv.pad];
            }
          }
      }
      if (relu)
        for (long i = 0; i < oh * ow; ++i) out[i] = std::max(out[i], 0.0f);
    }
}

struct Result {
  double median, min, max, checksum;
};

Result time_calls(int runs, const std::function<void()>& call, const std::function<double()>& checksum) {
  for (int i = 0; i < 3; ++i) call();
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) ms.push_back(kiln::bench::seconds(call) * 1e3);
  const auto [lo, hi] = std::minmax_element(ms.begin(), ms.end());
  return {kiln::bench::median(ms), *lo, *hi, checksum()};
}

void report(const char* name, const char* impl, const Conv& cv, const Result& r) {
  std::printf("%-4s %-6s median %8.3f ms  min %8.3f  max %8.3f  %6.1f GFLOP/s  checksum %.6g\n", name, impl, r.median,
              r.min, r.max, cv.flops() / r.median / 1e6, r.checksum);
}

double sum_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s;
}

// Runs workload `name` with every implementation asked for; false when checksums disagree.
bool run(const char* name, const Conv& cv, bool bias_relu, const std::string& impls, int runs) {
  const std::vector<float> x = peer_vector(cv.n * cv.c * cv.h * cv.w, 40, -1, 1);
  const std::vector<float> w = peer_vector(cv.m * (cv.c / cv.groups) * cv.k * cv.k, 41, -0.25, 0.25);
  const std::vector<float> bias = peer_vector(cv.m, 42, -1, 1);
  auto want = [&](const char* impl) { return ("," + impls + ",").find(std::string(",") + impl + ",") != std::string::npos; };
  std::vector<double> sums;
  if (want("hand")) {
    std::vector<float> y(static_cast<size_t>(cv.n * cv.m * cv.oh() * cv.ow()));
    const Result r = time_calls(
        runs, [&] { hand_conv(cv, x.data(), w.data(), bias_relu ? bias.data() : nullptr, bias_relu, y.data()); },
        [&] { return sum_of(y); });
    report(name, fmt::format("hand-{}t", omp_get_max_threads()).c_str(), cv, r);
    sums.push_back(r.checksum);
  }
  if (want("kiln")) {
    const kiln::Tensor xt = kiln::from_vector<float>(x, {cv.n, cv.c, cv.h, cv.w}, g_device);
    const kiln::Tensor wt = kiln::from_vector<float>(w, {cv.m, cv.c / cv.groups, cv.k, cv.k}, g_device);
    const kiln::Tensor bt = kiln::from_vector<float>(bias, {cv.m, 1, 1}, g_device);
    kiln::ConvOptions o;
    o.pad_low = o.pad_high = {cv.pad, cv.pad};
    o.groups = cv.groups;
    auto record = [&] {
      kiln::Tensor y = xt.conv(wt, o);
      return bias_relu ? (y + bt).relu() : y;
    };
    const Result r = time_calls(
        runs,
        [&] {
          record().eval();
          kiln::synchronize(g_device);
        },
        [&] { return sum_of(record().to_vector<float>()); });
    report(name, "kiln", cv, r);
    sums.push_back(r.checksum);
  }
  for (double s : sums)
    if (std::fabs(s - sums.front()) > 1e-3 * std::max(1.0, std::fabs(sums.front()))) {
      std::fprintf(stderr, "conv_bench: %s checksums disagree (%.9g vs %.9g)\n", name, s, sums.front());
      return false;
    }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string only = "W9,W10", impls = "kiln,hand";
  int runs = 21;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else if (std::strcmp(argv[i], "--impl") == 0 && i + 1 < argc) impls = argv[++i];
    else if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) g_device = kiln::Device::parse(argv[++i]);
    else {
      std::fprintf(stderr, "usage: kiln_conv_bench [--only W9,W10] [--impl kiln,hand] [--runs N] [--device D]\n");
      return 2;
    }
  }
  auto want = [&](const char* w) { return ("," + only + ",").find(std::string(",") + w + ",") != std::string::npos; };
  bool ok = true;
  if (want("W9")) ok = run("W9", Conv{4, 64, 56, 56, 64, 3, 1, 1}, true, impls, runs) && ok;
  if (want("W10")) ok = run("W10", Conv{1, 96, 112, 112, 96, 3, 1, 96}, false, impls, runs) && ok;
  return ok ? 0 : 1;
}
