// ir/structural_hash.cpp - hashing a graph by structure, not by spelling.
//
// Every node gets a 128-bit hash from its op, type, attributes and its operands' hashes
// (sorted for commutative ops); parameters hash by position and type. The graph hash
// combines the outputs' hashes in order, so names, the order of independent nodes and dead
// nodes do not matter, while anything that changes the computed function does.
#include <algorithm>
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "kiln/ir/custom_kernel.h"
#include "kiln/ir/hash.h"
#include "kiln/support/hash.h"

namespace kiln {
namespace {

// Two independent 64-bit streams make the 128 bits.
struct Hasher {
  uint64_t a = 0x243f6a8885a308d3ULL, b = 0x13198a2e03707344ULL;

  static uint64_t fmix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
  }
  void add(uint64_t v) {
    a = fmix(a ^ (v + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2)));
    b = fmix(b + std::rotl(v, 31) * 0x87c37b91114253d5ULL) ^ a;
  }
  void add(const Hash128& h) {
    add(h.lo);
    add(h.hi);
  }
  void add_double(double d) { add(std::bit_cast<uint64_t>(d)); }
  Hash128 done() const { return {fmix(a ^ b), fmix(b + a * 3)}; }
};

void add_scalar(Hasher& h, const Scalar& s) {
  h.add(s.is_int());
  if (s.is_int()) h.add(static_cast<uint64_t>(s.as_int()));
  else h.add_double(s.as_double());
}


}  // namespace

std::string Hash128::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

Hash128 hash_text(std::string_view text) {
  // Two differently seeded 64-bit streams over 8-byte words, then the length.
  uint64_t a = 0x243f6a8885a308d3ULL, b = 0x13198a2e03707344ULL;
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, text.data() + i, 8);
    a = hash_mix(a, w);
    b = hash_mix(b, w ^ 0xa4093822299f31d0ULL);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, text.data() + i, text.size() - i);
  a = hash_mix(hash_mix(a, tail), text.size());
  b = hash_mix(hash_mix(b, tail ^ 0x082efa98ec4e6c89ULL), text.size());
  return Hash128{a ^ (a >> 29), b ^ (b >> 31)};
}

Hash128 structural_hash(const Graph& g) {
  std::vector<Hash128> node_hash(g.size());
  size_t input_index = 0;
  std::vector<Hash128> operands;
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.nodes()[id];
    Hasher h;
    h.add(static_cast<uint64_t>(n.op) + 1);
    h.add(static_cast<uint64_t>(n.type.dtype));
    h.add(static_cast<uint64_t>(n.type.shape.rank()));
    for (int64_t d : n.type.shape.dims()) h.add(static_cast<uint64_t>(d));
    if (n.op == OpKind::Input) {
      h.add(input_index++);
      node_hash[id] = h.done();
      continue;
    }
    if (n.op == OpKind::ScalarParam) {
      h.add(0x5ca1a7ULL);  // a launch-bound scalar: its slot and type, never its value
      h.add(static_cast<uint64_t>(n.attr("slot").i));
      node_hash[id] = h.done();
      continue;
    }
    const auto specs = n.info().attrs;
    for (size_t i = 0; i < specs.size(); ++i) {
      const AttrValue& v = n.attrs[i];
      h.add(v.present);
      if (!v.present) continue;
      h.add(static_cast<uint64_t>(v.i));
      h.add(v.ints.size());
      for (int64_t x : v.ints) h.add(static_cast<uint64_t>(x));
      if (specs[i].kind == AttrKind::Scalar) add_scalar(h, v.scalar);
      if (v.scalars) {
        h.add(v.scalars->size());
        for (const Scalar& s : *v.scalars) add_scalar(h, s);
      }
      if (v.custom) h.add(hash_text(v.custom->digest));
    }
    operands.clear();
    for (ValueId o : n.operands) operands.push_back(node_hash[o]);
    if (n.info().has(trait::Commutative))
      std::sort(operands.begin(), operands.end(),
                [](const Hash128& x, const Hash128& y) { return x.hi != y.hi ? x.hi < y.hi : x.lo < y.lo; });
    h.add(operands.size());
    for (const Hash128& o : operands) h.add(o);
    node_hash[id] = h.done();
  }
  Hasher graph;
  graph.add(g.inputs().size());
  for (ValueId v : g.inputs()) graph.add(node_hash[v]);
  graph.add(g.outputs().size());
  for (ValueId v : g.outputs()) graph.add(node_hash[v]);
  return graph.done();
}

}  // namespace kiln
