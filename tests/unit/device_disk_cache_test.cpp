// The opencl and vulkan backends' disk caches across processes: kernels built into different
// programs by earlier processes load together in a later one, which compiles nothing, and
// each counts once in the statistics.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

// Parameter: the device.
class DeviceDiskCache : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string device = GetParam();
    std::replace(device.begin(), device.end(), ':', '_');
    dir_ = fs::temp_directory_path() / fmt::format("kiln_device_cache_test_{}_{}", device, ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path graph(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p;
  }

  // `kiln run FILE --device DEVICE` with the cache in dir_/cache; `env` adds variables.
  // Returns the exit code; stderr in `err`.
  int run(const fs::path& file, const std::string& env, std::string& err) {
    const fs::path out = dir_ / "stdout.txt", errors = dir_ / "stderr.txt";
    const std::string cmd = fmt::format(
        "env -u KILN_NO_COMPILE -u KILN_LOG -u KILN_DUMP -u KILN_AUTOTUNE KILN_CACHE_DIR='{}' {} '{}' run '{}' "
        "--device {} >'{}' 2>'{}'",
        (dir_ / "cache").string(), env, KILN_CLI, file.string(), GetParam(), out.string(), errors.string());
    const int status = std::system(cmd.c_str());
    std::ifstream in(errors);
    std::stringstream text;
    text << in.rdbuf();
    err = text.str();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  fs::path dir_;
};

constexpr const char* kRows = R"(graph @rows(%x: f32[64,32]) -> f32[64] {
  %r = reduce_sum %x {axes = [1]} : f32[64]
  return %r
})";
constexpr const char* kCols = R"(graph @cols(%x: f32[64,32]) -> f32[32] {
  %c = reduce_max %x {axes = [0]} : f32[32]
  return %c
})";
constexpr const char* kBoth = R"(graph @both(%x: f32[64,32]) -> (f32[64], f32[32]) {
  %r = reduce_sum %x {axes = [1]} : f32[64]
  %c = reduce_max %x {axes = [0]} : f32[32]
  return %r, %c
})";

// Counter `name` from the lines KILN_STATS=1 printed into `err`; -1 when absent.
double counter(const std::string& err, const std::string& name) {
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string word;
    double value = 0;
    if (words >> word >> value && word == name) return value;
  }
  return -1;
}

// A warmup compiles a plan's kernels one at a time while tuning them, then the plan, whose
// program holds only the kernels its process had not compiled yet; a deployment, holding
// none in memory, misses them all at once. Each kernel's own disk entry names the program
// that holds it (found by warm_deployment_test.py under load: the deployment compiled).
TEST_P(DeviceDiskCache, KernelsBuiltInSeparateProgramsLoadTogetherWithoutCompiling) {
  std::string err;
  ASSERT_EQ(run(graph("rows.kir", kRows), "", err), 0) << err;
  ASSERT_EQ(run(graph("cols.kir", kCols), "", err), 0) << err;
  EXPECT_EQ(run(graph("both.kir", kBoth), "KILN_NO_COMPILE=1", err), 0) << err;
  EXPECT_EQ(err.find("would be compiled"), std::string::npos) << err;
}

// A kernel found on disk is one hit and one missing is one miss, whichever entries (its own,
// its program's) the backend read: opencl's member entries counted a kernel twice, and
// vulkan counted each load twice.
TEST_P(DeviceDiskCache, EachKernelCountsOnceAsAHitOrAMiss) {
  std::string err;
  ASSERT_EQ(run(graph("rows.kir", kRows), "KILN_STATS=1", err), 0) << err;
  EXPECT_EQ(counter(err, "kernel_disk_misses"), 1) << err;
  EXPECT_EQ(counter(err, "kernel_disk_hits"), 0) << err;
  ASSERT_EQ(run(graph("cols.kir", kCols), "KILN_STATS=1", err), 0) << err;
  EXPECT_EQ(counter(err, "kernel_disk_misses"), 1) << err;
  ASSERT_EQ(run(graph("both.kir", kBoth), "KILN_STATS=1 KILN_NO_COMPILE=1", err), 0) << err;
  EXPECT_EQ(counter(err, "kernel_disk_hits"), 2) << err;
  EXPECT_EQ(counter(err, "kernel_disk_misses"), 0) << err;
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceDiskCache, ::testing::Values("opencl:0", "vulkan:0"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param.substr(0, p.param.find(':')); });

}  // namespace
}  // namespace kiln
