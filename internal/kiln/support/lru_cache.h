// kiln/support/lru_cache.h - a bounded map that drops its least recently used entry.
//
// The plan cache and the in-memory kernel caches are LruCaches: a loop that makes a new
// graph every step (a growing shape, a changing constant) reuses memory instead of growing
// without bound. Not thread-safe: the owner locks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln {

template <class Key, class Value, class HashFn = std::hash<Key>>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  /// The entry for `key`, now the most recently used; nullptr when absent.
  Value* find(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }

  /// Inserts or replaces `key`'s entry, then evicts least recently used entries beyond the
  /// capacity. Returns how many were evicted; with `evicted`, their values are moved there
  /// (so that an owner can destroy them after releasing its lock).
  size_t put(const Key& key, Value value, std::vector<Value>* evicted = nullptr) {
    if (auto it = index_.find(key); it != index_.end()) {
      it->second->second = std::move(value);
      order_.splice(order_.begin(), order_, it->second);
      return 0;
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    size_t count = 0;
    while (index_.size() > capacity_) {
      index_.erase(order_.back().first);
      if (evicted) evicted->push_back(std::move(order_.back().second));
      order_.pop_back();
      ++count;
    }
    return count;
  }

  size_t size() const { return index_.size(); }
  size_t capacity() const { return capacity_; }
  void clear() {
    index_.clear();
    order_.clear();
  }
  /// Empties the cache, moving every value to the caller.
  std::vector<Value> take_all() {
    std::vector<Value> out;
    for (auto& entry : order_) out.push_back(std::move(entry.second));
    clear();
    return out;
  }

 private:
  size_t capacity_;
  std::list<std::pair<Key, Value>> order_;  // most recently used first
  std::unordered_map<Key, typename std::list<std::pair<Key, Value>>::iterator, HashFn> index_;
};

}  // namespace kiln
