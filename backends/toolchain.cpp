// backends/toolchain.cpp - see kiln/backend/toolchain.h.
#include "kiln/backend/toolchain.h"

namespace kiln {

Toolchain::Toolchain(std::string cache_namespace, std::string device)
    : store_(std::move(cache_namespace), std::move(device)) {}

Toolchain::~Toolchain() = default;

}  // namespace kiln
