// codegen/c_emitter.cpp - Kernel IR -> C-family source, through a dialect (c_dialect.h).
//
// The walk follows the schedule's GPU geometry:
//   serial: a work-item per kept point (`elements_per_item` of them, grid-stride, when > 1);
//     each reduction stage loops over the reduced dims with one accumulator per reduction;
//   workgroup-tree (the last dim reduced): a work-group per kept point; its work-items
//     stride along the reduced dims, then combine their accumulators in a tree in local
//     memory, and every work-item reads the result.
// Stores that depend on reduced dims run in a last loop over them; the others once per kept
// point (by work-item 0 of a group in the tree walk).
//
// Every instruction becomes one variable, emitted in the outermost scope where the dims it
// depends on are defined: values of the kept dims are computed once per point, not once per
// element of a row, and constants once per work-item.
//
// Rounding: f32 division and square roots are the language's where the device rounds them
// correctly (Capabilities::exact_f32_divide_sqrt). Otherwise they, and the libm functions
// outside the VectorMath trait (sin, cos, pow), are computed in double and rounded once when
// the device has doubles and the language the double function (GLSL has no double exp, sin,
// cos or pow), as the interpreter computes them, and so is sigmoid (its f32 exp overflows
// where the result is a subnormal);
// exp, log, tanh and erf use the device's f32 versions (the differential oracle compares them
// with a tolerance), or the dialect's own where the language's are too loose (GLSL: kiln_exp...,
// codegen/glsl_dialect.cpp) or too slow (OpenCL: kiln_exp, kiln_tanh). f32 sums and products
// accumulate in double when the device has it, for the interpreter's range.
#include "c_dialect.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <span>

#include <fmt/format.h>

#include "kiln/codegen/rows_at_launch.h"
#include "kiln/ir/scalar_semantics.h"
#include "kiln/support/error.h"

namespace kiln::kir {
namespace {

class CEmitter {
 public:
  CEmitter(const Kernel& k, const Schedule& s, const Capabilities& caps, const CDialect& d)
      : k_(k), s_(s), d_(d), fp64_(caps.fp64), exact_divide_sqrt_(caps.exact_f32_divide_sqrt),
        subgroup_size_(caps.subgroup_size), buffer_alignment_(caps.buffer_alignment), deps_(dim_dependence(k)),
        stage_(reduction_stage(k)) {
    for (int i = 0; i < k.domain.rank(); ++i) {
      const uint64_t bit = uint64_t{1} << i;
      if (k.reduced[static_cast<size_t>(i)]) {
        reduced_mask_ |= bit;
        reduced_dims_.push_back(i);
        reduced_points_ *= k.domain[i];
      } else {
        kept_dims_.push_back(i);
        kept_points_ *= k.domain[i];
      }
    }
    for (const Inst& in : k.insts)
      if (in.code == Code::Reduce) stages_ = std::max(stages_, stage_[static_cast<size_t>(&in - k.insts.data())]);
    const WorkItemSchedule& w = s.work_items;
    group_per_row_ = w.reduction != ReductionStrategy::Serial && s.lanes_reduce && w.local_size > 1;
    subgroups_ = group_per_row_ && w.reduction == ReductionStrategy::Subgroup;
    KILN_ASSERT(!subgroups_ || (caps.subgroup_size > 1 && w.local_size % caps.subgroup_size == 0),
                "a subgroup reduction in work-groups of whole subgroups");
    uses_double_ = std::any_of(k.insts.begin(), k.insts.end(), [](const Inst& in) { return in.type == DType::F64; }) ||
                   std::any_of(k.customs.begin(), k.customs.end(), [](const auto& c) {
                     return c->source.find("double") != std::string::npos;
                   });
    if (s.work_items.index_bits == 32) {
      KILN_ASSERT(index_fits_32(k), "a 32-bit index schedule for a kernel whose positions need 64 bits");
      idx_ = DType::I32;
      index_ = index_instructions(k);
    } else {
      index_.assign(k.insts.size(), false);
    }
    flat_.assign(k.insts.size(), std::nullopt);
    affine_ = affine_analysis(k);
    if (s.vector_width > 1 && k.domain.rank() > 0) {
      lanes_ = s.vector_width;
      lane_dim_ = k.domain.rank() - 1;
      lane_bit_ = uint64_t{1} << lane_dim_;
      lanes_reduced_ = k.reduced[static_cast<size_t>(lane_dim_)];
      KILN_ASSERT(k.domain[lane_dim_] % lanes_ == 0 && !k.in_order,
                  "a work-item's lanes divide the last dim, and an in-order walk has none");
      vectors_ = d.vector_values() && c_lanes_as_vectors(k, lanes_);
    }
    // A row per work-item of vector lanes walks it with `accumulators` independent chains of
    // them (kir::settle_row_walk chose as many as divide the row): a vector max's chain of ~5
    // dependent instructions per step left W3's first pass latency-bound on PoCL.
    if (vectors_ && lanes_reduced_ && !group_per_row_) {
      chains_ = std::max(1, s.accumulators);
      KILN_ASSERT(reduced_points_ % (lanes_ * chains_) == 0, "accumulator chains that divide the row (settle_row_walk)");
    }
    f32_sums_ =
        vectors_ && lanes_reduced_ && !group_per_row_ && fp64_ && reduced_points_ / (lanes_ * chains_) <= s.f32_run;
  }

  /// The entry point's text; the helpers it calls are added to `helpers`, and whether it
  /// uses doubles is returned in `doubles`.
  std::string emit(std::set<std::string>& helpers, bool& doubles);
  /// flat_ for emit()'s walk (see flat_).
  std::vector<std::optional<std::string>> flat_offsets() const;
  /// The statements of one point with every dim defined by the caller (emit_c_point).
  std::string emit_point(std::set<std::string>& helpers, int indent, int replaced_buffer, std::string_view replacement);

 private:
  struct Scope {
    Scope* parent = nullptr;
    uint64_t dims = 0;  // the domain dims defined here
    int indent = 1;
    std::string text;
    std::vector<uint8_t> has;  // per instruction: a variable in this scope
    // A branch's body: what it computes stays inside, where only the work-items taking the
    // branch compute it (a horizontal kernel's part), even what depends on no dim.
    bool branch = false;
  };
  Scope child(Scope& parent, uint64_t dims) {
    Scope s;
    s.parent = &parent;
    s.dims = dims;
    s.indent = parent.indent + 1;
    s.has.assign(k_.insts.size(), 0);
    return s;
  }
  static void line(Scope& s, std::string_view text) {
    s.text.append(static_cast<size_t>(s.indent) * 2, ' ');
    s.text += text;
    s.text += '\n';
  }
  static bool available(const Scope& s, Ref r) {
    for (const Scope* p = &s; p; p = p->parent)
      if (p->has[static_cast<size_t>(r)]) return true;
    return false;
  }
  void ensure(Scope& s, Ref r);
  std::string expr(Ref r);
  std::string op_expr(const Inst& in);
  std::string cast_expr(std::string_view x, DType from, DType to);
  std::string wrap(char op, std::string_view a, std::string_view b, DType t);

  // Reductions.
  DType acc_type(const Inst& r) const;
  std::string from_memory(std::string x, DType t);
  std::string to_memory(std::string x, DType t);
  DType arg_value_type(const Inst& r) const {  // what an arg reduction compares
    const DType t = k_.insts[static_cast<size_t>(r.args[0])].type;
    return t == DType::Bool ? DType::I32 : t;
  }
  std::string identity(const Inst& r) const;
  std::string combine(const Inst& r, std::string_view acc, std::string_view x);
  void emit_stage(Scope& point, int stage);
  // Case A's per-lane states of reductions `reds` merged into one state each (a<r>).
  void fold_lanes(Scope& point, const std::vector<Ref>& reds);
  void emit_stores(Scope& point);
  // The loop over a row's reduced points (by `chains` steps at a time, where more than one).
  std::string reduced_loop_head(std::string_view var, int chains = 1) const;
  std::string reduced_loop_tail() const { return group_per_row_ ? "}}" : "}"; }
  // The text of one step of a row's pass in `point`'s loop over the reduced dims: reductions
  // `reds` take their arguments (into chain_'s accumulators where chain_ >= 0, whose block
  // defines the step's `r`).
  std::string row_step(Scope& point, const std::vector<Ref>& reds, int depth);
  // The f64 pass again over the row for f32 sums (narrow_sum) that came out not finite.
  void resum_overflowed(Scope& point, const std::vector<Ref>& reds);
  // Each row accumulator's chains combined into its first, in chain order.
  void fold_chains(Scope& point, const std::vector<Ref>& reds);
  // A work-group's partial states of reductions `reds` combined into every work-item's.
  void combine_in_tree(Scope& point, const std::vector<Ref>& reds);
  void combine_in_subgroups(Scope& point, const std::vector<Ref>& reds);
  // Element `at` of reduction r's local array (`suffix`: v and p for an arg reduction's
  // value and position).
  std::string slot(Ref r, std::string_view suffix, std::string_view at) const {
    return d_.subscript(fmt::format("t{}{}", r, suffix), at);
  }
  // Local arrays of `slots` states for reductions `reds`, and this work-item's states
  // written to element `at` (each line after `indent`).
  void stash_states(Scope& point, const std::vector<Ref>& reds, int64_t slots, std::string_view at, std::string_view indent);
  // The statement that merges state `b` of reduction `r` into state `a` (for an arg
  // reduction, `a` and `b` name a value; `ap` and `bp` its position).
  std::string merge(const Inst& r, std::string_view a, std::string_view ap, std::string_view b, std::string_view bp);
  void define_dims(Scope& s, const std::vector<int>& dims, std::string_view flat);
  std::vector<Ref> reductions_of(int stage) const {
    std::vector<Ref> out;
    for (size_t i = 0; i < k_.insts.size(); ++i)
      if (k_.insts[i].code == Code::Reduce && stage_[i] == stage) out.push_back(static_cast<Ref>(i));
    return out;
  }
  bool is_arg(const Inst& r) const { return op_info(r.op).has(trait::ArgReduce); }
  bool is_replaced(const Inst& in) const { return in.code == Code::Load && in.buffer == replaced_buffer_; }
  // The instructions `in`'s expression reads: none for a replaced load (its offset is not
  // needed) or a value in the row cache.
  std::span<const Ref> reads(const Inst& in) const {
    const bool from_cache = !cache_filled_.empty() && cache_filled_[static_cast<size_t>(&in - k_.insts.data())];
    return is_replaced(in) || from_cache ? std::span<const Ref>() : std::span<const Ref>(in.args);
  }

  const Kernel& k_;
  const Schedule& s_;
  const CDialect& d_;
  bool fp64_;
  bool exact_divide_sqrt_;  // Capabilities::exact_f32_divide_sqrt
  int subgroup_size_;  // Capabilities::subgroup_size
  int buffer_alignment_;  // Capabilities::buffer_alignment
  // Positions (index_instructions) and the walk's counters are computed in idx_: i64, or
  // i32 where the schedule says so (index_fits_32 proved it exact).
  DType idx_ = DType::I64;
  std::vector<bool> index_;
  /// Per instruction: when its value is the walk's flat point index `it` plus terms that
  /// do not vary across work-items (a constant, and multiples of the reduced dims: the
  /// offset of a buffer laid out as the kept dims, or with the reduced dims before them),
  /// that value's text; emitted as such (emit() only, where `it` is defined), so that a
  /// compiler sees consecutive work-items read consecutive elements: through it / n and
  /// it % n, PoCL gathers instead of loading a vector (W2 on PoCL: 20.3 -> 9.5 ms).
  std::vector<std::optional<std::string>> flat_;
  std::vector<std::optional<Affine>> affine_;  // affine_analysis(k_)

  // Lanes (Schedule::vector_width > 1): each work-item computes `lanes_` consecutive points
  // of the last dim, lane by lane in scalar code, reading a buffer that those points read
  // contiguously with one vector load and writing one contiguously with one vector store
  // where the dialect has them. Case A (the last dim reduced): the row loop steps by
  // `lanes_`, with an accumulator per lane folded after it; case B (kept): a work-item's
  // `lanes_` kept points. A value that depends on the last dim is one variable per lane
  // (`v7_2`); the others are shared. Where the dialect has vector values and the kernel
  // allows them (c_lanes_as_vectors), such a value is one vector variable instead (`v7`, a
  // float16), and a position that varies along the lanes is lane 0's, a scalar.
  int lanes_ = 1;
  int lane_dim_ = -1;
  uint64_t lane_bit_ = 0;
  bool lanes_reduced_ = false;  // case A
  bool vectors_ = false;        // lanes held as vectors
  bool vec_ = false;            // the expression being written is a vector of lanes
  int chains_ = 1;              // a row's accumulator chains: `a6l_c2` takes every chains_-th step
  int chain_ = -1;              // the chain whose accumulators are being written (-1: none)
  // A row per work-item of vector lanes whose accumulator lanes each add at most
  // Schedule::f32_run values sums f32 in f32, as the cpu backend does (a convert and an f64
  // add per element cost W3's second pass a tenth of its time on PoCL); a row whose sum is
  // not finite is summed again in f64 (accumulators named `a9w`: wide_), for the range the
  // IR promises.
  bool f32_sums_ = false;
  std::string wide_;
  bool narrow_sum(const Inst& r) const { return f32_sums_ && r.op == OpKind::ReduceSum && r.type == DType::F32; }
  int lane_ = 0;                // the lane whose expressions are being written
  bool per_lane(Ref r) const { return (deps_[static_cast<size_t>(r)] & lane_bit_) != 0; }
  // Reduction r keeps one accumulator per lane: along a row of lanes, or per kept lane.
  bool lane_accumulators(Ref r) const { return lanes_ > 1 && (lanes_reduced_ || per_lane(r)); }
  /// The variable holding instruction r's value in the current lane.
  std::string v(Ref r) const {
    return per_lane(r) && !vectors_ ? fmt::format("v{}_{}", r, lane_) : fmt::format("v{}", r);
  }
  /// Whether r's value is a vector of lanes (vectors_): the float values that vary along
  /// them (the integers that do are positions, lane 0's).
  bool vector_value(Ref r) const { return vectors_ && per_lane(r) && is_float(k_.insts[static_cast<size_t>(r)].type); }
  /// `x`, of the expression's shape (a vector where vec_), converted to `t`.
  std::string convert_to(std::string_view x, DType t) const {
    return vec_ ? d_.vector_convert(x, t, lanes_) : d_.convert(x, d_.type(t));
  }
  /// The helper (kiln_<name>) computing IEEE 754's maximum or minimum of float type `t` in the
  /// expression's shape: max_f32, or max_f32x16 on vectors of 16.
  std::string min_max_helper(bool max, DType t) const {
    return fmt::format("{}_{}{}", max ? "max" : "min", dtype_name(t), vec_ ? fmt::format("x{}", lanes_) : "");
  }
  /// The type of a value of `t` in the expression's shape.
  std::string value_type(DType t) const { return vec_ ? d_.vector_type(t, lanes_) : d_.type(t); }
  /// Accumulator variable of reduction r (`suffix`: v or p for an arg reduction) in the
  /// current lane.
  std::string acc(Ref r, std::string_view suffix = "") const {
    if (!lane_accumulators(r)) return fmt::format("a{}{}{}", r, wide_, suffix);
    if (chain_ >= 0) return fmt::format("a{}{}{}l_c{}", r, wide_, suffix, chain_);
    return vectors_ ? fmt::format("a{}{}{}l", r, wide_, suffix) : fmt::format("a{}{}{}_{}", r, wide_, suffix, lane_);
  }
  // Whether `offset` (a load's or a store's) addresses `lanes_` consecutive elements for the
  // lanes: it steps by one along the last dim. One vector access where the dialect has it.
  bool contiguous_in_lanes(Ref offset) const {
    const std::optional<Affine>& a = affine_[static_cast<size_t>(offset)];
    return lanes_ > 1 && a && a->stride[static_cast<size_t>(lane_dim_)] == 1;
  }
  // Whether that vector access, of elements of `memory`, is aligned to its size: lane 0's
  // offset is a multiple of the lanes (every work-item's lanes start at one along the last
  // dim, which they divide), and the device aligns buffers to at least that size.
  bool aligned_in_lanes(Ref offset, DType memory) const {
    if (!contiguous_in_lanes(offset) || lanes_ * static_cast<int64_t>(dtype_size(memory)) > buffer_alignment_)
      return false;
    const Affine& a = *affine_[static_cast<size_t>(offset)];
    for (size_t d = 0; d < a.stride.size(); ++d)
      if (static_cast<int>(d) != lane_dim_ && a.stride[d] % lanes_ != 0) return false;
    return a.base % lanes_ == 0;
  }
  // Runs `body` once per lane, lane_ set (once, lane 0, when `lanes` is false or the lanes
  // are one vector).
  template <class F>
  void for_lanes(bool lanes, F&& body) {
    for (lane_ = 0; lane_ < (lanes && !vectors_ ? lanes_ : 1); ++lane_) body();
    lane_ = 0;
  }
  // Runs `body` once per accumulator chain, chain_ set (once, chain_ -1, with one chain).
  template <class F>
  void for_chains(F&& body) {
    if (chains_ == 1) return body();
    for (chain_ = 0; chain_ < chains_; ++chain_) body();
    chain_ = -1;
  }
  std::string idx_type() const { return d_.type(idx_); }
  std::string idx_literal(int64_t v) const { return d_.int_literal(v, idx_); }
  // Operand `a` of a position in the position type: converted where other uses keep it i64
  // (exact: index_fits_32 bounds its values too).
  std::string position(Ref a) const {
    return index_[static_cast<size_t>(a)] || idx_ == DType::I64 ? v(a) : d_.convert(v(a), idx_type());
  }
  std::vector<uint64_t> deps_;
  std::vector<int> stage_;
  int stages_ = 0;
  uint64_t reduced_mask_ = 0;
  std::vector<int> reduced_dims_, kept_dims_;
  int64_t reduced_points_ = 1, kept_points_ = 1;
  // A work-group per row (Schedule::reduction workgroup-tree or subgroup): its work-items
  // stride along the row, then combine their states.
  bool group_per_row_ = false;
  bool subgroups_ = false;  // ...through subgroup shuffles, else in a local-memory tree
  bool uses_double_ = false;
  std::set<std::string> helpers_;  // helper functions the body calls
  int replaced_buffer_ = -1;       // emit_point: loads of this buffer are `replacement_`
  std::string replacement_;
  std::string locals_;             // local-memory arrays
  bool part_branches_ = false;     // emit(): a horizontal kernel's parts each in a branch
  // The row cache (kir::row_cached_values; a row per work-item only): per instruction,
  // whether its value is kept in private array c<r> indexed by the row position `r`, and
  // whether a finished pass has filled it (later passes read it there). Values a pass
  // writes to their arrays wait in cache_pending_ until that pass ends.
  std::vector<uint8_t> cached_, cache_filled_;
  std::vector<Ref> cache_pending_;
  // The statement(s) moving value x between its registers and its row-cache array.
  std::string cache_access(Ref x, bool store);
  // Load `in`'s lanes from its buffer in one vector access.
  std::string buffer_vector_load(const Inst& in) const;
};

// ---------------------------------------------------------------------------------------
// Instructions

void CEmitter::ensure(Scope& s, Ref r) {
  if (available(s, r)) return;
  // Arguments first, deepest first, without recursion (fused chains are deep DAGs).
  std::vector<std::pair<Ref, bool>> todo{{r, false}};
  while (!todo.empty()) {
    auto [x, expanded] = todo.back();
    todo.pop_back();
    if (available(s, x)) continue;
    const Inst& in = k_.insts[static_cast<size_t>(x)];
    KILN_ASSERT(in.code != Code::Reduce, "a reduction's value is read after its stage");
    if (!expanded) {
      todo.push_back({x, true});
      for (Ref a : reads(in))
        if (!available(s, a)) todo.push_back({a, false});
      continue;
    }
    // The outermost scope that defines every dim the value depends on and holds its
    // arguments (a reduction's result is defined where its stage ends).
    Scope* at = &s;
    auto fits = [&](const Scope& p) {
      return (deps_[static_cast<size_t>(x)] & ~p.dims) == 0 &&
             std::ranges::all_of(reads(in), [&](Ref a) { return available(p, a); });
    };
    while (at->parent && !at->branch && fits(*at->parent)) at = at->parent;
    const std::string type = index_[static_cast<size_t>(x)] ? idx_type()
                             : vector_value(x)             ? d_.vector_type(in.type, lanes_)
                                                           : d_.type(in.type);
    const bool from_cache = !cache_filled_.empty() && cache_filled_[static_cast<size_t>(x)];
    if (from_cache) {
      line(*at, cache_access(x, false));
      at->has[static_cast<size_t>(x)] = 1;
      continue;
    }
    if (vector_value(x)) {  // one vector of lanes: a vector load, or the expression on vectors
      vec_ = true;
      const std::string value = in.code == Code::Load ? buffer_vector_load(in) : expr(x);
      vec_ = false;
      line(*at, fmt::format("{}{} {} = {};", d_.let(), type, v(x), value));
    } else {
      // The lanes' elements of a buffer they read contiguously: one vector load, then a lane each.
      const DType memory = in.code == Code::Load ? k_.buffers[static_cast<size_t>(in.buffer)].type.dtype : DType::F32;
      const bool vector_load = in.code == Code::Load && in.args.size() == 1 && per_lane(x) && !is_replaced(in) &&
                               contiguous_in_lanes(in.args[0]) && !d_.memory_vector_type(memory, lanes_).empty();
      if (vector_load)
        line(*at,
             fmt::format("{}{} l{} = {};", d_.let(), d_.memory_vector_type(memory, lanes_), x, buffer_vector_load(in)));
      for_lanes(per_lane(x), [&] {
        const std::string value =
            vector_load ? from_memory(d_.vector_lane(fmt::format("l{}", x), lane_), memory) : expr(x);
        line(*at, fmt::format("{}{} {} = {};", d_.let(), type, v(x), value));
      });
    }
    at->has[static_cast<size_t>(x)] = 1;
    if (!cached_.empty() && cached_[static_cast<size_t>(x)]) {  // kept for the row's later passes
      line(*at, cache_access(x, true));
      cache_pending_.push_back(x);
    }
  }
}

std::string CEmitter::buffer_vector_load(const Inst& in) const {
  const DType memory = k_.buffers[static_cast<size_t>(in.buffer)].type.dtype;
  return d_.buffer_vector_load(in.buffer, memory, v(in.args[0]), lanes_, aligned_in_lanes(in.args[0], memory));
}

std::string CEmitter::cache_access(Ref x, bool store) {
  const Inst& in = k_.insts[static_cast<size_t>(x)];
  const std::string array = fmt::format("c{}", x);
  if (vector_value(x)) {  // an array of vectors, the row's r-th point in element r / lanes
    const std::string at = d_.subscript(array, fmt::format("r / {}", idx_literal(lanes_)));
    if (store) return fmt::format("{} = {};", at, v(x));
    return fmt::format("{}{} {} = {};", d_.let(), d_.vector_type(in.type, lanes_), v(x), at);
  }
  std::string out;
  for_lanes(per_lane(x), [&] {
    const std::string position = lane_ == 0 ? std::string("r") : fmt::format("(r + {})", idx_literal(lane_));
    const std::string at = d_.subscript(array, position);
    out += store ? fmt::format("{} = {};", at, v(x))
                 : fmt::format("{}{} {} = {};", d_.let(), d_.type(in.type), v(x), at);
    out += ' ';
  });
  out.pop_back();
  return out;
}

std::string CEmitter::wrap(char op, std::string_view a, std::string_view b, DType t) {
  // Signed overflow is undefined in C: integers wrap through their unsigned type.
  const std::string u = fmt::format("({} {} {})", d_.bitcast(a, t, true), op, d_.bitcast(b, t, true));
  return d_.bitcast(u, t, false);
}

std::string CEmitter::cast_expr(std::string_view x, DType from, DType to) {
  if (from == to) return std::string(x);
  const std::string ty = d_.type(to);
  if (from == DType::Bool) {
    if (is_float(to)) return fmt::format("({} ? {} : {})", x, d_.float_literal(1, to), d_.zero_value(to, false));
    return fmt::format("({} ? {} : {})", x, d_.int_literal(1, to), d_.zero_value(to, false));
  }
  if (to == DType::Bool) return fmt::format("({} != {})", x, is_float(from) ? d_.float_literal(0, from) : d_.int_literal(0, from));
  if (is_integer(from) && is_integer(to)) {
    if (to == DType::I64) return from == DType::I32 ? d_.widen_i32(x) : d_.convert(x, ty);
    // Narrowing wraps: to unsigned (modulo, defined), then the bits as signed.
    return d_.bitcast(d_.convert(x, d_.unsigned_type(to)), to, false);
  }
  if (is_integer(from)) {
    // i64 to f32 through f64, as the interpreter converts (rounding twice can differ from once).
    if (from == DType::I64 && to == DType::F32 && fp64_) {
      if (const std::string fn = d_.i64_to_f32(); !fn.empty()) {
        helpers_.insert(fn);
        return fmt::format("{}({})", fn, x);
      }
      return d_.convert(d_.convert(x, d_.type(DType::F64)), ty);
    }
    return d_.convert(x, ty);
  }
  if (is_integer(to)) return d_.float_to_int(x, from, to);
  return d_.convert(x, ty);
}

std::string CEmitter::op_expr(const Inst& in) {
  const OpKind op = in.op;
  const DType at = in.args.empty() ? in.type : k_.insts[static_cast<size_t>(in.args.back())].type;
  const bool f = is_float(at);
  std::vector<std::string> a;
  for (Ref r : in.args) {  // operands of a vector expression are vectors, the shared ones splat
    const DType t = k_.insts[static_cast<size_t>(r)].type;
    a.push_back(vec_ && !vector_value(r) ? d_.vector_splat(v(r), t, lanes_) : v(r));
  }
  // Bools order as 0 < 1, compared as ints (GLSL has no ordering of bools).
  const bool ordered = op == OpKind::Lt || op == OpKind::Le || op == OpKind::Gt || op == OpKind::Ge;
  if (ordered && at == DType::Bool)
    for (std::string& x : a) x = d_.convert(x, d_.type(DType::I32));
  const std::string dbl = d_.type(DType::F64);
  // An f32 function computed in double and rounded once, where the device has doubles and
  // the language has the double version of `fn` ("" for arithmetic alone).
  auto in_double = [&](std::string_view fn) { return in.type == DType::F32 && fp64_ && (fn.empty() || d_.double_math(fn)); };
  auto via_double = [&](std::string_view fn_expr_fmt, std::string_view fn) -> std::string {
    if (in_double(fn)) {
      std::vector<std::string> wide;
      for (const std::string& x : a) wide.push_back(convert_to(x, DType::F64));
      const std::string wide_expr =
          fmt::format(fmt::runtime(fn_expr_fmt), wide[0], wide.size() > 1 ? wide[1] : "", dbl);
      return convert_to(fmt::format("({})", wide_expr), DType::F32);
    }
    return fmt::format(fmt::runtime(fn_expr_fmt), a[0], a.size() > 1 ? a[1] : "", d_.type(in.type));
  };
  // The dialect's name for `fn` on `t`; its own helpers (GLSL's kiln_sin...) are emitted once,
  // in the vector form of the lanes (`kiln_exp16`) where the expression is one.
  auto dialect_math = [&](std::string_view fn, DType t) {
    std::string name = d_.math(fn, t);
    if (!name.starts_with("kiln_")) return name;
    if (vec_) name += std::to_string(lanes_);
    helpers_.insert(name);
    return name;
  };
  auto math = [&](std::string_view fn) { return dialect_math(fn, in_double(fn) ? DType::F64 : in.type); };
  std::string zero = f ? d_.float_literal(0, at) : at == DType::Bool ? "false" : d_.int_literal(0, at);
  if (vec_) zero = d_.vector_splat(zero, at, lanes_);
  switch (op) {
    case OpKind::Neg: return f ? fmt::format("(-{})", a[0]) : wrap('-', zero, a[0], at);
    case OpKind::Abs:
      return f ? fmt::format("{}({})", d_.math("fabs", at), a[0])
               : fmt::format("({0} < {1} ? {2} : {0})", a[0], zero, wrap('-', zero, a[0], at));
    case OpKind::Relu: return fmt::format("({0} < {1} ? {1} : {0})", a[0], zero);
    case OpKind::Not: return fmt::format("(!{})", a[0]);
    case OpKind::Floor: return fmt::format("{}({})", d_.math("floor", at), a[0]);
    case OpKind::Ceil: return fmt::format("{}({})", d_.math("ceil", at), a[0]);
    case OpKind::Round: return fmt::format("{}({})", dialect_math("rint", at), a[0]);
    case OpKind::Sign: {
      const std::string one = f ? d_.float_literal(1, at) : d_.int_literal(1, at);
      const std::string minus_one = f ? d_.float_literal(-1, at) : d_.int_literal(-1, at);
      return fmt::format("({0} > {1} ? {2} : {0} < {1} ? {3} : {0})", a[0], zero, one, minus_one);
    }
    case OpKind::IsNan: return fmt::format("({})", d_.is_nan(a[0]));
    case OpKind::IsInf: return fmt::format("({}({}) == {})", d_.math("fabs", at), a[0], d_.float_literal(INFINITY, at));
    case OpKind::Fmod:
    case OpKind::Mod: {
      const std::string h = fmt::format("{}_{}", op == OpKind::Mod ? "mod" : "fmod", dtype_name(at));
      if (f && op == OpKind::Fmod) return fmt::format("{}({}, {})", dialect_math("fmod", at), a[0], a[1]);
      if (f) dialect_math("fmod", at);  // the helper's own dependency
      helpers_.insert(h);
      return fmt::format("kiln_{}({}, {})", h, a[0], a[1]);
    }
    case OpKind::Sqrt:
      if (in.type == DType::F32 && exact_divide_sqrt_)
        return fmt::format("{}({})", dialect_math("sqrt", in.type), a[0]);
      return via_double(fmt::format("{}({{0}})", math("sqrt")), "sqrt");
    case OpKind::Rsqrt: {
      const DType w = in_double("sqrt") ? DType::F64 : in.type;
      return via_double(fmt::format("({} / {}({{0}}))", d_.float_literal(1, w), math("sqrt")), "sqrt");
    }
    case OpKind::Sin: return via_double(fmt::format("{}({{0}})", math("sin")), "sin");
    case OpKind::Cos: return via_double(fmt::format("{}({{0}})", math("cos")), "cos");
    case OpKind::Asin: return via_double(fmt::format("{}({{0}})", math("asin")), "asin");
    case OpKind::Acos: return via_double(fmt::format("{}({{0}})", math("acos")), "acos");
    case OpKind::Atan: return via_double(fmt::format("{}({{0}})", math("atan")), "atan");
    case OpKind::Atan2: return via_double(fmt::format("{}({{0}}, {{1}})", math("atan2")), "atan2");
    case OpKind::Exp:
    case OpKind::Log:
    case OpKind::Tanh:
    case OpKind::Erf: {
      return fmt::format("{}({})", dialect_math(op_info(op).name, in.type), a[0]);
    }
    case OpKind::Sigmoid: {
      // In double where the device has it: an f32 exp(-x) overflows for x < -88 where the
      // result is still a subnormal.
      const DType w = in_double("exp") ? DType::F64 : in.type;
      const std::string e = dialect_math("exp", w);
      if (w == DType::F32)  // far left, e^-x overflows; there sigmoid(x) is e^x within an ulp
        return fmt::format("({0} < {1} ? {2}({0}) : {3} / ({3} + {2}(-{0})))", a[0], d_.float_literal(-20, w), e,
                           d_.float_literal(1, w));
      return via_double(fmt::format("({1} / ({1} + {0}(-{{0}})))", e, d_.float_literal(1, w)), "exp");
    }
    case OpKind::Add: return f ? fmt::format("({} + {})", a[0], a[1]) : wrap('+', a[0], a[1], at);
    case OpKind::Sub: return f ? fmt::format("({} - {})", a[0], a[1]) : wrap('-', a[0], a[1], at);
    case OpKind::Mul: return f ? fmt::format("({} * {})", a[0], a[1]) : wrap('*', a[0], a[1], at);
    case OpKind::Div: {
      if (in.type == DType::F32 && exact_divide_sqrt_) return fmt::format("({} / {})", a[0], a[1]);
      const std::string fn = d_.divide(in_double("") ? DType::F64 : in.type);
      if (fn.empty()) return via_double("({0} / {1})", "");
      helpers_.insert(fn);
      return via_double(fn + "({0}, {1})", "");
    }
    case OpKind::Pow: {
      if (f) return via_double(fmt::format("{}({{0}}, {{1}})", math("pow")), "pow");
      // In the operands' own width: products wrap modulo 2^32 as the interpreter's i64
      // products wrapped to i32 do (and lavapipe mis-sign-extends in the widened form).
      helpers_.insert(at == DType::I64 ? "ipow_i64" : "ipow_i32");
      return fmt::format("kiln_ipow_{}({}, {})", dtype_name(at), a[0], a[1]);
    }
    case OpKind::Max:
    case OpKind::Min: {
      const bool max = op == OpKind::Max;
      if (f) {
        const std::string h = min_max_helper(max, at);
        helpers_.insert(h);
        return fmt::format("kiln_{}({}, {})", h, a[0], a[1]);
      }
      if (at == DType::Bool) return fmt::format("({} {} {})", a[0], max ? "||" : "&&", a[1]);
      return fmt::format("({0} {2} {1} ? {0} : {1})", a[0], a[1], max ? ">" : "<");
    }
    case OpKind::Eq: return fmt::format("({} == {})", a[0], a[1]);
    case OpKind::Ne: return fmt::format("({} != {})", a[0], a[1]);
    case OpKind::Lt: return fmt::format("({} < {})", a[0], a[1]);
    case OpKind::Le: return fmt::format("({} <= {})", a[0], a[1]);
    case OpKind::Gt: return fmt::format("({} > {})", a[0], a[1]);
    case OpKind::Ge: return fmt::format("({} >= {})", a[0], a[1]);
    case OpKind::Shl:
    case OpKind::Shr: {
      // A count outside [0, bits) shifts every bit out (C's shift would be undefined); left
      // shifts on unsigned bits, as a negative value's would be undefined too.
      const std::string out =
          fmt::format("({1} < {0} || {1} >= {2})", zero, a[1], d_.int_literal(at == DType::I32 ? 32 : 64, at));
      if (op == OpKind::Shl)
        return fmt::format("({} ? {} : {})", out, zero,
                           d_.bitcast(fmt::format("({} << {})", d_.bitcast(a[0], at, true), a[1]), at, false));
      return fmt::format("({0} ? ({1} < {2} ? {3} : {2}) : ({1} >> {4}))", out, a[0], zero, d_.int_literal(-1, at), a[1]);
    }
    case OpKind::And: return fmt::format("({} && {})", a[0], a[1]);
    case OpKind::Or: return fmt::format("({} || {})", a[0], a[1]);
    case OpKind::Where: return fmt::format("({} ? {} : {})", a[0], a[1], a[2]);
    case OpKind::Custom: return fmt::format("{}({})", k_.customs[static_cast<size_t>(in.imm)]->name, fmt::join(a, ", "));
    default: break;
  }
  throw Error(fmt::format("{} codegen: no lowering for op '{}' on {}", "c-like", op_info(op).name, dtype_name(in.type)));
}

// Storage types (dtype.h): a buffer element in its compute type, and back. f16 and bf16 are
// held as their bits (no device needs half arithmetic), converted by helpers that round as
// the interpreter does.
std::string CEmitter::from_memory(std::string x, DType t) {
  const std::string u32 = d_.unsigned_type(DType::I32);
  switch (t) {
    case DType::Bool: return fmt::format("({} != 0)", x);
    case DType::F16:
      helpers_.insert("f16");
      return fmt::format("kiln_f16_to_f32({})", d_.convert(x, u32));
    case DType::BF16: return d_.bits_f32(fmt::format("({} << 16)", d_.convert(x, u32)));
    default: return is_compute_dtype(t) ? x : d_.convert(x, d_.type(compute_dtype(t)));
  }
}

std::string CEmitter::to_memory(std::string x, DType t) {
  switch (t) {
    case DType::F16: helpers_.insert("f16"); return d_.convert(fmt::format("kiln_f32_to_f16({})", x), d_.memory_type(t));
    case DType::BF16: helpers_.insert("bf16"); return d_.convert(fmt::format("kiln_f32_to_bf16({})", x), d_.memory_type(t));
    default: return t == DType::Bool || !is_compute_dtype(t) ? d_.convert(x, d_.memory_type(t)) : x;
  }
}

std::string CEmitter::expr(Ref r) {
  const Inst& in = k_.insts[static_cast<size_t>(r)];
  if (const std::optional<std::string>& flat = flat_[static_cast<size_t>(r)]) {
    if (lane_ == 0 || !per_lane(r)) return *flat;
    return fmt::format("({} + {})", *flat, idx_literal(affine_[static_cast<size_t>(r)]->stride[static_cast<size_t>(lane_dim_)] * lane_));
  }
  switch (in.code) {
    case Code::Dim: {  // an I64 value; the loop counter d<i> has the index type
      std::string d = fmt::format("d{}", in.imm);
      if (lane_ > 0 && in.imm == lane_dim_) d = fmt::format("({} + {})", d, idx_literal(lane_));
      if (idx_ == DType::I32 && !index_[static_cast<size_t>(r)]) return d_.widen_i32(d);
      return d;
    }
    case Code::Const: {
      if (index_[static_cast<size_t>(r)]) return idx_literal(in.literal.as_int());
      const bool f = is_float(in.type);
      if (f ? in.literal.as_double() == 0 : in.literal.as_int() == 0) return d_.zero_value(in.type, f && std::signbit(in.literal.as_double()));
      if (in.type == DType::Bool) return "true";
      return f ? d_.float_literal(in.literal.as_double(), in.type) : d_.int_literal(in.literal.as_int(), in.type);
    }
    case Code::Load: {
      if (is_replaced(in)) return replacement_;
      std::string x = from_memory(d_.element(in.buffer, v(in.args[0])), k_.buffers[static_cast<size_t>(in.buffer)].type.dtype);
      if (in.args.size() > 1) {  // read only where the mask holds: the position may be outside
        x = fmt::format("({} ? {} : {})", v(in.args[1]), x, d_.zero_value(in.type, false));
      }
      return x;
    }
    case Code::Op:
      if (index_[static_cast<size_t>(r)]) {  // a position: in range by index_fits_32, so no wrapping
        const char sign = in.op == OpKind::Add ? '+' : in.op == OpKind::Sub ? '-' : '*';
        return fmt::format("({} {} {})", position(in.args[0]), sign, position(in.args[1]));
      }
      return op_expr(in);
    case Code::Cast:
      if (in.imm == kir::kCastToOdd) {
        helpers_.insert("f64_to_f32_odd");
        return fmt::format("kiln_f64_to_f32_odd({})", v(in.args[0]));
      }
      if (vec_) return convert_to(v(in.args[0]), in.type);  // f32 and f64 (c_lanes_as_vectors)
      return cast_expr(v(in.args[0]), k_.insts[static_cast<size_t>(in.args[0])].type, in.type);
    case Code::Narrow: {
      const auto t = static_cast<DType>(in.imm);
      return from_memory(to_memory(v(in.args[0]), t), t);
    }
    case Code::IndexDiv:
    case Code::IndexMod: {
      // Computed in the index type; a value that is not only a position (a data value too)
      // is an i64 variable, widened as every i32 is (widen_i32: an implicit conversion is
      // the pattern lavapipe folds wrong; kiln fuzz seed 5312 on vulkan:0).
      const std::string x = fmt::format("({} {} {})", position(in.args[0]), in.code == Code::IndexDiv ? '/' : '%', idx_literal(in.imm));
      return idx_ == DType::I32 && !index_[static_cast<size_t>(r)] ? d_.widen_i32(x) : x;
    }
    case Code::Rand:
      helpers_.insert(fmt::format("rand_{}", dtype_name(in.type)));
      return fmt::format("kiln_rand_{}({}, {}u)", dtype_name(in.type), v(in.args[0]), scalar::rand_key(in.imm));
    case Code::Arg: {
      const std::string s = fmt::format("s{}", in.imm);
      return in.type == DType::Bool ? fmt::format("({} != 0)", s) : s;
    }
    case Code::Reduce: break;
  }
  KILN_ASSERT(false, "expr: a reduction has no expression");
}

// ---------------------------------------------------------------------------------------
// Reductions

DType CEmitter::acc_type(const Inst& r) const {
  if (r.type == DType::Bool) return DType::I32;  // local memory and arithmetic hold ints
  if (r.type != DType::F32 || !fp64_ || is_arg(r)) return r.type;
  if (narrow_sum(r) && wide_.empty()) return DType::F32;
  // f32 sums and products in double: the interpreter's range (a sum of values near the f32
  // maximum that ends in range must not overflow), and products that neither underflow nor
  // overflow on the way.
  return r.op == OpKind::ReduceSum || r.op == OpKind::ReduceProd ? DType::F64 : r.type;
}

std::string CEmitter::identity(const Inst& r) const {
  const DType t = acc_type(r);
  if (is_float(t)) {
    switch (r.op) {
      case OpKind::ReduceProd: return d_.float_literal(1, t);
      case OpKind::ReduceMax: return d_.float_literal(-INFINITY, t);
      case OpKind::ReduceMin: return d_.float_literal(INFINITY, t);
      default: return d_.float_literal(0, t);
    }
  }
  const bool b = r.type == DType::Bool;
  switch (r.op) {
    case OpKind::ReduceProd: return d_.int_literal(1, t);
    case OpKind::ReduceMax: return b ? d_.int_literal(0, t) : d_.int_literal(t == DType::I32 ? INT32_MIN : INT64_MIN, t);
    case OpKind::ReduceMin: return b ? d_.int_literal(1, t) : d_.int_literal(t == DType::I32 ? INT32_MAX : INT64_MAX, t);
    default: return d_.int_literal(0, t);
  }
}

std::string CEmitter::combine(const Inst& r, std::string_view acc, std::string_view x) {
  const DType t = acc_type(r);
  const bool f = is_float(t);
  switch (r.op) {
    case OpKind::ReduceSum: return f ? fmt::format("{} + {}", acc, x) : wrap('+', acc, x, t);
    case OpKind::ReduceProd: return f ? fmt::format("{} * {}", acc, x) : wrap('*', acc, x, t);
    case OpKind::ReduceMax:
    case OpKind::ReduceMin: {
      const bool max = r.op == OpKind::ReduceMax;
      if (f) {
        const std::string h = min_max_helper(max, t);
        helpers_.insert(h);
        return fmt::format("kiln_{}({}, {})", h, acc, x);
      }
      return fmt::format("({0} {2} {1} ? {0} : {1})", x, acc, max ? ">" : "<");
    }
    default: break;
  }
  KILN_ASSERT(false, "combine: not a value reduction");
}

std::string CEmitter::reduced_loop_head(std::string_view var, int chains) const {
  const std::string idx = idx_type(), n = idx_literal(reduced_points_);
  const int64_t step = lanes_reduced_ ? lanes_ : 1;  // a row's lanes: consecutive, within the row
  if (chains > 1)  // a block per chain, each defining `var` (emit_stage)
    return fmt::format("for ({0} {1}_chains = 0; {1}_chains < {2}; {1}_chains += {3}) {{", idx, var, n,
                       idx_literal(step * chains));
  if (!group_per_row_) return fmt::format("for ({0} {1} = 0; {1} < {2}; {1} += {3}) {{", idx, var, n, idx_literal(step));
  // The work-items of a group stride along the row in a loop whose trip count is the same
  // for all of them, the body guarded: a trip count that differs between work-items
  // (`r = lid; r < n; r += size`) is miscompiled by PoCL 3.1's work-group vectorizer, which
  // then writes past the row (seen under valgrind), and uniform loops suit GPUs too.
  if (s_.work_items.row_blocks) {  // work-item l walks block l of the row, per_item points long
    const int64_t group_step = s_.work_items.local_size * step;
    const int64_t per_item = (reduced_points_ + group_step - 1) / group_step * step;
    return fmt::format(
        "for ({0} {1}_base = 0; {1}_base < {2}; {1}_base += {3}) {{ {5}{0} {1} = {4} * {2} + {1}_base; if ({1} < {6}) {{",
        idx, var, idx_literal(per_item), idx_literal(step), d_.local_id(idx_), d_.let(), n);
  }
  const std::string lane0 = step == 1 ? d_.local_id(idx_) : fmt::format("{} * {}", d_.local_id(idx_), idx_literal(step));
  return fmt::format("for ({0} {1}_base = 0; {1}_base < {2}; {1}_base += {3}) {{ {5}{0} {1} = {1}_base + {4}; if ({1} < {2}) {{",
                     idx, var, n, idx_literal(s_.work_items.local_size * step), lane0, d_.let());
}

void CEmitter::define_dims(Scope& s, const std::vector<int>& dims, std::string_view flat) {
  int64_t stride = 1;
  for (size_t j = dims.size(); j-- > 0;) {
    const int dim = dims[j];
    std::string x = std::string(flat);
    if (stride > 1) x = fmt::format("({} / {})", x, idx_literal(stride));
    if (j > 0) x = fmt::format("({} % {})", x, idx_literal(k_.domain[dim]));
    line(s, fmt::format("{}{} d{} = {};", d_.let(), idx_type(), dim, x));
    stride *= k_.domain[dim];
  }
}

std::string CEmitter::row_step(Scope& point, const std::vector<Ref>& reds, int depth) {
  Scope loop = child(point, point.dims | reduced_mask_);
  loop.indent = point.indent + depth;
  if (chain_ >= 0) {  // inside the chain's block
    line(loop, fmt::format("{}{} r = r_chains + {};", d_.let(), idx_type(), idx_literal(int64_t{chain_} * lanes_)));
  }
  define_dims(loop, reduced_dims_, "r");
  for (Ref r : reds) {
    const Inst& in = k_.insts[static_cast<size_t>(r)];
    for (Ref a : in.args) ensure(loop, a);
    for_lanes(lane_accumulators(r), [&] {
      const bool bool_values = k_.insts[static_cast<size_t>(in.args[0])].type == DType::Bool;
      const std::string x = bool_values ? d_.convert(v(in.args[0]), d_.type(DType::I32)) : v(in.args[0]);
      if (!is_arg(in)) {
        const DType t = acc_type(in);
        vec_ = vectors_ && lane_accumulators(r);  // a vector of accumulators takes a vector
        const std::string lanes_x = vec_ && !vector_value(in.args[0]) ? d_.vector_splat(x, in.type, lanes_) : x;
        const std::string wide = t == in.type ? lanes_x : convert_to(lanes_x, t);
        line(loop, fmt::format("{} = {};", acc(r), combine(in, acc(r), wide)));
        vec_ = false;
        return;
      }
      // First best wins; for floats a NaN beats every number, and the first NaN stays.
      const bool max = in.op == OpKind::ArgMax;
      const std::string best = acc(r, "v");
      const std::string better = is_float(arg_value_type(in))
                                     ? fmt::format("(!{} && ({} || {} {} {}))", d_.is_nan(best), d_.is_nan(x), x, max ? ">" : "<", best)
                                     : fmt::format("({} {} {})", x, max ? ">" : "<", best);
      line(loop, fmt::format("if ({0} < 0 || {1}) {{ {2} = {3}; {0} = {4}; }}", acc(r, "p"), better, best, x, v(in.args[1])));
    });
  }
  return loop.text;
}

void CEmitter::emit_stage(Scope& point, int stage) {
  const std::vector<Ref> reds = reductions_of(stage);
  const std::string i64 = d_.type(DType::I64);
  for (Ref r : reds) {
    const Inst& in = k_.insts[static_cast<size_t>(r)];
    for_lanes(lane_accumulators(r), [&] {
      if (is_arg(in)) {
        const DType vt = arg_value_type(in);
        line(point, fmt::format("{} {} = {}; {} {} = -1;", d_.type(vt), acc(r, "v"),
                                is_float(vt) ? d_.float_literal(0, vt) : d_.int_literal(0, vt), i64, acc(r, "p")));
      } else if (vectors_ && lane_accumulators(r)) {  // one vector of the lanes' accumulators (per chain)
        const DType t = acc_type(in);
        const std::string type = d_.vector_type(t, lanes_), start = d_.vector_splat(identity(in), t, lanes_);
        for_chains([&] { line(point, fmt::format("{} {} = {};", type, acc(r), start)); });
      } else {
        line(point, fmt::format("{} {} = {};", d_.type(acc_type(in)), acc(r), identity(in)));
      }
    });
  }
  // One pass over the reduced dims. Its head is written after its body: values the body
  // hoists into `point` come before the loop. With chains, the body once per chain, each in
  // a block of its own.
  std::string body;
  const std::string block_indent(static_cast<size_t>(point.indent + 1) * 2, ' ');
  for_chains([&] {
    if (chain_ < 0) body += row_step(point, reds, 1);
    else body += block_indent + "{\n" + row_step(point, reds, 2) + block_indent + "}\n";
  });
  line(point, reduced_loop_head("r", chains_));
  point.text += body;
  line(point, reduced_loop_tail());
  for (Ref x : cache_pending_) cache_filled_[static_cast<size_t>(x)] = 1;
  cache_pending_.clear();
  if (chains_ > 1) fold_chains(point, reds);
  if (lanes_reduced_) fold_lanes(point, reds);
  if (f32_sums_) resum_overflowed(point, reds);

  if (subgroups_) combine_in_subgroups(point, reds);
  else if (group_per_row_) combine_in_tree(point, reds);
  for (Ref r : reds) {
    const Inst& in = k_.insts[static_cast<size_t>(r)];
    const DType from = is_arg(in) ? DType::I64 : acc_type(in);
    // Case A's lanes are folded into a<r> by now; case B's kept lanes each have a result.
    for_lanes(per_lane(r), [&] {
      const std::string a = per_lane(r) ? acc(r, is_arg(in) ? "p" : "") : fmt::format("a{}{}", r, is_arg(in) ? "p" : "");
      if (vector_value(r)) {  // case B's kept lanes, one vector
        vec_ = true;
        const std::string value = from == in.type ? a : convert_to(a, in.type);
        line(point, fmt::format("{}{} {} = {};", d_.let(), value_type(in.type), v(r), value));
        vec_ = false;
        return;
      }
      line(point, fmt::format("{}{} {} = {};", d_.let(), d_.type(in.type), v(r),
                              in.type == DType::Bool ? fmt::format("({} != 0)", a) : cast_expr(a, from, in.type)));
    });
    point.has[static_cast<size_t>(r)] = 1;
  }
}

void CEmitter::resum_overflowed(Scope& point, const std::vector<Ref>& reds) {
  std::vector<Ref> narrow;
  std::string overflowed;
  for (Ref r : reds)
    if (narrow_sum(k_.insts[static_cast<size_t>(r)])) {
      narrow.push_back(r);
      // a - a is NaN exactly where a is infinite or NaN.
      overflowed += fmt::format("{}{}", overflowed.empty() ? "" : " || ", d_.is_nan(fmt::format("(a{0} - a{0})", r)));
    }
  if (narrow.empty()) return;
  // The body first: values it hoists into `point` come before the `if`. The row's values
  // that the first pass cached are read back from the cache.
  wide_ = "w";
  const std::string body = row_step(point, narrow, 2);
  Scope again = child(point, point.dims);
  for (Ref r : narrow) {
    const Inst& in = k_.insts[static_cast<size_t>(r)];
    line(again, fmt::format("{} {} = {};", d_.vector_type(DType::F64, lanes_), acc(r),
                            d_.vector_splat(identity(in), DType::F64, lanes_)));
  }
  line(again, reduced_loop_head("r"));
  again.text += body;
  line(again, reduced_loop_tail());
  fold_lanes(again, narrow);
  for (Ref r : narrow)
    line(again, fmt::format("a{} = {};", r, cast_expr(fmt::format("a{}w", r), DType::F64, DType::F32)));
  wide_.clear();
  cache_pending_.clear();
  line(point, fmt::format("if ({}) {{  // f32 sums out of f32's range: again in f64", overflowed));
  point.text += again.text;
  line(point, "}");
}

void CEmitter::fold_chains(Scope& point, const std::vector<Ref>& reds) {
  vec_ = true;
  for (Ref r : reds) {
    const Inst& in = k_.insts[static_cast<size_t>(r)];
    const std::string a = acc(r);
    line(point, fmt::format("{} {} = {}_c0;", d_.vector_type(acc_type(in), lanes_), a, a));
    for (int c = 1; c < chains_; ++c)
      line(point, fmt::format("{} = {};", a, combine(in, a, fmt::format("{}_c{}", a, c))));
  }
  vec_ = false;
}

void CEmitter::fold_lanes(Scope& point, const std::vector<Ref>& reds) {
  // Lane 0's state, then the others merged in lane order: an arg reduction's positions
  // decide its ties, so any order gives the interpreter's answer.
  for (Ref r : reds) {
    const Inst& in = k_.insts[static_cast<size_t>(r)];
    // Lane l's state: a variable of its own, or an element of the lanes' vector.
    auto lane_state = [&](std::string_view suffix, int l) {
      return vectors_ ? d_.vector_lane(fmt::format("a{}{}{}l", r, wide_, suffix), l)
                      : fmt::format("a{}{}{}_{}", r, wide_, suffix, l);
    };
    if (is_arg(in)) {
      line(point, fmt::format("{} a{}v = {}; {} a{}p = {};", d_.type(arg_value_type(in)), r, lane_state("v", 0),
                              d_.type(DType::I64), r, lane_state("p", 0)));
    } else {
      line(point, fmt::format("{} a{}{} = {};", d_.type(acc_type(in)), r, wide_, lane_state("", 0)));
    }
    for (int l = 1; l < lanes_; ++l) {
      const std::string b = lane_state(is_arg(in) ? "v" : "", l);
      const std::string a = fmt::format("a{}{}{}", r, wide_, is_arg(in) ? "v" : "");
      line(point, merge(in, a, fmt::format("a{}p", r), b, lane_state("p", l)));
    }
  }
}

std::string CEmitter::merge(const Inst& r, std::string_view a, std::string_view ap, std::string_view b,
                            std::string_view bp) {
  if (!is_arg(r)) return fmt::format("{} = {};", a, combine(r, a, b));
  // b wins when it has seen an element and is better, or equal and earlier (the work-items'
  // positions interleave). For floats a NaN beats every number, and the earliest NaN wins.
  const bool max = r.op == OpKind::ArgMax;
  std::string better;
  if (is_float(arg_value_type(r))) {
    better = fmt::format("({0} ? (!{1} || {4} < {5}) : (!{1} && ({2} {6} {3} || ({2} == {3} && {4} < {5}))))",
                         d_.is_nan(b), d_.is_nan(a), b, a, bp, ap, max ? ">" : "<");
  } else {
    better = fmt::format("({0} {4} {1} || ({0} == {1} && {2} < {3}))", b, a, bp, ap, max ? ">" : "<");
  }
  return fmt::format("if ({0} >= 0 && ({1} < 0 || {2})) {{ {3} = {4}; {1} = {0}; }}", bp, ap, better, a, b);
}

void CEmitter::stash_states(Scope& point, const std::vector<Ref>& reds, int64_t slots, std::string_view at,
                            std::string_view indent) {
  for (Ref r : reds) {
    const Inst& in = k_.insts[static_cast<size_t>(r)];
    if (is_arg(in)) {
      locals_ += d_.local_array(fmt::format("t{}v", r), arg_value_type(in), slots);
      locals_ += d_.local_array(fmt::format("t{}p", r), DType::I64, slots);
      line(point, fmt::format("{}{} = a{}v; {} = a{}p;", indent, slot(r, "v", at), r, slot(r, "p", at), r));
    } else {
      locals_ += d_.local_array(fmt::format("t{}", r), acc_type(in), slots);
      line(point, fmt::format("{}{} = a{};", indent, slot(r, "", at), r));
    }
  }
}

void CEmitter::combine_in_tree(Scope& point, const std::vector<Ref>& reds) {
  // Partial states into local memory, halves combined.
  const int64_t n = s_.work_items.local_size;
  int64_t p2 = 1;
  while (p2 < n) p2 *= 2;
  const std::string lid = d_.local_id(idx_);
  const std::string other = fmt::format("{} + h", lid);
  stash_states(point, reds, n, lid, "");
  line(point, d_.barrier());
  line(point, fmt::format("for ({} h = {}; h > 0; h >>= 1) {{", idx_type(), idx_literal(p2 / 2)));
  line(point, fmt::format("  if ({0} < h && {0} + h < {1}) {{", lid, idx_literal(n)));
  for (Ref r : reds) {
    const Inst& in = k_.insts[static_cast<size_t>(r)];
    const bool arg = is_arg(in);
    line(point, "    " + merge(in, slot(r, arg ? "v" : "", lid), slot(r, "p", lid), slot(r, arg ? "v" : "", other),
                               slot(r, "p", other)));
  }
  line(point, "  }");
  line(point, "  " + d_.barrier());
  line(point, "}");
  for (Ref r : reds) {
    if (is_arg(k_.insts[static_cast<size_t>(r)])) line(point, fmt::format("a{}p = {};", r, slot(r, "p", "0")));
    else line(point, fmt::format("a{} = {};", r, slot(r, "", "0")));
  }
  line(point, d_.barrier());  // before the arrays are written again
}

void CEmitter::combine_in_subgroups(Scope& point, const std::vector<Ref>& reds) {
  // A butterfly of shuffles leaves every lane of a subgroup with the subgroup's state (each
  // merge is symmetric: both lanes of a pair compute the same value). Lane 0 of each
  // subgroup writes it to local memory, and every work-item merges those in subgroup order,
  // so all of them hold the same result without a tree of barriers.
  const int64_t slots = std::max<int64_t>(1, s_.work_items.local_size / subgroup_size_);
  const std::string i32 = d_.type(DType::I32);
  line(point, fmt::format("for ({0} h = {1} / 2; h > 0; h >>= 1) {{", i32, d_.subgroup_size(DType::I32)));
  for (Ref r : reds) {
    const Inst& in = k_.insts[static_cast<size_t>(r)];
    if (is_arg(in)) {
      const DType vt = arg_value_type(in);
      line(point, fmt::format("  {}{} o{}v = {};", d_.let(), d_.type(vt), r, d_.subgroup_shuffle_xor(fmt::format("a{}v", r), "h", vt)));
      line(point, fmt::format("  {}{} o{}p = {};", d_.let(), d_.type(DType::I64), r,
                              d_.subgroup_shuffle_xor(fmt::format("a{}p", r), "h", DType::I64)));
      line(point, "  " + merge(in, fmt::format("a{}v", r), fmt::format("a{}p", r), fmt::format("o{}v", r), fmt::format("o{}p", r)));
    } else {
      const DType t = acc_type(in);
      line(point, fmt::format("  {}{} o{} = {};", d_.let(), d_.type(t), r, d_.subgroup_shuffle_xor(fmt::format("a{}", r), "h", t)));
      line(point, "  " + merge(in, fmt::format("a{}", r), "", fmt::format("o{}", r), ""));
    }
  }
  line(point, "}");
  line(point, fmt::format("if ({} == 0) {{", d_.subgroup_local_id(DType::I32)));
  stash_states(point, reds, slots, d_.subgroup_id(DType::I32), "  ");
  line(point, "}");
  line(point, d_.barrier());
  for (Ref r : reds) {
    if (is_arg(k_.insts[static_cast<size_t>(r)])) line(point, fmt::format("a{0}v = {1}; a{0}p = {2};", r, slot(r, "v", "0"), slot(r, "p", "0")));
    else line(point, fmt::format("a{} = {};", r, slot(r, "", "0")));
  }
  line(point, fmt::format("for ({0} g = 1; g < {1}; ++g) {{", i32, d_.subgroup_count(DType::I32)));
  for (Ref r : reds) {
    const Inst& in = k_.insts[static_cast<size_t>(r)];
    const bool arg = is_arg(in);
    line(point, "  " + merge(in, fmt::format("a{}{}", r, arg ? "v" : ""), fmt::format("a{}p", r), slot(r, arg ? "v" : "", "g"),
                             slot(r, "p", "g")));
  }
  line(point, "}");
  line(point, d_.barrier());  // before the arrays are written again
}

void CEmitter::emit_stores(Scope& point) {
  auto store_line = [&](Scope& s, const Store& st) {
    const DType memory = k_.buffers[static_cast<size_t>(st.buffer)].type.dtype;
    const bool lanes = per_lane(st.offset) || per_lane(st.value) || (st.guard != kNoRef && per_lane(st.guard));
    const bool aligned = aligned_in_lanes(st.offset, memory);
    if (vector_value(st.value)) {  // unguarded and contiguous, of the buffer's type (c_lanes_as_vectors)
      line(s, d_.buffer_vector_store(st.buffer, memory, v(st.offset), lanes_, v(st.value), aligned));
      return;
    }
    if (lanes && st.guard == kNoRef && per_lane(st.offset) && contiguous_in_lanes(st.offset) &&
        !d_.memory_vector_type(memory, lanes_).empty()) {  // the lanes' elements in one vector store
      std::vector<std::string> values;
      for_lanes(true, [&] { values.push_back(to_memory(v(st.value), memory)); });
      line(s,
           d_.buffer_vector_store(st.buffer, memory, v(st.offset), lanes_, d_.memory_vector(memory, values), aligned));
      return;
    }
    for_lanes(lanes, [&] {
      std::string text = fmt::format("{} = {};", d_.element(st.buffer, v(st.offset)), to_memory(v(st.value), memory));
      if (st.guard != kNoRef) text = fmt::format("if ({}) {}", v(st.guard), text);
      line(s, text);
    });
  };
  auto needs_reduced = [&](const Store& st) {
    uint64_t m = deps_[static_cast<size_t>(st.offset)] | deps_[static_cast<size_t>(st.value)];
    if (st.guard != kNoRef) m |= deps_[static_cast<size_t>(st.guard)];
    return (m & reduced_mask_) != 0;
  };
  std::vector<const Store*> once, per_element;
  for (const Store& st : k_.stores) (needs_reduced(st) ? per_element : once).push_back(&st);
  if (!once.empty() && part_branches_) {
    // A horizontal kernel (Kernel::parts, merge_horizontal): each part's stores and what
    // they compute in a branch that only the work-items whose points meet the part's range
    // take, so that a work-item computes one part's body (two where its lanes straddle a
    // boundary), not every part's under its masks. The masks stay: they hold the lanes.
    const int64_t lanes = lanes_reduced_ ? 1 : lanes_;
    int64_t from = 0;
    size_t stored = 0;
    for (size_t p = 0; p < k_.parts.size(); ++p) {
      const Kernel::Part& part = k_.parts[p];
      const Ref end = p + 1 < k_.parts.size() ? k_.parts[p + 1].first : static_cast<Ref>(k_.insts.size());
      Scope branch = child(point, point.dims);
      branch.branch = true;
      std::vector<const Store*> mine;
      for (const Store* st : once)
        if (st->value >= part.first && st->value < end) mine.push_back(st);
      // Every value before any store, as below: a buffer the part writes may be one it
      // reads under another parameter (the memory plan's in-place updates).
      for (const Store* st : mine)
        for (Ref r : {st->offset, st->value, st->guard})
          if (r != kNoRef) ensure(branch, r);
      for (const Store* st : mine) store_line(branch, *st);
      stored += mine.size();
      if (!branch.text.empty()) {
        const int64_t first = from - lanes + 1;  // the first work-item whose lanes reach the part
        const std::string below = fmt::format("it < {}", idx_literal(from + part.points));
        line(point, first > 0 ? fmt::format("if (it >= {} && {}) {{", idx_literal(first), below)
                              : fmt::format("if ({}) {{", below));
        point.text += branch.text;
        line(point, "}");
      }
      from += part.points;
    }
    KILN_ASSERT(stored == once.size(), "every store of a horizontal kernel computed by one of its parts");
  } else if (!once.empty()) {
    for (const Store* st : once)
      for (Ref r : {st->offset, st->value, st->guard})
        if (r != kNoRef) ensure(point, r);
    if (group_per_row_) {
      line(point, fmt::format("if ({} == 0) {{", d_.local_id(idx_)));
      Scope inner = child(point, point.dims);
      for (const Store* st : once) store_line(inner, *st);
      point.text += inner.text;
      line(point, "}");
    } else {
      for (const Store* st : once) store_line(point, *st);
    }
  }
  if (!per_element.empty()) {
    Scope loop = child(point, point.dims | reduced_mask_);
    define_dims(loop, reduced_dims_, "r");
    for (const Store* st : per_element) {
      for (Ref r : {st->offset, st->value, st->guard})
        if (r != kNoRef) ensure(loop, r);
      store_line(loop, *st);
    }
    line(point, reduced_loop_head("r"));
    point.text += loop.text;
    line(point, reduced_loop_tail());
  }
}

// ---------------------------------------------------------------------------------------
// Helpers and the kernel

// kiln_mod_<t> and kiln_fmod_<t> for integers, kiln_mod_<t> for floats (scalar_semantics.cpp).
// Integer remainders on magnitudes in unsigned arithmetic: `%` of a negative operand is not
// portable (GLSL's compiles to SPIR-V's OpSMod, the divisor's sign), and a divisor of 0 or -1
// gives 0. A float mod is the language's fmod (exact) moved into the divisor's sign, with
// zeros and signs read from the bits (a device that flushes subnormals would read a
// subnormal remainder as a zero). NaN's sign bit may be either: the sum is NaN then too.
std::string remainder_helper(const std::string& h, const std::string& q, const CDialect& d_) {
  const bool floor_mod = h.starts_with("mod_");
  const DType t = *parse_dtype(h.substr(h.find('_') + 1));
  const std::string ty = d_.type(t);
  if (is_float(t)) {
    return fmt::format(
        "{0}{1} kiln_{2}({1} a, {1} b) {{\n"
        "  {1} r = {3}(a, b);\n"
        "  if ({7}) return {5} ? {6} : {4};\n"
        "  return {5} != {8} ? r + b : r;\n"
        "}}\n",
        q, ty, h, d_.math("fmod", t), d_.float_literal(0, t), d_.sign_bit("b", t), d_.float_literal(-0.0, t),
        d_.is_zero("r", t), d_.sign_bit("r", t));
  }
  const std::string u = d_.unsigned_type(t), zero = d_.int_literal(0, t), minus_one = d_.int_literal(-1, t);
  const std::string uzero = d_.convert(zero, u);
  return fmt::format(
      "{0}{1} kiln_{2}({1} a, {1} b) {{\n"
      "  if (b == {3} || b == {4}) return {3};\n"
      "  {5} ua = a < {3} ? {6} - {7} : {7}, ub = b < {3} ? {6} - {8} : {8};\n"
      "  {1} r = {9};\n"
      "  if (a < {3}) r = {3} - r;\n"
      "  {10}\n"
      "  return r;\n"
      "}}\n",
      q, ty, h, zero, minus_one, u, uzero, d_.bitcast("a", t, true), d_.bitcast("b", t, true),
      d_.bitcast("(ua % ub)", t, false), floor_mod ? fmt::format("if (r != {0} && (r < {0}) != (b < {0})) r = r + b;", zero) : "");
}

// f32 to f16 or bf16 bits, to nearest even (scalar::f16_bits), and f16 bits to f32, in 32-bit
// unsigned arithmetic only: no device needs half-precision support.
std::string small_float_helpers(const std::string& h, const std::string& q, const CDialect& d_) {
  const std::string u = d_.unsigned_type(DType::I32), f = d_.type(DType::F32), let = d_.let();
  if (h == "bf16") {
    // A NaN keeps its top bits, made quiet so that no payload rounds to infinity.
    return fmt::format(
        "{0}{1} kiln_f32_to_bf16({2} x) {{\n"
        "  {3}{1} b = {4};\n"
        "  if ((b & 0x7fffffffu) > 0x7f800000u) return (b >> 16) | 0x40u;\n"
        "  return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;\n"
        "}}\n",
        q, u, f, let, d_.f32_bits("x"));
  }
  return fmt::format(
      "{0}{1} kiln_f32_to_f16({2} x) {{\n"
      "  {1} b = {3};\n"
      "  {4}{1} sign = (b >> 16) & 0x8000u;\n"
      "  {4}{1} a = b & 0x7fffffffu;\n"
      "  if (a > 0x7f800000u) return sign | 0x7e00u;\n"
      "  if (a >= 0x477ff000u) return sign | 0x7c00u;\n"  // 65520 and up round to infinity
      "  {1} q, rest, midway;\n"
      "  if (a < 0x38800000u) {{\n"  // below 2^-14: a multiple of 2^-24 (zero below 2^-25)
      "    {4}{1} e = a >> 23;\n"
      "    if (e < 102u) return sign;\n"
      "    {4}{1} m = (a & 0x7fffffu) | 0x800000u;\n"
      "    {4}{1} shift = 126u - e;\n"
      "    q = m >> shift; rest = m & ((1u << shift) - 1u); midway = 1u << (shift - 1u);\n"
      "  }} else {{\n"
      "    {4}{1} r = a - 0x38000000u;\n"  // the exponent rebiased from 127 to 15
      "    q = r >> 13; rest = r & 0x1fffu; midway = 0x1000u;\n"
      "  }}\n"
      "  if (rest > midway || (rest == midway && (q & 1u) != 0u)) q += 1u;\n"
      "  return sign | q;\n"
      "}}\n"
      "{0}{2} kiln_f16_to_f32({1} h) {{\n"
      "  {4}{1} sign = (h & 0x8000u) << 16;\n"
      "  {4}{1} e = (h >> 10) & 0x1fu;\n"
      "  {4}{1} m = h & 0x3ffu;\n"
      "  if (e == 0x1fu) return {5};\n"
      "  if (e == 0u) {{\n"
      "    {4}{2} v = {6} * {7};\n"
      "    return sign != 0u ? -v : v;\n"
      "  }}\n"
      "  return {8};\n"
      "}}\n",
      q, u, f, d_.f32_bits("x"), let, d_.bits_f32("(sign | 0x7f800000u | (m << 13))"), d_.convert("m", f),
      d_.float_literal(0x1p-24, DType::F32), d_.bits_f32("(sign | ((e + 112u) << 23) | (m << 13))"));
}

// The helper functions named in `helpers`, each once.
std::string helper_functions(const std::set<std::string>& helpers, const CDialect& d_) {
  const std::string q = d_.helper_qualifier().empty() ? "" : d_.helper_qualifier() + " ";
  std::string out;
  for (const std::string& h : helpers) {
    if (h.starts_with("max_") || h.starts_with("min_")) {
      // IEEE 754-2019 maximum/minimum, as the interpreter: NaN wins, +0 > -0.
      const bool max = h.starts_with("max_");
      const DType t = h.substr(4, 3) == "f64" ? DType::F64 : DType::F32;
      if (const size_t x = h.find('x', 4); x != std::string::npos) {  // on vectors (max_f32x16): selects per element
        const std::string ty = d_.vector_type(t, std::stoi(h.substr(x + 1)));
        out += fmt::format("{0}{1} kiln_{2}({1} a, {1} b) {{\n"
                           "  return ({3} | {4}) ? a + b : a == b ? ({5} ? {6} : {7}) : (a {8} b ? a : b);\n"
                           "}}\n",
                           q, ty, h, d_.is_nan("a"), d_.is_nan("b"), d_.sign_bit("a", t), max ? "b" : "a",
                           max ? "a" : "b", max ? ">" : "<");
        continue;
      }
      const std::string ty = d_.type(t);
      out += fmt::format(
          "{0}{1} kiln_{2}_{3}({1} a, {1} b) {{\n"
          "  if ({4} || {5}) return a + b;\n"
          "  if (a == b) return {6} ? {7} : {8};\n"
          "  return a {9} b ? a : b;\n"
          "}}\n",
          q, ty, max ? "max" : "min", dtype_name(t), d_.is_nan("a"), d_.is_nan("b"), d_.sign_bit("a", t),
          max ? "b" : "a", max ? "a" : "b", max ? ">" : "<");
    } else if (h.starts_with("ipow_")) {
      const DType t = h == "ipow_i64" ? DType::I64 : DType::I32;
      const std::string l = d_.type(t), u = d_.unsigned_type(t);
      // Square-and-multiply on unsigned bits (wraps); a negative exponent gives 0 unless
      // the base is 1 or -1.
      // Literals typed as the operands (GLSL converts no int literal to int64_t implicitly
      // in every position).
      const std::string zero = d_.int_literal(0, t), one = d_.int_literal(1, t), minus_one = d_.int_literal(-1, t),
                        uone = d_.convert(one, u), uzero = d_.convert(zero, u);
      out += fmt::format(
          "{0}{1} kiln_ipow_{11}({1} base, {1} e) {{\n"
          "  if (e < {6}) return base == {7} ? {7} : base == {8} ? ((e & {7}) != {6} ? {8} : {7}) : {6};\n"
          "  {2} r = {9}, b = {3};\n"
          "  for ({2} n = {4}; n != {10}; n >>= 1) {{\n"
          "    if ((n & {9}) != {10}) r *= b;\n"
          "    b *= b;\n"
          "  }}\n"
          "  return {5};\n"
          "}}\n",
          q, l, u, d_.bitcast("base", t, true), d_.bitcast("e", t, true), d_.bitcast("r", t, false), zero, one, minus_one,
          uone, uzero, dtype_name(t));
    } else if (h.starts_with("mod_") || h.starts_with("fmod_")) {
      out += remainder_helper(h, q, d_);
    } else if (h == "f16" || h == "bf16") {
      out += small_float_helpers(h, q, d_);
    } else if (h == "f64_to_f32_odd") {
      // kir::kCastToOdd, as llvm_codegen's emit_f64_to_f32_odd.
      const std::string u = d_.unsigned_type(DType::I32), f = d_.type(DType::F32), dbl = d_.type(DType::F64);
      out += fmt::format(
          "{0}{1} kiln_f64_to_f32_odd({2} x) {{\n"
          "  {5}{1} y = {3};\n"
          "  {5}{2} back = {4};\n"
          "  if (!(back != x) || x != x) return y;\n"
          "  {6} b = {7};\n"
          "  if ({9}(back) > {9}(x)) b -= 1u;\n"
          "  return {8};\n"
          "}}\n",
          q, f, dbl, d_.convert("x", f), d_.convert("y", dbl), d_.let(), u, d_.f32_bits("y"), d_.bits_f32("(b | 1u)"), d_.math("fabs", DType::F64));
    } else if (h.starts_with("kiln_")) {
      out += d_.helper(h);
    }
  }
  const bool rand = std::any_of(helpers.begin(), helpers.end(), [](const std::string& h) { return h.starts_with("rand_"); });
  if (rand) {
    const std::string u = d_.unsigned_type(DType::I32);
    // scalar::rand_uniform, bit for bit: "lowbias32" hashing of the index's halves.
    out += fmt::format(
        "{0}{1} kiln_hash32({1} x) {{\n"
        "  x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;\n"
        "  return x;\n"
        "}}\n"
        "{0}{1} kiln_rand_bits({2} i, {1} key) {{\n"
        "  {5}{3} u = {4};\n"
        "  return kiln_hash32({6} ^ kiln_hash32({7} ^ key));\n"
        "}}\n",
        q, u, d_.type(DType::I64), d_.unsigned_type(DType::I64), d_.bitcast("i", DType::I64, true), d_.let(),
        d_.convert("u", u), d_.convert("(u >> 32)", u));
    for (DType t : {DType::F32, DType::F64}) {
      if (!helpers.count(fmt::format("rand_{}", dtype_name(t)))) continue;
      out += fmt::format("{0}{1} kiln_rand_{2}({3} i, {4} key) {{\n"
                         "  return {6} * {5};\n"
                         "}}\n",
                         q, d_.type(t), dtype_name(t), d_.type(DType::I64), u, d_.float_literal(1.0 / 16777216.0, t),
                         d_.convert("(2u * (kiln_rand_bits(i, key) >> 9) + 1u)", d_.type(t)));
    }
  }
  return out;
}

std::vector<std::optional<std::string>> CEmitter::flat_offsets() const {
  std::vector<std::optional<std::string>> flat(k_.insts.size());
  if (kept_dims_.empty()) return flat;
  std::vector<int64_t> row_major(static_cast<size_t>(k_.domain.rank()), 0);
  int64_t stride = 1;
  for (auto d = kept_dims_.rbegin(); d != kept_dims_.rend(); ++d) {
    row_major[static_cast<size_t>(*d)] = stride;
    stride *= k_.domain[*d];
  }
  const std::vector<std::optional<Affine>> affine = affine_analysis(k_);
  for (size_t r = 0; r < k_.insts.size(); ++r) {
    // In the index type: a position (or, with 64-bit indices, any i64 value).
    const std::optional<Affine>& a = affine[r];
    if (!a || !(index_[r] || (idx_ == DType::I64 && k_.insts[r].type == DType::I64))) continue;
    // The terms added to `it` are not negative: the whole is in the index type's range
    // (index_fits_32), so every partial sum is too.
    bool flat_in_kept = a->base >= 0, moves = false;
    std::string text = "it";
    for (int d = 0; d < k_.domain.rank() && flat_in_kept; ++d) {
      const int64_t st = a->stride[static_cast<size_t>(d)];
      if (k_.domain[d] == 1) continue;  // always 0: its stride does not matter
      if (k_.reduced[static_cast<size_t>(d)]) {
        flat_in_kept = st >= 0;
        if (st > 0) text += fmt::format(" + {} * d{}", idx_literal(st), d);
      } else {
        flat_in_kept = st == row_major[static_cast<size_t>(d)];
        moves = true;
      }
    }
    if (!flat_in_kept || !moves) continue;
    if (a->base > 0) text += " + " + idx_literal(a->base);
    flat[r] = text == "it" ? text : "(" + text + ")";
  }
  return flat;
}

std::string CEmitter::emit(std::set<std::string>& helpers, bool& doubles) {
  flat_ = flat_offsets();
  const std::string idx = idx_type();
  Scope top;
  top.indent = 1;
  top.has.assign(k_.insts.size(), 0);
  Scope point = child(top, 0);
  uint64_t kept_mask = 0;
  for (int dim : kept_dims_) kept_mask |= uint64_t{1} << dim;
  point.dims = kept_mask;

  // The walk's counter: `it`, the flat index of a kept point, or with kept lanes (case B)
  // `wi`, whose `lanes_` points start at it = wi * lanes_.
  const bool kept_lanes = lanes_ > 1 && !lanes_reduced_;
  const std::string counter = kept_lanes ? "wi" : "it";
  const int64_t walk = kept_lanes ? kept_points_ / lanes_ : kept_points_;
  std::string n = idx_literal(walk);
  // With its rows bound at launch (kir::rows_at_launch) the count is the launch's rows times
  // a row's points, and a grid of any size walks it.
  const bool rows_at_launch = k_.rows_arg >= 0;
  if (rows_at_launch) {
    const int rows = rows_dim(k_);
    int64_t per_row = 1;
    for (int d : kept_dims_)
      if (d != rows) per_row *= k_.domain[d];
    if (kept_lanes) per_row /= lanes_;
    n = fmt::format("(s{} * {})", k_.rows_arg, idx_literal(per_row));
  }
  const bool grid_stride = s_.work_items.elements_per_item > 1 || rows_at_launch;
  const std::string first = group_per_row_ ? d_.group_id(idx_) : d_.global_id(idx_);
  const std::string step = group_per_row_ ? d_.group_count(idx_) : d_.global_size(idx_);
  std::string head, tail;
  if (k_.in_order && k_.rows_independent && k_.domain.rank() > 0) {
    // A row per work-item (grid-stride over rows), its points walked in order.
    const int64_t row = k_.domain[k_.domain.rank() - 1];
    head = fmt::format("for ({0} row = {1}; row < {2}; row += {3}) {{\n    for ({0} it = row * {4}; it < row * {4} + {4}; ++it) {{",
                       idx, first, idx_literal(row == 0 ? 0 : walk / row), step, idx_literal(row));
    tail = "  }\n";
    point.indent = 3;
  } else if (grid_stride) {
    head = fmt::format("for ({0} {4} = {1}; {4} < {2}; {4} += {3}) {{", idx, first, n, step, counter);
  } else if (!group_per_row_ && s_.work_items.global_size == walk) {
    // Exactly one work-item per point: no guard (PoCL vectorizes a work-group's loop over
    // its work-items only when no work-item returns early).
    head = fmt::format("{{\n    {}{} {} = {};", d_.let(), idx, counter, first);
    point.indent = 2;
  } else {
    head = fmt::format("{{\n    {0}{1} {4} = {2};\n    if ({4} >= {3}) return;", d_.let(), idx, first, n, counter);
    point.indent = 2;
  }
  if (kept_lanes) line(point, fmt::format("{}{} it = wi * {};", d_.let(), idx, idx_literal(lanes_)));
  define_dims(point, kept_dims_, "it");
  if (s_.work_items.reduction == ReductionStrategy::Serial) {  // a row per work-item: its own row cache
    const std::vector<Ref> cached = row_cached_values(k_, s_);
    cached_.assign(cached.empty() ? 0 : k_.insts.size(), 0);
    cache_filled_.assign(cached_.size(), 0);
    for (Ref r : cached) {
      cached_[static_cast<size_t>(r)] = 1;
      const DType t = k_.insts[static_cast<size_t>(r)].type;
      line(point, vector_value(r) ? fmt::format("{} c{}[{}];", d_.vector_type(t, lanes_), r, reduced_points_ / lanes_)
                                  : fmt::format("{} c{}[{}];", d_.type(t), r, reduced_points_));
    }
  }
  for (int st = 1; st <= stages_; ++st) emit_stage(point, st);
  part_branches_ = !k_.parts.empty() && stages_ == 0;
  emit_stores(point);

  const std::string dbl = d_.type(DType::F64);
  const std::string helper_text = helper_functions(helpers_, d_);
  doubles = uses_double_ || (fp64_ && (point.text.find(dbl) != std::string::npos || top.text.find(dbl) != std::string::npos ||
                                       helper_text.find(dbl) != std::string::npos || locals_.find(dbl) != std::string::npos));
  helpers.insert(helpers_.begin(), helpers_.end());
  std::string out = entry_with_locals(d_, d_.entry(k_, s_), locals_);
  out += top.text;
  out += "  " + head + "\n";
  out += point.text;
  out += tail;
  out += "  }\n}\n";
  return out;
}

std::string CEmitter::emit_point(std::set<std::string>& helpers, int indent, int replaced_buffer,
                                 std::string_view replacement) {
  KILN_ASSERT(reduced_dims_.empty(), "a point of a kernel without reductions");
  replaced_buffer_ = replaced_buffer;
  replacement_ = std::string(replacement);
  Scope point;
  point.indent = indent;
  point.has.assign(k_.insts.size(), 0);
  for (int dim : kept_dims_) point.dims |= uint64_t{1} << dim;
  emit_stores(point);
  helpers.insert(helpers_.begin(), helpers_.end());
  return point.text;
}

}  // namespace

std::string emit_c_point(const Kernel& k, const Capabilities& caps, const CDialect& dialect, std::set<std::string>& helpers,
                         int indent, int replaced_buffer, std::string_view replacement) {
  KILN_ASSERT(k.customs.empty(), "a GEMM epilogue calling custom kernels (gemm_epilogue_source leaves them out)");
  const Schedule serial;
  return CEmitter(k, serial, caps, dialect).emit_point(helpers, indent, replaced_buffer, replacement);
}

std::string emit_c_helpers(const std::set<std::string>& helpers, const CDialect& dialect) {
  return helper_functions(helpers, dialect);
}

std::string entry_with_locals(const CDialect& dialect, std::string_view header, std::string_view locals) {
  std::string out;
  if (dialect.local_arrays_global()) out += locals;
  out += header;
  out += "\n";
  if (!dialect.local_arrays_global())
    for (size_t pos = 0; pos < locals.size();) {
      const size_t end = locals.find('\n', pos);
      out += "  ";
      out += locals.substr(pos, end - pos + 1);
      pos = end + 1;
    }
  return out;
}

void check_dtypes(const Kernel& k, const Capabilities& caps, const DeviceNames& names) {
  for (const BufferParam& b : k.buffers)
    if (dtype_size(b.type.dtype) == 2 && !caps.storage16)
      throw Error(fmt::format("kernel @{}: %{} of type {} cannot live on {}: the device has no {}", k.name, b.name,
                              b.type.str(), names.device, names.storage16_feature));
  for (const Inst& in : k.insts) {
    const bool f64 = in.type == DType::F64, i64 = in.type == DType::I64;
    if ((f64 && !caps.fp64) || (i64 && !caps.int64)) {
      const std::string what =
          in.code == Code::Op || in.code == Code::Reduce ? std::string(op_info(in.op).name) : std::string("a value");
      throw Error(fmt::format("kernel @{}: {} of type {} cannot run on {}: the device has no {}", k.name, what,
                              dtype_name(in.type), names.device, f64 ? names.f64_feature : names.i64_feature));
    }
  }
}

// The GLSL dialect's fmod (also float mod's) shifts and subtracts once per bit of its
// operands' exponent difference, at worst 276 + 3 x 23 + 1 times in f32 and 2098 + 3 x 52 + 1
// in f64 (glsl_dialect.cpp), and lavapipe counts those iterations against the same budget
// as the kernel's own.
int64_t helper_iterations_per_point(const Kernel& k) {
  int64_t n = 0;
  for (const Inst& in : k.insts)
    if (in.code == Code::Op && (in.op == OpKind::Fmod || in.op == OpKind::Mod) && is_float(in.type))
      n += in.type == DType::F64 ? 2255 : 346;
  return n;
}

int64_t c_loop_iterations(const Kernel& k, const Schedule& s, const Capabilities& caps) {
  // Per iteration of the walk: each stage's pass along the reduced dims (shared out among a
  // group's work-items when a group reduces a row) and the combining after it, then one more
  // pass for the stores that need the reduced dims. (CEmitter::emit writes these loops.)
  // Every point a pass visits may run its helpers' loops too.
  int64_t reduced = 1;
  bool reduces = false;
  for (int i = 0; i < k.domain.rank(); ++i)
    if (k.reduced[static_cast<size_t>(i)]) reduced *= k.domain[i], reduces = true;
  const int64_t items = std::max<int64_t>(1, s.work_items.elements_per_item);
  const int64_t helpers = helper_iterations_per_point(k);
  const int64_t points_per_trip = std::max(1, s.vector_width);  // a work-item's lanes
  // An in-order walk by rows: each of a work-item's rows is a loop of its own.
  const int64_t row = k.in_order && k.rows_independent && k.domain.rank() > 0 ? k.domain[k.domain.rank() - 1] : 1;
  if (!reduces) return items * row * (1 + points_per_trip * helpers);
  const std::vector<int> stage = reduction_stage(k);
  int stages = 0;
  for (size_t i = 0; i < k.insts.size(); ++i)
    if (k.insts[i].code == Code::Reduce) stages = std::max(stages, stage[i]);
  const WorkItemSchedule& w = s.work_items;
  const bool group_per_row = w.reduction != ReductionStrategy::Serial && s.lanes_reduce && w.local_size > 1;
  const bool subgroups = group_per_row && w.reduction == ReductionStrategy::Subgroup;
  // A row's lanes (the last dim reduced, Schedule::vector_width) step several elements per trip.
  const int64_t lanes = s.lanes_reduce && s.vector_width > 1 ? s.vector_width : 1;
  const int64_t step = (group_per_row ? w.local_size : 1) * lanes;
  const int64_t per_pass = (reduced + step - 1) / step;
  int64_t combine = 0;
  if (group_per_row) {
    for (int64_t h = 1; h < (subgroups ? caps.subgroup_size : w.local_size); h *= 2) ++combine;
    if (subgroups) combine += w.local_size / caps.subgroup_size;
  }
  return items * (1 + (stages + 1) * per_pass * (1 + points_per_trip * helpers) + stages * combine);
}

void check_loop_budget(int64_t iterations, const Capabilities& caps, std::string_view what) {
  if (caps.max_loop_iterations > 0 && iterations > caps.max_loop_iterations)
    throw Error(fmt::format("{} would run up to {} loop iterations per work-item, and this device ends a work-item's loops "
                            "after {} (lavapipe's LP_MAX_TGSI_LOOP_ITERATIONS): its results would be wrong",
                            what, iterations, caps.max_loop_iterations));
}

void check_custom_languages(const Kernel& k, const CDialect& dialect) {
  for (const auto& c : k.customs)
    if (!dialect.takes_custom(c->language))
      throw Error(fmt::format("custom kernel @{} is written in {}, which this device cannot compile (its kernels are {})",
                              c->name, c->language == CustomLanguage::C ? "C" : "OpenCL C", dialect.language()));
}

// Each custom kernel's source once per program (a second copy would define its functions
// twice): custom_macro_groups keeps kernels that want other macro values out of the program.
// A custom kernel's source is numbered as its own file (`#line`), so that a compiler's error in
// it names the user's file and line, not the program's; the program's numbering resumes
// after it, `first_line` being the line the returned text starts at.
std::string custom_functions(std::span<const Kernel* const> kernels, std::span<const Schedule* const> schedules,
                             int64_t first_line) {
  std::map<std::string, std::vector<std::pair<std::string, int64_t>>> done;  // by digest
  std::string out;
  auto quoted = [](std::string_view file) {
    std::string q;
    for (char ch : file) q += ch == '"' || ch == '\\' ? std::string("\\") + ch : std::string(1, ch);
    return q;
  };
  for (size_t i = 0; i < kernels.size(); ++i)
    for (size_t c = 0; c < kernels[i]->customs.size(); ++c) {
      const CustomKernel& ck = *kernels[i]->customs[c];
      const auto macros = custom_macro_values(*kernels[i], *schedules[i], c);
      if (auto it = done.find(ck.digest); it != done.end()) {
        KILN_ASSERT(it->second == macros, "one program, one set of macro values per custom kernel (custom_macro_groups)");
        continue;
      }
      done.emplace(ck.digest, macros);
      for (const auto& [name, value] : macros) out += fmt::format("#define {} {}\n", name, value);
      out += fmt::format("// custom kernel @{} ({})\n#line 1 \"{}\"\n{}\n", ck.name, ck.source_file, quoted(ck.source_file),
                         ck.source);
      const auto lines = static_cast<int64_t>(std::count(out.begin(), out.end(), '\n'));
      out += fmt::format("#line {} \"kiln-program.cl\"\n", first_line + lines + 1);
      for (const auto& [name, value] : macros) out += fmt::format("#undef {}\n", name);
    }
  return out;
}

std::vector<std::vector<size_t>> custom_macro_groups(std::span<const Kernel* const> kernels,
                                                     std::span<const Schedule* const> schedules) {
  using Macros = std::vector<std::pair<std::string, int64_t>>;
  std::vector<std::vector<size_t>> groups;
  std::vector<std::map<std::string, Macros>> chosen;  // per group: the macros of each digest
  for (size_t i = 0; i < kernels.size(); ++i) {
    auto fits = [&](const std::map<std::string, Macros>& g) {
      for (size_t c = 0; c < kernels[i]->customs.size(); ++c)
        if (auto it = g.find(kernels[i]->customs[c]->digest);
            it != g.end() && it->second != custom_macro_values(*kernels[i], *schedules[i], c))
          return false;
      return true;
    };
    size_t g = 0;
    while (g < groups.size() && !fits(chosen[g])) ++g;
    if (g == groups.size()) {
      groups.emplace_back();
      chosen.emplace_back();
    }
    groups[g].push_back(i);
    for (size_t c = 0; c < kernels[i]->customs.size(); ++c)
      chosen[g].emplace(kernels[i]->customs[c]->digest, custom_macro_values(*kernels[i], *schedules[i], c));
  }
  return groups;
}

std::string emit_c_program(std::span<const Kernel* const> kernels, std::span<const Schedule* const> schedules,
                           const Capabilities& caps, const CDialect& dialect) {
  KILN_ASSERT(kernels.size() == schedules.size(), "a schedule per kernel");
  for (const Kernel* k : kernels) check_custom_languages(*k, dialect);
  std::set<std::string> helpers;
  bool doubles = false;
  std::string entries;
  for (size_t i = 0; i < kernels.size(); ++i) {
    bool d = false;
    check_loop_budget(c_loop_iterations(*kernels[i], *schedules[i], caps), caps, fmt::format("kernel @{}", kernels[i]->name));
    entries += CEmitter(*kernels[i], *schedules[i], caps, dialect).emit(helpers, d);
    doubles |= d;
  }
  const bool subgroups = std::any_of(schedules.begin(), schedules.end(), [](const Schedule* s) {
    return s->work_items.reduction == ReductionStrategy::Subgroup && s->lanes_reduce && s->work_items.local_size > 1;
  });
  const std::string head = dialect.prologue(kernels, doubles, subgroups) + helper_functions(helpers, dialect);
  const auto head_lines = static_cast<int64_t>(std::count(head.begin(), head.end(), '\n'));
  return head + custom_functions(kernels, schedules, head_lines + 1) + entries;
}

}  // namespace kiln::kir
