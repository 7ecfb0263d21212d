// tools/testing/differential.cpp - see differential.h.
#include "differential.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kiln/backends/backend.h"
#include "kiln/engine/engine.h"
#include "kiln/ir/interpreter.h"
#include "kiln/ir/op.h"
#include "kiln/ir/text.h"
#include "random_graph.h"

namespace kiln::test {

std::vector<Precision> precision(const Graph& g, bool exact_math) {
  std::vector<Precision> p(g.size(), Precision::Exact);
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.node(static_cast<ValueId>(id));
    Precision x = Precision::Exact;
    for (ValueId o : n.operands) x = std::max(x, p[o]);
    const bool float_in = !n.operands.empty() && is_float(g.type(n.operands[0]).dtype);
    // Where a backend may round differently.
    if (n.info().has(trait::VectorMath) && n.type.dtype == DType::F32) x = std::max(x, Precision::Approximate);
    // A device's own libm (OpenCL, Vulkan) rounds its functions differently from the host's.
    if (!exact_math && n.info().has(trait::Expensive) && is_float(n.type.dtype)) x = std::max(x, Precision::Approximate);
    if ((n.op == OpKind::ReduceSum || n.op == OpKind::ReduceProd) && float_in) x = std::max(x, Precision::Approximate);
    if (n.info().category == OpCategory::Matmul && float_in) x = std::max(x, Precision::Approximate);
    // An op that amplifies a rounding difference without bound: a step (floor, a compare
    // and so where's condition, a cast to an integer, argmax, argsort), a pole (1/x and rsqrt at a
    // zero whose sign differs, log near 0, pow), or a periodic function of a large argument.
    const bool amplifies =
        n.op == OpKind::Floor || n.op == OpKind::Ceil || n.op == OpKind::Rsqrt || n.op == OpKind::Div ||
        n.op == OpKind::Log || n.op == OpKind::Pow || n.op == OpKind::Sin || n.op == OpKind::Cos ||
        n.info().has(trait::ArgReduce) || n.op == OpKind::Argsort ||
        (n.info().category == OpCategory::Elementwise && n.type.dtype == DType::Bool) ||
        (n.op == OpKind::Cast && !is_float(n.type.dtype));
    if (amplifies && x == Precision::Approximate) x = Precision::Unbounded;
    p[id] = x;
  }
  return p;
}

namespace {

// Every value of `g` as the interpreter computes it, in node order.
std::vector<HostTensor> interpret_every_value(const Graph& g, const std::vector<HostTensor>& inputs) {
  Graph every = g;
  std::vector<ValueId> all(g.size());
  for (size_t id = 0; id < g.size(); ++id) all[id] = static_cast<ValueId>(id);
  every.set_outputs(all);
  return interpret(every, inputs);
}

std::vector<double> magnitudes_of(const Graph& g, const std::vector<HostTensor>& values) {
  std::vector<double> mag(g.size(), 0.0);
  for (size_t id = 0; id < g.size(); ++id) {
    const HostTensor& x = values[id];
    if (is_float(x.dtype()))
      for (int64_t k = 0; k < x.numel(); ++k)
        if (const double a = std::fabs(x.get_double(k)); std::isfinite(a)) mag[id] = std::max(mag[id], a);
    for (ValueId o : g.node(static_cast<ValueId>(id)).operands) mag[id] = std::max(mag[id], mag[o]);
  }
  std::vector<double> out;
  for (ValueId v : g.outputs()) out.push_back(mag[v]);
  return out;
}

}  // namespace

std::vector<double> magnitudes(const Graph& g, const std::vector<HostTensor>& inputs) {
  return magnitudes_of(g, interpret_every_value(g, inputs));
}

std::string compare_outputs(const std::vector<HostTensor>& want, const std::vector<HostTensor>& got,
                            const std::vector<Precision>& precision, const std::vector<double>& magnitude,
                            double rtol, int64_t depth) {
  if (want.size() != got.size()) return fmt::format("{} outputs, expected {}", got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    const HostTensor& w = want[o];
    const HostTensor& g = got[o];
    if (!(w.type() == g.type())) return fmt::format("output {}: type {} instead of {}", o, g.type().str(), w.type().str());
    if (precision[o] == Precision::Unbounded) continue;  // the type is all that can be checked
    if (precision[o] == Precision::Exact || !is_float(w.dtype())) {
      if (std::string d = compare_exact({w}, {g}); !d.empty()) return fmt::format("output {} (exact): {}", o, d);
      continue;
    }
    // The error of a sum grows with its terms: past 64 of them (the random graphs' range), the
    // share of the largest magnitude allowed grows in proportion.
    const double scale = magnitude[o] * std::max(1.0, static_cast<double>(depth) / 64);
    for (int64_t k = 0; k < w.numel(); ++k) {
      const double a = g.get_double(k), b = w.get_double(k);
      if (a == b || (std::isnan(a) && std::isnan(b))) continue;
      if (std::isfinite(a) && std::isfinite(b) && std::fabs(a - b) <= rtol * (std::fabs(b) + 1e-3 * scale + 1e-6)) continue;
      return fmt::format("output {} element {}: {} instead of {}", o, k, a, b);
    }
  }
  return "";
}

double float_tolerance(const Graph& g) {
  double rtol = 1e-10;
  for (const Node& n : g.nodes()) {
    if (n.type.dtype == DType::F32) rtol = std::max(rtol, 2e-4);
    if (n.type.dtype == DType::F16) rtol = std::max(rtol, 2e-3);
    if (n.type.dtype == DType::BF16) rtol = std::max(rtol, 1.6e-2);
  }
  return rtol;
}

int64_t longest_sum(const Graph& g) {
  int64_t depth = 1;
  for (const Node& n : g.nodes()) {
    if (n.op == OpKind::Matmul) {
      const Shape& a = g.type(n.operands[0]).shape;
      depth = std::max(depth, a[a.rank() - 1]);
    } else if (n.op == OpKind::Attention) {  // a sum over the keys of sums over the depth
      const Shape& k = g.type(n.operands[1]).shape;
      depth = std::max({depth, k[k.rank() - 2], k[k.rank() - 1]});
    } else if (n.op == OpKind::Conv) {  // C/groups x window products per element
      const Shape& w = g.type(n.operands[1]).shape;
      depth = std::max(depth, w[0] == 0 ? 1 : w.numel() / w[0]);
    } else if (n.op == OpKind::Cumsum) {
      depth = std::max(depth, n.type.shape[static_cast<int>(n.attr("axis").i)]);
    } else if (op_info(n.op).category == OpCategory::Reduce && n.type.shape.numel() > 0) {
      depth = std::max(depth, g.type(n.operands[0]).shape.numel() / n.type.shape.numel());
    }
  }
  return depth;
}

OutputCheck check_outputs(Device device, const Graph& g, const std::vector<HostTensor>& inputs, bool bound_everything) {
  const Backend* backend = engine_for(device).backend();
  const std::vector<Precision> prec = precision(g, !backend || backend->capabilities().exact_math);
  OutputCheck c;
  for (ValueId v : g.outputs())
    c.precision.push_back(bound_everything && prec[v] == Precision::Unbounded ? Precision::Approximate : prec[v]);
  // Approximated outputs need the magnitudes of what they are computed from: then the
  // interpreter keeps every value, and the outputs are picked from them (one run).
  const bool approximate = std::find(c.precision.begin(), c.precision.end(), Precision::Approximate) != c.precision.end();
  std::vector<double> magnitude(c.precision.size(), 0.0);
  try {
    if (approximate) {
      std::vector<HostTensor> values = interpret_every_value(g, inputs);
      magnitude = magnitudes_of(g, values);
      for (ValueId v : g.outputs()) c.want.push_back(values[v]);
    } else {
      c.want = interpret(g, inputs);
    }
  } catch (const std::exception& e) {
    c.oracle_error = e.what();
    return c;
  }
  c.got = run_on_host(device, g, inputs);
  const double rtol = float_tolerance(g);
  const int64_t depth = longest_sum(g);
  for (size_t i = 0; i < std::min(c.got.size(), c.want.size()); ++i) {
    std::string d = compare_outputs({c.want[i]}, {c.got[i]}, {c.precision[i]}, {magnitude[i]}, rtol, depth);
    if (d.starts_with("output 0")) d.replace(0, 8, fmt::format("output {}", i));
    c.verdict.push_back(std::move(d));
  }
  return c;
}

std::string check_on_device(Device device, const Graph& g, uint64_t seed) {
  OutputCheck c;
  try {
    c = check_outputs(device, g, random_inputs(g, seed));
  } catch (const std::exception& e) {
    return fmt::format("{} failed: {}", device.str(), e.what());
  }
  // Where the oracle itself refuses (never for generated graphs) there is nothing to compare.
  if (c.want.size() != g.outputs().size()) return "";
  if (c.got.size() != c.want.size()) return fmt::format("{} outputs, expected {}", c.got.size(), c.want.size());
  for (const std::string& d : c.verdict)
    if (!d.empty()) return d;
  return "";
}

namespace {

// `g` reduced to what `outputs` need, each value in `loose` replaced by a new parameter of
// its type; parameters nothing needs are dropped, the rest renamed %p0, %p1, ...
Graph rebuild(const Graph& g, const std::vector<ValueId>& outputs, const std::vector<bool>& loose) {
  // What the outputs need, walking back (no recursion: graphs can be long).
  std::vector<bool> need(g.size(), false);
  for (ValueId v : outputs) need[v] = true;
  for (size_t id = g.size(); id-- > 0;) {
    if (!need[id] || loose[id]) continue;
    for (ValueId o : g.node(static_cast<ValueId>(id)).operands) need[o] = true;
  }
  Graph out(g.name());
  std::vector<ValueId> map(g.size(), 0);
  int params = 0;
  for (ValueId v : g.inputs())
    if (need[v]) map[v] = out.add_input(fmt::format("p{}", params++), g.type(v));
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.node(static_cast<ValueId>(id));
    if (!need[id] || n.op == OpKind::Input) continue;
    if (loose[id]) {
      map[id] = out.add_input(fmt::format("p{}", params++), n.type);
      continue;
    }
    Node copy = n;
    copy.kernel = -1;
    copy.name.clear();
    for (ValueId& o : copy.operands) o = map[o];
    map[id] = out.add_unchecked(std::move(copy));
  }
  std::vector<ValueId> outs;
  for (ValueId v : outputs) outs.push_back(map[v]);
  out.set_outputs(std::move(outs));
  return out;
}

}  // namespace

Graph minimize(Device device, const Graph& g, uint64_t seed) {
  return minimize(g, [&](const Graph& candidate) { return !check_on_device(device, candidate, seed).empty(); });
}

Graph minimize(const Graph& g, const std::function<bool(const Graph&)>& fails) {
  Graph best = g;
  auto still_fails = [&](const Graph& candidate) { return static_cast<bool>(verify(candidate)) && fails(candidate); };
  for (bool changed = true; changed;) {
    changed = false;
    // Fewer outputs.
    for (size_t i = 0; best.outputs().size() > 1 && i < best.outputs().size(); ++i) {
      std::vector<ValueId> outs(best.outputs().begin(), best.outputs().end());
      outs.erase(outs.begin() + static_cast<std::ptrdiff_t>(i));
      Graph c = rebuild(best, outs, std::vector<bool>(best.size(), false));
      if (still_fails(c)) {
        best = std::move(c);
        changed = true;
        --i;
      }
    }
    // A shorter graph: an output replaced by one of its operands.
    for (size_t i = 0; i < best.outputs().size(); ++i) {
      const Node& n = best.node(best.outputs()[i]);
      for (ValueId o : std::vector<ValueId>(n.operands)) {
        std::vector<ValueId> outs(best.outputs().begin(), best.outputs().end());
        outs[i] = o;
        Graph c = rebuild(best, outs, std::vector<bool>(best.size(), false));
        if (c.size() < best.size() && still_fails(c)) {
          best = std::move(c);
          changed = true;
          break;
        }
      }
    }
    // Fewer operations: a value cut loose from what computes it (a new parameter).
    for (size_t id = 0; id < best.size(); ++id) {
      if (best.node(static_cast<ValueId>(id)).op == OpKind::Input) continue;
      std::vector<bool> loose(best.size(), false);
      loose[id] = true;
      Graph c = rebuild(best, {best.outputs().begin(), best.outputs().end()}, loose);
      if (c.size() < best.size() && still_fails(c)) {
        best = std::move(c);
        changed = true;
      }
    }
  }
  return best;
}

}  // namespace kiln::test
