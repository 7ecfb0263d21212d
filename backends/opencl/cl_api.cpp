// backends/opencl/cl_api.cpp - see cl_api.h.
#include "cl_api.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "kiln/backends/indexed_backend.h"
#include "kiln/support/units.h"
#include "kiln/runtime/disk_cache.h"
#include "kiln/support/error.h"
#include "kiln/support/log.h"

namespace kiln::opencl {

std::string error_name(cl_int err) {
  const char* name = "unknown error";
  switch (err) {
#define KILN_CL_ERROR(e) \
  case e: name = #e; break;
    KILN_CL_ERROR(CL_DEVICE_NOT_FOUND)
    KILN_CL_ERROR(CL_DEVICE_NOT_AVAILABLE)
    KILN_CL_ERROR(CL_COMPILER_NOT_AVAILABLE)
    KILN_CL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    KILN_CL_ERROR(CL_OUT_OF_RESOURCES)
    KILN_CL_ERROR(CL_OUT_OF_HOST_MEMORY)
    KILN_CL_ERROR(CL_BUILD_PROGRAM_FAILURE)
    KILN_CL_ERROR(CL_INVALID_VALUE)
    KILN_CL_ERROR(CL_INVALID_PLATFORM)
    KILN_CL_ERROR(CL_INVALID_DEVICE)
    KILN_CL_ERROR(CL_INVALID_CONTEXT)
    KILN_CL_ERROR(CL_INVALID_COMMAND_QUEUE)
    KILN_CL_ERROR(CL_INVALID_MEM_OBJECT)
    KILN_CL_ERROR(CL_INVALID_BINARY)
    KILN_CL_ERROR(CL_INVALID_BUILD_OPTIONS)
    KILN_CL_ERROR(CL_INVALID_PROGRAM)
    KILN_CL_ERROR(CL_INVALID_PROGRAM_EXECUTABLE)
    KILN_CL_ERROR(CL_INVALID_KERNEL_NAME)
    KILN_CL_ERROR(CL_INVALID_KERNEL)
    KILN_CL_ERROR(CL_INVALID_ARG_INDEX)
    KILN_CL_ERROR(CL_INVALID_ARG_VALUE)
    KILN_CL_ERROR(CL_INVALID_ARG_SIZE)
    KILN_CL_ERROR(CL_INVALID_KERNEL_ARGS)
    KILN_CL_ERROR(CL_INVALID_WORK_DIMENSION)
    KILN_CL_ERROR(CL_INVALID_WORK_GROUP_SIZE)
    KILN_CL_ERROR(CL_INVALID_WORK_ITEM_SIZE)
    KILN_CL_ERROR(CL_INVALID_GLOBAL_OFFSET)
    KILN_CL_ERROR(CL_INVALID_BUFFER_SIZE)
    KILN_CL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE)
    KILN_CL_ERROR(CL_INVALID_OPERATION)
#undef KILN_CL_ERROR
    case -1001: name = "CL_PLATFORM_NOT_FOUND_KHR"; break;
    default: break;
  }
  return fmt::format("{} ({})", name, err);
}

void check(cl_int err, std::string_view what) {
  if (err != CL_SUCCESS) throw Error(fmt::format("opencl: {}: {}", what, error_name(err)));
}

namespace {

// A string query of the clGet*Info family: the size, then the text, trailing NULs and
// blanks dropped (drivers pad some).
template <class Object, class Info>
std::string info_string(cl_int (*get)(Object, Info, size_t, void*, size_t*), Object o, Info what, const char* name) {
  size_t n = 0;
  check(get(o, what, 0, nullptr, &n), name);
  std::string s(n, '\0');
  check(get(o, what, n, s.data(), nullptr), name);
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::string device_string(cl_device_id d, cl_device_info what) {
  return info_string(clGetDeviceInfo, d, what, "clGetDeviceInfo");
}

std::string platform_string(cl_platform_id p, cl_platform_info what) {
  return info_string(clGetPlatformInfo, p, what, "clGetPlatformInfo");
}

namespace {

OpenClDeviceInfo describe(cl_platform_id p, cl_device_id d) {
  OpenClDeviceInfo i;
  i.platform = platform_string(p, CL_PLATFORM_NAME);
  i.platform_version = platform_string(p, CL_PLATFORM_VERSION);
  i.name = device_string(d, CL_DEVICE_NAME);
  i.vendor = device_string(d, CL_DEVICE_VENDOR);
  i.driver_version = device_string(d, CL_DRIVER_VERSION);
  i.device_version = device_string(d, CL_DEVICE_VERSION);
  i.c_version = device_string(d, CL_DEVICE_OPENCL_C_VERSION);
  const auto type = device_value<cl_device_type>(d, CL_DEVICE_TYPE);
  i.type = (type & CL_DEVICE_TYPE_GPU) ? "gpu" : (type & CL_DEVICE_TYPE_CPU) ? "cpu"
           : (type & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator" : "other";
  i.global_memory = static_cast<int64_t>(device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE));
  i.max_allocation = static_cast<int64_t>(device_value<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
  i.local_memory = static_cast<int64_t>(device_value<cl_ulong>(d, CL_DEVICE_LOCAL_MEM_SIZE));
  i.compute_units = static_cast<int>(device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS));
  i.max_work_group = static_cast<int64_t>(device_value<size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE));
  i.preferred_float_vector = std::max(1, static_cast<int>(device_value<cl_uint>(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT)));
  i.fp64 = device_value<cl_device_fp_config>(d, CL_DEVICE_DOUBLE_FP_CONFIG) != 0;
  i.correctly_rounded_divide_sqrt =
      (device_value<cl_device_fp_config>(d, CL_DEVICE_SINGLE_FP_CONFIG) & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
  i.base_address_align = static_cast<int>(device_value<cl_uint>(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8);
  i.max_parameter_bytes = static_cast<int64_t>(device_value<size_t>(d, CL_DEVICE_MAX_PARAMETER_SIZE));
  const std::string ext = device_string(d, CL_DEVICE_EXTENSIONS);
  // Embedded profiles may lack 64-bit integers; full profiles have them.
  i.int64 = device_string(d, CL_DEVICE_PROFILE) == "FULL_PROFILE" || ext.find("cles_khr_int64") != std::string::npos;
  i.subgroups = ext.find("cl_khr_subgroups") != std::string::npos;
  return i;
}

std::vector<FoundDevice> enumerate() {
  std::vector<FoundDevice> out;
  // PoCL keeps the programs it compiles in a cache of its own, in the home directory unless
  // told otherwise, and runs what it finds there: it goes inside kiln's cache root (which
  // kiln checks no other user can write) unless the user chose a place for it. Read by PoCL
  // when the first platform call loads it, so set before it.
  if (std::getenv("POCL_CACHE_DIR") == nullptr) {
    const std::filesystem::path root = DiskCache::default_root();
    std::string why;
    if (!root.empty() && untrusted_cache_dir(root).empty() && create_private_dirs(root / "pocl", why))
      ::setenv("POCL_CACHE_DIR", (root / "pocl").c_str(), 0);
  }
  cl_uint platforms = 0;
  if (cl_int err = clGetPlatformIDs(0, nullptr, &platforms); err != CL_SUCCESS || platforms == 0) {
    if (err != CL_SUCCESS && err != -1001) warn(fmt::format("opencl: listing platforms failed: {}", error_name(err)));
    return out;
  }
  std::vector<cl_platform_id> ids(platforms);
  check(clGetPlatformIDs(platforms, ids.data(), nullptr), "clGetPlatformIDs");
  for (cl_platform_id p : ids) {
    cl_uint n = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS || n == 0) continue;
    std::vector<cl_device_id> devices(n);
    check(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n, devices.data(), nullptr), "clGetDeviceIDs");
    for (cl_device_id d : devices) {
      try {
        out.push_back({p, d, describe(p, d)});
      } catch (const Error& e) {
        warn(fmt::format("opencl: skipping a device that does not answer: {}", e.what()));
      }
    }
  }
  return out;
}

}  // namespace

const std::vector<FoundDevice>& found_devices() {
  static const std::vector<FoundDevice> devices = enumerate();
  return devices;
}

}  // namespace kiln::opencl

namespace kiln {

const std::vector<OpenClDeviceInfo>& opencl_devices() {
  static const std::vector<OpenClDeviceInfo> infos = device_infos(opencl::found_devices());
  return infos;
}

std::string opencl_device_description(int index) {
  const OpenClDeviceInfo& i = opencl_devices().at(static_cast<size_t>(index));
  return fmt::format(
      "{} ({})\n    platform {} ({}), driver {}, {}\n"
      "    {} global memory (one buffer up to {}), {} local, {} compute units, work-groups up to {}\n"
      "    fp64 {}, int64 {}, subgroups {}, preferred float vector {}, correctly rounded f32 divide/sqrt {}",
      i.name, i.type, i.platform, i.platform_version, i.driver_version, i.c_version, human_bytes(i.global_memory),
      human_bytes(i.max_allocation), human_bytes(i.local_memory), i.compute_units, i.max_work_group, i.fp64 ? "yes" : "no",
      i.int64 ? "yes" : "no", i.subgroups ? "yes" : "no", i.preferred_float_vector,
      i.correctly_rounded_divide_sqrt ? "yes" : "no");
}

}  // namespace kiln
