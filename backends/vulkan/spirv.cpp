// backends/vulkan/spirv.cpp - GLSL -> SPIR-V with shaderc, and SPIRV-Tools' validator and
// disassembler (kiln/backends/vulkan.h).
#include <fmt/format.h>
#include <shaderc/shaderc.hpp>
#include <spirv-tools/libspirv.hpp>

#include "kiln/backends/vulkan.h"
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
  c.family = DeviceFamily::WorkItems;
  c.local_memory = true;
  c.max_work_group = 1024;
  c.subgroup_size = 32;
  c.vector_bytes = 4;
  c.cores = 64;
  c.exact_math = false;
  return c;
}

std::vector<uint32_t> compile_glsl(std::string_view source, std::string_view name, bool optimize) {
  shaderc::CompileOptions options;
  options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_1);
  options.SetOptimizationLevel(optimize ? shaderc_optimization_level_performance : shaderc_optimization_level_zero);
  const std::string file(name);
  const shaderc::SpvCompilationResult r =
      compiler().CompileGlslToSpv(source.data(), source.size(), shaderc_compute_shader, file.c_str(), options);
  if (r.GetCompilationStatus() != shaderc_compilation_status_success)
    throw Error(fmt::format("vulkan: shaderc could not compile the generated GLSL {}:\n{}\n{}", file, r.GetErrorMessage(),
                            source));
  return {r.cbegin(), r.cend()};
}

std::vector<uint32_t> with_float_controls(std::span<const uint32_t> spirv, const FloatControls& controls) {
  if (!controls.signed_zero_inf_nan && !controls.f32_subnormals && !controls.f64_subnormals)
    return {spirv.begin(), spirv.end()};
  // Through SPIR-V assembly: glslang's GL_EXT_spirv_intrinsics keeps one execution mode per
  // opcode, and f32 and f64 need one each.
  spvtools::SpirvTools tools(kTargetEnv);
  std::string text;
  if (!tools.Disassemble(spirv.data(), spirv.size(), &text, SPV_BINARY_TO_TEXT_OPTION_NONE))
    throw Error("vulkan: SPIRV-Tools could not disassemble the module");
  const size_t entry = text.find("OpEntryPoint GLCompute ");
  const size_t memory_model = text.find("OpMemoryModel");
  if (entry == std::string::npos || memory_model == std::string::npos)
    throw Error("vulkan: a compute module without an entry point or memory model");
  const size_t id = entry + std::string_view("OpEntryPoint GLCompute ").size();
  const std::string main = text.substr(id, text.find(' ', id) - id);
  const bool doubles = text.find("OpCapability Float64") != std::string::npos;
  std::string modes, capabilities;
  auto add = [&](const char* mode, bool f32, bool f64) {
    if (!f32 && !(f64 && doubles)) return;
    capabilities += fmt::format("OpCapability {}\n", mode);
    if (f32) modes += fmt::format("OpExecutionMode {} {} 32\n", main, mode);
    if (f64 && doubles) modes += fmt::format("OpExecutionMode {} {} 64\n", main, mode);
  };
  add("SignedZeroInfNanPreserve", controls.signed_zero_inf_nan, controls.signed_zero_inf_nan);
  add("DenormPreserve", controls.f32_subnormals, controls.f64_subnormals);
  if (modes.empty()) return {spirv.begin(), spirv.end()};
  // The module's sections in order: capabilities, extensions, imports, the memory model,
  // entry points, execution modes. Inserted from the last section back, so that the
  // positions found stay valid.
  const size_t import = text.find("OpExtInstImport");
  const size_t imports = import < memory_model ? text.rfind('\n', import) + 1 : memory_model;
  text.insert(text.find('\n', entry) + 1, modes);
  text.insert(imports, "OpExtension \"SPV_KHR_float_controls\"\n");
  text.insert(text.find("OpCapability"), capabilities);
  std::vector<uint32_t> out;
  if (!tools.Assemble(text, &out)) throw Error("vulkan: SPIRV-Tools could not assemble the module with float controls");
  return out;
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
