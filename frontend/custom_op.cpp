// frontend/custom_op.cpp - kiln::custom_op: registering a hand-written kernel, calling it.
#include "kiln/frontend/custom_op.h"

#include <fstream>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "kiln/backends/cpu.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/compile_policy.h"
#include "grad.h"
#include "record.h"

namespace kiln {

CustomSource CustomSource::c(std::string text, std::string file) {
  return CustomSource{CustomLanguage::C, std::move(text), std::move(file)};
}

CustomSource CustomSource::opencl(std::string text, std::string file) {
  return CustomSource{CustomLanguage::OpenCLC, std::move(text), std::move(file)};
}

CustomSource CustomSource::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("custom kernel source '{}' cannot be read", path));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const bool cl = path.ends_with(".cl");
  return CustomSource{cl ? CustomLanguage::OpenCLC : CustomLanguage::C, std::move(text), path};
}

Tensor CustomOp::call(std::span<const Tensor* const> operands) const {
  const std::string fn = "custom @" + kernel_->name;
  if (operands.empty()) detail::fail(fn, "needs operands");
  Attrs attrs = Graph::make_attrs(OpKind::Custom);
  AttrValue& v = detail::attr_slot(attrs, OpKind::Custom, "kernel");
  v.present = true;
  v.custom = kernel_;
  return detail::record(fn, OpKind::Custom, operands, std::move(attrs));
}

CustomOp& CustomOp::set_backward(CustomBackward backward) {
  if (!backward) throw Error(fmt::format("custom @{}: set_backward needs a function", kernel_->name));
  detail::set_custom_backward(*kernel_, std::move(backward));
  return *this;
}

CustomOp custom_op(std::string name, CustomSource source, std::string_view signature) {
  auto sig = CustomSignature::parse(signature);
  if (!sig) throw Error(fmt::format("custom_op(\"{}\"): {}", name, sig.error().message));
  auto k = make_custom_kernel(std::move(name), source.language, std::move(source.text), std::move(source.file),
                              std::move(*sig));
  if (!k) throw Error(k.error());
  // One name, one kernel per process: a graph calling two kernels of one name could not be
  // printed (its text names kernels by name), nor pasted into one OpenCL program.
  static std::mutex mutex;
  static std::map<std::string, std::string> digests;  // by name
  {
    std::lock_guard lock(mutex);
    if (auto it = digests.find((*k)->name); it != digests.end() && it->second != (*k)->digest)
      throw Error(fmt::format("custom_op(\"{}\"): a custom kernel of that name with another source or signature is "
                              "registered already; give this one another name", (*k)->name));
  }
  // A deployment that proves it compiles nothing (KILN_NO_COMPILE=1) finds the kernels that
  // call this one in the disk cache; checking the source would compile it.
  if (compile_allowed()) cpu_check_custom_kernel(**k);
  {
    std::lock_guard lock(mutex);
    digests.emplace((*k)->name, (*k)->digest);
  }
  return CustomOp(std::move(*k));
}

}  // namespace kiln
