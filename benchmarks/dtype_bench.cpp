// benchmarks/dtype_bench.cpp - kiln's storage types (f16, bf16, u8) against f32 and hand loops.
//
// One memory-bound kernel, y = relu(x * 1.5 + 0.25), over n elements of each float type, and
// y = x * 3 + 7 (wrapping) over u8: a narrower type moves fewer bytes. kiln computes f16 and
// bf16 in f32 and rounds after every op, as the interpreter (and eager PyTorch) does
// (docs/ir.md, 3.1): the hand loops (OpenMP, -O3 -march=native) do the same, f16 through
// _Float16 (F16C), bf16 through its bits, and their results must equal kiln's bit for bit.
// Medians of --reps runs in one process, in alternation.
//
//   kiln_dtype_bench [--n N] [--reps R] [--device D]
#include <fmt/format.h>
#include <kiln/kiln.h>
#include <omp.h>

#include "timing.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using kiln::bench::median;
using kiln::bench::seconds;

// f32 to bf16 bits, to nearest even (a NaN stays a quiet NaN), and back.
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float relu_fma(float x) {
  const float y = x * 1.5f + 0.25f;
  return y < 0 ? 0.0f : y;
}

// The same with each op's result rounded to the storage type, through `round`.
template <class Round>
float relu_fma_rounded(float x, Round round) {
  const float y = round(round(x * 1.5f) + 0.25f);
  return y < 0 ? 0.0f : y;
}
float round_f16(float f) { return static_cast<float>(static_cast<_Float16>(f)); }
float round_bf16(float f) { return from_bf16(to_bf16(f)); }

}  // namespace

int main(int argc, char** argv) try {
  long n = 1L << 24;
  int reps = 9;
  std::string device = "cpu";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--n") n = std::atol(argv[i + 1]);
    else if (a == "--reps") reps = std::atoi(argv[i + 1]);
    else if (a == "--device") device = argv[i + 1];
    else throw kiln::Error("unknown flag " + a);
  }
  const kiln::Device d = kiln::Device::parse(device);
  const auto count = static_cast<size_t>(n);
  std::vector<float> xf(count);
  for (size_t i = 0; i < count; ++i) xf[i] = static_cast<float>((i * 2654435761u) % 2001) * 1e-3f - 1.0f;
  std::vector<_Float16> xh(count), yh(count);
  std::vector<uint16_t> xb(count), yb(count);
  std::vector<uint8_t> xu(count), yu(count);
  std::vector<float> yf(count);
  for (size_t i = 0; i < count; ++i) {
    xh[i] = static_cast<_Float16>(xf[i]);
    xb[i] = to_bf16(xf[i]);
    xu[i] = static_cast<uint8_t>(i * 40503u);
  }
  const kiln::Tensor tf = kiln::from_vector(xf, {n}, d);
  const kiln::Tensor th = tf.to(kiln::DType::F16).eval(), tb = tf.to(kiln::DType::BF16).eval();
  const kiln::Tensor tu = kiln::from_vector(xu, {n}, d);

  // Each expression is named before eval(): a temporary of the same statement (x * 1.5) is
  // still alive during eval(), so the frontend would store it too, as a value some tensor
  // still refers to (frontend/materialize.cpp). Measured: 2.5x the time at this size.
  kiln::Tensor out;
  auto kiln_float = [&](const kiln::Tensor& x) {
    return [&, x] {
      kiln::Tensor y = (x * 1.5 + 0.25).relu();
      out = y.eval();
    };
  };
  struct Case {
    const char* name;
    std::function<void()> kiln, hand;
    double bytes;           // read and written by one run
    const void* hand_out;   // the hand loop's result, to compare with kiln's bytes
  };
  const double nd = static_cast<double>(n);
  const std::vector<Case> cases = {
      {"f32", kiln_float(tf),
       [&] {
#pragma omp parallel for simd schedule(static)
         for (long i = 0; i < n; ++i) yf[static_cast<size_t>(i)] = relu_fma(xf[static_cast<size_t>(i)]);
       },
       8 * nd, yf.data()},
      {"f16", kiln_float(th),
       [&] {
#pragma omp parallel for simd schedule(static)
         for (long i = 0; i < n; ++i)
           yh[static_cast<size_t>(i)] = static_cast<_Float16>(relu_fma_rounded(static_cast<float>(xh[static_cast<size_t>(i)]), round_f16));
       },
       4 * nd, yh.data()},
      {"bf16", kiln_float(tb),
       [&] {
#pragma omp parallel for simd schedule(static)
         for (long i = 0; i < n; ++i)
           yb[static_cast<size_t>(i)] = to_bf16(relu_fma_rounded(from_bf16(xb[static_cast<size_t>(i)]), round_bf16));
       },
       4 * nd, yb.data()},
      {"u8 (x * 3 + 7, wrapping)",
       [&] {
         kiln::Tensor y = tu * 3 + 7;
         out = y.eval();
       },
       [&] {
#pragma omp parallel for simd schedule(static)
         for (long i = 0; i < n; ++i) yu[static_cast<size_t>(i)] = static_cast<uint8_t>(xu[static_cast<size_t>(i)] * 3 + 7);
       },
       2 * nd, yu.data()},
  };
  std::printf("| dtype | n | kiln (%s) | hand loop | kiln / hand | kiln GB/s | hand GB/s |\n", device.c_str());
  std::printf("|---|---|---|---|---|---|---|\n");
  int status = 0;
  for (const Case& c : cases) {
    c.kiln(), c.hand();  // compiles, warms the caches
    const kiln::HostTensor got = out.host();
    if (got.nbytes() == 0 || std::memcmp(got.data(), c.hand_out, got.nbytes()) != 0) {
      std::fprintf(stderr, "%s: kiln's result differs from the hand loop's\n", c.name);
      status = 1;
    }
    std::vector<double> tk, th_;
    for (int r = 0; r < reps; ++r) {
      tk.push_back(seconds(c.kiln));
      th_.push_back(seconds(c.hand));
    }
    const double mk = median(tk), mh = median(th_);
    std::printf("| %s | %ld | %.2f ms | %.2f ms | %.2fx | %.1f | %.1f |\n", c.name, n, mk * 1e3, mh * 1e3, mk / mh,
                c.bytes / mk * 1e-9, c.bytes / mh * 1e-9);
  }
  std::printf("\n(hand loops on %d threads; kiln's times are eval(), which allocates its result.)\n",
              omp_get_max_threads());
  return status;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
