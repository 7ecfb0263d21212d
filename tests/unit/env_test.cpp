// Environment integers are parsed strictly (support/env.h): a regression test for
// KILN_MAX_PENDING=4294967296 becoming 0, a 20-digit value disabling the cap, and `4096x`
// being accepted (issue 10). The same parser reads every numeric KILN_* variable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <optional>

#include "kiln/support/env.h"

namespace kiln {
namespace {

std::optional<int64_t> parse(const char* value, int64_t min = 1,
                             int64_t max = std::numeric_limits<uint32_t>::max()) {
  ::setenv("KILN_TEST_ENV_INT", value, 1);
  const std::optional<int64_t> v = env_int("KILN_TEST_ENV_INT", min, max);
  ::unsetenv("KILN_TEST_ENV_INT");
  return v;
}

TEST(EnvInt, AcceptsOnlyPlainIntegersInRange) {
  EXPECT_EQ(parse("4096"), 4096);
  EXPECT_EQ(parse("1"), 1);
  EXPECT_EQ(parse("4294967295"), 4294967295);
  EXPECT_EQ(parse("4294967296"), std::nullopt) << "past uint32: was silently 0";
  EXPECT_EQ(parse("12345678901234567890"), std::nullopt) << "20 digits: was 'no cap'";
  EXPECT_EQ(parse("4096x"), std::nullopt) << "trailing characters: was accepted";
  EXPECT_EQ(parse("0"), std::nullopt);
  EXPECT_EQ(parse("-5"), std::nullopt);
  EXPECT_EQ(parse(" 12"), std::nullopt);
  EXPECT_EQ(parse("1e3"), std::nullopt);
  EXPECT_EQ(parse(""), std::nullopt) << "empty means unset";
  EXPECT_EQ(env_int("KILN_TEST_ENV_INT_UNSET", 0, 10), std::nullopt);
  EXPECT_EQ(parse("0", 0, 10), 0);
}

}  // namespace
}  // namespace kiln
