// codegen/horizontal.cpp - independent elementwise kernels of one body as one launch
// (merge_horizontal in lower.h).
//
// After clip_grad_norm, an optimizer's update of each parameter is a kernel of its own: the
// same body (parameter, gradient and state in; parameter and state out) over each
// parameter's shape, launched one after another, none of them reading what another writes.
// XLA's horizontal loop fusion and PyTorch's foreach optimizers (multi_tensor_apply) run such
// a set as one launch. Here a run of such kernels becomes one kernel over one flat dim, part
// j over points [from_j, from_j + n_j), each load and store masked to its part, so a point
// computes only its own part's body: the cpu walks each part apart with the masks known
// (kir::lane_bounds' cuts), and the C-family emitter puts each part in a branch that only the
// work-items meeting its range take. Parts that read one buffer (the clipping factor) or one
// launch scalar (the learning rate) share the parameter, and a kernel takes no more parts
// than the device's argument limits allow (Vulkan's descriptors and push constants, OpenCL's
// parameter bytes).
//
// A kernel joins where every load and store offset is `base + step * flat`, flat being the
// point's row-major number in its domain (same-shaped operands and broadcast scalars: an
// update's), and where nothing but those offsets uses a position; the part then needs no
// division to find its positions, and its offsets stay affine in the merged dim.
#include <algorithm>
#include <map>
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

// Where part `k`'s parameters are in the joined kernel: buffers[b] for its buffer b,
// scalars[a] for its scalar a.
struct ParameterMap {
  std::vector<int32_t> buffers;
  std::vector<int64_t> scalars;
  int64_t new_buffers = 0, new_scalars = 0;  // how many the part adds
};

// The parameters of a horizontal kernel as its parts join. A part's read-only buffer bound to
// a plan buffer that an earlier part reads too shares that parameter, and so does a scalar
// bound to the same launch slot: every update after clipping reads the clipping factor and
// the learning rate, which would otherwise be a parameter per part.
class Parameters {
 public:
  ParameterMap map(const Kernel& k, const LaunchPlan::Step& s) const {
    ParameterMap m;
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      auto shared = k.buffers[b].written ? read_.end() : read_.find(s.bindings[b]);
      m.buffers.push_back(shared != read_.end() ? shared->second : buffers_ + static_cast<int32_t>(m.new_buffers++));
    }
    for (size_t a = 0; a < k.scalars.size(); ++a) {
      auto shared = slots_.find({s.scalar_bindings[a], k.scalars[a]});
      m.scalars.push_back(shared != slots_.end() ? shared->second : scalars_ + m.new_scalars++);
    }
    return m;
  }
  // Whether the kernel with `m`'s part added stays within the device's argument limits.
  bool fits(const ParameterMap& m, const Capabilities& caps) const {
    const int64_t buffers = buffers_ + m.new_buffers, scalars = scalars_ + m.new_scalars;
    if (caps.max_kernel_buffers > 0 && buffers > caps.max_kernel_buffers) return false;
    return caps.max_argument_bytes <= 0 || 8 * scalars + caps.buffer_argument_bytes * buffers <= caps.max_argument_bytes;
  }
  // Adds the parameters `m` says are new to `joined` and their bindings to `step`.
  void add(const Kernel& k, const LaunchPlan::Step& s, const ParameterMap& m, Kernel& joined, LaunchPlan::Step& step) {
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      if (m.buffers[b] != buffers_) continue;  // shared with an earlier part
      joined.buffers.push_back(k.buffers[b]);
      step.bindings.push_back(s.bindings[b]);
      if (!k.buffers[b].written) read_.emplace(s.bindings[b], buffers_);
      ++buffers_;
    }
    for (size_t a = 0; a < k.scalars.size(); ++a) {
      if (m.scalars[a] != scalars_) continue;
      joined.scalars.push_back(k.scalars[a]);
      step.scalar_bindings.push_back(s.scalar_bindings[a]);
      slots_.emplace(std::pair{s.scalar_bindings[a], k.scalars[a]}, scalars_);
      ++scalars_;
    }
  }

 private:
  std::map<int32_t, int32_t> read_;                     // plan buffer read -> parameter
  std::map<std::pair<int32_t, DType>, int64_t> slots_;  // launch slot -> scalar parameter
  int32_t buffers_ = 0;
  int64_t scalars_ = 0;
};

// Appends `k`'s instructions and stores to `m` (over one flat dim) as its points [from,
// from + n), its parameters where `params` says: with `masked`, each load and store holds
// only there; without, `m` is `k` alone over [n] (its body, compared to find kernels of one
// body).
void append_part(Kernel& m, const Kernel& k, const Flat& f, int64_t from, bool masked, const ParameterMap& params) {
  m.parts.push_back({static_cast<Ref>(m.insts.size()), k.domain.numel()});
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
      in.buffer = params.buffers[static_cast<size_t>(in.buffer)];
    } else {
      for (Ref& a : in.args) a = to[static_cast<size_t>(a)];
      if (in.code == Code::Arg) in.imm = params.scalars[static_cast<size_t>(in.imm)];
    }
    to[i] = add(std::move(in));
  }
  for (const kir::Store& s : k.stores)
    m.stores.push_back({params.buffers[static_cast<size_t>(s.buffer)], offset(s.offset), to[static_cast<size_t>(s.value)], mask});
}

// What kernels of one body share: `k` over [n] as a part, without its sizes, and with a
// buffer of its own for every load and store (whether the memory plan wrote a value over
// one it read is not part of what the body computes).
std::string body_of(const Kernel& k, const Flat& f) {
  Kernel alone;
  alone.domain = Shape({0});
  alone.reduced = {false};
  ParameterMap same;
  for (size_t b = 0; b < k.buffers.size(); ++b) same.buffers.push_back(static_cast<int32_t>(b));
  for (size_t a = 0; a < k.scalars.size(); ++a) same.scalars.push_back(static_cast<int64_t>(a));
  alone.buffers = k.buffers;
  alone.scalars = k.scalars;
  append_part(alone, k, f, 0, false, same);
  alone.parts.clear();  // its size
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

int merge_horizontal(LaunchPlan& plan, const Capabilities& caps) {
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
    // writing none that an earlier one reads (so their order within the launch is free),
    // as many as the device's argument limits allow.
    std::set<int32_t> read, written;
    const std::string& body = info(plan.steps[i].kernel).body;
    Kernel m;
    LaunchPlan::Step step;
    Parameters params;
    int64_t points = 0;
    size_t j = i;
    for (; j < plan.steps.size() && static_cast<int>(j - i) < caps.horizontal_parts && may_join(j); ++j) {
      const LaunchPlan::Step& part = plan.steps[j];
      const Kernel& k = plan.kernels[static_cast<size_t>(part.kernel)];
      if (j > i) {
        if (info(part.kernel).body != body) break;
        bool independent = true;
        for (size_t b = 0; b < k.buffers.size(); ++b) {
          const int32_t buf = part.bindings[b];
          independent = independent && !written.count(buf) && !(k.buffers[b].written && read.count(buf));
        }
        if (!independent) break;
      }
      const ParameterMap map = params.map(k, part);
      if (j > i && !params.fits(map, caps)) break;
      params.add(k, part, map, m, step);
      append_part(m, k, *info(part.kernel).flat, points, true, map);
      points += k.domain.numel();
      for (size_t b = 0; b < k.buffers.size(); ++b) (k.buffers[b].written ? written : read).insert(part.bindings[b]);
    }
    if (j - i < 2) {
      steps.push_back(std::move(plan.steps[i++]));
      continue;
    }
    m.name = fmt::format("{}_h{}", plan.kernels[static_cast<size_t>(plan.steps[i].kernel)].name, j - i);
    m.domain = Shape({points});
    m.reduced = {false};
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
