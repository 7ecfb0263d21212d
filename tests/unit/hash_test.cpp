// Structural hashing: equal for graphs that compute the same thing however they are spelled,
// different for every near miss.
#include <set>

#include "kiln/ir/hash.h"
#include "test_util.h"

namespace kiln {
namespace {

using test::parse_or_fail;

Hash128 hash_of(const std::string& text) { return structural_hash(parse_or_fail(text)); }

const char* kBase = R"(graph @f(%x: f32[4,8], %b: f32[8]) -> f32[4,1] {
  %s = add %x, %b : f32[4,8]
  %e = exp %s : f32[4,8]
  %c = constant {value = 0.5} : f32[]
  %m = mul %e, %c : f32[4,8]
  %r = reduce_sum %m {axes = [1], keepdim} : f32[4,1]
  return %r
})";

TEST(StructuralHash, IgnoresNamesOrderOfIndependentNodesCommutationAndDeadCode) {
  const Hash128 base = hash_of(kBase);
  EXPECT_EQ(base, hash_of(kBase)) << "deterministic";
  // Renamed values and graph name.
  EXPECT_EQ(base, hash_of(R"(graph @g(%in: f32[4,8], %bias: f32[8]) -> f32[4,1] {
  %0 = add %in, %bias : f32[4,8]
  %1 = exp %0 : f32[4,8]
  %half = constant {value = 0.5} : f32[]
  %2 = mul %1, %half : f32[4,8]
  %3 = reduce_sum %2 {axes = [1], keepdim} : f32[4,1]
  return %3
})"));
  // Independent nodes reordered, commutative operands swapped, a dead node added.
  EXPECT_EQ(base, hash_of(R"(graph @f(%x: f32[4,8], %b: f32[8]) -> f32[4,1] {
  %c = constant {value = 0.5} : f32[]
  %s = add %b, %x : f32[4,8]
  %dead = neg %s : f32[4,8]
  %e = exp %s : f32[4,8]
  %m = mul %c, %e : f32[4,8]
  %r = reduce_sum %m {axes = [1], keepdim} : f32[4,1]
  return %r
})"));
}

TEST(StructuralHash, EveryNearMissDiffers) {
  // Each variant changes one thing in kBase.
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"add %x, %b", "sub %x, %b"},                                        // op
      {"%e = exp %s", "%e = tanh %s"},                                     // unary op
      {"{value = 0.5}", "{value = 0.25}"},                                 // constant value
      {"{value = 0.5} : f32[]", "{value = 0.5} : f32[1]"},                 // constant shape
      {"{axes = [1], keepdim} : f32[4,1]", "{axes = [0], keepdim} : f32[1,8]"},  // axes
  };
  std::set<std::string> seen{hash_of(kBase).hex()};
  for (const auto& [from, to] : edits) {
    std::string text = kBase;
    text.replace(text.find(from), from.size(), to);
    if (to.find("f32[1,8]") != std::string::npos) text.replace(text.find("-> f32[4,1]"), 11, "-> f32[1,8]");
    if (to.find("f32[1]") != std::string::npos) text.replace(text.find("%m = mul %e, %c : f32[4,8]"), 26, "%m = mul %e, %c : f32[4,8]");
    EXPECT_TRUE(seen.insert(hash_of(text).hex()).second) << "collision after replacing '" << from << "'";
  }
  const std::vector<std::string> graphs = {
      "graph @f(%x: f32[4], %y: f32[4]) -> f32[4] {\n %r = sub %x, %y : f32[4]\n return %r\n}",
      "graph @f(%x: f32[4], %y: f32[4]) -> f32[4] {\n %r = sub %y, %x : f32[4]\n return %r\n}",  // not commutative
      // (Swapping the parameters of the first graph gives the second's function: same hash.)
      "graph @f(%x: f32[4], %y: f32[1]) -> f32[4] {\n %r = sub %x, %y : f32[4]\n return %r\n}",  // param type
      "graph @f(%x: f32[4], %y: f32[4]) -> f32[4] {\n %r = sub %x, %y : f32[4]\n return %x\n}",  // other output
      "graph @f(%x: f32[4], %y: f32[4]) -> (f32[4], f32[4]) {\n %r = sub %x, %y : f32[4]\n return %r, %x\n}",
      "graph @f(%x: f32[4], %y: f32[4]) -> (f32[4], f32[4]) {\n %r = sub %x, %y : f32[4]\n return %x, %r\n}",
      "graph @f(%x: f64[4], %y: f64[4]) -> f64[4] {\n %r = sub %x, %y : f64[4]\n return %r\n}",  // dtype
      "graph @f(%x: f32[2,2], %y: f32[2,2]) -> f32[2,2] {\n %r = sub %x, %y : f32[2,2]\n return %r\n}",  // shape
      "graph @f(%x: f32[4], %y: f32[4]) -> f32[4] {\n %r = rand {seed = 1} : f32[4]\n return %r\n}",
      "graph @f(%x: f32[4], %y: f32[4]) -> f32[4] {\n %r = rand {seed = 2} : f32[4]\n return %r\n}",  // seed
      "graph @f(%x: f32[4], %y: f32[4]) -> f32[2] {\n %r = slice %x {start = [0], stop = [4], step = [2]} : f32[2]\n return %r\n}",
      "graph @f(%x: f32[4], %y: f32[4]) -> f32[2] {\n %r = slice %x {start = [1], stop = [4], step = [2]} : f32[2]\n return %r\n}",
      "graph @f(%x: f32[4], %y: f32[4]) -> f32[4,1] {\n %r = reshape %x : f32[4,1]\n return %r\n}",
      "graph @f(%x: f32[4], %y: f32[4]) -> f32[1,4] {\n %r = reshape %x : f32[1,4]\n return %r\n}",
      "graph @f(%x: f32[4], %y: f32[4]) -> f32[1] {\n %r = reduce_max %x {axes = [0], keepdim} : f32[1]\n return %r\n}",
      "graph @f(%x: f32[4], %y: f32[4]) -> f32[] {\n %r = reduce_max %x {axes = [0]} : f32[]\n return %r\n}",  // keepdim
  };
  for (const std::string& g : graphs) EXPECT_TRUE(seen.insert(hash_of(g).hex()).second) << g;
}

TEST(StructuralHash, LaunchScalarsHashBySlotNotValue) {
  auto step = [](const char* op, const char* lr) {
    return std::string("graph @sgd(%w: f32[8], %g: f32[8]) -> f32[8] {\n  %lr = ") + op + lr +
           "} : f32[]\n  %d = mul %g, %lr : f32[8]\n  %n = sub %w, %d : f32[8]\n  return %n\n}";
  };
  EXPECT_NE(hash_of(step("constant {value = ", "0.1")), hash_of(step("constant {value = ", "0.01")));
  EXPECT_EQ(hash_of(step("scalar {slot = 0, value = ", "0.1")), hash_of(step("scalar {slot = 0, value = ", "0.01")))
      << "a learning rate does not recompile";
  EXPECT_NE(hash_of(step("scalar {slot = 0, value = ", "0.1")), hash_of(step("scalar {slot = 1, value = ", "0.1")));
  // Slots, not one shared value: x + (a - b) and x + (b - a) still differ.
  const char* ab = "graph @f(%x: f32[]) -> f32[] {\n %a = scalar {slot = 0, value = 1.0} : f32[]\n %b = scalar {slot = 1, value = 2.0} : f32[]\n"
                   " %d = sub %a, %b : f32[]\n %y = add %x, %d : f32[]\n return %y\n}";
  const char* ba = "graph @f(%x: f32[]) -> f32[] {\n %a = scalar {slot = 0, value = 1.0} : f32[]\n %b = scalar {slot = 1, value = 2.0} : f32[]\n"
                   " %d = sub %b, %a : f32[]\n %y = add %x, %d : f32[]\n return %y\n}";
  EXPECT_NE(hash_of(ab), hash_of(ba));
}

}  // namespace
}  // namespace kiln
