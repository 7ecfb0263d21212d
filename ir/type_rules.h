// ir/type_rules.h - the type rules named in ops.def (internal to ir/).
#pragma once

#include "kiln/ir/op.h"

namespace kiln::rules {

#define KILN_RULE(name) Expected<TensorType> name(const TypeRuleInput& in);
KILN_RULE(rule_given)
KILN_RULE(rule_constant)
KILN_RULE(rule_arange)
KILN_RULE(rule_rand)
KILN_RULE(rule_scalar_param)
KILN_RULE(rule_unary_numeric)
KILN_RULE(rule_unary_float)
KILN_RULE(rule_unary_bool)
KILN_RULE(rule_float_predicate)
KILN_RULE(rule_cast)
KILN_RULE(rule_arith)
KILN_RULE(rule_div)
KILN_RULE(rule_shift)
KILN_RULE(rule_compare)
KILN_RULE(rule_cumsum)
KILN_RULE(rule_argsort)
KILN_RULE(rule_logic)
KILN_RULE(rule_where)
KILN_RULE(rule_custom)
KILN_RULE(rule_reduce)
KILN_RULE(rule_reshape)
KILN_RULE(rule_permute)
KILN_RULE(rule_expand)
KILN_RULE(rule_slice)
KILN_RULE(rule_pad)
KILN_RULE(rule_unfold)
KILN_RULE(rule_concat)
KILN_RULE(rule_gather)
KILN_RULE(rule_scatter)
KILN_RULE(rule_matmul)
KILN_RULE(rule_conv)
KILN_RULE(rule_attention)
#undef KILN_RULE

}  // namespace kiln::rules
