// backends/toolchain.cpp - see kiln/backends/toolchain.h.
#include "kiln/backends/toolchain.h"

namespace kiln {

Toolchain::Toolchain(std::string cache_namespace, std::string device)
    : store_(std::move(cache_namespace), std::move(device)) {}

Toolchain::~Toolchain() = default;

}  // namespace kiln
