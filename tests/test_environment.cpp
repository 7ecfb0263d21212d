// tests/test_environment.cpp - linked into every test executable: before main, points the
// caches that no variable names yet into the build tree, so that no test reads or writes
// the user's ~/.cache/kiln or PoCL's and Mesa's caches, and turns on the Vulkan validation
// layer (a message it reports fails the test that caused it). ctest sets at most one variable per
// test (gtest_discover_tests splits a list-valued ENVIRONMENT at its ';'), and a test binary
// run by hand gets the same isolation.
#include <cstdlib>
#include <string>

namespace {

const bool kEnvironmentSet = [] {
  ::setenv("KILN_CACHE_DIR", KILN_TEST_CACHE_DIR, /*overwrite=*/0);
  ::setenv("POCL_CACHE_DIR", KILN_TEST_POCL_CACHE_DIR, 0);
  const std::string mesa = std::string(std::getenv("KILN_CACHE_DIR")) + "/mesa";
  ::setenv("MESA_SHADER_CACHE_DIR", mesa.c_str(), 0);
  ::setenv("KILN_VULKAN_VALIDATION", "1", 0);
  return true;
}();

}  // namespace
