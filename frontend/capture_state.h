// frontend/capture_state.h - what kiln::capture watches while it records (internal).
//
// A captured function's state is the Tensor objects it assigns that existed before it ran
// (an optimizer's parameters and moments). Tensor's assignments, moves and destructor tell
// the recording capture of the calling thread; one relaxed load keeps that free when no
// capture records anywhere.
#pragma once

#include <atomic>

namespace kiln {
class Tensor;
}

namespace kiln::detail {

/// How many captures record in the process now.
extern std::atomic<int> g_captures_recording;
inline bool any_capture_recording() { return g_captures_recording.load(std::memory_order_relaxed) != 0; }

/// Before the value `object` holds changes (assigned, or moved from).
void note_tensor_change(const Tensor* object);
/// Before `object` is destroyed: it was a local of the function, not its state.
void note_tensor_destroyed(const Tensor* object);

/// True while a capture records on this thread.
bool thread_is_capturing();

/// While one lives, assignments on this thread are kiln's own bookkeeping (a leaf's
/// accumulated gradient), not a function's state.
class InternalAssignments {
 public:
  InternalAssignments();
  ~InternalAssignments();
  InternalAssignments(const InternalAssignments&) = delete;
  InternalAssignments& operator=(const InternalAssignments&) = delete;

 private:
  bool was_;
};

}  // namespace kiln::detail
