// kiln/engine/device.h - where tensors live and kernels run.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

/// A device: `cpu` (the default), `interp` (the reference interpreter, always available),
/// `opencl:N` (the N-th OpenCL device of the machine) and `vulkan:N` (the N-th Vulkan device).
struct Device {
  enum class Kind : uint8_t { Cpu, Interp, OpenCL, Vulkan };

  Kind kind = Kind::Cpu;
  int index = 0;

  static Device cpu() { return {Kind::Cpu, 0}; }
  static Device interp() { return {Kind::Interp, 0}; }
  static Device opencl(int index = 0) { return {Kind::OpenCL, index}; }
  static Device vulkan(int index = 0) { return {Kind::Vulkan, index}; }
  /// "cpu", "interp", "opencl:N" ("opencl" is opencl:0), "vulkan:N" ("vulkan" is vulkan:0); throws kiln::Error naming the
  /// devices that exist otherwise.
  static Device parse(std::string_view name);

  std::string str() const;
  friend bool operator==(const Device& a, const Device& b) = default;
};

}  // namespace kiln
