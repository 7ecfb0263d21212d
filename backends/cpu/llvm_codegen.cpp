// backends/cpu/llvm_codegen.cpp - Kernel IR -> LLVM IR, vectorized by construction.
//
// The last domain dim is the vector dim: every instruction is emitted at a width W (W lanes
// of the last dim at once, or 1 in remainder loops). An emitted value is kept in the cheapest
// form that is exact for all lanes: uniform (one scalar for every lane), affine (a scalar base
// plus a known stride per lane: index arithmetic along the vector dim) or a full vector. A
// load whose offset is affine with stride 1 is one vector load, a uniform load is a scalar
// load and a splat, anything else is a gather. The loop structure follows kir::Schedule:
//   case A (last dim reduced): per kept point, each reduction stage is a vector loop over
//     the row with W accumulators per reduction, folded pairwise at the end of the row;
//   case B (last dim kept): per tile of the last dim, each stage loops over the reduced dims
//     with one accumulator per lane of the tile, kept in a small array.
// Float sums and products of f32 accumulate in f64.
#include "llvm_codegen.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <llvm/IR/CFG.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/Linker/Linker.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <fmt/format.h>

#include "kiln/codegen/schedule.h"
#include "kiln/ir/scalar_semantics.h"
#include "kiln/support/error.h"
#include "clang_compiler.h"
#include "vector_math.h"

namespace kiln::cpu {
namespace {

using kir::Code;
using kir::Inst;
using kir::Ref;
using llvm::Value;

struct Val {
  enum Kind : uint8_t { Uniform, Affine, Vector };
  Value* v = nullptr;
  Kind kind = Uniform;
  int64_t stride = 0;  // Affine: lane l holds v + stride * l
};

bool is_arg_reduce(OpKind op) { return op_info(op).has(trait::ArgReduce); }

class KernelEmitter {
 public:
  KernelEmitter(const kir::Kernel& k, const kir::Schedule& schedule, llvm::LLVMContext& ctx, llvm::Module& m,
                bool f16c)
      : k_(k), ctx_(ctx), m_(m), b_(ctx), deps_(kir::dim_dependence(k)), stage_(kir::reduction_stage(k)),
        sched_(schedule), f16c_(f16c) {
    for (const Inst& in : k.insts)
      if (in.code == Code::Reduce) num_stages_ = std::max(num_stages_, stage_[&in - k.insts.data()]);
    seen_.assign(k.insts.size(), 0);
    affine_ = kir::affine_analysis(k);
    // Along a reduced row, `accumulators` registers' worth of lanes per step: independent
    // accumulator chains (LLVM splits the wide vectors into native registers).
    width_ = static_cast<unsigned>(std::clamp(sched_.vector_width, 1, 64));
    if (sched_.lanes_reduce) width_ = std::min(width_ * static_cast<unsigned>(std::max(1, sched_.accumulators)), 64u);
    int64_t run = 1;  // values one accumulator lane adds in sequence
    for (int d = 0; d < k.domain.rank(); ++d)
      if (k.reduced[static_cast<size_t>(d)]) run *= k.domain[d];
    if (sched_.lanes_reduce) run /= width_;
    long_runs_ = run > sched_.f32_run;
    rank_ = k.domain.rank();
    lane_dim_ = rank_ - 1;
    if (sched_.cpu.split_lanes) lane_bounds_ = kir::lane_bounds(k, affine_, lane_dim_);
    if (sched_.cpu.split_rows && !sched_.lanes_reduce) row_bounds_ = kir::window_row_bounds(k, affine_, lane_dim_);
    if (sched_.cpu.split_lanes < 2) std::erase_if(lane_bounds_, [](const kir::LaneBound& b) { return !kir::is_cut(b); });
    for (const kir::LaneBound& b : lane_bounds_)
      if (kir::is_cut(b) && kir::cut_lane(b) > 0 && kir::cut_lane(b) < k.domain[lane_dim_]) cuts_.push_back(kir::cut_lane(b));
    std::sort(cuts_.begin(), cuts_.end());
    cuts_.erase(std::unique(cuts_.begin(), cuts_.end()), cuts_.end());
    // Along a reduced row every stretch leaves up to width - 1 lanes to the one scalar
    // accumulator: its run is that many per row of the outer reduced dims, however short
    // the vector lanes' runs are.
    if (sched_.lanes_reduce && !lane_bounds_.empty()) {
      const bool interior = std::any_of(lane_bounds_.begin(), lane_bounds_.end(), [](const kir::LaneBound& b) { return !kir::is_cut(b); });
      int64_t scalar_run = static_cast<int64_t>(cuts_.size() + 1) * (interior ? 3 : 1) * (int64_t{width_} - 1);
      for (int d = 0; d + 1 < k.domain.rank(); ++d)
        if (k.reduced[static_cast<size_t>(d)]) scalar_run *= k.domain[d];
      long_runs_ = long_runs_ || scalar_run > sched_.f32_run;
    }
  }

  void emit(const std::string& name);
  /// The functions of Kernel::customs, linked into the module already.
  void use_customs(std::vector<llvm::Function*> fns) { customs_ = std::move(fns); }

 private:
  // ---- types ----
  llvm::Type* reg_type(DType t) {
    switch (t) {
      case DType::Bool: return b_.getInt1Ty();
      case DType::I32: return b_.getInt32Ty();
      case DType::I64: return b_.getInt64Ty();
      case DType::F32: return b_.getFloatTy();
      case DType::F64: return b_.getDoubleTy();
      default: break;
    }
    KILN_ASSERT(false, "Kernel IR computes in the compute types only");
  }
  // A buffer element: storage types (dtype.h) in their own width; bool as a byte.
  llvm::Type* mem_type(DType t) {
    switch (t) {
      case DType::Bool:
      case DType::I8:
      case DType::U8: return b_.getInt8Ty();
      case DType::I16:
      case DType::U16:
      case DType::F16:  // bits: LLVM's own half arithmetic and conversions do not vectorize here
      case DType::BF16: return b_.getInt16Ty();
      case DType::U32: return b_.getInt32Ty();
      case DType::U64: return b_.getInt64Ty();
      default: return reg_type(t);
    }
  }
  /// `v`, elements of buffer type `t`, in t's compute type (and back): vectors lane-wise.
  Value* from_memory(Value* v, DType t);
  Value* to_memory(Value* v, DType t);
  /// The Kernel IR's narrow: `v` (compute type) wrapped or rounded into storage type `t`.
  Value* emit_narrow(Value* v, DType t);
  /// f32 `v` as the bits of the nearest f16 (ties to even), in i32; and f16 bits (i16) as
  /// the f32 of the same value.
  Value* f32_to_f16_bits(Value* v);
  Value* f16_bits_to_f32(Value* bits);
  Value* f16c_convert(Value* v);
  llvm::Type* vec_type(llvm::Type* t, unsigned w) { return w == 1 ? t : llvm::FixedVectorType::get(t, w); }
  // f32 products accumulate in f64 (their range). f32 sums too, except where each
  // accumulator lane adds at most Schedule::f32_run values: those add in f32 (short blocks, then the
  // lanes pairwise: about as accurate, and twice as fast), and a row or tile whose f32 sum
  // overflows is summed again in f64, so results have the f64 range the IR promises.
  DType acc_type(const Inst& r) const {
    if (r.type != DType::F32) return r.type;
    if (r.op == OpKind::ReduceProd) return DType::F64;  // f32 products underflow and overflow
    return r.op == OpKind::ReduceSum && (long_runs_ || wide_sums_) ? DType::F64 : r.type;
  }
  Value* i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }
  // Accumulator arrays hold bools as bytes: a vector of i1 in memory is bit-packed, which
  // lane-wise stores and vector loads would disagree on.
  Value* to_acc_memory(Value* v, DType t, unsigned w) {
    return t == DType::Bool ? b_.CreateZExt(v, vec_type(b_.getInt8Ty(), w)) : v;
  }
  Value* from_acc_memory(Value* v, DType t, unsigned w) {
    return t == DType::Bool ? b_.CreateICmpNE(v, llvm::Constant::getNullValue(vec_type(b_.getInt8Ty(), w))) : v;
  }

  // ---- one body at width w ----
  struct Ctx {
    unsigned w = 1;
    std::vector<Value*> dims;  // i64 per domain dim; the lane dim's is lane 0's index
    std::vector<std::optional<Val>> memo;
    std::function<Val(Ref)> reduce_value;
    // In a masked step (Schedule's cpu.masked_tail), the lanes inside the walk: every
    // vector load and store is masked by them. Null in every other step.
    Value* live = nullptr;
  };
  Ctx make_ctx(unsigned w, const std::vector<Value*>& dims, std::function<Val(Ref)> reduce_value) {
    Ctx c;
    c.w = w;
    c.live = w > 1 ? live_ : nullptr;
    c.dims = dims;
    c.memo.resize(k_.insts.size());
    for (const auto& [r, holds] : known_) c.memo[static_cast<size_t>(r)] = Val{b_.getInt1(holds), Val::Uniform};
    c.reduce_value = std::move(reduce_value);
    return c;
  }
  // The value of `r` in context `c`, computing first (deepest first, without recursion: a
  // long fused chain is a deep DAG) every argument `c` has not computed yet. A reduction's
  // arguments belong to its own loops, never to the context that reads its result.
  Val get(Ctx& c, Ref r) {
    if (c.memo[static_cast<size_t>(r)]) return *c.memo[static_cast<size_t>(r)];
    if (++epoch_ == 0) {
      std::fill(seen_.begin(), seen_.end(), 0);
      epoch_ = 1;
    }
    std::vector<Ref> todo{r}, order;
    seen_[static_cast<size_t>(r)] = epoch_;
    while (!todo.empty()) {
      const Ref x = todo.back();
      todo.pop_back();
      order.push_back(x);
      const Inst& in = k_.insts[static_cast<size_t>(x)];
      if (in.code == Code::Reduce) continue;
      for (Ref a : in.args) {
        auto& s = seen_[static_cast<size_t>(a)];
        if (s == epoch_ || c.memo[static_cast<size_t>(a)]) continue;
        s = epoch_;
        todo.push_back(a);
      }
    }
    std::sort(order.begin(), order.end());  // SSA: arguments come first
    for (Ref x : order) c.memo[static_cast<size_t>(x)] = row_cached(c, x);
    return *c.memo[static_cast<size_t>(r)];
  }
  std::vector<uint32_t> seen_;  // per instruction: the epoch of get() that last queued it
  std::vector<std::optional<kir::Affine>> affine_;  // the shared analysis, per instruction
  uint32_t epoch_ = 0;
  // Case A's row cache: an expensive value that several passes over a row need (softmax's
  // exp(x - max) in its sum and in its output) is computed in the first pass and kept in a
  // row-sized stack buffer for the others.
  struct RowCache {
    std::map<Ref, llvm::AllocaInst*> buffers;
    std::set<Ref> filled;        // written by an earlier pass
    Value* offset = nullptr;     // the lane-0 position in the row, in the current pass
  };
  RowCache row_cache_;
  void plan_row_cache();
  Val row_cached(Ctx& c, Ref r);
  Value* vector_of(Ctx& c, const Val& x) {
    if (c.w == 1 || x.kind == Val::Vector) return x.v;
    Value* splat = b_.CreateVectorSplat(c.w, x.v);
    if (x.kind == Val::Uniform) return splat;
    std::vector<llvm::Constant*> lanes;
    for (unsigned l = 0; l < c.w; ++l) lanes.push_back(b_.getInt64(static_cast<uint64_t>(x.stride * l)));
    return b_.CreateAdd(splat, llvm::ConstantVector::get(lanes));
  }
  // <0, 1, ..., w - 1> as 32-bit lane numbers: a compare with a splat threshold is a mask.
  Value* lane_numbers(unsigned w) {
    std::vector<llvm::Constant*> lanes;
    for (unsigned l = 0; l < w; ++l) lanes.push_back(b_.getInt32(l));
    return llvm::ConstantVector::get(lanes);
  }
  // The mask of a `width_`-lane vector whose lanes below `count` (an i64) are on.
  Value* lanes_below(Value* count) {
    Value* n = b_.CreateVectorSplat(width_, b_.CreateTrunc(count, b_.getInt32Ty()));
    return b_.CreateICmpSLT(lane_numbers(width_), n);
  }
  // Whether a walk of lanes ends in one masked vector step (Schedule's cpu.masked_tail). Not
  // in a walk split into stretches: a stretch's masked step would add into the accumulators
  // of the next stretch's lanes.
  bool masked_tail() const {
    return sched_.cpu.masked_tail > 0 && sched_.cpu.split_lanes == 0 && !sched_.lanes_reduce && width_ > 1 &&
           lane_dim_ >= 0;
  }
  // The width of the steps a reduced row takes after its `accumulators`-wide ones, before
  // single lanes (one vector register's worth); 0 where there are none.
  unsigned middle_width() const {
    const auto vector = static_cast<unsigned>(std::max(1, sched_.vector_width));
    return width_ > vector && vector > 1 ? vector : 0;
  }
  Val compute(Ctx& c, Ref r);
  std::optional<Val> lane_threshold_compare(Ctx& c, const Inst& in, const std::vector<Val>& args);
  Value* emit_op(OpKind op, DType t, DType arg_type, const std::vector<Value*>& a);
  Value* emit_cast(Value* x, DType from, DType to);
  Value* emit_f64_to_f32_odd(Value* x);
  Value* emit_rand(Value* index, int64_t seed, DType t);
  Value* emit_custom_call(const Inst& in, const std::vector<Value*>& args, unsigned w);
  Val emit_load(Ctx& c, const Inst& in);
  Value* emit_remainder(bool floor_mod, bool f, Value* a, Value* b);
  // Lane 0's offset when the offset `offset` (emitted as `off`) is contiguous along the
  // lanes though this emitter tracked it as a full vector; nullptr otherwise.
  Value* contiguous_lane0(Ctx& c, Ref offset, const Val& off);
  void emit_store(Ctx& c, const kir::Store& s);
  // The stores of `k_` that `pick` selects. Every value, offset and guard is computed before
  // the first store: a buffer the memory plan reuses in place may be read by a later store's
  // value at the element an earlier store writes.
  // A store whose guard is known false here (a stretch of lanes outside a concat's operand)
  // is left out, and so is everything only it needs.
  template <class Pick>
  void emit_stores(Ctx& c, Pick pick) {
    std::vector<const kir::Store*> live;
    for (const kir::Store& s : k_.stores) {
      if (!pick(s)) continue;
      if (s.guard != kir::kNoRef && known_false(get(c, s.guard))) continue;
      live.push_back(&s);
      get(c, s.offset);
      get(c, s.value);
    }
    for (const kir::Store* s : live) emit_store(c, *s);
  }
  static bool known_false(const Val& v) {
    auto* k = llvm::dyn_cast<llvm::Constant>(v.v);
    return k != nullptr && k->isNullValue();
  }
  static bool known_true(const Val& v) {
    auto* k = llvm::dyn_cast<llvm::Constant>(v.v);
    return k != nullptr && k->isAllOnesValue();
  }

  // ---- loops ----
  /// for (i = lo; i < hi; i += step) body(i); with `unroll` > 1, LLVM is asked to unroll it
  /// that many times (llvm.loop.unroll.count).
  void loop(Value* lo, Value* hi, Value* step, const std::function<void(Value*)>& body, int unroll = 1);
  /// `!{!"name", value}`, one hint of a loop's metadata.
  llvm::MDNode* loop_hint(const char* name, llvm::Constant* value) {
    return llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, name), llvm::ConstantAsMetadata::get(value)});
  }
  /// Makes `hints` the metadata of the loop whose back-edge is `latch` (a distinct node that
  /// names itself first, as LLVM's loop metadata must).
  void set_loop_hints(llvm::BranchInst* latch, std::vector<llvm::Metadata*> hints) {
    hints.insert(hints.begin(), nullptr);
    llvm::MDNode* loop_id = llvm::MDNode::getDistinct(ctx_, hints);
    loop_id->replaceOperandWith(0, loop_id);
    latch->setMetadata(llvm::LLVMContext::MD_loop, loop_id);
  }
  /// Runs `body` over [lo, hi) of the lane dim: W lanes at a time, then one at a time. Where
  /// the kernel has lane bounds (kir::lane_bounds), the walk splits at its cuts, each
  /// stretch with the cut compares known, and the interval on which the other bounds all
  /// hold at every position in `at` (the positions the body computes at; `dims` if null)
  /// is walked apart with those known true: a padded window's interior without its masks.
  using LaneBody = std::function<void(unsigned, std::vector<Value*>&)>;
  void lane_loops(std::vector<Value*>& dims, Value* lo, Value* hi, const LaneBody& body,
                  const std::vector<std::vector<Value*>>* at = nullptr);
  void lane_interior(std::vector<Value*>& dims, Value* lo, Value* hi, const LaneBody& body,
                     const std::vector<std::vector<Value*>>& at);
  void lane_walk(std::vector<Value*>& dims, Value* lo, Value* hi, const LaneBody& body);
  // floor(n / d) and ceil(n / d) for a constant d > 0.
  Value* floor_div(Value* n, int64_t d) {
    if (d == 1) return n;
    Value* q = b_.CreateSDiv(n, i64(d));
    return b_.CreateSub(q, b_.CreateZExt(b_.CreateICmpSLT(b_.CreateSRem(n, i64(d)), i64(0)), b_.getInt64Ty()));
  }
  Value* ceil_div(Value* n, int64_t d) { return b_.CreateNeg(floor_div(b_.CreateNeg(n), d)); }
  std::vector<kir::LaneBound> lane_bounds_;
  std::vector<kir::LaneBound> row_bounds_;  // Schedule's cpu.split_rows: kir::window_row_bounds
  std::vector<int64_t> cuts_;  // the lanes inside the lane dim where a cut flips, ascending
  std::vector<std::pair<Ref, bool>> known_;  // compares every context made now may take as known
  /// Nested loops over `loop_dims`, then `body`.
  /// `body` at every point of `loop_dims` from the i-th on: loops, or, with `unrolled`, the
  /// body emitted once per point with the dims constants.
  void nest(std::vector<Value*>& dims, const std::vector<int>& loop_dims, size_t i, const std::function<void()>& body,
            bool unrolled = false);
  void decompose(Value* index, const std::vector<int>& over, std::vector<Value*>& dims);

  // ---- reductions ----
  Value* identity(const Inst& r, unsigned w);
  Value* combine(const Inst& r, Value* acc, Value* x);
  void update_arg(const Inst& in, Value* x, Value* pos, Value* pv, Value* pi, Value* ps);
  Value* horizontal(const Inst& r, Value* v);
  std::vector<Ref> reduces_of_stage(int s) const {
    std::vector<Ref> out;
    for (size_t i = 0; i < k_.insts.size(); ++i)
      if (k_.insts[i].code == Code::Reduce && stage_[i] == s) out.push_back(static_cast<Ref>(i));
    return out;
  }
  bool store_is_inner(const kir::Store& s) const {
    uint64_t m = deps_[static_cast<size_t>(s.value)] | deps_[static_cast<size_t>(s.offset)];
    if (s.guard != kir::kNoRef) m |= deps_[static_cast<size_t>(s.guard)];
    for (int d = 0; d < rank_; ++d)
      if (k_.reduced[static_cast<size_t>(d)] && (m >> d & 1)) return true;
    return false;
  }
  // A reduction over no elements: the product is 1, everything else 0 (as the interpreter).
  Value* empty_value(const Inst& r, unsigned w) {
    llvm::Type* t = vec_type(reg_type(r.type), w);
    if (r.op != OpKind::ReduceProd) return llvm::Constant::getNullValue(t);
    return is_float(r.type) ? llvm::ConstantFP::get(t, 1.0) : llvm::ConstantInt::get(t, 1);
  }
  bool empty_reduction() const {
    for (int d = 0; d < rank_; ++d)
      if (k_.reduced[static_cast<size_t>(d)] && k_.domain[d] == 0) return true;
    return false;
  }
  // Case A (Schedule::lanes_reduce): iteration `it` is one kept point; it walks its rows.
  void emit_point_rows(Value* it);
  Value* row_offset(const std::vector<Value*>& dims);
  void prefetch_rows(const std::vector<Value*>& dims, unsigned w, const std::vector<int>& kept, bool stores_later);
  void prefetch_lines(int32_t buffer, const kir::Affine& a, const std::vector<Value*>& dims, int64_t shift, unsigned w,
                      bool write);
  void mark_row_cache_filled(const std::vector<Ref>& reds);
  // Case B: iteration `it` is a tile of lanes along the kept last dim at one outer point.
  void emit_lane_tile(Value* it);

  const kir::Kernel& k_;
  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  llvm::IRBuilder<> b_;
  std::vector<uint64_t> deps_;
  std::vector<int> stage_;
  int num_stages_ = 0;
  unsigned width_ = 1;
  Value* live_ = nullptr;  // the lanes of the masked step being emitted (Ctx::live)
  // `mask` (a vector of bools, or null: every lane) and the live lanes of `c`'s step.
  Value* and_live(const Ctx& c, Value* mask) {
    if (!c.live) return mask;
    return mask ? b_.CreateAnd(mask, c.live) : c.live;
  }
  bool long_runs_ = true;
  bool wide_sums_ = false;  // emitting case A's f64 fallback pass
  kir::Schedule sched_;
  bool f16c_ = false;
  int rank_ = 0;
  int lane_dim_ = -1;
  llvm::Function* fn_ = nullptr;
  std::vector<Value*> bufs_;
  std::vector<Value*> scalars_;  // the launch's scalar arguments (Code::Arg)
  std::vector<llvm::Function*> customs_;
  llvm::BasicBlock* entry_ = nullptr;
};

// ---------------------------------------------------------------------------------------
// Storage types

namespace {
// `scalar` with the vector shape of `like`.
llvm::Type* shaped_like(llvm::Type* scalar, llvm::Value* like) {
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(like->getType())) return llvm::FixedVectorType::get(scalar, vt->getNumElements());
  return scalar;
}
}  // namespace

Value* KernelEmitter::from_memory(Value* v, DType t) {
  llvm::Type* reg = shaped_like(reg_type(compute_dtype(t)), v);
  switch (t) {
    case DType::Bool: return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
    case DType::I8:
    case DType::I16: return b_.CreateSExt(v, reg);
    case DType::U8:
    case DType::U16:
    case DType::U32: return b_.CreateZExt(v, reg);
    case DType::F16: return f16_bits_to_f32(v);
    case DType::BF16:  // the high half of an f32
      return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(v, shaped_like(b_.getInt32Ty(), v)), 16), reg);
    default: return v;  // u64 keeps its bits in i64
  }
}

Value* KernelEmitter::to_memory(Value* v, DType t) {
  llvm::Type* mt = shaped_like(mem_type(t), v);
  switch (t) {
    case DType::Bool: return b_.CreateZExt(v, mt);
    case DType::I8:
    case DType::I16:
    case DType::U8:
    case DType::U16:
    case DType::U32: return b_.CreateTrunc(v, mt);
    case DType::F16: return b_.CreateTrunc(f32_to_f16_bits(v), mt);
    case DType::BF16: {
      // To nearest even: add 0x7fff plus the kept part's lowest bit, then drop the low half;
      // a NaN keeps its top bits, made quiet so that no payload rounds to infinity.
      llvm::Type* i32 = shaped_like(b_.getInt32Ty(), v);
      auto k = [&](uint32_t c) { return llvm::ConstantInt::get(i32, c); };
      Value* u = b_.CreateBitCast(v, i32);
      Value* lsb = b_.CreateAnd(b_.CreateLShr(u, k(16)), k(1));
      Value* rounded = b_.CreateLShr(b_.CreateAdd(u, b_.CreateAdd(k(0x7fff), lsb)), k(16));
      Value* nan = b_.CreateICmpUGT(b_.CreateAnd(u, k(0x7fffffff)), k(0x7f800000));
      Value* quiet = b_.CreateOr(b_.CreateLShr(u, k(16)), k(0x40));
      return b_.CreateTrunc(b_.CreateSelect(nan, quiet, rounded), mt);
    }
    default: return v;
  }
}

Value* KernelEmitter::emit_narrow(Value* v, DType t) { return from_memory(to_memory(v, t), t); }

// f16 in integer and f32 arithmetic, which vectorizes: LLVM 19 splits a vector fptrunc to
// half into one conversion per lane on x86 without AVX512-FP16, and InstCombine moves
// compares and selects into half, where they do the same (measured: the f16 kernel 2.3x
// slower than the f32 one it halves the bytes of). Fabian Giesen's float_to_half_fast3_rtne
// and half_to_float.
Value* KernelEmitter::f32_to_f16_bits(Value* v) {
  if (f16c_) return f16c_convert(v);
  llvm::Type* i32 = shaped_like(b_.getInt32Ty(), v);
  auto k = [&](uint32_t c) { return llvm::ConstantInt::get(i32, c); };
  Value* u = b_.CreateBitCast(v, i32);
  Value* sign = b_.CreateAnd(u, k(0x80000000u));
  Value* a = b_.CreateXor(u, sign);
  // From 2^16 up: infinity, or a quiet NaN.
  Value* big = b_.CreateSelect(b_.CreateICmpUGT(a, k(0x7f800000u)), k(0x7e00u), k(0x7c00u));
  // Below 2^-14: adding 0.5 rounds |v| to a multiple of 2^-24 (0.5's unit in the last place),
  // the f16 subnormals' grid; the bits past 0.5's are the result.
  constexpr uint32_t half_bits = 126u << 23;
  Value* half = b_.CreateBitCast(k(half_bits), v->getType());
  Value* tiny = b_.CreateSub(b_.CreateBitCast(b_.CreateFAdd(b_.CreateBitCast(a, v->getType()), half), i32), k(half_bits));
  // Normal: the exponent rebiased from 127 to 15, the mantissa rounded to nearest even at bit 13.
  Value* odd = b_.CreateAnd(b_.CreateLShr(a, k(13)), k(1));
  Value* normal = b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(a, k(((15u - 127u) << 23) + 0xfffu)), odd), k(13));
  Value* bits = b_.CreateSelect(b_.CreateICmpUGE(a, k(143u << 23)), big,
                                b_.CreateSelect(b_.CreateICmpULT(a, k(113u << 23)), tiny, normal));
  return b_.CreateOr(bits, b_.CreateLShr(sign, k(16)));
}

// vcvtps2ph (rounding to nearest even) on each 8 lanes of `v`, zero-extended to i32; the lanes
// past `v`'s are poison and dropped.
Value* KernelEmitter::f16c_convert(Value* v) {
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType());
  const unsigned w = vt ? vt->getNumElements() : 1;
  Value* vec = vt ? v : b_.CreateInsertElement(llvm::PoisonValue::get(llvm::FixedVectorType::get(v->getType(), 1)), v, uint64_t{0});
  std::vector<Value*> parts;
  for (unsigned c = 0; c < (w + 7) / 8; ++c) {
    std::vector<int> lanes(8);
    for (unsigned i = 0; i < 8; ++i) lanes[i] = c * 8 + i < w ? static_cast<int>(c * 8 + i) : -1;
    parts.push_back(b_.CreateIntrinsic(llvm::Intrinsic::x86_vcvtps2ph_256, {}, {b_.CreateShuffleVector(vec, lanes), b_.getInt32(0)}));
  }
  while (parts.size() > 1) {  // concatenated pairwise (vector widths are powers of two)
    if (parts.size() % 2) parts.push_back(llvm::PoisonValue::get(parts.back()->getType()));
    std::vector<Value*> joined;
    for (size_t c = 0; c < parts.size(); c += 2) {
      const auto n = static_cast<int>(llvm::cast<llvm::FixedVectorType>(parts[c]->getType())->getNumElements());
      std::vector<int> lanes(static_cast<size_t>(2 * n));
      for (int i = 0; i < 2 * n; ++i) lanes[static_cast<size_t>(i)] = i;
      joined.push_back(b_.CreateShuffleVector(parts[c], parts[c + 1], lanes));
    }
    parts = std::move(joined);
  }
  Value* all = parts[0];
  std::vector<int> keep(w);
  for (unsigned i = 0; i < w; ++i) keep[i] = static_cast<int>(i);
  Value* bits = b_.CreateZExt(b_.CreateShuffleVector(all, keep), llvm::FixedVectorType::get(b_.getInt32Ty(), w));
  return vt ? bits : b_.CreateExtractElement(bits, uint64_t{0});
}

Value* KernelEmitter::f16_bits_to_f32(Value* bits) {
  llvm::Type* i32 = shaped_like(b_.getInt32Ty(), bits);
  llvm::Type* f32 = shaped_like(b_.getFloatTy(), bits);
  auto k = [&](uint32_t c) { return llvm::ConstantInt::get(i32, c); };
  Value* h = b_.CreateZExt(bits, i32);
  Value* shifted = b_.CreateShl(b_.CreateAnd(h, k(0x7fffu)), k(13));  // exponent and mantissa
  Value* exp = b_.CreateAnd(shifted, k(0x7c00u << 13));
  Value* rebiased = b_.CreateAdd(shifted, k((127u - 15u) << 23));
  // Infinity and NaN: the exponent's top value; zero and subnormals: renormalized through f32.
  Value* special = b_.CreateAdd(rebiased, k((128u - 16u) << 23));
  Value* magic = b_.CreateBitCast(k(113u << 23), f32);
  Value* small = b_.CreateBitCast(b_.CreateFSub(b_.CreateBitCast(b_.CreateAdd(rebiased, k(1u << 23)), f32), magic), i32);
  Value* u = b_.CreateSelect(b_.CreateICmpEQ(exp, k(0x7c00u << 13)), special,
                             b_.CreateSelect(b_.CreateICmpEQ(exp, k(0)), small, rebiased));
  return b_.CreateBitCast(b_.CreateOr(u, b_.CreateShl(b_.CreateAnd(h, k(0x8000u)), k(16))), f32);
}

// ---------------------------------------------------------------------------------------
// Instructions

Value* KernelEmitter::emit_cast(Value* x, DType from, DType to) {
  if (from == to) return x;
  llvm::Type* t = reg_type(to);
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(x->getType())) t = llvm::FixedVectorType::get(t, vt->getNumElements());
  if (from == DType::Bool) return is_float(to) ? b_.CreateUIToFP(x, t) : b_.CreateZExt(x, t);
  if (to == DType::Bool) {
    if (is_float(from)) return b_.CreateFCmpUNE(x, llvm::ConstantFP::get(x->getType(), 0.0));
    return b_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
  }
  if (is_integer(from) && is_integer(to)) return b_.CreateSExtOrTrunc(x, t);
  if (from == DType::I64 && to == DType::F32) {
    // Through f64, as the interpreter converts (rounding twice can differ from once).
    llvm::Type* d = b_.getDoubleTy();
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(x->getType())) d = llvm::FixedVectorType::get(d, vt->getNumElements());
    return b_.CreateFPTrunc(b_.CreateSIToFP(x, d), t);
  }
  if (is_integer(from)) return b_.CreateSIToFP(x, t);
  if (is_integer(to)) return b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {t, x->getType()}, {x});
  return to == DType::F64 ? b_.CreateFPExt(x, t) : b_.CreateFPTrunc(x, t);
}

// kir::kCastToOdd: rounded to nearest, then one step toward zero where that went away from
// it, and the last bit set where inexact. A NaN stays as it is (no compare holds); past the
// f32 range, FLT_MAX with its sign, which any narrower type rounds on to infinity.
Value* KernelEmitter::emit_f64_to_f32_odd(Value* x) {
  Value* y = b_.CreateFPTrunc(x, shaped_like(b_.getFloatTy(), x));
  Value* back = b_.CreateFPExt(y, x->getType());
  llvm::Type* bits = shaped_like(b_.getInt32Ty(), y);
  Value* u = b_.CreateBitCast(y, bits);
  Value* away = b_.CreateFCmpOGT(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, back),
                                 b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x));
  Value* toward_zero = b_.CreateSub(u, b_.CreateZExt(away, bits));
  Value* odd = b_.CreateOr(toward_zero, llvm::ConstantInt::get(bits, 1));
  return b_.CreateBitCast(b_.CreateSelect(b_.CreateFCmpONE(back, x), odd, u), y->getType());
}

// fmod: LLVM's frem is C's fmod; srem with the divisors that trap (0, and -1 under the
// minimum) replaced, their remainders being 0. mod moves a nonzero remainder of the other
// sign than the divisor into the divisor's sign; a float zero takes the divisor's sign.
Value* KernelEmitter::emit_remainder(bool floor_mod, bool f, Value* a, Value* b) {
  Value* zero = llvm::Constant::getNullValue(a->getType());
  if (f) {
    Value* r = b_.CreateFRem(a, b);
    if (!floor_mod) return r;
    Value* moved = b_.CreateSelect(b_.CreateXor(b_.CreateFCmpOLT(b, zero), b_.CreateFCmpOLT(r, zero)), b_.CreateFAdd(r, b), r);
    Value* signed_zero = b_.CreateIntrinsic(llvm::Intrinsic::copysign, {a->getType()}, {zero, b});
    return b_.CreateSelect(b_.CreateFCmpOEQ(r, zero), signed_zero, moved);
  }
  Value* minus_one = llvm::Constant::getAllOnesValue(a->getType());
  Value* trivial = b_.CreateOr(b_.CreateICmpEQ(b, zero), b_.CreateICmpEQ(b, minus_one));
  Value* r = b_.CreateSRem(a, b_.CreateSelect(trivial, llvm::ConstantInt::get(a->getType(), 1), b));
  if (floor_mod)
    r = b_.CreateSelect(b_.CreateAnd(b_.CreateICmpNE(r, zero), b_.CreateICmpSLT(b_.CreateXor(r, b), zero)), b_.CreateAdd(r, b), r);
  return b_.CreateSelect(trivial, zero, r);
}

Value* KernelEmitter::emit_op(OpKind op, DType t, DType at, const std::vector<Value*>& a) {
  const bool f = is_float(at);
  llvm::Type* ty = a.empty() ? nullptr : a.back()->getType();
  auto zero = [&](Value* x) { return llvm::Constant::getNullValue(x->getType()); };
  switch (op) {
    case OpKind::Neg: return f ? b_.CreateFNeg(a[0]) : b_.CreateSub(zero(a[0]), a[0]);
    case OpKind::Abs:
      return f ? b_.CreateIntrinsic(llvm::Intrinsic::fabs, {ty}, {a[0]})
               : b_.CreateIntrinsic(llvm::Intrinsic::abs, {ty}, {a[0], b_.getFalse()});
    case OpKind::Relu:
      return f ? b_.CreateSelect(b_.CreateFCmpOLT(a[0], zero(a[0])), zero(a[0]), a[0])
               : b_.CreateIntrinsic(llvm::Intrinsic::smax, {ty}, {a[0], zero(a[0])});
    case OpKind::Not: return b_.CreateNot(a[0]);
    case OpKind::Sqrt: return b_.CreateIntrinsic(llvm::Intrinsic::sqrt, {ty}, {a[0]});
    case OpKind::Rsqrt: {
      // In double, as the interpreter: 1/sqrt rounded once more to f32 would differ by an ulp.
      llvm::Type* dt = vec_type(b_.getDoubleTy(), ty->isVectorTy() ? llvm::cast<llvm::FixedVectorType>(ty)->getNumElements() : 1);
      Value* x = b_.CreateFPExt(a[0], dt);
      Value* r = b_.CreateFDiv(llvm::ConstantFP::get(dt, 1.0), b_.CreateIntrinsic(llvm::Intrinsic::sqrt, {dt}, {x}));
      return b_.CreateFPTrunc(r, ty);
    }
    case OpKind::Floor: return b_.CreateIntrinsic(llvm::Intrinsic::floor, {ty}, {a[0]});
    case OpKind::Ceil: return b_.CreateIntrinsic(llvm::Intrinsic::ceil, {ty}, {a[0]});
    case OpKind::Round: return b_.CreateIntrinsic(llvm::Intrinsic::roundeven, {ty}, {a[0]});
    case OpKind::Sign: {
      if (!f)
        return b_.CreateSub(b_.CreateZExt(b_.CreateICmpSGT(a[0], zero(a[0])), ty),
                            b_.CreateZExt(b_.CreateICmpSLT(a[0], zero(a[0])), ty));
      Value* r = b_.CreateSelect(b_.CreateFCmpOLT(a[0], zero(a[0])), llvm::ConstantFP::get(ty, -1.0), a[0]);
      return b_.CreateSelect(b_.CreateFCmpOGT(a[0], zero(a[0])), llvm::ConstantFP::get(ty, 1.0), r);
    }
    case OpKind::IsNan: return b_.CreateFCmpUNO(a[0], a[0]);
    case OpKind::IsInf:
      return b_.CreateFCmpOEQ(b_.CreateIntrinsic(llvm::Intrinsic::fabs, {ty}, {a[0]}),
                              llvm::ConstantFP::getInfinity(ty));
    case OpKind::Fmod:
    case OpKind::Mod: return emit_remainder(op == OpKind::Mod, f, a[0], a[1]);
    case OpKind::Exp:
    case OpKind::Log:
    case OpKind::Tanh:
    case OpKind::Erf:
    case OpKind::Sigmoid:
      if (t == DType::F32 && has_vector_math(op)) return emit_vector_math(b_, op, a[0]);
      return emit_libm(b_, op, a[0]);
    case OpKind::Sin:
    case OpKind::Cos:
    case OpKind::Asin:
    case OpKind::Acos:
    case OpKind::Atan: return emit_libm(b_, op, a[0]);
    case OpKind::Atan2: return emit_libm(b_, op, a[0], a[1]);
    case OpKind::Add: return f ? b_.CreateFAdd(a[0], a[1]) : b_.CreateAdd(a[0], a[1]);
    case OpKind::Sub: return f ? b_.CreateFSub(a[0], a[1]) : b_.CreateSub(a[0], a[1]);
    case OpKind::Mul: return f ? b_.CreateFMul(a[0], a[1]) : b_.CreateMul(a[0], a[1]);
    case OpKind::Div: return b_.CreateFDiv(a[0], a[1]);
    case OpKind::Pow: {
      if (f) return emit_libm(b_, op, a[0], a[1]);
      // Integers: the runtime's exact square-and-multiply, one call per lane.
      llvm::FunctionCallee ipow = m_.getOrInsertFunction(
          "kiln_rt_ipow", llvm::FunctionType::get(b_.getInt64Ty(), {b_.getInt64Ty(), b_.getInt64Ty()}, false));
      auto one = [&](Value* x, Value* y) {
        Value* r = b_.CreateCall(ipow, {b_.CreateSExt(x, b_.getInt64Ty()), b_.CreateSExt(y, b_.getInt64Ty())});
        return b_.CreateTrunc(r, x->getType());
      };
      auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(ty);
      if (!vt) return one(a[0], a[1]);
      Value* out = llvm::PoisonValue::get(vt);
      for (unsigned l = 0; l < vt->getNumElements(); ++l)
        out = b_.CreateInsertElement(out, one(b_.CreateExtractElement(a[0], l), b_.CreateExtractElement(a[1], l)), l);
      return out;
    }
    case OpKind::Max:
      return f ? b_.CreateIntrinsic(llvm::Intrinsic::maximum, {ty}, {a[0], a[1]})
               : b_.CreateIntrinsic(llvm::Intrinsic::smax, {ty}, {a[0], a[1]});
    case OpKind::Min:
      return f ? b_.CreateIntrinsic(llvm::Intrinsic::minimum, {ty}, {a[0], a[1]})
               : b_.CreateIntrinsic(llvm::Intrinsic::smin, {ty}, {a[0], a[1]});
    case OpKind::Eq: return f ? b_.CreateFCmpOEQ(a[0], a[1]) : b_.CreateICmpEQ(a[0], a[1]);
    case OpKind::Ne: return f ? b_.CreateFCmpUNE(a[0], a[1]) : b_.CreateICmpNE(a[0], a[1]);
    case OpKind::Lt:
      return f ? b_.CreateFCmpOLT(a[0], a[1]) : at == DType::Bool ? b_.CreateICmpULT(a[0], a[1]) : b_.CreateICmpSLT(a[0], a[1]);
    case OpKind::Le:
      return f ? b_.CreateFCmpOLE(a[0], a[1]) : at == DType::Bool ? b_.CreateICmpULE(a[0], a[1]) : b_.CreateICmpSLE(a[0], a[1]);
    case OpKind::Gt:
      return f ? b_.CreateFCmpOGT(a[0], a[1]) : at == DType::Bool ? b_.CreateICmpUGT(a[0], a[1]) : b_.CreateICmpSGT(a[0], a[1]);
    case OpKind::Ge:
      return f ? b_.CreateFCmpOGE(a[0], a[1]) : at == DType::Bool ? b_.CreateICmpUGE(a[0], a[1]) : b_.CreateICmpSGE(a[0], a[1]);
    // (A mask known in part, as in a window's interior: the builder folds only a constant
    // on the right.)
    case OpKind::And:
      if (auto* k = llvm::dyn_cast<llvm::Constant>(a[0])) return k->isAllOnesValue() ? a[1] : k->isNullValue() ? a[0] : b_.CreateAnd(a[0], a[1]);
      return b_.CreateAnd(a[0], a[1]);
    case OpKind::Or:
      if (auto* k = llvm::dyn_cast<llvm::Constant>(a[0])) return k->isNullValue() ? a[1] : k->isAllOnesValue() ? a[0] : b_.CreateOr(a[0], a[1]);
      return b_.CreateOr(a[0], a[1]);
    case OpKind::Shl:
    case OpKind::Shr: {
      // A count outside [0, bits) shifts every bit out (LLVM's shift would be poison).
      const unsigned bits = ty->getScalarSizeInBits();
      Value* out = b_.CreateICmpUGE(a[1], llvm::ConstantInt::get(ty, bits));
      if (op == OpKind::Shl) return b_.CreateSelect(out, llvm::Constant::getNullValue(ty), b_.CreateShl(a[0], a[1]));
      return b_.CreateSelect(out, b_.CreateAShr(a[0], llvm::ConstantInt::get(ty, bits - 1)), b_.CreateAShr(a[0], a[1]));
    }
    case OpKind::Where: return b_.CreateSelect(a[0], a[1], a[2]);
    default: break;
  }
  throw Error(fmt::format("cpu codegen: no lowering for op '{}' on {}", op_info(op).name, dtype_name(t)));
}

// Whether the loop vectorizer can widen a loop around calls to `f` once they are inlined:
// no loops (those would need outer-loop vectorization), branches only forward (it
// if-converts them), and calls only to LLVM intrinsics or to functions of the module that
// qualify themselves (OpenCL builtins kiln defines). libm has no vector forms here.
bool loop_free_and_intrinsic_only(const llvm::Function& f, int depth = 0) {
  if (f.isDeclaration() || depth > 4) return false;
  std::map<const llvm::BasicBlock*, size_t> order;
  for (const llvm::BasicBlock& bb : f) order.emplace(&bb, order.size());
  for (const llvm::BasicBlock& bb : f) {
    for (const llvm::BasicBlock* next : llvm::successors(&bb))
      if (order.at(next) <= order.at(&bb)) return false;  // a back edge: a loop
    for (const llvm::Instruction& i : bb) {
      const auto* call = llvm::dyn_cast<llvm::CallBase>(&i);
      if (!call || llvm::isa<llvm::IntrinsicInst>(call)) continue;
      const llvm::Function* callee = call->getCalledFunction();
      if (!callee || !loop_free_and_intrinsic_only(*callee, depth + 1)) return false;
    }
  }
  return true;
}

// The custom kernel's function (linked into this module, always inlined). At width w > 1, a
// function the loop vectorizer can widen is called through a wrapper that loops over the
// lanes, with the vectorizer told to widen that loop by w: once the function is inlined, its
// body is vector code. Any other is called once per lane.
Value* KernelEmitter::emit_custom_call(const Inst& in, const std::vector<Value*>& args, unsigned w) {
  KILN_ASSERT(static_cast<size_t>(in.imm) < customs_.size(), "a custom kernel's function is linked before the kernel is emitted");
  llvm::Function* f = customs_[static_cast<size_t>(in.imm)];
  if (w == 1) return b_.CreateCall(f, args);
  if (!loop_free_and_intrinsic_only(*f)) {
    Value* out = llvm::PoisonValue::get(vec_type(reg_type(in.type), w));
    for (unsigned lane = 0; lane < w; ++lane) {
      std::vector<Value*> lane_args;
      for (Value* a : args) lane_args.push_back(b_.CreateExtractElement(a, uint64_t{lane}));
      out = b_.CreateInsertElement(out, b_.CreateCall(f, lane_args), uint64_t{lane});
    }
    return out;
  }
  const std::string name = fmt::format("{}.x{}", f->getName().str(), w);
  llvm::Function* wide = m_.getFunction(name);
  if (!wide) {
    std::vector<llvm::Type*> params;
    for (Value* a : args) params.push_back(a->getType());
    llvm::Type* rt = vec_type(f->getReturnType(), w);
    wide = llvm::Function::Create(llvm::FunctionType::get(rt, params, false), llvm::Function::InternalLinkage, name, m_);
    wide->addFnAttr(llvm::Attribute::AlwaysInline);
    wide->addFnAttr(llvm::Attribute::NoUnwind);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx_, "entry", wide));
    llvm::Type* i64t = b.getInt64Ty();
    // Lanes in arrays: bools as bytes, so that every lane has an address.
    auto memory_of = [&](llvm::Type* t) { return t->isIntegerTy(1) ? b.getInt8Ty() : t; };
    std::vector<Value*> arrays;
    for (size_t a = 0; a < args.size(); ++a) {
      llvm::Type* et = f->getArg(static_cast<unsigned>(a))->getType();
      // A vector-typed slot: the vector stores into it are aligned as the vector type wants.
      Value* arr = b.CreateAlloca(vec_type(memory_of(et), w));
      Value* v = wide->getArg(static_cast<unsigned>(a));
      if (et->isIntegerTy(1)) v = b.CreateZExt(v, vec_type(b.getInt8Ty(), w));
      b.CreateStore(v, arr);
      arrays.push_back(arr);
    }
    llvm::Type* out_t = memory_of(f->getReturnType());
    Value* out = b.CreateAlloca(vec_type(out_t, w));
    llvm::BasicBlock* head = b.GetInsertBlock();
    llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx_, "lane", wide);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx_, "done", wide);
    b.CreateBr(body);
    b.SetInsertPoint(body);
    llvm::PHINode* lane = b.CreatePHI(i64t, 2);
    lane->addIncoming(b.getInt64(0), head);
    std::vector<Value*> lane_args;
    for (size_t a = 0; a < args.size(); ++a) {
      llvm::Type* et = f->getArg(static_cast<unsigned>(a))->getType();
      Value* v = b.CreateLoad(memory_of(et), b.CreateGEP(memory_of(et), arrays[a], lane));
      lane_args.push_back(et->isIntegerTy(1) ? b.CreateICmpNE(v, b.getInt8(0)) : v);
    }
    Value* r = b.CreateCall(f, lane_args);
    if (f->getReturnType()->isIntegerTy(1)) r = b.CreateZExt(r, b.getInt8Ty());
    b.CreateStore(r, b.CreateGEP(out_t, out, lane));
    Value* next = b.CreateAdd(lane, b.getInt64(1));
    lane->addIncoming(next, body);
    llvm::BranchInst* br = b.CreateCondBr(b.CreateICmpULT(next, b.getInt64(w)), body, done);
    set_loop_hints(br, {loop_hint("llvm.loop.vectorize.enable", b.getTrue()),
                        loop_hint("llvm.loop.vectorize.width", b.getInt32(w)),
                        llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.unroll.disable")})});
    b.SetInsertPoint(done);
    Value* result = b.CreateLoad(vec_type(out_t, w), out);
    if (f->getReturnType()->isIntegerTy(1)) result = b.CreateICmpNE(result, llvm::Constant::getNullValue(result->getType()));
    b.CreateRet(result);
  }
  return b_.CreateCall(wide, args);
}

Value* KernelEmitter::emit_rand(Value* index, int64_t seed, DType t) {
  const uint32_t key = scalar::rand_key(seed);
  llvm::Type* i32 = index->getType()->isVectorTy()
                        ? static_cast<llvm::Type*>(llvm::FixedVectorType::get(b_.getInt32Ty(), llvm::cast<llvm::FixedVectorType>(index->getType())->getNumElements()))
                        : b_.getInt32Ty();
  auto k = [&](uint32_t v) { return llvm::ConstantInt::get(i32, v); };
  auto h = [&](Value* x) {
    x = b_.CreateXor(x, b_.CreateLShr(x, k(16)));
    x = b_.CreateMul(x, k(0x7feb352dU));
    x = b_.CreateXor(x, b_.CreateLShr(x, k(15)));
    x = b_.CreateMul(x, k(0x846ca68bU));
    return b_.CreateXor(x, b_.CreateLShr(x, k(16)));
  };
  Value* lo = b_.CreateTrunc(index, i32);
  Value* hi = b_.CreateTrunc(b_.CreateLShr(index, llvm::ConstantInt::get(index->getType(), 32)), i32);
  Value* r = h(b_.CreateXor(lo, h(b_.CreateXor(hi, k(key)))));
  Value* m = b_.CreateAdd(b_.CreateShl(b_.CreateLShr(r, k(9)), k(1)), k(1));
  llvm::Type* ft = reg_type(t);
  if (i32->isVectorTy()) ft = llvm::FixedVectorType::get(ft, llvm::cast<llvm::FixedVectorType>(i32)->getNumElements());
  return b_.CreateFMul(b_.CreateUIToFP(m, ft), llvm::ConstantFP::get(ft, 1.0 / 16777216.0));
}

Val KernelEmitter::emit_load(Ctx& c, const Inst& in) {
  const Val off = get(c, in.args[0]);
  const DType bt = k_.buffers[static_cast<size_t>(in.buffer)].type.dtype;
  llvm::Type* mt = mem_type(bt);
  if (in.args.size() > 1 && known_false(get(c, in.args[1])))  // nothing is read
    return {from_memory(llvm::Constant::getNullValue(vec_type(mt, c.w)), bt), c.w == 1 ? Val::Uniform : Val::Vector};
  const bool masked = in.args.size() > 1 && !known_true(get(c, in.args[1]));
  Value* base = bufs_[static_cast<size_t>(in.buffer)];
  const llvm::Align align(dtype_size(bt));
  auto to_reg = [&](Value* v) { return from_memory(v, bt); };
  if (off.kind == Val::Uniform && (!masked || get(c, in.args[1]).kind == Val::Uniform)) {
    if (!masked) return {to_reg(b_.CreateAlignedLoad(mt, b_.CreateGEP(mt, base, off.v), align)), Val::Uniform};
    // Read only when the mask holds: the position may be outside the buffer.
    Value* mask = get(c, in.args[1]).v;
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* then = llvm::BasicBlock::Create(ctx_, "masked.load", fn_);
    auto* join = llvm::BasicBlock::Create(ctx_, "masked.join", fn_);
    b_.CreateCondBr(mask, then, join);
    b_.SetInsertPoint(then);
    Value* x = b_.CreateAlignedLoad(mt, b_.CreateGEP(mt, base, off.v), align);
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    llvm::PHINode* phi = b_.CreatePHI(mt, 2);
    phi->addIncoming(x, then);
    phi->addIncoming(llvm::Constant::getNullValue(mt), from);
    return {to_reg(phi), Val::Uniform};
  }
  llvm::Type* vt = vec_type(mt, c.w);
  // The vector of lanes at `off`, read where `mask` (a vector of bools, or null: all) holds.
  auto vector_load = [&](Value* mask) -> Value* {
    if (off.kind == Val::Affine && off.stride == 1) {
      Value* p = b_.CreateGEP(mt, base, off.v);
      Value* v = mask ? static_cast<Value*>(b_.CreateMaskedLoad(vt, p, align, mask, llvm::Constant::getNullValue(vt)))
                      : static_cast<Value*>(b_.CreateAlignedLoad(vt, p, align));
      return to_reg(v);
    }
    if (Value* lane0 = contiguous_lane0(c, in.args[0], off)) {
      Value* p = b_.CreateGEP(mt, base, lane0);
      Value* v = mask ? static_cast<Value*>(b_.CreateMaskedLoad(vt, p, align, mask, llvm::Constant::getNullValue(vt)))
                      : static_cast<Value*>(b_.CreateAlignedLoad(vt, p, align));
      return to_reg(v);
    }
    if (off.kind == Val::Affine && off.stride >= 2 && off.stride <= 4 && c.w > 1) {
      // Lanes a small stride apart (a stride-2 window): one masked load of the span, which
      // reads only the lanes' own elements (nothing past the last), and a shuffle that picks
      // them, rather than a gather of one element per lane.
      const auto s = static_cast<unsigned>(off.stride), wide = c.w * s;
      std::vector<int> spread, pick;
      for (unsigned i = 0; i < wide; ++i) spread.push_back(i % s == 0 ? static_cast<int>(i / s) : static_cast<int>(c.w));
      for (unsigned l = 0; l < c.w; ++l) pick.push_back(static_cast<int>(l * s));
      llvm::Type* bits = vec_type(b_.getInt1Ty(), c.w);
      Value* lanes = mask ? mask : llvm::Constant::getAllOnesValue(bits);
      Value* wide_mask = b_.CreateShuffleVector(lanes, llvm::Constant::getNullValue(bits), spread);
      llvm::Type* wt = vec_type(mt, wide);
      Value* span = b_.CreateMaskedLoad(wt, b_.CreateGEP(mt, base, off.v), align, wide_mask, llvm::Constant::getNullValue(wt));
      return to_reg(b_.CreateShuffleVector(span, pick));
    }
    Value* ptrs = b_.CreateGEP(mt, base, vector_of(c, off));
    if (!mask) mask = llvm::Constant::getAllOnesValue(vec_type(b_.getInt1Ty(), c.w));
    return to_reg(b_.CreateMaskedGather(vt, ptrs, align, mask, llvm::Constant::getNullValue(vt)));
  };
  if (!masked) return {vector_load(and_live(c, nullptr)), Val::Vector};
  const Val m = get(c, in.args[1]);
  if (m.kind != Val::Uniform) return {vector_load(and_live(c, vector_of(c, m))), Val::Vector};
  // A mask the same for every lane (a padded window's row, where the lanes' own bounds are
  // known) guards the whole vector: one branch around a plain load, not a masked load.
  llvm::BasicBlock* from = b_.GetInsertBlock();
  auto* then = llvm::BasicBlock::Create(ctx_, "uniform.load", fn_);
  auto* join = llvm::BasicBlock::Create(ctx_, "uniform.join", fn_);
  b_.CreateCondBr(m.v, then, join);
  b_.SetInsertPoint(then);
  Value* x = vector_load(and_live(c, nullptr));
  llvm::BasicBlock* loaded = b_.GetInsertBlock();
  b_.CreateBr(join);
  b_.SetInsertPoint(join);
  llvm::PHINode* phi = b_.CreatePHI(x->getType(), 2);
  phi->addIncoming(x, loaded);
  phi->addIncoming(llvm::Constant::getNullValue(x->getType()), from);
  return {phi, Val::Vector};
}

Value* KernelEmitter::contiguous_lane0(Ctx& c, Ref offset, const Val& off) {
  // The lanes of one vector step are consecutive positions along the lane dim, the other
  // dims fixed: an offset whose stride along it is 1 (kir::affine_analysis, which sees through
  // exact divisions where this emitter's own tracking gives up) is contiguous.
  if (c.w == 1 || off.kind != Val::Vector || lane_dim_ < 0) return nullptr;
  const auto& a = affine_[static_cast<size_t>(offset)];
  if (!a || a->stride[static_cast<size_t>(lane_dim_)] != 1) return nullptr;
  return b_.CreateExtractElement(off.v, uint64_t{0});
}

Val KernelEmitter::compute(Ctx& c, Ref r) {
  const Inst& in = k_.insts[static_cast<size_t>(r)];
  switch (in.code) {
    case Code::Dim: {
      Value* d = c.dims[static_cast<size_t>(in.imm)];
      if (in.imm == lane_dim_ && c.w > 1) return {d, Val::Affine, 1};
      return {d, Val::Uniform};
    }
    case Code::Const: {
      llvm::Type* t = reg_type(in.type);
      if (is_float(in.type)) return {llvm::ConstantFP::get(t, in.literal.as_double()), Val::Uniform};
      return {llvm::ConstantInt::get(t, static_cast<uint64_t>(in.literal.as_int()), true), Val::Uniform};
    }
    case Code::Load: return emit_load(c, in);
    case Code::Reduce: return c.reduce_value(r);
    case Code::Arg: return {scalars_[static_cast<size_t>(in.imm)], Val::Uniform};
    default: break;
  }
  std::vector<Val> args;
  bool uniform = true;
  for (Ref a : in.args) {
    args.push_back(get(c, a));
    uniform = uniform && args.back().kind == Val::Uniform;
  }
  // Index arithmetic along the vector dim stays affine.
  if (in.code == Code::Op && in.type == DType::I64 && in.args.size() == 2 && !uniform) {
    const Val& x = args[0];
    const Val& y = args[1];
    if (in.op == OpKind::Add && x.kind != Val::Vector && y.kind != Val::Vector)
      return {b_.CreateAdd(x.v, y.v), Val::Affine, x.stride + y.stride};
    const Inst& yi = k_.insts[static_cast<size_t>(in.args[1])];
    if (in.op == OpKind::Mul && x.kind == Val::Affine && yi.code == Code::Const)
      return {b_.CreateMul(x.v, y.v), Val::Affine, x.stride * yi.literal.as_int()};
  }
  if (std::optional<Val> mask = lane_threshold_compare(c, in, args)) return *mask;
  std::vector<Value*> vals;
  for (const Val& a : args) vals.push_back(uniform ? a.v : vector_of(c, a));
  const Val::Kind kind = uniform ? Val::Uniform : Val::Vector;
  switch (in.code) {
    case Code::Op: {
      if (in.op == OpKind::Custom) return {emit_custom_call(in, vals, uniform ? 1 : c.w), kind};
      const DType at = in.args.empty() ? in.type : k_.insts[static_cast<size_t>(in.args.back())].type;
      return {emit_op(in.op, in.type, at, vals), kind};
    }
    case Code::Cast:
      if (in.imm == kir::kCastToOdd) return {emit_f64_to_f32_odd(vals[0]), kind};
      return {emit_cast(vals[0], k_.insts[static_cast<size_t>(in.args[0])].type, in.type), kind};
    case Code::Narrow: return {emit_narrow(vals[0], static_cast<DType>(in.imm)), kind};
    case Code::IndexDiv: return {b_.CreateUDiv(vals[0], llvm::ConstantInt::get(vals[0]->getType(), static_cast<uint64_t>(in.imm))), kind};
    case Code::IndexMod: return {b_.CreateURem(vals[0], llvm::ConstantInt::get(vals[0]->getType(), static_cast<uint64_t>(in.imm))), kind};
    case Code::Rand: return {emit_rand(vals[0], in.imm, in.type), kind};
    default: break;
  }
  KILN_ASSERT(false, "unhandled Kernel IR instruction");
}

// An order compare of two positions affine along the lanes (a padded window's
// `0 <= w + kw - p < W`, computed for every tap) holds on the lanes on one side of a
// threshold: x OP y is e + d*l OP 0 for lane l, with d the difference of their strides. The
// threshold is computed once in scalar code and the mask is one compare of 32-bit lane
// numbers with it, where the vector of 64-bit positions and its compare (with the packing
// that narrows it to a mask, about 15 instructions on AVX2) were emitted per tap.
std::optional<Val> KernelEmitter::lane_threshold_compare(Ctx& c, const Inst& in, const std::vector<Val>& args) {
  if (in.code != Code::Op || in.type != DType::Bool || args.size() != 2 || c.w == 1) return std::nullopt;
  if (in.op != OpKind::Lt && in.op != OpKind::Le && in.op != OpKind::Gt && in.op != OpKind::Ge) return std::nullopt;
  if (k_.insts[static_cast<size_t>(in.args[0])].type != DType::I64) return std::nullopt;
  const Val& x = args[0];
  const Val& y = args[1];
  if (x.kind == Val::Vector || y.kind == Val::Vector || (x.kind == Val::Uniform && y.kind == Val::Uniform)) return std::nullopt;
  // x OP y as d*l < bound: lt is e + d*l < 0, le adds one to the bound, gt and ge are lt and
  // le of the negated sides.
  const bool greater = in.op == OpKind::Gt || in.op == OpKind::Ge;
  const int64_t d = greater ? y.stride - x.stride : x.stride - y.stride;
  Value* e = greater ? b_.CreateSub(y.v, x.v) : b_.CreateSub(x.v, y.v);
  Value* bound = b_.CreateNeg(e);
  if (in.op == OpKind::Le || in.op == OpKind::Ge) bound = b_.CreateAdd(bound, i64(1));
  if (d == 0) return Val{b_.CreateICmpSGT(bound, i64(0)), Val::Uniform};
  // d > 0: l < ceil(bound / d); d < 0: l > floor(-bound / -d), l >= that + 1. Thresholds
  // past the vector are clamped into [-1, w] before they are narrowed to 32 bits.
  Value* t = d > 0 ? ceil_div(bound, d) : b_.CreateAdd(floor_div(b_.CreateNeg(bound), -d), i64(1));
  t = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, t, i64(c.w)), i64(-1));
  Value* threshold = b_.CreateVectorSplat(c.w, b_.CreateTrunc(t, b_.getInt32Ty()));
  Value* lane = lane_numbers(c.w);
  return Val{d > 0 ? b_.CreateICmpSLT(lane, threshold) : b_.CreateICmpSGE(lane, threshold), Val::Vector};
}

void KernelEmitter::plan_row_cache() {
  if (width_ == 1) return;
  int64_t row = 1;
  for (int d = 0; d < rank_; ++d)
    if (k_.reduced[static_cast<size_t>(d)]) row *= k_.domain[d];
  for (Ref r : kir::row_cached_values(k_, sched_)) {
    llvm::IRBuilder<> eb(entry_, entry_->getFirstInsertionPt());
    llvm::Type* element = reg_type(k_.insts[static_cast<size_t>(r)].type);
    row_cache_.buffers[r] = eb.CreateAlloca(llvm::ArrayType::get(element, static_cast<uint64_t>(row)));
  }
}

Val KernelEmitter::row_cached(Ctx& c, Ref r) {
  auto it = row_cache_.buffers.find(r);
  if (it == row_cache_.buffers.end() || row_cache_.offset == nullptr) return compute(c, r);
  llvm::Type* et = reg_type(k_.insts[static_cast<size_t>(r)].type);
  Value* p = b_.CreateGEP(et, it->second, row_cache_.offset);
  if (row_cache_.filled.count(r)) return {b_.CreateAlignedLoad(vec_type(et, c.w), p, llvm::Align(4)), c.w == 1 ? Val::Uniform : Val::Vector};
  const Val v = compute(c, r);
  b_.CreateAlignedStore(vector_of(c, v), p, llvm::Align(4));
  return v;
}

void KernelEmitter::emit_store(Ctx& c, const kir::Store& s) {
  const DType t = k_.buffers[static_cast<size_t>(s.buffer)].type.dtype;
  llvm::Type* mt = mem_type(t);
  const llvm::Align align(dtype_size(t));
  Value* base = bufs_[static_cast<size_t>(s.buffer)];
  const Val off = get(c, s.offset);
  const Val val = get(c, s.value);
  std::optional<Val> guard;
  if (s.guard != kir::kNoRef && !known_true(get(c, s.guard))) guard = get(c, s.guard);
  auto to_mem = [&](Value* v) { return to_memory(v, t); };
  const bool all_uniform = off.kind == Val::Uniform && val.kind == Val::Uniform && (!guard || guard->kind == Val::Uniform);
  if (c.w == 1 || all_uniform) {
    // (In a vector loop, lanes that agree on value, offset and guard store once.)
    llvm::BasicBlock* cont = nullptr;
    if (guard) {
      auto* then = llvm::BasicBlock::Create(ctx_, "store", fn_);
      cont = llvm::BasicBlock::Create(ctx_, "store.join", fn_);
      b_.CreateCondBr(guard->v, then, cont);
      b_.SetInsertPoint(then);
    }
    b_.CreateAlignedStore(to_mem(val.v), b_.CreateGEP(mt, base, off.v), align);
    if (cont) {
      b_.CreateBr(cont);
      b_.SetInsertPoint(cont);
    }
    return;
  }
  Value* v = to_mem(vector_of(c, val));
  Value* mask = and_live(c, guard ? vector_of(c, *guard) : nullptr);
  if (off.kind == Val::Affine && off.stride == 1) {
    Value* p = b_.CreateGEP(mt, base, off.v);
    if (mask) b_.CreateMaskedStore(v, p, align, mask);
    else b_.CreateAlignedStore(v, p, align);
    return;
  }
  if (Value* lane0 = contiguous_lane0(c, s.offset, off)) {
    Value* p = b_.CreateGEP(mt, base, lane0);
    if (mask) b_.CreateMaskedStore(v, p, align, mask);
    else b_.CreateAlignedStore(v, p, align);
    return;
  }
  if (!mask) mask = llvm::Constant::getAllOnesValue(vec_type(b_.getInt1Ty(), c.w));
  b_.CreateMaskedScatter(v, b_.CreateGEP(mt, base, vector_of(c, off)), align, mask);
}

// ---------------------------------------------------------------------------------------
// Loops

void KernelEmitter::loop(Value* lo, Value* hi, Value* step, const std::function<void(Value*)>& body, int unroll) {
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx_, "loop", fn_);
  auto* inside = llvm::BasicBlock::Create(ctx_, "body", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2);
  i->addIncoming(lo, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(i, hi), inside, exit);
  b_.SetInsertPoint(inside);
  body(i);
  i->addIncoming(b_.CreateAdd(i, step), b_.GetInsertBlock());
  llvm::BranchInst* latch = b_.CreateBr(header);
  if (unroll > 1) set_loop_hints(latch, {loop_hint("llvm.loop.unroll.count", b_.getInt32(unroll))});
  b_.SetInsertPoint(exit);
}

void KernelEmitter::lane_loops(std::vector<Value*>& dims, Value* lo, Value* hi, const LaneBody& body,
                               const std::vector<std::vector<Value*>>* at) {
  if (lane_bounds_.empty()) return lane_walk(dims, lo, hi, body);
  const std::vector<std::vector<Value*>> here{dims};
  if (at == nullptr) at = &here;
  // One stretch per run of lanes between cuts (all of them when there are none), with every
  // cut compare as it is at the stretch's first lane.
  const size_t known_before = known_.size();  // (a tile's window rows, known inside the input)
  for (size_t part = 0; part <= cuts_.size(); ++part) {
    const int64_t first = part == 0 ? 0 : cuts_[part - 1];
    for (const kir::LaneBound& b : lane_bounds_)
      if (kir::is_cut(b)) known_.emplace_back(b.compare, b.lane * first + b.rest.base >= 0);
    Value* from = part == 0 ? lo : b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, lo, i64(first)), hi);
    Value* to = part == cuts_.size() ? hi : b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, hi, i64(cuts_[part])), from);
    lane_interior(dims, from, to, body, *at);
    known_.resize(known_before);
  }
}

void KernelEmitter::lane_interior(std::vector<Value*>& dims, Value* lo, Value* hi, const LaneBody& body,
                                  const std::vector<std::vector<Value*>>& at) {
  Value* from = lo;
  Value* to = hi;
  std::vector<Ref> proven;
  for (const kir::LaneBound& bound : lane_bounds_) {
    if (kir::is_cut(bound)) continue;
    auto bound_here = [&](const std::vector<Value*>& p) {
      for (int d = 0; d < rank_; ++d)
        if (bound.rest.stride[static_cast<size_t>(d)] != 0 && p[static_cast<size_t>(d)] == nullptr) return false;
      return true;
    };
    if (!std::all_of(at.begin(), at.end(), bound_here)) continue;
    for (const std::vector<Value*>& p : at) {
      Value* e = i64(bound.rest.base);
      for (int d = 0; d < rank_; ++d)
        if (const int64_t s = bound.rest.stride[static_cast<size_t>(d)]; s != 0)
          e = b_.CreateAdd(e, b_.CreateMul(p[static_cast<size_t>(d)], i64(s)));
      // lane * l + e >= 0
      if (bound.lane > 0) from = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, from, ceil_div(b_.CreateNeg(e), bound.lane));
      else to = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, to, b_.CreateAdd(floor_div(e, -bound.lane), i64(1)));
    }
    proven.push_back(bound.compare);
  }
  if (proven.empty()) return lane_walk(dims, lo, hi, body);
  from = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, from, hi);
  to = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, to, from);
  lane_walk(dims, lo, from, body);
  const size_t cuts_known = known_.size();
  for (Ref r : proven) known_.emplace_back(r, true);
  lane_walk(dims, from, to, body);
  known_.resize(cuts_known);
  lane_walk(dims, to, hi, body);
}

void KernelEmitter::lane_walk(std::vector<Value*>& dims, Value* lo, Value* hi, const LaneBody& body) {
  Value* split = lo;
  // The vector loop is left out where the lane dim is narrower than one vector.
  if (width_ > 1 && (lane_dim_ < 0 || k_.domain[lane_dim_] >= static_cast<int64_t>(width_))) {
    Value* n = b_.CreateSub(hi, lo);
    split = b_.CreateAdd(lo, b_.CreateMul(b_.CreateSDiv(n, i64(width_)), i64(width_)));
    loop(
        lo, split, i64(width_),
        [&](Value* i) {
          dims[static_cast<size_t>(lane_dim_)] = i;
          body(width_, dims);
        },
        sched_.cpu.vector_unroll);
  }
  // A tile's lanes past its last whole vector step: one vector step with the lanes past
  // `hi` masked off (a depthwise 5x5's rows of 14 in 8 lanes: 2 steps, not 1 and 6 lanes).
  // Accumulator arrays are whole vectors long (emit_lane_tile).
  if (masked_tail()) {
    auto* step = llvm::BasicBlock::Create(ctx_, "masked.tail", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "masked.tail.done", fn_);
    b_.CreateCondBr(b_.CreateICmpSLT(split, hi), step, done);
    b_.SetInsertPoint(step);
    Value* const outer = std::exchange(live_, lanes_below(b_.CreateSub(hi, split)));
    dims[static_cast<size_t>(lane_dim_)] = split;
    body(width_, dims);
    live_ = outer;
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    return;
  }
  // A reduced row's steps are `accumulators` vectors wide: what they leave is walked a vector
  // at a time before the lanes one by one (a row of 49 in 16-lane registers, two chains: 32
  // + 16 + 1 lanes, not 32 + 17).
  if (const unsigned vector = middle_width()) {
    Value* n = b_.CreateSub(hi, split);
    Value* to = b_.CreateAdd(split, b_.CreateMul(b_.CreateSDiv(n, i64(vector)), i64(vector)));
    loop(split, to, i64(vector), [&](Value* i) {
      dims[static_cast<size_t>(lane_dim_)] = i;
      body(vector, dims);
    });
    split = to;
  }
  loop(split, hi, i64(1), [&](Value* i) {
    if (lane_dim_ >= 0) dims[static_cast<size_t>(lane_dim_)] = i;
    body(1, dims);
  });
}

void KernelEmitter::nest(std::vector<Value*>& dims, const std::vector<int>& loop_dims, size_t i,
                         const std::function<void()>& body, bool unrolled) {
  if (i == loop_dims.size()) return body();
  const auto d = static_cast<size_t>(loop_dims[i]);
  if (unrolled) {
    for (int64_t p = 0; p < k_.domain[loop_dims[i]]; ++p) {
      dims[d] = i64(p);
      nest(dims, loop_dims, i + 1, body, unrolled);
    }
    return;
  }
  loop(i64(0), i64(k_.domain[loop_dims[i]]), i64(1), [&](Value* iv) {
    dims[d] = iv;
    nest(dims, loop_dims, i + 1, body);
  });
}

void KernelEmitter::decompose(Value* index, const std::vector<int>& over, std::vector<Value*>& dims) {
  for (size_t j = over.size(); j-- > 0;) {
    const int64_t e = k_.domain[over[j]];
    dims[static_cast<size_t>(over[j])] = j == 0 ? index : b_.CreateURem(index, i64(e));
    if (j > 0) index = b_.CreateUDiv(index, i64(e));
  }
}

// ---------------------------------------------------------------------------------------
// Reductions

Value* KernelEmitter::identity(const Inst& r, unsigned w) {
  const DType t = acc_type(r);
  llvm::Type* ty = vec_type(reg_type(t), w);
  if (is_float(t)) {
    double v = 0;
    if (r.op == OpKind::ReduceProd) v = 1;
    if (r.op == OpKind::ReduceMax) v = -INFINITY;
    if (r.op == OpKind::ReduceMin) v = INFINITY;
    return llvm::ConstantFP::get(ty, v);
  }
  if (r.op == OpKind::ReduceProd) return llvm::ConstantInt::get(ty, 1);
  const unsigned bits = reg_type(t)->getIntegerBitWidth();
  if (r.op == OpKind::ReduceMax)
    return llvm::ConstantInt::get(ty, t == DType::Bool ? llvm::APInt(1, 0) : llvm::APInt::getSignedMinValue(bits));
  if (r.op == OpKind::ReduceMin)
    return llvm::ConstantInt::get(ty, t == DType::Bool ? llvm::APInt(1, 1) : llvm::APInt::getSignedMaxValue(bits));
  return llvm::ConstantInt::get(ty, 0);
}

Value* KernelEmitter::combine(const Inst& r, Value* acc, Value* x) {
  const DType t = acc_type(r);
  llvm::Type* ty = acc->getType();
  switch (r.op) {
    case OpKind::ReduceSum: return is_float(t) ? b_.CreateFAdd(acc, x) : b_.CreateAdd(acc, x);
    case OpKind::ReduceProd: return is_float(t) ? b_.CreateFMul(acc, x) : b_.CreateMul(acc, x);
    case OpKind::ReduceMax:
      if (is_float(t)) return b_.CreateIntrinsic(llvm::Intrinsic::maximum, {ty}, {acc, x});
      return b_.CreateIntrinsic(t == DType::Bool ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, {ty}, {acc, x});
    case OpKind::ReduceMin:
      if (is_float(t)) return b_.CreateIntrinsic(llvm::Intrinsic::minimum, {ty}, {acc, x});
      return b_.CreateIntrinsic(t == DType::Bool ? llvm::Intrinsic::umin : llvm::Intrinsic::smin, {ty}, {acc, x});
    default: break;
  }
  KILN_ASSERT(false, "combine: not a value reduction");
}

Value* KernelEmitter::horizontal(const Inst& r, Value* v) {
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType());
  if (!vt) return v;
  // Pairwise: halves combined until one lane is left.
  for (unsigned n = vt->getNumElements(); n > 1; n /= 2) {
    std::vector<int> lo, hi;
    for (unsigned l = 0; l < n / 2; ++l) {
      lo.push_back(static_cast<int>(l));
      hi.push_back(static_cast<int>(l + n / 2));
    }
    v = combine(r, b_.CreateShuffleVector(v, lo), b_.CreateShuffleVector(v, hi));
  }
  return b_.CreateExtractElement(v, uint64_t{0});
}

// One element into an arg reduction's state (pointers to its best value, position and
// "seen" flag). "Better" is the interpreter's: NaN beats every number, the first one wins.
void KernelEmitter::update_arg(const Inst& in, Value* x, Value* pos, Value* pv, Value* pi, Value* ps) {
  const DType vt = k_.insts[static_cast<size_t>(in.args[0])].type;
  Value* best = b_.CreateLoad(reg_type(vt), pv);
  const bool is_max = in.op == OpKind::ArgMax;
  Value* better;
  if (is_float(vt)) {
    Value* cmp = is_max ? b_.CreateFCmpOGT(x, best) : b_.CreateFCmpOLT(x, best);
    better = b_.CreateAnd(b_.CreateFCmpORD(best, best), b_.CreateOr(b_.CreateFCmpUNO(x, x), cmp));
  } else {
    better = is_max ? (vt == DType::Bool ? b_.CreateICmpUGT(x, best) : b_.CreateICmpSGT(x, best))
                    : (vt == DType::Bool ? b_.CreateICmpULT(x, best) : b_.CreateICmpSLT(x, best));
  }
  better = b_.CreateOr(b_.CreateNot(b_.CreateLoad(b_.getInt1Ty(), ps)), better);
  b_.CreateStore(b_.CreateSelect(better, x, best), pv);
  b_.CreateStore(b_.CreateSelect(better, pos, b_.CreateLoad(b_.getInt64Ty(), pi)), pi);
  b_.CreateStore(b_.getTrue(), ps);
}

// An arg reduction's running state: the best value so far, its position, and whether any
// element was seen. "Better" is the interpreter's: NaN beats every number, the first wins.
struct ArgState {
  llvm::AllocaInst* value;
  llvm::AllocaInst* index;
  llvm::AllocaInst* seen;
};

void KernelEmitter::emit_point_rows(Value* it) {
  std::vector<Value*> dims(static_cast<size_t>(rank_), nullptr);
  std::vector<int> kept, outer_reduced;
  for (int d = 0; d < rank_; ++d) {
    if (!k_.reduced[static_cast<size_t>(d)]) kept.push_back(d);
    else if (d != lane_dim_) outer_reduced.push_back(d);
  }
  decompose(it, kept, dims);
  std::map<Ref, Value*> results;  // reduction -> its value for this kept point
  auto reduce_value = [&](Ref r) { return Val{results.at(r), Val::Uniform}; };
  Value* last_extent = i64(k_.domain[lane_dim_]);
  for (int s = 1; s <= num_stages_; ++s) {
    const std::vector<Ref> reds = reduces_of_stage(s);
    if (empty_reduction()) {
      for (Ref r : reds) results[r] = empty_value(k_.insts[static_cast<size_t>(r)], 1);
      continue;
    }
    // One pass over the row for this stage's reductions: their values for this kept point.
    auto run_stage = [&](const std::vector<Ref>& run) {
      std::map<Ref, Value*> out;
      llvm::IRBuilderBase::InsertPoint ip = b_.saveIP();
      b_.SetInsertPoint(entry_, entry_->getFirstInsertionPt());
      std::map<Ref, llvm::AllocaInst*> vacc, macc, sacc;  // width_, middle_width() and one lane
      const unsigned vector = middle_width();
      const bool middle = vector > 0;
      std::map<Ref, ArgState> arg;
      for (Ref r : run) {
        const Inst& in = k_.insts[static_cast<size_t>(r)];
        if (is_arg_reduce(in.op)) {
          const DType vt = k_.insts[static_cast<size_t>(in.args[0])].type;
          arg[r] = {b_.CreateAlloca(reg_type(vt)), b_.CreateAlloca(b_.getInt64Ty()), b_.CreateAlloca(b_.getInt1Ty())};
        } else {
          vacc[r] = b_.CreateAlloca(vec_type(reg_type(acc_type(in)), width_));
          if (middle) macc[r] = b_.CreateAlloca(vec_type(reg_type(acc_type(in)), vector));
          sacc[r] = b_.CreateAlloca(reg_type(acc_type(in)));
        }
      }
      b_.restoreIP(ip);
      for (Ref r : run) {
        const Inst& in = k_.insts[static_cast<size_t>(r)];
        if (is_arg_reduce(in.op)) {
          b_.CreateStore(b_.getFalse(), arg[r].seen);
          b_.CreateStore(b_.getInt64(0), arg[r].index);
          b_.CreateStore(llvm::Constant::getNullValue(arg[r].value->getAllocatedType()), arg[r].value);
        } else {
          b_.CreateStore(identity(in, width_), vacc[r]);
          if (middle) b_.CreateStore(identity(in, vector), macc[r]);
          b_.CreateStore(identity(in, 1), sacc[r]);
        }
      }
      nest(dims, outer_reduced, 0, [&] {
        lane_loops(dims, i64(0), last_extent, [&](unsigned w, std::vector<Value*>& d) {
          Ctx c = make_ctx(w, d, reduce_value);
          row_cache_.offset = row_offset(d);
          if (s == 2) prefetch_rows(d, w, kept, /*stores_later=*/true);  // (not the one-lane f64 redo)
          for (Ref r : run) {
            const Inst& in = k_.insts[static_cast<size_t>(r)];
            if (is_arg_reduce(in.op)) {
              update_arg(in, get(c, in.args[0]).v, get(c, in.args[1]).v, arg[r].value, arg[r].index, arg[r].seen);
              continue;
            }
            const DType at = acc_type(in);
            Value* x = vector_of(c, get(c, in.args[0]));
            x = emit_cast(x, in.type, at);
            llvm::AllocaInst* acc = w == 1 ? sacc[r] : w == width_ ? vacc[r] : macc.at(r);
            b_.CreateStore(combine(in, b_.CreateLoad(acc->getAllocatedType(), acc), x), acc);
          }
        });
      });
      for (Ref r : run) {
        const Inst& in = k_.insts[static_cast<size_t>(r)];
        if (is_arg_reduce(in.op)) {
          out[r] = b_.CreateLoad(b_.getInt64Ty(), arg[r].index);
          continue;
        }
        Value* v = horizontal(in, b_.CreateLoad(vacc[r]->getAllocatedType(), vacc[r]));
        if (middle) v = combine(in, v, horizontal(in, b_.CreateLoad(macc[r]->getAllocatedType(), macc[r])));
        v = combine(in, v, b_.CreateLoad(sacc[r]->getAllocatedType(), sacc[r]));
        out[r] = emit_cast(v, acc_type(in), in.type);
      }
      return out;
    };
    std::map<Ref, Value*> fast = run_stage(reds);
    mark_row_cache_filled(reds);
    // f32 sums kept in f32 lanes (short runs) could overflow where the f64 sum the IR
    // promises does not: a row whose sum is not finite is summed again in f64.
    Value* redo = nullptr;
    std::vector<Ref> narrow;
    for (Ref r : reds) {
      const Inst& in = k_.insts[static_cast<size_t>(r)];
      if (in.op != OpKind::ReduceSum || in.type != DType::F32 || acc_type(in) == DType::F64) continue;
      narrow.push_back(r);
      Value* inf = b_.CreateFCmpOEQ(b_.CreateIntrinsic(llvm::Intrinsic::fabs, {fast[r]->getType()}, {fast[r]}),
                                    llvm::ConstantFP::getInfinity(fast[r]->getType()));
      Value* bad = b_.CreateOr(inf, b_.CreateFCmpUNO(fast[r], fast[r]));
      redo = redo ? b_.CreateOr(redo, bad) : bad;
    }
    if (redo == nullptr) {
      results.insert(fast.begin(), fast.end());
      continue;
    }
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* slow = llvm::BasicBlock::Create(ctx_, "wide.sum", fn_);
    auto* join = llvm::BasicBlock::Create(ctx_, "wide.join", fn_);
    b_.CreateCondBr(redo, slow, join);
    b_.SetInsertPoint(slow);
    // The fallback runs one lane at a time: it is rare, and small code compiles fast.
    wide_sums_ = true;
    const unsigned width = std::exchange(width_, 1u);
    std::map<Ref, Value*> wide = run_stage(narrow);
    width_ = width;
    wide_sums_ = false;
    llvm::BasicBlock* slow_end = b_.GetInsertBlock();
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    for (Ref r : reds) {
      if (!wide.count(r)) {
        results[r] = fast[r];
        continue;
      }
      llvm::PHINode* phi = b_.CreatePHI(fast[r]->getType(), 2);
      phi->addIncoming(fast[r], from);
      phi->addIncoming(wide[r], slow_end);
      results[r] = phi;
    }
  }
  // Stores of the kept point, then the stores inside the rows.
  {
    Ctx c = make_ctx(1, dims, reduce_value);
    emit_stores(c, [&](const kir::Store& s) { return !store_is_inner(s); });
  }
  bool any_inner = false;
  for (const kir::Store& s : k_.stores) any_inner = any_inner || store_is_inner(s);
  if (!any_inner) return;
  nest(dims, outer_reduced, 0, [&] {
    lane_loops(dims, i64(0), i64(k_.domain[lane_dim_]), [&](unsigned w, std::vector<Value*>& d) {
      Ctx c = make_ctx(w, d, reduce_value);
      row_cache_.offset = row_offset(d);
      if (num_stages_ == 1) prefetch_rows(d, w, kept, /*stores_later=*/false);
      emit_stores(c, [&](const kir::Store& s) { return store_is_inner(s); });
    });
  });
  row_cache_.offset = nullptr;
}

void KernelEmitter::prefetch_lines(int32_t buffer, const kir::Affine& a, const std::vector<Value*>& dims, int64_t shift,
                                   unsigned w, bool write) {
  Value* off = i64(a.base + shift);
  for (int d = 0; d < rank_; ++d)
    if (const int64_t stride = a.stride[static_cast<size_t>(d)]; stride != 0)
      off = b_.CreateAdd(off, b_.CreateMul(dims[static_cast<size_t>(d)], i64(stride)));
  const DType bt = k_.buffers[static_cast<size_t>(buffer)].type.dtype;
  // Past the buffer's end after its last row: a prefetch never faults.
  Value* p = b_.CreateGEP(mem_type(bt), bufs_[static_cast<size_t>(buffer)], off);
  constexpr int64_t kLine = 64;
  const int64_t bytes = static_cast<int64_t>(w) * static_cast<int64_t>(dtype_size(bt));
  for (int64_t at = 0; at < bytes; at += kLine)
    b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {p->getType()},
                       {b_.CreateGEP(b_.getInt8Ty(), p, i64(at)), b_.getInt32(write ? 1 : 0),
                        b_.getInt32(/*locality: all levels*/ 3), b_.getInt32(/*data*/ 1)});
}

void KernelEmitter::prefetch_rows(const std::vector<Value*>& dims, unsigned w, const std::vector<int>& kept,
                                  bool stores_later) {
  // The lines of this vector step, for the passes after a row's first, which compute from
  // cache while the memory system idles: what the loads read one kept point further on
  // (the next row, which its first pass streams from memory; the hardware prefetcher stops
  // at the end of each row), and, when a later pass stores into this row, the stores' lines,
  // for writing (their reads for ownership stalled the division of W3).
  if (!sched_.cpu.prefetch_rows || kept.empty() || lane_dim_ < 0 || w == 1) return;
  const auto next = static_cast<size_t>(kept.back());
  const auto lane = static_cast<size_t>(lane_dim_);
  std::set<std::pair<int32_t, Ref>> done;
  for (const Inst& in : k_.insts) {
    if (in.code != Code::Load || in.args.size() != 1) continue;  // (masked loads: left alone)
    const auto& a = affine_[static_cast<size_t>(in.args[0])];
    if (!a || a->stride[lane] != 1 || a->stride[next] == 0 || !done.insert({in.buffer, in.args[0]}).second) continue;
    prefetch_lines(in.buffer, *a, dims, a->stride[next], w, /*write=*/false);
  }
  if (!stores_later) return;
  for (const kir::Store& st : k_.stores) {
    if (!store_is_inner(st) || st.guard != kir::kNoRef) continue;
    const auto& a = affine_[static_cast<size_t>(st.offset)];
    if (a && a->stride[lane] == 1) prefetch_lines(st.buffer, *a, dims, 0, w, /*write=*/true);
  }
}

Value* KernelEmitter::row_offset(const std::vector<Value*>& dims) {
  if (row_cache_.buffers.empty()) return nullptr;
  Value* off = i64(0);
  int64_t stride = 1;
  for (int d = rank_ - 1; d >= 0; --d) {
    if (!k_.reduced[static_cast<size_t>(d)]) continue;
    off = b_.CreateAdd(off, b_.CreateMul(dims[static_cast<size_t>(d)], i64(stride)));
    stride *= k_.domain[d];
  }
  return off;
}

void KernelEmitter::mark_row_cache_filled(const std::vector<Ref>& reds) {
  // Everything this pass evaluated (its reductions' arguments) is in the cache now.
  std::vector<Ref> work;
  for (Ref red : reds)
    for (Ref a : k_.insts[static_cast<size_t>(red)].args) work.push_back(a);
  std::set<Ref> seen;
  while (!work.empty()) {
    const Ref r = work.back();
    work.pop_back();
    if (!seen.insert(r).second) continue;
    if (row_cache_.buffers.count(r)) row_cache_.filled.insert(r);
    const Inst& in = k_.insts[static_cast<size_t>(r)];
    if (in.code != Code::Reduce)
      for (Ref a : in.args) work.push_back(a);
  }
  row_cache_.offset = nullptr;
}

void KernelEmitter::emit_lane_tile(Value* it) {
  std::vector<Value*> dims(static_cast<size_t>(rank_), nullptr);
  std::vector<int> kept_outer, reduced;
  for (int d = 0; d < rank_; ++d) {
    if (k_.reduced[static_cast<size_t>(d)]) reduced.push_back(d);
    else if (d != lane_dim_) kept_outer.push_back(d);
  }
  const int64_t last = rank_ > 0 ? k_.domain[lane_dim_] : 1;
  const int64_t tile = sched_.tile;
  const int64_t ntiles = (last + tile - 1) / tile;
  Value* outer = b_.CreateUDiv(it, i64(ntiles));
  Value* t = b_.CreateURem(it, i64(ntiles));
  decompose(outer, kept_outer, dims);
  Value* c0 = b_.CreateMul(t, i64(tile));
  Value* c1 = b_.CreateIntrinsic(llvm::Intrinsic::smin, {b_.getInt64Ty()}, {b_.CreateAdd(c0, i64(tile)), i64(last)});
  // Where window rows split, the tile is emitted twice: for iterations whose window lies
  // inside the input, with its row bounds known true, and for the others.
  auto tile_body = [&] {
    // Reduction results, one per lane of the tile.
    std::map<Ref, llvm::AllocaInst*> acc;  // [tile x acc type]; arg reductions: the positions
    std::map<Ref, ArgState> arg;
    auto lane_offset = [&](Value* lane) { return b_.CreateSub(lane, c0); };
    std::function<Val(Ref, unsigned, std::vector<Value*>&)> read_result = [&](Ref r, unsigned w, std::vector<Value*>& d) {
      const Inst& in = k_.insts[static_cast<size_t>(r)];
      if (empty_reduction()) return Val{empty_value(in, w), w == 1 ? Val::Uniform : Val::Vector};
      llvm::AllocaInst* a = is_arg_reduce(in.op) ? arg[r].index : acc[r];
      llvm::Type* et = a->getAllocatedType()->getArrayElementType();
      Value* lane = rank_ > 0 ? lane_offset(d[static_cast<size_t>(lane_dim_)]) : i64(0);
      Value* p = b_.CreateGEP(et, a, lane);
      Value* v = b_.CreateAlignedLoad(vec_type(et, w), p, llvm::Align(1));
      if (!is_arg_reduce(in.op)) v = emit_cast(from_acc_memory(v, acc_type(in), w), acc_type(in), in.type);
      return Val{v, w == 1 ? Val::Uniform : Val::Vector};
    };
    for (int s = 1; s <= num_stages_; ++s) {
      const std::vector<Ref> reds = reduces_of_stage(s);
      if (empty_reduction()) continue;
      // One pass over the reduced dims for this stage: the accumulators of every lane.
      auto run_stage = [&](const std::vector<Ref>& run) {
        llvm::IRBuilderBase::InsertPoint ip = b_.saveIP();
        b_.SetInsertPoint(entry_, entry_->getFirstInsertionPt());
        for (Ref r : run) {
          const Inst& in = k_.insts[static_cast<size_t>(r)];
          if (is_arg_reduce(in.op)) {
            const DType vt = k_.insts[static_cast<size_t>(in.args[0])].type;
            arg[r] = {b_.CreateAlloca(llvm::ArrayType::get(reg_type(vt), static_cast<uint64_t>(tile))),
                      b_.CreateAlloca(llvm::ArrayType::get(b_.getInt64Ty(), static_cast<uint64_t>(tile))),
                      b_.CreateAlloca(llvm::ArrayType::get(b_.getInt1Ty(), static_cast<uint64_t>(tile)))};
          } else {
            // (A masked step's lanes past the tile read and write a vector past its end.)
            const int64_t lanes = masked_tail() ? tile + width_ : tile;
            acc[r] = b_.CreateAlloca(llvm::ArrayType::get(mem_type(acc_type(in)), static_cast<uint64_t>(lanes)));
          }
        }
        b_.restoreIP(ip);
        loop(i64(0), b_.CreateSub(c1, c0), i64(1), [&](Value* l) {
          for (Ref r : run) {
            const Inst& in = k_.insts[static_cast<size_t>(r)];
            if (is_arg_reduce(in.op)) {
              b_.CreateStore(b_.getFalse(), b_.CreateGEP(b_.getInt1Ty(), arg[r].seen, l));
              b_.CreateStore(b_.getInt64(0), b_.CreateGEP(b_.getInt64Ty(), arg[r].index, l));
            } else {
              b_.CreateStore(to_acc_memory(identity(in, 1), acc_type(in), 1), b_.CreateGEP(mem_type(acc_type(in)), acc[r], l));
            }
          }
        });
        // One row of the reduced dims into every lane's accumulators.
        auto accumulate = [&](unsigned w, std::vector<Value*>& d) {
          Ctx c = make_ctx(w, d, [&](Ref r) { return read_result(r, w, d); });
          Value* lane = rank_ > 0 ? lane_offset(d[static_cast<size_t>(lane_dim_)]) : i64(0);
          for (Ref r : run) {
            const Inst& in = k_.insts[static_cast<size_t>(r)];
            if (is_arg_reduce(in.op)) {  // width 1 (arg reductions run scalar)
              const DType vt = k_.insts[static_cast<size_t>(in.args[0])].type;
              llvm::Type* et = reg_type(vt);
              Value* pv = b_.CreateGEP(et, arg[r].value, lane);
              Value* pi = b_.CreateGEP(b_.getInt64Ty(), arg[r].index, lane);
              Value* ps = b_.CreateGEP(b_.getInt1Ty(), arg[r].seen, lane);
              update_arg(in, get(c, in.args[0]).v, get(c, in.args[1]).v, pv, pi, ps);
              continue;
            }
            const DType at = acc_type(in);
            llvm::Type* et = mem_type(at);
            Value* x = emit_cast(vector_of(c, get(c, in.args[0])), in.type, at);
            Value* p = b_.CreateGEP(et, acc[r], lane);
            Value* cur = from_acc_memory(b_.CreateAlignedLoad(vec_type(et, w), p, llvm::Align(1)), at, w);
            b_.CreateAlignedStore(to_acc_memory(combine(in, cur, x), at, w), p, llvm::Align(1));
          }
        };
        // Without arg reductions, the innermost reduced dim goes `unroll` rows at a time:
        // their values are combined first (pairwise) and added to the accumulators once, which
        // saves most of the accumulator loads and stores.
        const bool any_arg = std::any_of(run.begin(), run.end(), [&](Ref r) { return is_arg_reduce(k_.insts[static_cast<size_t>(r)].op); });
        const int64_t kRowsPerStep = std::max(1, sched_.cpu.unroll);
        const bool window_unrolled = sched_.cpu.unroll_window != 0;
        const std::vector<int> outer_reduced(reduced.begin(), reduced.empty() ? reduced.end() : reduced.end() - 1);
        if (reduced.empty() || any_arg || kRowsPerStep < 2 || k_.domain[reduced.back()] < kRowsPerStep) {
          nest(dims, outer_reduced, 0, [&] {
            const std::vector<int> innermost(reduced.end() - (reduced.empty() ? 0 : 1), reduced.end());
            nest(dims, innermost, 0, [&] { lane_loops(dims, c0, c1, accumulate); });
          }, window_unrolled);
          return;
        }
        const int rd = reduced.back();
        const int64_t rows = k_.domain[rd], main = rows / kRowsPerStep * kRowsPerStep;
        nest(dims, outer_reduced, 0, [&] {
          auto step = [&](Value* r0) {
            std::vector<std::vector<Value*>> row_positions;  // of the rows this step adds
            for (int64_t u = 0; u < kRowsPerStep; ++u) {
              row_positions.push_back(dims);
              row_positions.back()[static_cast<size_t>(rd)] = b_.CreateAdd(r0, i64(u));
            }
            lane_loops(dims, c0, c1, [&](unsigned w, std::vector<Value*>& d) {
              std::vector<Ctx> ctx;
              for (int64_t u = 0; u < kRowsPerStep; ++u) {
                std::vector<Value*> du = d;
                du[static_cast<size_t>(rd)] = row_positions[static_cast<size_t>(u)][static_cast<size_t>(rd)];
                ctx.push_back(make_ctx(w, du, [&, w](Ref r) { return read_result(r, w, d); }));
              }
              Value* lane = rank_ > 0 ? lane_offset(d[static_cast<size_t>(lane_dim_)]) : i64(0);
              for (Ref r : run) {
                const Inst& in = k_.insts[static_cast<size_t>(r)];
                const DType at = acc_type(in);
                std::vector<Value*> xs;
                for (Ctx& c : ctx) xs.push_back(emit_cast(vector_of(c, get(c, in.args[0])), in.type, at));
                while (xs.size() > 1) {
                  std::vector<Value*> next;
                  for (size_t i = 0; i + 1 < xs.size(); i += 2) next.push_back(combine(in, xs[i], xs[i + 1]));
                  if (xs.size() % 2) next.push_back(xs.back());
                  xs = std::move(next);
                }
                llvm::Type* et = mem_type(at);
                Value* p = b_.CreateGEP(et, acc[r], lane);
                Value* cur = from_acc_memory(b_.CreateAlignedLoad(vec_type(et, w), p, llvm::Align(1)), at, w);
                b_.CreateAlignedStore(to_acc_memory(combine(in, cur, xs[0]), at, w), p, llvm::Align(1));
              }
            }, &row_positions);
          };
          auto one_row = [&](Value* r) {
            dims[static_cast<size_t>(rd)] = r;
            lane_loops(dims, c0, c1, accumulate);
          };
          if (window_unrolled) {
            for (int64_t r = 0; r < main; r += kRowsPerStep) step(i64(r));
            for (int64_t r = main; r < rows; ++r) one_row(i64(r));
            return;
          }
          loop(i64(0), i64(main), i64(kRowsPerStep), step);
          loop(i64(main), i64(rows), i64(1), one_row);
        }, window_unrolled);
      };
      run_stage(reds);
      // As along rows: f32 sums kept in f32 whose total overflows are summed again in f64
      // (the whole tile), then rounded into the f32 accumulators the stores read.
      std::vector<Ref> narrow;
      for (Ref r : reds) {
        const Inst& in = k_.insts[static_cast<size_t>(r)];
        if (in.op == OpKind::ReduceSum && in.type == DType::F32 && acc_type(in) == DType::F32) narrow.push_back(r);
      }
      if (narrow.empty()) continue;
      llvm::AllocaInst* bad;
      {
        llvm::IRBuilder<> eb(entry_, entry_->getFirstInsertionPt());
        bad = eb.CreateAlloca(b_.getInt1Ty());
      }
      b_.CreateStore(b_.getFalse(), bad);
      // A vector of lanes at a time, what is left in one masked vector: |sum| >= inf or
      // unordered. (Lane by lane, the check took a third of a depthwise 5x5's rows of 14; the
      // last 14 lanes one at a time, another third.)
      auto check = [&](Value* l, unsigned w, Value* mask) {
        for (Ref r : narrow) {
          llvm::Type* vt = vec_type(b_.getFloatTy(), w);
          Value* at = b_.CreateGEP(b_.getFloatTy(), acc[r], l);
          Value* v = mask ? static_cast<Value*>(b_.CreateMaskedLoad(vt, at, llvm::Align(1), mask, llvm::Constant::getNullValue(vt)))
                          : b_.CreateAlignedLoad(vt, at, llvm::Align(1));
          Value* big = b_.CreateFCmpUGE(b_.CreateIntrinsic(llvm::Intrinsic::fabs, {v->getType()}, {v}),
                                        llvm::ConstantFP::getInfinity(v->getType()));
          if (w > 1) big = b_.CreateOrReduce(big);
          b_.CreateStore(b_.CreateOr(b_.CreateLoad(b_.getInt1Ty(), bad), big), bad);
        }
      };
      Value* lanes = b_.CreateSub(c1, c0);
      if (width_ > 1) {
        Value* whole = b_.CreateMul(b_.CreateSDiv(lanes, i64(width_)), i64(width_));
        loop(i64(0), whole, i64(width_), [&](Value* l) { check(l, width_, nullptr); });
        auto* tail = llvm::BasicBlock::Create(ctx_, "check.tail", fn_);
        auto* checked = llvm::BasicBlock::Create(ctx_, "check.done", fn_);
        b_.CreateCondBr(b_.CreateICmpSLT(whole, lanes), tail, checked);
        b_.SetInsertPoint(tail);
        check(whole, width_, lanes_below(b_.CreateSub(lanes, whole)));
        b_.CreateBr(checked);
        b_.SetInsertPoint(checked);
      } else {
        loop(i64(0), lanes, i64(1), [&](Value* l) { check(l, 1, nullptr); });
      }
      auto* slow = llvm::BasicBlock::Create(ctx_, "wide.sum", fn_);
      auto* join = llvm::BasicBlock::Create(ctx_, "wide.join", fn_);
      b_.CreateCondBr(b_.CreateLoad(b_.getInt1Ty(), bad), slow, join);
      b_.SetInsertPoint(slow);
      const std::map<Ref, llvm::AllocaInst*> fast = acc;
      wide_sums_ = true;
      const unsigned width = std::exchange(width_, 1u);  // rare: small code, one lane at a time
      run_stage(narrow);  // the other reductions keep their results
      width_ = width;
      loop(i64(0), b_.CreateSub(c1, c0), i64(1), [&](Value* l) {
        for (Ref r : narrow) {
          Value* v = b_.CreateLoad(b_.getDoubleTy(), b_.CreateGEP(b_.getDoubleTy(), acc[r], l));
          b_.CreateStore(b_.CreateFPTrunc(v, b_.getFloatTy()), b_.CreateGEP(b_.getFloatTy(), fast.at(r), l));
        }
      });
      wide_sums_ = false;
      acc = fast;
      b_.CreateBr(join);
      b_.SetInsertPoint(join);
    }
    auto stores = [&](bool inner) {
      lane_loops(dims, c0, c1, [&](unsigned w, std::vector<Value*>& d) {
        Ctx c = make_ctx(w, d, [&](Ref r) { return read_result(r, w, d); });
        emit_stores(c, [&](const kir::Store& s) { return store_is_inner(s) == inner; });
      });
    };
    // (The reduced dims' loops are over: no bound of the lanes may read their last values.)
    for (int d : reduced) dims[static_cast<size_t>(d)] = nullptr;
    stores(false);
    bool any_inner = false;
    for (const kir::Store& s : k_.stores) any_inner = any_inner || store_is_inner(s);
    if (any_inner) nest(dims, reduced, 0, [&] { stores(true); });
  };
  if (row_bounds_.empty()) return tile_body();
  const std::vector<Value*> kept = dims;
  Value* inside = b_.getTrue();
  for (const kir::LaneBound& bound : row_bounds_) {  // each its least over the window
    Value* least = i64(bound.rest.base);
    for (int d = 0; d < rank_; ++d)
      if (const int64_t stride = bound.rest.stride[static_cast<size_t>(d)]; stride != 0)
        least = b_.CreateAdd(least, b_.CreateMul(dims[static_cast<size_t>(d)], i64(stride)));
    inside = b_.CreateAnd(inside, b_.CreateICmpSGE(least, i64(0)));
  }
  auto* within = llvm::BasicBlock::Create(ctx_, "window.inside", fn_);
  auto* across = llvm::BasicBlock::Create(ctx_, "window.edge", fn_);
  auto* joined = llvm::BasicBlock::Create(ctx_, "window.join", fn_);
  b_.CreateCondBr(inside, within, across);
  b_.SetInsertPoint(within);
  const size_t known_before = known_.size();
  for (const kir::LaneBound& bound : row_bounds_) known_.emplace_back(bound.compare, true);
  tile_body();
  known_.resize(known_before);
  b_.CreateBr(joined);
  b_.SetInsertPoint(across);
  dims = kept;  // (the first walk left its loops' positions in the dims)
  tile_body();
  b_.CreateBr(joined);
  b_.SetInsertPoint(joined);
}

void KernelEmitter::emit(const std::string& name) {
  // The exported entry loads the buffer pointers and calls the body, whose pointer
  // parameters are noalias (distinct buffers never overlap); the body is inlined.
  llvm::Type* ptr = b_.getPtrTy();
  std::vector<llvm::Type*> params(k_.buffers.size(), ptr);
  for (DType t : k_.scalars) params.push_back(reg_type(t));
  params.push_back(b_.getInt64Ty());
  params.push_back(b_.getInt64Ty());
  fn_ = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), params, false), llvm::Function::InternalLinkage,
                               name + ".body", m_);
  fn_->addFnAttr(llvm::Attribute::AlwaysInline);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  for (size_t i = 0; i < k_.buffers.size(); ++i) fn_->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::NoAlias);
  entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry_);
  for (size_t i = 0; i < k_.buffers.size(); ++i) bufs_.push_back(fn_->getArg(static_cast<unsigned>(i)));
  const size_t nargs = k_.buffers.size() + k_.scalars.size();
  for (size_t i = k_.buffers.size(); i < nargs; ++i) scalars_.push_back(fn_->getArg(static_cast<unsigned>(i)));
  plan_row_cache();
  Value* begin = fn_->getArg(static_cast<unsigned>(nargs));
  Value* end = fn_->getArg(static_cast<unsigned>(nargs + 1));
  loop(begin, end, i64(1), [&](Value* it) {
    if (sched_.lanes_reduce) emit_point_rows(it);
    else emit_lane_tile(it);
  });
  b_.CreateRetVoid();

  llvm::Function* entry = llvm::Function::Create(
      llvm::FunctionType::get(b_.getVoidTy(), {ptr, b_.getInt64Ty(), b_.getInt64Ty()}, false),
      llvm::Function::ExternalLinkage, name, m_);
  entry->addFnAttr(llvm::Attribute::NoUnwind);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", entry));
  std::vector<Value*> args;
  for (size_t i = 0; i < k_.buffers.size(); ++i)
    args.push_back(b_.CreateLoad(ptr, b_.CreateConstGEP1_64(ptr, entry->getArg(0), i)));
  // Scalar arguments follow the buffers: each a pointer to one element of its dtype.
  for (size_t a = 0; a < k_.scalars.size(); ++a) {
    Value* p = b_.CreateLoad(ptr, b_.CreateConstGEP1_64(ptr, entry->getArg(0), k_.buffers.size() + a));
    Value* v = b_.CreateLoad(mem_type(k_.scalars[a]), p);
    if (k_.scalars[a] == DType::Bool) v = b_.CreateICmpNE(v, b_.getInt8(0));
    args.push_back(v);
  }
  args.push_back(entry->getArg(1));
  args.push_back(entry->getArg(2));
  b_.CreateCall(fn_, args);
  b_.CreateRetVoid();
}

}  // namespace

std::unique_ptr<llvm::Module> emit_kernel(const kir::Kernel& k, const kir::Schedule& schedule,
                                          const std::string& fn_name, llvm::LLVMContext& ctx, bool f16c) {
  auto m = std::make_unique<llvm::Module>(fn_name, ctx);
  std::vector<llvm::Function*> customs;
  for (size_t c = 0; c < k.customs.size(); ++c) {
    const std::string bitcode = custom_bitcode(*k.customs[c], kir::custom_macro_values(k, schedule, c));
    const std::string symbol = fmt::format("{}.custom{}", fn_name, c);
    if (llvm::Linker::linkModules(*m, custom_module(bitcode, *k.customs[c], symbol, ctx)))
      throw Error(fmt::format("internal error: linking custom kernel @{} into kernel @{}", k.customs[c]->name, k.name));
    customs.push_back(m->getFunction(symbol));
    customs.back()->setLinkage(llvm::GlobalValue::InternalLinkage);
  }
  // A schedule that merges rows walks the same points over the merged domain.
  const std::optional<kir::Kernel> merged = schedule.cpu.merge_rows ? std::optional(kir::merge_rows(k)) : std::nullopt;
  KernelEmitter emitter(merged ? *merged : k, schedule, ctx, *m, f16c);
  emitter.use_customs(std::move(customs));
  emitter.emit(fn_name);
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(*m, &os))
    throw Error(fmt::format("internal error: kernel @{} produced invalid LLVM IR: {}", k.name, os.str()));
  return m;
}

}  // namespace kiln::cpu
