// backends/cpu/attention_codegen.cpp - see attention_codegen.h.
//
// Two passes over each row of the block, in vectors: the maximum (NaN ignored: a select on
// an ordered compare), then exp(S - m'), stored back and summed. The block is a few KiB, in
// L1, so the second pass costs no memory traffic.
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
  Value* ld = f->getArg(2);
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
  const llvm::Align align(4);
  const double inf = std::numeric_limits<double>::infinity();
  Value* vectors = b.CreateUDiv(ld, b.getInt64(static_cast<uint64_t>(vector_width)));
  b.CreateCondBr(b.CreateAnd(b.CreateICmpSGT(rows, b.getInt64(0)), b.CreateICmpSGT(vectors, b.getInt64(0))), row_head,
                 done);

  // Row r: its scores at s + r * ld.
  b.SetInsertPoint(row_head);
  llvm::PHINode* r = b.CreatePHI(i64, 2, "r");
  r->addIncoming(b.getInt64(0), entry);
  Value* row = b.CreateGEP(f32, s, b.CreateMul(r, ld));
  b.CreateBr(max_loop);

  // The row's maximum, NaN ignored.
  b.SetInsertPoint(max_loop);
  llvm::PHINode* v = b.CreatePHI(i64, 2, "v");
  llvm::PHINode* most = b.CreatePHI(vt, 2, "most");
  v->addIncoming(b.getInt64(0), row_head);
  most->addIncoming(llvm::ConstantFP::get(vt, -inf), row_head);
  Value* x = b.CreateAlignedLoad(vt, b.CreateGEP(f32, row, b.CreateMul(v, b.getInt64(static_cast<uint64_t>(vector_width)))), align);
  Value* most1 = b.CreateSelect(b.CreateFCmpOGT(x, most), x, most);
  Value* v1 = b.CreateAdd(v, b.getInt64(1));
  v->addIncoming(v1, max_loop);
  most->addIncoming(most1, max_loop);
  b.CreateCondBr(b.CreateICmpSLT(v1, vectors), max_loop, max_done);

  b.SetInsertPoint(max_done);
  Value* row_max = b.CreateExtractElement(most1, uint64_t{0});
  for (int lane = 1; lane < vector_width; ++lane) {
    Value* e = b.CreateExtractElement(most1, static_cast<uint64_t>(lane));
    row_max = b.CreateSelect(b.CreateFCmpOGT(e, row_max), e, row_max);
  }
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
  Value* at = b.CreateGEP(f32, row, b.CreateMul(w, b.getInt64(static_cast<uint64_t>(vector_width))));
  Value* p = emit_vector_math(b, OpKind::Exp, b.CreateFSub(b.CreateAlignedLoad(vt, at, align), m_splat));
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
                       b.CreateGEP(f32, row, b.CreateMul(z, b.getInt64(static_cast<uint64_t>(vector_width)))), align);
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
