// backends/cpu/parallel.h - how the cpu device splits work across cores and calls
// generated code.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "kernel_abi.h"

// oneTBB synchronizes its workers inside libtbb.so, which ThreadSanitizer builds do not
// instrument: the happens-before edges of a parallel_for (the spawn publishes what the body
// reads; the join publishes what the workers wrote) are stated to TSan here
// (kiln/support/tsan.h), so that it checks kiln's code and not TBB's plumbing.
#include "kiln/support/tsan.h"

namespace kiln::cpu {

/// A oneTBB arena of at most `threads` workers, made at its first use and kept for the
/// process (arenas are not cheap to make, and launches from any thread share them).
inline tbb::task_arena& arena_of(int threads) {
  static std::mutex mutex;
  static auto* arenas = new std::map<int, tbb::task_arena>();  // never destroyed: workers may outlive exit
  std::lock_guard lock(mutex);
  auto it = arenas->find(threads);
  if (it == arenas->end()) it = arenas->try_emplace(threads, threads).first;
  return it->second;
}

/// Runs `body(begin, end)` over [0, n) in tasks of at least `grain` iterations on oneTBB,
/// on at most `threads` workers (0: as many as oneTBB has, one per core).
template <class Body>
void parallel_range(int64_t n, int64_t grain, const Body& body, int threads = 0) {
  if (threads == 1) return body(0, n);
  if (threads > 1 && threads < tbb::this_task_arena::max_concurrency())
    return arena_of(threads).execute([&] { parallel_range(n, grain, body); });
  int spawned = 0, joined = 0;
  tsan_release(&spawned);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, static_cast<size_t>(grain)), [&](const tbb::blocked_range<int64_t>& r) {
    tsan_acquire(&spawned);
    body(r.begin(), r.end());
    tsan_release(&joined);
  });
  tsan_acquire(&joined);
}

/// Runs `task(t)` for every t in [0, n): on the calling thread unless `parallel`, else a task
/// at a time across at most `threads` workers (a GEMM's or an attention step's blocks).
template <class Task>
void run_tasks(int64_t n, bool parallel, int threads, const Task& task) {
  if (!parallel) {
    for (int64_t t = 0; t < n; ++t) task(t);
    return;
  }
  parallel_range(
      n, 1,
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) task(t);
      },
      threads);
}

// Generated code has no UBSan function-type prologue, which -fsanitize=function (part of
// clang's -fsanitize=undefined) reads in front of every function called through a pointer.
#if defined(__clang__)
__attribute__((no_sanitize("function")))
#endif
inline void call_kernel(KernelFn fn, void* const* args, int64_t begin, int64_t end) {
  fn(args, begin, end);
}

}  // namespace kiln::cpu
