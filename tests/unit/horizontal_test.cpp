// Horizontal kernels (merge_horizontal, codegen/horizontal.cpp) within a device's argument
// limits: parts that read one buffer share its parameter, and a run of parts ends where the
// next would take more buffers (Vulkan's descriptors) or argument bytes (OpenCL's parameter
// size, Vulkan's push constants) than the device allows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/engine/compile.h"
#include "test_util.h"

namespace kiln {
namespace {

// Three updates of one body, each parameter's own shape, all scaled by the same %s (a
// clipping factor) and the same launch scalar %r (a learning rate).
const char* kUpdates =
    "graph @updates(%p1: f32[4,3], %g1: f32[4,3], %p2: f32[5], %g2: f32[5], %p3: f32[2,2,6], %g3: f32[2,2,6], "
    "%s: f32[]) -> (f32[4,3], f32[5], f32[2,2,6]) {\n"
    "  %r = scalar {slot = 0, value = 0.5} : f32[]\n"
    "  %c = mul %s, %r : f32[]\n"
    "  %a1 = mul %g1, %c : f32[4,3]\n  %u1 = sub %p1, %a1 : f32[4,3]\n"
    "  %a2 = mul %g2, %c : f32[5]\n  %u2 = sub %p2, %a2 : f32[5]\n"
    "  %a3 = mul %g3, %c : f32[2,2,6]\n  %u3 = sub %p3, %a3 : f32[2,2,6]\n"
    "  return %u1, %u2, %u3\n}\n";

// The plan's kernels: name and buffer parameters of each.
std::vector<std::pair<std::string, size_t>> kernels_of(const Capabilities& caps) {
  const Compilation c = compile_graph(caps, {}, test::parse_or_fail(kUpdates));
  std::vector<std::pair<std::string, size_t>> out;
  for (const kir::Kernel& k : c.plan.kernels) out.emplace_back(k.name, k.buffers.size());
  return out;
}

Capabilities work_items() {
  Capabilities c;
  c.family = DeviceFamily::WorkItems;
  c.local_memory = true;
  c.max_work_group = 256;
  c.horizontal_parts = 64;
  return c;
}

bool merged(const std::string& name, int parts) { return name.ends_with("_h" + std::to_string(parts)); }

TEST(HorizontalKernels, PartsShareTheBufferTheyAllRead) {
  const auto kernels = kernels_of(work_items());
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_TRUE(merged(kernels[0].first, 3)) << kernels[0].first;
  // p, g and u of each part, and one %s for all three.
  EXPECT_EQ(kernels[0].second, 10u);
}

TEST(HorizontalKernels, ARunEndsWhereTheNextPartPassesTheDevicesLimits) {
  Capabilities caps = work_items();
  caps.max_kernel_buffers = 9;  // the third part's three buffers would make 10
  auto kernels = kernels_of(caps);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_TRUE(merged(kernels[0].first, 2)) << kernels[0].first;
  EXPECT_EQ(kernels[0].second, 7u);
  EXPECT_EQ(kernels[1].first.find("_h"), std::string::npos) << kernels[1].first;

  caps = work_items();
  caps.max_argument_bytes = 8 * 8;  // OpenCL-like: 8 bytes a buffer or scalar, room for 7 and %r
  caps.buffer_argument_bytes = 8;
  kernels = kernels_of(caps);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_TRUE(merged(kernels[0].first, 2)) << kernels[0].first;

  caps.max_argument_bytes = 8 * 7;  // not even two parts: every kernel alone
  kernels = kernels_of(caps);
  ASSERT_EQ(kernels.size(), 3u);
  for (const auto& [name, buffers] : kernels) EXPECT_EQ(name.find("_h"), std::string::npos) << name;
}

}  // namespace
}  // namespace kiln
