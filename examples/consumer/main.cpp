// Builds a small graph through the installed headers, prints it, parses it back and runs it
// on the reference interpreter: proof that find_package(kiln) gives a usable library.
#include <cmath>
#include <cstdio>

#include <kiln/ir/text.h>
#include <kiln/ir/interpreter.h>

int main() {
  const char* text = R"(
graph @axpy(%x: f32[4], %y: f32[4]) -> f32[4] {
  %a = constant {value = 2.0} : f32[]
  %ax = mul %a, %x : f32[4]
  %r = add %ax, %y : f32[4]
  return %r
})";
  kiln::Graph g = kiln::parse_graph(text, "axpy.kir").take();
  std::printf("%s", kiln::print_graph(g).c_str());
  const kiln::HostTensor inputs[] = {
      kiln::HostTensor::from_vector<float>({1, 2, 3, 4}, {4}),
      kiln::HostTensor::from_vector<float>({10, 20, 30, 40}, {4}),
  };
  const auto out = kiln::interpret(g, inputs)[0].to_vector<float>();
  const float expected[] = {12, 24, 36, 48};
  for (int i = 0; i < 4; ++i)
    if (std::fabs(out[static_cast<size_t>(i)] - expected[i]) > 0) {
      std::printf("consumer: wrong value %g at %d\n", out[static_cast<size_t>(i)], i);
      return 1;
    }
  std::printf("consumer: ok\n");
  return 0;
}
