// benchmarks/clblast_peer.cpp - the OpenCL GEMM peer: CLBlast (a tuned OpenCL BLAS) on the
// matmul workloads, with the peers' inputs, on the same OpenCL device kiln's `opencl:N` runs
// on. W6 is CLBlast's sgemm followed by a bias + relu kernel (a separate pass over C, as a
// BLAS user writes it); ATT is its strided batched sgemm.
//
//   kiln_clblast_peer [--device N] [--only W6,ATT] [--runs N]
// Prints lines in kiln_matmul_bench's format: median, min and max ms over N timed calls after
// 3 warm-ups, each ended by clFinish.
#include "opencl_peer.h"  // first: it sets the OpenCL version clblast.h's CL/cl.h sees

#include <clblast.h>

#include <cstring>
#include <string>

namespace {

using namespace opencl_peer;

const char* kEpilogue = R"(
__kernel void bias_relu(__global float* c, __global const float* bias, const int n) {
  const size_t i = get_global_id(0);
  const float v = c[i] + bias[i % n];
  c[i] = v < 0.0f ? 0.0f : v;
}
)";

void bench(Cl& cl, const char* name, double flops, int runs, const std::function<void()>& call) {
  const Timing t = time_calls(cl, runs, call);
  std::printf("%-4s median %8.3f ms  min %8.3f  max %8.3f  %6.1f GFLOP/s  (CLBlast)\n", name, t.median_ms, t.min_ms,
              t.max_ms, flops / t.median_ms / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  g_program = "kiln_clblast_peer";
  int device = 0, runs = 11;
  std::string only = "W6,ATT";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: kiln_clblast_peer [--device N] [--only W6,ATT] [--runs N]\n");
      return 2;
    }
  }
  auto want = [&](const std::string& w) { return ("," + only + ",").find("," + w + ",") != std::string::npos; };
  Cl cl(device);
  if (want("W6")) {  // relu(A[1024,1024] @ B[1024,1024] + bias[1024])
    const long n = 1024;
    cl_mem a = cl.upload(peer_vector(n * n, 6, -1, 1)), b = cl.upload(peer_vector(n * n, 7, -1, 1));
    cl_mem bias = cl.upload(peer_vector(n, 8, -1, 1)), c = cl.empty(static_cast<size_t>(n * n));
    cl_int err = CL_SUCCESS;
    const char* src = kEpilogue;
    cl_program p = clCreateProgramWithSource(cl.context, 1, &src, nullptr, &err);
    check(err, "clCreateProgramWithSource");
    check(clBuildProgram(p, 1, &cl.device, "", nullptr, nullptr), "clBuildProgram");
    cl_kernel k = clCreateKernel(p, "bias_relu", &err);
    check(err, "clCreateKernel");
    const cl_int ni = static_cast<cl_int>(n);
    check(clSetKernelArg(k, 0, sizeof c, &c), "clSetKernelArg");
    check(clSetKernelArg(k, 1, sizeof bias, &bias), "clSetKernelArg");
    check(clSetKernelArg(k, 2, sizeof ni, &ni), "clSetKernelArg");
    bench(cl, "W6", 2.0 * n * n * n, runs, [&] {
      const auto s = clblast::Gemm(clblast::Layout::kRowMajor, clblast::Transpose::kNo, clblast::Transpose::kNo, n, n, n,
                                   1.0f, a, 0, n, b, 0, n, 0.0f, c, 0, n, &cl.queue);
      if (s != clblast::StatusCode::kSuccess) die("clblast::Gemm", static_cast<int>(s));
      const size_t global = static_cast<size_t>(n * n);
      check(clEnqueueNDRangeKernel(cl.queue, k, 1, nullptr, &global, nullptr, 0, nullptr, nullptr), "bias_relu");
    });
  }
  if (want("ATT")) {  // [8,128,64] x [8,64,128]
    cl_mem q = cl.upload(peer_vector(8 * 128 * 64, 20, -1, 1)), kt = cl.upload(peer_vector(8 * 64 * 128, 21, -1, 1));
    cl_mem s = cl.empty(8 * 128 * 128);
    bench(cl, "ATT", 2.0 * 8 * 128 * 128 * 64, runs, [&] {
      const auto st = clblast::GemmStridedBatched(clblast::Layout::kRowMajor, clblast::Transpose::kNo, clblast::Transpose::kNo,
                                                  128, 128, 64, 1.0f, q, 0, 64, 128 * 64, kt, 0, 128, 64 * 128, 0.0f, s, 0,
                                                  128, 128 * 128, 8, &cl.queue);
      if (st != clblast::StatusCode::kSuccess) die("clblast::GemmStridedBatched", static_cast<int>(st));
    });
  }
  return 0;
}
