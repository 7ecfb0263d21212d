// runtime/disk_cache.cpp - the on-disk entry format, its validation, and atomic writes.
#include "kiln/runtime/disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <random>
#include <system_error>
#include <vector>

#include "kiln/runtime/stats.h"
#include "kiln/support/env.h"
#include "kiln/support/error.h"
#include "kiln/support/log.h"

namespace kiln {
namespace fs = std::filesystem;
namespace {

// Entry layout, integers little-endian:
//   "KILNCACHE" | u32 version | u32 key length | key | u64 canonical length |
//   u64 payload length | u64 FNV-1a-64 of canonical + payload | canonical | payload
constexpr std::string_view kMagic = "KILNCACHE";
// Bump on any layout change: files in the old layout then fail the check and are rebuilt.
constexpr uint64_t kFormatVersion = 1;

// Catches torn and bit-flipped files; it is not meant to resist deliberate tampering.
uint64_t fnv1a64(std::string_view bytes, uint64_t h = 0xcbf29ce484222325ull) {
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

void put_uint(std::string& out, uint64_t v, int width) {
  for (int i = 0; i < width; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Reads header fields in order; running out of bytes means the file was truncated.
class Reader {
 public:
  explicit Reader(std::string_view data) : rest_(data) {}
  bool uint(int width, uint64_t& v) {
    if (rest_.size() < static_cast<size_t>(width)) return false;
    v = 0;
    for (int i = 0; i < width; ++i)
      v |= uint64_t{static_cast<unsigned char>(rest_[static_cast<size_t>(i)])} << (8 * i);
    rest_.remove_prefix(static_cast<size_t>(width));
    return true;
  }
  bool bytes(uint64_t n, std::string_view& out) {
    if (n > rest_.size()) return false;
    out = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return true;
  }
  std::string_view rest() const { return rest_; }

 private:
  std::string_view rest_;
};

// Why `data` is not a valid entry for `key`; empty (and `stored_canonical`, `payload` set)
// when it is.
std::string read_entry(std::string_view data, std::string_view key, std::string_view& stored_canonical,
                       std::string_view& payload) {
  Reader r(data);
  std::string_view magic, stored_key;
  uint64_t version = 0, key_len = 0, canon_len = 0, payload_len = 0, sum = 0;
  if (!r.bytes(kMagic.size(), magic)) return "truncated";
  if (magic != kMagic) return "bad magic, not a kiln cache file";
  if (!r.uint(4, version)) return "truncated";
  if (version != kFormatVersion)
    return fmt::format("format version {}, expected {}", version, kFormatVersion);
  if (!r.uint(4, key_len) || !r.bytes(key_len, stored_key)) return "truncated";
  if (stored_key != key) return "holds a different key";
  if (!r.uint(8, canon_len) || !r.uint(8, payload_len) || !r.uint(8, sum)) return "truncated";
  const std::string_view body = r.rest();
  if (canon_len > body.size() || payload_len > body.size() - canon_len) return "truncated";
  if (canon_len + payload_len != body.size()) return "lengths disagree with the file size";
  if (fnv1a64(body) != sum) return "checksum mismatch";
  stored_canonical = body.substr(0, canon_len);
  payload = body.substr(canon_len);
  return {};
}

// Why `data` is not a valid entry for `key` made from `canonical`; empty (and `payload` set)
// when it is.
std::string check_entry(std::string_view data, std::string_view key, const DiskCache::CanonicalMatch& matches,
                        std::string_view& payload) {
  std::string_view stored;
  if (std::string why = read_entry(data, key, stored, payload); !why.empty()) return why;
  // A different canonical text under the same key is a hash collision, never a hit.
  if (!matches(stored)) return "canonical text differs from the kernel's";
  return {};
}

// The bytes of `path`; nullopt when it cannot be opened.
std::optional<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Unique across threads (the counter), forked processes (the pid) and containers that share
// the directory but reuse pids (the random token), so no two writers share a temp file.
std::string temp_suffix() {
  static const uint64_t token = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  return fmt::format(".tmp.{}.{:016x}.{}", ::getpid(), token, counter.fetch_add(1));
}

std::string errno_message() {
  return std::system_category().message(errno);
}

// Writes `parts` to a new file at `path`; returns why it failed, or empty.
std::string write_new_file(const fs::path& path, std::initializer_list<std::string_view> parts) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno_message();
  for (std::string_view part : parts) {
    while (!part.empty()) {
      const ssize_t n = ::write(fd, part.data(), part.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        std::string why = errno_message();
        ::close(fd);
        return why;
      }
      part.remove_prefix(static_cast<size_t>(n));
    }
  }
  return ::close(fd) == 0 ? std::string() : errno_message();
}

}  // namespace

fs::path DiskCache::default_root() {
  auto env = [](const char* name) -> std::optional<std::string_view> {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string_view>(v) : std::nullopt;
  };
  if (auto dir = env("KILN_CACHE_DIR"))
    return (dir->empty() || *dir == "off") ? fs::path() : fs::path(*dir);
  // The XDG spec says to ignore an empty or relative XDG_CACHE_HOME.
  if (auto xdg = env("XDG_CACHE_HOME"); xdg && fs::path(*xdg).is_absolute())
    return fs::path(*xdg) / "kiln";
  if (auto home = env("HOME"); home && !home->empty()) return fs::path(*home) / ".cache" / "kiln";
  return {};
}

std::string untrusted_cache_dir(const fs::path& dir) {
  const uid_t me = ::geteuid();
  std::error_code ec;
  fs::path at = fs::absolute(dir, ec);
  if (ec) return fmt::format("its absolute path is unknown ({})", ec.message());
  // The directory itself, when it exists, then every ancestor: one not there yet is created
  // 0700 by kiln, in an ancestor others cannot swap.
  bool self = true;
  while (true) {
    struct stat st {};
    const bool exists = ::stat(at.c_str(), &st) == 0;
    if (exists) {
      const bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
      if (self) {
        if (st.st_uid != me)
          return fmt::format("{} is owned by user {}, not by this process's user {}", at.string(), st.st_uid, me);
        if (others_write)
          return fmt::format("{} is writable by other users (mode {:04o})", at.string(), st.st_mode & 07777);
      } else {
        if (st.st_uid != me && st.st_uid != 0)
          return fmt::format("its parent {} is owned by user {}", at.string(), st.st_uid);
        if (others_write && (st.st_mode & S_ISVTX) == 0)
          return fmt::format("its parent {} is writable by other users without the sticky bit (mode {:04o})",
                             at.string(), st.st_mode & 07777);
      }
    } else if (errno != ENOENT && errno != ENOTDIR) {
      return fmt::format("{} cannot be examined ({})", at.string(), errno_message());
    }
    self = false;
    if (!at.has_parent_path() || at.parent_path() == at) break;
    at = at.parent_path();
  }
  return {};
}

bool create_private_dirs(const fs::path& dir, std::string& why) {
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return true;
  if (dir.has_parent_path() && dir.parent_path() != dir && !create_private_dirs(dir.parent_path(), why)) return false;
  if (::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) return true;
  why = errno_message();
  return false;
}

DiskCache::DiskCache(fs::path root, std::string ns) {
  if (root.empty()) return;
  for (const fs::path& d : {root, root / ns}) {
    if (const std::string why = untrusted_cache_dir(d); !why.empty()) {
      warn_once("disk-cache-untrusted:" + d.string(),
                fmt::format("cache directory {} is not used: {}; kiln runs the code it loads from its cache, so "
                            "compiled kernels are cached in memory only",
                            d.string(), why));
      return;
    }
  }
  dir_ = root / ns;
  enabled_.store(true, std::memory_order_relaxed);
}

fs::path DiskCache::path_of(std::string_view key) const {
  const bool valid = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == '-';
  });
  // Keys become file names: anything else could escape the directory or clash with temp files.
  if (!valid) throw Error(fmt::format("invalid disk cache key '{}': expected [0-9a-zA-Z_-]+", key));
  return dir_ / (std::string(key) + ".bin");
}

std::optional<std::string> DiskCache::load(std::string_view key, std::string_view canonical) {
  return load(key, [canonical](std::string_view stored) { return stored == canonical; });
}

std::optional<std::string> DiskCache::load(std::string_view key, const CanonicalMatch& matches) {
  // A directory that cannot be written is still read: a cache filled ahead of time may be
  // deployed read-only.
  if (dir_.empty()) return std::nullopt;
  const fs::path path = path_of(key);
  RuntimeCounters& counters = runtime_counters();
  // Only a regular file no larger than the whole cache may be an entry: a directory, a FIFO
  // or a link to a device in its place is stale, never opened.
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st)) return std::nullopt;
  if (!fs::is_regular_file(st) || fs::file_size(path, ec) > static_cast<uintmax_t>(max_bytes()) || ec) {
    ++counters.kernel_disk_rejected;
    warn_once(path.string(), fmt::format("disk cache entry {} is not a regular file of at most {} bytes; removing "
                                         "it, the kernel will be rebuilt", path.string(), max_bytes()));
    fs::remove_all(path, ec);
    return std::nullopt;
  }
  const std::optional<std::string> file = read_file(path);
  if (!file) return std::nullopt;
  const std::string& data = *file;
  std::string_view payload;
  if (const std::string why = check_entry(data, key, matches, payload); !why.empty()) {
    ++counters.kernel_disk_rejected;
    warn_once(path.string(), fmt::format("disk cache entry {} is invalid ({}); removing it, the "
                                         "kernel will be rebuilt",
                                         path.string(), why));
    // Another process may have just renamed a good entry into place; losing it costs a rebuild.
    std::error_code ignored;
    fs::remove(path, ignored);
    return std::nullopt;
  }
  // Recency for the size cap's eviction: the least recently used entries go first.
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);
  return std::string(payload);
}

void DiskCache::remove(std::string_view key) {
  if (dir_.empty()) return;
  std::error_code ignored;
  fs::remove(path_of(key), ignored);
}

int64_t DiskCache::max_bytes() {
  static const int64_t cap = env_int("KILN_DISK_CACHE_MB", 1, int64_t{1} << 30).value_or(1024) << 20;
  return cap;
}

void DiskCache::enforce_cap(int64_t written) {
  // A running estimate of the directory's size, so that a store does not list the directory:
  // a full scan on the first store, when the estimate passes the cap, and every 256 stores
  // (other processes write here too).
  int64_t estimate = size_estimate_.load(std::memory_order_relaxed);
  if (estimate >= 0 && stores_since_scan_.fetch_add(1, std::memory_order_relaxed) < 256) {
    estimate = size_estimate_.fetch_add(written, std::memory_order_relaxed) + written;
    if (estimate <= max_bytes()) return;
  }
  stores_since_scan_.store(0, std::memory_order_relaxed);
  struct Entry {
    fs::file_time_type used;
    uintmax_t bytes;
    fs::path path;
  };
  std::vector<Entry> entries;
  uintmax_t total = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (!it->is_regular_file(e2) || it->path().extension() != ".bin") continue;
    const uintmax_t bytes = it->file_size(e2);
    const fs::file_time_type used = it->last_write_time(e2);
    if (e2) continue;
    entries.push_back({used, bytes, it->path()});
    total += bytes;
  }
  const auto cap = static_cast<uintmax_t>(max_bytes());
  size_estimate_.store(static_cast<int64_t>(std::min<uintmax_t>(total, cap)), std::memory_order_relaxed);
  if (total <= cap) return;
  // Down to 90% of the cap, oldest first, so that the next stores do not scan again at once.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const Entry& e : entries) {
    if (total <= cap / 10 * 9) break;
    if (fs::remove(e.path, ec)) {
      total -= e.bytes;
      ++runtime_counters().disk_evictions;
    }
  }
  size_estimate_.store(static_cast<int64_t>(total), std::memory_order_relaxed);
}

bool DiskCache::store(std::string_view key, std::string_view canonical, std::string_view payload) {
  if (!enabled_.load(std::memory_order_relaxed)) return false;
  const fs::path path = path_of(key);
  std::string header(kMagic);
  put_uint(header, kFormatVersion, 4);
  put_uint(header, key.size(), 4);
  header += key;
  put_uint(header, canonical.size(), 8);
  put_uint(header, payload.size(), 8);
  put_uint(header, fnv1a64(payload, fnv1a64(canonical)), 8);

  // Created at every store (one stat when it exists), so a directory deleted while the
  // process runs comes back.
  std::error_code ec;
  std::string why;
  create_private_dirs(dir_, why);
  // Readers in other processes see the old entry or the new one, never a partial file.
  const fs::path tmp = fs::path(path) += temp_suffix();
  if (why.empty()) why = write_new_file(tmp, {header, canonical, payload});
  if (why.empty()) {
    fs::rename(tmp, path, ec);
    if (!ec) {
      ++runtime_counters().kernel_disk_writes;
      enforce_cap(static_cast<int64_t>(header.size() + canonical.size() + payload.size()));
      return true;
    }
    why = ec.message();
  }
  fs::remove(tmp, ec);
  enabled_.store(false, std::memory_order_relaxed);
  warn_once("disk-cache-off:" + dir_.string(),
            fmt::format("cache directory {} is not writable ({}); compiled kernels are cached in "
                        "memory only",
                        dir_.string(), why));
  return false;
}

std::vector<std::pair<std::string, std::string>> DiskCache::entries_containing(std::string_view marker) const {
  std::vector<std::pair<std::string, std::string>> out;
  std::error_code ec;
  if (dir_.empty() || !fs::is_directory(dir_, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
    if (!e.is_regular_file(ec) || e.path().extension() != ".bin") continue;  // temp files are not entries
    const std::string name = e.path().stem().string();
    std::optional<std::string> data = read_file(e.path());
    std::string_view canonical, payload;
    if (!data || !read_entry(*data, name, canonical, payload).empty()) continue;
    if (canonical.find(marker) == std::string_view::npos) continue;
    out.emplace_back(name, std::move(*data));
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool DiskCache::store_entry_file(std::string_view name, std::string_view data) {
  std::string_view canonical, payload;
  if (name.empty() || name.find('/') != std::string_view::npos || !read_entry(data, name, canonical, payload).empty())
    return false;
  try {
    return store(name, canonical, payload);
  } catch (const Error&) {  // a key that is no file name
    return false;
  }
}

}  // namespace kiln
