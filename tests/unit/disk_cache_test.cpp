// The on-disk kernel cache: round trips, rejection of damaged or stale entries, degradation
// to memory-only caching, the default root, and concurrent writers.
#include "kiln/runtime/disk_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kiln/runtime/stats.h"
#include "kiln/support/error.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kKey = "0123456789abcdef";
constexpr std::string_view kCanonical = "kernel @k(%a: f32[4]) { ... }";

// Binary on purpose: NULs, high bytes and newlines must come back unchanged.
std::string binary_payload(size_t n = 300, unsigned seed = 7) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<char>((i * 31 + seed) & 0xff));
  out[0] = '\0';
  return out;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const fs::path& p, const std::string& data) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << data;
}

// Sets or unsets an environment variable for the life of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Each test gets its own root directory (removed afterwards) and zeroed counters.
class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime_counters().reset();
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            ("kiln_disk_cache_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    std::error_code ec;
    // Undo a test's chmod so that the tree can be removed.
    for (auto it = fs::recursive_directory_iterator(root_, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (it->is_directory())
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
    fs::remove_all(root_, ec);
  }

  // A fresh entry for kKey, as a newly started process would see it.
  fs::path store_entry(const std::string& payload) {
    DiskCache c(root_, "cpu");
    EXPECT_TRUE(c.store(kKey, kCanonical, payload));
    return c.path_of(kKey);
  }

  // Loads kKey in a new cache object and expects a rejection that removes the file.
  void expect_rejected(const fs::path& path, const std::string& what) {
    const uint64_t rejected = runtime_counters().kernel_disk_rejected;
    DiskCache c(root_, "cpu");
    EXPECT_FALSE(c.load(kKey, kCanonical).has_value()) << what;
    EXPECT_EQ(runtime_counters().kernel_disk_rejected, rejected + 1) << what;
    EXPECT_FALSE(fs::exists(path)) << what << ": a rejected entry is removed";
  }

  fs::path root_;
};

TEST_F(DiskCacheTest, RoundTripsInANewCacheObject) {
  const std::string payload = binary_payload(100000);
  DiskCache writer(root_, "cpu");
  EXPECT_EQ(writer.dir(), root_ / "cpu");
  EXPECT_FALSE(fs::exists(writer.dir())) << "the constructor does not touch the disk";
  ASSERT_TRUE(writer.store(kKey, kCanonical, payload));
  EXPECT_EQ(writer.path_of(kKey), root_ / "cpu" / "0123456789abcdef.bin");

  DiskCache reader(root_, "cpu");
  const auto back = reader.load(kKey, kCanonical);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, payload);
  EXPECT_EQ(*reader.load(kKey, kCanonical), payload) << "a hit leaves the entry in place";
  EXPECT_EQ(DiskCache(root_, "gpu").load(kKey, kCanonical), std::nullopt) << "namespaces are apart";
  ASSERT_TRUE(writer.store("empty", "", ""));
  EXPECT_EQ(reader.load("empty", ""), std::string());
}

TEST_F(DiskCacheTest, AbsentKeyIsAMiss) {
  DiskCache c(root_, "cpu");
  EXPECT_EQ(c.load(kKey, kCanonical), std::nullopt);
  EXPECT_FALSE(fs::exists(c.dir())) << "a load creates nothing";
  EXPECT_TRUE(c.enabled());
  EXPECT_EQ(runtime_counters().kernel_disk_rejected, 0u);
  EXPECT_EQ(runtime_counters().kernel_disk_misses, 0u) << "the kernel store counts each kernel's miss once";
}

TEST_F(DiskCacheTest, CountersMoveAsSpecified) {
  // Writes and rejections are the disk cache's to count; hits and misses are per kernel, the
  // kernel store's (kernel_store_test.cpp).
  auto& n = runtime_counters();
  DiskCache c(root_, "cpu");
  EXPECT_FALSE(c.load(kKey, kCanonical));
  ASSERT_TRUE(c.store(kKey, kCanonical, "code"));
  EXPECT_EQ(n.kernel_disk_writes, 1u);
  EXPECT_TRUE(c.load(kKey, kCanonical));
  EXPECT_FALSE(c.load(kKey, "another kernel"));
  EXPECT_EQ(n.kernel_disk_rejected, 1u);
  EXPECT_EQ(n.kernel_disk_writes, 1u);
  EXPECT_EQ(n.kernel_disk_hits, 0u);
  EXPECT_EQ(n.kernel_disk_misses, 0u);
}

TEST_F(DiskCacheTest, CanonicalMismatchIsRejected) {
  const fs::path path = store_entry("code");
  const uint64_t rejected = runtime_counters().kernel_disk_rejected;
  DiskCache c(root_, "cpu");
  EXPECT_EQ(c.load(kKey, "kernel @other() {}"), std::nullopt) << "a key collision is never a hit";
  EXPECT_EQ(runtime_counters().kernel_disk_rejected, rejected + 1);
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(DiskCacheTest, TruncatedEntriesAreRejectedAndRebuilt) {
  const std::string payload = binary_payload();
  const uint64_t full = fs::file_size(store_entry(payload));
  const uint64_t header = full - kCanonical.size() - payload.size();
  for (const uint64_t size : {uint64_t{0}, uint64_t{4}, uint64_t{9}, uint64_t{11}, uint64_t{20},
                              header - 1, header, header + kCanonical.size() / 2,
                              header + kCanonical.size() + payload.size() / 2, full - 1}) {
    const fs::path path = store_entry(payload);
    fs::resize_file(path, size);
    expect_rejected(path, "truncated to " + std::to_string(size) + " bytes");
  }
  DiskCache c(root_, "cpu");
  ASSERT_TRUE(c.store(kKey, kCanonical, payload));
  EXPECT_EQ(DiskCache(root_, "cpu").load(kKey, kCanonical), payload);
}

TEST_F(DiskCacheTest, TrailingBytesAreRejected) {
  const fs::path path = store_entry("code");
  write_all(path, read_all(path) + "x");
  expect_rejected(path, "one byte appended");
}

TEST_F(DiskCacheTest, GarbledBodyFailsTheChecksum) {
  const std::string payload = binary_payload();
  const uint64_t full = fs::file_size(store_entry(payload));
  const uint64_t body_start = full - kCanonical.size() - payload.size();
  for (const uint64_t at : {body_start, body_start + 3, full - payload.size() + 1, full - 1}) {
    const fs::path path = store_entry(payload);
    std::string data = read_all(path);
    data[at] = static_cast<char>(data[at] ^ 0x10);
    write_all(path, data);
    expect_rejected(path, "byte " + std::to_string(at) + " flipped");
  }
}

TEST_F(DiskCacheTest, EveryGarbledHeaderByteIsRejected) {
  const std::string payload = binary_payload();
  const uint64_t full = fs::file_size(store_entry(payload));
  const uint64_t header = full - kCanonical.size() - payload.size();
  for (uint64_t at = 0; at < header; ++at) {
    const fs::path path = store_entry(payload);
    std::string data = read_all(path);
    data[at] = static_cast<char>(data[at] ^ 0x01);
    write_all(path, data);
    expect_rejected(path, "header byte " + std::to_string(at) + " flipped");
  }
}

TEST_F(DiskCacheTest, RejectionWarnsOnceNamingTheFileAndTheReason) {
  const fs::path path = store_entry(binary_payload());
  std::string data = read_all(path);
  data.back() = static_cast<char>(data.back() ^ 0x01);
  write_all(path, data);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(DiskCache(root_, "cpu").load(kKey, kCanonical));
  write_all(path, data);
  EXPECT_FALSE(DiskCache(root_, "cpu").load(kKey, kCanonical));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(path.string()), std::string::npos) << err;
  EXPECT_NE(err.find("checksum mismatch"), std::string::npos) << err;
  EXPECT_NE(err.find("rebuilt"), std::string::npos) << err;
  EXPECT_EQ(err.find("kiln: warning"), err.rfind("kiln: warning")) << "warned twice:\n" << err;
  EXPECT_EQ(runtime_counters().kernel_disk_rejected, 2u) << "but counted every time";
}

TEST_F(DiskCacheTest, OtherFormatVersionIsStale) {
  const fs::path path = store_entry("code");
  std::string data = read_all(path);
  data[9] = 2;  // the version follows the 9-byte magic
  write_all(path, data);
  ::testing::internal::CaptureStderr();
  expect_rejected(path, "format version 2");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("format version 2"), std::string::npos) << err;
}

TEST_F(DiskCacheTest, ReadOnlyDirectoryTurnsTheCacheOff) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  fs::create_directories(root_ / "cpu");
  fs::permissions(root_ / "cpu", fs::perms(0555));
  DiskCache c(root_, "cpu");
  EXPECT_TRUE(c.enabled()) << "found out at the first store, not before";
  EXPECT_FALSE(c.store(kKey, kCanonical, "code"));
  EXPECT_FALSE(c.enabled());
  EXPECT_EQ(c.load(kKey, kCanonical), std::nullopt);
  EXPECT_FALSE(c.store(kKey, kCanonical, "code"));
  EXPECT_EQ(runtime_counters().kernel_disk_writes, 0u);
  EXPECT_TRUE(fs::is_empty(root_ / "cpu")) << "no temp file left behind";
}

TEST_F(DiskCacheTest, DirectoryUnderARegularFileTurnsTheCacheOff) {
  write_all(root_ / "afile", "not a directory");
  DiskCache c(root_ / "afile" / "sub", "cpu");
  EXPECT_TRUE(c.enabled());
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(c.store(kKey, kCanonical, "code"));
  EXPECT_FALSE(c.store(kKey, kCanonical, "code"));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(c.enabled());
  EXPECT_EQ(c.load(kKey, kCanonical), std::nullopt);
  EXPECT_NE(err.find("not writable"), std::string::npos) << err;
  EXPECT_NE(err.find((root_ / "afile" / "sub" / "cpu").string()), std::string::npos) << err;
  EXPECT_NE(err.find("memory only"), std::string::npos) << err;
  EXPECT_EQ(err.find("kiln: warning"), err.rfind("kiln: warning")) << "warned twice:\n" << err;
  EXPECT_EQ(runtime_counters().kernel_disk_writes, 0u);
}

// kiln runs the object code it loads from its cache, so a directory another user can write
// (where they could plant an object with a valid checksum) is neither read nor written.
TEST_F(DiskCacheTest, ADirectoryOthersCanWriteIsNotUsed) {
  const fs::path planted = store_entry("code that another user could have written");
  for (const fs::path& open : {root_ / "cpu", root_}) {
    fs::permissions(open, fs::perms(0777));
    ::testing::internal::CaptureStderr();
    DiskCache c(root_, "cpu");
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_FALSE(c.enabled()) << open;
    EXPECT_EQ(c.load(kKey, kCanonical), std::nullopt) << "a valid entry there is not loaded: " << open;
    EXPECT_FALSE(c.store(kKey, kCanonical, "code")) << open;
    EXPECT_NE(err.find(open.string() + " is writable by other users (mode 0777)"), std::string::npos) << err;
    EXPECT_NE(err.find("memory only"), std::string::npos) << err;
    fs::permissions(open, fs::perms(0755));
  }
  EXPECT_TRUE(fs::exists(planted)) << "left where it is";
  EXPECT_EQ(DiskCache(root_, "cpu").load(kKey, kCanonical), "code that another user could have written")
      << "trusted again once only its owner can write it";
}

TEST_F(DiskCacheTest, ADirectoryOfAnotherUserIsNotUsed) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a directory to another user needs root";
  fs::create_directories(root_ / "cpu");
  ASSERT_EQ(::chown((root_ / "cpu").c_str(), 65534, 65534), 0);
  ::testing::internal::CaptureStderr();
  DiskCache c(root_, "cpu");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(c.enabled());
  EXPECT_NE(err.find("owned by user 65534"), std::string::npos) << err;
  EXPECT_NE(untrusted_cache_dir(root_ / "cpu" / "sub"), "") << "nor anything below it";
}

TEST_F(DiskCacheTest, AParentOthersCanWriteNeedsTheStickyBit) {
  // Others who can write a parent could rename the cache away and put theirs in its place,
  // unless the sticky bit (as /tmp has) lets only the owner rename it.
  fs::create_directories(root_ / "shared");
  fs::permissions(root_ / "shared", fs::perms(0777));
  const std::string why = untrusted_cache_dir(root_ / "shared" / "kiln");
  EXPECT_NE(why.find("writable by other users without the sticky bit"), std::string::npos) << why;
  fs::permissions(root_ / "shared", fs::perms(01777));
  EXPECT_EQ(untrusted_cache_dir(root_ / "shared" / "kiln"), "");
  EXPECT_EQ(untrusted_cache_dir(root_ / "shared" / "kiln" / "not" / "there"), "") << "created later, 0700";
}

TEST_F(DiskCacheTest, DirectoriesAreCreatedPrivateAndEntriesOwnerOnly) {
  const fs::path entry = DiskCache(root_ / "new" / "cache", "cpu").store(kKey, kCanonical, "code")
                             ? DiskCache(root_ / "new" / "cache", "cpu").path_of(kKey)
                             : fs::path();
  ASSERT_FALSE(entry.empty());
  for (const fs::path& d : {root_ / "new", root_ / "new" / "cache", root_ / "new" / "cache" / "cpu"})
    EXPECT_EQ(fs::status(d).permissions() & fs::perms::all, fs::perms::owner_all) << d;
  EXPECT_EQ(fs::status(entry).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(DiskCacheTest, EmptyRootDisablesQuietly) {
  ::testing::internal::CaptureStderr();
  DiskCache c({}, "cpu");
  EXPECT_FALSE(c.enabled());
  EXPECT_FALSE(c.store(kKey, kCanonical, "code"));
  EXPECT_EQ(c.load(kKey, kCanonical), std::nullopt);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_FALSE(fs::exists(fs::path("cpu") / "0123456789abcdef.bin"));
  EXPECT_EQ(runtime_counters().kernel_disk_writes, 0u);
}

TEST_F(DiskCacheTest, KeysMustBeFileNameSafe) {
  DiskCache c(root_, "cpu");
  for (const char* bad : {"", "../escape", "a/b", "a.b", "key with space", "k\n"}) {
    EXPECT_THROW(c.path_of(bad), Error) << bad;
    EXPECT_THROW(c.store(bad, kCanonical, "code"), Error) << bad;
    EXPECT_THROW(c.load(bad, kCanonical), Error) << bad;
  }
  EXPECT_NO_THROW(c.path_of("AZaz09_-"));
}

TEST(DiskCacheRoot, HonoursTheEnvironmentInOrder) {
  ScopedEnv kiln("KILN_CACHE_DIR", "/k/cache");
  ScopedEnv xdg("XDG_CACHE_HOME", "/x/cache");
  ScopedEnv home("HOME", "/h/me");
  EXPECT_EQ(DiskCache::default_root(), fs::path("/k/cache"));
  {
    ScopedEnv off("KILN_CACHE_DIR", "off");
    EXPECT_EQ(DiskCache::default_root(), fs::path());
  }
  {
    ScopedEnv empty("KILN_CACHE_DIR", "");
    EXPECT_EQ(DiskCache::default_root(), fs::path());
  }
  ScopedEnv no_kiln("KILN_CACHE_DIR", nullptr);
  EXPECT_EQ(DiskCache::default_root(), fs::path("/x/cache/kiln"));
  {
    ScopedEnv relative("XDG_CACHE_HOME", "relative");
    EXPECT_EQ(DiskCache::default_root(), fs::path("/h/me/.cache/kiln"))
        << "XDG ignores relative paths";
  }
  ScopedEnv no_xdg("XDG_CACHE_HOME", nullptr);
  EXPECT_EQ(DiskCache::default_root(), fs::path("/h/me/.cache/kiln"));
  ScopedEnv no_home("HOME", nullptr);
  EXPECT_EQ(DiskCache::default_root(), fs::path());
}

TEST_F(DiskCacheTest, ConcurrentWritersAndReadersSeeWholeEntries) {
  constexpr int kThreads = 8;
  std::vector<std::string> payloads;
  for (int t = 0; t < kThreads; ++t)
    payloads.push_back(
        binary_payload(200000 + 1000 * static_cast<size_t>(t), static_cast<unsigned>(t)));
  const auto is_one_of_them = [&](const std::string& p) {
    for (const std::string& q : payloads)
      if (p == q) return true;
    return false;
  };
  DiskCache shared(root_, "cpu");
  std::atomic<int> stored{0}, torn{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Half the threads share one object, half bring their own, as separate processes would.
      DiskCache own(root_, "cpu");
      DiskCache& c = t % 2 ? shared : own;
      for (int i = 0; i < 10; ++i) {
        if (c.store(kKey, kCanonical, payloads[static_cast<size_t>(t)])) ++stored;
        if (auto p = c.load(kKey, kCanonical); p && !is_one_of_them(*p)) ++torn;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(stored, kThreads * 10);
  EXPECT_EQ(torn, 0);
  EXPECT_EQ(runtime_counters().kernel_disk_rejected, 0u) << "no reader saw a partial file";
  const auto back = DiskCache(root_, "cpu").load(kKey, kCanonical);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(is_one_of_them(*back));
  std::vector<fs::path> left;
  for (const auto& e : fs::directory_iterator(root_ / "cpu")) left.push_back(e.path().filename());
  EXPECT_EQ(left, std::vector<fs::path>{"0123456789abcdef.bin"}) << "temp files are renamed away";
}

}  // namespace
}  // namespace kiln
