// codegen/horizontal.cpp - independent elementwise kernels of one body as one launch
// (merge_horizontal in lower.h).
//
// After clip_grad_norm, an optimizer's update of each parameter is a kernel of its own: the
// same body (parameter, gradient and state in; parameter and state out) over each
// parameter's shape, launched one after another, none of them reading what another writes.
// XLA's horizontal loop fusion and PyTorch's foreach optimizers (multi_tensor_apply) run such
// a set as one launch. Here a run of such kernels becomes one kernel over one flat dim, part
// j over points [from_j, from_j + n_j), each load and store masked to its part; the cpu walks
// each part apart with the masks known (kir::lane_bounds' cuts), so a point computes only its
// own part's body.
//
// A kernel joins where every load and store offset is `base + step * flat`, flat being the
// point's row-major number in its domain (same-shaped operands and broadcast scalars: an
// update's), and where nothing but those offsets uses a position; the part then needs no
// division to find its positions, and its offsets stay affine in the merged dim.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "kiln/codegen/lower.h"
#include "kiln/support/error.h"

namespace kiln {
namespace {

using kir::Code;
using kir::Inst;
using kir::Kernel;
using kir::Ref;

// What joining reads of a kernel: its positions as affine functions of the domain, and the
// instructions that only compute positions (kir::index_instructions).
struct Flat {
  std::vector<std::optional<kir::Affine>> affine;
  std::vector<bool> index;
};

// The step of offset `a` written as `base + step * flat` (flat: the point's row-major number
// in `k`'s domain), or nullopt where it is not one.
std::optional<int64_t> flat_step(const Kernel& k, const kir::Affine& a) {
  const auto strides = k.domain.strides();
  std::optional<int64_t> step;
  for (int d = 0; d < k.domain.rank(); ++d) {
    if (k.domain[d] == 1) continue;
    const int64_t s = a.stride[static_cast<size_t>(d)], row_major = strides[static_cast<size_t>(d)];
    if (s % row_major != 0 || (step && *step != s / row_major)) return std::nullopt;
    step = s / row_major;
  }
  return step.value_or(0);
}

// `k`'s positions, where it may join a horizontal kernel; nullopt where it may not.
std::optional<Flat> joinable(const Kernel& k) {
  if (k.in_order || !k.customs.empty() || k.has_reduction() || k.domain.numel() <= 0 || k.stores.empty())
    return std::nullopt;
  Flat f{kir::affine_analysis(k), kir::index_instructions(k)};
  auto flat_offset = [&](Ref r) { return f.affine[static_cast<size_t>(r)] && flat_step(k, *f.affine[static_cast<size_t>(r)]); };
  for (size_t i = 0; i < k.insts.size(); ++i) {
    const Inst& in = k.insts[i];
    if (in.code == Code::Rand || (in.code == Code::Dim && !f.index[i])) return std::nullopt;
    if (f.index[i]) continue;
    if (in.code == Code::Load) {
      if (in.args.size() > 1 || !flat_offset(in.args[0])) return std::nullopt;
      continue;
    }
    // Data computed from a position (a compare of two, kept as a value) would need it.
    for (Ref a : in.args)
      if (f.index[static_cast<size_t>(a)]) return std::nullopt;
  }
  for (const kir::Store& s : k.stores)
    if (s.guard != kir::kNoRef || !flat_offset(s.offset)) return std::nullopt;
  return f;
}

// Appends `k` to `m` (over one flat dim) as its points [from, from + n): with `masked`, each
// load and store holds only there; without, `m` is `k` alone over [n] (its body, compared to
// find kernels of one body).
void append_part(Kernel& m, const Kernel& k, const Flat& f, int64_t from, bool masked) {
  m.parts.push_back({static_cast<Ref>(m.insts.size()), k.domain.numel()});
  const auto buffer0 = static_cast<int32_t>(m.buffers.size());
  const auto scalar0 = static_cast<int64_t>(m.scalars.size());
  m.buffers.insert(m.buffers.end(), k.buffers.begin(), k.buffers.end());
  m.scalars.insert(m.scalars.end(), k.scalars.begin(), k.scalars.end());
  auto add = [&](Inst in) {
    m.insts.push_back(std::move(in));
    return static_cast<Ref>(m.insts.size() - 1);
  };
  auto constant = [&](int64_t v) { return add(Inst{Code::Const, OpKind::Add, DType::I64, {}, -1, 0, Scalar::from_int(v)}); };
  auto op = [&](OpKind o, DType t, std::vector<Ref> args) { return add(Inst{Code::Op, o, t, std::move(args), -1, 0, {}}); };
  const Ref flat = add(Inst{Code::Dim, OpKind::Add, DType::I64, {}, -1, 0, {}});
  Ref mask = kir::kNoRef;
  if (masked) {
    const Ref inside = op(OpKind::Ge, DType::Bool, {flat, constant(from)});
    mask = op(OpKind::And, DType::Bool, {inside, op(OpKind::Lt, DType::Bool, {flat, constant(from + k.domain.numel())})});
  }
  auto offset = [&](Ref r) {
    const kir::Affine& a = *f.affine[static_cast<size_t>(r)];
    const int64_t step = *flat_step(k, a);
    if (step == 0) return constant(a.base);
    // base + step * (flat - from)
    const Ref scaled = step == 1 ? flat : op(OpKind::Mul, DType::I64, {flat, constant(step)});
    return op(OpKind::Add, DType::I64, {scaled, constant(a.base - step * from)});
  };
  std::vector<Ref> to(k.insts.size(), kir::kNoRef);
  for (size_t i = 0; i < k.insts.size(); ++i) {
    if (f.index[i]) continue;  // positions: each offset is written anew
    Inst in = k.insts[i];
    if (in.code == Code::Load) {
      in.args = {offset(in.args[0])};
      if (mask != kir::kNoRef) in.args.push_back(mask);
      in.buffer += buffer0;
    } else {
      for (Ref& a : in.args) a = to[static_cast<size_t>(a)];
      if (in.code == Code::Arg) in.imm += scalar0;
    }
    to[i] = add(std::move(in));
  }
  for (const kir::Store& s : k.stores)
    m.stores.push_back({s.buffer + buffer0, offset(s.offset), to[static_cast<size_t>(s.value)], mask});
}

// What kernels of one body share: `k` over [n] as a part, without its sizes, and with a
// buffer of its own for every load and store (whether the memory plan wrote a value over
// one it read is not part of what the body computes).
std::string body_of(const Kernel& k, const Flat& f) {
  Kernel alone;
  alone.domain = Shape({0});
  alone.reduced = {false};
  append_part(alone, k, f, 0, false);
  std::vector<kir::BufferParam> own;
  auto own_buffer = [&](int32_t& b, bool written) {
    own.push_back({"", TensorType{alone.buffers[static_cast<size_t>(b)].type.dtype, Shape{}}, written});
    b = static_cast<int32_t>(own.size() - 1);
  };
  for (Inst& in : alone.insts)
    if (in.code == Code::Load) own_buffer(in.buffer, false);
  for (kir::Store& s : alone.stores) own_buffer(s.buffer, true);
  alone.buffers = std::move(own);
  return alone.str(false);
}

}  // namespace

int merge_horizontal(LaunchPlan& plan, int max_parts) {
  KILN_ASSERT(plan.schedules.empty(), "horizontal kernels are merged before schedules are chosen");
  struct Candidate {
    std::optional<Flat> flat;
    std::string body;
  };
  std::vector<Candidate> kernel_info(plan.kernels.size());
  std::vector<bool> examined(plan.kernels.size(), false);
  auto info = [&](int32_t k) -> Candidate& {
    auto& c = kernel_info[static_cast<size_t>(k)];
    if (!examined[static_cast<size_t>(k)]) {
      examined[static_cast<size_t>(k)] = true;
      c.flat = joinable(plan.kernels[static_cast<size_t>(k)]);
      if (c.flat) c.body = body_of(plan.kernels[static_cast<size_t>(k)], *c.flat);
    }
    return c;
  };
  // A kernel right after a GEMM may run as its epilogue, on the product's blocks in cache.
  auto may_join = [&](size_t i) {
    const LaunchPlan::Step& s = plan.steps[i];
    if (s.kernel < 0 || s.attention || !s.fixed_scalars.empty()) return false;
    if (i > 0 && plan.steps[i - 1].is_gemm()) return false;
    return info(s.kernel).flat.has_value();
  };
  std::vector<LaunchPlan::Step> steps;
  int merged = 0;
  for (size_t i = 0; i < plan.steps.size();) {
    if (!may_join(i)) {
      steps.push_back(std::move(plan.steps[i++]));
      continue;
    }
    // The run: steps of one body, each touching no buffer that an earlier one writes, and
    // writing none that an earlier one reads (so their order within the launch is free).
    std::vector<size_t> run{i};
    std::set<int32_t> read, written;
    auto touch = [&](size_t s) {
      const LaunchPlan::Step& step = plan.steps[s];
      const Kernel& k = plan.kernels[static_cast<size_t>(step.kernel)];
      for (size_t b = 0; b < k.buffers.size(); ++b) (k.buffers[b].written ? written : read).insert(step.bindings[b]);
    };
    touch(i);
    const std::string& body = info(plan.steps[i].kernel).body;
    size_t j = i + 1;
    for (; j < plan.steps.size() && static_cast<int>(run.size()) < max_parts && may_join(j); ++j) {
      const LaunchPlan::Step& step = plan.steps[j];
      if (info(step.kernel).body != body) break;
      const Kernel& k = plan.kernels[static_cast<size_t>(step.kernel)];
      bool independent = true;
      for (size_t b = 0; b < k.buffers.size(); ++b) {
        const int32_t buf = step.bindings[b];
        independent = independent && !written.count(buf) && !(k.buffers[b].written && read.count(buf));
      }
      if (!independent) break;
      run.push_back(j);
      touch(j);
    }
    if (run.size() < 2) {
      steps.push_back(std::move(plan.steps[i++]));
      continue;
    }
    Kernel m;
    const Kernel& first = plan.kernels[static_cast<size_t>(plan.steps[i].kernel)];
    m.name = fmt::format("{}_h{}", first.name, run.size());
    int64_t total = 0;
    for (size_t s : run) total += plan.kernels[static_cast<size_t>(plan.steps[s].kernel)].domain.numel();
    m.domain = Shape({total});
    m.reduced = {false};
    LaunchPlan::Step step;
    int64_t from = 0;
    for (size_t s : run) {
      const LaunchPlan::Step& part = plan.steps[s];
      const Kernel& k = plan.kernels[static_cast<size_t>(part.kernel)];
      append_part(m, k, *info(part.kernel).flat, from, true);
      from += k.domain.numel();
      step.bindings.insert(step.bindings.end(), part.bindings.begin(), part.bindings.end());
      step.scalar_bindings.insert(step.scalar_bindings.end(), part.scalar_bindings.begin(), part.scalar_bindings.end());
    }
    step.kernel = static_cast<int32_t>(plan.kernels.size());
    plan.kernels.push_back(std::move(m));
    kernel_info.emplace_back();
    examined.push_back(true);
    steps.push_back(std::move(step));
    ++merged;
    i = j;
  }
  plan.steps = std::move(steps);
  if (merged == 0) return 0;
  // The kernels in launch order, without those no step launches any more.
  std::vector<int32_t> renumber(plan.kernels.size(), -1);
  std::vector<Kernel> kernels;
  for (LaunchPlan::Step& s : plan.steps) {
    if (s.kernel < 0) continue;
    int32_t& to = renumber[static_cast<size_t>(s.kernel)];
    if (to < 0) {
      to = static_cast<int32_t>(kernels.size());
      kernels.push_back(std::move(plan.kernels[static_cast<size_t>(s.kernel)]));
    }
    s.kernel = to;
  }
  plan.kernels = std::move(kernels);
  return merged;
}

}  // namespace kiln
