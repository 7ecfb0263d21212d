// engine/kernel_engine.cpp - plan cache, compilation and execution for every backend.
//
// A graph reaching run() is looked up by a hash of its canonical form (kiln/ir/canonical.h:
// without the values of launch-bound scalars) and its donation flags; on a hit the stored
// canonical form is compared, and the executable runs with no pass and no codegen, its
// scalar arguments taken from this graph. On a miss: the target's pipeline (-O2, the
// backend's extra passes, fusion), the memory plan, lowering to Kernel IR, a schedule per
// kernel from the backend's capabilities, and one compiled kernel each from the backend.
#include "kernel_engine.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <mutex>
#include <numeric>

#include <fmt/format.h>

#include "dump.h"
#include "profile_peak.h"
#include "row_classes.h"
#include "kiln/autotune/autotuner.h"
#include "kiln/backends/host_memory.h"
#include "kiln/codegen/c_source.h"
#include "kiln/codegen/variants.h"
#include "kiln/engine/compile.h"
#include "kiln/ir/interpreter.h"
#include "kiln/ir/canonical.h"
#include "kiln/ir/symbolic.h"
#include "kiln/ir/text.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/runtime/profile.h"
#include "kiln/runtime/stats.h"
#include "kiln/support/env.h"
#include "kiln/support/log.h"
#include "kiln/support/lru_cache.h"

namespace kiln::engine {
namespace {

// "cpu: llvm; opencl: opencl; vulkan: glsl, spirv", from the registry's rows.
std::string dump_stages_of_every_kind() {
  std::string out;
  for (const DeviceKindInfo& kind : device_kinds()) {
    if (kind.dump_stages.empty()) continue;
    out += fmt::format("{}{}:", out.empty() ? "" : "; ", kind.name);
    for (size_t i = 0; i < kind.dump_stages.size(); ++i) out += fmt::format("{} {}", i ? "," : "", kind.dump_stages[i].name);
  }
  return out;
}

struct Executable {
  std::string canonical;
  /// The long literals `canonical` holds digests of (CanonicalWriter::literals), weakly.
  std::vector<std::weak_ptr<const std::vector<Scalar>>> literals;
  std::string label;  // "@name hash": the graph, as the profiler and dumps name it
  LaunchPlan plan;
  std::vector<std::shared_ptr<const CompiledKernel>> kernels;  // per plan kernel
  std::vector<std::shared_ptr<DeviceMemory>> constants;        // per plan buffer (Constant kind)
  /// Per step: a GEMM's epilogue iterations per row when the next step may run on its
  /// blocks of rows (gemm_epilogue_iterations_per_row), else 0.
  std::vector<int64_t> epilogue_per_row;
  /// Per step: gemm_epilogue_columns_per_iteration.
  std::vector<int64_t> epilogue_columns;
  /// Per step: whether a GEMM's product is read after its epilogue.
  std::vector<bool> product_read_later;
  /// Per step: the epilogue's parameter that reads a GEMM's product (-1: none).
  std::vector<int32_t> product_param;
  /// Per plan kernel: its number of rows, passed at launch where the kernel was compiled
  /// for every number (RowClasses), else -1.
  std::vector<int64_t> launch_rows;
};

// What the profiler says of step `s` (and of the epilogue after it, when `fused`): the kernel
// region, the values it writes, the bytes its buffers hold (each read or written once) and
// its FLOPs (a GEMM's 2mnk; a kernel's float arithmetic per point times its points, a
// horizontal kernel's part by part). An op that does not vary along the reduced dims (a
// convolution's bias and activation, after its sum) runs once per kept point, not once per
// point of the domain (a depthwise 5x5 over 14x14 with bias and relu, 240 channels, was
// counted 4.7 MFLOP for its 2.4).
profile::Launch describe_step(const LaunchPlan& plan, size_t s, bool fused) {
  profile::Launch l;
  auto kernel_facts = [&](const kir::Kernel& k) {
    // Float arithmetic: not a `where`, which picks a value (a padded window's mask).
    auto is_arithmetic = [](const kir::Inst& in) {
      return (in.code == kir::Code::Reduce || (in.code == kir::Code::Op && in.op != OpKind::Where)) && is_float(in.type);
    };
    auto arithmetic = [&](size_t from, size_t to) {
      return std::count_if(k.insts.begin() + static_cast<ptrdiff_t>(from), k.insts.begin() + static_cast<ptrdiff_t>(to),
                           is_arithmetic);
    };
    if (k.parts.empty()) {
      int64_t kept = 1;
      for (int d = 0; d < k.domain.rank(); ++d)
        if (!k.reduced[static_cast<size_t>(d)]) kept *= k.domain[d];
      std::vector<bool> varies(k.insts.size(), false);  // along a reduced dim
      for (size_t i = 0; i < k.insts.size(); ++i) {
        const kir::Inst& in = k.insts[i];
        if (in.code == kir::Code::Dim) varies[i] = k.reduced[static_cast<size_t>(in.imm)];
        else if (in.code != kir::Code::Reduce)
          varies[i] = std::any_of(in.args.begin(), in.args.end(), [&](kir::Ref a) { return varies[static_cast<size_t>(a)]; });
        if (is_arithmetic(in)) l.flops += in.code == kir::Code::Reduce || varies[i] ? k.domain.numel() : kept;
      }
    }
    for (size_t p = 0; p < k.parts.size(); ++p) {
      const size_t end = p + 1 < k.parts.size() ? static_cast<size_t>(k.parts[p + 1].first) : k.insts.size();
      l.flops += arithmetic(static_cast<size_t>(k.parts[p].first), end) * k.parts[p].points;
    }
    for (const kir::BufferParam& b : k.buffers) {
      l.bytes += b.type.bytes();
      if (b.written) l.values += (l.values.empty() ? "%" : ", %") + b.name;
    }
  };
  const LaunchPlan::Step& step = plan.steps[s];
  if (step.kernel >= 0) {
    const kir::Kernel& k = plan.kernels[static_cast<size_t>(step.kernel)];
    l.kind = "kernel";
    l.kernel = k.name;
    kernel_facts(k);
    return l;
  }
  if (step.attention) {
    const LaunchPlan::Attention& a = *step.attention;
    const int64_t batches = a.batch.numel();
    l.kind = "attention";
    l.kernel = a.name;
    l.values = "attention";
    l.bytes = 4 * (a.q.extent(a.batch, a.rows, a.depth) + a.k.extent(a.batch, a.keys, a.depth) +
                   a.v.extent(a.batch, a.keys, a.width) + a.bias.extent(a.batch, a.rows, a.keys) +
                   batches * a.rows * a.width);
    // Two products, and the softmax's few operations per score.
    l.flops = batches * a.rows * a.keys * (2 * a.depth + 2 * a.width + 5);
    return l;
  }
  const LaunchPlan::Gemm& g = step.gemm;
  const int64_t es = static_cast<int64_t>(dtype_size(g.dtype)), batches = g.batch.numel();
  l.kind = "gemm";
  l.kernel = g.name;
  if (fused) {
    const kir::Kernel& e = plan.kernels[static_cast<size_t>(plan.steps[s + 1].kernel)];
    l.kernel += " + " + e.name;
    kernel_facts(e);
  } else {
    l.bytes += batches * g.m * g.n * es;
    // The product of a region whose epilogue runs after it: named by what that writes.
    const bool epilogue_next = s + 1 < plan.steps.size() && plan.steps[s + 1].kernel >= 0 &&
                               plan.kernels[static_cast<size_t>(plan.steps[s + 1].kernel)].name == g.name;
    l.values = "product";
    if (epilogue_next)
      for (const kir::BufferParam& b : plan.kernels[static_cast<size_t>(plan.steps[s + 1].kernel)].buffers)
        if (b.written) l.values += (l.values == "product" ? " for %" : ", %") + b.name;
  }
  l.bytes += (g.a_extent() + g.b_extent()) * es;
  l.flops += 2 * batches * g.m * g.n * g.k;
  return l;
}

struct Prepared final : PreparedGraph {
  std::shared_ptr<const Executable> exe;
  std::vector<TensorType> input_types;
  std::vector<bool> donated;
};

// `g` with its symbolic dims bound to the sizes of `inputs` (kiln/ir/symbolic.h): engines run
// bound graphs, one plan per set of sizes.
Graph bound_to(const Graph& g, std::span<const BufferRef> inputs) {
  std::vector<TensorType> types;
  for (const BufferRef& b : inputs) types.push_back(b->type());
  Expected<Graph> bound = specialize_for(g, types);
  if (!bound) throw Error(bound.error().str());
  return std::move(*bound);
}

// Set while the profiler measures a device's peak: those runs are not recorded.
thread_local bool measuring_peak = false;

struct Hash128Hasher {
  size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.lo ^ (h.hi * 0x9e3779b97f4a7c15ULL)); }
};

size_t plan_capacity_from_env() {
  return static_cast<size_t>(env_int("KILN_PLAN_CACHE_SIZE", 1, int64_t{1} << 30).value_or(1024));
}

class KernelEngine final : public Engine {
 public:
  KernelEngine(Device device, Backend& backend) : device_(device), backend_(backend), plans_(plan_capacity_from_env()) {}

  Device device() const override { return device_; }
  Backend* backend() override { return &backend_; }
  void finish() override { backend_.finish(); }

  std::vector<BufferRef> run(const Graph& g, std::span<const BufferRef> inputs, const std::vector<bool>& donated) override {
    if (inputs.size() == g.inputs().size() && has_symbolic_dims(g)) return run(bound_to(g, inputs), inputs, donated);
    if (inputs.size() != g.inputs().size())
      throw Error(fmt::format("graph @{} takes {} inputs, got {}", g.name(), g.inputs().size(), inputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!(inputs[i]->type() == g.type(g.inputs()[i])))
        throw Error(fmt::format("input %{} of graph @{} expects {}, got {}", g.node(g.inputs()[i]).name, g.name(),
                                g.type(g.inputs()[i]).str(), inputs[i]->type().str()));
      if (!(inputs[i]->device() == device_))
        throw Error(fmt::format("input %{} of graph @{} is on device {}, not {}", g.node(g.inputs()[i]).name, g.name(),
                                inputs[i]->device().str(), device_.str()));
    }
    std::vector<bool> donate(inputs.size(), false);
    for (size_t i = 0; i < donate.size() && i < donated.size(); ++i)
      donate[i] = donated[i] && !inputs[i]->memory().borrowed();  // a caller's tensor is only read
    std::shared_ptr<const Executable> exe = lookup_or_compile(g, donate);
    runtime_counters().executions++;
    return execute(*exe, inputs, launch_scalars(g));
  }

  std::shared_ptr<const PreparedGraph> prepare(const Graph& g, const std::vector<bool>& donated) override {
    if (has_symbolic_dims(g))
      throw Error(fmt::format("prepare: graph @{} has symbolic dims: bind them to sizes first (specialize)", g.name()));
    auto p = std::make_shared<Prepared>();
    p->exe = lookup_or_compile(g, donated);
    for (ValueId in : g.inputs()) p->input_types.push_back(g.type(in));
    p->donated = donated;
    return p;
  }

  std::vector<BufferRef> run_prepared(const PreparedGraph& prepared, std::span<const BufferRef> inputs,
                                      std::span<const Scalar> scalars) override {
    const auto* p = dynamic_cast<const Prepared*>(&prepared);
    if (!p) throw Error(fmt::format("run_prepared: the graph was prepared by another engine than {}'s", device_.str()));
    // The caller's checks, asserted: a replay with a wrong buffer would read out of bounds.
    KILN_ASSERT(inputs.size() == p->input_types.size(), "a prepared graph gets one buffer per parameter");
    for (size_t i = 0; i < inputs.size(); ++i) {
      KILN_ASSERT(inputs[i]->type() == p->input_types[i] && inputs[i]->device() == device_,
                  "a prepared graph's inputs are of its parameters' types, on its device");
      KILN_ASSERT(!p->donated[i] || !inputs[i]->memory().borrowed(), "a borrowed buffer is never donated");
    }
    runtime_counters().executions++;
    return execute(*p->exe, inputs, scalars);
  }

  BufferRef upload(HostTensor host) override {
    TensorType type = host.type();
    HostBuffer bytes = std::move(host).release();
    std::shared_ptr<DeviceMemory> memory = backend_.adopt(bytes);
    if (!memory) {  // device memory: a copy
      memory = alloc_for(type, type.bytes());
      backend_.upload(*memory, bytes.data(), type.bytes());
    }
    return std::make_shared<const Buffer>(device_, std::move(type), std::move(memory));
  }

  BufferRef upload_shared(std::shared_ptr<const HostTensor> host) override {
    TensorType type = host->type();
    if (std::shared_ptr<DeviceMemory> memory = backend_.borrow(host))
      return std::make_shared<const Buffer>(device_, std::move(type), std::move(memory));
    return upload(HostTensor(*host));
  }

  HostTensor download(const Buffer& b) override {
    HostTensor t = HostTensor::uninitialized(b.type());
    backend_.download(b.memory(), t.data(), static_cast<int64_t>(t.nbytes()));
    return t;
  }

  size_t plan_count() {
    std::lock_guard lock(mutex_);
    return plans_.size();
  }
  size_t plan_capacity() {
    std::lock_guard lock(mutex_);
    return plans_.capacity();
  }
  void clear() {
    std::vector<std::shared_ptr<const Executable>> dropped;  // destroyed after unlocking
    std::lock_guard lock(mutex_);
    dropped = plans_.take_all();
  }

 private:
  std::shared_ptr<const Executable> lookup_or_compile(const Graph& g, const std::vector<bool>& donated) {
    // Keyed by the exact canonical form, not the order-independent structural hash: a
    // recorded stream repeats in the same order, and this costs a fraction as much. A
    // reordered but equal graph misses here and then hits the kernel caches.
    CanonicalWriter w;
    write_canonical(w, g);
    w.u64(donated.size());
    for (bool d : donated) w.u64(d);
    const Hash128 h = w.hash();
    {
      std::lock_guard lock(mutex_);
      if (std::shared_ptr<const Executable>* hit = plans_.find(h);
          hit && (*hit)->canonical == w.str() && literals_match((*hit)->literals, w.literals())) {
        runtime_counters().plan_hits++;
        return *hit;
      }
    }
    runtime_counters().plan_misses++;
    auto exe = std::make_shared<Executable>();
    exe->literals.assign(w.literals().begin(), w.literals().end());
    exe->canonical = w.take();
    const Dumper& dump = Dumper::get();
    const std::string stem = h.hex().substr(0, 16);
    exe->label = fmt::format("@{} {}", g.name(), stem);
    if (dump.wants("graph")) dump.write(stem + ".graph.kir", print_graph(g));
    Compilation c = compile_graph(backend_, g, donated);
    if (dump.wants("fused")) dump.write(stem + ".fused.kir", print_graph(c.fused));
    if (dump.wants("kernel")) dump.write(stem + ".kernel.txt", c.plan.str());
    exe->plan = std::move(c.plan);
    for (size_t i = 0; i < exe->plan.steps.size(); ++i) {
      exe->epilogue_per_row.push_back(gemm_epilogue_iterations_per_row(exe->plan, i));
      exe->epilogue_columns.push_back(gemm_epilogue_columns_per_iteration(exe->plan, i));
      exe->product_read_later.push_back(exe->plan.steps[i].kernel >= 0 || exe->epilogue_per_row.back() == 0 ||
                                        gemm_product_read_after_epilogue(exe->plan, i));
      const std::optional<kir::GemmEpilogueSource> e =
          exe->plan.steps[i].is_gemm() ? kir::gemm_epilogue_source(exe->plan, i) : std::nullopt;
      exe->product_param.push_back(e ? e->product_param : -1);
    }
    const auto [compiled, compiled_schedules] = compile_kernels(*exe);
    const std::span<const DumpStage> own = device_kind(device_).dump_stages;
    for (const DumpStage& stage : own) {
      if (!dump.wants(stage.name)) continue;
      for (size_t i = 0; i < compiled.size(); ++i) {
        const kir::Kernel& k = compiled[i];
        const std::string text = backend_.toolchain().render(k, compiled_schedules[i], stage.name);
        if (!text.empty()) dump.write(fmt::format("{}.{}.{}", stem, k.name, stage.extension), text);
      }
    }
    // Asked for by name (not through `all`), a stage this device does not have is said so.
    for (const DeviceKindInfo& kind : device_kinds())
      for (const DumpStage& stage : kind.dump_stages) {
        const bool ours = std::any_of(own.begin(), own.end(), [&](const DumpStage& s) { return s.name == stage.name; });
        if (!ours && !exe->plan.kernels.empty() && dump.names(stage.name))
          warn_once(fmt::format("dump:{}:{}", device_.str(), stage.name),
                    fmt::format("KILN_DUMP: device {} has no '{}' stage ({})", device_.str(), stage.name,
                                dump_stages_of_every_kind()));
      }
    exe->constants.resize(exe->plan.buffers.size());
    for (size_t b = 0; b < exe->plan.buffers.size(); ++b) {
      const LaunchPlan::Buffer& buf = exe->plan.buffers[b];
      if (buf.kind != LaunchPlan::Buffer::Kind::Constant) continue;
      exe->constants[b] = backend_.alloc(static_cast<int64_t>(buf.data.size()));
      backend_.upload(*exe->constants[b], buf.data.data(), static_cast<int64_t>(buf.data.size()));
      exe->constants[b]->set_immutable();  // no step writes a constant
    }
    for (int32_t p : exe->plan.overwritten_params)
      KILN_ASSERT(static_cast<size_t>(p) < donated.size() && donated[static_cast<size_t>(p)],
                  "the memory plan overwrites a parameter that was not donated");
    // Evicted executables are destroyed after the lock is released: dropping the last
    // reference to a kernel unlinks it, which waits for the backend's compiler lock, and no
    // plan-cache hit on another thread should wait behind that.
    std::vector<std::shared_ptr<const Executable>> evicted;
    {
      std::lock_guard lock(mutex_);
      runtime_counters().plan_evictions += plans_.put(h, exe, &evicted);
    }
    return exe;
  }

  // The plan's kernels compiled, each for its sizes or for every number of rows
  // (RowClasses). A GEMM's epilogue too: the cpu runs it on the product's blocks as
  // iterations, and a device that computes it in the GEMM's registers reads its Kernel IR.
  // Returns what was compiled, which the dumps show.
  std::pair<std::vector<kir::Kernel>, std::vector<kir::Schedule>> compile_kernels(Executable& exe) {
    const LaunchPlan& plan = exe.plan;
    std::vector<kir::Kernel> kernels;
    std::vector<kir::Schedule> schedules;
    exe.launch_rows.assign(plan.kernels.size(), -1);
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      RowClasses::Choice c = row_classes_.choose(plan.kernels[k], plan.schedules[k], backend_.capabilities(), device_.str());
      kernels.push_back(std::move(c.kernel));
      schedules.push_back(std::move(c.schedule));
      exe.launch_rows[k] = c.rows;
    }
    exe.kernels = backend_.compile_all(kernels, schedules);
    return {std::move(kernels), std::move(schedules)};
  }

  std::vector<BufferRef> execute(const Executable& exe, std::span<const BufferRef> inputs,
                                 std::span<const Scalar> scalars) {
    const LaunchPlan& plan = exe.plan;
    std::vector<std::shared_ptr<DeviceMemory>> owned(plan.buffers.size());
    std::vector<DeviceMemory*> mem(plan.buffers.size(), nullptr);
    for (size_t b = 0; b < plan.buffers.size(); ++b) {
      const LaunchPlan::Buffer& buf = plan.buffers[b];
      switch (buf.kind) {
        case LaunchPlan::Buffer::Kind::Param: mem[b] = &inputs[static_cast<size_t>(buf.index)]->memory(); break;
        case LaunchPlan::Buffer::Kind::Constant: mem[b] = exe.constants[b].get(); break;
        case LaunchPlan::Buffer::Kind::Temp:
        case LaunchPlan::Buffer::Kind::Output:
          owned[b] = alloc_for(buf.type, buf.kind == LaunchPlan::Buffer::Kind::Output ? buf.type.bytes() : buf.bytes);
          mem[b] = owned[b].get();
          break;
      }
    }
    std::vector<DeviceMemory*> bound;
    std::vector<Scalar> args;
    auto bind = [&](const LaunchPlan::Step& step) {
      bound.assign(step.bindings.size(), nullptr);
      for (size_t i = 0; i < bound.size(); ++i) bound[i] = mem[static_cast<size_t>(step.bindings[i])];
      args.clear();
      for (int32_t slot : step.scalar_bindings) {
        KILN_ASSERT(static_cast<size_t>(slot) < scalars.size(), "a kernel's scalar slot is bound by the graph");
        args.push_back(scalars[static_cast<size_t>(slot)]);
      }
      args.insert(args.end(), step.fixed_scalars.begin(), step.fixed_scalars.end());
      if (const int64_t rows = exe.launch_rows[static_cast<size_t>(step.kernel)]; rows >= 0)
        args.push_back(Scalar::from_int(rows));
    };
    const bool profiling = profile::enabled() && !measuring_peak;
    if (profiling && !profile::peak(device_.str())) {
      // Measuring compiles two small graphs: where that fails (KILN_NO_COMPILE=1 on a cache
      // without them), the profile goes on without the device's peak rather than the run
      // failing for it.
      measuring_peak = true;
      profile::Peak peak;
      try {
        peak = device_peak(*this, backend_, backend_.device_fingerprint());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "kiln profile: the peak of %s is not measured: %s\n", device_.str().c_str(), e.what());
      }
      measuring_peak = false;
      profile::set_peak(device_.str(), peak);
    }
    int64_t started = 0;
    // Waits for step `s` (and the epilogue fused into it) and records it.
    auto profiled = [&](size_t s, bool fused) {
      if (!profiling) return;
      backend_.finish();
      profile::Launch l = describe_step(plan, s, fused);
      l.device = device_.str();
      l.graph = exe.label;
      l.start_ns = started;
      l.duration_ns = profile::now_ns() - started;
      profile::record(std::move(l));
    };
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const LaunchPlan::Step& step = plan.steps[s];
      runtime_counters().launches++;
      if (profiling) started = profile::now_ns();
      if (step.attention) {
        if (!backend_.attention(*step.attention, mem))
          throw Error(fmt::format("attention: device {} has no attention kernel (for @{})", device_.str(),
                                  step.attention->name));
        profiled(s, false);
        continue;
      }
      if (step.kernel < 0) {
        if (const int64_t per_row = exe.epilogue_per_row[s]; per_row > 0) {
          const LaunchPlan::Step& epilogue = plan.steps[s + 1];
          const auto k = static_cast<size_t>(epilogue.kernel);
          bind(epilogue);
          const Backend::GemmEpilogue fused{*exe.kernels[k], plan.schedules[k],         bound,
                                            args,            per_row,                   exe.epilogue_columns[s],
                                            &plan.kernels[k], exe.product_read_later[s], exe.product_param[s]};
          if (backend_.gemm_with_epilogue(step.gemm, mem, fused)) {
            profiled(s, true);
            ++s;  // the epilogue ran with the product
            continue;
          }
        }
        if (!backend_.gemm(step.gemm, mem))
          throw Error(fmt::format("matmul: device {} has no GEMM for {} [{}x{}x{}]", device_.str(),
                                  dtype_name(step.gemm.dtype), step.gemm.m, step.gemm.n, step.gemm.k));
        profiled(s, false);
        continue;
      }
      const auto k = static_cast<size_t>(step.kernel);
      bind(step);
      backend_.launch(*exe.kernels[k], plan.schedules[k], bound, args);
      profiled(s, false);
    }
    std::vector<BufferRef> results;
    for (size_t i = 0; i < plan.outputs.size(); ++i) {
      const auto b = static_cast<size_t>(plan.outputs[i]);
      const LaunchPlan::Buffer& buf = plan.buffers[b];
      if (buf.kind == LaunchPlan::Buffer::Kind::Output) {
        results.push_back(std::make_shared<const Buffer>(device_, plan.output_types[i], owned[b]));
        continue;
      }
      // A parameter's buffer, returned as is or written in place (donated).
      const BufferRef& in = inputs[static_cast<size_t>(buf.index)];
      const TensorType& want = plan.output_types[i];
      if (in->type() == want) {
        results.push_back(in);
      } else {  // a reused donated buffer holding a value of another type (same bytes)
        results.push_back(std::make_shared<const Buffer>(device_, want, shared_memory_of(in)));
      }
    }
    return results;
  }

  // Device memory for a value of type `t`; running out is a kiln::Error naming both.
  std::shared_ptr<DeviceMemory> alloc_for(const TensorType& t, int64_t bytes) {
    try {
      return backend_.alloc(bytes);
    } catch (const std::bad_alloc&) {
      throw Error(fmt::format("cannot allocate {} ({} bytes) on device {}: out of memory", t.str(), bytes, device_.str()));
    }
  }

  // The memory of `b`, shared with a new Buffer of another type over the same bytes.
  static std::shared_ptr<DeviceMemory> shared_memory_of(const BufferRef& b) {
    return std::shared_ptr<DeviceMemory>(b, &b->memory());
  }

  Device device_;
  Backend& backend_;
  std::mutex mutex_;
  LruCache<Hash128, std::shared_ptr<const Executable>, Hash128Hasher> plans_;
  RowClasses row_classes_;
};

// The reference interpreter as a device: host memory, no compilation, the oracle.
class InterpreterEngine final : public Engine {
 public:
  Device device() const override { return Device::interp(); }

  // The interpreter never writes over its inputs, donated or not.
  std::vector<BufferRef> run(const Graph& g, std::span<const BufferRef> inputs, const std::vector<bool>& d) override {
    if (inputs.size() == g.inputs().size() && has_symbolic_dims(g)) return run(bound_to(g, inputs), inputs, d);
    std::vector<HostTensor> host;
    host.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!(inputs[i]->device() == Device::interp()))
        throw Error(fmt::format("input {} of graph @{} is on device {}, not interp", i, g.name(), inputs[i]->device().str()));
      host.push_back(download(*inputs[i]));
    }
    std::vector<HostTensor> results = interpret(g, host);
    runtime_counters().executions++;
    std::vector<BufferRef> out;
    out.reserve(results.size());
    for (HostTensor& t : results) out.push_back(upload(std::move(t)));
    return out;
  }

  BufferRef upload(HostTensor host) override {
    TensorType type = host.type();
    return std::make_shared<const Buffer>(Device::interp(), std::move(type), std::make_shared<HostMemory>(std::move(host).release()));
  }

  HostTensor download(const Buffer& b) override {
    HostTensor t = HostTensor::uninitialized(b.type());
    if (t.nbytes() > 0) std::memcpy(t.data(), b.host_data(), t.nbytes());
    return t;
  }
};

}  // namespace

std::unique_ptr<Engine> make_kernel_engine(Device device, Backend& backend) {
  return std::make_unique<KernelEngine>(device, backend);
}
std::unique_ptr<Engine> make_interpreter_engine() { return std::make_unique<InterpreterEngine>(); }

size_t plan_cache_size(Engine& e) {
  auto* k = dynamic_cast<KernelEngine*>(&e);
  return k ? k->plan_count() : 0;
}
size_t plan_cache_capacity(Engine& e) {
  auto* k = dynamic_cast<KernelEngine*>(&e);
  return k ? k->plan_capacity() : 0;
}
void plan_cache_clear(Engine& e) {
  if (auto* k = dynamic_cast<KernelEngine*>(&e)) k->clear();
}

}  // namespace kiln::engine

namespace kiln {
namespace {

/// How many blocks split-reductions may cut a reduction into on this device. A core streams
/// a block as fast as many do, so 64 is plenty for a CPU; a GPU needs several work-groups
/// per compute unit in flight to hide memory latency (benchmarks/RESULTS.md: W5a on an H100).
int64_t split_blocks_for(const Capabilities& caps) {
  constexpr int64_t kCpuBlocks = 64, kGroupsPerUnit = 4;
  if (caps.family == DeviceFamily::Cpu) return kCpuBlocks;
  return std::max<int64_t>(kCpuBlocks, kGroupsPerUnit * caps.cores);
}

}  // namespace

Compilation compile_graph(Backend& backend, const Graph& g, const std::vector<bool>& donated) {
  const std::vector<const PassInfo*> extra = backend.extra_passes();
  const autotune::Mode mode = autotune::mode_from_env();
  if (mode == autotune::Mode::Off) return compile_graph(backend.capabilities(), extra, g, donated);
  // The block counts (knob split_blocks), then the schedules and GEMM blockings the autotuner
  // chose for this device (KILN_AUTOTUNE), where it did.
  autotune::Autotuner& tuner = autotune::Autotuner::instance();
  const SplitChooser splits = [&](const ReductionSplit& site) {
    return tuner.split_blocks_for(
        backend, site, [&](int64_t blocks) { return split_plan(backend, site, blocks); }, mode);
  };
  Compilation c = compile_graph(backend.capabilities(), extra, g, donated, splits);
  for (size_t i = 0; i < c.plan.kernels.size(); ++i)
    c.plan.schedules[i] = tuner.schedule_for(backend, c.plan.kernels[i], c.plan.schedules[i], mode);
  for (LaunchPlan::Step& step : c.plan.steps)
    if (step.is_gemm()) step.gemm.schedule = tuner.gemm_schedule_for(backend, step.gemm, mode);
  return c;
}

LaunchPlan split_plan(Backend& backend, const ReductionSplit& site, int64_t blocks) {
  const std::vector<const PassInfo*> extra = backend.extra_passes();
  return compile_graph(backend.capabilities(), extra, reduction_graph(site), {},
                       [blocks](const ReductionSplit&) { return blocks; })
      .plan;
}

Compilation compile_graph(const Capabilities& caps, std::span<const PassInfo* const> extra_passes, const Graph& g,
                          const std::vector<bool>& donated, const SplitChooser& splits) {
  PipelineOptions po;
  po.verify_each = false;
  // -O1's clean-up, fuse-attention, then what this target adds (split-reductions on CPU),
  // then -O2's expand-convs and fusion.
  auto pipeline = [&](bool attention) {
    std::vector<const PassInfo*> passes = pipeline_for_level(1);
    if (attention) passes.push_back(find_pass("fuse-attention"));
    passes.insert(passes.end(), extra_passes.begin(), extra_passes.end());
    passes.push_back(find_pass("expand-convs"));
    passes.push_back(find_pass("fuse"));
    return passes;
  };
  PassOptions options;
  options.max_split_blocks = split_blocks_for(caps);
  options.split_blocks = splits;
  auto lower = [&](bool attention) -> Compilation {
    Expected<Graph> fused = run_pipeline(g, pipeline(attention), options, po);
    if (!fused) throw Error(fused.error().str());
    MemoryPlan memory = plan_memory(*fused, donated);
    LaunchPlan plan = lower_to_kernels(*fused, memory);
    return {std::move(*fused), std::move(plan)};
  };
  Compilation c = lower(true);
  // An attention kernel past the device's loop budget (lavapipe's, for thousands of keys)
  // runs as the softmax and two products it was written as instead.
  const bool fits = std::all_of(c.plan.steps.begin(), c.plan.steps.end(), [&](const LaunchPlan::Step& step) {
    return !step.attention || kir::attention_fits(*step.attention, caps);
  });
  if (!fits) c = lower(false);
  LaunchPlan& plan = c.plan;
  if (caps.horizontal_parts > 1) merge_horizontal(plan, caps);
  for (const kir::Kernel& k : plan.kernels) plan.schedules.push_back(kir::default_schedule(k, caps));
  // A GEMM's epilogue runs on the product's blocks, a row of the product at a time: its rows
  // stay unmerged where merging them would make it a kernel of its own. And, on the cpu, its
  // tiles cut the product's rows where the GEMM's blocks of columns can start:
  // kir::coalesce_dims makes a convolution's output plane one row (56x56: 3136 positions),
  // and a block of C is fused with the epilogue's iterations only where it starts and ends
  // where they do. Tiles of at most kEpilogueTile that divide the row, whole lines of the
  // output where the GEMM walks the windows by lines, whole vectors where they can be.
  // (Work-item devices place the epilogue's points by their own geometry.)
  constexpr int64_t kEpilogueTile = 512;
  for (size_t i = 0; i + 1 < plan.steps.size(); ++i) {
    if (!plan.steps[i].is_gemm() || plan.steps[i + 1].kernel < 0) continue;
    const auto k = static_cast<size_t>(plan.steps[i + 1].kernel);
    const kir::Kernel& kernel = plan.kernels[k];
    kir::Schedule& s = plan.schedules[k];
    if (s.cpu.merge_rows != 0) {
      const kir::Schedule merged = s;
      if (auto rows = kir::apply_variant(kernel, merged, kir::Variant{{{"merge_rows", 0}}}, caps)) s = *rows;
      if (gemm_epilogue_iterations_per_row(plan, i) <= 0) s = merged;
    }
    const int rank = kernel.domain.rank();
    if (caps.family != DeviceFamily::Cpu || s.lanes_reduce || s.cpu.merge_rows || rank == 0) continue;
    const int64_t row = kernel.domain[rank - 1];
    if (row <= kEpilogueTile) continue;
    const LaunchPlan::Gemm& product = plan.steps[i].gemm;
    const int64_t line = product.im2col ? std::max<int64_t>(1, product.im2col->out.back()) : 1;
    auto largest = [&](int64_t unit) {
      for (int64_t t = kEpilogueTile / unit * unit; t >= unit; t -= unit)
        if (row % t == 0) return t;
      return int64_t{0};
    };
    int64_t tile = largest(std::lcm<int64_t>(line, std::max(1, s.vector_width)));
    if (tile == 0) tile = largest(line);
    if (tile == 0 || tile == s.tile) continue;
    const kir::Schedule before = s;
    s.tile = tile;
    kir::update_walk(kernel, s);
    if (gemm_epilogue_iterations_per_row(plan, i) <= 0) s = before;
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    LaunchPlan::Step& step = plan.steps[i];
    if (step.attention) {
      LaunchPlan::Attention& a = *step.attention;
      a.schedule = kir::default_attention_schedule(a.rows, a.keys, a.depth, a.width, caps);
    } else if (step.kernel < 0) {
      LaunchPlan::Gemm& product = step.gemm;
      // A plain product runs with C's rows in the lanes where its columns fit them badly.
      const std::optional<bool> rows_in_lanes =
          product.b_columns_adjacent() &&
                  kir::rows_in_lanes_pay(product.dtype, product.m, product.n, product.k, caps)
              ? std::optional<bool>(true)
              : std::nullopt;
      product.schedule = kir::default_gemm_schedule(product.dtype, product.m, product.n, product.k, caps,
                                                    gemm_epilogue_columns_per_iteration(plan, i),
                                                    product.im2col ? &*product.im2col : nullptr, rows_in_lanes);
    }
  }
  return c;
}

}  // namespace kiln
