// backends/cpu/vector_math.cpp - see vector_math.h.
#include "vector_math.h"

#include <vector>

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "kiln/codegen/f32_math.h"
#include "kiln/support/error.h"

namespace kiln::cpu {
namespace {

using llvm::Value;

// f32_math's emitter on LLVM values: floats or vectors of floats, and i32 (vectors) of the
// same lanes for their bits.
struct LlvmF32 {
  using Value = llvm::Value*;
  llvm::IRBuilder<>& b;
  llvm::Type* type;      // float or <N x float>
  llvm::Type* int_type;  // i32 or <N x i32>

  LlvmF32(llvm::IRBuilder<>& builder, llvm::Type* t) : b(builder), type(t), int_type(llvm::Type::getInt32Ty(t->getContext())) {
    if (auto* vt = llvm::dyn_cast<llvm::VectorType>(t)) int_type = llvm::VectorType::get(int_type, vt->getElementCount());
  }
  Value constant(double v) const { return llvm::ConstantFP::get(type, v); }
  Value int_constant(int64_t v) const { return llvm::ConstantInt::get(int_type, static_cast<uint64_t>(v), true); }
  Value add(Value x, Value y) const { return b.CreateFAdd(x, y); }
  Value sub(Value x, Value y) const { return b.CreateFSub(x, y); }
  Value mul(Value x, Value y) const { return b.CreateFMul(x, y); }
  Value div(Value x, Value y) const { return b.CreateFDiv(x, y); }
  Value neg(Value x) const { return b.CreateFNeg(x); }
  Value fma(Value x, Value y, Value z) const { return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {type}, {x, y, z}); }
  Value fabs(Value x) const { return b.CreateIntrinsic(llvm::Intrinsic::fabs, {type}, {x}); }
  Value copysign(Value magnitude, Value sign) const {
    return b.CreateIntrinsic(llvm::Intrinsic::copysign, {type}, {magnitude, sign});
  }
  Value greater(Value x, Value y) const { return b.CreateFCmpOGT(x, y); }
  Value less(Value x, Value y) const { return b.CreateFCmpOLT(x, y); }
  Value equal(Value x, Value y) const { return b.CreateFCmpOEQ(x, y); }
  Value is_nan(Value x) const { return b.CreateFCmpUNO(x, x); }
  Value select(Value c, Value x, Value y) const { return b.CreateSelect(c, x, y); }
  Value bits(Value x) const { return b.CreateBitCast(x, int_type); }
  Value from_bits(Value i) const { return b.CreateBitCast(i, type); }
  Value int_to_float(Value i) const { return b.CreateSIToFP(i, type); }
  Value int_sub(Value i, Value j) const { return b.CreateSub(i, j); }
  Value int_and(Value i, Value j) const { return b.CreateAnd(i, j); }
  Value int_or(Value i, Value j) const { return b.CreateOr(i, j); }
  Value shift_left(Value i, int n) const { return b.CreateShl(i, int_constant(n)); }
  Value shift_right_arith(Value i, int n) const { return b.CreateAShr(i, int_constant(n)); }
  Value shift_right_logical(Value i, int n) const { return b.CreateLShr(i, int_constant(n)); }
};

}  // namespace

bool has_vector_math(OpKind op) { return op_info(op).has(trait::VectorMath); }

Value* emit_vector_math(llvm::IRBuilder<>& b, OpKind op, Value* x) {
  LlvmF32 e(b, x->getType());
  switch (op) {
    case OpKind::Exp: return f32_math::exp(e, x);
    case OpKind::Log: return f32_math::log(e, x);
    case OpKind::Tanh: return f32_math::tanh(e, x);
    case OpKind::Erf: return f32_math::erf(e, x);
    case OpKind::Sigmoid: return f32_math::sigmoid(e, x);
    default: break;
  }
  KILN_ASSERT(false, "emit_vector_math: no inline implementation");
}

Value* emit_libm(llvm::IRBuilder<>& b, OpKind op, Value* x, Value* y) {
  llvm::Module* m = b.GetInsertBlock()->getModule();
  llvm::Type* f64 = b.getDoubleTy();
  const char* name = nullptr;
  switch (op) {
    case OpKind::Exp: name = "exp"; break;
    case OpKind::Log: name = "log"; break;
    case OpKind::Sin: name = "sin"; break;
    case OpKind::Cos: name = "cos"; break;
    case OpKind::Asin: name = "asin"; break;
    case OpKind::Acos: name = "acos"; break;
    case OpKind::Atan: name = "atan"; break;
    case OpKind::Atan2: name = "atan2"; break;
    case OpKind::Tanh: name = "tanh"; break;
    case OpKind::Erf: name = "erf"; break;
    case OpKind::Pow: name = "kiln_rt_pow"; break;  // the interpreter's pow (cpu_jit.cpp)
    case OpKind::Sigmoid: name = "exp"; break;
    default: KILN_ASSERT(false, "emit_libm: not a C library function");
  }
  std::vector<llvm::Type*> params(y ? 2 : 1, f64);
  llvm::FunctionCallee fn = m->getOrInsertFunction(name, llvm::FunctionType::get(f64, params, false));
  // The C library's own function, as the interpreter calls it: `nobuiltin` keeps LLVM from
  // substituting what it thinks equal (pow(x, -1) -> 1/x, pow(x, 0.5) -> sqrt(x),
  // pow(2, x) -> exp2(x)), which rounds differently (kiln fuzz seed 1128990).
  auto call = [&](std::initializer_list<Value*> args) {
    llvm::CallInst* c = b.CreateCall(fn, args);
    c->addFnAttr(llvm::Attribute::NoBuiltin);
    return c;
  };
  auto one = [&](Value* a, Value* bb) -> Value* {
    llvm::Type* t = a->getType();
    a = b.CreateFPExt(a, f64);
    if (op == OpKind::Sigmoid) {
      Value* e = call({b.CreateFNeg(a)});
      return b.CreateFPTrunc(b.CreateFDiv(llvm::ConstantFP::get(f64, 1.0), b.CreateFAdd(llvm::ConstantFP::get(f64, 1.0), e)), t);
    }
    Value* r = bb ? call({a, b.CreateFPExt(bb, f64)}) : call({a});
    return b.CreateFPTrunc(r, t);
  };
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(x->getType());
  if (vt == nullptr) return one(x, y);
  Value* out = llvm::PoisonValue::get(vt);
  for (unsigned i = 0; i < vt->getNumElements(); ++i)
    out = b.CreateInsertElement(out, one(b.CreateExtractElement(x, i), y ? b.CreateExtractElement(y, i) : nullptr), i);
  return out;
}

}  // namespace kiln::cpu
