// kiln/runtime/disk_cache.h - compiled artifacts kept on disk between processes.
//
// One file per entry, named by its key (a hex hash of everything that determines the
// artifact: the kernel's canonical text, the compiler version, the CPU and its features, the
// kiln version). A file holds a header (magic, format version, key, lengths, a checksum of
// the rest), the canonical text the key was made from, and the payload. A load verifies all
// of it and compares the canonical text, so a collision or a damaged file is never trusted:
// it is reported once as a warning, removed, and the caller rebuilds. Writes go to a
// temporary file that is renamed into place, so readers in other processes see a whole entry
// or none. A directory that cannot be created or written is still read (a cache filled
// ahead of time may be deployed read-only), but nothing more is written to it: one warning
// says so, and compiled kernels are then kept in memory only. A directory another user owns
// or can write is neither read nor written: kiln runs the code it loads from there.
// Directories are created 0700 and entries 0600.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

/// Why kiln must not use `dir` as a cache of code it runs (empty when it may): the directory
/// (or, before it exists, the nearest ancestor that does) is owned by another user than this
/// process's, or other users can write it; or an ancestor other users can write without the
/// sticky bit (through which they could swap the directory) or owned by another user than
/// this one or root. ssh refuses a `~/.ssh` others can write for the same reason: a writer
/// could place an object file with a valid checksum, and kiln would load and run it.
std::string untrusted_cache_dir(const std::filesystem::path& dir);

/// Creates `dir` and its missing parents with mode 0700 (the cache is this user's alone);
/// false, with `why`, when it cannot.
bool create_private_dirs(const std::filesystem::path& dir, std::string& why);

class DiskCache {
 public:
  /// The default root: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln;
  /// empty when none of them is set. KILN_CACHE_DIR set to "" or "off" disables it.
  static std::filesystem::path default_root();

  /// A cache in `root`/`ns` ("cpu" for CPU object code). An empty root disables it, and so
  /// does a root or directory that another user owns or can write (untrusted_cache_dir; one
  /// warning names it and why): entries are then neither loaded nor stored.
  DiskCache(std::filesystem::path root, std::string ns);

  /// The payload stored under `key`, when a valid entry made from `canonical` exists. An
  /// invalid one is removed and counted as rejected (kernel_disk_rejected); hits and misses
  /// are the caller's to count (KernelStore counts each kernel once).
  std::optional<std::string> load(std::string_view key, std::string_view canonical);
  /// The same where the entry's canonical text is one that `matches` accepts (a group of
  /// kernels built together, whose text lists its members': KernelStore).
  using CanonicalMatch = std::function<bool(std::string_view stored)>;
  std::optional<std::string> load(std::string_view key, const CanonicalMatch& matches);

  /// Stores `payload` under `key` (atomically). Returns false when it could not be written
  /// (the cache then stays off for this process, after one warning).
  bool store(std::string_view key, std::string_view canonical, std::string_view payload);

  /// Removes `key`'s entry (one that loaded but proved unusable); quiet when it is absent.
  void remove(std::string_view key);

  /// Every valid entry whose canonical text contains `marker` (a backend's fingerprint), as
  /// (key, the file's bytes), sorted: what `kiln cache export` ships.
  std::vector<std::pair<std::string, std::string>> entries_containing(std::string_view marker) const;
  /// Stores a file entries_containing() returned, once it proves a valid entry under its key
  /// `name` (`kiln cache import`); false when it is not, or could not be written.
  bool store_entry_file(std::string_view name, std::string_view data);

  /// Whether new entries reach the disk (false when disabled or after a write failure).
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  const std::filesystem::path& dir() const { return dir_; }
  /// The file that holds `key`'s entry.
  std::filesystem::path path_of(std::string_view key) const;

  /// The size cap of one cache directory: KILN_DISK_CACHE_MB (default 1024) MiB. A store
  /// that takes the directory past it removes the least recently used entries (loads mark
  /// an entry used) until it is under 90% of the cap.
  static int64_t max_bytes();

 private:
  void enforce_cap(int64_t written);
  std::filesystem::path dir_;
  std::atomic<bool> enabled_{false};  // a failed store turns it off while other threads read it
  std::atomic<int64_t> size_estimate_{-1};  // bytes in dir_, -1: not scanned yet
  std::atomic<int> stores_since_scan_{0};
};

}  // namespace kiln
