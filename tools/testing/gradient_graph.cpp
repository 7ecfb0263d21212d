// tools/testing/gradient_graph.cpp - a random graph's backward, as a graph of its own.
#include "kiln/frontend/autodiff.h"
#include "kiln/frontend/lazy.h"
#include "random_graph.h"

namespace kiln::test {

Graph gradient_graph(const Graph& g) {
  std::vector<Tensor> examples;
  for (ValueId p : g.inputs()) examples.push_back(zeros(g.type(p).shape, g.type(p).dtype, Device::interp()));
  bool flows = false;
  Graph traced = trace(
      [&](const std::vector<Tensor>& args) {
        std::vector<Tensor> wrt;
        for (const Tensor& a : args)
          if (is_float(a.dtype())) wrt.push_back(a.requires_grad_());
        Tensor loss;
        for (const Tensor& out : call(g, args)) {
          if (!out.requires_grad()) continue;
          const Tensor s = out.sum().to(DType::F64);
          loss = loss.defined() ? loss + s : s;
        }
        if (!loss.defined()) return std::vector<Tensor>{zeros({})};
        flows = true;
        return grad(loss, wrt, {}, /*allow_unused=*/true);
      },
      examples);
  return flows ? traced : Graph();
}

}  // namespace kiln::test
