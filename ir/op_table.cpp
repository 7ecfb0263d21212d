// ir/op_table.cpp - the OpInfo table, expanded from ops.def, and the attribute schemas.
#include <array>

#include "kiln/ir/op.h"
#include "type_rules.h"

namespace kiln {
namespace {

using K = AttrKind;
// Attribute schemas named in ops.def. Order here is the order the printer writes them.
constexpr std::array<AttrSpec, 0> NoAttrs{};
constexpr std::array ConstantAttrs{AttrSpec{"value", K::Scalar, false},
                                   AttrSpec{"data", K::Scalars, false}};
constexpr std::array ArangeAttrs{AttrSpec{"start", K::Scalar, true},
                                 AttrSpec{"step", K::Scalar, true}};
constexpr std::array RandAttrs{AttrSpec{"seed", K::Int, true}};
constexpr std::array ScalarParamAttrs{AttrSpec{"slot", K::Int, true}, AttrSpec{"value", K::Scalar, true}};
constexpr std::array ReduceAttrs{AttrSpec{"axes", K::Ints, true},
                                 AttrSpec{"keepdim", K::Flag, false}};
constexpr std::array PermuteAttrs{AttrSpec{"perm", K::Ints, true}};
constexpr std::array SliceAttrs{AttrSpec{"start", K::Dims, true}, AttrSpec{"stop", K::Dims, true},
                                AttrSpec{"step", K::Ints, false}};
constexpr std::array PadAttrs{AttrSpec{"low", K::Ints, true}, AttrSpec{"high", K::Ints, true},
                              AttrSpec{"value", K::Scalar, false}};
constexpr std::array ConcatAttrs{AttrSpec{"axis", K::Int, true}};
constexpr std::array GatherAttrs{AttrSpec{"axis", K::Int, true}};
constexpr std::array CumsumAttrs{AttrSpec{"axis", K::Int, true}};
constexpr std::array ArgsortAttrs{AttrSpec{"axis", K::Int, true}, AttrSpec{"descending", K::Flag, false}};
constexpr std::array ScatterAttrs{AttrSpec{"axis", K::Int, true}, AttrSpec{"add", K::Flag, false},
                                  AttrSpec{"mul", K::Flag, false}, AttrSpec{"max", K::Flag, false},
                                  AttrSpec{"min", K::Flag, false}};
constexpr std::array UnfoldAttrs{AttrSpec{"axis", K::Int, true}, AttrSpec{"size", K::Int, true},
                                 AttrSpec{"step", K::Int, true}, AttrSpec{"dilation", K::Int, false}};
constexpr std::array ConvAttrs{AttrSpec{"strides", K::Ints, true}, AttrSpec{"dilations", K::Ints, false},
                               AttrSpec{"low", K::Ints, true}, AttrSpec{"high", K::Ints, true},
                               AttrSpec{"groups", K::Int, false}};
constexpr std::array AttentionAttrs{AttrSpec{"scale", K::Scalar, true}, AttrSpec{"masked_zero", K::Flag, false}};
constexpr std::array CustomAttrs{AttrSpec{"kernel", K::Custom, true}};

using namespace trait;
using namespace rules;

constexpr OpInfo kOps[] = {
#define KILN_OP(Id, name, arity, category, traits, rule, attrs, grad) \
  {OpKind::Id, name, arity, OpCategory::category, traits, &rule, attrs},
#include "kiln/ir/ops.def"
#undef KILN_OP
};
static_assert(std::size(kOps) == static_cast<size_t>(kNumOps));

}  // namespace

const OpInfo& op_info(OpKind op) { return kOps[static_cast<size_t>(op)]; }

std::span<const OpInfo> all_ops() { return kOps; }

std::optional<OpKind> lookup_op(std::string_view name) {
  for (const OpInfo& info : kOps)
    if (info.name == name) return info.kind;
  return std::nullopt;
}

int attr_index(OpKind op, std::string_view name) {
  const auto attrs = op_info(op).attrs;
  for (size_t i = 0; i < attrs.size(); ++i)
    if (attrs[i].name == name) return static_cast<int>(i);
  return -1;
}

Expected<TensorType> infer_type(OpKind op, std::span<const TensorType> operands,
                                const Attrs& attrs, const TensorType* declared) {
  const OpInfo& info = op_info(op);
  KILN_ASSERT(attrs.size() == info.attrs.size(), "attributes sized for their op's schema");
  if (info.result_type_declared() && !declared)
    return make_error(std::string("'") + std::string(info.name) + "' needs a declared result type");
  return info.type_rule(TypeRuleInput{op, operands, attrs, declared});
}

}  // namespace kiln
