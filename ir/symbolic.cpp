// ir/symbolic.cpp - binding a graph's symbolic dims to sizes, and the graph they make.
#include "kiln/ir/symbolic.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "kiln/ir/text.h"

namespace kiln {
namespace {

bool dims_attr(const Node& n, size_t i) { return n.info().attrs[i].kind == AttrKind::Dims; }

template <class Fn>
void for_each_dim(const Node& n, Fn&& fn) {
  for (int64_t d : n.type.shape.dims()) fn(d);
  for (size_t i = 0; i < n.attrs.size(); ++i)
    if (dims_attr(n, i) && n.attrs[i].present)
      for (int64_t d : n.attrs[i].ints) fn(d);
}

std::string param_name(const Graph& g, size_t i) { return "%" + g.node(g.inputs()[i]).name; }

}  // namespace

bool has_symbolic_dims(const Graph& g) {
  for (const Node& n : g.nodes()) {
    bool symbolic = false;
    for_each_dim(n, [&](int64_t d) { symbolic = symbolic || is_symbolic_dim(d); });
    if (symbolic) return true;
  }
  return false;
}

Expected<DimBindings> bind_dims(const Graph& g, std::span<const TensorType> inputs) {
  if (inputs.size() != g.inputs().size())
    return make_error(fmt::format("graph @{} takes {} inputs, got {}", g.name(), g.inputs().size(), inputs.size()));
  DimBindings b;
  std::map<std::string, std::string, std::less<>> bound_by;  // size -> "%x dim 0", for errors
  auto shape_mismatch = [&](size_t i) {
    return make_error(fmt::format("input {} of @{} is {}, which does not fit {}", param_name(g, i), g.name(),
                                  inputs[i].str(), g.type(g.inputs()[i]).str()));
  };
  // Sizes first, from dims that are one size each.
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& want = g.type(g.inputs()[i]);
    if (want.dtype != inputs[i].dtype || want.shape.rank() != inputs[i].shape.rank()) return shape_mismatch(i);
    for (int d = 0; d < want.shape.rank(); ++d) {
      const int64_t dim = want.shape[d];
      const std::vector<std::string> names = dim_symbols(dim);
      if (names.size() != 1 || dim != dim_symbol(names[0])) continue;
      const int64_t size = inputs[i].shape[d];
      auto [it, fresh] = b.try_emplace(names[0], size);
      const std::string where = fmt::format("{} dim {}", param_name(g, i), d);
      if (fresh) {
        bound_by[names[0]] = where;
      } else if (it->second != size) {
        return make_error(fmt::format("size {} of @{} is {} from {} and {} from {} (input {} is {})", names[0],
                                      g.name(), it->second, bound_by[names[0]], size, where, param_name(g, i),
                                      inputs[i].str()));
      }
    }
  }
  // Then every dim must come out as the input's.
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& want = g.type(g.inputs()[i]);
    for (int d = 0; d < want.shape.rank(); ++d) {
      const int64_t dim = want.shape[d];
      const std::optional<int64_t> size = dim_value(dim, b);
      if (!size) {
        std::vector<std::string> unbound;
        for (const std::string& n : dim_symbols(dim))
          if (!b.count(n)) unbound.push_back(n);
        return make_error(fmt::format("input {} of @{} has dim {} = {}, and no input dim is {} alone, which binding "
                                      "needs (give the graph a parameter dim that is just that size)",
                                      param_name(g, i), g.name(), d, dim_str(dim), fmt::join(unbound, ", ")));
      }
      if (*size != inputs[i].shape[d] && !is_symbolic_dim(dim)) return shape_mismatch(i);
      if (*size != inputs[i].shape[d])
        return make_error(fmt::format("input {} of @{} is {}, but its dim {} = {} is {} with {}", param_name(g, i),
                                      g.name(), inputs[i].str(), d, dim_str(dim), *size, [&] {
                                        std::vector<std::string> parts;
                                        for (const auto& [n, v] : b) parts.push_back(fmt::format("{} = {}", n, v));
                                        return fmt::format("{}", fmt::join(parts, ", "));
                                      }()));
      if (*size < 0) return shape_mismatch(i);
    }
  }
  return b;
}

Expected<Graph> specialize(const Graph& g, const DimBindings& b) {
  Graph out = g;
  std::set<std::string> unbound;
  auto bind = [&](int64_t& d) {
    if (!is_symbolic_dim(d)) return true;
    const std::optional<int64_t> v = dim_value(d, b);
    if (!v) {
      for (const std::string& n : dim_symbols(d))
        if (!b.count(n)) unbound.insert(n);
      return false;
    }
    d = *v;
    return true;
  };
  for (ValueId id = 0; id < out.size(); ++id) {
    Node& n = out.node(id);
    Shape shape = n.type.shape;
    for (int d = 0; d < shape.rank(); ++d) bind(shape[d]);
    n.type.shape = shape;
    for (size_t i = 0; i < n.attrs.size(); ++i)
      if (dims_attr(n, i) && n.attrs[i].present)
        for (int64_t& d : n.attrs[i].ints) bind(d);
  }
  if (!unbound.empty())
    return make_error(fmt::format("graph @{}: no size is given for {}", g.name(), fmt::join(unbound, ", ")));
  for (ValueId id = 0; id < out.size(); ++id)
    if (!valid_shape(out.node(id).type.shape))
      return Diagnostic{g.file(), out.node(id).loc,
                        fmt::format("with {}, the type {} is {}: a negative dim, or more elements than an int64 counts",
                                    [&] {
                                      std::vector<std::string> parts;
                                      for (const auto& [name, v] : b) parts.push_back(fmt::format("{} = {}", name, v));
                                      return fmt::format("{}", fmt::join(parts, ", "));
                                    }(),
                                    g.node(id).type.str(), out.node(id).type.str())};
  if (Status st = verify(out); !st) return st.error();
  return out;
}

Expected<Graph> specialize_for(const Graph& g, std::span<const TensorType> inputs) {
  Expected<DimBindings> b = bind_dims(g, inputs);
  if (!b) return b.error();
  return specialize(g, *b);
}

}  // namespace kiln
