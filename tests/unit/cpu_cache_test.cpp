// The cpu device's caches: the plan cache within a process, and the on-disk kernel cache
// across processes (the `kiln` CLI run as a subprocess with its own KILN_CACHE_DIR):
// reuse without compiling, KILN_NO_COMPILE, recovery from damaged entries with one warning
// per file, and a cache directory that cannot be created.
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/runtime/stats.h"
#include "test_util.h"

#ifndef KILN_CLI
#error "KILN_CLI (the path of the kiln binary) must be defined by the build"
#endif

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::parse_or_fail;
using test::read_file;
using test::run_cpu;

// ---- plan cache (in process) -------------------------------------------------------------

struct Counts {
  uint64_t plan_hits, plan_misses, llvm_compiles, kernels_compiled, kernel_memory_hits,
      kernel_disk_hits;
  static Counts now() {
    const RuntimeCounters& c = runtime_counters();
    return {c.plan_hits,        c.plan_misses,        c.llvm_compiles,
            c.kernels_compiled, c.kernel_memory_hits, c.kernel_disk_hits};
  }
};

/// A graph computed by two kernels; `names` picks one of two spellings of the SSA names and
/// `k` the constant (unique per call site, so that no earlier test has compiled it).
std::string plan_graph(bool other_names, const std::string& k) {
  const char* x = other_names ? "input" : "x";
  const char* c = other_names ? "scale" : "c";
  const char* y = other_names ? "scaled" : "y";
  const char* z = other_names ? "result" : "z";
  const char* s = other_names ? "total" : "s";
  return fmt::format(
      "graph @plan(%{0}: f32[5,37]) -> (f32[5,37], f32[37]) {{\n"
      "  %{1} = constant {{value = {5}}} : f32[]\n"
      "  %{2} = mul %{0}, %{1} : f32[5,37]\n"
      "  %{3} = exp %{2} : f32[5,37]\n"
      "  %{4} = reduce_sum %{0} {{axes = [0]}} : f32[37]\n"
      "  return %{3}, %{4}\n}}\n",
      x, c, y, z, s, k);
}

TEST(CpuPlanCache, RepeatedAndRenamedGraphsHitAndCompileNothing) {
  static int salt = 0;  // a fresh constant on every run of the test (--gtest_repeat)
  const std::string k = fmt::format("{}.0", 1000 + 2 * salt++);
  const Graph g = parse_or_fail(plan_graph(false, k));
  HostTensor x(g.type(g.inputs()[0]));
  for (int64_t i = 0; i < x.numel(); ++i)
    x.set_double(i, 0.01 * static_cast<double>(i % 17) - 0.08);

  const Counts c0 = Counts::now();
  const std::vector<HostTensor> first = run_cpu(g, {x});
  const Counts c1 = Counts::now();
  EXPECT_EQ(c1.plan_misses - c0.plan_misses, 1u);
  EXPECT_EQ(c1.plan_hits - c0.plan_hits, 0u);

  const std::vector<HostTensor> second = run_cpu(g, {x});
  const Counts c2 = Counts::now();
  EXPECT_EQ(c2.plan_hits - c1.plan_hits, 1u);
  EXPECT_EQ(c2.plan_misses, c1.plan_misses);
  EXPECT_EQ(c2.llvm_compiles, c1.llvm_compiles);
  EXPECT_EQ(c2.kernels_compiled, c1.kernels_compiled);
  // A plan hit does not even look up its kernels.
  EXPECT_EQ(c2.kernel_memory_hits, c1.kernel_memory_hits);
  EXPECT_EQ(c2.kernel_disk_hits, c1.kernel_disk_hits);
  ASSERT_EQ(second.size(), first.size());
  for (size_t o = 0; o < first.size(); ++o)
    EXPECT_EQ(0, std::memcmp(first[o].data(), second[o].data(), first[o].nbytes()))
        << "output " << o;

  // The same computation spelled with other SSA names is the same plan.
  const Graph renamed = parse_or_fail(plan_graph(true, k));
  run_cpu(renamed, {x});
  const Counts c3 = Counts::now();
  EXPECT_EQ(c3.plan_hits - c2.plan_hits, 1u);
  EXPECT_EQ(c3.plan_misses, c2.plan_misses);
  EXPECT_EQ(c3.llvm_compiles, c2.llvm_compiles);

  // Another constant is another plan, and its kernel with the constant is not in memory:
  // it is compiled, or loaded from the disk cache of an earlier process.
  const Graph other = parse_or_fail(plan_graph(false, fmt::format("{}.0", 1001 + 2 * (salt - 1))));
  const std::vector<HostTensor> third = run_cpu(other, {x});
  const Counts c4 = Counts::now();
  EXPECT_EQ(c4.plan_misses - c3.plan_misses, 1u);
  EXPECT_EQ(c4.plan_hits, c3.plan_hits);
  EXPECT_GE((c4.llvm_compiles - c3.llvm_compiles) + (c4.kernel_disk_hits - c3.kernel_disk_hits),
            1u);
  EXPECT_NE(0, std::memcmp(first[0].data(), third[0].data(), first[0].nbytes()));
}

// A GEMM step finds its micro-kernel at every launch; at a plan hit that is no lookup in the
// kernel store either (each launch formatted and hashed the micro-kernel's canonical text
// there: about 2% of a MobileNetV3 call).
TEST(CpuPlanCache, AProductAtAPlanHitLooksUpNoKernel) {
  const Graph g = parse_or_fail(
      "graph @product(%x: f32[64,48], %w: f32[48,40]) -> f32[64,40] {\n"
      "  %m = matmul %x, %w : f32[64,40]\n"
      "  %y = relu %m : f32[64,40]\n"
      "  return %y\n}\n");
  HostTensor x(g.type(g.inputs()[0])), w(g.type(g.inputs()[1]));
  for (int64_t i = 0; i < x.numel(); ++i) x.set_double(i, 0.01 * static_cast<double>(i % 13) - 0.05);
  for (int64_t i = 0; i < w.numel(); ++i) w.set_double(i, 0.02 * static_cast<double>(i % 7) - 0.06);
  const std::vector<HostTensor> first = run_cpu(g, {x, w});
  const Counts c1 = Counts::now();
  const std::vector<HostTensor> second = run_cpu(g, {x, w});
  const Counts c2 = Counts::now();
  EXPECT_EQ(c2.plan_hits - c1.plan_hits, 1u);
  EXPECT_EQ(c2.kernel_memory_hits, c1.kernel_memory_hits);
  EXPECT_EQ(c2.kernel_disk_hits, c1.kernel_disk_hits);
  EXPECT_EQ(c2.llvm_compiles, c1.llvm_compiles);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(0, std::memcmp(first[0].data(), second[0].data(), first[0].nbytes()));
}

// ---- disk cache (across processes) -------------------------------------------------------

// Two kernels (their domains differ): an elementwise chain and a row reduction.
constexpr const char* kTwoKernels =
    "graph @two(%x: f32[64], %y: f32[8,16]) -> (f32[64], f32[8]) {\n"
    "  %c15 = constant {value = 1.5} : f32[]\n"
    "  %a = mul %x, %c15 : f32[64]\n"
    "  %t = tanh %a : f32[64]\n"
    "  %r = relu %t : f32[64]\n"
    "  %s = reduce_sum %y {axes = [1]} : f32[8]\n"
    "  return %r, %s\n"
    "}\n";

struct KilnRun {
  int exit_code = -1;
  std::string out, err;
  std::map<std::string, double> stats;  // KILN_STATS=1 lines: "  name value"

  double stat(const std::string& name) const {
    auto it = stats.find(name);
    if (it == stats.end()) ADD_FAILURE() << "no '" << name << "' in the stats:\n" << err;
    return it == stats.end() ? -1 : it->second;
  }
  std::vector<std::string> warnings() const {
    std::vector<std::string> w;
    std::istringstream in(err);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("kiln: warning:", 0) == 0) w.push_back(line);
    return w;
  }
};

class CpuDiskCache : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           fmt::format("kiln_cpu_cache_test_{}_{}", ::getpid(), info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    graph_ = dir_ / "two.kir";
    std::ofstream(graph_) << kTwoKernels;
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Runs `kiln run <graph> --print` with KILN_STATS=1 and the cache in `cache`; `env` adds
  /// variables ("KILN_NO_COMPILE=1"). Variables that would change the outcome are cleared.
  KilnRun kiln(const std::string& cache, const std::string& env = "") {
    const fs::path out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    const std::string cmd = fmt::format(
        "env -u KILN_NO_COMPILE -u KILN_LOG -u KILN_DUMP KILN_STATS=1 KILN_CACHE_DIR='{}' {} '{}' "
        "run '{}' --print >'{}' 2>'{}'",
        cache, env, KILN_CLI, graph_.string(), out.string(), err.string());
    KilnRun r;
    const int status = std::system(cmd.c_str());
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_file(out);
    r.err = read_file(err);
    std::istringstream in(r.err);
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      std::string name;
      double value = 0;
      if (line.rfind("  ", 0) == 0 && fields >> name >> value) r.stats[name] = value;
    }
    return r;
  }

  std::vector<fs::path> cache_files(const fs::path& cache) const {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(cache / "cpu"))
      if (e.path().extension() == ".bin") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    return files;
  }

  fs::path dir_;
  fs::path graph_;
};

TEST_F(CpuDiskCache, SecondProcessLoadsEveryKernelAndCompilesNothing) {
  const std::string cache = (dir_ / "cache").string();
  const KilnRun first = kiln(cache);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.stat("llvm_compiles"), 2);
  EXPECT_EQ(first.stat("kernel_disk_writes"), 2);
  EXPECT_EQ(first.stat("kernel_disk_hits"), 0);
  EXPECT_TRUE(first.warnings().empty()) << first.err;
  EXPECT_NE(first.out.find("%r: f32[64]"), std::string::npos) << first.out;

  const KilnRun second = kiln(cache);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.stat("llvm_compiles"), 0);
  EXPECT_EQ(second.stat("kernels_compiled"), 0);
  EXPECT_GE(second.stat("kernel_disk_hits"), 1);
  EXPECT_EQ(second.stat("kernel_disk_hits"), 2);
  EXPECT_EQ(second.out, first.out);

  // Everything is cached: running with compilation forbidden works.
  const KilnRun cached = kiln(cache, "KILN_NO_COMPILE=1");
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  EXPECT_EQ(cached.stat("llvm_compiles"), 0);
  EXPECT_EQ(cached.out, first.out);
}

TEST_F(CpuDiskCache, NoCompileWithAnEmptyCacheFailsClearly) {
  const KilnRun r = kiln((dir_ / "empty").string(), "KILN_NO_COMPILE=1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("KILN_NO_COMPILE=1, but kernel @k"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is in no cache and would be compiled"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("%r:"), std::string::npos) << "no output after the failure:\n" << r.out;
}

TEST_F(CpuDiskCache, DamagedEntriesAreRebuiltWithOneWarningEach) {
  const fs::path cache = dir_ / "cache";
  const KilnRun first = kiln(cache.string());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::vector<fs::path> files = cache_files(cache);
  ASSERT_EQ(files.size(), 2u);

  // One file cut in half, one with a byte of its object code flipped.
  fs::resize_file(files[0], fs::file_size(files[0]) / 2);
  std::string bytes = read_file(files[1]);
  bytes[bytes.size() - bytes.size() / 4] ^= 0x5a;
  std::ofstream(files[1], std::ios::binary | std::ios::trunc) << bytes;

  const KilnRun second = kiln(cache.string());
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
  EXPECT_EQ(second.stat("kernel_disk_rejected"), 2);
  EXPECT_EQ(second.stat("llvm_compiles"), 2);
  EXPECT_EQ(second.stat("kernel_disk_writes"), 2);
  const std::vector<std::string> warnings = second.warnings();
  EXPECT_EQ(warnings.size(), 2u) << second.err;
  for (const fs::path& f : files) {
    const auto mentions = std::count_if(
        warnings.begin(), warnings.end(),
        [&](const std::string& w) { return w.find(f.string()) != std::string::npos; });
    EXPECT_EQ(mentions, 1) << f << " in:\n" << second.err;
  }
  EXPECT_NE(second.err.find("truncated"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("checksum mismatch"), std::string::npos) << second.err;

  // The rebuilt entries are good: a third process is clean.
  const KilnRun third = kiln(cache.string());
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(third.out, first.out);
  EXPECT_TRUE(third.warnings().empty()) << third.err;
  EXPECT_EQ(third.stat("kernel_disk_rejected"), 0);
  EXPECT_EQ(third.stat("kernel_disk_hits"), 2);
  EXPECT_EQ(third.stat("llvm_compiles"), 0);
}

// Regressions (issue 10): an entry that is a directory made every run fail naming no file; a
// FIFO hung the run; a link to /dev/zero was read until memory ran out; an object that
// failed to link was reported, not rebuilt. Each is now stale: one warning, removed, rebuilt.
TEST_F(CpuDiskCache, EntriesThatAreNotObjectsAreRebuilt) {
  const fs::path cache = dir_ / "cache";
  const KilnRun first = kiln(cache.string());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::vector<fs::path> files = cache_files(cache);
  ASSERT_EQ(files.size(), 2u);

  // Entry 0 becomes a directory; entry 1 keeps its header but its object code is replaced
  // by bytes that are no object file, under a valid checksum (the layout of disk_cache.cpp).
  fs::remove(files[0]);
  fs::create_directories(files[0] / "inside");
  std::string bytes = read_file(files[1]);
  size_t at = 9 + 4;
  auto u = [&](int width) {
    uint64_t v = 0;
    for (int i = 0; i < width; ++i) v |= uint64_t{static_cast<unsigned char>(bytes[at + static_cast<size_t>(i)])} << (8 * i);
    at += static_cast<size_t>(width);
    return v;
  };
  at += u(4);                                  // key
  const uint64_t canonical_len = u(8);
  const size_t payload_len_at = at;
  u(8);                                        // payload length
  const size_t checksum_at = at;
  at += 8;
  const std::string canonical = bytes.substr(at, canonical_len);
  const std::string garbage(256, '\x7f');
  uint64_t h = 0xcbf29ce484222325ull;
  for (const std::string* part : {&canonical, &garbage})
    for (char c : *part) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  auto put = [&](size_t pos, uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes[pos + static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put(payload_len_at, garbage.size());
  put(checksum_at, h);
  bytes = bytes.substr(0, at + canonical_len) + garbage;
  std::ofstream(files[1], std::ios::binary | std::ios::trunc) << bytes;

  const KilnRun second = kiln(cache.string());
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
  EXPECT_EQ(second.stat("kernel_disk_rejected"), 2);
  EXPECT_EQ(second.stat("kernel_disk_hits"), 0);  // the entry that loaded but did not link is a miss
  EXPECT_EQ(second.stat("kernel_disk_misses"), 2);
  EXPECT_EQ(second.stat("llvm_compiles"), 2);
  EXPECT_EQ(second.warnings().size(), 2u) << second.err;
  EXPECT_NE(second.err.find(files[0].string()), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("linking kernel object"), std::string::npos) << second.err;
  EXPECT_TRUE(fs::is_regular_file(files[0]));

  // A FIFO and a link to /dev/zero in place of the entries: neither is opened.
  fs::remove(files[0]);
  ASSERT_EQ(::mkfifo(files[0].c_str(), 0600), 0);
  fs::remove(files[1]);
  fs::create_symlink("/dev/zero", files[1]);
  const KilnRun third = kiln(cache.string());
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(third.out, first.out);
  EXPECT_EQ(third.stat("kernel_disk_rejected"), 2);
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(files[0])));
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(files[1])));
}

TEST_F(CpuDiskCache, UnusableCacheDirectoryMeansMemoryOnlyWithOneWarning) {
  // A directory below a regular file cannot be created, even by root.
  std::ofstream(dir_ / "file") << "not a directory";
  const KilnRun reference = kiln("off");
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  EXPECT_TRUE(reference.warnings().empty()) << reference.err;

  const KilnRun r = kiln((dir_ / "file" / "sub").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, reference.out);
  const std::vector<std::string> warnings = r.warnings();
  ASSERT_EQ(warnings.size(), 1u) << r.err;
  EXPECT_NE(warnings[0].find("cached in memory only"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find((dir_ / "file" / "sub").string()), std::string::npos) << warnings[0];
  EXPECT_EQ(r.stat("llvm_compiles"), 2);
  EXPECT_EQ(r.stat("kernel_disk_writes"), 0);
}

}  // namespace
}  // namespace kiln
