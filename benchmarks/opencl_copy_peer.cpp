// benchmarks/opencl_copy_peer.cpp - the bandwidth reference for the workloads on `opencl:N`:
// a device-to-device copy of the same bytes, by the driver (clEnqueueCopyBuffer) and by the
// simplest copy kernel (one float per work-item), on the same device kiln runs on.
//
//   kiln_opencl_copy_peer [--device N] [--mib M,...] [--runs N]
// For each size (MiB of floats, default 64: W1's 16M floats), prints the median, min and max
// ms over N timed calls after 3 warm-ups, each ended by clFinish, and GB/s counting the bytes
// read and written, as kiln_workload_bench counts a workload's bytes.
#include "opencl_peer.h"

#include <cstring>
#include <sstream>
#include <string>

namespace {

using namespace opencl_peer;

const char* kCopy = R"(
__kernel void copy(__global const float* x, __global float* y) {
  const size_t i = get_global_id(0);
  y[i] = x[i];
}
)";

void report(const char* how, double mib, const Timing& t) {
  const double bytes = 2.0 * mib * 1024 * 1024;
  std::printf("COPY %-7s %6.0f MiB  median %8.3f ms  min %8.3f  max %8.3f  %8.1f GB/s\n", how, mib, t.median_ms,
              t.min_ms, t.max_ms, bytes / t.median_ms / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  g_program = "kiln_opencl_copy_peer";
  int device = 0, runs = 21;
  std::string sizes = "64";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--mib") == 0 && i + 1 < argc) sizes = argv[++i];
    else if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: kiln_opencl_copy_peer [--device N] [--mib M,...] [--runs N]\n");
      return 2;
    }
  }
  Cl cl(device);
  cl_int err = CL_SUCCESS;
  cl_program p = clCreateProgramWithSource(cl.context, 1, &kCopy, nullptr, &err);
  check(err, "clCreateProgramWithSource");
  check(clBuildProgram(p, 1, &cl.device, "", nullptr, nullptr), "clBuildProgram");
  cl_kernel k = clCreateKernel(p, "copy", &err);
  check(err, "clCreateKernel");

  std::stringstream list(sizes);
  for (std::string item; std::getline(list, item, ',');) {
    const double mib = std::atof(item.c_str());
    const size_t n = static_cast<size_t>(mib * 1024 * 1024 / sizeof(float));
    if (n == 0) die("parsing --mib " + item, 0);
    cl_mem x = cl.upload(peer_vector(static_cast<long>(n), 1, -1, 1)), y = cl.empty(n);
    report("driver", mib, time_calls(cl, runs, [&] {
             check(clEnqueueCopyBuffer(cl.queue, x, y, 0, 0, n * sizeof(float), 0, nullptr, nullptr), "copy");
           }));
    check(clSetKernelArg(k, 0, sizeof x, &x), "clSetKernelArg");
    check(clSetKernelArg(k, 1, sizeof y, &y), "clSetKernelArg");
    report("kernel", mib, time_calls(cl, runs, [&] {
             check(clEnqueueNDRangeKernel(cl.queue, k, 1, nullptr, &n, nullptr, 0, nullptr, nullptr), "copy kernel");
           }));
    clReleaseMemObject(x);
    clReleaseMemObject(y);
  }
  return 0;
}
