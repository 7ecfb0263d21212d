// runtime/device.cpp - device names.
#include "kiln/runtime/device.h"

#include "kiln/support/error.h"

namespace kiln {

Device Device::parse(std::string_view name) {
  if (name == "cpu") return cpu();
  if (name == "interp") return interp();
  throw Error("unknown device '" + std::string(name) + "' (available: cpu, interp)");
}

std::string Device::str() const {
  switch (kind) {
    case Kind::Cpu: return "cpu";
    case Kind::Interp: return "interp";
  }
  return "?";
}

}  // namespace kiln
