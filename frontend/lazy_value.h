// frontend/lazy_value.h - the node behind every kiln::Tensor (internal to frontend/).
//
// A LazyValue is either pending (it holds the recipe: op, operands, attributes) or
// evaluated (it holds a buffer). Values form a reference-counted DAG: a value nobody refers
// to is freed with its recipe, so work that nobody can read is never run. Pending values of
// a thread are also linked into that thread's pending list, which kiln::sync() drains.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "kiln/frontend/tensor.h"
#include "kiln/ir/attrs.h"
#include "kiln/ir/op.h"
#include "kiln/engine/engine.h"

namespace kiln::detail {

struct PendingList;
struct GradNode;

struct LazyValue {
  std::atomic<uint32_t> refs{1};
  OpKind op = OpKind::Input;
  uint32_t num_operands = 0;
  bool trace_input = false;  // a kiln::trace parameter: has no value, cannot be evaluated
  Device device;
  TensorType type;
  uint64_t hash = 0;  // structural hash of the recipe (operands included), for the plan cache

  // The recipe, while pending. Operands hold a reference each.
  std::array<LazyValue*, 3> inline_operands{};
  std::vector<LazyValue*> extra_operands;  // concat with more than 3 operands
  Attrs attrs;

  // The result, once evaluated.
  BufferRef buffer;

  // Its place on the gradient tape (frontend/grad.h): the node of the op that made it, or
  // its leaf node; null when it requires no gradient.
  std::shared_ptr<GradNode> grad_fn;
  // How many of `refs` are gradient nodes saving this value for their backward. A value only
  // they hold may be recomputed by the backward instead of kept (materialize.cpp).
  std::atomic<uint32_t> saved_refs{0};

  // Links in the owning thread's pending list.
  PendingList* list = nullptr;
  LazyValue* prev = nullptr;
  LazyValue* next = nullptr;

  // Scratch of the graph cut (materialize.cpp), valid while cut_epoch is the cutting thread's
  // current epoch. Only pending values use it: they belong to the cutting thread, whereas an
  // evaluated value may be read by several threads at once.
  uint32_t cut_epoch = 0;
  uint32_t cut_id = 0;
  uint32_t cut_uses = 0;
  bool cut_recomputable = false;  // kept, a target, or cheap to compute again from such

  bool pending() const { return !buffer; }
  LazyValue* operand(size_t i) const { return i < 3 ? inline_operands[i] : extra_operands[i - 3]; }

  // Values are recycled through a per-thread free list: recording does not call malloc.
  static void* operator new(size_t size);
  static void operator delete(void* p, size_t size);
};

/// A new pending value with the given recipe; takes a reference on each operand.
/// The caller has already checked the types.
LazyValue* make_pending(OpKind op, const TensorType& type, Device device,
                        std::span<LazyValue* const> operands, Attrs attrs);
/// A new evaluated value holding `buffer`.
LazyValue* make_evaluated(BufferRef buffer, Device device);
/// A trace parameter of the given type.
LazyValue* make_trace_input(const TensorType& type, Device device);

void retain(LazyValue* v);
/// Drops one reference; frees the value (and, iteratively, what only it kept alive).
void release(LazyValue* v);

/// Turns a pending value into an evaluated one: stores the buffer, drops the recipe.
void set_result(LazyValue* v, BufferRef buffer);

/// The calling thread's pending values, oldest first, and how many there are.
std::vector<LazyValue*> thread_pending_values();
size_t thread_pending_count();

/// While a kiln::trace runs on this thread, the pending cap does not flush (a flush would
/// have to evaluate values computed from trace inputs).
bool thread_is_tracing();
void set_thread_tracing(bool on);

/// The scalar constants recorded in this thread's pending stream, to record each value
/// once. The cache holds a reference to each; it is emptied before every cut and flush, so
/// that the references counted there are the program's own.
struct ScalarCache {
  static constexpr size_t kCapacity = 16;
  struct Entry {
    OpKind op;  // constant (baked into kernels) or scalar (bound at launch)
    DType dtype;
    Device device;
    Scalar value;
    LazyValue* v;
  };
  std::vector<Entry> entries;
  ~ScalarCache();  // releases at thread exit
};
ScalarCache& thread_scalar_cache();
void clear_thread_scalar_cache();

/// Evaluates `targets` (and every pending value in their subgraphs that another tensor
/// still refers to) with one engine execution per device. Throws kiln::Error.
void evaluate(std::span<LazyValue* const> targets, bool forced_by_cap = false);

/// Evaluates the calling thread's pending values that tensors hold (kiln::sync, and the
/// pending cap when `forced_by_cap`).
void flush_pending(bool forced_by_cap = true);

/// Counters shared by the frontend files.
struct Counters {
  std::atomic<uint64_t> executions{0};
  std::atomic<uint64_t> nodes_executed{0};
  std::atomic<uint64_t> ops_recorded{0};
  std::atomic<uint64_t> cap_flushes{0};
  std::atomic<uint64_t> donated_inputs{0};
  std::atomic<int64_t> live_values{0};
  std::atomic<int64_t> live_buffer_bytes{0};
};
Counters& counters();

}  // namespace kiln::detail
