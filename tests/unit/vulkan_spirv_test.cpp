// The float controls a Vulkan module asks its driver for (backends/vulkan/spirv.cpp): the
// execution modes and capabilities land where SPIR-V puts them, only the widths the module
// uses get one, and the module stays valid. Runs without a Vulkan device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/backends/vulkan.h"

namespace kiln::vulkan {
namespace {

using testing::HasSubstr;
using testing::Not;

constexpr const char* kFloats = R"(#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer B { float v[]; };
void main() { v[gl_GlobalInvocationID.x] = v[gl_GlobalInvocationID.x] * 0.5; }
)";

constexpr const char* kDoubles = R"(#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer B { float v[]; };
void main() { v[gl_GlobalInvocationID.x] = float(double(v[gl_GlobalInvocationID.x]) * 0.5lf); }
)";

TEST(VulkanFloatControls, EveryModeForEveryWidthTheModuleUses) {
  const std::vector<uint32_t> spirv = with_float_controls(
      compile_glsl(kDoubles, "doubles.comp", /*optimize=*/false),
      {.signed_zero_inf_nan = true, .f32_subnormals = true, .f64_subnormals = true});
  EXPECT_EQ(validate_spirv(spirv), "");
  const std::string text = disassemble_spirv(spirv);
  EXPECT_THAT(text, HasSubstr("OpCapability SignedZeroInfNanPreserve"));
  EXPECT_THAT(text, HasSubstr("OpCapability DenormPreserve"));
  EXPECT_THAT(text, HasSubstr("OpExtension \"SPV_KHR_float_controls\""));
  for (const char* mode : {"SignedZeroInfNanPreserve 32", "SignedZeroInfNanPreserve 64", "DenormPreserve 32",
                           "DenormPreserve 64"})
    EXPECT_THAT(text, HasSubstr(std::string("OpExecutionMode %main ") + mode));
}

TEST(VulkanFloatControls, SubnormalsAloneAndOnlyForF32WithoutDoubles) {
  const std::vector<uint32_t> spirv =
      with_float_controls(compile_glsl(kFloats, "floats.comp"), {.f32_subnormals = true, .f64_subnormals = true});
  EXPECT_EQ(validate_spirv(spirv), "");
  const std::string text = disassemble_spirv(spirv);
  // (spirv-opt drops the entry point's name.)
  EXPECT_THAT(text, testing::ContainsRegex("OpExecutionMode %[a-z0-9_]+ DenormPreserve 32"));
  EXPECT_THAT(text, Not(HasSubstr("DenormPreserve 64")));
  EXPECT_THAT(text, Not(HasSubstr("SignedZeroInfNanPreserve")));
}

TEST(VulkanFloatControls, NoControlsLeavesTheModuleAsItWas) {
  const std::vector<uint32_t> spirv = compile_glsl(kDoubles, "doubles.comp");
  EXPECT_EQ(with_float_controls(spirv, {}), spirv);
  // f64 subnormals asked of a module without doubles: nothing to add either.
  const std::vector<uint32_t> floats = compile_glsl(kFloats, "floats.comp");
  EXPECT_EQ(with_float_controls(floats, {.f64_subnormals = true}), floats);
}

}  // namespace
}  // namespace kiln::vulkan
