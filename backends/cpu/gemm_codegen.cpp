// backends/cpu/gemm_codegen.cpp - see gemm_codegen.h.
//
// The micro-kernel is the whole inner loop of the product: per step p of the depth, the
// tile's nr columns of B are loaded as nr/vector_width vectors, each of the tile's mr values
// of A is broadcast, and mr x nr/vector_width multiply-adds update accumulators that stay in
// registers (phis of the one loop). Only the end of the depth touches C.
#include "gemm_codegen.h"

#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "kiln/support/error.h"

namespace kiln::cpu {
namespace {

// `rows` (n vectors of n lanes, n a power of two) transposed: for each bit d of a lane
// number, from the highest, the elements whose row and column differ in that bit swap
// places (the off-diagonal d x d blocks of each 2d x 2d block): n log2(n) shuffles.
std::vector<llvm::Value*> transpose(llvm::IRBuilder<>& b, std::vector<llvm::Value*> rows) {
  const auto n = static_cast<int>(rows.size());
  for (int d = n / 2; d >= 1; d /= 2) {
    std::vector<int> low(static_cast<size_t>(n)), high(static_cast<size_t>(n));
    for (int c = 0; c < n; ++c) {
      low[static_cast<size_t>(c)] = (c & d) == 0 ? c : n + c - d;
      high[static_cast<size_t>(c)] = (c & d) == 0 ? c + d : n + c;
    }
    for (int i = 0; i < n; ++i) {
      if ((i & d) != 0) continue;
      llvm::Value* top = rows[static_cast<size_t>(i)];
      llvm::Value* bottom = rows[static_cast<size_t>(i + d)];
      rows[static_cast<size_t>(i)] = b.CreateShuffleVector(top, bottom, low);
      rows[static_cast<size_t>(i + d)] = b.CreateShuffleVector(top, bottom, high);
    }
  }
  return rows;
}

}  // namespace

std::unique_ptr<llvm::Module> emit_gemm_microkernel(const kir::GemmSchedule& s, DType t, const std::string& fn_name,
                                                    llvm::LLVMContext& ctx, const MicroKernelForm& form) {
  using llvm::Value;
  const bool a_rows = form.a_rows;
  KILN_ASSERT(!(a_rows && form.a_offsets), "gemm micro-kernel: A in rows or at offsets, not both");
  KILN_ASSERT(!form.c_transposed || (s.mr <= s.vector_width && (s.vector_width & (s.vector_width - 1)) == 0),
              "gemm micro-kernel: a tile stored transposed has at most a vector of rows");
  KILN_ASSERT(s.mr >= 1 && s.vector_width >= 1 && s.nr % s.vector_width == 0, "gemm schedule: nr is whole vectors");
  auto m = std::make_unique<llvm::Module>(fn_name, ctx);
  llvm::IRBuilder<> b(ctx);
  llvm::Type* elem = nullptr;
  switch (t) {
    case DType::F32: elem = b.getFloatTy(); break;
    case DType::F64: elem = b.getDoubleTy(); break;
    case DType::I32: elem = b.getInt32Ty(); break;
    case DType::I64: elem = b.getInt64Ty(); break;
    default: throw Error("matmul of " + std::string(dtype_name(t)) + " tensors is not supported on the cpu device");
  }
  const bool is_fp = is_float(t);
  const int vecs = s.nr / s.vector_width;
  auto* vt = llvm::FixedVectorType::get(elem, static_cast<unsigned>(s.vector_width));
  auto* ptr = b.getPtrTy();
  auto* i64 = b.getInt64Ty();
  auto* fty = llvm::FunctionType::get(b.getVoidTy(), {ptr, i64, i64}, false);
  auto* f = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, fn_name, m.get());
  f->addFnAttr(llvm::Attribute::NoUnwind);
  Value* args = f->getArg(0);
  Value* kc = f->getArg(1);
  Value* ldc = f->getArg(2);

  auto* entry = llvm::BasicBlock::Create(ctx, "entry", f);
  auto* loop = llvm::BasicBlock::Create(ctx, "depth", f);
  auto* done = llvm::BasicBlock::Create(ctx, "store", f);
  b.SetInsertPoint(entry);
  auto arg = [&](int i) { return b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, args, static_cast<uint64_t>(i))); };
  Value* a = arg(0);
  Value* bp = arg(1);
  Value* c = arg(2);
  // args[3] null: the tile overwrites C (the first panel of the depth), else adds to it.
  Value* accumulate = b.CreateIsNotNull(arg(3));
  // args[4]: B's row stride in elements (nr when packed; the matrix's when read in place),
  // or with b_offsets the first of the steps' offsets.
  Value* ldb = form.b_offsets ? nullptr : b.CreateLoad(i64, arg(4));
  Value* b_offsets = form.b_offsets ? arg(4) : nullptr;
  // args[5] with a_rows: A's row stride in elements; with a_offsets, the steps' offsets.
  Value* lda = a_rows ? b.CreateLoad(i64, arg(5)) : nullptr;
  Value* a_offsets = form.a_offsets ? arg(5) : nullptr;
  Value* zero = llvm::Constant::getNullValue(vt);
  b.CreateCondBr(b.CreateICmpSGT(kc, b.getInt64(0)), loop, done);

  // The depth loop: accumulators and the step are phis.
  b.SetInsertPoint(loop);
  llvm::PHINode* p = b.CreatePHI(i64, 2, "p");
  p->addIncoming(b.getInt64(0), entry);
  std::vector<llvm::PHINode*> acc;
  for (int i = 0; i < s.mr * vecs; ++i) {
    acc.push_back(b.CreatePHI(vt, 2));
    acc.back()->addIncoming(zero, entry);
  }
  Value* brow = form.b_offsets ? b.CreateGEP(elem, bp, b.CreateLoad(i64, b.CreateGEP(i64, b_offsets, p)))
                               : b.CreateGEP(elem, bp, b.CreateMul(p, ldb));
  std::vector<Value*> bv;
  for (int v = 0; v < vecs; ++v)
    bv.push_back(b.CreateAlignedLoad(vt, b.CreateConstGEP1_64(elem, brow, static_cast<uint64_t>(v * s.vector_width)),
                                     llvm::Align(elem->getPrimitiveSizeInBits() / 8)));
  // Step p's column of A: packed, mr values in a row; in rows, one value per row of A; at
  // offsets, mr adjacent values where step p's offset says.
  Value* acol = a_rows      ? b.CreateGEP(elem, a, p)
                : a_offsets ? b.CreateGEP(elem, a, b.CreateLoad(i64, b.CreateGEP(i64, a_offsets, p)))
                            : b.CreateGEP(elem, a, b.CreateMul(p, b.getInt64(s.mr)));
  auto a_at = [&](int i) {
    return a_rows ? b.CreateGEP(elem, acol, b.CreateMul(b.getInt64(i), lda))
                  : b.CreateConstGEP1_64(elem, acol, static_cast<uint64_t>(i));
  };
  // Packed A `prefetch_a` steps ahead, into L1 (read, high locality, data). Past the panel's
  // end the address is the next tile's panel, or memory the product does not own: a
  // prefetch never faults, and the GEP is not inbounds.
  if (s.prefetch_a > 0 && !a_rows && !form.a_offsets) {
    llvm::Function* prefetch = llvm::Intrinsic::getDeclaration(m.get(), llvm::Intrinsic::prefetch, {ptr});
    b.CreateCall(prefetch, {b.CreateGEP(elem, acol, b.getInt64(int64_t{s.prefetch_a} * s.mr)), b.getInt32(0),
                            b.getInt32(3), b.getInt32(1)});
  }
  llvm::Function* fma = is_fp ? llvm::Intrinsic::getDeclaration(m.get(), llvm::Intrinsic::fmuladd, {vt}) : nullptr;
  std::vector<Value*> next(acc.size());
  for (int i = 0; i < s.mr; ++i) {
    Value* ai = b.CreateVectorSplat(static_cast<unsigned>(s.vector_width),
                                    b.CreateLoad(elem, a_at(i)));
    for (int v = 0; v < vecs; ++v) {
      const size_t j = static_cast<size_t>(i * vecs + v);
      next[j] = is_fp ? b.CreateCall(fma, {ai, bv[static_cast<size_t>(v)], acc[j]})
                      : b.CreateAdd(b.CreateMul(ai, bv[static_cast<size_t>(v)]), acc[j]);
    }
  }
  Value* p1 = b.CreateAdd(p, b.getInt64(1));
  p->addIncoming(p1, loop);
  for (size_t j = 0; j < acc.size(); ++j) acc[j]->addIncoming(next[j], loop);
  b.CreateCondBr(b.CreateICmpSLT(p1, kc), loop, done);

  // C += the tile.
  b.SetInsertPoint(done);
  std::vector<llvm::PHINode*> sums;
  for (size_t j = 0; j < acc.size(); ++j) {
    sums.push_back(b.CreatePHI(vt, 2));
    sums.back()->addIncoming(zero, entry);
    sums.back()->addIncoming(next[j], loop);
  }
  const llvm::Align align(elem->getPrimitiveSizeInBits() / 8);
  // C at `at` (+)= `value`, the lanes in `mask` only where there is one. The load of C stays
  // behind the flag: on the first panel of the depth C may be uninitialized.
  auto store = [&](Value* at, Value* value, Value* mask) {
    auto* add_bb = llvm::BasicBlock::Create(ctx, "add", f);
    auto* join_bb = llvm::BasicBlock::Create(ctx, "join", f);
    llvm::BasicBlock* from = b.GetInsertBlock();
    b.CreateCondBr(accumulate, add_bb, join_bb);
    b.SetInsertPoint(add_bb);
    Value* old = mask ? static_cast<Value*>(b.CreateMaskedLoad(vt, at, align, mask, zero))
                      : b.CreateAlignedLoad(vt, at, align);
    Value* added = is_fp ? b.CreateFAdd(old, value) : b.CreateAdd(old, value);
    b.CreateBr(join_bb);
    b.SetInsertPoint(join_bb);
    llvm::PHINode* out = b.CreatePHI(vt, 2);
    out->addIncoming(value, from);
    out->addIncoming(added, add_bb);
    if (mask) b.CreateMaskedStore(out, at, align, mask);
    else b.CreateAlignedStore(out, at, align);
  };
  if (form.c_transposed) {
    // Each vector of columns, transposed, is a vector of rows per column: one masked store
    // per column of the tile inside C, of its first h rows.
    Value* extent = arg(6);
    Value* h = b.CreateLoad(i64, extent);
    Value* w = b.CreateLoad(i64, b.CreateConstGEP1_64(i64, extent, 1));
    const auto lanes = static_cast<unsigned>(s.vector_width);
    Value* rows_inside =
        b.CreateICmpSLT(b.CreateStepVector(llvm::FixedVectorType::get(i64, lanes)), b.CreateVectorSplat(lanes, h));
    for (int v = 0; v < vecs; ++v) {
      std::vector<Value*> rows(lanes, zero);
      for (int i = 0; i < s.mr; ++i) rows[static_cast<size_t>(i)] = sums[static_cast<size_t>(i * vecs + v)];
      const std::vector<Value*> columns = transpose(b, rows);
      for (unsigned l = 0; l < lanes; ++l) {
        const uint64_t j = static_cast<uint64_t>(v) * lanes + l;
        auto* column_bb = llvm::BasicBlock::Create(ctx, "column", f);
        auto* next_bb = llvm::BasicBlock::Create(ctx, "next", f);
        b.CreateCondBr(b.CreateICmpSLT(b.getInt64(j), w), column_bb, next_bb);
        b.SetInsertPoint(column_bb);
        store(b.CreateGEP(elem, c, b.CreateMul(b.getInt64(j), ldc)), columns[l], rows_inside);
        b.CreateBr(next_bb);
        b.SetInsertPoint(next_bb);
      }
    }
  } else {
    for (int i = 0; i < s.mr; ++i) {
      Value* crow = b.CreateGEP(elem, c, b.CreateMul(b.getInt64(i), ldc));
      for (int v = 0; v < vecs; ++v)
        store(b.CreateConstGEP1_64(elem, crow, static_cast<uint64_t>(v * s.vector_width)),
              sums[static_cast<size_t>(i * vecs + v)], nullptr);
    }
  }
  b.CreateRetVoid();
  std::string err;
  llvm::raw_string_ostream es(err);
  if (llvm::verifyModule(*m, &es)) throw Error("internal error: invalid GEMM micro-kernel: " + err);
  return m;
}

}  // namespace kiln::cpu
