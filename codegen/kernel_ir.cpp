// codegen/kernel_ir.cpp - Kernel IR printing and the analyses every backend shares.
#include "kiln/codegen/kernel_ir.h"

#include <algorithm>

#include <fmt/format.h>

namespace kiln::kir {
namespace {

std::string ref(Ref r) { return fmt::format("%{}", r); }

std::string args_str(const Inst& in) {
  std::string s;
  for (size_t i = 0; i < in.args.size(); ++i) s += (i ? ", " : "") + ref(in.args[i]);
  return s;
}

}  // namespace

bool Kernel::has_reduction() const {
  return std::any_of(insts.begin(), insts.end(), [](const Inst& i) { return i.code == Code::Reduce; });
}

std::string Kernel::str(bool names) const {
  std::string dims;
  for (int d = 0; d < domain.rank(); ++d)
    dims += fmt::format("{}{}{}", d ? ", " : "", reduced[static_cast<size_t>(d)] ? "reduce " : "", domain[d]);
  std::string out = fmt::format("kernel @{} over [{}] (", names ? name : "", dims);
  for (size_t b = 0; b < buffers.size(); ++b)
    out += fmt::format("{}#{} %{}: {} {}", b ? ", " : "", b, names ? buffers[b].name : "", buffers[b].type.str(),
                       buffers[b].written ? "out" : "in");
  out += ") {\n";
  for (size_t i = 0; i < insts.size(); ++i) {
    const Inst& in = insts[i];
    const std::string_view ty = dtype_name(in.type);
    std::string body;
    switch (in.code) {
      case Code::Dim: body = fmt::format("dim {}", in.imm); break;
      case Code::Const: body = fmt::format("const {}", format_scalar(in.literal, in.type)); break;
      case Code::Load:
        body = fmt::format("load #{}[{}]", in.buffer, ref(in.args[0]));
        if (in.args.size() > 1) body += " if " + ref(in.args[1]);
        break;
      case Code::Op: body = fmt::format("{} {}", op_info(in.op).name, args_str(in)); break;
      case Code::Cast: body = fmt::format("cast {}", args_str(in)); break;
      case Code::IndexDiv: body = fmt::format("floordiv {}, {}", ref(in.args[0]), in.imm); break;
      case Code::IndexMod: body = fmt::format("mod {}, {}", ref(in.args[0]), in.imm); break;
      case Code::Rand: body = fmt::format("rand {} {{seed = {}}}", ref(in.args[0]), in.imm); break;
      case Code::Reduce: body = fmt::format("{} {}", op_info(in.op).name, args_str(in)); break;
    }
    out += fmt::format("  %{} = {} : {}\n", i, body, ty);
  }
  for (const Store& s : stores) {
    out += fmt::format("  store #{}[{}], {}", s.buffer, ref(s.offset), ref(s.value));
    if (s.guard != kNoRef) out += " if " + ref(s.guard);
    out += "\n";
  }
  return out + "}\n";
}

void remove_dead_instructions(Kernel& k) {
  std::vector<bool> live(k.insts.size(), false);
  for (const Store& s : k.stores)
    for (Ref r : {s.offset, s.value, s.guard})
      if (r != kNoRef) live[static_cast<size_t>(r)] = true;
  for (size_t i = k.insts.size(); i-- > 0;)
    if (live[i])
      for (Ref a : k.insts[i].args) live[static_cast<size_t>(a)] = true;
  std::vector<Ref> renumber(k.insts.size(), kNoRef);
  std::vector<Inst> kept;
  for (size_t i = 0; i < k.insts.size(); ++i) {
    if (!live[i]) continue;
    Inst in = std::move(k.insts[i]);
    for (Ref& a : in.args) a = renumber[static_cast<size_t>(a)];
    renumber[i] = static_cast<Ref>(kept.size());
    kept.push_back(std::move(in));
  }
  k.insts = std::move(kept);
  for (Store& s : k.stores)
    for (Ref* r : {&s.offset, &s.value, &s.guard})
      if (*r != kNoRef) *r = renumber[static_cast<size_t>(*r)];
}

std::vector<uint64_t> dim_dependence(const Kernel& k) {
  uint64_t reduced_mask = 0;
  for (size_t d = 0; d < k.reduced.size(); ++d)
    if (k.reduced[d]) reduced_mask |= uint64_t{1} << d;
  std::vector<uint64_t> deps(k.insts.size(), 0);
  for (size_t i = 0; i < k.insts.size(); ++i) {
    const Inst& in = k.insts[i];
    uint64_t m = in.code == Code::Dim ? uint64_t{1} << in.imm : 0;
    for (Ref a : in.args) m |= deps[static_cast<size_t>(a)];
    if (in.code == Code::Reduce) m &= ~reduced_mask;
    deps[i] = m;
  }
  return deps;
}

std::vector<int> reduction_stage(const Kernel& k) {
  std::vector<int> stage(k.insts.size(), 0);
  for (size_t i = 0; i < k.insts.size(); ++i) {
    const Inst& in = k.insts[i];
    int s = 0;
    for (Ref a : in.args) s = std::max(s, stage[static_cast<size_t>(a)]);
    stage[i] = in.code == Code::Reduce ? s + 1 : s;
  }
  return stage;
}

Schedule schedule_kernel(const Kernel& k) {
  Schedule s;
  const int rank = k.domain.rank();
  if (rank == 0) {
    s.iterations = 1;
    s.elements_per_iteration = 1;
    return s;
  }
  const int64_t last = k.domain[rank - 1];
  int64_t kept = 1, reduced = 1;
  for (int d = 0; d < rank; ++d) (k.reduced[static_cast<size_t>(d)] ? reduced : kept) *= k.domain[d];
  if (k.reduced[static_cast<size_t>(rank - 1)]) {
    s.lanes_reduce = true;
    s.iterations = kept;
    s.elements_per_iteration = reduced;
    return s;
  }
  // Tiles of the last dim: wide enough to amortize the loop over reduced dims, small enough
  // that a tile's accumulators stay in L1 and that a 1-D domain still splits across cores.
  s.tile = std::min<int64_t>(last, k.has_reduction() ? 256 : 4096);
  // With enough kept rows to share out, a reduction takes long pieces of rows (contiguous
  // reads); its per-lane accumulators (up to 8 bytes each) must stay in L1 beside the rows.
  if (k.has_reduction() && kept / std::max<int64_t>(1, last) >= 16) s.tile = std::min<int64_t>(last, 4096);
  if (s.tile == 0) s.tile = 1;
  const int64_t tiles = (last + s.tile - 1) / s.tile;
  s.iterations = last == 0 ? 0 : kept / last * tiles;
  s.elements_per_iteration = s.tile * reduced;
  return s;
}

}  // namespace kiln::kir
