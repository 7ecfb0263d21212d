// kiln/ir/canonical.h - the canonical serialization behind every cache key.
//
// Every cache (plan cache, kernel caches in memory and on disk, the autotune database) keys
// an entry by a 128-bit hash of a canonical byte string and compares that string on a hit,
// so a collision can never return the wrong entry. (Long literals are written as digests;
// their cache, the plan cache, compares the literals themselves on a hit: literals_match.)
// The string is built here and nowhere else: each field is fixed-width or length-prefixed,
// so two different inputs never serialize alike (no "ab" + "c" == "a" + "bc").
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/hash.h"

namespace kiln {

/// A literal's values, as a node's attribute holds them.
using LiteralValues = std::shared_ptr<const std::vector<Scalar>>;

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
  /// Every attribute of a node: presence, then its fields, length-prefixed. A literal of
  /// more than kLiteralDigestAbove values is written as its count and the digest of its
  /// values (literal_digest), not the values, and listed in literals().
  void attrs(const Attrs& a);
  /// The literals written by digest, in order: equal texts key equal graphs where these
  /// hold equal values (literals_match).
  const std::vector<LiteralValues>& literals() const { return literals_; }

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }
  Hash128 hash() const { return hash_text(out_); }
  void reserve(size_t n) { out_.reserve(n); }

 private:
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
  std::vector<LiteralValues> literals_;
};

/// Literals longer than this are keyed by their digest: an imported model's weights are
/// millions of values (ResNet-18's, through `kiln run`: 0.45 s of writing and hashing at
/// every call of the graph, where the call itself took 22 ms).
inline constexpr size_t kLiteralDigestAbove = 256;

/// The 128-bit digest of a literal's values (the kind and exact bits of each, as
/// CanonicalWriter::scalar writes them, hashed in blocks), computed once per literal while
/// it lives: memoized by its address, with a weak reference that tells when the address
/// holds another literal. Equal values give equal digests, whichever literal holds them.
Hash128 literal_digest(const LiteralValues& values);
/// How many digests literal_digest has computed in this process (tests: a graph keyed twice
/// computes its literals' digests once).
uint64_t literal_digests_computed();

/// Whether the literals a cached entry was keyed with (`kept`, held weakly: an entry does
/// not keep a graph's literals alive) are those of a new key (`now`): the same literals, or
/// still-living ones of equal values (kind and bits). One that has died cannot be compared:
/// no match, and the entry is built again.
bool literals_match(std::span<const std::weak_ptr<const std::vector<Scalar>>> kept, std::span<const LiteralValues> now);

/// What `g` computes, in node order: op, type, operands and attributes of every node, then
/// the outputs. Long literals are written as digests (CanonicalWriter::attrs). Names and
/// source locations are left out, and so is the `value` of every `scalar` node: it is bound
/// at launch, so a loop whose learning rate changes every step has one canonical form.
void write_canonical(CanonicalWriter& w, const Graph& g);

/// The `value` of each `scalar` node of `g`, by slot (slots no node uses hold 0).
std::vector<Scalar> launch_scalars(const Graph& g);
/// Sets the `value` of each `scalar` node of `g` from `scalars`, by slot: the inverse of
/// launch_scalars.
void bind_launch_scalars(Graph& g, std::span<const Scalar> scalars);

}  // namespace kiln
