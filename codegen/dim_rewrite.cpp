// codegen/dim_rewrite.cpp - a kernel's instructions rebuilt over another domain
// (internal/kiln/codegen/dim_rewrite.h).
#include "kiln/codegen/dim_rewrite.h"

#include <utility>

namespace kiln::kir {

Ref IndexAppender::constant(int64_t v) {
  const Ref r = append(Code::Const, {}, v);
  out_.insts[static_cast<size_t>(r)].literal = Scalar::from_int(v);
  return r;
}

Ref IndexAppender::append(Code code, std::vector<Ref> args, int64_t imm) {
  Inst in;
  in.code = code;
  in.type = DType::I64;
  in.args = std::move(args);
  in.imm = imm;
  out_.insts.push_back(std::move(in));
  return static_cast<Ref>(out_.insts.size() - 1);
}

Kernel rewrite_dims(const Kernel& k, Shape domain, std::vector<bool> reduced,
                    const std::function<Ref(int d, IndexAppender& append)>& index, std::vector<Ref>* renumbered) {
  Kernel out = k;
  out.domain = std::move(domain);
  out.reduced = std::move(reduced);
  out.insts.clear();
  std::vector<Ref> map(k.insts.size(), kNoRef);
  IndexAppender append(out);
  for (size_t i = 0; i < k.insts.size(); ++i) {
    const Inst& in = k.insts[i];
    if (in.code == Code::Dim) {
      map[i] = index(static_cast<int>(in.imm), append);
      continue;
    }
    Inst copy = in;
    for (Ref& a : copy.args) a = map[static_cast<size_t>(a)];
    out.insts.push_back(std::move(copy));
    map[i] = static_cast<Ref>(out.insts.size() - 1);
  }
  for (Store& st : out.stores)
    for (Ref* r : {&st.offset, &st.value, &st.guard})
      if (*r != kNoRef) *r = map[static_cast<size_t>(*r)];
  if (renumbered) *renumbered = std::move(map);
  return out;
}

std::vector<Ref> positions(const Kernel& k) {
  std::vector<Ref> out;
  for (const Inst& in : k.insts) {
    if (in.code == Code::Load) out.push_back(in.args[0]);
    const bool compares_positions = in.code == Code::Op && in.type == DType::Bool && in.args.size() == 2 &&
                                    k.insts[static_cast<size_t>(in.args[0])].type == DType::I64;
    if (compares_positions) out.insert(out.end(), in.args.begin(), in.args.end());
  }
  for (const Store& st : k.stores) out.push_back(st.offset);
  return out;
}

}  // namespace kiln::kir
