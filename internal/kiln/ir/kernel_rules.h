// kiln/ir/kernel_rules.h - what makes a kernel region legal, whoever wrote it.
//
// The fusion planner only builds legal kernels; the verifier checks every kernel against the
// same rules, so a hand-edited region that a code generator could not run as one streaming
// launch is an error, not a wrong answer.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/support/error.h"

namespace kiln {

/// True when a value of shape `s`, right-aligned into a reduction's input shape `full`, has
/// every unreduced dim whole (reduced dims may be 1): it lives on the rows being reduced.
bool keeps_rows(const Shape& s, const Shape& full, std::span<const int64_t> axes);

/// Why the result of reduction `r` would leave its rows inside a kernel whose members are
/// those for which `in_kernel` holds, or "" when it stays on them: it must reach the other
/// members through elementwise ops (and reshapes that only add or drop dims of size 1) only,
/// broadcast along the reduced axes. `users[v]` lists
/// v's consumers; `name` spells a value in the message; `*at` is set to the consumer where the
/// result leaves its rows. Shared by the verifier and the fusion planner (which asks before
/// the kernel is complete).
std::string reduction_row_violation(const Graph& g, const std::vector<std::vector<ValueId>>& users, ValueId r,
                                    const std::function<bool(ValueId)>& in_kernel,
                                    const std::function<std::string(ValueId)>& name, ValueId* at = nullptr);

/// The rules of kernel regions: the reductions of a kernel reduce the same axes of the same
/// shape; each reduction's result reaches the kernel's other operations only through
/// elementwise ops that keep it on its rows; a kernel with a matmul has no reduction and one
/// matmul, whose operands are read from memory (possibly through views).
Status check_kernel_rules(const Graph& g);

}  // namespace kiln
