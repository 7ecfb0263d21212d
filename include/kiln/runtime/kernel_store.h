// kiln/runtime/kernel_store.h - the one place compiled kernels are cached, for every backend.
//
// A backend asks its store for the kernels that canonical texts describe (a kernel's, its
// schedule's and the toolchain's fingerprint: kir::kernel_canonical); the hash of the text is
// the key. The store looks, in order:
//
//   memory  every kernel some holder still uses, and the most recently used ones, which the
//           store holds so that they outlive the executables using them (an LRU of
//           KILN_KERNEL_CACHE_SIZE). The canonical text is compared on every hit: a key
//           collision never runs the wrong code.
//   disk    an entry (DiskCache) whose bytes the toolchain loads. An entry it refuses
//           (another driver's binary, an object that does not link) is removed, counted once
//           as rejected and once as a miss, and rebuilt.
//   build   the toolchain's compiler, unless KILN_NO_COMPILE=1; timed, counted and logged
//           (KILN_LOG=compile); its bytes are written to disk for the next process.
//
// Kernels built together (an OpenCL program of a plan's kernels: a build costs about as
// much for one as for ten) are one disk entry, and each of them has an entry of its own that
// names that one and its position there: a process that needs another set of them (a warm
// deployment, whose plans group kernels otherwise than the warmup that tuned them one at a
// time) finds each.
//
// A kernel that threads ask for at once is built once; the others wait for it. Builds run
// outside the store's lock, so different kernels compile at once. Thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/runtime/disk_cache.h"

namespace kiln {

class KernelStore {
 public:
  /// A compiled kernel, or a group of them as its toolchain loaded it (a linked object file,
  /// a program); the store neither looks inside nor knows its type.
  using Object = std::shared_ptr<const void>;

  struct Request {
    std::string canonical;  // everything the compiled code depends on
    std::string what;       // how logs and errors name the kernel: "kernel @fused_3"
  };

  /// What a build made of the kernels it was given.
  struct Built {
    std::string bytes;  // what the disk keeps, for `load` in a later process
    Object group;       // the loaded group, as `load` would make it of `bytes`
    std::string detail; // appended to the compile log line ("IR 0.4 ms, ...")
  };

  /// The store's calls into a backend's toolchain for one get(): the requests' indices are
  /// those of the span passed to get().
  struct Toolchain {
    /// Builds requests `indices` together into one group (their positions in it are those
    /// in `indices`), to be stored under `key` (a toolchain may name its symbols by it).
    /// Throws kiln::Error naming the kernels when the compiler fails.
    std::function<Built(std::span<const size_t> indices, std::string_view key)> build;
    /// The group that a disk entry's bytes (a build's, maybe of another process, another
    /// driver), stored under `key`, hold; throws kiln::Error when they are not this
    /// toolchain's.
    std::function<Object(std::string_view bytes, std::string_view key)> load;
    /// The kernel at `position` of `group`, as request `index` asks for it (its name, its
    /// scalars); throws kiln::Error when the group has none there (a stale entry).
    std::function<Object(const Object& group, size_t position, size_t index)> member;
  };

  /// A store whose disk tier is `root`/`ns` (DiskCache; an empty root keeps it in memory),
  /// for `device` as logs and errors name it ("opencl:1"; `ns` when empty).
  KernelStore(std::filesystem::path root, std::string ns, std::string device);
  /// The process's default root (DiskCache::default_root).
  explicit KernelStore(std::string ns, std::string device = {});
  ~KernelStore();
  KernelStore(const KernelStore&) = delete;
  KernelStore& operator=(const KernelStore&) = delete;

  /// The kernels `requests` describe, `[i]` for `requests[i]`: from memory, from disk, or
  /// built, all of the missing ones in one build (a request that occurs twice is built
  /// once). Throws the build's kiln::Error, or KILN_NO_COMPILE's.
  std::vector<Object> get(std::span<const Request> requests, const Toolchain& toolchain);

  /// One kernel, as its toolchain's type.
  template <class T>
  std::shared_ptr<const T> get_one(Request request, const Toolchain& toolchain) {
    return std::static_pointer_cast<const T>(get({&request, 1}, toolchain)[0]);
  }

  /// Kernels the memory tier's LRU holds.
  size_t cached_kernels() const;
  DiskCache& disk();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
