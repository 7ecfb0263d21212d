// kiln/ir/canonical.h - the canonical serialization behind every cache key.
//
// Every cache (plan cache, kernel caches in memory and on disk, the autotune database) keys
// an entry by a 128-bit hash of a canonical byte string and compares that string on a hit,
// so a collision can never return the wrong entry. The string is built here and nowhere
// else: each field is fixed-width or length-prefixed, so two different inputs never
// serialize alike (no "ab" + "c" == "a" + "bc").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/hash.h"

namespace kiln {

class CanonicalWriter {
 public:
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  /// Length-prefixed bytes.
  void bytes(std::string_view s) {
    u64(s.size());
    out_.append(s);
  }
  /// Kind (int or float) and exact bits.
  void scalar(const Scalar& s);
  /// Every attribute of a node: presence, then its fields, length-prefixed.
  void attrs(const Attrs& a);

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }
  Hash128 hash() const { return hash_text(out_); }
  void reserve(size_t n) { out_.reserve(n); }

 private:
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

/// What `g` computes, in node order: op, type, operands and attributes of every node, then
/// the outputs. Names and source locations are left out, and so is the `value` of every
/// `scalar` node: it is bound at launch, so a loop whose learning rate changes every step
/// has one canonical form.
void write_canonical(CanonicalWriter& w, const Graph& g);

/// The `value` of each `scalar` node of `g`, by slot (slots no node uses hold 0).
std::vector<Scalar> launch_scalars(const Graph& g);
/// Sets the `value` of each `scalar` node of `g` from `scalars`, by slot: the inverse of
/// launch_scalars.
void bind_launch_scalars(Graph& g, std::span<const Scalar> scalars);

}  // namespace kiln
