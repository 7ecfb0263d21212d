// examples/custom_kernel.cpp - a kernel written by hand in C, used as an op in a fused graph.
//
// The loop a kernel developer runs: write the function, register it (Clang compiles it now,
// so a typo is an error pointing into the source), use it between kiln's own ops, check the
// result against a reference. On `cpu` the function is inlined into the fused loop: the
// graph below is one kernel. Run with a device name to try another (`opencl:0` compiles the
// same text as OpenCL C).
#include <cmath>
#include <cstdio>
#include <string>

#include <kiln/kiln.h>

// softplus(x) = log(1 + e^x) = max(x, 0) + log1p(e^-|x|), with log1p(t) = 2 atanh(t / (2 + t))
// summed as a series of 16 terms. UNROLL is tunable: every value adds the same terms in the
// same order, so the autotuner may pick any (it checks that results agree). The same text is
// C and OpenCL C: OpenCL C spells the float functions without the `f`.
const char* kSoftplus = R"(#ifdef __OPENCL_C_VERSION__
#define expf exp
#define fabsf fabs
#define fmaxf fmax
#else
#include <math.h>
#endif

float softplus(float x) {
  const float t = expf(-fabsf(x));
  const float z = t / (2.0f + t), z2 = z * z;
  float sum = 0.0f, power = z;
  for (int k = 0; k < 16; k += UNROLL)
    for (int u = 0; u < UNROLL; ++u) {
      sum += power / (float)(2 * (k + u) + 1);
      power *= z2;
    }
  return fmaxf(x, 0.0f) + 2.0f * sum;
}
)";

int main(int argc, char** argv) try {
  const kiln::Device device = kiln::Device::parse(argc > 1 ? argv[1] : "cpu");
  const bool opencl = device.kind == kiln::Device::Kind::OpenCL;
  const kiln::CustomOp softplus = kiln::custom_op(
      "softplus", opencl ? kiln::CustomSource::opencl(kSoftplus) : kiln::CustomSource::c(kSoftplus),
      "(f32) -> f32 tunable UNROLL = [1, 2, 4, 8] default 2");

  const kiln::Tensor x = kiln::randn({64, 256}, /*seed=*/7).to(device);
  const kiln::Tensor b = kiln::randn({256}, /*seed=*/8).to(device);
  // scale, bias, softplus, a residual and a row mean: the elementwise part fuses with the
  // custom op, the mean's reduction with them where the device's schedule allows.
  const kiln::Tensor y = softplus(x * 2.0f + b) - x;
  const kiln::Tensor m = y.mean({-1});

  std::printf("The recorded stream (kiln opt reads this; the custom kernel is declared first):\n%s\n",
              kiln::dump(m).c_str());

  const std::vector<float> got = y.to_vector<float>();
  const std::vector<float> xs = x.to_vector<float>(), bs = b.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double v = 2.0 * xs[i] + bs[i % 256];
    const double want = std::log1p(std::exp(-std::fabs(v))) + std::fmax(v, 0.0) - xs[i];
    worst = std::fmax(worst, std::fabs(got[i] - want) / (1.0 + std::fabs(want)));
  }
  const std::vector<float> means = m.to_vector<float>();
  std::printf("softplus(2x + b) - x on %s: %zu values, worst relative error against libm in double %.3g\n",
              device.str().c_str(), got.size(), worst);
  std::printf("row means: %.5f %.5f %.5f ...\n", means[0], means[1], means[2]);
  return worst < 1e-5 ? 0 : 1;
} catch (const kiln::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());  // vulkan:N, for one: it compiles neither C nor OpenCL C
  return 2;
}
