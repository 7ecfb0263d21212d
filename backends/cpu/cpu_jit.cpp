// backends/cpu/cpu_jit.cpp - LLVM optimization, object code, ORC LLJIT, kernel caches.
#include "cpu_jit.h"

#include "clang_compiler.h"
#include "attention_codegen.h"
#include "gemm_codegen.h"
#include "llvm_codegen.h"

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include <llvm/ADT/SmallVector.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include <fmt/format.h>

#include "kiln/ir/canonical.h"
#include "kiln/ir/hash.h"
#include "kiln/ir/scalar_semantics.h"
#include "kiln/runtime/compile_policy.h"
#include "kiln/runtime/disk_cache.h"
#include "kiln/runtime/stats.h"
#include "kiln/support/log.h"
#include "kiln/support/lru_cache.h"
#include "kiln/codegen_id.h"
#include "kiln/version.h"

// pow for generated code: the interpreter's own definitions (integers: exact wrapping powers;
// floats: the C library's pow, except squares and cubes, which are products).
extern "C" int64_t kiln_rt_ipow(int64_t base, int64_t exp) { return kiln::scalar::binary_int(kiln::OpKind::Pow, base, exp); }
extern "C" double kiln_rt_pow(double base, double exp) { return kiln::scalar::binary_float(kiln::OpKind::Pow, base, exp); }

namespace kiln::cpu {
namespace {

// Bump when generated code changes for the same Kernel IR: old disk entries become stale.
constexpr int kCodegenVersion = 8;

// CpuPipeline::Lean. kiln's IR arrives vectorized, blocked and with its loops shaped by the
// schedule: what it needs is its always-inline helpers inlined, SSA and redundancy cleanup,
// invariant address math hoisted out of the loops, constant-trip loops (lanes, unrolled
// accumulator chains) unrolled, and the loops the schedule asks for unrolled as it says
// (`vector_unroll`: llvm.loop.unroll.count; no unrolling by heuristics, which doubled the
// compile time). O2's vectorizers, inliner heuristics and interprocedural passes find
// nothing to do and cost half of a kernel's compile time. `no-verify-fixpoint`, as
// in O2: a textual `instcombine` otherwise aborts the process when one round leaves more to
// combine (a check for LLVM's own tests; the fuzz smoke test hit it).
constexpr const char* kLeanPipeline =
    "always-inline,function(sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg,loop-mssa(loop-rotate,licm),"
    "gvn,loop(loop-unroll-full),loop-unroll<O2;no-partial;no-runtime>,instcombine<no-verify-fixpoint>,simplifycfg)";

// The GEMM micro-kernel is one register tile per K step, written out by its emitter: with the
// lean passes it compiles in half the time (f32 8x32: 4.5-4.8 ms against 8.5-9.2 ms) and
// runs W6, W7 and the attention product as fast as with O2.
constexpr kir::CpuPipeline kGemmPipeline = kir::CpuPipeline::Lean;

std::string take(llvm::Error e) { return llvm::toString(std::move(e)); }

template <class T>
T check(llvm::Expected<T> v, const char* what) {
  if (!v) throw Error(fmt::format("LLVM: {}: {}", what, take(v.takeError())));
  return std::move(*v);
}

// Warnings and remarks (a loop the vectorizer was asked to widen and could not: a custom
// kernel's wrapper, llvm_codegen.cpp) are not the user's concern; errors still print.
void quiet_remarks(llvm::LLVMContext& ctx) {
  ctx.setDiagnosticHandlerCallBack([](const llvm::DiagnosticInfo* d, void*) {
    if (d->getSeverity() != llvm::DS_Error) return;
    llvm::DiagnosticPrinterRawOStream printer(llvm::errs());
    d->print(printer);
    llvm::errs() << "\n";
  });
}

HostTarget detect_host() {
  HostTarget t;
  t.triple = llvm::sys::getProcessTriple();
  t.cpu = llvm::sys::getHostCPUName().str();
  std::vector<std::string> feats;
  bool avx512 = false, avx2 = false;
  for (const auto& f : llvm::sys::getHostCPUFeatures()) {
    feats.push_back((f.second ? "+" : "-") + f.first().str());
    if (f.second && f.first() == "avx512f") avx512 = true;
    if (f.second && f.first() == "avx2") avx2 = true;
    if (f.second && f.first() == "f16c") t.f16c = true;
  }
  std::sort(feats.begin(), feats.end());
  for (size_t i = 0; i < feats.size(); ++i) t.features += (i ? "," : "") + feats[i];
  t.vector_bytes = avx512 ? 64 : avx2 ? 32 : 16;
  return t;
}

}  // namespace

std::string HostTarget::describe() const {
  return fmt::format("{} {} ({}-byte vectors)", triple, cpu, vector_bytes);
}

struct Jit::Impl {
  HostTarget target;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  DiskCache disk{DiskCache::default_root(), "cpu"};
  std::string fingerprint;
  std::recursive_mutex mutex;  // the JIT's symbol table, the maps below, the disk cache (LLVM compiles outside it)
  struct Alive {
    std::string canonical;  // compared on every hit: a collision never runs the wrong code
    std::weak_ptr<const CpuKernel> kernel;
    llvm::orc::ResourceTrackerSP tracker;  // owns the kernel's symbol in the JIT
  };
  // Every kernel some holder still uses (one copy of each symbol in the JIT), and the most
  // recently used ones, held by the LRU so that they outlive the executables using them.
  std::unordered_map<std::string, Alive> alive;
  LruCache<std::string, std::shared_ptr<const CpuKernel>> recent{kernel_cache_capacity()};

  Impl() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    target = detect_host();
    tm = make_target_machine();
    auto jtmb = check(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host");
    jit = check(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create(), "creating the JIT");
    const char prefix = jit->getDataLayout().getGlobalPrefix();
    jit->getMainJITDylib().addGenerator(
        check(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix), "searching the process"));
    llvm::orc::SymbolMap runtime;
    runtime[jit->mangleAndIntern("kiln_rt_ipow")] = {llvm::orc::ExecutorAddr::fromPtr(&kiln_rt_ipow),
                                                     llvm::JITSymbolFlags::Exported};
    runtime[jit->mangleAndIntern("kiln_rt_pow")] = {llvm::orc::ExecutorAddr::fromPtr(&kiln_rt_pow),
                                                    llvm::JITSymbolFlags::Exported};
    if (auto e = jit->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(runtime))))
      throw Error("LLVM: defining runtime symbols: " + take(std::move(e)));
    fingerprint = environment();
  }

  std::unique_ptr<llvm::TargetMachine> make_target_machine() const {
    std::string err;
    const llvm::Target* t = llvm::TargetRegistry::lookupTarget(target.triple, err);
    if (!t) throw Error("LLVM has no target for " + target.triple + ": " + err);
    llvm::TargetOptions options;  // no fast-math: results must match the interpreter
    return std::unique_ptr<llvm::TargetMachine>(t->createTargetMachine(
        target.triple, target.cpu, target.features, options, llvm::Reloc::PIC_, std::nullopt,
        llvm::CodeGenOptLevel::Aggressive));
  }

  // The target machine of the calling thread's compiles. A TargetMachine caches subtargets
  // per function as it goes and is not safe to share between threads compiling at once.
  llvm::TargetMachine& thread_target_machine() const {
    thread_local std::unique_ptr<llvm::TargetMachine> mine;
    if (!mine) mine = make_target_machine();
    return *mine;
  }

  // The kernel under `key` if a holder still uses it (refreshed in the LRU), else null. The
  // caller holds the mutex.
  std::shared_ptr<const CpuKernel> find_alive(const std::string& key, const std::string& canonical,
                                              const std::string& what) {
    auto it = alive.find(key);
    if (it == alive.end()) return nullptr;
    if (it->second.canonical != canonical)
      throw Error(fmt::format("internal error: kernel cache key collision on {} ({})", key, what));
    if (std::shared_ptr<const CpuKernel> held = it->second.kernel.lock()) {
      runtime_counters().kernel_memory_hits++;
      runtime_counters().kernel_evictions += recent.put(key, held);
      return held;
    }
    unlink_dead(it);
    return nullptr;
  }

  // Everything the machine code depends on besides the kernel and its schedule.
  std::string environment() const {
    return fmt::format("kiln {} codegen {} {} llvm {} {} {} {} {}", KILN_VERSION_STRING, kCodegenVersion, KILN_CODEGEN_ID,
                       LLVM_VERSION_STRING, clang_version(),
                       target.triple, target.cpu, target.features);
  }

  std::unique_ptr<llvm::Module> build(const kir::Kernel& k, const kir::Schedule& s, const std::string& sym,
                                      llvm::LLVMContext& ctx) {
    return finish(emit_kernel(k, s, sym, ctx, target.f16c));
  }

  // The host's triple, data layout, CPU and features on every function of `m`.
  std::unique_ptr<llvm::Module> finish(std::unique_ptr<llvm::Module> m) {
    m->setTargetTriple(target.triple);
    m->setDataLayout(tm->createDataLayout());
    for (llvm::Function& f : *m) {
      if (f.isDeclaration()) continue;
      f.addFnAttr("target-cpu", target.cpu);
      f.addFnAttr("target-features", target.features);
      // Some AVX-512 CPUs (Zen 4, Ice Lake) prefer 256-bit vectors by default; kernels are
      // explicitly vectorized for the full register width, so make it legal and preferred.
      const std::string bits = std::to_string(target.vector_bytes * 8);
      f.addFnAttr("prefer-vector-width", bits);
      f.addFnAttr("min-legal-vector-width", bits);
    }
    return m;
  }

  std::unique_ptr<llvm::Module> build_gemm(const kir::GemmSchedule& s, DType t, llvm::LLVMContext& ctx) {
    return finish(emit_gemm_microkernel(s, t, fmt::format("kiln_gemm_{}_{}x{}", dtype_name(t), s.mr, s.nr), ctx));
  }

  // What `kiln codegen` shows of a module (compiles nothing into the JIT, touches nothing
  // the lock guards).
  enum class Text { Ir, OptimizedIr, Assembly };
  std::string text(const std::function<std::unique_ptr<llvm::Module>(llvm::LLVMContext&)>& make, Text what,
                   kir::CpuPipeline pipeline) const {
    llvm::LLVMContext ctx;
    quiet_remarks(ctx);
    auto m = make(ctx);
    llvm::TargetMachine& machine = thread_target_machine();
    if (what != Text::Ir) optimize(*m, machine, pipeline);
    if (what == Text::Assembly) return emit_file(*m, machine, llvm::CodeGenFileType::AssemblyFile);
    std::string out;
    llvm::raw_string_ostream os(out);
    m->print(os, nullptr);
    return out;
  }

  static void optimize(llvm::Module& m, llvm::TargetMachine& machine, kir::CpuPipeline pipeline) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(&machine);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    if (pipeline == kir::CpuPipeline::O2) {
      pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(m, mam);
      return;
    }
    llvm::ModulePassManager lean;
    if (llvm::Error e = pb.parsePassPipeline(lean, kLeanPipeline))
      throw Error("LLVM: the lean pipeline does not parse: " + take(std::move(e)));
    lean.run(m, mam);
  }

  static std::string emit_file(llvm::Module& m, llvm::TargetMachine& machine, llvm::CodeGenFileType type) {
    llvm::SmallVector<char, 0> buffer;
    llvm::raw_svector_ostream os(buffer);
    llvm::legacy::PassManager pm;
    if (machine.addPassesToEmitFile(pm, os, nullptr, type)) throw Error("LLVM: the target cannot emit this file type");
    pm.run(m);
    return std::string(buffer.data(), buffer.size());
  }

  // A kernel that died but whose unlinking has not run yet (it waits for our lock) still
  // owns its symbol: unlink it now, so that the same kernel can be linked again.
  void unlink_dead(std::unordered_map<std::string, Alive>::iterator it) {
    if (auto e = it->second.tracker->remove()) llvm::consumeError(std::move(e));
    alive.erase(it);
    runtime_counters().kernels_unloaded++;
  }

  // Links `object` under its own resource tracker; the kernel unlinks it when it dies.
  std::shared_ptr<const CpuKernel> link(const std::vector<DType>& scalar_types, const std::string& key,
                                        const std::string& canonical, const std::string& sym, const std::string& object) {
    llvm::orc::ResourceTrackerSP tracker = jit->getMainJITDylib().createResourceTracker();
    auto fail = [&](const std::string& why) -> Error {
      if (auto e = tracker->remove()) llvm::consumeError(std::move(e));  // nothing half-linked stays
      return Error("LLVM: linking kernel object: " + why);
    };
    if (auto e = jit->addObjectFile(tracker, llvm::MemoryBuffer::getMemBufferCopy(object, sym))) throw fail(take(std::move(e)));
    auto found = jit->lookup(sym);
    if (!found) throw fail(take(found.takeError()));
    runtime_counters().object_loads++;
    const auto addr = *found;
    std::shared_ptr<void> code(nullptr, [this, tracker, key](void*) {
      // A thread may have relinked the same kernel between our death and this lock (it
      // unlinked us first, see unlink_dead): then there is nothing left to do.
      std::lock_guard lock(mutex);
      auto it = alive.find(key);
      if (it == alive.end() || it->second.tracker != tracker) return;
      if (auto e = tracker->remove()) llvm::consumeError(std::move(e));
      alive.erase(it);
      runtime_counters().kernels_unloaded++;
    });
    auto kernel = std::make_shared<const CpuKernel>(addr.toPtr<KernelFn>(), scalar_types, std::move(code));
    alive[key] = Alive{canonical, kernel, tracker};
    runtime_counters().kernel_evictions += recent.put(key, kernel);
    return kernel;
  }
};

Jit& Jit::instance() {
  static Jit* jit = new Jit();  // never destroyed: kernels may run during static destruction
  return *jit;
}

Jit::Jit() : impl_(std::make_unique<Impl>()) {}
Jit::~Jit() = default;

const HostTarget& Jit::target() const { return impl_->target; }

const std::string& Jit::fingerprint() const { return impl_->fingerprint; }

size_t Jit::cached_kernels() {
  std::lock_guard lock(impl_->mutex);
  return impl_->recent.size();
}

std::shared_ptr<const CpuKernel> Jit::kernel(const kir::Kernel& k, const kir::Schedule& s) {
  // Names are left out: the same kernel in another stream, or the same stream written
  // in another order, finds it.
  const std::string canonical = kir::kernel_canonical(k, s, impl_->fingerprint);
  return code(canonical, "kernel @" + k.name, k.scalars, s.pipeline,
              [&](const std::string& sym, llvm::LLVMContext& ctx) { return impl_->build(k, s, sym, ctx); });
}

std::shared_ptr<const CpuKernel> Jit::gemm_microkernel(const kir::GemmSchedule& s, DType t, const MicroKernelForm& form) {
  CanonicalWriter w;
  // Only the register tile and the operands' form shape the code: products that block
  // differently share it.
  w.bytes("gemm micro-kernel");
  w.bytes(dtype_name(t));
  w.bytes(fmt::format("mr {} nr {} vector {}", s.mr, s.nr, s.vector_width));
  // The forms' words as before the form had more than A in rows: cached entries stay valid.
  if (form.a_rows) w.bytes("a in rows");
  if (form.b_offsets) w.bytes("b at offsets");
  w.bytes(impl_->fingerprint);
  const std::string canonical = w.take();
  return code(canonical, fmt::format("gemm micro-kernel {} {}x{}{}", dtype_name(t), s.mr, s.nr, form.str()), {},
              kGemmPipeline, [&](const std::string& sym, llvm::LLVMContext& ctx) {
                return impl_->finish(emit_gemm_microkernel(s, t, sym, ctx, form));
              });
}

std::shared_ptr<const CpuKernel> Jit::attention_softmax(int vector_width) {
  CanonicalWriter w;
  // The version changes with the function's arguments: the disk cache holds older ones.
  w.bytes("attention softmax v3");
  w.bytes(fmt::format("vector {}", vector_width));
  w.bytes(impl_->fingerprint);
  return code(w.take(), fmt::format("attention softmax, vector {}", vector_width), {}, kGemmPipeline,
              [&](const std::string& sym, llvm::LLVMContext& ctx) {
                return impl_->finish(emit_attention_softmax(vector_width, sym, ctx));
              });
}

std::shared_ptr<const CpuKernel> Jit::custom_host_function(const CustomKernel& k) {
  CanonicalWriter w;
  w.bytes("custom kernel host function");
  w.bytes(k.digest);
  w.bytes(impl_->fingerprint);
  // Clang optimized the source already; O2 here inlines it into the loop and vectorizes that.
  const auto pipeline = kir::CpuPipeline::O2;
  return code(w.take(), "custom kernel @" + k.name + " (host)", {}, pipeline, [&](const std::string& sym, llvm::LLVMContext& ctx) {
    std::vector<std::pair<std::string, int64_t>> macros;
    for (const CustomTunable& t : k.signature.tunables) macros.emplace_back(t.macro, t.default_value);
    std::unique_ptr<llvm::Module> m = custom_module(custom_bitcode(k, macros), k, sym + ".fn", ctx);
    llvm::Function* fn = m->getFunction(sym + ".fn");
    fn->setLinkage(llvm::GlobalValue::InternalLinkage);
    // void sym(void* const* args, i64 begin, i64 end): result[i] = fn(args[0][i], ...).
    llvm::IRBuilder<> b(ctx);
    llvm::Type* ptr = b.getPtrTy();
    auto* entry = llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), {ptr, b.getInt64Ty(), b.getInt64Ty()}, false),
                                         llvm::Function::ExternalLinkage, sym, *m);
    auto* head = llvm::BasicBlock::Create(ctx, "entry", entry);
    auto* body = llvm::BasicBlock::Create(ctx, "body", entry);
    auto* done = llvm::BasicBlock::Create(ctx, "done", entry);
    b.SetInsertPoint(head);
    const size_t n = k.signature.params.size();
    std::vector<llvm::Value*> arrays;
    for (size_t j = 0; j <= n; ++j) arrays.push_back(b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, entry->getArg(0), j)));
    b.CreateCondBr(b.CreateICmpSLT(entry->getArg(1), entry->getArg(2)), body, done);
    b.SetInsertPoint(body);
    llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2);
    i->addIncoming(entry->getArg(1), head);
    auto mem = [&](DType t) -> llvm::Type* {
      switch (t) {
        case DType::Bool: return b.getInt8Ty();
        case DType::I32: return b.getInt32Ty();
        case DType::I64: return b.getInt64Ty();
        case DType::F32: return b.getFloatTy();
        case DType::F64: return b.getDoubleTy();
        default: break;
      }
      KILN_ASSERT(false, "custom kernels take the compute types only (dtype.h)");
    };
    std::vector<llvm::Value*> args;
    for (size_t j = 0; j < n; ++j) {
      const DType t = k.signature.params[j];
      llvm::Value* v = b.CreateLoad(mem(t), b.CreateGEP(mem(t), arrays[j], i));
      args.push_back(t == DType::Bool ? b.CreateICmpNE(v, b.getInt8(0)) : v);
    }
    llvm::Value* r = b.CreateCall(fn, args);
    const DType rt = k.signature.result;
    if (rt == DType::Bool) r = b.CreateZExt(r, b.getInt8Ty());
    b.CreateStore(r, b.CreateGEP(mem(rt), arrays[n], i));
    llvm::Value* next = b.CreateAdd(i, b.getInt64(1));
    i->addIncoming(next, body);
    b.CreateCondBr(b.CreateICmpSLT(next, entry->getArg(2)), body, done);
    b.SetInsertPoint(done);
    b.CreateRetVoid();
    return impl_->finish(std::move(m));
  });
}

std::shared_ptr<const CpuKernel> Jit::code(const std::string& canonical, const std::string& what,
                                           const std::vector<DType>& scalar_types, kir::CpuPipeline pipeline,
                                           const ModuleBuilder& build) {
  Impl& im = *impl_;
  const std::string key = hash_text(canonical).hex();
  const std::string sym = "kiln_" + key;
  {
    std::lock_guard lock(im.mutex);
    if (std::shared_ptr<const CpuKernel> held = im.find_alive(key, canonical, what)) return held;
    if (std::optional<std::string> object = im.disk.load(key, canonical)) {
      try {
        return im.link(scalar_types, key, canonical, sym, *object);
      } catch (const Error& e) {
        // An entry that verifies but does not link (another LLVM wrote it, a damaged object
        // with a valid checksum) is stale like any other: removed, rebuilt below.
        runtime_counters().kernel_disk_rejected++;
        runtime_counters().kernel_disk_hits--;  // counted by the load
        runtime_counters().kernel_disk_misses++;
        warn_once(im.disk.path_of(key).string(), fmt::format("disk cache entry {} does not link ({}); removing it, the "
                                                             "kernel will be rebuilt", im.disk.path_of(key).string(), e.what()));
        im.disk.remove(key);
      }
    }
  }
  check_compile_allowed(what);
  // LLVM runs outside the lock, in a context and a target machine of this thread's own, so
  // that threads compile at once (the autotuner's --jobs); only linking is serial.
  const auto start = std::chrono::steady_clock::now();
  auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t).count();
  };
  int64_t build_ns = 0, optimize_ns = 0;
  std::string object;
  {
    llvm::LLVMContext ctx;
    quiet_remarks(ctx);
    llvm::TargetMachine& machine = im.thread_target_machine();
    auto m = build(sym, ctx);
    build_ns = since(start);
    Impl::optimize(*m, machine, pipeline);
    optimize_ns = since(start) - build_ns;
    object = Impl::emit_file(*m, machine, llvm::CodeGenFileType::ObjectFile);
  }
  const auto ns = since(start);
  RuntimeCounters& c = runtime_counters();
  c.llvm_compiles++;
  c.kernels_compiled++;
  c.compile_ns += static_cast<uint64_t>(ns);
  log_line("compile", fmt::format("{} ({}): {:.2f} ms (IR {:.2f}, optimization {:.2f}, code generation {:.2f}), {} bytes "
                                  "of object code",
                                  what, key, ns / 1e6, build_ns / 1e6, optimize_ns / 1e6, (ns - build_ns - optimize_ns) / 1e6,
                                  object.size()));
  std::lock_guard lock(im.mutex);
  // Another thread may have compiled the same kernel meanwhile: the first one linked is kept.
  if (std::shared_ptr<const CpuKernel> held = im.find_alive(key, canonical, what)) return held;
  im.disk.store(key, canonical, object);
  return im.link(scalar_types, key, canonical, sym, object);
}

std::string Jit::llvm_ir(const kir::Kernel& k, const kir::Schedule& s, bool optimized) {
  return impl_->text([&](llvm::LLVMContext& ctx) { return impl_->build(k, s, "kiln_" + k.name, ctx); },
                     optimized ? Impl::Text::OptimizedIr : Impl::Text::Ir, s.pipeline);
}

std::string Jit::assembly(const kir::Kernel& k, const kir::Schedule& s) {
  return impl_->text([&](llvm::LLVMContext& ctx) { return impl_->build(k, s, "kiln_" + k.name, ctx); },
                     Impl::Text::Assembly, s.pipeline);
}

std::string Jit::gemm_llvm_ir(const kir::GemmSchedule& s, DType t, bool optimized) {
  return impl_->text([&](llvm::LLVMContext& ctx) { return impl_->build_gemm(s, t, ctx); },
                     optimized ? Impl::Text::OptimizedIr : Impl::Text::Ir, kGemmPipeline);
}

std::string Jit::gemm_assembly(const kir::GemmSchedule& s, DType t) {
  return impl_->text([&](llvm::LLVMContext& ctx) { return impl_->build_gemm(s, t, ctx); }, Impl::Text::Assembly,
                     kGemmPipeline);
}

}  // namespace kiln::cpu
