// backends/cpu/clang_compiler.cpp - custom kernels' C and OpenCL C, compiled in-process by Clang.
//
// Clang's static libraries are linked on the shared libLLVM (../shared/TOOLCHAIN.md: the
// shared libclang-cpp crashes PoCL in the same process). A source is compiled once per set
// of macro values, to bitcode; each kernel that calls it reads the bitcode into its own
// LLVMContext and links it, so LLVM inlines the function into the fused loop.
#include "clang_compiler.h"

#include <cctype>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/Basic/Version.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/VirtualFileSystem.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include <fmt/format.h>

#include "kiln/backends/cpu.h"
#include "kiln/support/error.h"
#include "opencl_c_base_header.h"

#ifndef KILN_CLANG_RESOURCE_DIR
#error "KILN_CLANG_RESOURCE_DIR (Clang's headers: stddef.h...) comes from CMake"
#endif

namespace kiln::cpu {
namespace {

// Errors and their notes, with the position inside the user's file.
class CollectDiagnostics : public clang::DiagnosticConsumer {
 public:
  void HandleDiagnostic(clang::DiagnosticsEngine::Level level, const clang::Diagnostic& info) override {
    clang::DiagnosticConsumer::HandleDiagnostic(level, info);
    using L = clang::DiagnosticsEngine;
    if (level != L::Error && level != L::Fatal && !(level == L::Note && !lines.empty())) return;
    llvm::SmallString<256> message;
    info.FormatDiagnostic(message);
    std::string where;
    if (info.hasSourceManager() && info.getLocation().isValid()) {
      const clang::PresumedLoc p = info.getSourceManager().getPresumedLoc(info.getLocation());
      if (p.isValid()) where = fmt::format("{}:{}:{}: ", p.getFilename(), p.getLine(), p.getColumn());
    }
    lines.push_back(fmt::format("{}{}: {}", where, level == L::Note ? "note" : "error", message.str().str()));
  }
  std::vector<std::string> lines;
};

std::string llvm_type_name(llvm::Type* t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t->print(os);
  return s;
}

llvm::Type* llvm_type_of(DType t, llvm::LLVMContext& ctx) {
  switch (t) {
    case DType::Bool: return llvm::Type::getInt1Ty(ctx);
    case DType::I32: return llvm::Type::getInt32Ty(ctx);
    case DType::I64: return llvm::Type::getInt64Ty(ctx);
    case DType::F32: return llvm::Type::getFloatTy(ctx);
    case DType::F64: return llvm::Type::getDoubleTy(ctx);
    default: break;
  }
  KILN_ASSERT(false, "custom kernels take the compute types only (dtype.h)");
}

// The function must take and give exactly the signature's types: a mismatch would reinterpret
// bits at every call.
void check_prototype(const llvm::Module& m, const CustomKernel& k) {
  const llvm::Function* f = m.getFunction(k.name);
  if (!f || f->isDeclaration() || f->hasLocalLinkage())
    throw Error(fmt::format("custom kernel @{}: {} defines no external function '{}' (a static one is not visible)",
                            k.name, k.source_file, k.name));
  llvm::LLVMContext& ctx = m.getContext();
  bool same = f->arg_size() == k.signature.params.size() && f->getReturnType() == llvm_type_of(k.signature.result, ctx) &&
              !f->isVarArg();
  for (size_t i = 0; same && i < k.signature.params.size(); ++i)
    same = f->getArg(static_cast<unsigned>(i))->getType() == llvm_type_of(k.signature.params[i], ctx);
  if (!same)
    throw Error(fmt::format("custom kernel @{}: its signature is {}, but {}'s function {} is {}", k.name,
                            k.signature.str(), k.source_file, k.name, llvm_type_name(f->getFunctionType())));
}

// ---- OpenCL C builtins on the host ----
//
// Clang's OpenCL front end leaves builtins as calls to their mangled overloads (_Z3expf).
// Each one the source calls gets a body here, from libm or an LLVM intrinsic.

struct Mangled {
  std::string name;   // "exp"
  std::string types;  // the Itanium parameter codes: "f", "ff", "d", "i"... ("Dv2_f": a vector)
};

std::optional<Mangled> demangle_builtin(llvm::StringRef sym) {
  if (!sym.consume_front("_Z")) return std::nullopt;
  size_t len = 0;
  while (!sym.empty() && std::isdigit(static_cast<unsigned char>(sym.front()))) {
    len = len * 10 + static_cast<size_t>(sym.front() - '0');
    sym = sym.drop_front();
  }
  if (len == 0 || sym.size() < len) return std::nullopt;
  // Scalar parameters are one letter each (pow(float, float) is _Z3powff); vector ones start
  // with "Dv" (and repeat as substitutions, S_), which define_builtin refuses.
  return Mangled{sym.take_front(len).str(), sym.drop_front(len).str()};
}

const std::map<std::string, llvm::Intrinsic::ID>& float_intrinsics() {
  static const std::map<std::string, llvm::Intrinsic::ID> m = {
      {"sqrt", llvm::Intrinsic::sqrt},   {"fabs", llvm::Intrinsic::fabs},    {"floor", llvm::Intrinsic::floor},
      {"ceil", llvm::Intrinsic::ceil},   {"trunc", llvm::Intrinsic::trunc},  {"round", llvm::Intrinsic::round},
      {"rint", llvm::Intrinsic::rint},   {"fmin", llvm::Intrinsic::minnum},  {"fmax", llvm::Intrinsic::maxnum},
      {"min", llvm::Intrinsic::minnum},  {"max", llvm::Intrinsic::maxnum},   {"fma", llvm::Intrinsic::fma},
      {"mad", llvm::Intrinsic::fma},     {"copysign", llvm::Intrinsic::copysign}};
  return m;
}

bool is_libm(const std::string& n) {
  static const std::set<std::string> names = {
      "exp",  "exp2",  "expm1", "log",   "log2", "log10", "log1p", "sin",   "cos",  "tan",    "asin",
      "acos", "atan",  "sinh",  "cosh",  "tanh", "asinh", "acosh", "atanh", "erf",  "erfc",   "cbrt",
      "pow",  "atan2", "fmod",  "hypot", "fdim", "tgamma", "lgamma", "remainder"};
  return names.count(n) > 0;
}

// Gives `f` (a builtin the source declared) a body; throws for one kiln cannot provide.
void define_builtin(llvm::Function& f, const CustomKernel& k) {
  const auto m = demangle_builtin(f.getName());
  auto refuse = [&](std::string_view why) {
    return Error(fmt::format("custom kernel @{}: OpenCL builtin '{}' ({}) cannot run on cpu: {}", k.name,
                             m ? m->name : f.getName().str(), f.getName().str(), why));
  };
  if (!m) throw refuse("not a builtin kiln knows");
  std::string name = m->name;
  for (const char* prefix : {"native_", "half_"})
    if (name.starts_with(prefix)) name = name.substr(std::string_view(prefix).size());
  const bool floats = !m->types.empty() && m->types.find_first_not_of(m->types[0]) == std::string::npos &&
                      (m->types[0] == 'f' || m->types[0] == 'd');
  const bool ints = !m->types.empty() && m->types.find_first_not_of("ijlm") == std::string::npos;
  llvm::LLVMContext& ctx = f.getContext();
  f.setLinkage(llvm::GlobalValue::InternalLinkage);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", &f));
  std::vector<llvm::Value*> args;
  for (llvm::Argument& a : f.args()) args.push_back(&a);
  llvm::Type* t = f.getReturnType();
  llvm::Value* r = nullptr;
  if (floats && name == "rsqrt" && args.size() == 1) {
    r = b.CreateFDiv(llvm::ConstantFP::get(t, 1.0), b.CreateIntrinsic(llvm::Intrinsic::sqrt, {t}, {args[0]}));
  } else if (floats && name == "clamp" && args.size() == 3) {
    r = b.CreateIntrinsic(llvm::Intrinsic::minnum, {t}, {b.CreateIntrinsic(llvm::Intrinsic::maxnum, {t}, {args[0], args[1]}), args[2]});
  } else if (floats && float_intrinsics().count(name)) {
    r = b.CreateIntrinsic(float_intrinsics().at(name), {t}, args);
  } else if (floats && is_libm(name)) {
    const std::string libm = name + (m->types[0] == 'f' ? "f" : "");
    llvm::FunctionCallee callee = f.getParent()->getOrInsertFunction(libm, f.getFunctionType());
    r = b.CreateCall(callee, args);
  } else if (ints && (name == "min" || name == "max" || name == "clamp")) {
    const bool is_signed = m->types[0] == 'i' || m->types[0] == 'l';
    auto pick = [&](bool mx, llvm::Value* x, llvm::Value* y) {
      const auto id = mx ? (is_signed ? llvm::Intrinsic::smax : llvm::Intrinsic::umax)
                         : (is_signed ? llvm::Intrinsic::smin : llvm::Intrinsic::umin);
      return b.CreateIntrinsic(id, {t}, {x, y});
    };
    if (name == "clamp" && args.size() == 3) r = pick(false, pick(true, args[0], args[1]), args[2]);
    else if (args.size() == 2) r = pick(name == "max", args[0], args[1]);
  } else if (ints && name == "abs" && args.size() == 1) {
    const bool is_signed = m->types[0] == 'i' || m->types[0] == 'l';
    r = is_signed ? b.CreateIntrinsic(llvm::Intrinsic::abs, {t}, {args[0], b.getFalse()}) : args[0];
  }
  if (!r) {
    f.deleteBody();
    throw refuse(m->types.find("Dv") != std::string::npos ? "vector builtins are not provided; use scalars"
                                                           : "kiln provides the scalar math builtins only");
  }
  b.CreateRet(r);
}

struct Compiled {
  std::mutex mutex;  // guards the map; compilations run outside it, each in its own CompilerInstance
  std::map<std::string, std::string> bitcode;  // by digest and macro values
};

Compiled& compiled() {
  static Compiled* c = new Compiled();  // never destroyed: kernels compile during static destruction
  return *c;
}

// `k` at `macros` as bitcode. With `define_builtins` false (a check of the source alone) the
// OpenCL builtins are left declared: a builtin kiln cannot define on cpu is no reason to
// refuse a kernel meant for an OpenCL device, whose compiler has them all.
std::string compile(const CustomKernel& k, const std::vector<std::pair<std::string, int64_t>>& macros,
                    bool define_builtins) {
  const std::string triple = llvm::sys::getProcessTriple();
  const std::string resource = KILN_CLANG_RESOURCE_DIR;
  std::vector<std::string> args = {"-triple", triple, "-target-cpu", llvm::sys::getHostCPUName().str(), "-O2",
                                   "-ffp-contract=off", "-resource-dir", resource, "-internal-isystem",
                                   resource + "/include"};
  if (k.language == CustomLanguage::C) {
    const llvm::Triple t(triple);
    for (const std::string& dir : {fmt::format("/usr/include/{}-linux-gnu", t.getArchName().str()), std::string("/usr/include")})
      if (std::filesystem::is_directory(dir)) args.insert(args.end(), {"-internal-externc-isystem", dir});
    args.insert(args.end(), {"-x", "c", "-std=c17"});
  } else {
    args.insert(args.end(), {"-x", "cl", "-cl-std=CL1.2", "-fdeclare-opencl-builtins", "-finclude-default-header"});
  }
  for (const auto& [name, value] : macros) args.insert(args.end(), {"-D", fmt::format("{}={}", name, value)});
  args.push_back(k.source_file);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());

  CollectDiagnostics diagnostics;
  clang::CompilerInstance ci;
  ci.createDiagnostics(&diagnostics, /*ShouldOwnClient=*/false);
  if (k.language == CustomLanguage::OpenCLC) {
    // opencl-c-base.h from kiln itself, over whatever the disk has (opencl_c_base_header.h).
    auto files = llvm::makeIntrusiveRefCnt<llvm::vfs::OverlayFileSystem>(llvm::vfs::getRealFileSystem());
    auto memory = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
    memory->addFile(resource + "/include/opencl-c-base.h", 0, llvm::MemoryBuffer::getMemBuffer(opencl_c_base_header()));
    files->pushOverlay(memory);
    ci.createFileManager(files);
  }
  auto fail = [&](std::string_view what) {
    std::string text;
    for (const std::string& l : diagnostics.lines) text += "\n" + l;
    return Error(fmt::format("custom kernel @{}: {}{}", k.name, what, text));
  };
  if (!clang::CompilerInvocation::CreateFromArgs(ci.getInvocation(), argv, ci.getDiagnostics()))
    throw fail("Clang refused kiln's options");
  ci.getDiagnosticOpts().ShowCarets = false;  // also keeps "1 error generated." off stderr
  ci.getPreprocessorOpts().addRemappedFile(k.source_file,
                                           llvm::MemoryBuffer::getMemBufferCopy(k.source, k.source_file).release());
  ci.getPreprocessorOpts().RetainRemappedFileBuffers = false;
  llvm::LLVMContext ctx;
  clang::EmitLLVMOnlyAction action(&ctx);
  if (!ci.ExecuteAction(action) || !diagnostics.lines.empty())
    throw fail(fmt::format("Clang rejected its {} source:", k.language == CustomLanguage::C ? "C" : "OpenCL C"));
  std::unique_ptr<llvm::Module> m = action.takeModule();
  if (!m) throw fail("Clang produced no module");
  check_prototype(*m, k);
  if (k.language == CustomLanguage::OpenCLC && define_builtins) {
    std::vector<llvm::Function*> builtins;
    for (llvm::Function& f : *m)
      if (f.isDeclaration() && !f.isIntrinsic() && f.getName().starts_with("_Z")) builtins.push_back(&f);
    for (llvm::Function* f : builtins) define_builtin(*f, k);
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  llvm::WriteBitcodeToFile(*m, os);
  os.flush();
  return out;
}

}  // namespace

std::string clang_version() { return "clang " CLANG_VERSION_STRING; }

void check_custom_source(const CustomKernel& k, const std::vector<std::pair<std::string, int64_t>>& macros) {
  compile(k, macros, /*define_builtins=*/false);
}

std::string custom_bitcode(const CustomKernel& k, const std::vector<std::pair<std::string, int64_t>>& macros) {
  std::string key = k.digest;
  for (const auto& [name, value] : macros) key += fmt::format(" {}={}", name, value);
  Compiled& c = compiled();
  {
    std::lock_guard lock(c.mutex);
    if (auto it = c.bitcode.find(key); it != c.bitcode.end()) return it->second;
  }
  std::string bc = compile(k, macros, /*define_builtins=*/true);  // two threads may both compile: same result
  std::lock_guard lock(c.mutex);
  return c.bitcode.emplace(key, std::move(bc)).first->second;
}

}  // namespace kiln::cpu

namespace kiln {

void cpu_check_custom_kernel(const CustomKernel& k) {
  std::vector<std::pair<std::string, int64_t>> macros;
  for (const CustomTunable& t : k.signature.tunables) macros.emplace_back(t.macro, t.default_value);
  cpu::check_custom_source(k, macros);
  // Every value of a tunable must compile too: the tuner may pick any of them.
  for (size_t i = 0; i < macros.size(); ++i)
    for (int64_t v : k.signature.tunables[i].values) {
      if (v == macros[i].second) continue;
      auto other = macros;
      other[i].second = v;
      cpu::check_custom_source(k, other);
    }
}

std::string cpu_custom_kernel_llvm_ir(const CustomKernel& k) {
  std::vector<std::pair<std::string, int64_t>> macros;
  for (const CustomTunable& t : k.signature.tunables) macros.emplace_back(t.macro, t.default_value);
  llvm::LLVMContext ctx;
  auto m = llvm::parseBitcodeFile(llvm::MemoryBufferRef(cpu::custom_bitcode(k, macros), k.name), ctx);
  if (!m) throw Error(fmt::format("custom kernel @{}: reading its bitcode: {}", k.name, llvm::toString(m.takeError())));
  std::string out;
  llvm::raw_string_ostream os(out);
  (*m)->print(os, nullptr);
  return out;
}

}  // namespace kiln

namespace kiln::cpu {

std::unique_ptr<llvm::Module> custom_module(const std::string& bitcode, const CustomKernel& k, const std::string& symbol,
                                            llvm::LLVMContext& ctx) {
  auto m = llvm::parseBitcodeFile(llvm::MemoryBufferRef(bitcode, k.name), ctx);
  if (!m) throw Error(fmt::format("custom kernel @{}: reading its bitcode: {}", k.name, llvm::toString(m.takeError())));
  // Only the kernel's function stays external (the linker drops unreferenced internals);
  // the caller makes it internal once linked, so that LLVM may drop it after inlining.
  llvm::Function* f = (*m)->getFunction(k.name);
  for (llvm::Function& g : **m)
    if (!g.isDeclaration() && &g != f) g.setLinkage(llvm::GlobalValue::InternalLinkage);
  for (llvm::GlobalVariable& g : (*m)->globals())
    if (!g.isDeclaration()) g.setLinkage(llvm::GlobalValue::InternalLinkage);
  f->setName(symbol);
  f->removeFnAttr(llvm::Attribute::NoInline);
  f->addFnAttr(llvm::Attribute::AlwaysInline);
  return std::move(*m);
}

}  // namespace kiln::cpu
