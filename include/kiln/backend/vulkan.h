// kiln/backend/vulkan.h - the Vulkan backend's shader compiler: GLSL compute shaders (the
// GLSL dialect of codegen/, kir::glsl_source) to SPIR-V, in-process.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/codegen/schedule.h"

namespace kiln::vulkan {

/// What `kiln codegen --target glsl|spirv` generates for while no Vulkan device is given: a
/// discrete GPU's capabilities (fp64 and int64, local memory, work-groups up to 1024, 64
/// compute units, no preferred vector width).
Capabilities reference_capabilities();

/// `source`, a GLSL 4.50 compute shader, compiled to SPIR-V for Vulkan 1.1 by shaderc
/// (optimized for performance). Throws kiln::Error with the compiler's messages (each
/// naming `name`:line) and the source on failure.
std::vector<uint32_t> compile_glsl(std::string_view source, std::string_view name);

/// SPIRV-Tools' validator (Vulkan 1.1 rules): "" when `spirv` is valid, else its messages.
std::string validate_spirv(std::span<const uint32_t> spirv);

/// `spirv` as SPIR-V assembly text.
std::string disassemble_spirv(std::span<const uint32_t> spirv);

}  // namespace kiln::vulkan
