// backends/cpu/attention_codegen.cpp - see attention_codegen.h.
//
// Two passes over each row of the block, in vectors: the maximum of the scaled scores (NaN
// ignored: a select on an ordered compare; noted apart), then exp(scale * S - m'), stored
// back and summed. The block is a few KiB, in L1, so the second pass costs no memory
// traffic. Lanes past the row's valid columns read as -inf (their exp is 0).
#include "attention_codegen.h"

#include <limits>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "kiln/support/error.h"
#include "vector_math.h"

namespace kiln::cpu {

std::unique_ptr<llvm::Module> emit_attention_softmax(int vector_width, const std::string& fn_name,
                                                     llvm::LLVMContext& ctx) {
  using llvm::Value;
  KILN_ASSERT(vector_width >= 1, "attention softmax: a vector width");
  auto m = std::make_unique<llvm::Module>(fn_name, ctx);
  llvm::IRBuilder<> b(ctx);
  llvm::Type* f32 = b.getFloatTy();
  auto* vt = llvm::FixedVectorType::get(f32, static_cast<unsigned>(vector_width));
  auto* ptr = b.getPtrTy();
  auto* i64 = b.getInt64Ty();
  auto* f = llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), {ptr, i64, i64}, false),
                                   llvm::Function::ExternalLinkage, fn_name, m.get());
  f->addFnAttr(llvm::Attribute::NoUnwind);
  Value* rows = f->getArg(1);
  Value* cols = f->getArg(2);
  auto block = [&](const char* name) { return llvm::BasicBlock::Create(ctx, name, f); };
  auto* entry = block("entry");
  auto* row_head = block("row");
  auto* max_loop = block("max");
  auto* max_done = block("max.done");
  auto* exp_loop = block("exp");
  auto* masked = block("masked");
  auto* zero_loop = block("zero");
  auto* row_end = block("row.end");
  auto* done = block("done");
  b.SetInsertPoint(entry);
  auto arg = [&](int i) { return b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, f->getArg(0), static_cast<uint64_t>(i))); };
  Value* s = arg(0);
  Value* mp = arg(1);
  Value* lp = arg(2);
  Value* ap = arg(3);
  Value* scale = b.CreateVectorSplat(static_cast<unsigned>(vector_width), b.CreateLoad(f32, arg(4)));
  Value* ld = b.CreateLoad(i64, arg(5));
  Value* nanp = arg(6);
  Value* biasp = arg(7);  // null: no bias
  Value* bias_ld = b.CreateLoad(i64, arg(8));
  Value* has_bias = b.CreateIsNotNull(biasp);
  const llvm::Align align(4);
  const double inf = std::numeric_limits<double>::infinity();
  const auto vw = static_cast<uint64_t>(vector_width);
  Value* vectors = b.CreateUDiv(b.CreateAdd(cols, b.getInt64(vw - 1)), b.getInt64(vw));
  // Lane l of vector v is column v * vw + l: the lanes at or past `cols` read as -inf.
  std::vector<llvm::Constant*> iota;
  for (uint64_t l = 0; l < vw; ++l) iota.push_back(b.getInt64(l));
  Value* lanes = llvm::ConstantVector::get(iota);
  Value* neg_inf = llvm::ConstantFP::get(vt, -inf);
  // The scaled scores of vector v of a row, plus the bias row's (a masked load: the bias
  // ends at `cols`), and where the scores lie.
  llvm::Function* masked_load =
      llvm::Intrinsic::getDeclaration(m.get(), llvm::Intrinsic::masked_load, {vt, b.getPtrTy()});
  auto scores_at = [&](Value* row, Value* bias_row, Value* v) {
    Value* first = b.CreateMul(v, b.getInt64(vw));
    Value* inside = b.CreateICmpSLT(b.CreateAdd(b.CreateVectorSplat(static_cast<unsigned>(vw), first), lanes),
                                    b.CreateVectorSplat(static_cast<unsigned>(vw), cols));
    Value* x = b.CreateFMul(b.CreateAlignedLoad(vt, b.CreateGEP(f32, row, first), align), scale);
    Value* load = b.CreateAnd(inside, b.CreateVectorSplat(static_cast<unsigned>(vw), has_bias));
    x = b.CreateFAdd(x, b.CreateCall(masked_load, {b.CreateGEP(f32, bias_row, first), b.getInt32(4), load,
                                                   llvm::ConstantFP::get(vt, 0.0)}));
    return std::pair{b.CreateSelect(inside, x, neg_inf), b.CreateGEP(f32, row, first)};
  };
  b.CreateCondBr(b.CreateAnd(b.CreateICmpSGT(rows, b.getInt64(0)), b.CreateICmpSGT(vectors, b.getInt64(0))), row_head,
                 done);

  // Row r: its scores at s + r * ld.
  b.SetInsertPoint(row_head);
  llvm::PHINode* r = b.CreatePHI(i64, 2, "r");
  r->addIncoming(b.getInt64(0), entry);
  Value* row = b.CreateGEP(f32, s, b.CreateMul(r, ld));
  // Without a bias the masked load reads nothing (every lane is off) and adds 0.
  Value* bias_row = b.CreateSelect(has_bias, b.CreateGEP(f32, biasp, b.CreateMul(r, bias_ld)), s);
  b.CreateBr(max_loop);

  // The row's maximum, NaN ignored.
  b.SetInsertPoint(max_loop);
  llvm::PHINode* v = b.CreatePHI(i64, 2, "v");
  llvm::PHINode* most = b.CreatePHI(vt, 2, "most");
  auto* bool_vt = llvm::FixedVectorType::get(b.getInt1Ty(), static_cast<unsigned>(vw));
  llvm::PHINode* nan = b.CreatePHI(bool_vt, 2, "nan");
  v->addIncoming(b.getInt64(0), row_head);
  most->addIncoming(neg_inf, row_head);
  nan->addIncoming(llvm::Constant::getNullValue(bool_vt), row_head);
  Value* x = scores_at(row, bias_row, v).first;
  Value* most1 = b.CreateSelect(b.CreateFCmpOGT(x, most), x, most);
  Value* nan1 = b.CreateOr(nan, b.CreateFCmpUNO(x, x));
  Value* v1 = b.CreateAdd(v, b.getInt64(1));
  v->addIncoming(v1, max_loop);
  most->addIncoming(most1, max_loop);
  nan->addIncoming(nan1, max_loop);
  b.CreateCondBr(b.CreateICmpSLT(v1, vectors), max_loop, max_done);

  b.SetInsertPoint(max_done);
  Value* row_max = b.CreateExtractElement(most1, uint64_t{0});
  for (int lane = 1; lane < vector_width; ++lane) {
    Value* e = b.CreateExtractElement(most1, static_cast<uint64_t>(lane));
    row_max = b.CreateSelect(b.CreateFCmpOGT(e, row_max), e, row_max);
  }
  // A NaN score makes the row undefined: noted for the caller.
  Value* any_nan = b.CreateOrReduce(nan1);
  Value* nan_at = b.CreateGEP(b.getInt8Ty(), nanp, r);
  b.CreateStore(b.CreateOr(b.CreateLoad(b.getInt8Ty(), nan_at), b.CreateZExt(any_nan, b.getInt8Ty())), nan_at);
  Value* m_at = b.CreateGEP(f32, mp, r);
  Value* l_at = b.CreateGEP(f32, lp, r);
  Value* a_at = b.CreateGEP(f32, ap, r);
  Value* m_old = b.CreateLoad(f32, m_at);
  Value* m_new = b.CreateSelect(b.CreateFCmpOGT(row_max, m_old), row_max, m_old);
  b.CreateStore(m_new, m_at);
  Value* none = b.CreateFCmpOEQ(m_new, llvm::ConstantFP::get(f32, -inf));
  Value* m_splat = b.CreateVectorSplat(static_cast<unsigned>(vector_width), m_new);
  b.CreateCondBr(none, masked, exp_loop);

  // S = exp(S - m'), summed.
  b.SetInsertPoint(exp_loop);
  llvm::PHINode* w = b.CreatePHI(i64, 2, "w");
  llvm::PHINode* sum = b.CreatePHI(vt, 2, "sum");
  w->addIncoming(b.getInt64(0), max_done);
  sum->addIncoming(llvm::ConstantFP::get(vt, 0.0), max_done);
  const auto [xs, at] = scores_at(row, bias_row, w);
  Value* p = emit_vector_math(b, OpKind::Exp, b.CreateFSub(xs, m_splat));
  b.CreateAlignedStore(p, at, align);
  Value* sum1 = b.CreateFAdd(sum, p);
  Value* w1 = b.CreateAdd(w, b.getInt64(1));
  llvm::BasicBlock* exp_end = b.GetInsertBlock();  // the back edge's block, wherever exp left it
  w->addIncoming(w1, exp_end);
  sum->addIncoming(sum1, exp_end);
  auto* exp_done = block("exp.done");
  b.CreateCondBr(b.CreateICmpSLT(w1, vectors), exp_loop, exp_done);
  b.SetInsertPoint(exp_done);
  Value* row_sum = b.CreateExtractElement(sum1, uint64_t{0});
  for (int lane = 1; lane < vector_width; ++lane)
    row_sum = b.CreateFAdd(row_sum, b.CreateExtractElement(sum1, static_cast<uint64_t>(lane)));
  Value* alpha = emit_vector_math(b, OpKind::Exp, b.CreateFSub(m_old, m_new));
  b.CreateStore(b.CreateFAdd(b.CreateFMul(b.CreateLoad(f32, l_at), alpha), row_sum), l_at);
  b.CreateStore(alpha, a_at);
  b.CreateBr(row_end);

  // Every score so far is -inf: the block adds nothing.
  b.SetInsertPoint(masked);
  b.CreateStore(llvm::ConstantFP::get(f32, 1.0), a_at);
  b.CreateBr(zero_loop);
  b.SetInsertPoint(zero_loop);
  llvm::PHINode* z = b.CreatePHI(i64, 2, "z");
  z->addIncoming(b.getInt64(0), masked);
  b.CreateAlignedStore(llvm::ConstantFP::get(vt, 0.0),
                       b.CreateGEP(f32, row, b.CreateMul(z, b.getInt64(vw))), align);
  Value* z1 = b.CreateAdd(z, b.getInt64(1));
  z->addIncoming(z1, zero_loop);
  b.CreateCondBr(b.CreateICmpSLT(z1, vectors), zero_loop, row_end);

  b.SetInsertPoint(row_end);
  Value* r1 = b.CreateAdd(r, b.getInt64(1));
  r->addIncoming(r1, row_end);
  b.CreateCondBr(b.CreateICmpSLT(r1, rows), row_head, done);

  b.SetInsertPoint(done);
  b.CreateRetVoid();
  std::string err;
  llvm::raw_string_ostream es(err);
  if (llvm::verifyModule(*m, &es)) throw Error("internal error: invalid attention softmax: " + err);
  return m;
}

}  // namespace kiln::cpu
