// kiln/frontend/custom_op.h - kernels written by hand, used as ops on kiln::Tensor.
//
//   auto softplus = kiln::custom_op("softplus", kiln::CustomSource::c(R"(
//       #include <math.h>
//       float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); })"), "(f32) -> f32");
//   kiln::Tensor y = softplus(x * 2.0f) + 1.0f;   // one fused kernel: mul, softplus, add
//
// The function is applied to every element of its broadcast operands and fuses with the
// ops around it: on `cpu` LLVM inlines it into the fused loop; on OpenCL devices it is
// pasted into the program. docs/custom_kernels.md has the rules.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kiln/frontend/autodiff.h"
#include "kiln/frontend/tensor.h"
#include "kiln/ir/custom_kernel.h"

namespace kiln {

/// A custom kernel's source: its language, its text, and the file name its diagnostics use.
struct CustomSource {
  CustomLanguage language = CustomLanguage::C;
  std::string text;
  std::string file;  // "" : "<name>.c" or "<name>.cl"

  static CustomSource c(std::string text, std::string file = "");
  static CustomSource opencl(std::string text, std::string file = "");
  /// Reads `path`: `.cl` is OpenCL C, anything else C. Throws kiln::Error if it cannot.
  static CustomSource from_file(const std::string& path);
};

/// A registered custom kernel, callable on tensors.
class CustomOp {
 public:
  explicit CustomOp(std::shared_ptr<const CustomKernel> kernel) : kernel_(std::move(kernel)) {}

  template <class... T>
  Tensor operator()(const T&... operands) const {
    const Tensor* all[] = {&operands...};
    return call(all);
  }
  /// Records the op; a wrong number or type of operands is a kiln::Error naming the kernel.
  Tensor call(std::span<const Tensor* const> operands) const;
  /// Gives the op its gradients (docs/autodiff.md): under backward(), the op's node calls
  /// `backward` with its operands and the gradient of its result. Without one, a backward
  /// through the op is an error naming it. Kept per kernel for the process, as the kernel.
  CustomOp& set_backward(CustomBackward backward);
  const CustomKernel& kernel() const { return *kernel_; }
  const std::shared_ptr<const CustomKernel>& shared() const { return kernel_; }

 private:
  std::shared_ptr<const CustomKernel> kernel_;
};

/// Registers the function `name` of `source` with `signature` (CustomSignature's text:
/// `(f32, f32) -> f32`, plus `tunable MACRO = [1, 2, 4]` clauses). Compiles it with Clang
/// once now, at every tunable value, so that errors come here: Clang's diagnostics with
/// file:line:col inside the source, a function missing or typed unlike the signature.
/// (Not under KILN_NO_COMPILE=1, where the kernels calling it must come from the disk cache.)
/// A name registers one kernel per process: the same name with another source or signature
/// is an error (registering the same one again is not).
CustomOp custom_op(std::string name, CustomSource source, std::string_view signature);

}  // namespace kiln
