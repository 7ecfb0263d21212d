// kiln/support/tsan.h - telling ThreadSanitizer about synchronization it cannot see.
//
// oneTBB hands a task to a worker, and the workers' results back, inside libtbb.so, which
// Debian does not build with -fsanitize=thread: in a build with it (scripts/tsan.sh), a task
// that reads what its spawner wrote before the parallel_for (a lambda's captures on the
// spawner's stack), or a spawner that reads what the tasks wrote, is reported as a race
// although libtbb orders the two. A parallel_for states both edges: tsan_release(&spawned)
// before it, tsan_acquire(&spawned) first in the body and tsan_release(&joined) last, and
// tsan_acquire(&joined) after it. The body goes to TBB by value, with a blocked_range (TBB
// copies it into the task, a copy scripts/tsan.supp covers): given by reference (the index
// form of parallel_for), its captures would be read from the spawner's stack before the
// acquire. Without TSan these compile to nothing.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define KILN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KILN_TSAN 1
#endif
#endif

#ifdef KILN_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace kiln {

/// Everything this thread did so far happens before a later tsan_acquire(token) elsewhere.
inline void tsan_release([[maybe_unused]] const void* token) {
#ifdef KILN_TSAN
  __tsan_release(const_cast<void*>(token));
#endif
}

/// What threads did before their tsan_release(token) happens before what follows here.
inline void tsan_acquire([[maybe_unused]] const void* token) {
#ifdef KILN_TSAN
  __tsan_acquire(const_cast<void*>(token));
#endif
}

}  // namespace kiln
