// backends/opencl/cl_api.h - the OpenCL C API as the opencl backend uses it: errors as
// kiln::Error, info queries as values, handles that release themselves, and the devices of
// every platform.
#pragma once

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/backends/opencl.h"

namespace kiln::opencl {

/// "CL_OUT_OF_RESOURCES (-5)".
std::string error_name(cl_int err);
/// Throws kiln::Error "opencl: <what>: <error name>" unless `err` is CL_SUCCESS.
void check(cl_int err, std::string_view what);

std::string device_string(cl_device_id d, cl_device_info what);
std::string platform_string(cl_platform_id p, cl_platform_info what);
template <class T>
T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  check(clGetDeviceInfo(d, what, sizeof v, &v, nullptr), "clGetDeviceInfo");
  return v;
}

/// A device found on a platform, with what `kiln devices` shows of it.
struct FoundDevice {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  OpenClDeviceInfo info;
};
/// Every device of every platform, enumerated once per process.
const std::vector<FoundDevice>& found_devices();

/// An owned OpenCL object, released by `Release` (clReleaseMemObject...).
template <class T, cl_int (*Release)(T)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T h) : h_(h) {}
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  ~Handle() { reset(); }
  void reset() {
    if (h_) Release(h_);
    h_ = nullptr;
  }
  T get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }

 private:
  T h_ = nullptr;
};
using Context = Handle<cl_context, clReleaseContext>;
using Queue = Handle<cl_command_queue, clReleaseCommandQueue>;
using Mem = Handle<cl_mem, clReleaseMemObject>;
using Program = Handle<cl_program, clReleaseProgram>;
using KernelHandle = Handle<cl_kernel, clReleaseKernel>;

}  // namespace kiln::opencl
