// Long literals in canonical texts (kiln/ir/canonical.h): keyed by a digest computed once
// per literal, and a plan found by its text only where the literals hold the same values.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "kiln/engine/compile.h"
#include "kiln/engine/engine.h"
#include "kiln/ir/canonical.h"
#include "kiln/ir/text.h"
#include "kiln/runtime/stats.h"

namespace kiln {
namespace {

constexpr int kValues = 1000;  // past kLiteralDigestAbove

// `%y = %x + constant`, the constant's value i being i * 0.25, and `changed` there instead
// at position 7.
std::string graph_text(const std::string& changed = "") {
  std::string data;
  for (int i = 0; i < kValues; ++i)
    data += fmt::format("{}{}", i ? ", " : "", i == 7 && !changed.empty() ? changed : fmt::format("{:.2f}", i * 0.25));
  return fmt::format(R"(graph @weights(%x: f32[{0}]) -> f32[{0}] {{
  %w = constant {{data = [{1}]}} : f32[{0}]
  %y = add %x, %w : f32[{0}]
  return %y
}})",
                     kValues, data);
}

Graph parse(const std::string& text) { return parse_graph(text).take(); }

std::string canonical(const Graph& g) {
  CanonicalWriter w;
  write_canonical(w, g);
  return w.take();
}

TEST(CanonicalLiterals, ALongLiteralIsWrittenAsADigestComputedOnce) {
  const Graph g = parse(graph_text());
  const uint64_t before = literal_digests_computed();
  const std::string first = canonical(g);
  EXPECT_EQ(literal_digests_computed(), before + 1);
  // Keyed again (a graph run at every step), the digest is known.
  const Graph copy = g;
  EXPECT_EQ(canonical(g), first);
  EXPECT_EQ(canonical(copy), first);
  EXPECT_EQ(literal_digests_computed(), before + 1);
  // 16 bytes a value would be 16,000 bytes.
  EXPECT_LT(first.size(), size_t{1000});
}

TEST(CanonicalLiterals, EqualValuesKeyAlikeAndAnyChangedBitDoesNot) {
  const std::string base = canonical(parse(graph_text()));
  EXPECT_EQ(canonical(parse(graph_text())), base) << "another literal of the same values";
  EXPECT_NE(canonical(parse(graph_text("1.5"))), base);
  // -0.0 and 0.0 compare equal as numbers, not as bits.
  EXPECT_NE(canonical(parse(graph_text("-0.0"))), canonical(parse(graph_text("0.0"))));
}

TEST(CanonicalLiterals, LiteralsMatchOnlyLivingLiteralsOfTheSameBits) {
  const auto values = [](double x) { return std::make_shared<const std::vector<Scalar>>(300, Scalar::from_float(x)); };
  const LiteralValues a = values(1.0), same = values(1.0), other = values(2.0);
  const std::vector<std::weak_ptr<const std::vector<Scalar>>> kept{a};
  EXPECT_TRUE(literals_match(kept, std::vector<LiteralValues>{a}));
  EXPECT_TRUE(literals_match(kept, std::vector<LiteralValues>{same}));
  EXPECT_FALSE(literals_match(kept, std::vector<LiteralValues>{other}));
  EXPECT_FALSE(literals_match(kept, std::vector<LiteralValues>{}));
  std::vector<std::weak_ptr<const std::vector<Scalar>>> dead;
  {
    const LiteralValues gone = values(1.0);
    dead.push_back(gone);
  }
  EXPECT_FALSE(literals_match(dead, std::vector<LiteralValues>{same}));
}

// The plan cache (the cpu device's engine): a graph run again hits; an equal graph hits
// while the first one's literal lives; a changed value misses and computes its own sum; once
// the literal the plan was keyed with has died, an equal graph compiles again.
TEST(CanonicalLiterals, APlanIsFoundOnlyForTheSameLiteralValues) {
  const Device cpu = Device::cpu();
  std::vector<float> x(kValues, 1.0f);
  const std::vector<HostTensor> inputs{HostTensor::from_vector(x, Shape({kValues}))};
  RuntimeCounters& c = runtime_counters();
  const auto run = [&](const Graph& g) { return run_on_host(cpu, g, inputs).at(0).to_vector<float>(); };
  plan_cache_clear(cpu);
  {
    const Graph g = parse(graph_text());
    run(g);
    const uint64_t hits = c.plan_hits.load(), misses = c.plan_misses.load();
    EXPECT_EQ(run(g)[9], 1.0f + 9 * 0.25f);
    EXPECT_EQ(c.plan_hits.load(), hits + 1);
    EXPECT_EQ(run(parse(graph_text()))[9], 1.0f + 9 * 0.25f);
    EXPECT_EQ(c.plan_hits.load(), hits + 2);
    EXPECT_EQ(run(parse(graph_text("1.5")))[7], 2.5f);
    EXPECT_EQ(c.plan_misses.load(), misses + 1);
  }
  const uint64_t misses = c.plan_misses.load();
  EXPECT_EQ(run(parse(graph_text()))[7], 1.0f + 7 * 0.25f);
  EXPECT_EQ(c.plan_misses.load(), misses + 1);
}

}  // namespace
}  // namespace kiln
