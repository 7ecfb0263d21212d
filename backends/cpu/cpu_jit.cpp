// backends/cpu/cpu_jit.cpp - LLVM optimization, object code, ORC LLJIT linking.
#include "cpu_jit.h"

#include "clang_compiler.h"
#include "attention_codegen.h"
#include "gemm_codegen.h"
#include "llvm_codegen.h"

#include <chrono>
#include <cstdlib>
#include <map>
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
#include "kiln/runtime/kernel_store.h"
#include "kiln/runtime/stats.h"
#include "kiln/support/log.h"
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
T unwrap(llvm::Expected<T> v, const char* what) {
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
  std::string fingerprint;
  std::mutex mutex;  // the JIT's symbol table and `linked` (LLVM compiles outside it)
  // The resource tracker that owns each linked kernel's symbol, by key. A kernel that died
  // leaves its tracker here until its unlinking runs (it waits for the mutex).
  std::unordered_map<std::string, llvm::orc::ResourceTrackerSP> linked;
  // GEMM micro-kernels by what shapes their code (Jit::gemm_microkernel), while the store
  // or a product still holds them.
  struct TileKey {
    int mr, nr, vector_width, prefetch_a;
    DType dtype;
    bool a_rows, b_offsets, a_offsets, c_transposed;
    auto operator<=>(const TileKey&) const = default;
  };
  std::mutex tiles_mutex;
  std::map<TileKey, std::weak_ptr<const CpuKernel>> tiles;

  Impl() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    target = detect_host();
    tm = make_target_machine();
    auto jtmb = unwrap(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host");
    jit = unwrap(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create(), "creating the JIT");
    const char prefix = jit->getDataLayout().getGlobalPrefix();
    jit->getMainJITDylib().addGenerator(
        unwrap(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix), "searching the process"));
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

  // Links `object` under a resource tracker of its own, unlinked when the code dies. Throws
  // kiln::Error when the object does not link (another LLVM's, a damaged one).
  std::shared_ptr<const LinkedCode> link(const std::string& key, const std::string& sym, std::string_view object) {
    std::lock_guard lock(mutex);
    // A kernel that died but whose unlinking has not run yet still owns the symbol: the
    // store asks again only for a kernel no one holds, so unlink it now.
    if (auto it = linked.find(key); it != linked.end()) {
      if (auto e = it->second->remove()) llvm::consumeError(std::move(e));
      linked.erase(it);
      runtime_counters().kernels_unloaded++;
    }
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
      // The same kernel may have been linked again between our death and this lock (which
      // unlinked us first): then there is nothing left to do.
      std::lock_guard unlinking(mutex);
      auto it = linked.find(key);
      if (it == linked.end() || it->second != tracker) return;
      if (auto e = tracker->remove()) llvm::consumeError(std::move(e));
      linked.erase(it);
      runtime_counters().kernels_unloaded++;
    });
    linked[key] = tracker;
    return std::make_shared<const LinkedCode>(LinkedCode{addr.toPtr<KernelFn>(), std::move(code)});
  }

  // `build`'s module optimized with `pipeline` and compiled to an object file, with the
  // compile log's breakdown. LLVM runs in a context and a target machine of this thread's
  // own, so that threads compile at once (the autotuner's --jobs, compile_all).
  std::pair<std::string, std::string> compile_object(const std::string& sym, kir::CpuPipeline pipeline,
                                                     const ModuleBuilder& build) {
    const auto start = std::chrono::steady_clock::now();
    auto since = [&] {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
    };
    int64_t build_ns = 0, optimize_ns = 0, total_ns = 0;
    std::string object;
    {
      llvm::LLVMContext ctx;
      quiet_remarks(ctx);
      llvm::TargetMachine& machine = thread_target_machine();
      auto m = build(sym, ctx);
      build_ns = since();
      optimize(*m, machine, pipeline);
      optimize_ns = since() - build_ns;
      object = emit_file(*m, machine, llvm::CodeGenFileType::ObjectFile);
      total_ns = since();
    }
    runtime_counters().llvm_compiles++;
    return {std::move(object), fmt::format("(IR {:.2f}, optimization {:.2f}, code generation {:.2f})", build_ns / 1e6,
                                           optimize_ns / 1e6, (total_ns - build_ns - optimize_ns) / 1e6)};
  }
};

Jit& Jit::instance() {
  static Jit* jit = new Jit();  // never destroyed: kernels may run during static destruction
  return *jit;
}

Jit::Jit() : Toolchain("cpu", "cpu"), impl_(std::make_unique<Impl>()) {}
Jit::~Jit() = default;

const HostTarget& Jit::target() const { return impl_->target; }

std::string Jit::fingerprint() const { return impl_->fingerprint; }

size_t Jit::cached_kernels() { return store().cached_kernels(); }

std::string Jit::render(const kir::Kernel& k, const kir::Schedule& s, std::string_view stage) {
  return stage == "llvm" ? llvm_ir(k, s, /*optimized=*/true) : std::string();
}

KernelStore::Built Jit::build(std::span<const kir::Kernel* const> kernels, std::span<const kir::Schedule* const> schedules,
                              std::string_view store_key) {
  KILN_ASSERT(kernels.size() == 1, "the cpu builds one kernel at a time (builds_together)");
  const kir::Kernel& k = *kernels[0];
  const kir::Schedule& s = *schedules[0];
  // The symbol is named by the store's key, which load() gets back for the disk's object.
  const std::string key(store_key);
  const std::string sym = "kiln_" + key;
  auto [object, detail] = impl_->compile_object(
      sym, s.cpu.pipeline, [&](const std::string& name, llvm::LLVMContext& ctx) { return impl_->build(k, s, name, ctx); });
  KernelStore::Object code = impl_->link(key, sym, object);
  return KernelStore::Built{std::move(object), std::move(code), std::move(detail)};
}

KernelStore::Object Jit::load(std::string_view bytes, std::string_view key) {
  return impl_->link(std::string(key), "kiln_" + std::string(key), bytes);
}

std::shared_ptr<const CompiledKernel> Jit::member(const KernelStore::Object& group, size_t position, const kir::Kernel& k,
                                                  const kir::Schedule&) {
  if (position != 0) throw Error("a cpu object holds one kernel");
  const auto code = std::static_pointer_cast<const LinkedCode>(group);
  return std::make_shared<const CpuKernel>(code->fn, k.scalars, code->code);
}

std::shared_ptr<const CpuKernel> Jit::gemm_microkernel(const kir::GemmSchedule& s, DType t, const MicroKernelForm& form) {
  // Products look their micro-kernels up at every launch; through the store that formats
  // and hashes the canonical text below each time (MobileNetV3's 28 products a call: about
  // 2% of its time). A kernel the store still holds is found by these numbers instead.
  const Impl::TileKey tile{s.mr, s.nr, s.vector_width, s.prefetch_a, t, form.a_rows, form.b_offsets, form.a_offsets,
                           form.c_transposed};
  {
    std::lock_guard lock(impl_->tiles_mutex);
    if (auto it = impl_->tiles.find(tile); it != impl_->tiles.end())
      if (std::shared_ptr<const CpuKernel> held = it->second.lock()) return held;
  }
  CanonicalWriter w;
  // Only the register tile, A's prefetch and the operands' form shape the code: products
  // that block differently share it.
  w.bytes("gemm micro-kernel");
  w.bytes(dtype_name(t));
  w.bytes(fmt::format("mr {} nr {} vector {}", s.mr, s.nr, s.vector_width));
  if (s.prefetch_a > 0) w.bytes(fmt::format("prefetch a {}", s.prefetch_a));
  // The forms' words as before the form had more than A in rows: cached entries stay valid.
  if (form.a_rows) w.bytes("a in rows");
  if (form.b_offsets) w.bytes("b at offsets");
  if (form.a_offsets) w.bytes("a at offsets");
  if (form.c_transposed) w.bytes("c transposed");
  w.bytes(impl_->fingerprint);
  const std::string canonical = w.take();
  std::shared_ptr<const CpuKernel> kernel =
      code(canonical, fmt::format("gemm micro-kernel {} {}x{}{}", dtype_name(t), s.mr, s.nr, form.str()), {},
           kGemmPipeline, [&](const std::string& sym, llvm::LLVMContext& ctx) {
             return impl_->finish(emit_gemm_microkernel(s, t, sym, ctx, form));
           });
  std::lock_guard lock(impl_->tiles_mutex);
  impl_->tiles[tile] = kernel;
  return kernel;
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
  KernelStore::Toolchain calls;
  calls.build = [&](std::span<const size_t>, std::string_view) {
    auto [object, detail] = im.compile_object(sym, pipeline, build);
    KernelStore::Object linked = im.link(key, sym, object);
    return KernelStore::Built{std::move(object), std::move(linked), std::move(detail)};
  };
  calls.load = [&](std::string_view object, std::string_view) -> KernelStore::Object { return im.link(key, sym, object); };
  calls.member = [&](const KernelStore::Object& group, size_t position, size_t) -> KernelStore::Object {
    if (position != 0) throw Error("a cpu object holds one kernel");
    const auto linked = std::static_pointer_cast<const LinkedCode>(group);
    return std::make_shared<const CpuKernel>(linked->fn, scalar_types, linked->code);
  };
  return store().get_one<CpuKernel>({canonical, what}, calls);
}

std::string Jit::llvm_ir(const kir::Kernel& k, const kir::Schedule& s, bool optimized) {
  return impl_->text([&](llvm::LLVMContext& ctx) { return impl_->build(k, s, "kiln_" + k.name, ctx); },
                     optimized ? Impl::Text::OptimizedIr : Impl::Text::Ir, s.cpu.pipeline);
}

std::string Jit::assembly(const kir::Kernel& k, const kir::Schedule& s) {
  return impl_->text([&](llvm::LLVMContext& ctx) { return impl_->build(k, s, "kiln_" + k.name, ctx); },
                     Impl::Text::Assembly, s.cpu.pipeline);
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
