// examples/softmax.cpp - softmax with kiln::Tensor: recorded lazily, run at the sync point.
#include <cstdio>

#include <kiln/kiln.h>

int main() {
  const kiln::Tensor x = kiln::randn({4, 8}, /*seed=*/1);
  const kiln::Tensor y = x.softmax(-1);  // records reduce_max, sub, exp, reduce_sum, div

  std::printf("The pending stream behind y (kiln opt reads this):\n%s\n", kiln::dump(y).c_str());

  const std::vector<float> rows = y.sum({-1}).to_vector<float>();  // sync point
  const std::vector<float> v = y.to_vector<float>();
  for (int r = 0; r < 4; ++r) {
    std::printf("row %d:", r);
    for (int c = 0; c < 8; ++c) std::printf(" %.4f", v[static_cast<size_t>(r * 8 + c)]);
    std::printf("   sum %.6f\n", rows[static_cast<size_t>(r)]);
  }
  for (float s : rows)
    if (s < 0.99999f || s > 1.00001f) return 1;
  return 0;
}
