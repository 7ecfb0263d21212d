// The GLSL dialect (codegen/glsl_dialect.cpp): every kernel and GEMM step of the random
// graphs and the peer workloads, printed as a Vulkan compute shader for a GPU's
// capabilities, compiles with shaderc and passes SPIRV-Tools' validator. (Running them is
// the Vulkan device's part; this checks the second dialect of the one C-family emitter.)
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kiln/backends/vulkan.h"
#include "kiln/codegen/c_source.h"
#include "kiln/engine/compile.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/ir/text.h"
#include "random_graph.h"

namespace kiln {
namespace {

struct Tally {
  int modules = 0, gemms = 0, unsupported = 0;
};

// Compiles and validates one module; an f64 function GLSL lacks is the one error allowed.
void check_module(const std::function<std::string()>& glsl, const std::string& what, Tally& t) {
  std::string source;
  try {
    source = glsl();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GLSL has no double-precision"), std::string::npos) << what << ": " << e.what();
    ++t.unsupported;
    return;
  }
  std::vector<uint32_t> spirv;
  try {
    spirv = vulkan::compile_glsl(source, what);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
    return;
  }
  EXPECT_EQ(vulkan::validate_spirv(spirv), "") << what << "\n" << source;
  ++t.modules;
}

void check_graph(const Graph& g, const std::string& name, Tally& t) {
  const std::vector<const PassInfo*> extra{find_pass("split-reductions")};
  const Capabilities caps = vulkan::reference_capabilities();
  const Compilation c = compile_graph(caps, extra, g);
  for (size_t i = 0; i < c.plan.kernels.size(); ++i)
    check_module([&] { return kir::glsl_source(c.plan.kernels[i], c.plan.schedules[i], caps); },
                 fmt::format("{}/@{}", name, c.plan.kernels[i].name), t);
  for (size_t i = 0; i < c.plan.steps.size(); ++i) {
    const LaunchPlan::Step& step = c.plan.steps[i];
    if (!step.is_gemm()) continue;
    ++t.gemms;
    const std::optional<kir::GemmEpilogueSource> epilogue = kir::gemm_epilogue_source(c.plan, i);
    const bool store = !epilogue || gemm_product_read_after_epilogue(c.plan, i);
    check_module([&] { return kir::glsl_gemm_source(step.gemm, epilogue ? &*epilogue : nullptr, store, caps); },
                 fmt::format("{}/gemm{}", name, i), t);
  }
}

TEST(GlslModules, RandomGraphsCompileAndValidate) {
  Tally t;
  for (uint64_t seed : test::diff_seeds(150)) check_graph(test::random_graph(seed), fmt::format("random{}", seed), t);
  test::RandomGraphOptions large;
  large.nodes = 12;
  large.max_rank = 3;
  large.max_dim = 96;
  large.zero_size = false;
  for (uint64_t seed : test::diff_seeds(40)) check_graph(test::random_graph(seed, large), fmt::format("large{}", seed), t);
  EXPECT_GT(t.modules, 300);
  EXPECT_GT(t.gemms, 0);
  std::printf("%d modules valid (%d GEMM steps), %d with an f64 function GLSL lacks\n", t.modules, t.gemms, t.unsupported);
}

TEST(GlslModules, PeerWorkloadsCompileAndValidate) {
  Tally t;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(KILN_SOURCE_DIR) / "examples/workloads")) {
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    check_graph(parse_graph(text.str(), entry.path().string()).take(), entry.path().filename().string(), t);
  }
  EXPECT_EQ(t.unsupported, 0);
  EXPECT_GE(t.modules, 9);
}

}  // namespace
}  // namespace kiln
