// ir/canonical.cpp - the canonical serialization of graphs and attributes.
#include "kiln/ir/canonical.h"

#include <bit>

#include "kiln/ir/custom_kernel.h"

namespace kiln {

void CanonicalWriter::scalar(const Scalar& s) {
  u64(s.is_int() ? 1 : 2);
  u64(s.is_int() ? static_cast<uint64_t>(s.as_int()) : std::bit_cast<uint64_t>(s.as_double()));
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
    if (v.scalars)
      for (const Scalar& s : *v.scalars) scalar(s);
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
