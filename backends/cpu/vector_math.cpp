// backends/cpu/vector_math.cpp - see vector_math.h.
#include "vector_math.h"

#include <cmath>

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "kiln/support/error.h"

namespace kiln::cpu {
namespace {

using llvm::Value;

Value* c(Value* like, double v) { return llvm::ConstantFP::get(like->getType(), v); }

Value* fma(llvm::IRBuilder<>& b, Value* x, Value* y, Value* z) {
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, z});
}

// Horner: coeffs from the highest degree down.
Value* poly(llvm::IRBuilder<>& b, Value* x, std::initializer_list<double> coeffs) {
  auto it = coeffs.begin();
  Value* p = c(x, *it++);
  for (; it != coeffs.end(); ++it) p = fma(b, p, x, c(x, *it));
  return p;
}

llvm::Type* int_like(Value* x) {
  llvm::Type* i32 = llvm::Type::getInt32Ty(x->getContext());
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(x->getType())) return llvm::VectorType::get(i32, vt->getElementCount());
  return i32;
}

Value* splat_int(Value* like_int, int64_t v) { return llvm::ConstantInt::get(like_int->getType(), static_cast<uint64_t>(v), true); }

// x clamped to [lo, hi], NaN kept (one compare and blend each, unlike minnum/maxnum).
Value* clamp(llvm::IRBuilder<>& b, Value* x, double lo, double hi) {
  Value* y = b.CreateSelect(b.CreateFCmpOGT(x, c(x, hi)), c(x, hi), x);
  return b.CreateSelect(b.CreateFCmpOLT(y, c(x, lo)), c(x, lo), y);
}

Value* exp_f32(llvm::IRBuilder<>& b, Value* x) {
  // Past the clamp the scaling overflows to inf, or rounds to 0, by itself; NaN flows
  // through every step.
  Value* xc = clamp(b, x, -104.0, 88.8);
  // n = rint(xc / ln 2), in [-150, 128]: adding 1.5 * 2^23 rounds to an integer as rint
  // does (ties to even), and leaves 1.5 * 2^23 + n, whose bits are 0x4b400000 + n. So n
  // comes from the bits, without a rounding instruction, a conversion, or the select that
  // fptosi needs for NaN (poison there; here any bits will do, as p is NaN).
  constexpr double kRound = 12582912.0;  // 1.5 * 2^23
  Value* t = b.CreateFAdd(b.CreateFMul(xc, c(x, 1.44269504088896341)), c(x, kRound));
  Value* fx = b.CreateFSub(t, c(x, kRound));
  Value* r = fma(b, fx, c(x, -0.693359375), xc);
  r = fma(b, fx, c(x, 2.12194440e-4), r);
  Value* p = poly(b, r, {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3, 4.1665795894E-2, 1.6666665459E-1,
                         5.0000001201E-1});
  p = fma(b, p, b.CreateFMul(r, r), b.CreateFAdd(r, c(x, 1.0)));
  // p * 2^n as p * 2^n1 * 2^n2 with n1 = n >> 1 and n2 = n - n1, two normal factors, so
  // that a subnormal result rounds once. Their biased exponents n1 + 127 and n2 + 127 are
  // m >> 1 and m - (m >> 1) for m = n + 254.
  Value* bits = b.CreateBitCast(t, int_like(x));
  Value* m = b.CreateSub(bits, splat_int(bits, 0x4b400000 - 254));
  Value* e1 = b.CreateAShr(m, splat_int(m, 1));
  Value* e2 = b.CreateSub(m, e1);
  auto pow2 = [&](Value* e) { return b.CreateBitCast(b.CreateShl(e, splat_int(e, 23)), p->getType()); };
  return b.CreateFMul(b.CreateFMul(p, pow2(e1)), pow2(e2));
}

Value* log_f32(llvm::IRBuilder<>& b, Value* x) {
  llvm::Type* it = int_like(x);
  // Subnormals: scale into the normal range first.
  Value* tiny = b.CreateFCmpOLT(x, c(x, 1.17549435e-38));
  Value* xs = b.CreateSelect(tiny, b.CreateFMul(x, c(x, 8388608.0)), x);
  Value* bits = b.CreateBitCast(xs, it);
  Value* e = b.CreateSub(b.CreateLShr(bits, splat_int(bits, 23)), splat_int(bits, 126));
  e = b.CreateSelect(tiny, b.CreateSub(e, splat_int(e, 23)), e);
  // Mantissa in [0.5, 1).
  Value* m = b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, splat_int(bits, 0x807fffff)), splat_int(bits, 0x3f000000)),
                             x->getType());
  Value* ef = b.CreateSIToFP(e, x->getType());
  Value* small = b.CreateFCmpOLT(m, c(x, 0.707106781186547524));
  ef = b.CreateSelect(small, b.CreateFSub(ef, c(x, 1.0)), ef);
  Value* z = b.CreateSelect(small, b.CreateFSub(b.CreateFAdd(m, m), c(x, 1.0)), b.CreateFSub(m, c(x, 1.0)));
  Value* z2 = b.CreateFMul(z, z);
  Value* y = poly(b, z, {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
                         -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1});
  y = b.CreateFMul(b.CreateFMul(y, z), z2);
  y = fma(b, ef, c(x, -2.12194440e-4), y);
  y = fma(b, z2, c(x, -0.5), y);
  Value* r = b.CreateFAdd(z, y);
  r = fma(b, ef, c(x, 0.693359375), r);
  // Special values as the C library gives them.
  r = b.CreateSelect(b.CreateFCmpOEQ(x, c(x, 0.0)), c(x, -INFINITY), r);
  r = b.CreateSelect(b.CreateFCmpOLT(x, c(x, 0.0)), c(x, NAN), r);
  r = b.CreateSelect(b.CreateFCmpOEQ(x, c(x, INFINITY)), x, r);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
}

Value* tanh_f32(llvm::IRBuilder<>& b, Value* x) {
  Value* xc = clamp(b, x, -7.90531110763549805, 7.90531110763549805);  // NaN flows through
  Value* x2 = b.CreateFMul(xc, xc);
  Value* p = poly(b, x2, {-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
                          1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03});
  p = b.CreateFMul(xc, p);
  Value* q = poly(b, x2, {1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03});
  Value* r = b.CreateFDiv(p, q);
  Value* ax = b.CreateIntrinsic(llvm::Intrinsic::fabs, {x->getType()}, {x});
  r = b.CreateSelect(b.CreateFCmpOLT(ax, c(x, 0.0004)), x, r);
  // Beyond 9 the result rounds to +-1 (also for infinities).
  return b.CreateSelect(b.CreateFCmpOGT(ax, c(x, 9.0)),
                        b.CreateIntrinsic(llvm::Intrinsic::copysign, {x->getType()}, {c(x, 1.0), x}), r);
}

Value* erf_f32(llvm::IRBuilder<>& b, Value* x) {
  Value* xc = clamp(b, x, -4.0, 4.0);  // NaN flows through
  Value* x2 = b.CreateFMul(xc, xc);
  Value* p = poly(b, x2, {-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
                          -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02});
  p = b.CreateFMul(xc, p);
  Value* q = poly(b, x2, {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
                          -1.42647390514189e-02});
  Value* r = b.CreateFDiv(p, q);
  // Near 0, erf(x) = 2/sqrt(pi) x (1 - x^2/3 + ...): the rational form would lose the bits
  // of a tiny x in subnormal intermediates.
  Value* ax = b.CreateIntrinsic(llvm::Intrinsic::fabs, {x->getType()}, {x});
  return b.CreateSelect(b.CreateFCmpOLT(ax, c(x, 1e-4)), b.CreateFMul(x, c(x, 1.12837916709551257)), r);
}

Value* sigmoid_f32(llvm::IRBuilder<>& b, Value* x) {
  Value* r = b.CreateFDiv(c(x, 1.0), b.CreateFAdd(c(x, 1.0), exp_f32(b, b.CreateFNeg(x))));
  // Far left, 1 + e^-x overflows while the result is still representable (down to the
  // subnormals): there sigmoid(x) = e^x / (1 + e^x) is e^x to within an ulp.
  return b.CreateSelect(b.CreateFCmpOLT(x, c(x, -20.0)), exp_f32(b, x), r);
}

}  // namespace

bool has_vector_math(OpKind op) { return op_info(op).has(trait::VectorMath); }

Value* emit_vector_math(llvm::IRBuilder<>& b, OpKind op, Value* x) {
  switch (op) {
    case OpKind::Exp: return exp_f32(b, x);
    case OpKind::Log: return log_f32(b, x);
    case OpKind::Tanh: return tanh_f32(b, x);
    case OpKind::Erf: return erf_f32(b, x);
    case OpKind::Sigmoid: return sigmoid_f32(b, x);
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
