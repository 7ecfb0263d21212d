// kiln/ir/custom_kernel.h - a kernel body written by hand, used as an elementwise op.
//
// A custom kernel is one C or OpenCL C function from scalars to a scalar. A graph uses it as
// the op `custom @name(...)`: the function is applied to every element of its broadcast
// operands, so it fuses with the elementwise ops around it like any op of ops.def. The
// definition travels with the graph (a node's attribute holds it), so a graph is complete
// on its own: printed, it declares the kernels it uses; cached, its keys hold their digest.
//
//   custom c @softplus(f32) -> f32 tunable TERMS = [4, 8, 16] source "float softplus(..."
//
// The function must be pure: kiln may evaluate it in any order, on any element, any number
// of times (fused into several kernels, or once for a common subexpression).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/dtype.h"
#include "kiln/support/error.h"

namespace kiln {

enum class CustomLanguage : uint8_t {
  C,        // C17, for `cpu` (compiled by Clang's libraries in-process)
  OpenCLC,  // OpenCL C 1.2, for OpenCL devices (their compiler) and `cpu` (Clang's OpenCL front end)
};
std::string_view custom_language_name(CustomLanguage l);  // "c", "opencl"

/// A preprocessor macro the autotuner may set to each of `values` (e.g. an unroll factor).
/// Every value must compute the same results: the tuner compares each variant's outputs
/// with the default's and drops those that differ.
struct CustomTunable {
  std::string macro;
  std::vector<int64_t> values;
  int64_t default_value = 0;
};

/// What the function takes and gives: `(f32, f32) -> f32`, plus its tunable macros
/// `tunable UNROLL = [1, 2, 4] default 2` (the default defaults to the first value).
/// Operands broadcast as for `add`; each must have its parameter's type exactly (no
/// promotion), and the result has the broadcast shape and the declared type.
struct CustomSignature {
  std::vector<DType> params;
  DType result = DType::F32;
  std::vector<CustomTunable> tunables;

  /// Parses the text form above; errors say what was expected where.
  static Expected<CustomSignature> parse(std::string_view text);
  std::string str() const;
};

struct CustomKernel {
  std::string name;  // the op's name and the function's name in `source`
  CustomLanguage language = CustomLanguage::C;
  std::string source;
  std::string source_file;  // the file diagnostics name: the user's path, or "<name>.c"
  CustomSignature signature;
  /// Hash of everything above but `source_file`: part of every key of a kernel that calls it.
  std::string digest;
};

/// Checks the definition (a C identifier not starting with `kiln_` for a name, at least one
/// parameter, tunables with distinct C-identifier macros and a default among their values)
/// and computes its digest.
Expected<std::shared_ptr<const CustomKernel>> make_custom_kernel(std::string name, CustomLanguage language,
                                                                  std::string source, std::string source_file,
                                                                  CustomSignature signature);

/// The declaration line of `k` in IR text (what the printer writes before a graph).
std::string custom_declaration(const CustomKernel& k);

/// How the reference interpreter runs a custom kernel: `count` elements, each parameter an
/// array of its dtype's storage (bool as one byte), the result likewise. A layer above the IR
/// installs the factory explicitly (kiln::register_custom_host, kiln/engine/engine.h: the
/// `cpu` backend's compiler); without one, the interpreter says it cannot run custom kernels.
using CustomHostFn = std::function<void(const std::vector<const void*>& args, void* result, int64_t count)>;
using CustomHostFactory = std::function<CustomHostFn(const CustomKernel&)>;
void set_custom_host_factory(CustomHostFactory factory);
/// The host function of `k` at its default tunables (built once per digest).
CustomHostFn custom_host_function(const CustomKernel& k);

}  // namespace kiln
