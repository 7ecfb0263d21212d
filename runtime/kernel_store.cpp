// runtime/kernel_store.cpp - memory, disk and build tiers of compiled kernels (kernel_store.h).
#include "kiln/runtime/kernel_store.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "kiln/ir/hash.h"
#include "kiln/runtime/compile_policy.h"
#include "kiln/runtime/stats.h"
#include "kiln/support/error.h"
#include "kiln/support/log.h"
#include "kiln/support/lru_cache.h"

namespace kiln {
namespace {

using Object = KernelStore::Object;

// The entry of a kernel built in a group: the group's key and the kernel's position there.
// The group's own entry holds the canonical text once, as the list of its members' texts
// (group_canonical); loading it through a member compares that member's text with the one at
// its position, so no entry repeats another's text.
std::string member_canonical(const std::string& canonical) { return "member " + canonical; }
std::string member_key(const std::string& canonical) { return hash_text(member_canonical(canonical)).hex(); }

struct MemberEntry {
  std::string group_key;
  size_t position = 0;
};

std::optional<MemberEntry> parse_member(const std::string& entry) {
  const size_t newline = entry.find('\n');
  if (newline == std::string::npos || newline == 0) return std::nullopt;
  MemberEntry m;
  m.group_key = entry.substr(0, newline);
  const std::string_view digits = std::string_view(entry).substr(newline + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), m.position);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return m;
}

// The canonical text of a group: each member's text, length-prefixed, in build order.
std::string group_canonical(std::span<const KernelStore::Request> requests, const std::vector<size_t>& indices) {
  std::string out;
  for (size_t i : indices) out += fmt::format("{}:{}", requests[i].canonical.size(), requests[i].canonical);
  return out;
}

// Whether member `position` of group text `group` is `canonical`.
bool group_lists(std::string_view group, size_t position, std::string_view canonical) {
  for (size_t at = 0, member = 0; at < group.size(); ++member) {
    const size_t colon = group.find(':', at);
    size_t length = 0;
    if (colon == std::string_view::npos ||
        std::from_chars(group.data() + at, group.data() + colon, length).ec != std::errc() ||
        length > group.size() - colon - 1)
      return false;
    if (member == position) return group.substr(colon + 1, length) == canonical;
    at = colon + 1 + length;
  }
  return false;
}

// A kernel this get() builds or loads, and the other gets that wait for it.
struct Claim {
  std::string key;
  std::vector<size_t> indices;  // the requests that asked for it: the same kernel may occur twice
  std::promise<Object> promise;
};

}  // namespace

struct KernelStore::Impl {
  DiskCache disk;
  std::string device;
  mutable std::mutex mutex;  // the maps below; no build, load or destructor of a kernel runs under it
  struct Alive {
    std::string canonical;
    std::weak_ptr<const void> object;
  };
  // Every kernel some holder still uses, and the most recently used ones, held.
  std::unordered_map<std::string, Alive> alive;
  LruCache<std::string, Object> recent{kernel_cache_capacity()};
  struct Flight {
    std::string canonical;
    std::shared_future<Object> done;
  };
  std::unordered_map<std::string, Flight> in_flight;

  Impl(std::filesystem::path root, const std::string& ns, std::string d)
      : disk(std::move(root), ns), device(d.empty() ? ns : std::move(d)) {}

  static void check_collision(const std::string& key, const std::string& held, const Request& r) {
    if (held != r.canonical)
      throw Error(fmt::format("internal error: kernel cache key collision on {} ({})", key, r.what));
  }

  // The kernel under `key` if a holder still uses it (now the most recent). Holds the mutex.
  Object find(const std::string& key, const Request& r, std::vector<Object>& evicted) {
    auto it = alive.find(key);
    if (it == alive.end()) return nullptr;
    check_collision(key, it->second.canonical, r);
    Object held = it->second.object.lock();
    if (!held) {
      alive.erase(it);
      return nullptr;
    }
    runtime_counters().kernel_memory_hits++;
    runtime_counters().kernel_evictions += recent.put(key, held, &evicted);
    return held;
  }

  // Holds the mutex.
  void insert(const std::string& key, const std::string& canonical, const Object& object, std::vector<Object>& evicted) {
    alive[key] = Alive{canonical, object};
    runtime_counters().kernel_evictions += recent.put(key, object, &evicted);
    // Kernels that died since they were last asked for leave entries behind; sweep them once
    // they outnumber the LRU's.
    if (alive.size() > 2 * recent.capacity() + 1024) std::erase_if(alive, [](const auto& a) { return a.second.object.expired(); });
  }

  // A disk entry the toolchain refused: removed, counted, rebuilt by the caller.
  void reject(const std::string& key, std::string_view why) {
    runtime_counters().kernel_disk_rejected++;
    const std::string path = disk.path_of(key).string();
    warn_once(path, fmt::format("disk cache entry {} is not usable by {} ({}); removing it, the kernel will be rebuilt",
                                path, device, why));
    disk.remove(key);
  }

  // Request `i` from disk: its own entry, or its entry as a member of a group built
  // together; null when neither is usable. `groups` holds the groups this get() loaded.
  Object from_disk(const std::string& key, const Request& r, size_t i, const Toolchain& tc,
                   std::map<std::string, Object>& groups) {
    if (std::optional<std::string> bytes = disk.load(key, r.canonical)) {
      try {
        return tc.member(tc.load(*bytes, key), 0, i);
      } catch (const Error& e) {
        reject(key, e.what());
      }
    }
    const std::string mkey = member_key(r.canonical);
    const std::optional<std::string> entry = disk.load(mkey, member_canonical(r.canonical));
    if (!entry) return nullptr;
    const std::optional<MemberEntry> m = parse_member(*entry);
    if (!m) {
      reject(mkey, "not a member entry");
      return nullptr;
    }
    Object& group = groups[m->group_key];
    if (!group) {
      const std::optional<std::string> bytes = disk.load(
          m->group_key, [&](std::string_view stored) { return group_lists(stored, m->position, r.canonical); });
      if (!bytes) return nullptr;  // the group's entry is gone: rebuilt, which rewrites this one
      try {
        group = tc.load(*bytes, m->group_key);
      } catch (const Error& e) {
        reject(m->group_key, e.what());
        return nullptr;
      }
    }
    try {
      return tc.member(group, m->position, i);
    } catch (const Error& e) {
      reject(mkey, e.what());
      return nullptr;
    }
  }

  // Builds requests `indices` as one group, stores it and fills `out` for each.
  void build(std::span<const Request> requests, std::span<const std::string> keys, const std::vector<size_t>& indices,
             const Toolchain& tc, std::vector<Object>& out) {
    std::string names;
    for (size_t j = 0; j < indices.size(); ++j) names += fmt::format("{}{}", j ? ", " : "", requests[indices[j]].what);
    check_compile_allowed(fmt::format("{} for {}", names, device));
    // A group of one is stored under its kernel's key; a larger one under the key of its
    // members' canonical texts, with an entry per member naming it.
    const std::string canonical =
        indices.size() > 1 ? group_canonical(requests, indices) : requests[indices[0]].canonical;
    const std::string group_key = indices.size() > 1 ? hash_text(canonical).hex() : keys[indices[0]];
    const auto start = std::chrono::steady_clock::now();
    Built built = tc.build(indices, group_key);
    const auto ns_taken = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
    RuntimeCounters& c = runtime_counters();
    c.kernels_compiled += indices.size();
    c.compile_ns += static_cast<uint64_t>(ns_taken);
    log_line("compile", fmt::format("{}: {} ({}): {:.2f} ms{}{}, {} bytes", device, names, group_key, ns_taken / 1e6,
                                    built.detail.empty() ? "" : " ", built.detail, built.bytes.size()));
    if (!built.bytes.empty() && disk.enabled() && disk.store(group_key, canonical, built.bytes) && indices.size() > 1)
      for (size_t j = 0; j < indices.size(); ++j) {
        const std::string& member = requests[indices[j]].canonical;
        disk.store(member_key(member), member_canonical(member), fmt::format("{}\n{}", group_key, j));
      }
    for (size_t j = 0; j < indices.size(); ++j) out[indices[j]] = tc.member(built.group, j, indices[j]);
  }
};

KernelStore::KernelStore(std::filesystem::path root, std::string ns, std::string device)
    : impl_(std::make_unique<Impl>(std::move(root), ns, std::move(device))) {}
KernelStore::KernelStore(std::string ns, std::string device)
    : KernelStore(DiskCache::default_root(), std::move(ns), std::move(device)) {}
KernelStore::~KernelStore() = default;

DiskCache& KernelStore::disk() { return impl_->disk; }

size_t KernelStore::cached_kernels() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->recent.size();
}

std::vector<Object> KernelStore::get(std::span<const Request> requests, const Toolchain& tc) {
  Impl& im = *impl_;
  std::vector<Object> out(requests.size());
  std::vector<std::string> keys(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) keys[i] = hash_text(requests[i].canonical).hex();
  std::vector<Claim> claims;
  std::vector<std::pair<size_t, std::shared_future<Object>>> waits;  // kernels another get() builds
  {
    std::vector<Object> evicted;  // destroyed after the lock: a kernel's destructor may lock its toolchain
    std::lock_guard lock(im.mutex);
    for (size_t i = 0; i < requests.size(); ++i) {
      if ((out[i] = im.find(keys[i], requests[i], evicted))) continue;
      auto same = std::find_if(claims.begin(), claims.end(), [&](const Claim& c) { return c.key == keys[i]; });
      if (same != claims.end()) {
        Impl::check_collision(keys[i], requests[same->indices[0]].canonical, requests[i]);
        same->indices.push_back(i);
        continue;
      }
      if (auto it = im.in_flight.find(keys[i]); it != im.in_flight.end()) {
        Impl::check_collision(keys[i], it->second.canonical, requests[i]);
        waits.emplace_back(i, it->second.done);
        continue;
      }
      Claim c{keys[i], {i}, {}};
      im.in_flight.emplace(keys[i], Impl::Flight{requests[i].canonical, c.promise.get_future().share()});
      claims.push_back(std::move(c));
    }
  }
  // Publishes what this get() found or built (the others learn `failure`), so that a failed
  // build of one kernel does not fail those that loaded.
  auto publish = [&](std::exception_ptr failure) {
    std::vector<Object> evicted;
    std::lock_guard lock(im.mutex);
    for (Claim& c : claims) {
      const Object& o = out[c.indices[0]];
      if (o) {
        im.insert(c.key, requests[c.indices[0]].canonical, o, evicted);
        for (size_t i : c.indices) out[i] = o;
        c.promise.set_value(o);
      } else {
        c.promise.set_exception(failure);
      }
      im.in_flight.erase(c.key);
    }
  };
  try {
    std::map<std::string, Object> groups;
    std::vector<size_t> misses;
    for (const Claim& c : claims) {
      const size_t i = c.indices[0];
      if ((out[i] = im.from_disk(keys[i], requests[i], i, tc, groups))) runtime_counters().kernel_disk_hits++;
      else misses.push_back(i);
    }
    if (!im.disk.dir().empty()) runtime_counters().kernel_disk_misses += misses.size();
    if (!misses.empty()) im.build(requests, keys, misses, tc, out);
  } catch (...) {
    publish(std::current_exception());
    throw;
  }
  publish(nullptr);
  for (auto& [i, done] : waits) {
    out[i] = done.get();
    runtime_counters().kernel_memory_hits++;
  }
  return out;
}

}  // namespace kiln
