// benchmarks/matmul_bench.cpp - kiln on the matmul workloads of ../shared/peers (W6, W7) and
// an attention-shaped batched product, with the peers' inputs, timed per call (record, plan
// cache, run); compare with the peers' P6 hand GEMM and P7 OpenBLAS run in alternating
// processes (benchmarks/run.sh with MATMUL_PEERS=1). Two more forms of the same products
// have no peer line of their own: W6T is W6 with B given as B^T (a linear layer's [out, in]
// weight, read through a transposed view), EIN the attention product written as an einsum
// (q k^T as a broadcast product summed over the head dim).
//
//   kiln_matmul_bench [--only W6,W7,ATT,W6T,EIN] [--runs N] [--device D]
// One line per workload: median, min and max ms over N timed calls after 3 warm-ups, GFLOP/s.
// With --device (opencl:0...), the inputs live on that device and each timed call ends in
// kiln::synchronize: queue devices return from a launch once it is enqueued.
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "peer_inputs.h"

namespace {

kiln::Device g_device = kiln::Device::cpu();

kiln::Tensor tensor(long rows, long cols, uint64_t seed, double lo, double hi) {
  return kiln::from_vector<float>(peer_vector(rows * cols, seed, lo, hi), {rows, cols}, g_device);
}

void bench(const char* name, double flops, int runs, const std::function<kiln::Tensor()>& record) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < 3; ++i) record().eval();
  kiln::synchronize(g_device);
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = clock::now();
    record().eval();
    kiln::synchronize(g_device);
    ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  const std::vector<float> out = record().to_vector<float>();
  double sum = 0;
  for (float v : out) sum += v;
  std::printf("%-4s median %8.3f ms  min %8.3f  max %8.3f  %6.1f GFLOP/s  checksum %.6g\n", name, med, ms.front(),
              ms.back(), flops / med / 1e6, sum);
}

}  // namespace

int main(int argc, char** argv) {
  std::string only = "W6,W7,ATT,W6T,EIN";
  int runs = 21;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) g_device = kiln::Device::parse(argv[++i]);
    else {
      std::fprintf(stderr, "usage: kiln_matmul_bench [--only W6,W7,ATT,W6T,EIN] [--runs N] [--device D]\n");
      return 2;
    }
  }
  auto want = [&](const std::string& w) { return ("," + only + ",").find("," + w + ",") != std::string::npos; };
  if (want("W6")) {  // relu(A[1024,1024] @ B[1024,1024] + bias[1024])
    const long n = 1024;
    kiln::Tensor a = tensor(n, n, 6, -1, 1), b = tensor(n, n, 7, -1, 1);
    kiln::Tensor bias = kiln::from_vector<float>(peer_vector(n, 8, -1, 1), {n}, g_device);
    bench("W6", 2.0 * n * n * n, runs, [&] { return (a.matmul(b) + bias).relu(); });
  }
  if (want("W7")) {  // MLP, batch 256: 784 -> 512 -> 512 -> 10, relu, softmax
    kiln::Tensor x = tensor(256, 784, 9, 0, 1);
    kiln::Tensor w1 = tensor(784, 512, 10, -1.0 / 16, 1.0 / 16), w2 = tensor(512, 512, 12, -1.0 / 16, 1.0 / 16);
    kiln::Tensor w3 = tensor(512, 10, 14, -1.0 / 16, 1.0 / 16);
    kiln::Tensor b1 = kiln::from_vector<float>(peer_vector(512, 11, -1.0 / 16, 1.0 / 16), {512}, g_device);
    kiln::Tensor b2 = kiln::from_vector<float>(peer_vector(512, 13, -1.0 / 16, 1.0 / 16), {512}, g_device);
    kiln::Tensor b3 = kiln::from_vector<float>(peer_vector(10, 15, -1.0 / 16, 1.0 / 16), {10}, g_device);
    const double flops = 2.0 * 256 * (784.0 * 512 + 512.0 * 512 + 512.0 * 10);
    bench("W7", flops, runs, [&] {
      kiln::Tensor h1 = (x.matmul(w1) + b1).relu();
      kiln::Tensor h2 = (h1.matmul(w2) + b2).relu();
      return (h2.matmul(w3) + b3).softmax(-1);
    });
  }
  if (want("W6T")) {  // relu(A[1024,1024] @ Bt[1024,1024]^T + bias[1024])
    const long n = 1024;
    kiln::Tensor a = tensor(n, n, 6, -1, 1), bt = tensor(n, n, 7, -1, 1);
    kiln::Tensor bias = kiln::from_vector<float>(peer_vector(n, 8, -1, 1), {n}, g_device);
    bench("W6T", 2.0 * n * n * n, runs, [&] { return (a.matmul(bt.transpose(0, 1)) + bias).relu(); });
  }
  if (want("EIN")) {  // einsum("bqd,bkd->bqk") of [8,128,64] and [8,128,64]
    kiln::Tensor q = kiln::from_vector<float>(peer_vector(8 * 128 * 64, 20, -1, 1), {8, 128, 64}, g_device);
    kiln::Tensor k = kiln::from_vector<float>(peer_vector(8 * 128 * 64, 21, -1, 1), {8, 128, 64}, g_device);
    bench("EIN", 2.0 * 8 * 128 * 128 * 64, runs, [&] {
      const kiln::Tensor qe = q.reshape({8, 128, 1, 64}).expand({8, 128, 128, 64});
      const kiln::Tensor ke = k.reshape({8, 1, 128, 64}).expand({8, 128, 128, 64});
      return (qe * ke).sum({3});
    });
  }
  if (want("ATT")) {  // attention scores: [8,128,64] x [8,64,128]
    kiln::Tensor q = kiln::from_vector<float>(peer_vector(8 * 128 * 64, 20, -1, 1), {8, 128, 64}, g_device);
    kiln::Tensor k = kiln::from_vector<float>(peer_vector(8 * 64 * 128, 21, -1, 1), {8, 64, 128}, g_device);
    bench("ATT", 2.0 * 8 * 128 * 128 * 64, runs, [&] { return q.matmul(k); });
  }
  return 0;
}
