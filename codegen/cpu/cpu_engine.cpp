// codegen/cpu/cpu_engine.cpp - the `cpu` device: plan cache, compilation, execution.
//
// A graph reaching run() is looked up by a hash of its canonical form (and donation flags);
// on a hit the stored canonical form is compared, and the executable runs with no pass and no codegen.
// On a miss: -O2 (fold, simplify, CSE, DCE, fuse), memory plan, lowering to Kernel IR, and
// one compiled function per kernel from the JIT's caches. Kernels are split across cores
// with oneTBB; GEMM steps run Eigen on row blocks.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include <Eigen/Core>
#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include "cpu_jit.h"
#include "kiln/codegen/cpu.h"
#include "kiln/ir/hash.h"
#include "kiln/ir/text.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/runtime/allocator.h"
#include "kiln/runtime/stats.h"
#include "kiln/support/hash.h"
#include "kiln/support/log.h"

namespace kiln {
namespace {

// A compact exact serialization of what a graph computes, compared on plan-cache hits so
// that a hash collision can never run the wrong executable.
std::string canonical_form(const Graph& g, const std::vector<bool>& donated) {
  std::string s;
  s.reserve(g.size() * 48);
  auto put = [&](uint64_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(g.size());
  for (const Node& n : g.nodes()) {
    put(static_cast<uint64_t>(n.op) | static_cast<uint64_t>(n.type.dtype) << 8 |
        static_cast<uint64_t>(n.type.shape.rank()) << 16 | static_cast<uint64_t>(n.operands.size()) << 24);
    for (int d = 0; d < n.type.shape.rank(); ++d) put(static_cast<uint64_t>(n.type.shape[d]));
    for (ValueId o : n.operands) put(o);
    for (size_t i = 0; i < n.attrs.size(); ++i) {
      const AttrValue& a = n.attrs[i];
      if (!a.present) continue;
      put(i | uint64_t{1} << 63);
      put(static_cast<uint64_t>(a.i));
      for (int64_t v : a.ints) put(static_cast<uint64_t>(v));
      put(a.scalar.is_int() ? static_cast<uint64_t>(a.scalar.as_int()) : std::bit_cast<uint64_t>(a.scalar.as_double()));
      if (a.scalars)
        for (const Scalar& x : *a.scalars) put(x.is_int() ? static_cast<uint64_t>(x.as_int()) : std::bit_cast<uint64_t>(x.as_double()));
    }
  }
  for (ValueId v : g.outputs()) put(v);
  for (bool d : donated) s.push_back(d ? '1' : '0');
  return s;
}

struct Dumper {
  std::vector<std::string> stages;
  std::filesystem::path dir;

  static const Dumper& get() {
    static const Dumper d = [] {
      Dumper out;
      if (const char* env = std::getenv("KILN_DUMP")) {
        std::string_view list(env);
        while (!list.empty()) {
          const size_t comma = list.find(',');
          out.stages.emplace_back(list.substr(0, comma));
          if (comma == std::string_view::npos) break;
          list.remove_prefix(comma + 1);
        }
      }
      const char* dir = std::getenv("KILN_DUMP_DIR");
      out.dir = dir && *dir ? dir : "kiln-dump";
      return out;
    }();
    return d;
  }
  bool wants(std::string_view stage) const {
    return std::find(stages.begin(), stages.end(), stage) != stages.end() ||
           std::find(stages.begin(), stages.end(), "all") != stages.end();
  }
  void write(const std::string& file, const std::string& text) const {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::ofstream out(dir / file, std::ios::binary);
    out << text;
    if (!out) warn_once("dump:" + dir.string(), fmt::format("KILN_DUMP: cannot write to {}", dir.string()));
  }
};

struct Executable {
  std::string canonical;
  LaunchPlan plan;
  std::vector<cpu::KernelFn> fns;  // per kernel
  std::vector<kir::Schedule> schedules;
};

// Element offsets of batch `batch`'s A and B matrices (broadcast batch dims have stride 0).
std::pair<int64_t, int64_t> batch_offsets(const LaunchPlan::Gemm& g, int64_t batch) {
  int64_t aoff = 0, boff = 0, rem = batch;
  for (int j = g.batch.rank() - 1; j >= 0; --j) {
    const int64_t idx = rem % g.batch[j];
    rem /= g.batch[j];
    aoff += idx * g.a_batch_stride[static_cast<size_t>(j)];
    boff += idx * g.b_batch_stride[static_cast<size_t>(j)];
  }
  return {aoff, boff};
}

template <class T>
void gemm_rows(const LaunchPlan::Gemm& g, const std::byte* a, const std::byte* b, std::byte* c, int64_t batch,
               int64_t row0, int64_t row1) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const auto [aoff, boff] = batch_offsets(g, batch);
  const T* am = reinterpret_cast<const T*>(a) + aoff;
  const T* bm = reinterpret_cast<const T*>(b) + boff;
  T* cm = reinterpret_cast<T*>(c) + batch * g.m * g.n;
  Eigen::Map<const Mat> A(am + row0 * g.k, row1 - row0, g.k);
  Eigen::Map<const Mat> B(bm, g.k, g.n);
  Eigen::Map<Mat> C(cm + row0 * g.n, row1 - row0, g.n);
  C.noalias() = A * B;
}

// Integers wrap (the interpreter's semantics): multiply and add as unsigned 64-bit, then
// truncate. Eigen's signed arithmetic would overflow, which C++ leaves undefined.
template <class T>
void gemm_rows_int(const LaunchPlan::Gemm& g, const std::byte* a, const std::byte* b, std::byte* c, int64_t batch,
                   int64_t row0, int64_t row1) {
  const auto [aoff, boff] = batch_offsets(g, batch);
  const T* am = reinterpret_cast<const T*>(a) + aoff;
  const T* bm = reinterpret_cast<const T*>(b) + boff;
  T* cm = reinterpret_cast<T*>(c) + batch * g.m * g.n;
  for (int64_t i = row0; i < row1; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      uint64_t acc = 0;
      for (int64_t p = 0; p < g.k; ++p)
        acc += static_cast<uint64_t>(static_cast<int64_t>(am[i * g.k + p])) *
               static_cast<uint64_t>(static_cast<int64_t>(bm[p * g.n + j]));
      cm[i * g.n + j] = static_cast<T>(acc);
    }
}

void run_gemm(const LaunchPlan::Gemm& g, const std::vector<std::byte*>& ptrs) {
  const int64_t batches = g.batch.numel();
  const int64_t block = std::max<int64_t>(16, 65536 / std::max<int64_t>(1, g.n * g.k / 64));
  const int64_t blocks = (g.m + block - 1) / block;
  auto one = [&](int64_t i) {
    const int64_t bi = i / blocks, r0 = (i % blocks) * block, r1 = std::min(g.m, r0 + block);
    const std::byte *a = ptrs[static_cast<size_t>(g.a)], *b = ptrs[static_cast<size_t>(g.b)];
    std::byte* c = ptrs[static_cast<size_t>(g.c)];
    switch (g.dtype) {
      case DType::F32: return gemm_rows<float>(g, a, b, c, bi, r0, r1);
      case DType::F64: return gemm_rows<double>(g, a, b, c, bi, r0, r1);
      case DType::I32: return gemm_rows_int<int32_t>(g, a, b, c, bi, r0, r1);
      case DType::I64: return gemm_rows_int<int64_t>(g, a, b, c, bi, r0, r1);
      case DType::Bool: throw Error("matmul of bool tensors is not supported on the cpu device");
    }
  };
  const int64_t n = batches * blocks;
  if (g.m * g.n * g.k < (1 << 18)) {
    for (int64_t i = 0; i < n; ++i) one(i);
    return;
  }
  tbb::parallel_for(int64_t{0}, n, [&](int64_t i) { one(i); });
}

// Generated code has no UBSan function-type prologue, which -fsanitize=function (part of
// clang's -fsanitize=undefined) reads in front of every function called through a pointer.
#if defined(__clang__)
__attribute__((no_sanitize("function")))
#endif
void call_kernel(cpu::KernelFn fn, void* const* args, int64_t begin, int64_t end) {
  fn(args, begin, end);
}

class CpuEngine final : public Engine {
 public:
  const char* name() const override { return "cpu"; }

  std::vector<BufferRef> run(const Graph& g, std::span<const BufferRef> inputs, const std::vector<bool>& donated) override {
    if (inputs.size() != g.inputs().size())
      throw Error(fmt::format("graph @{} takes {} inputs, got {}", g.name(), g.inputs().size(), inputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!(inputs[i]->type() == g.type(g.inputs()[i])))
        throw Error(fmt::format("input %{} of graph @{} expects {}, got {}", g.node(g.inputs()[i]).name, g.name(),
                                g.type(g.inputs()[i]).str(), inputs[i]->type().str()));
    std::vector<bool> donate(inputs.size(), false);
    for (size_t i = 0; i < donate.size() && i < donated.size(); ++i) donate[i] = donated[i];
    std::shared_ptr<const Executable> exe = lookup_or_compile(g, donate);
    runtime_counters().executions++;
    return execute(*exe, inputs);
  }

  size_t size() {
    std::lock_guard lock(mutex_);
    return plans_.size();
  }
  void clear() {
    std::lock_guard lock(mutex_);
    plans_.clear();
  }

 private:
  std::shared_ptr<const Executable> lookup_or_compile(const Graph& g, const std::vector<bool>& donated) {
    // Keyed by the exact canonical form, not the order-independent structural hash: a
    // recorded stream repeats in the same order, and this costs a fraction as much. A
    // reordered but equal graph misses here and then hits the kernel caches.
    std::string canonical = canonical_form(g, donated);
    const Hash128 h = hash_text(canonical);
    {
      std::lock_guard lock(mutex_);
      if (auto it = plans_.find(h.hex()); it != plans_.end() && it->second->canonical == canonical) {
        runtime_counters().plan_hits++;
        return it->second;
      }
    }
    runtime_counters().plan_misses++;
    auto exe = std::make_shared<Executable>();
    exe->canonical = std::move(canonical);
    const Dumper& dump = Dumper::get();
    const std::string stem = h.hex().substr(0, 16);
    if (dump.wants("graph")) dump.write(stem + ".graph.kir", print_graph(g));
    CpuCompilation c = cpu_compile_graph(g, donated);
    if (dump.wants("fused")) dump.write(stem + ".fused.kir", print_graph(c.fused));
    if (dump.wants("kernel")) dump.write(stem + ".kernel.txt", c.plan.str());
    exe->plan = std::move(c.plan);
    for (const kir::Kernel& k : exe->plan.kernels) {
      exe->fns.push_back(cpu::Jit::instance().kernel(k));
      exe->schedules.push_back(kir::schedule_kernel(k));
      if (dump.wants("llvm")) dump.write(fmt::format("{}.{}.ll", stem, k.name), cpu::Jit::instance().llvm_ir(k, true));
    }
    for (int32_t p : exe->plan.overwritten_params)
      KILN_ASSERT(static_cast<size_t>(p) < donated.size() && donated[static_cast<size_t>(p)],
                  "the memory plan overwrites a parameter that was not donated");
    std::lock_guard lock(mutex_);
    plans_[h.hex()] = exe;
    return exe;
  }

  std::vector<BufferRef> execute(const Executable& exe, std::span<const BufferRef> inputs) {
    const LaunchPlan& plan = exe.plan;
    std::vector<std::byte*> ptrs(plan.buffers.size(), nullptr);
    std::vector<HostBuffer> temps;
    std::vector<std::shared_ptr<HostTensor>> outs(plan.buffers.size());
    for (size_t b = 0; b < plan.buffers.size(); ++b) {
      const LaunchPlan::Buffer& buf = plan.buffers[b];
      switch (buf.kind) {
        case LaunchPlan::Buffer::Kind::Param:
          ptrs[b] = const_cast<std::byte*>(inputs[static_cast<size_t>(buf.index)]->data());
          break;
        case LaunchPlan::Buffer::Kind::Constant: ptrs[b] = const_cast<std::byte*>(buf.data.data()); break;
        case LaunchPlan::Buffer::Kind::Temp:
          temps.emplace_back(static_cast<size_t>(buf.bytes));
          ptrs[b] = temps.back().data();
          break;
        case LaunchPlan::Buffer::Kind::Output:
          outs[b] = std::make_shared<HostTensor>(HostTensor::uninitialized(buf.type));
          ptrs[b] = outs[b]->data();
          break;
      }
    }
    std::vector<void*> args;
    for (const LaunchPlan::Step& step : plan.steps) {
      runtime_counters().launches++;
      if (step.kernel < 0) {
        run_gemm(step.gemm, ptrs);
        continue;
      }
      args.assign(step.bindings.size(), nullptr);
      for (size_t i = 0; i < args.size(); ++i) args[i] = ptrs[static_cast<size_t>(step.bindings[i])];
      const cpu::KernelFn fn = exe.fns[static_cast<size_t>(step.kernel)];
      const kir::Schedule& s = exe.schedules[static_cast<size_t>(step.kernel)];
      const int64_t work = s.iterations * std::max<int64_t>(1, s.elements_per_iteration);
      if (work < (1 << 15) || s.iterations < 2) {
        call_kernel(fn, args.data(), 0, s.iterations);
        continue;
      }
      // Grains of at least ~16K elements: enough to hide the scheduler, many per core.
      const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, s.elements_per_iteration));
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, s.iterations, static_cast<size_t>(grain)),
                        [&](const tbb::blocked_range<int64_t>& r) { call_kernel(fn, args.data(), r.begin(), r.end()); });
    }
    std::vector<BufferRef> results;
    for (size_t i = 0; i < plan.outputs.size(); ++i) {
      const auto b = static_cast<size_t>(plan.outputs[i]);
      const LaunchPlan::Buffer& buf = plan.buffers[b];
      if (buf.kind == LaunchPlan::Buffer::Kind::Output) {
        results.push_back(outs[b]);
        continue;
      }
      // A parameter's buffer, returned as is or written in place (donated).
      const BufferRef& in = inputs[static_cast<size_t>(buf.index)];
      const TensorType& want = plan.output_types[i];
      if (in->type() == want) {
        results.push_back(in);
      } else {  // a reused donated buffer holding a value of another type (same bytes)
        auto t = std::make_shared<HostTensor>(HostTensor::uninitialized(want));
        std::memcpy(t->data(), in->data(), t->nbytes());
        results.push_back(std::move(t));
      }
    }
    return results;
  }

  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const Executable>> plans_;
};

CpuEngine& engine() {
  static CpuEngine* e = new CpuEngine();
  return *e;
}

}  // namespace

Engine& cpu_engine() { return engine(); }
size_t cpu_plan_cache_size() { return engine().size(); }
void cpu_plan_cache_clear() { engine().clear(); }

CpuCompilation cpu_compile_graph(const Graph& g, const std::vector<bool>& donated) {
  PipelineOptions po;
  po.verify_each = false;
  // -O2 with the reductions to few values split into blocks, so that they run on every core.
  std::vector<const PassInfo*> passes = pipeline_for_level(1);
  passes.push_back(find_pass("split-reductions"));
  passes.push_back(find_pass("fuse"));
  Expected<Graph> fused = run_pipeline(g, passes, PassOptions{}, po);
  if (!fused) throw Error(fused.error().str());
  MemoryPlan memory = plan_memory(*fused, donated);
  LaunchPlan plan = lower_to_kernels(*fused, memory);
  return {std::move(*fused), std::move(plan)};
}

std::string cpu_kernel_llvm_ir(const kir::Kernel& k, bool optimized) { return cpu::Jit::instance().llvm_ir(k, optimized); }
std::string cpu_kernel_assembly(const kir::Kernel& k) { return cpu::Jit::instance().assembly(k); }
std::string cpu_target_description() { return cpu::Jit::instance().target().describe(); }

}  // namespace kiln
