// examples/mlp_forward.cpp - a 784 -> 512 -> 512 -> 10 MLP forward pass with ReLU and softmax,
// on random weights, written as eager code and executed lazily.
#include <cmath>
#include <cstdio>

#include <kiln/kiln.h>

namespace {

struct Linear {
  kiln::Tensor weight, bias;  // [out, in], [out]
  Linear(int64_t in, int64_t out, uint64_t seed) {
    const double bound = 1 / std::sqrt(static_cast<double>(in));  // PyTorch's default init range
    weight = (kiln::rand({out, in}, seed) * 2 - 1) * bound;
    bias = (kiln::rand({out}, seed + 1) * 2 - 1) * bound;
  }
  kiln::Tensor operator()(const kiln::Tensor& x) const { return kiln::linear(x, weight, bias); }
};

}  // namespace

int main() {
  const Linear fc1(784, 512, 10), fc2(512, 512, 20), fc3(512, 10, 30);
  const kiln::Tensor images = kiln::rand({256, 784}, 1);  // a batch of 256 "images"

  const kiln::Tensor probs = fc3(fc2(fc1(images).relu()).relu()).softmax(-1);
  const kiln::Stats recorded = kiln::stats();

  const std::vector<int64_t> classes = probs.argmax(-1).to_vector<int64_t>();  // sync point
  const std::vector<float> row_sums = probs.sum({-1}).to_vector<float>();
  const kiln::Stats done = kiln::stats();

  std::printf("recorded %llu ops, executed %llu graphs of %llu nodes in total\n",
              static_cast<unsigned long long>(recorded.ops_recorded),
              static_cast<unsigned long long>(done.executions),
              static_cast<unsigned long long>(done.nodes_executed));
  std::printf("predicted classes of the first 8 images:");
  for (int i = 0; i < 8; ++i) std::printf(" %lld", static_cast<long long>(classes[static_cast<size_t>(i)]));
  std::printf("\nprobabilities sum to 1 in every row: ");
  for (float s : row_sums)
    if (std::fabs(s - 1) > 1e-5f) {
      std::printf("no (%g)\n", s);
      return 1;
    }
  std::printf("yes\n");
  return 0;
}
