// benchmarks/clblast_peer.cpp - the OpenCL GEMM peer: CLBlast (a tuned OpenCL BLAS) on the
// matmul workloads, with the peers' inputs, on the same OpenCL device kiln's `opencl:N` runs
// on. W6 is CLBlast's sgemm followed by a bias + relu kernel (a separate pass over C, as a
// BLAS user writes it); ATT is its strided batched sgemm.
//
//   kiln_clblast_peer [--device N] [--only W6,ATT] [--runs N]
// Prints lines in kiln_matmul_bench's format: median, min and max ms over N timed calls after
// 3 warm-ups, each ended by clFinish.
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <clblast.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "peer_inputs.h"

namespace {

[[noreturn]] void die(const std::string& what, int code) {
  std::fprintf(stderr, "kiln_clblast_peer: %s failed (%d)\n", what.c_str(), code);
  std::exit(1);
}
void check(cl_int err, const char* what) {
  if (err != CL_SUCCESS) die(what, err);
}

std::vector<float> gen(long n, uint64_t seed, double lo, double hi) {
  std::vector<float> out(static_cast<size_t>(n));
  for (long i = 0; i < n; ++i) out[static_cast<size_t>(i)] = peer_input(seed, i, lo, hi);
  return out;
}

struct Cl {
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;

  explicit Cl(int index) {
    cl_uint np = 0;
    check(clGetPlatformIDs(0, nullptr, &np), "clGetPlatformIDs");
    std::vector<cl_platform_id> platforms(np);
    check(clGetPlatformIDs(np, platforms.data(), nullptr), "clGetPlatformIDs");
    // Devices numbered across platforms in order, as kiln numbers opencl:N.
    int seen = 0;
    for (cl_platform_id p : platforms) {
      cl_uint nd = 0;
      if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS) continue;
      std::vector<cl_device_id> ds(nd);
      check(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ds.data(), nullptr), "clGetDeviceIDs");
      for (cl_device_id d : ds)
        if (seen++ == index) device = d;
    }
    if (!device) die("finding the OpenCL device", index);
    cl_int err = CL_SUCCESS;
    context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
    check(err, "clCreateContext");
    queue = clCreateCommandQueueWithProperties(context, device, nullptr, &err);
    check(err, "clCreateCommandQueue");
  }
  cl_mem upload(const std::vector<float>& v) {
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, v.size() * sizeof(float),
                              const_cast<float*>(v.data()), &err);
    check(err, "clCreateBuffer");
    return m;
  }
  cl_mem empty(size_t n) {
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(float), nullptr, &err);
    check(err, "clCreateBuffer");
    return m;
  }
};

const char* kEpilogue = R"(
__kernel void bias_relu(__global float* c, __global const float* bias, const int n) {
  const size_t i = get_global_id(0);
  const float v = c[i] + bias[i % n];
  c[i] = v < 0.0f ? 0.0f : v;
}
)";

void bench(Cl& cl, const char* name, double flops, int runs, const std::function<void()>& call) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < 3; ++i) call();
  check(clFinish(cl.queue), "clFinish");
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = clock::now();
    call();
    check(clFinish(cl.queue), "clFinish");
    ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  std::printf("%-4s median %8.3f ms  min %8.3f  max %8.3f  %6.1f GFLOP/s  (CLBlast)\n", name, med, ms.front(), ms.back(),
              flops / med / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
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
    cl_mem a = cl.upload(gen(n * n, 6, -1, 1)), b = cl.upload(gen(n * n, 7, -1, 1));
    cl_mem bias = cl.upload(gen(n, 8, -1, 1)), c = cl.empty(static_cast<size_t>(n * n));
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
    cl_mem q = cl.upload(gen(8 * 128 * 64, 20, -1, 1)), kt = cl.upload(gen(8 * 64 * 128, 21, -1, 1));
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
