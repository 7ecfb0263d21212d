// kiln/backends/indexed_backend.h - the backends of numbered devices (opencl:0, vulkan:1...).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "kiln/backends/backend.h"

namespace kiln {

/// The backend of device `kind:index` of the `count` devices of that kind, made by
/// `make(index)` on first use and kept for the process (kernels may still run during static
/// destruction). An index out of range is a kiln::Error listing the devices by `name(i)`, or
/// saying `none_hint` where there are none.
Backend& indexed_backend(std::string_view kind, int index, int count, const std::function<std::string(int)>& name,
                         std::string_view none_hint, const std::function<Backend*(int)>& make);

}  // namespace kiln
