// kiln/engine/device.h - where tensors live and kernels run.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

/// A device: `cpu` (the default), `interp` (the reference interpreter, always available),
/// `opencl:N` (the N-th OpenCL device of the machine), and later `vulkan:N`.
struct Device {
  enum class Kind : uint8_t { Cpu, Interp, OpenCL };

  Kind kind = Kind::Cpu;
  int index = 0;

  static Device cpu() { return {Kind::Cpu, 0}; }
  static Device interp() { return {Kind::Interp, 0}; }
  static Device opencl(int index = 0) { return {Kind::OpenCL, index}; }
  /// "cpu", "interp", "opencl:N" ("opencl" is opencl:0); throws kiln::Error naming the
  /// devices that exist otherwise.
  static Device parse(std::string_view name);

  std::string str() const;
  friend bool operator==(const Device& a, const Device& b) = default;
};

}  // namespace kiln
