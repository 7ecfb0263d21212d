// kiln/ir/scalar_semantics.h - what every elementwise op computes on one element.
//
// This is the definition that the reference interpreter runs, constant folding calls and
// every code generator must reproduce. Values are computed in a wide domain: double for
// floating-point types, int64 for integers and bool; the result is then stored in the
// element type (f32 rounds to nearest, i32 wraps, bool is 0/1).
#pragma once

#include <cstdint>

#include "kiln/ir/dtype.h"
#include "kiln/ir/op.h"

namespace kiln::scalar {

/// A double-domain value as stored in an element of float type `t` (f32, f16 and bf16 round
/// to nearest even).
double store_float(DType t, double v);
/// An int64-domain value as stored in an element of integer or bool type `t`: narrow types
/// wrap (u8 keeps the low 8 bits); u64 is held as its bits.
int64_t store_int(DType t, int64_t v);
/// Float to integer or bool conversion (the `cast` op): truncates toward zero, saturates
/// at the type's limits, NaN becomes 0; to bool: v != 0 (so NaN is true).
int64_t float_to_int(DType t, double v);
/// An int64-domain value of integer type `from` as a double (u64's bits read unsigned).
double int_to_float(DType from, int64_t v);
/// u64 is held as its bits in an int64: its order is int64's with the top bit flipped, so
/// compares, max and min of u64 are int64's on these keys (an involution).
inline int64_t u64_order_key(int64_t bits) {
  return static_cast<int64_t>(static_cast<uint64_t>(bits) ^ (uint64_t{1} << 63));
}
/// The u64 ops that read values from 2^63 up differently from int64 (mod and fmod, equal
/// for unsigned values, and shr), on u64 bits held in int64s.
int64_t binary_u64(OpKind op, int64_t a, int64_t b);

/// The bits of binary16 (f16) and bfloat16 (bf16) nearest to `v` (ties to even), and back.
uint16_t f16_bits(double v);
double f16_value(uint16_t bits);
uint16_t bf16_bits(double v);
double bf16_value(uint16_t bits);

/// Unary ops in the double domain (every unary op but `not`).
double unary_float(OpKind op, double x);
/// Unary ops in the int64 domain: neg, abs, relu, sign (integers), not (bool).
int64_t unary_int(OpKind op, int64_t x);

/// add sub mul div pow mod fmod max min in the double domain. max/min are IEEE 754-2019
/// maximum/minimum: NaN propagates and +0.0 counts as greater than -0.0. fmod is C's (exact);
/// mod is NumPy's remainder: fmod's result moved into the divisor's sign by adding it, a zero
/// given the divisor's sign.
double binary_float(OpKind op, double a, double b);
/// add sub mul pow mod fmod max min shl shr and/or in the int64 domain; wraps on overflow.
/// shr is arithmetic (the value's sign fills in; unsigned values are non-negative here). pow
/// with a negative exponent gives 0 unless the base is 1 or -1 (NumPy raises instead); a
/// remainder by 0 is 0 (NumPy's, with its warning left out).
int64_t binary_int(OpKind op, int64_t a, int64_t b);

/// The predicates of a float (isnan, isinf).
bool predicate_float(OpKind op, double x);

/// eq ne lt le gt ge. Any comparison with NaN is false, except `ne`, which is true.
bool compare_float(OpKind op, double a, double b);
bool compare_int(OpKind op, int64_t a, int64_t b);

/// The `rand` op: element `index` of a stream seeded with `seed`, uniform in (0, 1): the
/// 2^23 values (2m + 1) / 2^24, which f32 and f64 both hold exactly, so every float type
/// draws the same numbers. Built from 32-bit integer
/// hashing only, which every backend (LLVM, GLSL, OpenCL C) can reproduce bit for bit.
double rand_uniform(int64_t seed, uint64_t index);

/// The per-stream key rand_uniform derives from `seed`; code generators fold it into
/// their constants and hash only the index at run time.
uint32_t rand_key(int64_t seed);

}  // namespace kiln::scalar
