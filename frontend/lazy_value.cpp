// frontend/lazy_value.cpp - lifetime of lazy values: allocation, references, pending lists.
#include "lazy_value.h"

#include <new>

#include "kiln/ir/hash.h"

namespace kiln::detail {

Counters& counters() {
  static Counters c;
  return c;
}

// ---- allocation: a per-thread free list of value-sized blocks ---------------------------
namespace {

struct FreeBlock {
  FreeBlock* next;
};

struct ValuePool {
  static constexpr size_t kMaxCached = 1 << 14;
  FreeBlock* head = nullptr;
  size_t cached = 0;
  ~ValuePool() {
    while (head) {
      FreeBlock* b = head;
      head = b->next;
      ::operator delete(b);
    }
  }
};

// initial-exec: no __tls_get_addr call per recorded op (libkiln is linked, not dlopen'ed
// late; glibc keeps static TLS room for such small variables either way).
[[gnu::tls_model("initial-exec")]] thread_local ValuePool pool;

}  // namespace

void* LazyValue::operator new(size_t size) {
  KILN_ASSERT(size == sizeof(LazyValue), "pool serves LazyValue only");
  if (FreeBlock* b = pool.head) {
    pool.head = b->next;
    --pool.cached;
    return b;
  }
  return ::operator new(size);
}

void LazyValue::operator delete(void* p, size_t) {
  // A block freed on another thread joins that thread's list: blocks are interchangeable.
  if (pool.cached >= ValuePool::kMaxCached) {
    ::operator delete(p);
    return;
  }
  auto* b = static_cast<FreeBlock*>(p);
  b->next = pool.head;
  pool.head = b;
  ++pool.cached;
}

// ---- the per-thread list of pending values --------------------------------------------
struct PendingList {
  LazyValue* head = nullptr;
  LazyValue* tail = nullptr;
  size_t size = 0;

  void push(LazyValue* v) {
    ++size;
    v->list = this;
    v->prev = tail;
    v->next = nullptr;
    (tail ? tail->next : head) = v;
    tail = v;
  }
  void remove(LazyValue* v) {
    --size;
    (v->prev ? v->prev->next : head) = v->next;
    (v->next ? v->next->prev : tail) = v->prev;
    v->list = nullptr;
    v->prev = v->next = nullptr;
  }
};

namespace {
[[gnu::tls_model("initial-exec")]] thread_local PendingList pending_list;

// release()'s work list (at namespace scope: ~ScalarCache needs it, see thread_scalar_cache).
[[gnu::tls_model("initial-exec")]] thread_local std::vector<LazyValue*> release_work;

uint64_t hash_type(const TensorType& t) {
  uint64_t h = hash_mix(static_cast<uint64_t>(t.dtype), static_cast<uint64_t>(t.shape.rank()));
  for (int64_t d : t.shape.dims()) h = hash_mix(h, static_cast<uint64_t>(d));
  return h;
}

void link_pending(LazyValue* v) {
  pending_list.push(v);
  counters().live_values.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

LazyValue* make_pending(OpKind op, const TensorType& type, Device device,
                        std::span<LazyValue* const> operands, Attrs attrs) {
  auto* v = new LazyValue;
  v->op = op;
  v->type = type;
  v->device = device;
  v->num_operands = static_cast<uint32_t>(operands.size());
  uint64_t h = hash_mix(static_cast<uint64_t>(op) + 1, hash_type(type));
  for (size_t i = 0; i < operands.size(); ++i) {
    LazyValue* o = operands[i];
    retain(o);
    if (i < 3) v->inline_operands[i] = o;
    else v->extra_operands.push_back(o);
    h = hash_mix(h, o->pending() ? o->hash : hash_type(o->type));
  }
  if (attrs.size()) h = hash_attrs(h, attrs);
  v->attrs = std::move(attrs);
  v->hash = h;
  link_pending(v);
  counters().ops_recorded.fetch_add(1, std::memory_order_relaxed);
  return v;
}

ScalarCache::~ScalarCache() {
  for (const Entry& e : entries) release(e.v);
}

ScalarCache& thread_scalar_cache() {
  // Thread-locals are destroyed in the reverse order of their construction, and
  // ~ScalarCache releases values: what release() uses must be constructed first.
  release_work.reserve(1);
  pool.cached += 0;
  pending_list.size += 0;
  [[gnu::tls_model("initial-exec")]] static thread_local ScalarCache cache;
  return cache;
}

void clear_thread_scalar_cache() {
  ScalarCache& cache = thread_scalar_cache();
  std::vector<ScalarCache::Entry> entries;
  entries.swap(cache.entries);
  for (const ScalarCache::Entry& e : entries) release(e.v);
}

LazyValue* make_evaluated(BufferRef buffer, Device device) {
  auto* v = new LazyValue;
  v->type = buffer->type();
  v->device = device;
  v->hash = hash_type(v->type);
  counters().live_values.fetch_add(1, std::memory_order_relaxed);
  counters().live_buffer_bytes.fetch_add(static_cast<int64_t>(buffer->type().bytes()), std::memory_order_relaxed);
  v->buffer = std::move(buffer);
  return v;
}

LazyValue* make_trace_input(const TensorType& type, Device device) {
  auto* v = new LazyValue;
  v->type = type;
  v->device = device;
  v->trace_input = true;
  v->hash = hash_type(type);
  counters().live_values.fetch_add(1, std::memory_order_relaxed);
  return v;
}

void retain(LazyValue* v) { v->refs.fetch_add(1, std::memory_order_relaxed); }

namespace {
// Drops the recipe's references into `work` instead of recursing: a long chain of pending
// values must not overflow the stack when its last tensor goes away.
void drop_recipe(LazyValue* v, std::vector<LazyValue*>& work) {
  for (size_t i = 0; i < v->num_operands; ++i) work.push_back(v->operand(i));
  v->inline_operands.fill(nullptr);
  v->extra_operands.clear();
  v->num_operands = 0;
  v->attrs = Attrs();
}
}  // namespace

void release(LazyValue* v) {
  std::vector<LazyValue*>& work = release_work;
  const size_t base = work.size();  // release may re-enter through a buffer's destructor
  work.push_back(v);
  while (work.size() > base) {
    LazyValue* cur = work.back();
    work.pop_back();
    if (cur->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
    if (cur->list) cur->list->remove(cur);
    drop_recipe(cur, work);
    if (cur->buffer)
      counters().live_buffer_bytes.fetch_sub(static_cast<int64_t>(cur->buffer->type().bytes()), std::memory_order_relaxed);
    counters().live_values.fetch_sub(1, std::memory_order_relaxed);
    delete cur;
  }
}

void set_result(LazyValue* v, BufferRef buffer) {
  KILN_ASSERT(v->pending(), "a value is evaluated once");
  KILN_ASSERT(buffer->type() == v->type, "engine returned the declared type");
  if (v->list) v->list->remove(v);
  counters().live_buffer_bytes.fetch_add(static_cast<int64_t>(buffer->type().bytes()), std::memory_order_relaxed);
  v->buffer = std::move(buffer);
  std::vector<LazyValue*> operands;
  drop_recipe(v, operands);
  for (LazyValue* o : operands) release(o);
}

size_t thread_pending_count() { return pending_list.size; }

namespace {
[[gnu::tls_model("initial-exec")]] thread_local bool tracing = false;
}  // namespace
bool thread_is_tracing() { return tracing; }
void set_thread_tracing(bool on) { tracing = on; }

std::vector<LazyValue*> thread_pending_values() {
  std::vector<LazyValue*> out;
  for (LazyValue* v = pending_list.head; v; v = v->next) out.push_back(v);
  return out;
}

}  // namespace kiln::detail
