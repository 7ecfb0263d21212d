// Environment integers are parsed strictly (support/env.h): a regression test for
// KILN_MAX_PENDING=4294967296 becoming 0, a 20-digit value disabling the cap, and `4096x`
// being accepted (issue 10). The same parser reads every numeric KILN_* variable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <optional>

#include "kiln/support/env.h"
#include "kiln/support/error.h"
#include "kiln/support/spelling.h"

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

// On/off settings take 1 or 0 only: KILN_NO_COMPILE=true once read as off, and a
// deployment's proof that it compiles nothing passed while it compiled (issue 44).
TEST(EnvFlag, TakesOneOrZeroAndRefusesTheRest) {
  auto flag = [](const char* value) {
    ::setenv("KILN_TEST_ENV_FLAG", value, 1);
    const std::optional<bool> v = env_flag("KILN_TEST_ENV_FLAG");
    ::unsetenv("KILN_TEST_ENV_FLAG");
    return v;
  };
  EXPECT_EQ(flag("1"), true);
  EXPECT_EQ(flag("0"), false);
  EXPECT_EQ(flag(""), std::nullopt);
  EXPECT_EQ(env_flag("KILN_TEST_ENV_FLAG_UNSET"), std::nullopt);
  for (const char* bad : {"true", "yes", "on", "2", " 1"}) {
    ::setenv("KILN_TEST_ENV_FLAG", bad, 1);
    try {
      env_flag("KILN_TEST_ENV_FLAG");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("KILN_TEST_ENV_FLAG='"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("want 1 (on) or 0 (off)"), std::string::npos) << e.what();
    }
    ::unsetenv("KILN_TEST_ENV_FLAG");
  }
}

TEST(EnvList, NamesOnlyWhatItAccepts) {
  static constexpr std::string_view kAccepted[] = {"graph", "kernel", "all"};
  ::setenv("KILN_TEST_ENV_LIST", "graph,,kernel", 1);
  EXPECT_EQ(env_list("KILN_TEST_ENV_LIST", kAccepted), (std::vector<std::string>{"graph", "kernel"}));
  ::setenv("KILN_TEST_ENV_LIST", "graph,kernal", 1);
  try {
    env_list("KILN_TEST_ENV_LIST", kAccepted);
    ADD_FAILURE() << "kernal was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown 'kernal' (did you mean 'kernel'?) (want a comma-separated list of graph, kernel, all)"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("KILN_TEST_ENV_LIST");
  EXPECT_TRUE(env_list("KILN_TEST_ENV_LIST", kAccepted).empty());
}

TEST(Spelling, SuggestsOnlyCloseNames) {
  static constexpr std::string_view kNames[] = {"run", "opt", "check", "compile", "autotune"};
  EXPECT_EQ(closest_name("rnu", kNames), "run");       // a swap
  EXPECT_EQ(closest_name("compiel", kNames), "compile");
  EXPECT_EQ(closest_name("autotun", kNames), "autotune");
  EXPECT_EQ(closest_name("chek", kNames), "check");
  EXPECT_EQ(closest_name("bogus", kNames), std::nullopt);
  EXPECT_EQ(closest_name("xy", kNames), std::nullopt);
  EXPECT_EQ(did_you_mean("opy", kNames), " (did you mean 'opt'?)");
  EXPECT_EQ(did_you_mean("zzzzzz", kNames), "");
}

}  // namespace
}  // namespace kiln
