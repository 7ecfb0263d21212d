// codegen/vector_lanes.cpp - which kernels a C-family work-item computes as vectors of lanes.
//
// With Schedule::vector_width lanes, a work-item computes that many consecutive points of the
// last dim. The emitter writes a value that varies along it either once per lane in scalar
// code, or as one vector (float16) where the language has vector values and every such value
// has a vector form. PoCL turns scalar lanes back into vectors poorly: W3's softmax rows took
// 16.5 ms with 4 scalar lanes against 5.4 as float16 values (benchmarks/RESULTS.md).
#include <vector>

#include "kiln/codegen/c_source.h"
#include "kiln/ir/op.h"

namespace kiln::kir {
namespace {

bool float_value(DType t) { return t == DType::F32 || t == DType::F64; }

// Ops whose vector form the emitter writes (c_emitter.cpp, op_expr): the same text with
// vector operands, or a helper of the dialect's with a vector overload.
bool vector_op(OpKind op) {
  switch (op) {
    case OpKind::Neg:
    case OpKind::Abs:
    case OpKind::Relu:
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Max:
    case OpKind::Min:
    case OpKind::Exp:
    case OpKind::Log:
    case OpKind::Tanh:
    case OpKind::Erf:
    case OpKind::Sqrt:
    case OpKind::Rsqrt:
    case OpKind::Sigmoid: return true;
    default: return false;
  }
}

// A reduction to a value (sum, product, max, min), not to a position.
bool value_reduction(OpKind op) { return !op_info(op).has(trait::ArgReduce); }

}  // namespace

bool c_lanes_as_vectors(const Kernel& k, int lanes) {
  const int rank = k.domain.rank();
  if (lanes < 2 || rank == 0 || k.in_order || !k.customs.empty() || k.domain[rank - 1] % lanes != 0) return false;
  const int lane_dim = rank - 1;
  const uint64_t lane_bit = uint64_t{1} << lane_dim;
  const std::vector<uint64_t> deps = dim_dependence(k);
  const std::vector<std::optional<Affine>> affine = affine_analysis(k);
  const size_t n = k.insts.size();
  auto per_lane = [&](Ref r) { return (deps[static_cast<size_t>(r)] & lane_bit) != 0; };
  // An offset that steps by one along the lanes: lane 0's, plus the lane.
  auto contiguous = [&](Ref offset) {
    const std::optional<Affine>& a = affine[static_cast<size_t>(offset)];
    return a && a->stride[static_cast<size_t>(lane_dim)] == 1;
  };

  // Stores of lanes: one vector of the buffer's own type, whole.
  std::vector<uint8_t> other_use(n, 0);  // read other than as a position or a vector access's offset
  for (const Store& st : k.stores) {
    const bool lanes_stored = per_lane(st.offset) || per_lane(st.value) || (st.guard != kNoRef && per_lane(st.guard));
    if (!lanes_stored) continue;
    const DType memory = k.buffers[static_cast<size_t>(st.buffer)].type.dtype;
    if (st.guard != kNoRef || !per_lane(st.value) || !contiguous(st.offset) ||
        memory != k.insts[static_cast<size_t>(st.value)].type)
      return false;
    other_use[static_cast<size_t>(st.value)] = 1;
  }
  // Users come after what they read: walking backwards, each position's uses are settled.
  for (size_t i = n; i-- > 0;) {
    const Inst& in = k.insts[i];
    const bool lane_value = per_lane(static_cast<Ref>(i));
    if (lane_value && is_integer(in.type)) {
      // A position: only lane 0's is computed, so it may only address vector accesses.
      if (other_use[i] || in.code == Code::Load || in.code == Code::Rand || in.code == Code::Reduce) return false;
    } else if (lane_value) {
      if (!float_value(in.type)) return false;
      switch (in.code) {
        case Code::Load:
          if (in.args.size() != 1 || !contiguous(in.args[0]) ||
              k.buffers[static_cast<size_t>(in.buffer)].type.dtype != in.type)
            return false;
          break;
        case Code::Cast:
          if (!float_value(k.insts[static_cast<size_t>(in.args[0])].type) || in.imm == kCastToOdd) return false;
          break;
        case Code::Op:
        case Code::Reduce:
          if (!(in.code == Code::Op ? vector_op(in.op) : value_reduction(in.op))) return false;
          for (Ref a : in.args)
            if (!float_value(k.insts[static_cast<size_t>(a)].type)) return false;
          break;
        default: return false;
      }
    } else if (in.code == Code::Reduce && k.reduced[static_cast<size_t>(lane_dim)]) {
      // Along a row of lanes every reduction keeps a vector of accumulators.
      const DType arg = k.insts[static_cast<size_t>(in.args[0])].type;
      if (!value_reduction(in.op) || !float_value(in.type) || !float_value(arg)) return false;
    }
    for (size_t a = 0; a < in.args.size(); ++a) {
      const auto r = static_cast<size_t>(in.args[a]);
      const bool vector_offset = in.code == Code::Load && lane_value && contiguous(in.args[0]);  // checked above
      // A position's operands are positions too.
      if (!vector_offset && !(lane_value && is_integer(in.type))) other_use[r] = 1;
    }
  }
  return true;
}

}  // namespace kiln::kir
