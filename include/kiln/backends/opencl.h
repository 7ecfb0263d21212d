// kiln/backends/opencl.h - the `opencl:N` backends: OpenCL C generated from the Kernel IR.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/backends/backend.h"

namespace kiln {

/// One OpenCL device, as `kiln devices` lists it. Devices are numbered across platforms in
/// the order the ICD loader reports them: `opencl:0` is the first.
struct OpenClDeviceInfo {
  std::string platform;          // "Portable Computing Language"
  std::string platform_version;  // "OpenCL 3.0 PoCL 3.1+debian ..."
  std::string name;              // "pthread-skylake-avx512-AMD EPYC ..."
  std::string vendor;
  std::string driver_version;    // "3.1+debian"
  std::string device_version;    // "OpenCL 3.0 PoCL HSTR: ..."
  std::string c_version;         // "OpenCL C 1.2 PoCL"
  std::string type;              // "cpu", "gpu", "accelerator"
  int64_t global_memory = 0;     // bytes
  int64_t max_allocation = 0;    // bytes in one buffer
  int64_t local_memory = 0;      // bytes per work-group
  int compute_units = 0;
  int64_t max_work_group = 0;
  int preferred_float_vector = 1;  // CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT: 1 on most GPUs
  bool fp64 = false;
  bool int64 = true;
  /// CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT: f32 `/` and sqrt can be built correctly rounded
  /// (-cl-fp32-correctly-rounded-divide-sqrt); without it they may be 2.5 and 3 ulp off.
  bool correctly_rounded_divide_sqrt = false;
  bool subgroups = false;
  int base_address_align = 0;  // bytes, CL_DEVICE_MEM_BASE_ADDR_ALIGN: a buffer's base
  int64_t max_parameter_bytes = 0;  // CL_DEVICE_MAX_PARAMETER_SIZE: a kernel's arguments together
};

/// Every OpenCL device this process can use (empty when no platform is installed). The
/// first call enumerates them; the list does not change afterwards.
const std::vector<OpenClDeviceInfo>& opencl_devices();
/// How `kiln devices` describes `opencl:index`: name, platform, driver, memory, features.
std::string opencl_device_description(int index);

/// The backend of `opencl:index`. Throws kiln::Error naming the devices that exist when the
/// index is out of range, and the OpenCL error when the device fails to initialize.
Backend& opencl_backend(int index);

}  // namespace kiln
