// The kernel store (kiln/runtime/kernel_store.h) with a toolchain of its own whose kernels are
// strings: its tiers in order, its counters, a refused disk entry, groups found by member, a
// kernel asked for by many threads at once, a failed build, KILN_NO_COMPILE.
#include "kiln/runtime/kernel_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kiln/ir/hash.h"
#include "kiln/runtime/disk_cache.h"
#include "kiln/runtime/stats.h"
#include "kiln/support/error.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// A kernel of the fake toolchain: the text it was built from.
struct FakeKernel {
  std::string text;
};

// Builds a group by joining its requests' canonical texts with '|'; a member is the
// position's part. `refuse` makes load() refuse every entry (another driver's bytes).
struct FakeToolchain {
  std::atomic<int> builds{0}, loads{0};
  std::atomic<int> built_kernels{0};
  bool refuse = false;
  bool fail_build = false;
  std::chrono::milliseconds build_time{0};

  KernelStore::Toolchain calls(std::span<const KernelStore::Request> requests) {
    KernelStore::Toolchain t;
    t.build = [this, requests](std::span<const size_t> indices, std::string_view) {
      builds++;
      built_kernels += static_cast<int>(indices.size());
      std::this_thread::sleep_for(build_time);
      if (fail_build) throw Error("fake: kernel does not compile");
      std::string bytes;
      for (size_t j = 0; j < indices.size(); ++j) bytes += (j ? "|" : "") + requests[indices[j]].canonical;
      return KernelStore::Built{bytes, std::make_shared<const std::string>(bytes), "fake"};
    };
    t.load = [this](std::string_view bytes, std::string_view) -> KernelStore::Object {
      loads++;
      if (refuse) throw Error("fake: not this toolchain's bytes");
      return std::make_shared<const std::string>(bytes);
    };
    t.member = [](const KernelStore::Object& group, size_t position, size_t) -> KernelStore::Object {
      const auto& text = *std::static_pointer_cast<const std::string>(group);
      size_t begin = 0;
      for (size_t p = 0; p < position; ++p) {
        begin = text.find('|', begin);
        if (begin == std::string::npos) throw Error("fake: no kernel at that position");
        ++begin;
      }
      return std::make_shared<const FakeKernel>(FakeKernel{text.substr(begin, text.find('|', begin) - begin)});
    };
    return t;
  }
};

class KernelStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime_counters().reset();
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() / ("kiln_kernel_store_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // A store as a new process would have it.
  std::unique_ptr<KernelStore> store() { return std::make_unique<KernelStore>(root_, "fake", "fake:0"); }

  static std::vector<KernelStore::Request> requests(std::initializer_list<const char*> texts) {
    std::vector<KernelStore::Request> out;
    for (const char* t : texts) out.push_back({t, fmt_what(t)});
    return out;
  }
  static std::string fmt_what(const char* t) { return std::string("kernel @") + t; }

  static std::string text(const KernelStore::Object& o) { return std::static_pointer_cast<const FakeKernel>(o)->text; }

  fs::path root_;
};

TEST_F(KernelStoreTest, MemoryThenDiskThenBuildEachCountedOnce) {
  auto& n = runtime_counters();
  const auto r = requests({"a"});
  FakeToolchain tc;
  auto first = store();
  const KernelStore::Object built = first->get(r, tc.calls(r))[0];
  EXPECT_EQ(text(built), "a");
  EXPECT_EQ(tc.builds, 1);
  EXPECT_EQ(n.kernels_compiled, 1u);
  EXPECT_EQ(n.kernel_disk_misses, 1u);
  EXPECT_EQ(n.kernel_disk_writes, 1u);

  EXPECT_EQ(first->get(r, tc.calls(r))[0], built) << "the same object from memory";
  EXPECT_EQ(n.kernel_memory_hits, 1u);
  EXPECT_EQ(tc.builds, 1);

  auto second = store();
  EXPECT_EQ(text(second->get(r, tc.calls(r))[0]), "a");
  EXPECT_EQ(tc.builds, 1) << "found on disk";
  EXPECT_EQ(tc.loads, 1);
  EXPECT_EQ(n.kernel_disk_hits, 1u);
  EXPECT_EQ(n.kernel_disk_misses, 1u);
  EXPECT_EQ(n.kernels_compiled, 1u);
}

TEST_F(KernelStoreTest, AnEntryTheToolchainRefusesIsRemovedRebuiltAndCountedOnce) {
  auto& n = runtime_counters();
  const auto r = requests({"a"});
  FakeToolchain tc;
  store()->get(r, tc.calls(r));
  FakeToolchain other;  // another driver, which does not load what the first wrote
  other.refuse = true;
  auto s = store();
  EXPECT_EQ(text(s->get(r, other.calls(r))[0]), "a");
  EXPECT_EQ(other.loads, 1);
  EXPECT_EQ(other.builds, 1);
  EXPECT_EQ(n.kernel_disk_rejected, 1u);
  EXPECT_EQ(n.kernel_disk_hits, 0u);
  EXPECT_EQ(n.kernel_disk_misses, 2u) << "the first build's and the rebuild's";
  EXPECT_EQ(n.kernel_disk_writes, 2u) << "the rebuilt entry replaces the refused one";
  EXPECT_TRUE(fs::exists(s->disk().dir()));
}

TEST_F(KernelStoreTest, KernelsBuiltTogetherAreFoundOneByOne) {
  const auto all = requests({"a", "b", "c"});
  FakeToolchain tc;
  const std::vector<KernelStore::Object> built = store()->get(all, tc.calls(all));
  ASSERT_EQ(built.size(), 3u);
  EXPECT_EQ(text(built[0]) + text(built[1]) + text(built[2]), "abc");
  EXPECT_EQ(tc.builds, 1) << "one build for the three";

  // Another process asks for them in other sets: each is found through its member entry,
  // and a group read once per get().
  FakeToolchain later;
  auto s = store();
  const auto b = requests({"b"});
  EXPECT_EQ(text(s->get(b, later.calls(b))[0]), "b");
  const auto ca = requests({"c", "a"});
  const std::vector<KernelStore::Object> found = s->get(ca, later.calls(ca));
  EXPECT_EQ(text(found[0]) + text(found[1]), "ca");
  EXPECT_EQ(later.builds, 0);
  EXPECT_EQ(later.loads, 2) << "the group, once for each get()";
  EXPECT_EQ(runtime_counters().kernel_disk_hits, 3u);
}

// A group's entry holds its members' texts once; a member's entry names the group and its
// position, never the group's text again (which made a group of n kernels cost n^2 on disk).
TEST_F(KernelStoreTest, AGroupsTextIsStoredOnce) {
  const std::string long_text(4096, 'x');
  std::vector<std::string> texts;
  std::vector<KernelStore::Request> all;
  for (int i = 0; i < 16; ++i) texts.push_back(long_text + std::to_string(i));
  for (const std::string& t : texts) all.push_back({t, "kernel @" + t.substr(4096)});
  FakeToolchain tc;
  auto s = store();
  s->get(all, tc.calls(all));
  int64_t bytes = 0;
  int entries = 0;
  for (const auto& e : fs::recursive_directory_iterator(s->disk().dir()))
    if (e.is_regular_file()) bytes += static_cast<int64_t>(e.file_size()), ++entries;
  EXPECT_EQ(entries, 17) << "the group and a member entry each";
  // The group's text, its bytes (the texts again, joined) and each member's own text.
  EXPECT_LT(bytes, 4 * 16 * 4200) << "a group of 16 texts of 4 KiB";

  FakeToolchain later;
  const auto one = std::vector<KernelStore::Request>{all[3]};
  EXPECT_EQ(text(store()->get(one, later.calls(one))[0]), texts[3]);
  EXPECT_EQ(later.builds, 0) << "found through its member entry";

  // A member's entry that names a position where the group lists another text is not
  // trusted: the group's entry is refused and the kernel rebuilt.
  DiskCache disk(root_, "fake");
  const std::string member = "member " + texts[3], key = hash_text(member).hex();
  const std::optional<std::string> entry = disk.load(key, member);
  ASSERT_TRUE(entry);
  ASSERT_TRUE(entry->ends_with("\n3"));
  ASSERT_TRUE(disk.store(key, member, entry->substr(0, entry->size() - 1) + "4"));
  FakeToolchain misled;
  EXPECT_EQ(text(store()->get(one, misled.calls(one))[0]), texts[3]);
  EXPECT_EQ(misled.builds, 1);
}

TEST_F(KernelStoreTest, ARequestTwiceInOneGetIsBuiltOnce) {
  const auto r = requests({"a", "b", "a"});
  FakeToolchain tc;
  const std::vector<KernelStore::Object> got = store()->get(r, tc.calls(r));
  EXPECT_EQ(got[0], got[2]);
  EXPECT_EQ(tc.built_kernels, 2);
  EXPECT_EQ(runtime_counters().kernels_compiled, 2u);
}

TEST_F(KernelStoreTest, ThreadsAskingAtOnceGetOneBuild) {
  const auto r = requests({"a"});
  FakeToolchain tc;
  tc.build_time = std::chrono::milliseconds(50);
  auto s = store();
  std::vector<KernelStore::Object> got(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) threads.emplace_back([&, t] { got[t] = s->get(r, tc.calls(r))[0]; });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(tc.builds, 1);
  for (const KernelStore::Object& o : got) EXPECT_EQ(o, got[0]);
  EXPECT_EQ(runtime_counters().kernels_compiled, 1u);
}

TEST_F(KernelStoreTest, AFailedBuildIsNotCachedAndFailsEveryWaiter) {
  const auto r = requests({"a"});
  FakeToolchain tc;
  tc.fail_build = true;
  tc.build_time = std::chrono::milliseconds(30);
  auto s = store();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      try {
        s->get(r, tc.calls(r));
      } catch (const Error& e) {
        if (std::string(e.what()).find("does not compile") != std::string::npos) failures++;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, 4);
  tc.fail_build = false;
  EXPECT_EQ(text(s->get(r, tc.calls(r))[0]), "a") << "tried again";
}

TEST_F(KernelStoreTest, AFailedBuildKeepsWhatLoaded) {
  const auto a = requests({"a"});
  FakeToolchain tc;
  store()->get(a, tc.calls(a));
  const auto ab = requests({"a", "b"});
  tc.fail_build = true;
  auto s = store();
  EXPECT_THROW(s->get(ab, tc.calls(ab)), Error);
  const int loads = tc.loads;
  EXPECT_EQ(text(s->get(a, tc.calls(a))[0]), "a");
  EXPECT_EQ(tc.loads, loads) << "kept in memory from the failed get";
}

TEST_F(KernelStoreTest, NoCompileRefusesABuildNamingTheKernelsAndDevice) {
  const auto r = requests({"a"});
  FakeToolchain tc;
  ::setenv("KILN_NO_COMPILE", "1", 1);
  try {
    store()->get(r, tc.calls(r));
    ADD_FAILURE() << "KILN_NO_COMPILE=1 let a build run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernel @a for fake:0 is in no cache"), std::string::npos) << e.what();
  }
  ::unsetenv("KILN_NO_COMPILE");
  EXPECT_EQ(tc.builds, 0);
  store()->get(r, tc.calls(r));
  ::setenv("KILN_NO_COMPILE", "1", 1);
  EXPECT_EQ(text(store()->get(r, tc.calls(r))[0]), "a") << "a cached kernel needs no compile";
  ::unsetenv("KILN_NO_COMPILE");
}

TEST_F(KernelStoreTest, AKernelSomeoneHoldsOutlivesTheLruAndIsFound) {
  ::setenv("KILN_KERNEL_CACHE_SIZE", "2", 1);
  auto s = std::make_unique<KernelStore>(fs::path(), "fake", "fake:0");  // memory only
  ::unsetenv("KILN_KERNEL_CACHE_SIZE");
  FakeToolchain tc;
  const auto a = requests({"a"});
  const KernelStore::Object held = s->get(a, tc.calls(a))[0];
  for (const char* t : {"b", "c", "d"}) {
    const auto r = requests({t});
    s->get(r, tc.calls(r));
  }
  EXPECT_EQ(s->cached_kernels(), 2u);
  EXPECT_GE(runtime_counters().kernel_evictions, 2u);
  EXPECT_EQ(s->get(a, tc.calls(a))[0], held) << "alive, so found without a rebuild";
  EXPECT_EQ(tc.builds, 4);
  EXPECT_EQ(runtime_counters().kernel_disk_misses, 0u) << "no disk tier, no disk misses";
}

}  // namespace
}  // namespace kiln
