// benchmarks/openblas_peer.cpp - the CPU peer for the attention-shaped batched product
// (issue 11's third target): OpenBLAS sgemm called once per batch, as a BLAS user without a
// batched interface writes it, with the peers' inputs, on the threads OpenBLAS is given.
//
//   kiln_openblas_peer [--runs N] [--threads T]
// Prints a line in kiln_matmul_bench's format: median, min and max ms over N timed calls
// after 3 warm-ups, GFLOP/s and the checksum (equal to kiln's for the same product).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "peer_inputs.h"

int main(int argc, char** argv) {
  int runs = 21, threads = 2;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: kiln_openblas_peer [--runs N] [--threads T]\n");
      return 2;
    }
  }
  openblas_set_num_threads(threads);
  // ATT: [8,128,64] x [8,64,128], the inputs kiln_matmul_bench uses.
  constexpr int kBatch = 8, kM = 128, kK = 64, kN = 128;
  const std::vector<float> q = peer_vector(kBatch * kM * kK, 20, -1, 1), k = peer_vector(kBatch * kK * kN, 21, -1, 1);
  std::vector<float> s(static_cast<size_t>(kBatch * kM * kN));
  auto call = [&] {
    for (int b = 0; b < kBatch; ++b)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kM, kN, kK, 1.0f, q.data() + b * kM * kK, kK,
                  k.data() + b * kK * kN, kN, 0.0f, s.data() + b * kM * kN, kN);
  };
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < 3; ++i) call();
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  double sum = 0;
  for (float v : s) sum += v;
  std::printf("ATT  median %8.3f ms  min %8.3f  max %8.3f  %6.1f GFLOP/s  checksum %.6g  (OpenBLAS loop, %d threads)\n", med,
              ms.front(), ms.back(), 2.0 * kBatch * kM * kN * kK / med / 1e6, sum, threads);
  return 0;
}
