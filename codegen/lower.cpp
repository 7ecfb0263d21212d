// codegen/lower.cpp - fused graph -> Kernel IR kernels and a launch list.
//
// Each kernel is built on demand from its stores backwards: "value v at position p" (p gives
// one index expression over the kernel's domain per dim of v) becomes instructions. Views
// only change the position; a value in memory becomes a load at the flat offset of its
// position; pad and concat guard their operands with a mask so that no position outside an
// operand is ever read. Instructions are hash-consed, so a value needed at one position by
// several consumers is computed once.
#include "kiln/codegen/lower.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/ir/conv.h"
#include "kiln/ir/host_tensor.h"
#include "kiln/ir/index_map.h"
#include "kiln/ir/scalar_semantics.h"
#include "kiln/ir/text.h"

namespace kiln {
namespace {

using kir::Code;
using kir::Inst;
using kir::Ref;

std::vector<std::byte> constant_bytes(const Node& n) {
  HostTensor t = HostTensor::uninitialized(n.type);  // every element written below
  const auto& data = *n.attr("data").scalars;
  for (size_t k = 0; k < data.size(); ++k) {
    const Scalar s = data[k].cast_to(t.dtype());
    if (is_float(t.dtype())) t.set_double(static_cast<int64_t>(k), s.as_double());
    else t.set_int(static_cast<int64_t>(k), s.as_int());
  }
  std::vector<std::byte> out(t.nbytes());
  if (!out.empty()) std::memcpy(out.data(), t.data(), out.size());
  return out;
}

IndexMap identity_map(const Shape& s) {
  IndexMap p;
  for (int d = 0; d < s.rank(); ++d) p.push_back(IndexExpr::dim(d, s[d]));
  return p;
}

// `s` with axis `axis` moved last, and the map from a point of that domain to `s`'s
// coordinates: the domain of an in-order walk whose rows (runs of the axis) are independent.
Shape axis_last_shape(const Shape& s, int axis) {
  Shape out;
  for (int d = 0; d < s.rank(); ++d)
    if (d != axis) out.push_back(s[d]);
  out.push_back(s[axis]);
  return out;
}
IndexMap axis_last_map(const Shape& s, int axis) {
  IndexMap p;
  for (int d = 0; d < s.rank(); ++d) p.push_back(IndexExpr::dim(d == axis ? s.rank() - 1 : d < axis ? d : d - 1, s[d]));
  return p;
}

class Lowering;

// Builds one kernel.
class KernelBuilder {
 public:
  KernelBuilder(Lowering& low, std::string name, Shape domain, std::vector<bool> reduced,
                std::vector<bool> member)
      : low_(low), member_(std::move(member)) {
    k_.name = std::move(name);
    k_.domain = std::move(domain);
    k_.reduced = std::move(reduced);
  }

  // ---- index arithmetic, for IndexExpr::build ----
  Ref constant(int64_t c) { return konst(Scalar::from_int(c), DType::I64); }
  Ref dim(int d) {
    Inst in{Code::Dim, OpKind::Add, DType::I64, {}, -1, d, {}};
    return add_inst(std::move(in));
  }
  Ref add(Ref a, Ref b) {
    if (is_const(a, 0)) return b;
    if (is_const(b, 0)) return a;
    return op(OpKind::Add, DType::I64, {a, b});
  }
  Ref mul(Ref a, int64_t c) {
    if (c == 1 || is_const(a, 0)) return a;
    if (c == 0) return constant(0);
    return op(OpKind::Mul, DType::I64, {a, constant(c)});
  }
  Ref floordiv(Ref a, int64_t n) { return n == 1 ? a : add_inst({Code::IndexDiv, OpKind::Add, DType::I64, {a}, -1, n, {}}); }
  Ref mod(Ref a, int64_t n) { return add_inst({Code::IndexMod, OpKind::Add, DType::I64, {a}, -1, n, {}}); }

  // Storage types (dtype.h) live in their compute type here. known_ records the values known
  // to lie in a storage type's range already (loads, constants, narrows), so that a cast to
  // that type adds nothing.
  Ref konst(Scalar s, DType t) {
    return known(add_inst({Code::Const, OpKind::Add, compute_dtype(t), {}, -1, 0, s.cast_to(t)}), t);
  }
  /// Op `o` giving graph type `t`. On a storage type the result wraps (integers) or rounds
  /// (f16, bf16) into it, as the interpreter stores every op's result (docs/ir.md, 3.1).
  Ref op(OpKind o, DType t, std::vector<Ref> args) {
    const DType c = compute_dtype(t);
    const Ref r = add_inst({Code::Op, o, c, std::move(args), -1, 0, {}});
    if (c == t) return r;
    if (o == OpKind::Where || o == OpKind::Max || o == OpKind::Min) return known(r, t);  // picks an operand
    return narrow(r, t);
  }
  /// u64's order as int64's: the top bit flipped (scalar::u64_order_key), an involution.
  Ref u64_key(Ref a) { return op(OpKind::Add, DType::I64, {a, constant(INT64_MIN)}); }
  /// Max or min `o` of `a` and `b` (of type `t`), in u64's order where `t` is u64.
  Ref extreme(OpKind o, DType t, Ref a, Ref b) {
    if (t != DType::U64) return op(o, t, {a, b});
    const Ref less = op(OpKind::Lt, DType::Bool, {u64_key(a), u64_key(b)});
    return op(OpKind::Where, t, o == OpKind::Max ? std::vector<Ref>{less, b, a} : std::vector<Ref>{less, a, b});
  }
  Ref load(int32_t param, DType t, std::vector<Ref> args) {
    return known(add_inst({Code::Load, OpKind::Add, compute_dtype(t), std::move(args), param, 0, {}}), t);
  }
  /// `a` (in compute type) wrapped or rounded into storage type `t`.
  Ref narrow(Ref a, DType t) {
    if (is_compute_dtype(t) || known_type(a) == t) return a;
    return known(add_inst({Code::Narrow, OpKind::Cast, compute_dtype(t), {a}, -1, static_cast<int64_t>(t), {}}), t);
  }
  Ref known(Ref r, DType t) {
    if (!is_compute_dtype(t)) known_[r] = t;
    return r;
  }
  DType known_type(Ref r) const {
    const auto it = known_.find(r);
    return it == known_.end() ? type(r) : it->second;
  }
  Ref custom_call(const Node& n, const std::vector<Ref>& x) {
    const std::shared_ptr<const CustomKernel>& c = n.attrs[0].custom;
    auto it = std::find_if(k_.customs.begin(), k_.customs.end(), [&](const auto& k) { return k->digest == c->digest; });
    const auto index = static_cast<int64_t>(it - k_.customs.begin());
    if (it == k_.customs.end()) k_.customs.push_back(c);
    std::vector<Ref> args;
    for (size_t i = 0; i < x.size(); ++i) args.push_back(cast(x[i], c->signature.params[i]));
    return add_inst({Code::Op, OpKind::Custom, n.type.dtype, std::move(args), -1, index, {}});
  }
  /// `a` converted to `t` with the semantics of the cast op.
  Ref cast(Ref a, DType t) {
    if (known_type(a) == t) return a;
    if (known_type(a) == DType::U64 && is_float(t)) return cast(u64_to_f64(a), t);  // rounded once, as the interpreter
    if (t == DType::U64 && is_float(type(a))) return float_to_u64(a);
    const DType c = compute_dtype(t);
    const bool to_odd = type(a) == DType::F64 && (t == DType::F16 || t == DType::BF16);
    Ref r = type(a) == c ? a : add_inst({Code::Cast, OpKind::Cast, c, {a}, -1, to_odd ? kir::kCastToOdd : 0, {}});
    if (is_float(type(a)) && is_integer(t) && c != t)  // floats saturate at the narrow type's limits
      r = op(OpKind::Min, c, {op(OpKind::Max, c, {r, konst(Scalar::from_int(int_min(t)), c)}),
                              konst(Scalar::from_int(int_max(t)), c)});
    return narrow(r, t);
  }
  // u64 where int64's arithmetic would read values from 2^63 up (the negative int64s) wrong,
  // built from int64 ops: docs/ir.md, 3.1.
  /// A u64 converted to f64, rounded to nearest even.
  Ref u64_to_f64(Ref a);
  /// A float converted to u64: truncated, NaN and below 0 to 0, from 2^64 up to 2^64 - 1.
  Ref float_to_u64(Ref a);
  /// mod (or fmod: the same for unsigned values) or shr of two u64s.
  Ref u64_binary(OpKind o, Ref a, Ref b);
  /// u64 `a` >> 1, for `a` from 2^63 up: the arithmetic shift's top bit flipped back.
  Ref u64_half(Ref a) { return u64_key(op(OpKind::Shr, DType::I64, {a, constant(1)})); }
  /// The lowest bit of an int64, 0 or 1 (the IR has shifts, no bitwise and).
  Ref low_bit(Ref x) {
    const Ref one = constant(1);
    return op(OpKind::Sub, DType::I64, {x, op(OpKind::Shl, DType::I64, {op(OpKind::Shr, DType::I64, {x, one}), one})});
  }
  Ref both(Ref a, Ref b) {  // logical and of two optional masks
    if (a == kir::kNoRef) return b;
    if (b == kir::kNoRef) return a;
    return op(OpKind::And, DType::Bool, {a, b});
  }
  DType type(Ref r) const { return k_.insts[static_cast<size_t>(r)].type; }

  /// `v` at position `p`, reading nothing where `mask` is false.
  Ref value_at(const Graph& g, ValueId v, const IndexMap& p, Ref mask);

  /// Stores `v` where it lives in the domain; false when it does not fit the domain (an
  /// output larger than the domain along some dim).
  bool store(const Graph& g, ValueId v, int32_t plan_buffer);
  /// Writes scatter `v`'s updates into `plan_buffer` (which holds its data already), at
  /// every point of the domain (the updates' shape), in order.
  /// `by_rows`: the domain is the updates' (or the result's) shape with the axis last
  /// (axis_last_shape), and its rows may run in parallel.
  void scatter(const Graph& g, ValueId v, int32_t plan_buffer, bool by_rows);
  /// Writes cumsum `v` into `plan_buffer` at every point of the domain (its shape), in order:
  /// each point adds its operand to the sum stored one step before along the axis.
  void cumsum(const Graph& g, ValueId v, int32_t plan_buffer, bool by_rows);
  // An argsort's sorting network (Lowering::lower_argsort_region) works on lanes padded to
  // a power of two, `width`: a key buffer and a position buffer of shape [lanes, width].
  static Shape lanes_shape(const Graph& g, const Node& n);
  /// Over [the operand's other dims..., width]: each lane's keys (argsort `v`'s operand;
  /// padding past its `len` elements reads nothing) and their positions 0, 1, ...
  void sort_lanes(const Graph& g, ValueId v, int32_t keys, int32_t positions);
  /// Over [lanes, width / 2]: one stage of a bitonic network of argsort `v`, compare-exchange
  /// of the pairs (i, i + 2^$0), ascending where bit $1 of i is 0. The stage is a launch's
  /// pair of fixed scalars, so one kernel serves every stage, and any pair is safe: a
  /// partner outside the lane exchanges nothing.
  void sort_stage(const Graph& g, ValueId v, int32_t keys, int32_t positions);
  /// Over argsort `v`'s shape: the positions the network sorted, written as its result.
  void sorted_positions(const Graph& g, ValueId v, int32_t positions, int32_t plan_buffer);

  kir::Kernel finish() {
    kir::remove_dead_instructions(k_);
    return std::move(k_);
  }
  bool finish_empty() const { return k_.stores.empty(); }
  /// The kernel as built so far.
  const kir::Kernel& kernel() const { return k_; }
  void add_store(const kir::Store& s) { k_.stores.push_back(s); }
  /// Where member `v`'s elements lie in the domain when it derives from a reduction of the
  /// kernel (over the reduction's kept dims, through elementwise ops and views forwards);
  /// nullopt otherwise: then its dims are right-aligned with the domain's.
  std::optional<IndexMap> reduced_position(const Graph& g, ValueId v);
  /// reduced_position() of `v` once its member operands have theirs.
  std::optional<IndexMap> position_from_operands(const Graph& g, ValueId v);

  const std::vector<int32_t>& bindings() const { return bindings_; }
  const std::vector<int32_t>& scalar_bindings() const { return scalar_bindings_; }
  /// The kernel's scalar argument bound to launch slot `slot` (added on first use).
  Ref scalar_arg(int64_t slot, DType t) {
    KILN_ASSERT(fixed_args_ == 0, "a kernel's slot-bound scalar arguments come before its fixed ones");
    size_t a = 0;
    while (a < scalar_bindings_.size() && scalar_bindings_[a] != slot) ++a;
    if (a == scalar_bindings_.size()) {
      scalar_bindings_.push_back(static_cast<int32_t>(slot));
      k_.scalars.push_back(compute_dtype(t));
    }
    const Ref r = add_inst({Code::Arg, OpKind::Add, compute_dtype(t), {}, -1, static_cast<int64_t>(a), {}});
    return is_float(t) ? narrow(r, t) : known(r, t);  // integers fit (the type rules check)
  }
  /// A scalar argument of type `t` whose value each step launching the kernel fixes
  /// (LaunchPlan::Step::fixed_scalars), after those bound to launch slots.
  Ref fixed_arg(DType t) {
    const auto a = static_cast<int64_t>(k_.scalars.size());
    k_.scalars.push_back(t);
    ++fixed_args_;
    return add_inst({Code::Arg, OpKind::Add, t, {}, -1, a, {}});
  }
  int32_t param_for(int32_t plan_buffer, const std::string& name, const TensorType& type, bool written);
  /// The row-major offset of position `p` in a tensor of shape `s`.
  Ref offset_of(const IndexMap& p, const Shape& s);
  /// Element `p` of plan buffer `buffer`, which holds a row-major tensor of `type`.
  Ref load_at(int32_t buffer, const std::string& name, const TensorType& type, const IndexMap& p) {
    return load(param_for(buffer, name, type, false), type.dtype, {offset_of(p, type.shape)});
  }
  /// Over a domain of C's dims then one reduced dim: stores the sum of `a` x `b` (of type
  /// `c.dtype`, wrapping) row-major into plan buffer `buffer`, which holds C of type `c`.
  void store_contraction(Ref a, Ref b, int32_t buffer, const std::string& name, const TensorType& c) {
    const Ref sum = add_inst({Code::Reduce, OpKind::ReduceSum, c.dtype, {op(OpKind::Mul, c.dtype, {a, b})}, -1, 0, {}});
    IndexMap p;
    for (int d = 0; d < c.shape.rank(); ++d) p.push_back(IndexExpr::dim(d, c.shape[d]));
    k_.stores.push_back({param_for(buffer, name, c, true), offset_of(p, c.shape), sum, kir::kNoRef});
  }

 private:
  /// Whether key `ka` at lane position `ia` sorts before key `kb` at `ib` in argsort `n`'s
  /// order (keys in their compute type): padding (positions from `len` up) after every
  /// element, NaN after every number (before, descending), ties by position.
  Ref sorts_before(const Graph& g, const Node& n, Ref ka, Ref ia, Ref kb, Ref ib);
  bool is_const(Ref r, int64_t c) const {
    const Inst& in = k_.insts[static_cast<size_t>(r)];
    return in.code == Code::Const && in.literal.is_int() && in.literal.as_int() == c;
  }
  Ref add_inst(Inst in);
  std::unordered_map<Ref, DType> known_;
  Ref in_bounds(const IndexMap& q, const Shape& s);
  // One value at one position under one mask: the unit value_at() memoizes.
  struct Request {
    ValueId v;
    IndexMap p;
    Ref mask;
  };
  std::string memo_key(const Request& r);
  /// A load, a constant, a scalar argument or a source computed from its position; nullopt
  /// when `at` needs its operands first.
  std::optional<Ref> without_operands(const Graph& g, const Request& at);
  std::vector<Request> operand_requests(const Graph& g, const Request& at);
  Ref combine(const Graph& g, const Request& at, const std::vector<Ref>& operands);
  Ref pad_inside(const Graph& g, const Node& n, const IndexMap& p);
  Ref gathered(const Graph& g, const Node& n, const Request& at, Ref index);
  /// The offset in a tensor of shape `s` of position `p` with `p[axis]` replaced by the
  /// value `index` (a negative one counting from the end), and whether that lies inside.
  std::pair<Ref, Ref> offset_at_index(IndexMap p, size_t axis, Ref index, const Shape& s);
  Ref concat_part(const Graph& g, const Node& n, const IndexMap& p, size_t i);

  Lowering& low_;
  std::vector<bool> member_;
  kir::Kernel k_;
  std::vector<int32_t> bindings_;  // kernel buffer -> plan buffer
  std::vector<int32_t> scalar_bindings_;  // kernel scalar argument -> launch slot
  int fixed_args_ = 0;
  std::unordered_map<std::string, Ref> cse_;
  std::unordered_map<std::string, Ref> memo_;
  std::unordered_map<ValueId, std::optional<IndexMap>> natural_;
  IndexBuildCache<Ref> index_cache_;
};

class Lowering {
 public:
  Lowering(const Graph& g, const MemoryPlan& mp) : g_(g), mp_(mp) {
    for (size_t b = 0; b < mp.buffer_bytes.size(); ++b) {
      LaunchPlan::Buffer buf;
      buf.bytes = mp.buffer_bytes[b];
      buf.index = mp.buffer_param[b];
      buf.kind = buf.index >= 0 ? LaunchPlan::Buffer::Kind::Param : LaunchPlan::Buffer::Kind::Temp;
      plan_.buffers.push_back(std::move(buf));
    }
    for (size_t id = 0; id < g.size(); ++id) {
      const int32_t b = mp.buffer_of[id];
      if (b >= 0 && plan_.buffers[static_cast<size_t>(b)].type.shape.rank() == 0 &&
          plan_.buffers[static_cast<size_t>(b)].type.dtype == DType::F32 &&
          plan_.buffers[static_cast<size_t>(b)].bytes != 4)
        plan_.buffers[static_cast<size_t>(b)].type = g.type(static_cast<ValueId>(id));
      if (b >= 0 && plan_.buffers[static_cast<size_t>(b)].type.bytes() != plan_.buffers[static_cast<size_t>(b)].bytes)
        plan_.buffers[static_cast<size_t>(b)].type = g.type(static_cast<ValueId>(id));
    }
  }

  LaunchPlan run();

  const Graph& graph() const { return g_; }
  /// The plan buffer holding `v` (a stored value), or -1 when it is computed where it is read.
  int32_t stored(ValueId v) {
    if (auto it = override_.find(v); it != override_.end()) return it->second;
    const Node& n = g_.node(v);
    if (n.op == OpKind::Constant) {
      if (n.attr("value").present) return -1;
      const int32_t b = mp_.buffer_of[v] >= 0 ? mp_.buffer_of[v] : new_buffer(n.type);
      LaunchPlan::Buffer& buf = plan_.buffers[static_cast<size_t>(b)];
      if (buf.kind != LaunchPlan::Buffer::Kind::Constant) {
        buf.kind = LaunchPlan::Buffer::Kind::Constant;
        buf.type = n.type;
        buf.data = constant_bytes(n);
      }
      return b;
    }
    if (n.info().category == OpCategory::Source && n.op != OpKind::Input) return -1;  // recomputed
    if (n.kernel < 0 && n.info().is_view()) return -1;
    return mp_.buffer_of[v];
  }
  /// The buffer holding v's elements in v's row-major layout: v's own, or through reshapes
  /// (which keep the layout) that of what they reshape; -1 when none does.
  int32_t stored_in_layout(ValueId v) {
    for (;;) {
      if (const int32_t b = stored(v); b >= 0) return b;
      const Node& n = g_.node(v);
      if (n.op != OpKind::Reshape || n.kernel >= 0) return -1;
      v = n.operands[0];
    }
  }
  int32_t new_buffer(const TensorType& t) {
    LaunchPlan::Buffer buf;
    buf.type = t;
    buf.bytes = t.bytes();
    plan_.buffers.push_back(std::move(buf));
    return static_cast<int32_t>(plan_.buffers.size() - 1);
  }
  const std::string& name(ValueId v) const { return names_[v]; }

 private:
  void lower_region(int32_t k);
  /// Stores the data of the region's gathers that no buffer holds yet: a gather reads it at
  /// positions known only at run time, so it cannot be recomputed there.
  void store_gather_data(int32_t k);
  /// A region around a matmul or conv `mm`: its GEMM step, then its elementwise epilogue.
  void lower_matmul_region(int32_t k, ValueId mm);
  /// The buffer of region k's one output where the product `mm` may be written first: the
  /// epilogue then reads each element of it where it writes that element's result, as an
  /// in-place elementwise kernel does. -1 where it may not (docs/passes.md).
  int32_t product_in_output(int32_t k, ValueId mm);
  /// A region around an attention node `a`: its attention step, then its epilogue.
  void lower_attention_region(int32_t k, ValueId a);
  /// Operand `o` of an attention node, rows x cols over the node's `batch` dims (right-
  /// aligned, broadcast where o has one element), read where it lies when it is a view of a
  /// stored f32 value at affine offsets, else computed into a row-major buffer first.
  LaunchPlan::Attention::Operand attention_operand(ValueId o, const Shape& batch, const std::vector<bool>& member);
  /// The kernel of `mm`'s region after its GEMM or attention step: the outputs of the region
  /// besides `mm` and those in `written`, reading `mm` from its buffer.
  void lower_epilogue(int32_t k, ValueId mm, const std::vector<bool>& member, const std::vector<ValueId>& written);
  /// Conv `cv` as a GEMM step per batch and group over buffers `x` and `w` (row-major, of the
  /// compute type), into `c`: W's [M/groups, C/groups x window] rows times the windows of x
  /// gathered as B (Gemm::im2col); a 1x1 window at stride 1 without padding reads x as it is.
  LaunchPlan::Gemm conv_gemm(ValueId cv, int32_t x, int32_t w, int32_t c);
  /// Whether matmul operand `o` is a value of type `t` stored in a buffer, or views of one
  /// (the region's `member` views included): what the contraction may read in place.
  bool views_of_stored(ValueId o, DType t, const std::vector<bool>& member);
  /// Matmul `mm`'s product as the Kernel IR contraction it is, over [batch..., M, N,
  /// reduce K]: the sum of A's element times B's in `mm`'s compute type, stored into buffer
  /// `c` of that type. An operand is read from `copied[i]` when that is a buffer (it was
  /// computed there, in the compute type), else through its views. Returns the GEMM step
  /// kir::gemm_of_contraction finds in it, or nullopt with `unfit[i]` set for each operand
  /// whose load is no plain load at affine offsets (a pad, a reshape of a transpose).
  std::optional<LaunchPlan::Gemm> matmul_contraction(ValueId mm, const int32_t copied[2], int32_t c,
                                                     const std::vector<bool>& member, bool unfit[2],
                                                     bool as_kernel = false);
  /// A region around a scatter or cumsum (trait::InOrder): one kernel that walks its points
  /// in order (a scatter's data copied into its result first).
  void lower_in_order_region(int32_t k, ValueId w);
  /// A region around an argsort: a kernel that lays out its operand's lanes, padded to a
  /// power of two, with their positions; a bitonic sorting network over them, one launch
  /// of one kernel per stage (log2(width) * (log2(width) + 1) / 2 launches, O(n log^2 n)
  /// work, every pair of a stage in parallel); a kernel writing the sorted positions.
  void lower_argsort_region(int32_t k, ValueId w);
  /// Adds `b`'s kernel to the launch list, or the GEMM step it is when it is a matrix
  /// product written as a contraction (kir::gemm_of_contraction) with at least
  /// kGemmContractionSide rows and columns. A narrower one (a dot product per row, a
  /// matrix-vector product) stays a reduction kernel: its sums are long rows that the
  /// kernel's schedules reduce in parallel, where a GEMM's tiles would be mostly padding
  /// and each work-item of a GPU's would walk the whole depth (fuzz: a 1 x 287625 x 3
  /// product past lavapipe's loop budget).
  static constexpr int64_t kGemmContractionSide = 8;
  void add_kernel(KernelBuilder& b, std::optional<int> columns_from = std::nullopt) {
    kir::Kernel k = b.finish();
    LaunchPlan::Step step;
    std::optional<LaunchPlan::Gemm> gemm = kir::gemm_of_contraction(k);
    if (gemm && gemm->m >= kGemmContractionSide && gemm->n >= kGemmContractionSide) {
      step.gemm = std::move(*gemm);
      step.gemm.name = k.name;
      for (int32_t* param : {&step.gemm.a, &step.gemm.b, &step.gemm.c})
        *param = b.bindings()[static_cast<size_t>(*param)];
      plan_.steps.push_back(std::move(step));
      return;
    }
    step.kernel = static_cast<int32_t>(plan_.kernels.size());
    step.bindings = b.bindings();
    step.scalar_bindings = b.scalar_bindings();
    // A reduction's rows are what its schedules walk in lanes: without dims of one point and
    // with contiguous neighbours merged they are as long as the data allows. So are a GEMM
    // epilogue's, whose rows stay apart from the product's columns (`columns_from`); other
    // elementwise kernels keep the graph's dims (merge_rows is their schedule's choice).
    if (k.customs.empty() && (k.has_reduction() || columns_from)) k = kir::coalesce_dims(k, columns_from.value_or(0));
    plan_.kernels.push_back(std::move(k));
    plan_.steps.push_back(std::move(step));
  }
  /// A kernel over v's shape that writes v into `buffer` (outputs nothing else computes,
  /// matmul operands that are views).
  void copy_kernel(ValueId v, int32_t buffer, DType as, std::vector<bool> member = {});
  bool depends_on_reduction(ValueId v, const std::vector<ValueId>& members) const;
  std::pair<Shape, std::vector<bool>> region_domain(const std::vector<ValueId>& members,
                                                    const std::vector<ValueId>& outputs) const;

  const Graph& g_;
  const MemoryPlan& mp_;
  LaunchPlan plan_;
  KernelIndex index_;
  std::vector<std::string> names_;
  std::unordered_map<ValueId, int32_t> override_;  // values stored outside the memory plan
};

Ref KernelBuilder::add_inst(Inst in) {
  std::string key = fmt::format("{}|{}|{}|{}|{}|{}|", static_cast<int>(in.code), static_cast<int>(in.op),
                                static_cast<int>(in.type), in.buffer, in.imm,
                                in.code == Code::Const ? format_scalar(in.literal, in.type) : "");
  for (Ref a : in.args) key += fmt::format("{},", a);
  if (auto it = cse_.find(key); it != cse_.end()) return it->second;
  k_.insts.push_back(std::move(in));
  const auto r = static_cast<Ref>(k_.insts.size() - 1);
  cse_.emplace(std::move(key), r);
  return r;
}

int32_t KernelBuilder::param_for(int32_t plan_buffer, const std::string& name, const TensorType& type, bool written) {
  for (size_t i = 0; i < bindings_.size(); ++i)
    if (bindings_[i] == plan_buffer) {
      // A buffer read and then written over (in place) is named by the value written there,
      // which is what it holds after the kernel and what the profiler reports it wrote.
      if (written && !k_.buffers[i].written) k_.buffers[i].name = name;
      k_.buffers[i].written = k_.buffers[i].written || written;
      return static_cast<int32_t>(i);
    }
  bindings_.push_back(plan_buffer);
  k_.buffers.push_back({name, type, written});
  return static_cast<int32_t>(bindings_.size() - 1);
}

Ref KernelBuilder::offset_of(const IndexMap& p, const Shape& s) {
  const auto strides = s.strides();
  Ref off = constant(0);
  for (size_t j = 0; j < p.size(); ++j)
    if (s[static_cast<int>(j)] != 1) off = add(off, mul(p[j].build(*this, index_cache_), strides[j]));
  return off;
}

Ref KernelBuilder::in_bounds(const IndexMap& q, const Shape& s) {
  Ref ok = kir::kNoRef;
  for (size_t j = 0; j < q.size(); ++j) {
    // A bound every point of the domain meets is not compared (a depthwise window's
    // channel, which its own dim walks): a CPU paid a compare and a mask per window row.
    const auto [lo, hi] = q[j].range();
    const int64_t extent = s[static_cast<int>(j)];
    if (lo >= 0 && hi < extent) continue;
    const Ref x = q[j].build(*this, index_cache_);
    if (lo < 0) ok = both(ok, op(OpKind::Ge, DType::Bool, {x, constant(0)}));
    if (hi >= extent) ok = both(ok, op(OpKind::Lt, DType::Bool, {x, constant(extent)}));
  }
  return ok == kir::kNoRef ? konst(Scalar::from_int(1), DType::Bool) : ok;
}

std::string KernelBuilder::memo_key(const Request& r) {
  // By the instructions of the position (hash-consed, so equal positions give equal refs):
  // its text can be exponentially longer than the shared nodes it is made of.
  std::string key = fmt::format("{}|{}|", r.v, r.mask);
  for (const IndexExpr& e : r.p) key += fmt::format("{},", e.build(*this, index_cache_));
  return key;
}

Ref KernelBuilder::value_at(const Graph& g, ValueId v, const IndexMap& p, Ref mask) {
  // An explicit stack rather than recursion, so that the stack depth does not follow the
  // graph: fusion bounds what a kernel reads through (FusionPolicy::max_kernel_ops), but a
  // graph fused with a policy that lifts the bound must still lower.
  struct Frame {
    Request at;
    std::string key;
    std::vector<Request> needs;  // operands, at their positions and masks
    std::vector<Ref> got;
    bool expanded = false;
  };
  std::vector<Frame> stack;
  auto push = [&](Request r) {
    std::string key = memo_key(r);
    stack.push_back({std::move(r), std::move(key), {}, {}, false});
  };
  push({v, p, mask});
  Ref result = kir::kNoRef;
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (!f.expanded) {
      f.expanded = true;
      if (auto it = memo_.find(f.key); it != memo_.end()) {
        result = it->second;
        stack.pop_back();
        continue;
      }
      if (std::optional<Ref> leaf = without_operands(g, f.at)) {
        result = *leaf;
        memo_.emplace(std::move(f.key), result);
        stack.pop_back();
        continue;
      }
      f.needs = operand_requests(g, f.at);
    } else {
      f.got.push_back(result);  // the operand pushed last
    }
    if (f.got.size() < f.needs.size()) {
      Request next = f.needs[f.got.size()];
      push(std::move(next));  // invalidates f
      continue;
    }
    result = combine(g, f.at, f.got);
    memo_.emplace(std::move(f.key), result);
    stack.pop_back();
  }
  return result;
}

std::optional<Ref> KernelBuilder::without_operands(const Graph& g, const Request& at) {
  const Node& n = g.node(at.v);
  const DType t = n.type.dtype;
  const bool here = at.v < member_.size() && member_[at.v];
  if (!here) {
    const int32_t b = low_.stored(at.v);
    if (b >= 0) {
      const int32_t param = param_for(b, low_.name(at.v), n.type, false);
      std::vector<Ref> args{offset_of(at.p, n.type.shape)};
      if (at.mask != kir::kNoRef) args.push_back(at.mask);
      return load(param, t, std::move(args));
    }
  }
  if (n.info().category != OpCategory::Source) return std::nullopt;
  if (n.op == OpKind::Constant) return konst(n.attr("value").scalar, t);
  if (n.op == OpKind::ScalarParam) return scalar_arg(n.attr("slot").i, t);
  const Ref flat = offset_of(at.p, n.type.shape);
  if (n.op == OpKind::Rand)
    return narrow(add_inst({Code::Rand, OpKind::Rand, compute_dtype(t), {flat}, -1, n.attr("seed").i, {}}), t);
  if (n.op == OpKind::Arange) {
    const Scalar start = n.attr("start").scalar, step = n.attr("step").scalar;
    if (is_float(t)) {
      const Ref k = cast(flat, DType::F64);
      const Ref x = op(OpKind::Add, DType::F64,
                       {konst(Scalar::from_float(start.as_double()), DType::F64),
                        op(OpKind::Mul, DType::F64, {k, konst(Scalar::from_float(step.as_double()), DType::F64)})});
      return cast(x, t);
    }
    const Ref x = op(OpKind::Add, DType::I64, {constant(start.as_int()), op(OpKind::Mul, DType::I64, {flat, constant(step.as_int())})});
    return cast(x, t);
  }
  // An input that is not stored cannot happen.
  throw Error(fmt::format("kernel @{}: cannot compute %{} ({}) inside the kernel", k_.name, low_.name(at.v),
                          op_info(n.op).name));
}

// The data is in memory (Lowering::store_gather_data), in its own layout or in that of what
// it reshapes: its offset is the known part of the position plus the index times the axis's
// stride, and the load is masked where the index, once a negative one counts from the end,
// falls outside the axis.
Ref KernelBuilder::gathered(const Graph& g, const Node& n, const Request& at, Ref index) {
  const ValueId data = n.operands[0];
  const TensorType& dt = g.type(data);
  const auto axis = static_cast<size_t>(n.attr("axis").i);
  const int32_t b = low_.stored_in_layout(data);
  if (b < 0)
    throw Error(fmt::format("kernel @{}: gather data %{} is not in memory", k_.name, low_.name(data)));
  const auto [offset, inside] = offset_at_index(operand_index_map(g, n, 0, at.p, k_.domain), axis, index, dt.shape);
  const int32_t param = param_for(b, low_.name(data), dt, false);
  return load(param, dt.dtype, {offset, both(at.mask, inside)});
}

std::pair<Ref, Ref> KernelBuilder::offset_at_index(IndexMap p, size_t axis, Ref index, const Shape& s) {
  const int64_t extent = s[static_cast<int>(axis)];
  Ref j = cast(index, DType::I64);
  j = op(OpKind::Where, DType::I64,
         {op(OpKind::Lt, DType::Bool, {j, constant(0)}), op(OpKind::Add, DType::I64, {j, constant(extent)}), j});
  const Ref inside =
      op(OpKind::And, DType::Bool, {op(OpKind::Ge, DType::Bool, {j, constant(0)}), op(OpKind::Lt, DType::Bool, {j, constant(extent)})});
  p[axis] = IndexExpr::constant(0);
  const Ref offset = op(OpKind::Add, DType::I64, {offset_of(p, s), mul(j, s.strides()[axis])});
  return {offset, inside};
}

void KernelBuilder::scatter(const Graph& g, ValueId v, int32_t plan_buffer, bool by_rows) {
  const Node& n = g.node(v);
  const Shape& us = g.type(n.operands[2]).shape;
  const auto axis = static_cast<int>(n.attr("axis").i);
  const IndexMap p = by_rows ? axis_last_map(us, axis) : identity_map(us);
  const Ref index = value_at(g, n.operands[1], p, kir::kNoRef);
  const Ref update = cast(value_at(g, n.operands[2], p, kir::kNoRef), n.type.dtype);
  const auto [offset, inside] = offset_at_index(p, static_cast<size_t>(n.attr("axis").i), index, n.type.shape);
  const int32_t param = param_for(plan_buffer, low_.name(v), n.type, true);
  Ref value = update;
  if (const std::optional<OpKind> combine = n.scatter_combine()) {
    const Ref there = load(param, n.type.dtype, {offset, inside});
    value = *combine == OpKind::Max || *combine == OpKind::Min ? extreme(*combine, n.type.dtype, there, update)
                                                               : op(*combine, n.type.dtype, {there, update});
  }
  k_.stores.push_back({param, offset, value, inside});
  k_.in_order = true;
  k_.rows_independent = by_rows;
}

void KernelBuilder::cumsum(const Graph& g, ValueId v, int32_t plan_buffer, bool by_rows) {
  const Node& n = g.node(v);
  const Shape& s = n.type.shape;
  const auto axis = static_cast<int>(n.attr("axis").i);
  const IndexMap p = by_rows ? axis_last_map(s, axis) : identity_map(s);
  const Ref x = cast(value_at(g, n.operands[0], p, kir::kNoRef), n.type.dtype);
  const int32_t param = param_for(plan_buffer, low_.name(v), n.type, true);
  const Ref offset = offset_of(p, s);
  // The sum one step before along the axis; at its start, none: the operand itself (not
  // 0 + x, which would turn -0.0 into 0.0).
  const Ref after_first = op(OpKind::Gt, DType::Bool, {dim(by_rows ? s.rank() - 1 : axis), constant(0)});
  const Ref before = op(OpKind::Sub, DType::I64, {offset, constant(s.strides()[static_cast<size_t>(axis)])});
  const Ref added = op(OpKind::Add, n.type.dtype, {load(param, n.type.dtype, {before, after_first}), x});
  const Ref sum = op(OpKind::Where, n.type.dtype, {after_first, added, x});
  k_.stores.push_back({param, offset, cast(sum, compute_dtype(n.type.dtype)), kir::kNoRef});
  k_.in_order = true;
  k_.rows_independent = by_rows;
}

Ref KernelBuilder::u64_to_f64(Ref a) {
  constexpr DType I = DType::I64, B = DType::Bool;
  auto as_f64 = [&](Ref x) { return add_inst({Code::Cast, OpKind::Cast, DType::F64, {x}, -1, 0, {}}); };  // signed
  // From 2^63 up (negative as int64): half of it, with the bit shifted out kept as a sticky
  // bit (half | low: round to odd), converts exactly rounded; doubled, it is the conversion.
  const Ref half = u64_half(a);
  const Ref sticky = op(OpKind::Where, I, {op(OpKind::Eq, B, {low_bit(half), constant(0)}), op(OpKind::Add, I, {half, low_bit(a)}), half});
  const Ref doubled = op(OpKind::Mul, DType::F64, {as_f64(sticky), konst(Scalar::from_float(2.0), DType::F64)});
  return op(OpKind::Where, DType::F64, {op(OpKind::Lt, B, {a, constant(0)}), doubled, as_f64(a)});
}

Ref KernelBuilder::float_to_u64(Ref a) {
  constexpr DType F = DType::F64, I = DType::I64, B = DType::Bool;
  const Ref x = cast(a, F);  // exact
  const Ref half_range = konst(Scalar::from_float(0x1p63), F);
  auto at_least = [&](double bound) { return op(OpKind::Ge, B, {x, konst(Scalar::from_float(bound), F)}); };
  // From 2^63 up: what is above 2^63 converts as int64 does, and the top bit is set.
  const Ref high = u64_key(cast(op(OpKind::Sub, F, {x, half_range}), I));
  Ref r = op(OpKind::Where, I, {op(OpKind::Gt, B, {x, konst(Scalar::from_float(0.0), F)}), cast(x, I), constant(0)});
  r = op(OpKind::Where, I, {at_least(0x1p63), high, r});
  return known(op(OpKind::Where, I, {at_least(0x1p64), constant(-1), r}), DType::U64);
}

Ref KernelBuilder::u64_binary(OpKind o, Ref a, Ref b) {
  constexpr DType I = DType::I64, B = DType::Bool;
  const Ref zero = constant(0);
  auto less = [&](Ref x, Ref y) { return op(OpKind::Lt, B, {u64_key(x), u64_key(y)}); };
  if (o == OpKind::Shr) {
    // An arithmetic shift of a value from 2^63 up fills the top b bits with ones: less those.
    const Ref shifted = op(OpKind::Shr, I, {a, b});
    const Ref ones = op(OpKind::Shl, I, {constant(-1), op(OpKind::Sub, I, {constant(64), b})});
    const Ref inside = op(OpKind::And, B, {op(OpKind::Ge, B, {b, zero}), op(OpKind::Lt, B, {b, constant(64)})});
    const Ref from_top = op(OpKind::Where, I, {inside, op(OpKind::Sub, I, {shifted, ones}), zero});
    return known(op(OpKind::Where, I, {op(OpKind::Ge, B, {a, zero}), shifted, from_top}), DType::U64);
  }
  // Both below 2^63: int64's remainder (by 0: 0). A divisor from 2^63 up goes into a once at
  // most. A dividend from 2^63 up: 2 (a / 2 mod b) + a's low bit is below 2b, so b is
  // subtracted once at most.
  const Ref m = op(OpKind::Mod, I, {u64_half(a), b});
  const Ref twice = op(OpKind::Add, I, {op(OpKind::Add, I, {m, m}), low_bit(a)});
  const Ref big_a = op(OpKind::Where, I, {less(twice, b), twice, op(OpKind::Sub, I, {twice, b})});
  const Ref big_b = op(OpKind::Where, I, {less(a, b), a, op(OpKind::Sub, I, {a, b})});
  const Ref small = op(OpKind::Mod, I, {a, b});
  Ref r = op(OpKind::Where, I, {op(OpKind::Eq, B, {b, zero}), zero, big_a});
  r = op(OpKind::Where, I, {op(OpKind::Ge, B, {a, zero}), small, r});
  return known(op(OpKind::Where, I, {op(OpKind::Lt, B, {b, zero}), big_b, r}), DType::U64);
}

Shape KernelBuilder::lanes_shape(const Graph& g, const Node& n) {
  const Shape& s = g.type(n.operands[0]).shape;
  const int64_t len = s[static_cast<int>(n.attr("axis").i)];
  return Shape{s.numel() / len, static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(len)))};
}

Ref KernelBuilder::sorts_before(const Graph& g, const Node& n, Ref ka, Ref ia, Ref kb, Ref ib) {
  const DType t = g.type(n.operands[0]).dtype;
  const bool descending = n.attr("descending").present;
  const int64_t len = g.type(n.operands[0]).shape[static_cast<int>(n.attr("axis").i)];
  constexpr DType B = DType::Bool;
  auto logic = [&](OpKind o, Ref a, Ref b) { return op(o, B, {a, b}); };
  auto negate = [&](Ref a) { return op(OpKind::Not, B, {a}); };
  if (t == DType::Bool) ka = cast(ka, DType::I32), kb = cast(kb, DType::I32);  // ordered as 0 and 1
  if (t == DType::U64) ka = u64_key(ka), kb = u64_key(kb);
  const OpKind order = descending ? OpKind::Gt : OpKind::Lt;
  Ref key_before = op(order, B, {ka, kb});
  Ref key_same = op(OpKind::Eq, B, {ka, kb});
  if (is_float(t)) {
    const Ref nan_a = op(OpKind::IsNan, B, {ka}), nan_b = op(OpKind::IsNan, B, {kb});
    key_before = logic(OpKind::Or, key_before,
                       descending ? logic(OpKind::And, nan_a, negate(nan_b)) : logic(OpKind::And, negate(nan_a), nan_b));
    key_same = logic(OpKind::Or, key_same, logic(OpKind::And, nan_a, nan_b));
  }
  const Ref earlier = op(OpKind::Lt, B, {ia, ib});
  const Ref real_a = op(OpKind::Lt, B, {ia, constant(len)});
  const Ref pad_b = op(OpKind::Ge, B, {ib, constant(len)});
  const Ref among_real = logic(OpKind::Or, key_before, logic(OpKind::And, key_same, earlier));
  return op(OpKind::Where, B, {real_a, logic(OpKind::Or, pad_b, among_real), logic(OpKind::And, pad_b, earlier)});
}

void KernelBuilder::sort_lanes(const Graph& g, ValueId v, int32_t keys, int32_t positions) {
  const Node& n = g.node(v);
  const TensorType& xt = g.type(n.operands[0]);
  const auto axis = static_cast<int>(n.attr("axis").i);
  const int last = xt.shape.rank() - 1;
  const int64_t len = xt.shape[axis];
  const Shape lanes = lanes_shape(g, n);
  // The domain is the operand's shape with the axis moved last and padded to the width.
  IndexMap p;
  for (int d = 0, j = 0; d < xt.shape.rank(); ++d)
    p.push_back(d == axis ? IndexExpr::dim(last, lanes[1]) : IndexExpr::dim(j++, xt.shape[d]));
  const Ref at = dim(last);
  const Ref real = lanes[1] == len ? kir::kNoRef : op(OpKind::Lt, DType::Bool, {at, constant(len)});
  const Ref key = value_at(g, n.operands[0], p, real);
  const Ref offset = offset_of(identity_map(k_.domain), k_.domain);
  k_.stores.push_back({param_for(keys, low_.name(v) + ".keys", {xt.dtype, lanes}, true), offset, key, kir::kNoRef});
  k_.stores.push_back({param_for(positions, low_.name(v) + ".positions", {DType::I64, lanes}, true), offset, at, kir::kNoRef});
}

void KernelBuilder::sort_stage(const Graph& g, ValueId v, int32_t keys, int32_t positions) {
  const Node& n = g.node(v);
  const DType t = g.type(n.operands[0]).dtype;
  const Shape lanes = lanes_shape(g, n);
  const int64_t width = lanes[1];
  constexpr DType I = DType::I64;
  const Ref log_distance = fixed_arg(I), log_block = fixed_arg(I);
  auto shl = [&](Ref a, Ref c) { return op(OpKind::Shl, I, {a, c}); };
  auto shr = [&](Ref a, Ref c) { return op(OpKind::Shr, I, {a, c}); };
  // Pair p joins i = p + (p with its low log_distance bits cleared) and i + 2^log_distance.
  const Ref pair = dim(1);
  const Ref i = add(pair, shl(shr(pair, log_distance), log_distance));
  const Ref l = add(i, shl(constant(1), log_distance));
  const Ref inside = op(OpKind::And, DType::Bool,
                        {op(OpKind::Ge, DType::Bool, {l, constant(0)}), op(OpKind::Lt, DType::Bool, {l, constant(width)})});
  const Ref block = shr(i, log_block);
  const Ref descending_block = op(OpKind::Ne, DType::Bool, {low_bit(block), constant(0)});
  const Ref base = mul(dim(0), width);
  const Ref at_i = add(base, i), at_l = add(base, l);
  const int32_t kp = param_for(keys, low_.name(v) + ".keys", {t, lanes}, true);
  const int32_t pp = param_for(positions, low_.name(v) + ".positions", {I, lanes}, true);
  const Ref ki = load(kp, t, {at_i, inside}), pi = load(pp, I, {at_i, inside});
  const Ref kl = load(kp, t, {at_l, inside}), pl = load(pp, I, {at_l, inside});
  // The order is strict and total (a lane's positions differ), so the pair is out of order
  // where i sorts first in a descending block, or second in an ascending one.
  const Ref i_first = sorts_before(g, n, ki, pi, kl, pl);
  const Ref swap = op(OpKind::Where, DType::Bool, {descending_block, i_first, op(OpKind::Not, DType::Bool, {i_first})});
  const Ref guard = both(inside, swap);
  k_.stores.push_back({kp, at_i, kl, guard});
  k_.stores.push_back({pp, at_i, pl, guard});
  k_.stores.push_back({kp, at_l, ki, guard});
  k_.stores.push_back({pp, at_l, pi, guard});
}

void KernelBuilder::sorted_positions(const Graph& g, ValueId v, int32_t positions, int32_t plan_buffer) {
  const Node& n = g.node(v);
  const Shape& s = n.type.shape;
  const auto axis = static_cast<int>(n.attr("axis").i);
  const Shape lanes = lanes_shape(g, n);
  // The lane is the position's other dims, row-major; along it, the position on the axis.
  IndexExpr lane = IndexExpr::constant(0);
  for (int d = 0; d < s.rank(); ++d)
    if (d != axis) lane = lane * s[d] + IndexExpr::dim(d, s[d]);
  const Ref from = offset_of({lane, IndexExpr::dim(axis, s[axis])}, lanes);
  const Ref position = load(param_for(positions, low_.name(v) + ".positions", {DType::I64, lanes}, false), DType::I64, {from});
  k_.stores.push_back({param_for(plan_buffer, low_.name(v), n.type, true), offset_of(identity_map(s), s), position, kir::kNoRef});
}

// Pad and concat read an operand only where the position lies inside it: the guard is
// both the consumer's mask and that condition, built the same way here and in combine()
// (hash-consing makes the two one instruction).
Ref KernelBuilder::pad_inside(const Graph& g, const Node& n, const IndexMap& p) {
  return in_bounds(operand_index_map(g, n, 0, p, k_.domain), g.type(n.operands[0]).shape);
}

Ref KernelBuilder::concat_part(const Graph& g, const Node& n, const IndexMap& p, size_t i) {
  const auto axis = static_cast<size_t>(n.attr("axis").i);
  int64_t lo = 0;
  for (size_t j = 0; j < i; ++j) lo += g.type(n.operands[j]).shape[static_cast<int>(axis)];
  const int64_t hi = lo + g.type(n.operands[i]).shape[static_cast<int>(axis)];
  const Ref at = p[axis].build(*this, index_cache_);
  return both(op(OpKind::Ge, DType::Bool, {at, constant(lo)}), op(OpKind::Lt, DType::Bool, {at, constant(hi)}));
}

std::vector<KernelBuilder::Request> KernelBuilder::operand_requests(const Graph& g, const Request& at) {
  const Node& n = g.node(at.v);
  if (n.info().category == OpCategory::Matmul)  // stored by its GEMM step
    throw Error(fmt::format("kernel @{}: cannot compute %{} ({}) inside the kernel", k_.name, low_.name(at.v),
                            op_info(n.op).name));
  std::vector<Request> out;
  if (n.op == OpKind::Gather) return {{n.operands[1], at.p, at.mask}};  // the data: gathered()
  if (n.info().has(trait::WholeResult))  // written by kernels of its own (scatter(), cumsum(), argsort)
    throw Error(fmt::format("kernel @{}: cannot compute %{} ({}) inside the kernel", k_.name, low_.name(at.v),
                            n.info().name));
  for (size_t i = 0; i < n.operands.size(); ++i) {
    Ref m = at.mask;
    if (n.op == OpKind::Pad) m = both(m, pad_inside(g, n, at.p));
    if (n.op == OpKind::Concat) m = both(m, concat_part(g, n, at.p, i));
    out.push_back({n.operands[i], operand_index_map(g, n, i, at.p, k_.domain), m});
  }
  return out;
}

Ref KernelBuilder::combine(const Graph& g, const Request& at, const std::vector<Ref>& x) {
  const Node& n = g.node(at.v);
  const DType t = n.type.dtype;
  switch (n.info().category) {
    case OpCategory::Elementwise: {
      if (n.op == OpKind::Cast) return cast(x[0], t);
      if (n.op == OpKind::Custom) return custom_call(n, x);
      if (n.op == OpKind::Where) return op(OpKind::Where, t, {cast(x[0], DType::Bool), cast(x[1], t), cast(x[2], t)});
      if (n.info().has(trait::Predicate)) return op(n.op, t, {x[0]});  // a float, as it is
      if (x.size() == 1) {
        if (t == DType::U64 && (n.op == OpKind::Abs || n.op == OpKind::Relu)) return cast(x[0], t);  // never negative
        if (t == DType::U64 && n.op == OpKind::Sign)
          return cast(op(OpKind::Ne, DType::Bool, {cast(x[0], t), konst(Scalar::from_int(0), t)}), t);
        return op(n.op, t, {cast(x[0], t)});
      }
      const bool compare = t == DType::Bool && n.op != OpKind::And && n.op != OpKind::Or;
      const bool ordering = n.op == OpKind::Lt || n.op == OpKind::Le || n.op == OpKind::Gt || n.op == OpKind::Ge;
      if (ordering && promote(g.type(n.operands[0]).dtype, g.type(n.operands[1]).dtype) == DType::U64)
        return op(n.op, t, {u64_key(cast(x[0], DType::U64)), u64_key(cast(x[1], DType::U64))});
      if (n.op == OpKind::Max || n.op == OpKind::Min) return extreme(n.op, t, cast(x[0], t), cast(x[1], t));
      if (t == DType::U64 && (n.op == OpKind::Mod || n.op == OpKind::Fmod || n.op == OpKind::Shr))
        return u64_binary(n.op, cast(x[0], t), cast(x[1], t));
      const DType d = compare ? promote(type(x[0]), type(x[1])) : t;
      return op(n.op, t, {cast(x[0], d), cast(x[1], d)});
    }
    case OpCategory::Reduce: {
      // Sums and products of narrow integers are i64 (the type rules), so only f16 and bf16
      // reduce in another type than their own: f32, rounded once at the end.
      Inst in{Code::Reduce, n.op, compute_dtype(t), {}, -1, 0, {}};
      const bool arg = n.op == OpKind::ArgMax || n.op == OpKind::ArgMin;
      const bool extremum = arg || n.op == OpKind::ReduceMax || n.op == OpKind::ReduceMin;
      const bool u64 = extremum && g.type(n.operands[0]).dtype == DType::U64;  // reduced in u64's order
      if (arg) {
        in.args = {u64 ? u64_key(cast(x[0], DType::U64)) : x[0], dim(static_cast<int>(n.attr("axes").ints[0]))};
      } else {
        in.args = {u64 ? u64_key(cast(x[0], t)) : cast(x[0], t)};
      }
      const Ref r = add_inst(std::move(in));
      if (u64 && !arg) return known(u64_key(r), t);
      return extremum ? known(r, t) : narrow(r, t);
    }
    case OpCategory::Movement: {
      if (n.op == OpKind::Pad) {
        const AttrValue& fill = n.attr("value");
        const Scalar value = fill.present ? fill.scalar : Scalar::from_int(0);
        const Ref inside = pad_inside(g, n, at.p);
        // An operand loaded only inside (its mask: operand_requests') is 0 outside already:
        // a zero fill selects nothing new, and a CPU would pay a masked move per load (a
        // depthwise window's taps).
        const Inst& read = k_.insts[static_cast<size_t>(x[0])];
        const bool zero_fill = value.as_double() == 0 && !std::signbit(value.as_double());
        if (zero_fill && read.code == Code::Load && read.args.size() == 2 && read.args[1] == both(at.mask, inside) &&
            cast(x[0], t) == x[0])
          return x[0];
        return op(OpKind::Where, t, {inside, cast(x[0], t), konst(value, t)});
      }
      if (n.op == OpKind::Gather) return gathered(g, n, at, x[0]);
      if (n.op == OpKind::Concat) {
        Ref r = cast(x.back(), t);
        for (size_t i = x.size() - 1; i-- > 0;) r = op(OpKind::Where, t, {concat_part(g, n, at.p, i), cast(x[i], t), r});
        return r;
      }
      return x[0];  // a view: only the position changes
    }
    case OpCategory::Source:
    case OpCategory::Matmul: break;  // handled before operands are requested
  }
  throw Error(fmt::format("kernel @{}: cannot compute %{} ({}) inside the kernel", k_.name, low_.name(at.v),
                          op_info(n.op).name));
}

// The dims of the domain that an index map reads.
struct DimCollector {
  uint64_t dims = 0;
  int constant(int64_t) { return 0; }
  int dim(int d) {
    dims |= uint64_t{1} << d;
    return 0;
  }
  int add(int, int) { return 0; }
  int mul(int, int64_t) { return 0; }
  int floordiv(int, int64_t) { return 0; }
  int mod(int, int64_t) { return 0; }
};

uint64_t dims_of(const IndexMap& m) {
  DimCollector c;
  for (const IndexExpr& e : m) e.build(c);
  return c.dims;
}

// v's dims right-aligned with the domain's (a dim of extent 1 reads index 0). A dim shorter
// than the domain's (a concat operand) covers its first indices: `bounds` gets (dim, extent).
std::optional<IndexMap> right_aligned(const Shape& s, const Shape& domain,
                                      std::vector<std::pair<int, int64_t>>* bounds = nullptr) {
  IndexMap m;
  const int off = domain.rank() - s.rank();
  for (int j = 0; j < s.rank(); ++j) {
    const int d = off + j;
    if (d >= 0 && s[j] == domain[d]) {
      m.push_back(IndexExpr::dim(d, domain[d]));
    } else if (s[j] == 1) {
      m.push_back(IndexExpr::constant(0));
    } else if (d >= 0 && s[j] < domain[d] && bounds) {
      m.push_back(IndexExpr::dim(d, domain[d]));
      bounds->push_back({d, s[j]});
    } else {
      return std::nullopt;
    }
  }
  return m;
}

std::optional<IndexMap> KernelBuilder::reduced_position(const Graph& g, ValueId v) {
  // Operands before their users, on an explicit stack (depth is the kernel's chain length).
  auto member = [&](ValueId u) { return u < member_.size() && member_[u]; };
  std::vector<std::pair<ValueId, bool>> stack{{v, false}};
  while (!stack.empty()) {
    const auto [u, operands_done] = stack.back();
    stack.pop_back();
    if (natural_.count(u)) continue;
    if (!operands_done) {
      stack.push_back({u, true});
      if (member(u))
        for (ValueId o : g.node(u).operands)
          if (member(o) && !natural_.count(o)) stack.push_back({o, false});
      continue;
    }
    natural_[u] = position_from_operands(g, u);
  }
  return natural_.at(v);
}

std::optional<IndexMap> KernelBuilder::position_from_operands(const Graph& g, ValueId v) {
  const Node& n = g.node(v);
  const Shape& s = n.type.shape;
  const Shape& domain = k_.domain;
  std::optional<IndexMap> out;
  auto operand_pos = [&](size_t i) -> std::optional<IndexMap> {
    const ValueId o = n.operands[i];
    if (o < member_.size() && member_[o]) return natural_.at(o);
    return std::nullopt;
  };
  if (v >= member_.size() || !member_[v]) {
    // outside the kernel: no position of its own
  } else if (n.info().category == OpCategory::Reduce) {
    const auto& axes = n.attr("axes").ints;
    const bool keep = n.attr("keepdim").present;
    IndexMap m;
    for (int j = 0; j < domain.rank(); ++j) {
      const bool red = std::find(axes.begin(), axes.end(), j) != axes.end();
      if (!red) m.push_back(IndexExpr::dim(j, domain[j]));
      else if (keep) m.push_back(IndexExpr::constant(0));
    }
    out = m;
  } else if (n.info().category == OpCategory::Elementwise || n.op == OpKind::Expand) {
    // Each dim from an operand placed by a reduction and not broadcast along it; the other
    // dims right-aligned with the domain.
    bool any = false;
    std::vector<std::optional<IndexMap>> pos;
    for (size_t i = 0; i < n.operands.size(); ++i) {
      pos.push_back(operand_pos(i));
      any = any || pos.back().has_value();
    }
    if (any) {
      const std::optional<IndexMap> fallback = right_aligned(s, domain);
      IndexMap m;
      for (int j = 0; j < s.rank(); ++j) {
        std::optional<IndexExpr> e;
        for (size_t i = 0; i < n.operands.size() && !e; ++i) {
          const Shape& os = g.type(n.operands[i]).shape;
          const int oj = j - (s.rank() - os.rank());
          if (pos[i] && oj >= 0 && os[oj] == s[j]) e = (*pos[i])[static_cast<size_t>(oj)];
        }
        if (!e && fallback) e = (*fallback)[static_cast<size_t>(j)];
        if (!e && s[j] == 1) e = IndexExpr::constant(0);
        if (!e) break;
        m.push_back(*e);
      }
      if (static_cast<int>(m.size()) == s.rank()) out = m;
    }
  } else if (n.op == OpKind::Permute) {
    if (auto p = operand_pos(0)) {
      IndexMap m;
      for (int64_t axis : n.attr("perm").ints) m.push_back((*p)[static_cast<size_t>(axis)]);
      out = m;
    }
  } else if (n.op == OpKind::Reshape) {
    if (auto p = operand_pos(0)) {
      // Through the row-major linear index, forwards.
      const Shape& os = g.type(n.operands[0]).shape;
      const auto ost = os.strides(), st = s.strides();
      IndexExpr linear = IndexExpr::constant(0);
      for (size_t j = 0; j < p->size(); ++j) linear = linear + (*p)[j] * ost[j];
      IndexMap m;
      for (int j = 0; j < s.rank(); ++j) m.push_back(linear.floordiv(st[static_cast<size_t>(j)]).mod(s[j]));
      out = m;
    }
  }
  return out;
}

bool KernelBuilder::store(const Graph& g, ValueId v, int32_t plan_buffer) {
  if (g.type(v).shape.numel() == 0) return true;  // nothing to write
  std::optional<IndexMap> at = reduced_position(g, v);
  std::vector<std::pair<int, int64_t>> bounds;
  if (!at) at = right_aligned(g.type(v).shape, k_.domain, &bounds);
  if (!at) return false;
  const IndexMap& p = *at;
  std::vector<bool> missing(static_cast<size_t>(k_.domain.rank()), true);
  const uint64_t used = dims_of(p);
  for (size_t d = 0; d < missing.size(); ++d) missing[d] = !(used >> d & 1);
  // An output shorter than the domain along some dim is computed only inside its extent:
  // elsewhere its loads would read past their buffers.
  Ref inside = kir::kNoRef;
  for (const auto& [d, extent] : bounds) inside = both(inside, op(OpKind::Lt, DType::Bool, {dim(d), constant(extent)}));
  Ref value = value_at(g, v, p, inside);
  value = cast(value, compute_dtype(g.type(v).dtype));  // the store wraps or rounds into the buffer's type
  const Ref offset = offset_of(p, g.type(v).shape);
  const int32_t param = param_for(plan_buffer, low_.name(v), g.type(v), true);
  // A value that does not vary along some dims is stored once, where they are 0; reduced
  // dims only count when the stored value is computed inside the reduction loops.
  const std::vector<uint64_t> deps = kir::dim_dependence(k_);
  const uint64_t varying = deps[static_cast<size_t>(value)] | deps[static_cast<size_t>(offset)];
  bool inner = false;
  for (size_t d = 0; d < k_.reduced.size(); ++d) inner = inner || (k_.reduced[d] && (varying >> d & 1));
  Ref guard = kir::kNoRef;
  for (size_t d = 0; d < missing.size(); ++d)
    if (missing[d] && k_.domain[static_cast<int>(d)] != 1 && (!k_.reduced[d] || inner))
      guard = both(guard, op(OpKind::Eq, DType::Bool, {dim(static_cast<int>(d)), constant(0)}));
  guard = both(guard, inside);
  k_.stores.push_back({param, offset, value, guard});
  return true;
}

std::pair<Shape, std::vector<bool>> Lowering::region_domain(const std::vector<ValueId>& members,
                                                            const std::vector<ValueId>& outputs) const {
  for (ValueId v : members) {
    const Node& n = g_.node(v);
    if (n.info().category != OpCategory::Reduce) continue;
    Shape domain = g_.type(n.operands[0]).shape;
    std::vector<bool> reduced(static_cast<size_t>(domain.rank()), false);
    for (int64_t a : n.attr("axes").ints) reduced[static_cast<size_t>(a)] = true;
    return {domain, reduced};
  }
  Shape best;
  int64_t most = -1;
  for (ValueId v : outputs)
    if (g_.type(v).shape.numel() > most || (g_.type(v).shape.numel() == most && g_.type(v).shape.rank() > best.rank())) {
      most = g_.type(v).shape.numel();
      best = g_.type(v).shape;
    }
  return {best, std::vector<bool>(static_cast<size_t>(best.rank()), false)};
}

void Lowering::store_gather_data(int32_t k) {
  for (ValueId v : index_.members[static_cast<size_t>(k)]) {
    if (g_.node(v).op != OpKind::Gather) continue;
    const ValueId data = g_.node(v).operands[0];
    if (stored_in_layout(data) >= 0) continue;  // an embedding table reshaped for take() is read in place
    // Another view, a splat or a source, computed into a buffer of its own first.
    const int32_t b = new_buffer(g_.type(data));
    copy_kernel(data, b, g_.type(data).dtype);
    override_[data] = b;
  }
}

// A scatter over its updates' positions, after its data is copied into the result; a cumsum
// over its own. Either walks them in order, in one kernel.
void Lowering::lower_in_order_region(int32_t k, ValueId w) {
  const auto ki = static_cast<size_t>(k);
  const Node& n = g_.node(w);
  const bool scatter = n.op == OpKind::Scatter;
  const int32_t out = mp_.buffer_of[w] >= 0 ? mp_.buffer_of[w] : new_buffer(n.type);
  override_[w] = out;
  // The data first, unless it already lives in the result's buffer (reused in place).
  if (scatter && stored(n.operands[0]) != out) copy_kernel(n.operands[0], out, n.type.dtype);
  const Shape& points = scatter ? g_.type(n.operands[2]).shape : n.type.shape;
  if (points.numel() == 0) return;
  std::vector<bool> member(g_.size(), false);
  for (ValueId v : index_.members[ki]) member[v] = v != w;
  // Points off the axis never meet (an update lands in its own row of the result; a running
  // sum reads its own row): with the axis last, rows run in parallel, each in order. Not
  // when the region stores other outputs at the same points, in the points' own order.
  const bool by_rows = index_.outputs[ki].size() == 1;
  const Shape domain = by_rows ? axis_last_shape(points, static_cast<int>(n.attr("axis").i)) : points;
  KernelBuilder b(*this, g_.kernels()[ki].name, domain, std::vector<bool>(static_cast<size_t>(domain.rank()), false),
                  member);
  // Other outputs of the region (an update, an operand also returned) are stored beside.
  std::vector<ValueId> apart;
  for (ValueId v : index_.outputs[ki])
    if (v != w && !b.store(g_, v, mp_.buffer_of[v])) apart.push_back(v);
  if (scatter) b.scatter(g_, w, out, by_rows);
  else b.cumsum(g_, w, out, by_rows);
  add_kernel(b);
  for (ValueId v : apart) copy_kernel(v, mp_.buffer_of[v], g_.type(v).dtype, member);
}

void Lowering::lower_argsort_region(int32_t k, ValueId w) {
  const auto ki = static_cast<size_t>(k);
  const Node& n = g_.node(w);
  const int32_t out = mp_.buffer_of[w] >= 0 ? mp_.buffer_of[w] : new_buffer(n.type);
  override_[w] = out;
  std::vector<bool> member(g_.size(), false);
  for (ValueId v : index_.members[ki]) member[v] = v != w;
  const std::string& name = g_.kernels()[ki].name;
  const TensorType& xt = g_.type(n.operands[0]);
  if (xt.shape.numel() > 0) {
    Shape domain;  // the operand's shape, the axis last and padded to the width
    const auto axis = static_cast<int>(n.attr("axis").i);
    for (int d = 0; d < xt.shape.rank(); ++d)
      if (d != axis) domain.push_back(xt.shape[d]);
    const Shape lanes = KernelBuilder::lanes_shape(g_, n);
    const int64_t width = lanes[1];
    domain.push_back(width);
    const int32_t keys = new_buffer({xt.dtype, lanes}), positions = new_buffer({DType::I64, lanes});
    KernelBuilder first(*this, name, domain, std::vector<bool>(static_cast<size_t>(domain.rank()), false), member);
    first.sort_lanes(g_, w, keys, positions);
    add_kernel(first);
    if (width > 1) {
      const Shape pairs{lanes[0], width / 2};
      KernelBuilder stage(*this, name + "_stage", pairs, {false, false}, std::vector<bool>(g_.size(), false));
      stage.sort_stage(g_, w, keys, positions);
      add_kernel(stage);
      const LaunchPlan::Step launch = plan_.steps.back();
      plan_.steps.pop_back();
      const int log_width = std::countr_zero(static_cast<uint64_t>(width));
      for (int block = 1; block <= log_width; ++block)  // sorted runs of 2^block, from runs of half that
        for (int distance = block - 1; distance >= 0; --distance) {
          plan_.steps.push_back(launch);
          plan_.steps.back().fixed_scalars = {Scalar::from_int(distance), Scalar::from_int(block)};
        }
    }
    KernelBuilder last(*this, name + "_positions", n.type.shape,
                       std::vector<bool>(static_cast<size_t>(n.type.shape.rank()), false), std::vector<bool>(g_.size(), false));
    last.sorted_positions(g_, w, positions, out);
    add_kernel(last);
  }
  // Other outputs of the region (the operand, also returned) are stored beside.
  for (ValueId v : index_.outputs[ki])
    if (v != w) copy_kernel(v, mp_.buffer_of[v], g_.type(v).dtype, member);
}

void Lowering::lower_region(int32_t k) {
  const auto ki = static_cast<size_t>(k);
  store_gather_data(k);
  for (ValueId v : index_.members[ki]) {
    if (g_.node(v).op == OpKind::Attention) return lower_attention_region(k, v);
    if (g_.node(v).info().category == OpCategory::Matmul) return lower_matmul_region(k, v);
    if (g_.node(v).info().has(trait::InOrder)) return lower_in_order_region(k, v);
    if (g_.node(v).op == OpKind::Argsort) return lower_argsort_region(k, v);
  }
  const std::vector<ValueId>& outputs = index_.outputs[ki];
  if (outputs.empty()) return;
  auto [domain, reduced] = region_domain(index_.members[ki], outputs);
  std::vector<bool> member(g_.size(), false);
  for (ValueId v : index_.members[ki]) member[v] = true;
  KernelBuilder b(*this, g_.kernels()[ki].name, domain, reduced, member);
  std::vector<ValueId> apart;
  bool apart_needs_reductions = false;
  for (ValueId v : outputs) {
    const int32_t buf = mp_.buffer_of[v];
    if (buf < 0) throw Error(fmt::format("kernel @{}: output %{} has no buffer", g_.kernels()[ki].name, name(v)));
    // An output smaller than the domain (a slice or concat operand that is returned too)
    // would be computed over the whole domain, masked: its own small kernel is cheaper.
    std::vector<std::pair<int, int64_t>> bounds;
    // A domain with no points (a zero-size dim the output broadcasts from 1) would store
    // nothing of a non-empty output: it gets its own kernel too (found by kiln fuzz), after
    // this one has stored the reductions it needs (each of those is the reduction's
    // identity, written once per kept position however empty the reduced axes are).
    const bool empty_domain = domain.numel() == 0 && g_.type(v).shape.numel() > 0;
    const bool needs_reduction = depends_on_reduction(v, index_.members[ki]);
    if (empty_domain && needs_reduction && g_.node(v).info().category != OpCategory::Reduce) {
      apart.push_back(v);
      apart_needs_reductions = true;
      continue;
    }
    if (!needs_reduction && (empty_domain || (right_aligned(g_.type(v).shape, domain, &bounds) && !bounds.empty()))) {
      apart.push_back(v);
      continue;
    }
    if (!b.store(g_, v, buf)) apart.push_back(v);
  }
  if (apart_needs_reductions) {
    for (ValueId r : index_.members[ki]) {
      if (g_.node(r).info().category != OpCategory::Reduce) continue;
      if (std::find(outputs.begin(), outputs.end(), r) == outputs.end()) {
        override_[r] = new_buffer(g_.type(r));
        b.store(g_, r, override_[r]);
      }
      member[r] = false;  // read back from memory by the kernels below
    }
  }
  if (!b.finish_empty()) add_kernel(b);
  // Outputs that do not fit the domain (e.g. a value the kernel reads through a strided
  // slice) are computed over their own shape; that needs no reduction of the kernel.
  for (ValueId v : apart) {
    if (!apart_needs_reductions && depends_on_reduction(v, index_.members[ki]))
      throw Error(fmt::format("kernel @{}: output %{} ({}) does not fit the domain {} and needs its reductions",
                              g_.kernels()[ki].name, name(v), g_.type(v).str(), domain.str()));
    copy_kernel(v, mp_.buffer_of[v], g_.type(v).dtype, member);
  }
}

bool Lowering::depends_on_reduction(ValueId v, const std::vector<ValueId>& members) const {
  // Over the region's members in node order, once per call: members share operands (a
  // residual chain doubles the paths at every step), so a plain recursion would be
  // exponential; and a walk over the whole graph would make a long chain of kernels
  // quadratic.
  std::unordered_set<ValueId> depends;
  for (ValueId u : members) {
    if (u > v) break;
    const Node& n = g_.node(u);
    if (n.info().category == OpCategory::Reduce ||
        std::any_of(n.operands.begin(), n.operands.end(), [&](ValueId o) { return depends.count(o) > 0; }))
      depends.insert(u);
  }
  return depends.count(v) > 0;
}

void Lowering::copy_kernel(ValueId v, int32_t buffer, DType as, std::vector<bool> member) {
  const Shape& s = g_.type(v).shape;
  KernelBuilder b(*this, fmt::format("copy_{}", name(v)), s, std::vector<bool>(static_cast<size_t>(s.rank()), false),
                  std::move(member));
  Ref x = b.cast(b.value_at(g_, v, identity_map(s), kir::kNoRef), as);
  // Written as the identity over v's own shape.
  Ref off = b.constant(0);
  const auto strides = s.strides();
  for (int d = 0; d < s.rank(); ++d)
    if (s[d] != 1) off = b.add(off, b.mul(b.dim(d), strides[static_cast<size_t>(d)]));
  const int32_t param = b.param_for(buffer, name(v), TensorType{as, s}, true);
  b.add_store({param, off, x, kir::kNoRef});
  kir::Kernel k = b.finish();
  LaunchPlan::Step step;
  step.kernel = static_cast<int32_t>(plan_.kernels.size());
  step.bindings = b.bindings();
  step.scalar_bindings = b.scalar_bindings();
  plan_.kernels.push_back(std::move(k));
  plan_.steps.push_back(std::move(step));
}

bool Lowering::views_of_stored(ValueId o, DType t, const std::vector<bool>& member) {
  // Views down to a stored value only: building the load of anything else could add
  // buffers to the plan (a gather's data) that a copy of it would not use.
  if (g_.type(o).dtype != t) return false;
  while (stored(o) < 0) {
    const Node& n = g_.node(o);
    if (!n.info().is_view() || (n.kernel >= 0 && !member[o])) return false;
    o = n.operands[0];
  }
  return true;
}

std::optional<LaunchPlan::Gemm> Lowering::matmul_contraction(ValueId mm, const int32_t copied[2], int32_t c,
                                                             const std::vector<bool>& member, bool unfit[2],
                                                             bool as_kernel) {
  const Node& n = g_.node(mm);
  const DType t = compute_dtype(n.type.dtype);
  const Shape& cs = n.type.shape;
  const int r = cs.rank();
  const int64_t k = g_.type(n.operands[0]).shape.dims().back();
  Shape domain = cs;
  domain.push_back(k);
  std::vector<bool> reduced(static_cast<size_t>(r + 1), false);
  reduced.back() = true;
  KernelBuilder b(*this, g_.kernels()[static_cast<size_t>(n.kernel)].name, domain, reduced, member);
  Ref x[2];
  for (int i = 0; i < 2; ++i) {
    const ValueId o = n.operands[static_cast<size_t>(i)];
    const Shape& s = g_.type(o).shape;
    // Batch dims right-aligned with C's (one of one element broadcasts); then A's rows and
    // the depth, or the depth and B's columns.
    IndexMap p;
    for (int j = 0; j < s.rank() - 2; ++j) {
      const int d = j + (r - s.rank());
      p.push_back(s[j] == 1 ? IndexExpr::constant(0) : IndexExpr::dim(d, domain[d]));
    }
    p.push_back(i == 0 ? IndexExpr::dim(r - 2, domain[r - 2]) : IndexExpr::dim(r, k));
    p.push_back(i == 0 ? IndexExpr::dim(r, k) : IndexExpr::dim(r - 1, domain[r - 1]));
    x[i] = copied[i] >= 0 ? b.load_at(copied[i], name(o), TensorType{t, s}, p) : b.value_at(g_, o, p, kir::kNoRef);
  }
  if (as_kernel) {  // a reduction kernel reads its operands through any view
    b.store_contraction(x[0], x[1], c, name(mm), TensorType{t, cs});
    add_kernel(b);
    return std::nullopt;
  }
  const std::vector<std::optional<kir::Affine>> affine = kir::affine_analysis(b.kernel());
  for (int i = 0; i < 2; ++i) {
    const kir::Inst& load = b.kernel().insts[static_cast<size_t>(x[i])];
    unfit[i] = load.code != kir::Code::Load || load.args.size() != 1 || !affine[static_cast<size_t>(load.args[0])];
  }
  if (unfit[0] || unfit[1]) return std::nullopt;
  b.store_contraction(x[0], x[1], c, name(mm), TensorType{t, cs});
  const kir::Kernel contraction = b.finish();
  std::optional<LaunchPlan::Gemm> gemm = kir::gemm_of_contraction(contraction);
  if (!gemm) return std::nullopt;
  for (int32_t* param : {&gemm->a, &gemm->b, &gemm->c}) *param = b.bindings()[static_cast<size_t>(*param)];
  gemm->name = contraction.name;
  return gemm;
}

void Lowering::lower_matmul_region(int32_t k, ValueId mm) {
  const auto ki = static_cast<size_t>(k);
  const Node& n = g_.node(mm);
  // The GEMM multiplies in the result's compute type: a storage type's operands are
  // converted into buffers of it first, and its product is stored once in the storage
  // type after (rounded or wrapped, as the interpreter stores it: docs/ir.md 5.7).
  const DType t = compute_dtype(n.type.dtype);
  const bool conv = n.op == OpKind::Conv;
  // Operands are read where they lie when they are views of stored values of that type; any
  // other is computed into a buffer first (into its own, when it is an output of the region
  // too).
  std::vector<bool> member(g_.size(), false);
  for (ValueId v : index_.members[ki]) member[v] = v != mm;
  std::vector<bool> in_contraction = member;
  std::vector<ValueId> written;
  int32_t copied[2] = {-1, -1};
  auto compute_first = [&](size_t i) {
    const ValueId o = n.operands[i];
    copied[i] = new_buffer(TensorType{t, g_.type(o).shape});
    copy_kernel(o, copied[i], t, member);
  };
  for (size_t i = 0; i < 2; ++i) {
    const ValueId o = n.operands[i];
    const int32_t b = stored(o);
    if (b >= 0 && member[o] && g_.type(o).dtype == t && mp_.buffer_of[o] == b) {
      copy_kernel(o, b, t, member);
      written.push_back(o);
      in_contraction[o] = false;  // read back from its buffer
    } else if (conv ? g_.type(o).dtype != t || stored_in_layout(o) < 0 : !views_of_stored(o, t, in_contraction)) {
      compute_first(i);  // a conv gathers from a row-major buffer only
    }
  }
  int32_t stored_c = mp_.buffer_of[mm];
  if (stored_c < 0 && t == n.type.dtype) stored_c = product_in_output(k, mm);
  if (stored_c < 0) stored_c = new_buffer(n.type);
  const int32_t c = t == n.type.dtype ? stored_c : new_buffer(TensorType{t, n.type.shape});
  bool unfit[2] = {false, false};
  std::optional<LaunchPlan::Gemm> gemm;
  // A product of one column (a matrix-vector product), or of one row with a B of its own per
  // batch (a linear layer at batch 1), is a dot product per element: a reduction kernel,
  // which reads each operand once along the depth, where a GEMM's register tiles would be
  // all but one row or column padding. Rows of one over a B that every batch shares are the
  // rows of one GEMM ([197, 1, 768] @ [768, 2304] as ViT's exports write it): that stays.
  const Shape& out_shape = n.type.shape;
  const Shape& b_shape = g_.type(n.operands[1]).shape;
  const int64_t rows = out_shape[out_shape.rank() - 2], columns = out_shape[out_shape.rank() - 1];
  const int64_t batches = columns == 0 || rows == 0 ? 0 : out_shape.numel() / (rows * columns);
  const int64_t b_batches = b_shape.numel() == 0 ? 0 : b_shape.numel() / (b_shape[b_shape.rank() - 1] * b_shape[b_shape.rank() - 2]);
  const bool as_kernel = !conv && (columns == 1 || (rows == 1 && b_batches == batches));
  if (as_kernel) {
    matmul_contraction(mm, copied, c, in_contraction, unfit, /*as_kernel=*/true);
  } else if (conv) {
    auto buffer = [&](size_t i) { return copied[i] >= 0 ? copied[i] : stored_in_layout(n.operands[i]); };
    gemm = conv_gemm(mm, buffer(0), buffer(1), c);
  } else {
    gemm = matmul_contraction(mm, copied, c, in_contraction, unfit);
  }
  if (!gemm && !as_kernel) {  // a view that no strides describe: computed first, then it reads row-major
    for (size_t i = 0; i < 2; ++i)
      if (unfit[i]) compute_first(i);
    gemm = matmul_contraction(mm, copied, c, in_contraction, unfit);
  }
  if (!gemm && !as_kernel)
    throw Error(fmt::format("internal error: matmul %{} ({}) is not a contraction of its operands' buffers",
                            name(mm), n.type.str()));
  override_[mm] = stored_c;
  if (gemm) {
    LaunchPlan::Step step;
    step.gemm = std::move(*gemm);
    plan_.steps.push_back(std::move(step));
  }
  if (c != stored_c) {  // the product in its storage type: an epilogue the GEMM may fuse
    KernelBuilder b(*this, fmt::format("store_{}", name(mm)), n.type.shape,
                    std::vector<bool>(static_cast<size_t>(n.type.shape.rank()), false), {});
    const IndexMap p = identity_map(n.type.shape);
    const Ref x = b.cast(b.load_at(c, name(mm), TensorType{t, n.type.shape}, p), n.type.dtype);
    b.add_store({b.param_for(stored_c, name(mm), n.type, true), b.offset_of(p, n.type.shape), x, kir::kNoRef});
    add_kernel(b);
  }
  lower_epilogue(k, mm, member, written);
}

int32_t Lowering::product_in_output(int32_t k, ValueId mm) {
  // A product of its own buffer is written to memory once by the GEMM and once more as its
  // cache lines are evicted after the epilogue read them: ResNet-50's 1x1 convolution from
  // 64 to 256 channels over 56x56 spent a fifth of its time on its bias and relu so.
  const auto ki = static_cast<size_t>(k);
  const std::vector<ValueId>& outputs = index_.outputs[ki];
  if (outputs.size() != 1 || outputs[0] == mm) return -1;
  const ValueId out = outputs[0];
  if (!(g_.type(out) == g_.type(mm))) return -1;
  const int32_t home = mp_.buffer_of[out];
  if (home < 0) return -1;
  // Every member that reads the product, directly or not, is elementwise over its shape:
  // each element of the product is read only where its own result is written.
  std::vector<bool> reads_product(g_.size(), false);
  reads_product[mm] = true;
  for (ValueId v : index_.members[ki]) {
    if (v == mm) continue;
    const Node& n = g_.node(v);
    if (std::none_of(n.operands.begin(), n.operands.end(), [&](ValueId o) { return reads_product[o]; })) continue;
    if (n.info().category != OpCategory::Elementwise || n.type.shape != g_.type(mm).shape) return -1;
    reads_product[v] = true;
  }
  // Nothing the region reads lives there (an input the output is written over in place).
  for (ValueId r : index_.inputs[ki]) {
    ValueId root = r;
    while (mp_.buffer_of[root] < 0 && g_.node(root).kernel < 0 && g_.node(root).info().is_view() &&
           !g_.node(root).operands.empty())
      root = g_.node(root).operands[0];
    if (mp_.buffer_of[root] == home) return -1;
  }
  return home;
}

void Lowering::lower_epilogue(int32_t k, ValueId mm, const std::vector<bool>& member,
                              const std::vector<ValueId>& written) {
  const auto ki = static_cast<size_t>(k);
  // The epilogue, reading the product from memory.
  std::vector<ValueId> outputs;
  for (ValueId v : index_.outputs[ki])
    if (v != mm && std::find(written.begin(), written.end(), v) == written.end()) outputs.push_back(v);
  if (outputs.empty()) return;
  auto [domain, reduced] = region_domain({}, outputs);
  KernelBuilder b(*this, g_.kernels()[ki].name, domain, reduced, member);
  std::vector<ValueId> apart;
  for (ValueId v : outputs)
    if (!b.store(g_, v, mp_.buffer_of[v])) apart.push_back(v);
  // The product's columns: a matmul's last dim, a convolution's output positions. A row of
  // 14 positions (a 14x14 plane) is less than a 16-lane vector and would run lane by lane;
  // the plane's 196 fill 12 vectors.
  std::optional<int> columns_from;
  const Node& product = g_.node(mm);
  if (domain == product.type.shape && (product.op == OpKind::Matmul || product.op == OpKind::Conv))
    columns_from = product.op == OpKind::Conv ? std::min(2, domain.rank()) : domain.rank() - 1;
  if (!b.finish_empty()) add_kernel(b, columns_from);
  for (ValueId v : apart) copy_kernel(v, mp_.buffer_of[v], g_.type(v).dtype, member);
}

LaunchPlan::Attention::Operand Lowering::attention_operand(ValueId o, const Shape& batch,
                                                          const std::vector<bool>& member) {
  const Shape& s = g_.type(o).shape;
  const int r = s.rank(), nb = batch.rank();
  auto from_buffer = [&](int32_t buffer, const kir::Affine* at) {
    LaunchPlan::Attention::Operand x;
    x.buffer = buffer;
    const auto row_major = s.strides();
    auto stride = [&](int d) { return s[d] == 1 ? 0 : at ? at->stride[static_cast<size_t>(d)] : row_major[static_cast<size_t>(d)]; };
    x.offset = at ? at->base : 0;
    for (int j = 0; j < nb; ++j) {
      const int d = j - (nb - (r - 2));  // o's dim under batch dim j, right-aligned
      x.batch_stride.push_back(d < 0 ? 0 : stride(d));
    }
    x.row_stride = stride(r - 2);
    x.col_stride = stride(r - 1);
    return x;
  };
  if (views_of_stored(o, DType::F32, member)) {
    KernelBuilder b(*this, "attention_operand", s, std::vector<bool>(static_cast<size_t>(r), false), member);
    const Ref x = b.value_at(g_, o, identity_map(s), kir::kNoRef);
    const kir::Inst& load = b.kernel().insts[static_cast<size_t>(x)];
    if (load.code == kir::Code::Load && load.args.size() == 1) {
      const std::vector<std::optional<kir::Affine>> affine = kir::affine_analysis(b.kernel());
      if (const std::optional<kir::Affine>& at = affine[static_cast<size_t>(load.args[0])])
        return from_buffer(b.bindings()[static_cast<size_t>(load.buffer)], &*at);
    }
  }
  // A view no strides describe (a pad, a reshape of a transpose), or a value computed in
  // the region: into a buffer of its own, row-major.
  const int32_t copy = new_buffer(TensorType{DType::F32, s});
  copy_kernel(o, copy, DType::F32, member);
  return from_buffer(copy, nullptr);
}

void Lowering::lower_attention_region(int32_t k, ValueId a) {
  const auto ki = static_cast<size_t>(k);
  const Node& n = g_.node(a);
  std::vector<bool> member(g_.size(), false);
  for (ValueId v : index_.members[ki]) member[v] = v != a;
  LaunchPlan::Attention at;
  const Shape& out = n.type.shape;
  const int r = out.rank();
  at.batch = Shape(out.dims().first(static_cast<size_t>(r - 2)));
  at.rows = out[r - 2];
  at.width = out[r - 1];
  const Shape& ks = g_.type(n.operands[1]).shape;
  at.keys = ks[ks.rank() - 2];
  at.depth = ks[ks.rank() - 1];
  at.scale = n.attr("scale").scalar.as_double();
  at.masked_zero = n.attr("masked_zero").present;
  LaunchPlan::Attention::Operand* operands[] = {&at.q, &at.k, &at.v, &at.bias};
  for (size_t i = 0; i < n.operands.size(); ++i) *operands[i] = attention_operand(n.operands[i], at.batch, member);
  at.out = mp_.buffer_of[a] >= 0 ? mp_.buffer_of[a] : new_buffer(n.type);
  at.name = g_.kernels()[ki].name;
  override_[a] = at.out;
  LaunchPlan::Step step;
  step.attention = std::move(at);
  plan_.steps.push_back(std::move(step));
  lower_epilogue(k, a, member, {});
}

LaunchPlan::Gemm Lowering::conv_gemm(ValueId cv, int32_t x, int32_t w, int32_t c) {
  const Node& n = g_.node(cv);
  const ConvGeometry geo =
      conv_geometry(g_.type(n.operands[0]).shape, g_.type(n.operands[1]).shape, n.attrs).take();
  KILN_ASSERT(x >= 0 && w >= 0, "a conv's operands are in row-major buffers");
  LaunchPlan::Gemm gm;
  gm.dtype = compute_dtype(n.type.dtype);
  gm.a = w;
  gm.b = x;
  gm.c = c;
  const int64_t depth = geo.channels_per_group() * geo.window(), plane = geo.plane();
  gm.m = geo.out_channels_per_group();
  gm.n = geo.positions();
  gm.k = depth;
  // Batch dims [N] or [N, groups]: C is then [N, M, positions], the result's layout.
  gm.batch = Shape{geo.batch};
  gm.a_batch_stride = {0};
  gm.b_batch_stride = {geo.channels * plane};
  if (geo.groups > 1) {
    gm.batch.push_back(geo.groups);
    gm.a_batch_stride.push_back(gm.m * depth);
    gm.b_batch_stride.push_back(geo.channels_per_group() * plane);
  }
  gm.a_row_stride = depth;
  gm.a_col_stride = 1;
  bool plain = geo.window() == 1;  // B is x itself: [C/groups, positions], row-major
  for (int d = 0; d < geo.dims; ++d) {
    const auto dd = static_cast<size_t>(d);
    plain = plain && geo.strides[dd] == 1 && geo.low[dd] == 0 && geo.out[dd] == geo.in[dd];
  }
  if (plain) {
    gm.b_row_stride = plane;
    gm.b_col_stride = 1;
  } else {
    gm.im2col = geo;
  }
  gm.name = g_.kernels()[static_cast<size_t>(n.kernel)].name;
  return gm;
}

LaunchPlan Lowering::run() {
  index_ = g_.kernel_index();
  names_ = value_names(g_);
  for (size_t k = 0; k < g_.kernels().size(); ++k) lower_region(static_cast<int32_t>(k));
  // Outputs: a kernel's buffer, a parameter's, or a copy made for them.
  for (ValueId v : g_.outputs()) {
    const Node& n = g_.node(v);
    int32_t b = -1;
    if (n.op == OpKind::Input || n.kernel >= 0 || n.info().category == OpCategory::Matmul) b = stored(v);
    // A reshape of a value a kernel stored is its bytes in their order: that buffer is the
    // output (a bias's gradient summed with keepdim and returned as [C]), not a copy of it.
    ValueId source = v;
    while (g_.node(source).kernel < 0 && g_.node(source).op == OpKind::Reshape) source = g_.node(source).operands[0];
    if (b < 0 && source != v && g_.node(source).kernel >= 0 && g_.type(source).dtype == n.type.dtype) {
      const int32_t s = stored(source);
      if (s >= 0 && plan_.buffers[static_cast<size_t>(s)].kind == LaunchPlan::Buffer::Kind::Temp) b = s;
    }
    if (b < 0 || plan_.buffers[static_cast<size_t>(b)].kind == LaunchPlan::Buffer::Kind::Constant) {
      b = new_buffer(n.type);
      copy_kernel(v, b, n.type.dtype);
    }
    LaunchPlan::Buffer& buf = plan_.buffers[static_cast<size_t>(b)];
    if (buf.kind == LaunchPlan::Buffer::Kind::Temp) {
      buf.kind = LaunchPlan::Buffer::Kind::Output;
      buf.type = n.type;
    }
    plan_.outputs.push_back(b);
    plan_.output_types.push_back(n.type);
  }
  for (const auto& [value, input] : mp_.in_place) {
    const int32_t b = mp_.buffer_of[input];
    if (b >= 0 && plan_.buffers[static_cast<size_t>(b)].kind == LaunchPlan::Buffer::Kind::Param)
      plan_.overwritten_params.push_back(plan_.buffers[static_cast<size_t>(b)].index);
  }
  for (size_t b = 0; b < mp_.buffer_bytes.size(); ++b)
    if (plan_.buffers[b].kind == LaunchPlan::Buffer::Kind::Param && mp_.buffer_param[b] >= 0) {
      // A donated parameter's buffer reused for a later value is overwritten as well.
      for (size_t id = 0; id < g_.size(); ++id)
        if (mp_.buffer_of[id] == static_cast<int32_t>(b) && g_.node(static_cast<ValueId>(id)).op != OpKind::Input &&
            !(g_.node(static_cast<ValueId>(id)).kernel < 0 && g_.node(static_cast<ValueId>(id)).info().is_view())) {
          plan_.overwritten_params.push_back(mp_.buffer_param[b]);
          break;
        }
    }
  std::sort(plan_.overwritten_params.begin(), plan_.overwritten_params.end());
  plan_.overwritten_params.erase(std::unique(plan_.overwritten_params.begin(), plan_.overwritten_params.end()),
                                 plan_.overwritten_params.end());
  return std::move(plan_);
}

}  // namespace

namespace {

// `contraction @k0 over [30, 50, reduce 20]: a at 20*d0 + 1*d2; b at 1*d1 + 50*d2`: what a
// GEMM step computes, as the Kernel IR's access comments write a kernel's loads.
std::string gemm_contraction_str(const LaunchPlan::Gemm& g) {
  std::string domain;
  for (int j = 0; j < g.batch.rank(); ++j) domain += fmt::format("{}, ", g.batch[j]);
  kir::Affine a{g.a_offset, g.a_batch_stride}, b{g.b_offset, g.b_batch_stride};
  for (int64_t stride : {g.a_row_stride, int64_t{0}, g.a_col_stride}) a.stride.push_back(stride);
  for (int64_t stride : {int64_t{0}, g.b_col_stride, g.b_row_stride}) b.stride.push_back(stride);
  return fmt::format("contraction @{} over [{}{}, {}, reduce {}]: a at {}; b {}", g.name, domain, g.m, g.n, g.k,
                     kir::affine_str(a),
                     g.im2col ? fmt::format("the {} from {} + {} per batch", g.im2col->str(), g.b_offset,
                                            fmt::join(g.b_batch_stride, ", "))
                              : "at " + kir::affine_str(b));
}

}  // namespace

std::string LaunchPlan::str() const {
  std::string out;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const kir::Kernel& k = kernels[i];
    out += k.str();
    // What the shared analyses see: the offset of every access as strides per domain dim.
    const auto affine = kir::affine_analysis(k);
    std::string access;
    auto offset = [&](kir::Ref r) {
      const auto& a = affine[static_cast<size_t>(r)];
      return a ? kir::affine_str(*a) : std::string("non-affine");
    };
    for (size_t j = 0; j < k.insts.size(); ++j)
      if (k.insts[j].code == kir::Code::Load)
        access += fmt::format("{}load #{} at {}", access.empty() ? "" : "; ", k.insts[j].buffer, offset(k.insts[j].args[0]));
    for (const kir::Store& st : k.stores)
      access += fmt::format("{}store #{} at {}", access.empty() ? "" : "; ", st.buffer, offset(st.offset));
    if (!access.empty()) out += "  // " + access + "\n";
    if (i < schedules.size()) out += "  // " + schedules[i].str() + "\n";
  }
  out += "launch list:\n";
  for (const Step& s : steps) {
    if (s.kernel >= 0) {
      std::string binds;
      for (size_t i = 0; i < s.bindings.size(); ++i) binds += fmt::format("{}#{}=buf{}", i ? ", " : "", i, s.bindings[i]);
      for (size_t i = 0; i < s.scalar_bindings.size(); ++i) binds += fmt::format("{}${}=slot{}", binds.empty() ? "" : ", ", i, s.scalar_bindings[i]);
      for (size_t i = 0; i < s.fixed_scalars.size(); ++i)
        binds += fmt::format("{}${}={}", binds.empty() ? "" : ", ", s.scalar_bindings.size() + i,
                             format_scalar(s.fixed_scalars[i], s.fixed_scalars[i].is_int() ? DType::I64 : DType::F64));
      out += fmt::format("  @{}({})\n", kernels[static_cast<size_t>(s.kernel)].name, binds);
    } else if (s.attention) {
      const Attention& a = *s.attention;
      out += fmt::format("  attention buf{} = softmax({} * buf{} x buf{}^T{}) x buf{} : f32 [{}x{}x{}x{}] batch {}{}\n",
                         a.out, static_cast<float>(a.scale), a.q.buffer, a.k.buffer,
                         a.bias.buffer >= 0 ? fmt::format(" + buf{}", a.bias.buffer) : "", a.v.buffer, a.rows, a.keys,
                         a.depth, a.width, a.batch.str(), a.masked_zero ? ", masked rows zero" : "");
      auto operand = [](const char* what, const Attention::Operand& x) {
        return fmt::format("{} at {} + [{}] + i*{} + j*{}", what, x.offset, fmt::join(x.batch_stride, ", "), x.row_stride,
                           x.col_stride);
      };
      out += "    // " + operand("q", a.q) + "; " + operand("k", a.k) + "; " + operand("v", a.v);
      if (a.bias.buffer >= 0) out += "; " + operand("bias", a.bias);
      out += "\n    // " + a.schedule.str() + "\n";
    } else {
      const Gemm& g = s.gemm;
      out += fmt::format("  gemm buf{} = buf{} x buf{} : {} [{}x{}x{}] batch {}\n", g.c, g.a, g.b, dtype_name(g.dtype), g.m,
                         g.n, g.k, g.batch.str());
      out += "    // " + gemm_contraction_str(g) + "\n";
      out += "    // " + s.gemm.schedule.str() + "\n";
    }
  }
  for (size_t b = 0; b < buffers.size(); ++b) {
    static constexpr const char* kKinds[] = {"param", "temp", "output", "constant"};
    out += fmt::format("  buf{}: {} {} bytes{}\n", b, kKinds[static_cast<int>(buffers[b].kind)], buffers[b].bytes,
                       buffers[b].kind == Buffer::Kind::Param ? fmt::format(" (param {})", buffers[b].index) : "");
  }
  return out;
}

LaunchPlan lower_to_kernels(const Graph& fused, const MemoryPlan& memory) { return Lowering(fused, memory).run(); }

namespace {

// One past the farthest element an operand of `rows` x `cols` matrices reaches.
int64_t operand_extent(const LaunchPlan::Gemm& g, int64_t offset, const std::vector<int64_t>& batch_strides,
                       int64_t rows, int64_t row_stride, int64_t cols, int64_t col_stride) {
  if (g.batch.numel() == 0 || rows == 0 || cols == 0) return 0;
  int64_t farthest = offset + std::max<int64_t>(0, (rows - 1) * row_stride) +
                     std::max<int64_t>(0, (cols - 1) * col_stride);
  for (size_t d = 0; d < batch_strides.size(); ++d)
    farthest += std::max<int64_t>(0, (g.batch[static_cast<int>(d)] - 1) * batch_strides[d]);
  return farthest + 1;
}

}  // namespace

int64_t LaunchPlan::Attention::Operand::extent(const Shape& batch, int64_t rows, int64_t cols) const {
  if (buffer < 0 || batch.numel() == 0 || rows == 0 || cols == 0) return 0;
  int64_t farthest = offset + std::max<int64_t>(0, (rows - 1) * row_stride) + std::max<int64_t>(0, (cols - 1) * col_stride);
  for (size_t d = 0; d < batch_stride.size(); ++d)
    farthest += std::max<int64_t>(0, (batch[static_cast<int>(d)] - 1) * batch_stride[d]);
  return farthest + 1;
}

std::array<int64_t, 4> LaunchPlan::Attention::batch_offsets(int64_t bi) const {
  std::array<int64_t, 4> off = {q.offset, k.offset, v.offset, bias.offset};
  const Operand* ops[] = {&q, &k, &v, &bias};
  for (int j = batch.rank() - 1; j >= 0; --j) {
    const int64_t idx = bi % batch[j];
    bi /= batch[j];
    for (size_t o = 0; o < 4; ++o)
      if (!ops[o]->batch_stride.empty()) off[o] += idx * ops[o]->batch_stride[static_cast<size_t>(j)];
  }
  return off;
}

int64_t LaunchPlan::Gemm::a_extent() const {
  return operand_extent(*this, a_offset, a_batch_stride, m, a_row_stride, k, a_col_stride);
}

int64_t LaunchPlan::Gemm::b_extent() const {
  if (im2col) {  // every channel plane of the group, read or not
    if (batch.numel() == 0 || k == 0 || n == 0) return 0;
    return operand_extent(*this, b_offset, b_batch_stride, k / im2col->window(), im2col->plane(), 1, 0) - 1 +
           im2col->plane();
  }
  return operand_extent(*this, b_offset, b_batch_stride, k, b_row_stride, n, b_col_stride);
}

int64_t gemm_epilogue_iterations_per_row(const LaunchPlan& plan, size_t i) {
  if (i + 1 >= plan.steps.size() || !plan.steps[i].is_gemm() || plan.steps[i + 1].kernel < 0) return 0;
  const LaunchPlan::Gemm& g = plan.steps[i].gemm;
  const LaunchPlan::Step& step = plan.steps[i + 1];
  const auto ki = static_cast<size_t>(step.kernel);
  if (ki >= plan.schedules.size()) return 0;
  const kir::Kernel& k = plan.kernels[ki];
  const kir::Schedule& s = plan.schedules[ki];
  // A custom kernel's source goes once at the top of a C-family program, where GEMM programs
  // have no place for it: such an epilogue runs as its own kernel, on every backend alike.
  if (!k.customs.empty()) return 0;
  Shape c = g.batch;
  c.push_back(g.m);
  c.push_back(g.n);
  // The walk below is over the kernel's own rows, not rows merged into planes.
  if (s.lanes_reduce || s.cpu.merge_rows || std::find(k.reduced.begin(), k.reduced.end(), true) != k.reduced.end())
    return 0;
  // The epilogue's domain is the product's, or the same elements with the columns split
  // into trailing dims (a conv's [N, M, o1..on]): a row of the product is then the
  // iterations over those dims.
  int64_t split_columns = 1;
  int lead = k.domain.rank();
  while (lead > 0 && split_columns < g.n) split_columns *= k.domain[--lead];
  if (!(k.domain == c) && (split_columns != g.n || k.domain.numel() != c.numel() || lead == k.domain.rank()))
    return 0;
  if (!(k.domain == c)) c = k.domain;
  const int64_t last = c.rank() > 0 ? c[c.rank() - 1] : 0;
  const int64_t per_row = g.n == 0 || last == 0 ? 0 : g.n / last * ((last + s.tile - 1) / s.tile);
  if (per_row == 0 || s.iterations != c.numel() / g.n * per_row) return 0;
  // The product's buffer at the iteration's own position only (row-major over the domain),
  // and no operand of the GEMM written: other blocks may still be reading them.
  const auto affine = kir::affine_analysis(k);
  const auto identity = c.strides();
  auto at_own_position = [&](kir::Ref offset) {
    const auto& a = affine[static_cast<size_t>(offset)];
    if (!a || a->base != 0) return false;
    for (int d = 0; d < c.rank(); ++d)
      if (c[d] != 1 && a->stride[static_cast<size_t>(d)] != identity[static_cast<size_t>(d)]) return false;
    return true;
  };
  auto plan_buffer = [&](int32_t param) { return step.bindings[static_cast<size_t>(param)]; };
  for (const kir::Inst& in : k.insts)
    if (in.code == kir::Code::Load && plan_buffer(in.buffer) == g.c && !at_own_position(in.args[0])) return 0;
  for (const kir::Store& st : k.stores) {
    const int32_t b = plan_buffer(st.buffer);
    if (b == g.a || b == g.b) return 0;
    if (b == g.c && !at_own_position(st.offset)) return 0;
  }
  return per_row;
}

int64_t gemm_epilogue_columns_per_iteration(const LaunchPlan& plan, size_t i) {
  if (gemm_epilogue_iterations_per_row(plan, i) <= 0) return 0;
  const kir::Kernel& k = plan.kernels[static_cast<size_t>(plan.steps[i + 1].kernel)];
  const kir::Schedule& s = plan.schedules[static_cast<size_t>(plan.steps[i + 1].kernel)];
  const int64_t last = k.domain[k.domain.rank() - 1], n = plan.steps[i].gemm.n;
  return s.tile > 0 && last % s.tile == 0 ? s.tile : n;
}

bool gemm_product_read_after_epilogue(const LaunchPlan& plan, size_t i) {
  const int32_t c = plan.steps[i].gemm.c;
  // A product written where the epilogue writes its result (Lowering::product_in_output)
  // is replaced there: what reads that buffer later reads the result.
  if (i + 1 < plan.steps.size() && plan.steps[i + 1].kernel >= 0) {
    const LaunchPlan::Step& epilogue = plan.steps[i + 1];
    const kir::Kernel& e = plan.kernels[static_cast<size_t>(epilogue.kernel)];
    for (size_t p = 0; p < epilogue.bindings.size(); ++p)
      if (epilogue.bindings[p] == c && e.buffers[p].written) return false;
  }
  if (plan.buffers[static_cast<size_t>(c)].kind != LaunchPlan::Buffer::Kind::Temp) return true;
  for (size_t j = i + 2; j < plan.steps.size(); ++j) {
    const LaunchPlan::Step& step = plan.steps[j];
    if (step.attention) {
      const LaunchPlan::Attention& a = *step.attention;
      if (a.q.buffer == c || a.k.buffer == c || a.v.buffer == c || a.bias.buffer == c || a.out == c) return true;
    } else if (step.kernel < 0) {
      if (step.gemm.a == c || step.gemm.b == c || step.gemm.c == c) return true;
    } else if (std::find(step.bindings.begin(), step.bindings.end(), c) != step.bindings.end()) {
      return true;
    }
  }
  return false;
}

}  // namespace kiln
