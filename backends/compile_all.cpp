// backends/compile_all.cpp - Backend::compile_all's default: a plan's distinct kernels
// compiled at once.
//
// compile() is thread-safe on every backend (the autotuner's --jobs relies on it too), and a
// cold plan's kernels are independent: compiled one after another, ResNet-50's first call
// waited on LLVM one kernel at a time with the other core idle. Equal kernels (a model's
// repeated blocks) are found first, by the text that keys the kernel caches, so that two
// threads never compile the same one at once only for one of them to be thrown away.
#include <exception>
#include <string>
#include <unordered_map>

#include <tbb/parallel_for.h>

#include "kiln/backend/backend.h"
#include "kiln/support/error.h"

namespace kiln {

std::vector<std::shared_ptr<const CompiledKernel>> Backend::compile_all(std::span<const kir::Kernel> kernels,
                                                                        std::span<const kir::Schedule> schedules) {
  KILN_ASSERT(kernels.size() == schedules.size(), "a schedule per kernel");
  std::vector<size_t> distinct;            // the first of each set of equal kernels, in plan order
  std::vector<size_t> same(kernels.size());  // kernel i is compiled as distinct[same[i]]
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::string key = kernels[i].str(false);
    key += '\n';
    key += schedules[i].str();
    auto [it, fresh] = seen.try_emplace(std::move(key), distinct.size());
    if (fresh) distinct.push_back(i);
    same[i] = it->second;
  }
  std::vector<std::shared_ptr<const CompiledKernel>> compiled(distinct.size());
  std::vector<std::exception_ptr> failed(distinct.size());
  auto one = [&](size_t d) {
    try {
      compiled[d] = compile(kernels[distinct[d]], schedules[distinct[d]]);
    } catch (...) {
      failed[d] = std::current_exception();
    }
  };
  if (distinct.size() == 1) {
    one(0);
  } else if (distinct.size() > 1) {
    tbb::parallel_for(size_t{0}, distinct.size(), one);
  }
  // The error a serial compile would have met first: the same one on every run.
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
  std::vector<std::shared_ptr<const CompiledKernel>> out;
  out.reserve(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) out.push_back(compiled[same[i]]);
  return out;
}

}  // namespace kiln
