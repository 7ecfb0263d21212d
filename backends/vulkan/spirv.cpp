// backends/vulkan/spirv.cpp - GLSL -> SPIR-V with shaderc, and SPIRV-Tools' validator and
// disassembler (kiln/backend/vulkan.h).
#include <fmt/format.h>
#include <shaderc/shaderc.hpp>
#include <spirv-tools/libspirv.hpp>

#include "kiln/backend/vulkan.h"
#include "kiln/support/error.h"

namespace kiln::vulkan {
namespace {

constexpr spv_target_env kTargetEnv = SPV_ENV_VULKAN_1_1;

// shaderc::Compiler is thread-safe for compiles; one per process saves glslang's
// initialization (~100 ms) on every shader.
const shaderc::Compiler& compiler() {
  static const shaderc::Compiler c;
  return c;
}

}  // namespace

Capabilities reference_capabilities() {
  Capabilities c;
  c.fp64 = c.int64 = true;
  c.local_memory = true;
  c.max_work_group = 1024;
  c.vector_bytes = 4;
  c.cores = 64;
  c.exact_math = false;
  return c;
}

std::vector<uint32_t> compile_glsl(std::string_view source, std::string_view name) {
  shaderc::CompileOptions options;
  options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_1);
  options.SetOptimizationLevel(shaderc_optimization_level_performance);
  const std::string file(name);
  const shaderc::SpvCompilationResult r =
      compiler().CompileGlslToSpv(source.data(), source.size(), shaderc_compute_shader, file.c_str(), options);
  if (r.GetCompilationStatus() != shaderc_compilation_status_success)
    throw Error(fmt::format("vulkan: shaderc could not compile the generated GLSL {}:\n{}\n{}", file, r.GetErrorMessage(),
                            source));
  return {r.cbegin(), r.cend()};
}

std::string validate_spirv(std::span<const uint32_t> spirv) {
  spvtools::SpirvTools tools(kTargetEnv);
  std::string messages;
  tools.SetMessageConsumer([&](spv_message_level_t, const char*, const spv_position_t& at, const char* message) {
    messages += fmt::format("word {}: {}\n", at.index, message);
  });
  if (tools.Validate(spirv.data(), spirv.size())) return "";
  return messages.empty() ? "invalid SPIR-V\n" : messages;
}

std::string disassemble_spirv(std::span<const uint32_t> spirv) {
  spvtools::SpirvTools tools(kTargetEnv);
  std::string text;
  if (!tools.Disassemble(spirv.data(), spirv.size(), &text, SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES))
    throw Error("vulkan: SPIRV-Tools could not disassemble the module");
  return text;
}

}  // namespace kiln::vulkan
