// passes/contract_matmul.cpp - a matmul becomes the contraction it is: a broadcast product
// summed over the contracting axis.
//
//   %c = matmul %a, %b : f32[B,M,N]          with %a: f32[B,M,K], %b: f32[B,K,N]
// becomes
//   %a1 = reshape %a : f32[B,M,K,1]      %a2 = expand %a1 : f32[B,M,K,N]
//   %b1 = reshape %b : f32[B,1,K,N]      %b2 = expand %b1 : f32[B,M,K,N]
//   %p  = mul %a2, %b2 : f32[B,M,K,N]
//   %c  = reduce_sum %p {axes = [2]} : f32[B,M,N]
// (operands cast to f64 for floats, i64 for integers, and the sum cast back to the result
// type, which rounds once or wraps as the interpreter's matmul does: the pass changes no
// value).
// Nothing [B,M,K,N] is ever stored: fusion
// makes one reduction kernel over that domain whose loads read A and B through index maps,
// with the matmul's epilogue fused after the sum, so a backend without a GEMM library step
// (the GPU kinds) runs matmul as a kernel it generates like any other. It is the simple
// correct form: a work-item per output element, no tiles in local memory, f64 arithmetic.
#include "kiln/passes/pass_manager.h"
#include "rewriter.h"

namespace kiln {

Graph contract_matmul(const Graph& g, const PassOptions&) {
  passes::Rewriter r(g, /*keep_kernels=*/false);
  auto add = [&](OpKind op, TensorType type, std::vector<ValueId> operands) {
    Node n;
    n.op = op;
    n.type = std::move(type);
    n.operands = std::move(operands);
    n.attrs = Graph::make_attrs(op);
    return r.add(std::move(n));
  };
  for (size_t id = 0; id < g.size(); ++id) {
    const auto v = static_cast<ValueId>(id);
    const Node& n = g.node(v);
    if (n.op != OpKind::Matmul || n.kernel >= 0) {
      if (n.op != OpKind::Input) r.copy(v);
      continue;
    }
    // Floats multiply and add in f64, as the interpreter's matmul does: the product of two
    // f32 is exact there, and the sum rounds once at the end, so the values are unchanged.
    // Integers wrap in i64 as the interpreter's do, and keep their low bits when cast back.
    const DType t = is_float(n.type.dtype) ? DType::F64 : DType::I64;
    const Shape& out = n.type.shape;
    const int rank = out.rank();
    const int64_t m = out[rank - 2], nn = out[rank - 1];
    const TensorType& at = g.type(n.operands[0]);
    const int64_t k = at.shape[at.shape.rank() - 1];
    // [batch..., M, K, N]: the product's domain.
    Shape full(out.dims().first(static_cast<size_t>(rank - 2)));
    full.push_back(m);
    full.push_back(k);
    full.push_back(nn);
    auto operand = [&](ValueId x, bool is_a) {
      ValueId y = r.map(x);
      const TensorType& xt = g.type(x);
      if (xt.dtype != t) y = add(OpKind::Cast, TensorType{t, xt.shape}, {y});
      // A: [..., M, K] -> [..., M, K, 1]; B: [..., K, N] -> [..., 1, K, N].
      Shape s(xt.shape.dims().first(static_cast<size_t>(xt.shape.rank() - 2)));
      if (is_a) {
        s.push_back(m);
        s.push_back(k);
        s.push_back(1);
      } else {
        s.push_back(1);
        s.push_back(k);
        s.push_back(nn);
      }
      y = add(OpKind::Reshape, TensorType{t, s}, {y});
      return add(OpKind::Expand, TensorType{t, full}, {y});
    };
    const ValueId a = operand(n.operands[0], true), b = operand(n.operands[1], false);
    const ValueId product = add(OpKind::Mul, TensorType{t, full}, {a, b});
    Node sum;
    sum.op = OpKind::ReduceSum;
    sum.type = TensorType{t, out};
    sum.operands = {product};
    sum.attrs = Graph::make_attrs(OpKind::ReduceSum);
    sum.attr("axes").present = true;
    sum.attr("axes").ints = {rank - 1};
    sum.loc = n.loc;
    ValueId result = r.add(std::move(sum));
    if (t != n.type.dtype) result = add(OpKind::Cast, n.type, {result});
    r.out().node(result).name = n.name;
    r.set(v, result);
  }
  return r.finish();
}

}  // namespace kiln
