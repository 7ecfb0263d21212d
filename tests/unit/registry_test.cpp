// The device registry's rows are what the rest of kiln reads about backends: for each row,
// a device of that kind compiles into the cache folder the row names, `kiln cache` finds,
// exports and clears it there, and KILN_DUMP writes each dump stage the row declares (the
// `kiln` CLI run as a subprocess with a cache and a dump folder of its own).
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "kiln/engine/engine.h"
#include "test_util.h"

#ifndef KILN_CLI
#error "KILN_CLI (the path of the kiln binary) must be defined by the build"
#endif

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::read_file;

constexpr const char* kGraph =
    "graph @two(%x: f32[4,9]) -> (f32[4,9], f32[9]) {\n"
    "  %e = exp %x : f32[4,9]\n"
    "  %s = reduce_sum %x {axes = [0]} : f32[9]\n"
    "  return %e, %s\n}\n";

int count_files(const fs::path& dir, const std::string& extension) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == extension) ++n;
  return n;
}

class Registry : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("kiln_registry_test_{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "two.kir") << kGraph;
  }
  void TearDown() override { fs::remove_all(dir_); }

  struct Run {
    int exit_code = -1;
    std::string out, err;
  };
  // `kiln ARGS` with the cache in `cache`, KILN_DUMP=`dump` into `dump_dir`.
  Run kiln(const std::string& args, const fs::path& cache, const std::string& dump = "",
           const fs::path& dump_dir = {}) {
    const fs::path out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    const std::string cmd = fmt::format(
        "env -u KILN_NO_COMPILE -u KILN_LOG -u KILN_DUMP KILN_CACHE_DIR='{}' {} {} {} >'{}' 2>'{}'", cache.string(),
        dump.empty() ? std::string() : fmt::format("KILN_DUMP={} KILN_DUMP_DIR='{}'", dump, dump_dir.string()), KILN_CLI,
        args, out.string(), err.string());
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
  }

  fs::path dir_;
};

TEST_F(Registry, EveryRowsCacheFolderAndDumpStagesAreWhatItsDeviceUses) {
  int exercised = 0;
  for (const DeviceKindInfo& kind : device_kinds()) {
    // The first device of the kind, where the machine has one.
    const std::vector<Device> devices = registered_devices();
    auto it = std::find_if(devices.begin(), devices.end(), [&](Device d) { return &device_kind(d) == &kind; });
    if (it == devices.end()) continue;
    const std::string device = it->str();
    SCOPED_TRACE(device);
    const fs::path cache = dir_ / ("cache-" + std::string(kind.name)), dumps = dir_ / ("dump-" + std::string(kind.name));
    std::string stages;
    for (const DumpStage& s : kind.dump_stages) stages += fmt::format("{}{}", stages.empty() ? "" : ",", s.name);
    const Run run = kiln(fmt::format("run '{}' --device {}", (dir_ / "two.kir").string(), device), cache, stages, dumps);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    for (const DumpStage& s : kind.dump_stages)
      EXPECT_GE(count_files(dumps, "." + std::string(s.extension)), 1) << "KILN_DUMP=" << s.name;

    if (kind.cache_namespace.empty()) {
      EXPECT_NE(kiln(fmt::format("cache export '{}' --device {}", (dir_ / "x.bundle").string(), device), cache).exit_code, 0)
          << "a device that compiles nothing has no cache to export";
      continue;
    }
    const fs::path folder = cache / kind.cache_namespace;
    const int entries = count_files(folder, ".bin");
    EXPECT_GE(entries, 1) << "the device's kernel store writes where its row says";

    const Run stats = kiln("cache stats", cache);
    ASSERT_EQ(stats.exit_code, 0) << stats.err;
    EXPECT_NE(stats.out.find(fmt::format("  {:<8} {} entries", kind.cache_namespace, entries)), std::string::npos)
        << stats.out;

    const fs::path bundle = dir_ / fmt::format("{}.bundle", kind.name);
    const Run exported = kiln(fmt::format("cache export '{}' --device {}", bundle.string(), device), cache);
    ASSERT_EQ(exported.exit_code, 0) << exported.err;
    EXPECT_EQ(exported.out.find(" 0 compiled kernels"), std::string::npos) << exported.out;

    const Run cleared = kiln(fmt::format("cache clear --device {}", device), cache);
    ASSERT_EQ(cleared.exit_code, 0) << cleared.err;
    EXPECT_EQ(count_files(folder, ".bin"), 0) << cleared.out;

    const Run imported = kiln(fmt::format("cache import '{}'", bundle.string()), cache);
    ASSERT_EQ(imported.exit_code, 0) << imported.err;
    EXPECT_GE(count_files(folder, ".bin"), 1) << imported.out << "an imported bundle lands in the row's folder";
    ++exercised;
  }
  EXPECT_GE(exercised, 1) << "cpu at least has a row and a device";
}

TEST_F(Registry, DeviceNamesComeFromTheRows) {
  for (Device d : registered_devices()) {
    const DeviceKindInfo& kind = device_kind(d);
    EXPECT_EQ(d.str(), kind.indexed ? fmt::format("{}:{}", kind.name, d.index) : std::string(kind.name));
    EXPECT_EQ(Device::parse(d.str()), d);
    EXPECT_FALSE(device_description(d).empty()) << d.str();
  }
}

}  // namespace
}  // namespace kiln
