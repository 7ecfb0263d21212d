// codegen/kernel_ir.cpp - Kernel IR printing and the analyses every backend shares.
#include "kiln/codegen/kernel_ir.h"

#include "kiln/codegen/rows_at_launch.h"

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

std::string Kernel::domain_str() const {
  std::string dims;
  const int rows = rows_dim(*this);
  for (int d = 0; d < domain.rank(); ++d) {
    const std::string size =
        d == rows && rows_arg >= 0 ? fmt::format("${} <= {}", rows_arg, domain[d]) : fmt::format("{}", domain[d]);
    dims += fmt::format("{}{}{}", d ? ", " : "", reduced[static_cast<size_t>(d)] ? "reduce " : "", size);
  }
  return fmt::format("[{}]", dims);
}

std::string Kernel::str(bool names) const {
  std::string out = fmt::format("kernel @{} over {}{} (", names ? name : "", domain_str(),
                                in_order ? (rows_independent ? " in order by rows" : " in order") : "");
  for (size_t b = 0; b < buffers.size(); ++b)
    out += fmt::format("{}#{} %{}: {} {}", b ? ", " : "", b, names ? buffers[b].name : "", buffers[b].type.str(),
                       buffers[b].written ? "out" : "in");
  for (size_t a = 0; a < scalars.size(); ++a)
    out += fmt::format("{}${}: {}", a || !buffers.empty() ? ", " : "", a, dtype_name(scalars[a]));
  out += ") {\n";
  // A custom kernel's digest (its source and signature) is part of what the text says.
  for (size_t c = 0; c < customs.size(); ++c)
    out += fmt::format("  custom @{} = {} {}\n", customs[c]->name, custom_language_name(customs[c]->language),
                       customs[c]->digest);
  // A horizontal kernel's parts: emitters branch on them, so they are part of the key.
  if (!parts.empty()) {
    out += "  parts";
    for (size_t p = 0; p < parts.size(); ++p) out += fmt::format("{} %{} x {}", p ? "," : "", parts[p].first, parts[p].points);
    out += "\n";
  }
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
      case Code::Op:
        body = in.op == OpKind::Custom
                   ? fmt::format("custom @{} {}", customs[static_cast<size_t>(in.imm)]->name, args_str(in))
                   : fmt::format("{} {}", op_info(in.op).name, args_str(in));
        break;
      case Code::Cast: body = fmt::format("cast{} {}", in.imm == kCastToOdd ? " to_odd" : "", args_str(in)); break;
      case Code::Narrow: body = fmt::format("narrow {} {}", dtype_name(static_cast<DType>(in.imm)), args_str(in)); break;
      case Code::IndexDiv: body = fmt::format("floordiv {}, {}", ref(in.args[0]), in.imm); break;
      case Code::IndexMod: body = fmt::format("mod {}, {}", ref(in.args[0]), in.imm); break;
      case Code::Rand: body = fmt::format("rand {} {{seed = {}}}", ref(in.args[0]), in.imm); break;
      case Code::Reduce: body = fmt::format("{} {}", op_info(in.op).name, args_str(in)); break;
      case Code::Arg: body = fmt::format("arg ${}", in.imm); break;
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

std::string affine_str(const Affine& a) {
  std::string s;
  for (size_t d = 0; d < a.stride.size(); ++d)
    if (a.stride[d] != 0) s += fmt::format("{}{}*d{}", s.empty() ? "" : " + ", a.stride[d], d);
  if (a.base != 0 || s.empty()) s += fmt::format("{}{}", s.empty() ? "" : " + ", a.base);
  return s;
}

}  // namespace kiln::kir
