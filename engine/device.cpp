// engine/device.cpp - device names (parsing is the registry's: engine/registry.cpp).
#include "kiln/engine/device.h"

#include <fmt/format.h>

namespace kiln {

std::string Device::str() const {
  switch (kind) {
    case Kind::Cpu: return "cpu";
    case Kind::Interp: return "interp";
    case Kind::OpenCL: return fmt::format("opencl:{}", index);
    case Kind::Vulkan: return fmt::format("vulkan:{}", index);
  }
  return "?";
}

}  // namespace kiln
