// benchmarks/opencl_peer.h - what the OpenCL peers (kiln_clblast_peer, kiln_opencl_copy_peer)
// share: the device numbered as kiln numbers `opencl:N`, a context and queue on it, buffers,
// and the timing loop (3 warm-ups, then N calls each ended by clFinish; median, min, max).
#pragma once

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "peer_inputs.h"

namespace opencl_peer {

/// The program's name in error messages; each peer sets it first thing in main.
inline const char* g_program = "opencl_peer";

[[noreturn]] inline void die(const std::string& what, int code) {
  std::fprintf(stderr, "%s: %s failed (%d)\n", g_program, what.c_str(), code);
  std::exit(1);
}
inline void check(cl_int err, const char* what) {
  if (err != CL_SUCCESS) die(what, err);
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

struct Timing {
  double median_ms, min_ms, max_ms;
};

/// 3 warm-up calls, then `runs` timed ones, each ended by clFinish.
inline Timing time_calls(Cl& cl, int runs, const std::function<void()>& call) {
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
  return {ms[ms.size() / 2], ms.front(), ms.back()};
}

}  // namespace opencl_peer
