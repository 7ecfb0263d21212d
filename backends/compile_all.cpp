// backends/compile_all.cpp - the one path from Kernel IR to compiled kernels, for every
// backend: the toolchain's store finds or builds each kernel (kiln/backends/toolchain.h).
//
// A cold plan's kernels are independent: compiled one after another, ResNet-50's first call
// waited on LLVM one kernel at a time with the other core idle. Equal kernels (a model's
// repeated blocks) are found first, by the text that keys the store, so that two threads
// never wait on one build.
#include <exception>
#include <string>
#include <unordered_map>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "kiln/backends/backend.h"
#include "kiln/codegen/c_source.h"
#include "kiln/support/error.h"
#include "kiln/support/tsan.h"

namespace kiln {
namespace {

// The store's calls into `t` for `kernels[indices[j]]`, request j.
KernelStore::Toolchain store_calls(Toolchain& t, std::span<const kir::Kernel> kernels,
                                   std::span<const kir::Schedule> schedules, std::span<const size_t> indices) {
  KernelStore::Toolchain calls;
  calls.build = [&t, kernels, schedules, indices](std::span<const size_t> requests, std::string_view key) {
    std::vector<const kir::Kernel*> ks;
    std::vector<const kir::Schedule*> ss;
    for (size_t r : requests) {
      ks.push_back(&kernels[indices[r]]);
      ss.push_back(&schedules[indices[r]]);
    }
    return t.build(ks, ss, key);
  };
  calls.load = [&t](std::string_view bytes, std::string_view key) { return t.load(bytes, key); };
  calls.member = [&t, kernels, schedules, indices](const KernelStore::Object& group, size_t position,
                                                  size_t request) -> KernelStore::Object {
    const size_t i = indices[request];
    return t.member(group, position, kernels[i], schedules[i]);
  };
  return calls;
}

KernelStore::Request request_of(const std::string& fingerprint, const kir::Kernel& k, const kir::Schedule& s) {
  return {kir::kernel_canonical(k, s, fingerprint), "kernel @" + k.name};
}

}  // namespace

std::shared_ptr<const CompiledKernel> Backend::compile(const kir::Kernel& k, const kir::Schedule& s) {
  Toolchain& t = toolchain();
  t.check_kernel(k);
  const size_t only = 0;
  return t.store().get_one<CompiledKernel>(request_of(t.fingerprint(), k, s), store_calls(t, {&k, 1}, {&s, 1}, {&only, 1}));
}

std::vector<std::shared_ptr<const CompiledKernel>> Backend::compile_all(std::span<const kir::Kernel> kernels,
                                                                        std::span<const kir::Schedule> schedules) {
  KILN_ASSERT(kernels.size() == schedules.size(), "a schedule per kernel");
  Toolchain& t = toolchain();
  std::vector<std::shared_ptr<const CompiledKernel>> out(kernels.size());
  if (t.builds_together()) {
    const std::string fingerprint = t.fingerprint();
    std::vector<const kir::Kernel*> all_kernels;
    std::vector<const kir::Schedule*> all_schedules;
    for (size_t i = 0; i < kernels.size(); ++i) {
      t.check_kernel(kernels[i]);
      all_kernels.push_back(&kernels[i]);
      all_schedules.push_back(&schedules[i]);
    }
    // One group per set of kernels whose custom kernels agree on their macros: a program
    // holds each custom kernel's source once (kir::custom_macro_groups).
    for (const std::vector<size_t>& group : kir::custom_macro_groups(all_kernels, all_schedules)) {
      std::vector<KernelStore::Request> requests;
      for (size_t i : group) requests.push_back(request_of(fingerprint, kernels[i], schedules[i]));
      const std::vector<KernelStore::Object> found = t.store().get(requests, store_calls(t, kernels, schedules, group));
      for (size_t j = 0; j < group.size(); ++j) out[group[j]] = std::static_pointer_cast<const CompiledKernel>(found[j]);
    }
    return out;
  }
  std::vector<size_t> distinct;              // the first of each set of equal kernels, in plan order
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
    // The spawn and the join, stated to ThreadSanitizer (kiln/support/tsan.h).
    int spawned = 0, joined = 0;
    tsan_release(&spawned);
    tbb::parallel_for(tbb::blocked_range<size_t>(0, distinct.size(), 1), [&](const tbb::blocked_range<size_t>& r) {
      tsan_acquire(&spawned);
      for (size_t d = r.begin(); d < r.end(); ++d) one(d);
      tsan_release(&joined);
    });
    tsan_acquire(&joined);
  }
  // The error a serial compile would have met first: the same one on every run.
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
  for (size_t i = 0; i < kernels.size(); ++i) out[i] = compiled[same[i]];
  return out;
}

}  // namespace kiln
