// onnx/op_history.h - the versions ONNX defines of each op (internal to the onnx module).
//
// A model names an opset, not op versions: the version of an op in force is its newest
// version at or below the model's opset. The importer checks that version against the
// versions its converter was written for, so a newer version with other semantics
// (ReduceMean-18 takes its axes as an input) is refused instead of imported as an older one.
#pragma once

#include <span>
#include <string_view>

namespace kiln::onnx::detail {

struct OpVersion {
  std::string_view op;
  int version;
  bool types_only;  // only the type constraints differ from the op's version before
};

/// The newest opset the history knows (onnx/op_history.inc).
int last_known_opset();
/// Every version of `op` in the default domain, oldest first; empty for an unknown op.
std::span<const OpVersion> op_versions(std::string_view op);
/// The version of `op` in force at `opset`, or 0 where the op does not exist yet (or is
/// unknown).
int op_version_at(std::string_view op, int64_t opset);

}  // namespace kiln::onnx::detail
