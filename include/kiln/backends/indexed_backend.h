// kiln/backends/indexed_backend.h - the backends of numbered devices (opencl:0, vulkan:1...).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backends/backend.h"

namespace kiln {

/// The backend of device `kind:index` of the `count` devices of that kind, made by
/// `make(index)` on first use and kept for the process (kernels may still run during static
/// destruction). An index out of range is a kiln::Error listing the devices by `name(i)`, or
/// saying `none_hint` where there are none.
Backend& indexed_backend(std::string_view kind, int index, int count, const std::function<std::string(int)>& name,
                         std::string_view none_hint, const std::function<Backend*(int)>& make);

/// The public descriptions (`info`) of the devices a backend's runtime found, in its order.
template <class Found>
auto device_infos(const std::vector<Found>& found) {
  std::vector<decltype(Found::info)> out;
  for (const Found& d : found) out.push_back(d.info);
  return out;
}

/// The same for a backend class `B` constructed from a device index, over `devices` (each
/// with a `name`).
template <class B, class Info>
Backend& indexed_backend(std::string_view kind, int index, const std::vector<Info>& devices,
                         std::string_view none_hint) {
  return indexed_backend(
      kind, index, static_cast<int>(devices.size()), [&](int i) { return devices[static_cast<size_t>(i)].name; },
      none_hint, [](int i) -> Backend* { return new B(i); });
}

}  // namespace kiln
