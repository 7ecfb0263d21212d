// ir/custom_kernel.cpp - custom kernel definitions: signatures, checks, digests, the host hook.
#include "kiln/ir/custom_kernel.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/ir/hash.h"
#include "lexer.h"

namespace kiln {
namespace {

using text::Tok;

bool is_c_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// The signature's own small grammar, read with the IR's lexer.
class SignatureParser {
 public:
  explicit SignatureParser(std::string_view text) : lexer_(text, 1) { tok_ = lexer_.next(); }

  Expected<CustomSignature> parse() {
    CustomSignature sig;
    if (!expect(Tok::LParen, "'(' and the parameter types")) return error();
    if (tok_.kind != Tok::RParen) {
      do {
        DType t{};
        if (!dtype(t)) return error();
        sig.params.push_back(t);
      } while (accept(Tok::Comma));
    }
    if (!expect(Tok::RParen, "',' or ')' after a parameter type")) return error();
    if (!expect(Tok::Arrow, "'->' and the result type")) return error();
    if (!dtype(sig.result)) return error();
    while (tok_.kind == Tok::Ident && tok_.text == "tunable") {
      take();
      CustomTunable t;
      if (tok_.kind != Tok::Ident) return fail("a macro name such as UNROLL");
      t.macro = std::string(take().text);
      if (!expect(Tok::Equal, "'=' and the macro's values")) return error();
      if (!expect(Tok::LBracket, "'[' and the macro's values")) return error();
      do {
        int64_t v = 0;
        if (!integer(v)) return error();
        t.values.push_back(v);
      } while (accept(Tok::Comma));
      if (!expect(Tok::RBracket, "',' or ']' after a value")) return error();
      t.default_value = t.values.front();
      if (tok_.kind == Tok::Ident && tok_.text == "default") {
        take();
        if (!integer(t.default_value)) return error();
      }
      sig.tunables.push_back(std::move(t));
    }
    if (tok_.kind != Tok::Eof) return fail("'tunable' or the end of the signature");
    return sig;
  }

 private:
  Diagnostic error() const { return *err_; }
  Diagnostic fail(std::string_view what) {
    if (!err_)
      err_ = make_error(fmt::format("custom kernel signature, column {}: expected {}, found {}", tok_.loc.col, what,
                                    text::describe(tok_)));
    return *err_;
  }
  bool expect(Tok kind, std::string_view what) {
    if (accept(kind)) return true;
    fail(what);
    return false;
  }
  bool accept(Tok kind) {
    if (tok_.kind != kind) return false;
    take();
    return true;
  }
  text::Token take() {
    text::Token t = tok_;
    tok_ = lexer_.next();
    return t;
  }
  bool dtype(DType& out) {
    // Only the compute types: the C signature's parameters are the kernel's registers.
    auto t = tok_.kind == Tok::Ident ? parse_dtype(tok_.text) : std::nullopt;
    if (t && !is_compute_dtype(*t)) t.reset();
    if (!t) {
      fail("an element type (bool, i32, i64, f32, f64)");
      return false;
    }
    take();
    out = *t;
    return true;
  }
  bool integer(int64_t& out) {
    if (tok_.kind == Tok::Number) {
      const std::string_view s = tok_.text;
      auto [ptr, ec] = std::from_chars(s.data() + (s[0] == '+'), s.data() + s.size(), out);
      if (ec == std::errc() && ptr == s.data() + s.size()) {
        take();
        return true;
      }
    }
    fail("an integer");
    return false;
  }

  text::Lexer lexer_;
  text::Token tok_;
  std::optional<Diagnostic> err_;
};

}  // namespace

std::string_view custom_language_name(CustomLanguage l) { return l == CustomLanguage::C ? "c" : "opencl"; }

Expected<CustomSignature> CustomSignature::parse(std::string_view text) { return SignatureParser(text).parse(); }

std::string CustomSignature::str() const {
  std::vector<std::string_view> names;
  for (DType t : params) names.push_back(dtype_name(t));
  std::string s = fmt::format("({}) -> {}", fmt::join(names, ", "), dtype_name(result));
  for (const CustomTunable& t : tunables) {
    s += fmt::format(" tunable {} = [{}]", t.macro, fmt::join(t.values, ", "));
    if (t.default_value != t.values.front()) s += fmt::format(" default {}", t.default_value);
  }
  return s;
}

Expected<std::shared_ptr<const CustomKernel>> make_custom_kernel(std::string name, CustomLanguage language,
                                                                  std::string source, std::string source_file,
                                                                  CustomSignature signature) {
  auto fail = [&](std::string why) { return make_error(fmt::format("custom kernel @{}: {}", name, why)); };
  if (!is_c_identifier(name)) return fail("its name must be a C identifier (the function's name in its source)");
  if (name.starts_with("kiln_")) return fail("names starting with kiln_ are kiln's own (its helpers and entry points)");
  if (signature.params.empty()) return fail("its signature needs at least one parameter");
  std::vector<std::string_view> macros;
  for (const CustomTunable& t : signature.tunables) {
    if (!is_c_identifier(t.macro)) return fail(fmt::format("tunable '{}' is not a C identifier", t.macro));
    if (std::find(macros.begin(), macros.end(), t.macro) != macros.end())
      return fail(fmt::format("tunable {} is declared twice", t.macro));
    macros.push_back(t.macro);
    if (t.values.empty()) return fail(fmt::format("tunable {} has no values", t.macro));
    if (std::find(t.values.begin(), t.values.end(), t.default_value) == t.values.end())
      return fail(fmt::format("tunable {}'s default {} is not one of its values [{}]", t.macro, t.default_value,
                              fmt::join(t.values, ", ")));
  }
  auto k = std::make_shared<CustomKernel>();
  k->name = std::move(name);
  k->language = language;
  k->source = std::move(source);
  k->source_file = source_file.empty() ? k->name + (language == CustomLanguage::C ? ".c" : ".cl") : std::move(source_file);
  k->signature = std::move(signature);
  k->digest = hash_text(fmt::format("custom {} {} {}\n{}", custom_language_name(k->language), k->name,
                                    k->signature.str(), k->source))
                  .hex();
  return std::shared_ptr<const CustomKernel>(std::move(k));
}

std::string custom_declaration(const CustomKernel& k) {
  return fmt::format("custom {} @{}{} source {}", custom_language_name(k.language), k.name, k.signature.str(),
                     text::quote(k.source));
}

namespace {

struct HostFunctions {
  std::mutex mutex;
  CustomHostFactory factory;
  std::map<std::string, CustomHostFn> built;  // by digest
};

HostFunctions& host_functions() {
  static HostFunctions* h = new HostFunctions();  // never destroyed: used during static destruction
  return *h;
}

}  // namespace

void set_custom_host_factory(CustomHostFactory factory) {
  HostFunctions& h = host_functions();
  std::lock_guard lock(h.mutex);
  h.factory = std::move(factory);
}

CustomHostFn custom_host_function(const CustomKernel& k) {
  HostFunctions& h = host_functions();
  std::lock_guard lock(h.mutex);
  if (auto it = h.built.find(k.digest); it != h.built.end()) return it->second;
  if (!h.factory)
    throw Error(fmt::format("custom kernel @{}: nothing in this program can run C on the host (kiln::register_custom_host(), "
                            "which engine_for calls, installs the cpu backend's compiler)",
                            k.name));
  CustomHostFn fn = h.factory(k);
  h.built.emplace(k.digest, fn);
  return fn;
}

}  // namespace kiln
