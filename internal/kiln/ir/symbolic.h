// kiln/ir/symbolic.h - graphs with symbolic dims, and binding them to sizes.
//
// A graph may leave dims symbolic (`%x: f32[n, 768]`, kiln/ir/dim.h); its type rules then
// prove what they can (equal dims, sums, products) and refuse what they cannot. Such a graph
// is verified, printed and parsed like any other; to run it, its sizes are bound, from the
// types of the inputs it is given, and the graph is specialized: every dim replaced by its
// size and the whole graph verified again, which checks what the symbolic form could not (a
// slice's bounds, an empty reduction). The passes and the engines work on bound graphs.
#pragma once

#include <span>

#include "kiln/ir/dim.h"
#include "kiln/ir/graph.h"
#include "kiln/support/error.h"

namespace kiln {

/// Whether a value's type or a node's dims attribute of `g` has a symbolic dim.
bool has_symbolic_dims(const Graph& g);

/// The sizes that make `g`'s parameters the types `inputs` (one per parameter): a parameter
/// dim that is one size binds it; every other dim must then come out equal. Errors name the
/// parameter, the dim and both sizes, or the sizes no parameter dim binds alone.
Expected<DimBindings> bind_dims(const Graph& g, std::span<const TensorType> inputs);

/// `g` with each symbolic dim replaced by its value under `b`, verified again. Errors name
/// the unbound sizes, or what the sizes make invalid (at its node's source location).
Expected<Graph> specialize(const Graph& g, const DimBindings& b);

/// bind_dims, then specialize.
Expected<Graph> specialize_for(const Graph& g, std::span<const TensorType> inputs);

}  // namespace kiln
