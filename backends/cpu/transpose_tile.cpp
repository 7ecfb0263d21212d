// backends/cpu/transpose_tile.cpp - see transpose_tile.h. Compiled for AVX function by
// function (the library itself targets the baseline x86-64), and chosen at run time.
#include "transpose_tile.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kiln/support/error.h"

namespace kiln::cpu {

#if defined(__x86_64__)

bool can_transpose_8x8() {
  static const bool avx = __builtin_cpu_supports("avx");
  return avx;
}

// The usual three rounds: pairs of rows interleaved, then pairs of pairs, then the 128-bit
// halves exchanged, so that output row c gathers element c of every input row.
__attribute__((target("avx"))) void transpose_8x8(const float* src, int64_t src_stride, float* dst,
                                                  int64_t dst_stride) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * src_stride);
  __m256 t[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  __m256 u[8];
  for (int half = 0; half < 2; ++half) {  // rows 0-3, then rows 4-7
    const __m256 lo = t[4 * half], hi = t[4 * half + 1], lo2 = t[4 * half + 2], hi2 = t[4 * half + 3];
    u[4 * half + 0] = _mm256_shuffle_ps(lo, lo2, _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * half + 1] = _mm256_shuffle_ps(lo, lo2, _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * half + 2] = _mm256_shuffle_ps(hi, hi2, _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * half + 3] = _mm256_shuffle_ps(hi, hi2, _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int c = 0; c < 4; ++c) {
    _mm256_storeu_ps(dst + c * dst_stride, _mm256_permute2f128_ps(u[c], u[4 + c], 0x20));
    _mm256_storeu_ps(dst + (c + 4) * dst_stride, _mm256_permute2f128_ps(u[c], u[4 + c], 0x31));
  }
}

static bool can_deinterleave_pairs() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}

// Eight pairs at a time: shuffle_ps takes elements 0 and 2 (1 and 3) of each 128-bit half
// of both vectors, and permute4x64 puts the halves back in order.
__attribute__((target("avx2"))) static int64_t deinterleave_pairs_avx2(const float* src, int64_t pairs, float* even,
                                                                       float* odd) {
  int64_t i = 0;
  for (; i + 8 <= pairs; i += 8) {
    const __m256 a = _mm256_loadu_ps(src + 2 * i), b = _mm256_loadu_ps(src + 2 * i + 8);
    const __m256 evens = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 odds = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    _mm256_storeu_ps(even + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(evens), _MM_SHUFFLE(3, 1, 2, 0))));
    _mm256_storeu_ps(odd + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(odds), _MM_SHUFFLE(3, 1, 2, 0))));
  }
  return i;
}

#else

bool can_transpose_8x8() { return false; }

static bool can_deinterleave_pairs() { return false; }

static int64_t deinterleave_pairs_avx2(const float*, int64_t, float*, float*) {
  KILN_ASSERT(false, "deinterleave_pairs_avx2 without can_deinterleave_pairs()");
  return 0;
}

void transpose_8x8(const float*, int64_t, float*, int64_t) {
  KILN_ASSERT(false, "transpose_8x8 without can_transpose_8x8()");
}

#endif

void deinterleave_pairs(const float* src, int64_t pairs, float* even, float* odd) {
  int64_t i = can_deinterleave_pairs() ? deinterleave_pairs_avx2(src, pairs, even, odd) : 0;
  for (; i < pairs; ++i) {
    even[i] = src[2 * i];
    odd[i] = src[2 * i + 1];
  }
}

}  // namespace kiln::cpu
