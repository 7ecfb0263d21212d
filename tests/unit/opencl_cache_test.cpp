// The opencl backend's disk cache across processes: kernels built into different programs
// by earlier processes load together in a later one, which compiles nothing.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace kiln {
namespace {

namespace fs = std::filesystem;

class OpenClDiskCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("kiln_opencl_cache_test_{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path graph(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p;
  }

  // `kiln run FILE --device opencl:0` with the cache in dir_/cache; `env` adds variables.
  // Returns the exit code; stderr in `err`.
  int run(const fs::path& file, const std::string& env, std::string& err) {
    const fs::path out = dir_ / "stdout.txt", errors = dir_ / "stderr.txt";
    const std::string cmd = fmt::format(
        "env -u KILN_NO_COMPILE -u KILN_LOG -u KILN_DUMP -u KILN_AUTOTUNE KILN_CACHE_DIR='{}' {} '{}' run '{}' "
        "--device opencl:0 >'{}' 2>'{}'",
        (dir_ / "cache").string(), env, KILN_CLI, file.string(), out.string(), errors.string());
    const int status = std::system(cmd.c_str());
    std::ifstream in(errors);
    std::stringstream text;
    text << in.rdbuf();
    err = text.str();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  fs::path dir_;
};

// A warmup compiles a plan's kernels one at a time while tuning them, then the plan, whose
// program holds only the kernels its process had not compiled yet; a deployment, holding
// none in memory, misses them all at once. Each kernel's own disk entry names the program
// that holds it (found by warm_deployment_test.py under load: the deployment compiled).
TEST_F(OpenClDiskCache, KernelsBuiltInSeparateProgramsLoadTogetherWithoutCompiling) {
  const fs::path rows = graph("rows.kir", R"(graph @rows(%x: f32[64,32]) -> f32[64] {
  %r = reduce_sum %x {axes = [1]} : f32[64]
  return %r
})");
  const fs::path cols = graph("cols.kir", R"(graph @cols(%x: f32[64,32]) -> f32[32] {
  %c = reduce_max %x {axes = [0]} : f32[32]
  return %c
})");
  const fs::path both = graph("both.kir", R"(graph @both(%x: f32[64,32]) -> (f32[64], f32[32]) {
  %r = reduce_sum %x {axes = [1]} : f32[64]
  %c = reduce_max %x {axes = [0]} : f32[32]
  return %r, %c
})");
  std::string err;
  ASSERT_EQ(run(rows, "", err), 0) << err;
  ASSERT_EQ(run(cols, "", err), 0) << err;
  EXPECT_EQ(run(both, "KILN_NO_COMPILE=1", err), 0) << err;
  EXPECT_EQ(err.find("would be compiled"), std::string::npos) << err;
}

}  // namespace
}  // namespace kiln
