// ir/canonical.cpp - the canonical serialization of graphs and attributes.
#include "kiln/ir/canonical.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "kiln/ir/custom_kernel.h"

namespace kiln {
namespace {

// A scalar's canonical words: its kind, then its exact bits.
std::pair<uint64_t, uint64_t> scalar_words(const Scalar& s) {
  return {s.is_int() ? 1 : 2, s.is_int() ? static_cast<uint64_t>(s.as_int()) : std::bit_cast<uint64_t>(s.as_double())};
}

std::atomic<uint64_t> digests_computed{0};

// Digests by the literal's address, each with a weak reference to the literal it was
// computed for: an address whose literal has died and been reused holds another one.
class LiteralDigests {
 public:
  static LiteralDigests& instance() {
    static auto* digests = new LiteralDigests();  // never destroyed: graphs are keyed during exit
    return *digests;
  }
  std::optional<Hash128> find(const LiteralValues& values) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(values.get());
    if (it == entries_.end() || it->second.literal.lock() != values) return std::nullopt;
    return it->second.digest;
  }
  void add(const LiteralValues& values, Hash128 digest) {
    std::lock_guard lock(mutex_);
    entries_[values.get()] = {values, digest};
    // The dead ones go when the map has doubled since the last sweep.
    if (entries_.size() < 2 * swept_size_) return;
    std::erase_if(entries_, [](const auto& e) { return e.second.literal.expired(); });
    swept_size_ = std::max<size_t>(entries_.size(), 64);
  }

 private:
  struct Entry {
    std::weak_ptr<const std::vector<Scalar>> literal;
    Hash128 digest;
  };
  std::mutex mutex_;
  std::unordered_map<const void*, Entry> entries_;
  size_t swept_size_ = 64;
};

}  // namespace

Hash128 literal_digest(const LiteralValues& values) {
  if (std::optional<Hash128> known = LiteralDigests::instance().find(values)) return *known;
  // Blocks of 4096 values hashed one at a time, then their hashes: 64 KiB of text at once,
  // where the whole literal would be 16 bytes a value (180 MB for ResNet-18's weights).
  constexpr size_t kBlock = 4096;
  CanonicalWriter blocks;
  blocks.u64(values->size());
  for (size_t at = 0; at < values->size(); at += kBlock) {
    CanonicalWriter w;
    w.reserve(kBlock * 16);
    for (size_t i = at; i < std::min(values->size(), at + kBlock); ++i) w.scalar((*values)[i]);
    const Hash128 h = w.hash();
    blocks.u64(h.lo);
    blocks.u64(h.hi);
  }
  const Hash128 digest = blocks.hash();
  digests_computed++;
  LiteralDigests::instance().add(values, digest);
  return digest;
}

uint64_t literal_digests_computed() { return digests_computed.load(); }

bool literals_match(std::span<const std::weak_ptr<const std::vector<Scalar>>> kept, std::span<const LiteralValues> now) {
  if (kept.size() != now.size()) return false;
  for (size_t i = 0; i < kept.size(); ++i) {
    const LiteralValues old = kept[i].lock();
    if (!old) return false;
    if (old == now[i]) continue;
    if (old->size() != now[i]->size()) return false;
    for (size_t j = 0; j < old->size(); ++j)
      if (scalar_words((*old)[j]) != scalar_words((*now[i])[j])) return false;
  }
  return true;
}

void CanonicalWriter::scalar(const Scalar& s) {
  const auto [kind, bits] = scalar_words(s);
  u64(kind);
  u64(bits);
}

void CanonicalWriter::attrs(const Attrs& a) {
  // The count is implied by the op's schema, written before.
  for (size_t i = 0; i < a.size(); ++i) {
    const AttrValue& v = a[i];
    u64(v.present);
    if (!v.present) continue;
    i64(v.i);
    u64(v.ints.size());
    for (int64_t x : v.ints) i64(x);
    scalar(v.scalar);
    u64(v.scalars ? v.scalars->size() + 1 : 0);
    if (v.scalars && v.scalars->size() > kLiteralDigestAbove) {
      // The count above already tells a digest (long) from values (short).
      const Hash128 digest = literal_digest(v.scalars);
      u64(digest.lo);
      u64(digest.hi);
      literals_.push_back(v.scalars);
    } else if (v.scalars) {
      for (const Scalar& s : *v.scalars) scalar(s);
    }
    bytes(v.custom ? v.custom->digest : std::string());
  }
}

void write_canonical(CanonicalWriter& w, const Graph& g) {
  w.reserve(g.size() * 64);
  w.u64(g.size());
  w.u64(g.inputs().size());
  for (ValueId v : g.inputs()) w.u64(v);
  // Slot and value positions in the `scalar` op's schema (ir/op_table.cpp).
  static const size_t kSlot = static_cast<size_t>(attr_index(OpKind::ScalarParam, "slot"));
  for (const Node& n : g.nodes()) {
    // Fixed-width fields packed in one word (op < 2^8, dtype < 2^8, rank < 2^8, operands
    // < 2^32): a stream of small nodes stays cheap to key (the W8 path).
    w.u64(static_cast<uint64_t>(n.op) | static_cast<uint64_t>(n.type.dtype) << 8 |
          static_cast<uint64_t>(n.type.shape.rank()) << 16 | static_cast<uint64_t>(n.operands.size()) << 32);
    for (int64_t d : n.type.shape.dims()) w.i64(d);
    for (ValueId o : n.operands) w.u64(o);
    if (n.op == OpKind::ScalarParam) {
      w.i64(n.attrs[kSlot].i);  // the value is an argument of the launch, not of the code
      continue;
    }
    if (n.attrs.size() > 0) w.attrs(n.attrs);
  }
  w.u64(g.outputs().size());
  for (ValueId v : g.outputs()) w.u64(v);
}

std::vector<Scalar> launch_scalars(const Graph& g) {
  static const size_t kSlot = static_cast<size_t>(attr_index(OpKind::ScalarParam, "slot"));
  static const size_t kValue = static_cast<size_t>(attr_index(OpKind::ScalarParam, "value"));
  std::vector<Scalar> out;
  for (const Node& n : g.nodes()) {
    if (n.op != OpKind::ScalarParam) continue;
    const auto slot = static_cast<size_t>(n.attrs[kSlot].i);
    if (slot >= out.size()) out.resize(slot + 1, Scalar::from_int(0));
    out[slot] = n.attrs[kValue].scalar;
  }
  return out;
}

void bind_launch_scalars(Graph& g, std::span<const Scalar> scalars) {
  static const size_t kSlot = static_cast<size_t>(attr_index(OpKind::ScalarParam, "slot"));
  static const size_t kValue = static_cast<size_t>(attr_index(OpKind::ScalarParam, "value"));
  for (ValueId id = 0; id < g.size(); ++id) {
    Node& n = g.node(id);
    if (n.op != OpKind::ScalarParam) continue;
    const auto slot = static_cast<size_t>(n.attrs[kSlot].i);
    KILN_ASSERT(slot < scalars.size(), "every scalar slot of the graph is bound");
    n.attrs[kValue].scalar = scalars[slot];
  }
}

}  // namespace kiln
