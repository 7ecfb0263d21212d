// ir/parser.cpp - the IR text form, read. Recursive descent, one token of lookahead.
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include <fmt/format.h>

#include "kiln/ir/custom_kernel.h"
#include "kiln/ir/text.h"
#include "kiln/support/spelling.h"
#include "kiln/ir/dim.h"
#include "lexer.h"

namespace kiln {
namespace {

using text::Tok;
using text::Token;

class Parser {
 public:
  Parser(std::string_view source, std::string_view file, int first_line)
      : file_(file), lexer_(source, first_line) {
    tok_ = lexer_.next();
  }

  Expected<Graph> parse();

 private:
  // Every parse step returns false after recording the first error in err_.
  bool fail(SourceLoc loc, std::string message) {
    if (!err_) err_ = Diagnostic{file_, loc, std::move(message)};
    return false;
  }
  bool expected(std::string_view what) {
    return fail(tok_.loc, fmt::format("expected {}, found {}", what, describe(tok_)));
  }
  Token take() {
    Token t = tok_;
    tok_ = lexer_.next();
    return t;
  }
  bool accept(Tok kind) {
    if (tok_.kind != kind) return false;
    take();
    return true;
  }
  bool expect(Tok kind, std::string_view what) { return accept(kind) || expected(what); }
  bool at_ident(std::string_view word) const { return tok_.kind == Tok::Ident && tok_.text == word; }

  bool parse_int(int64_t& out, std::string_view what);
  bool int_of(const Token& t, int64_t& out, std::string_view what);
  /// A dim: an integer, or a polynomial of sizes (2*n+1) up to the next ',' or ']'.
  bool parse_dim_value(int64_t& out, std::string_view what);
  bool parse_scalar(Scalar& out);
  bool parse_type(TensorType& out);
  bool parse_attr_value(const AttrSpec& spec, AttrValue& out);
  bool parse_attrs(OpKind op, SourceLoc op_loc, Attrs& out);
  bool parse_use(ValueId& out);
  bool define(const Token& name, ValueId id);
  bool parse_node();
  bool parse_return(const std::vector<TensorType>& results, SourceLoc results_loc);
  bool parse_kernel();
  bool parse_custom_declaration();
  bool parse_custom_call(Node& n);
  Status check_kernel_headers() const;

  std::string file_;
  text::Lexer lexer_;
  Token tok_;
  std::optional<Diagnostic> err_;
  Graph graph_;
  std::unordered_map<std::string, std::pair<ValueId, SourceLoc>> names_;
  std::vector<SourceLoc> return_locs_;
  std::vector<TensorType> results_;
  // What each kernel header claims, checked against the body once everything is parsed.
  struct KernelHeader {
    int32_t kernel;
    SourceLoc loc;
    std::vector<ValueId> inputs;
    std::vector<Token> outputs;
  };
  std::vector<KernelHeader> kernel_headers_;
  std::unordered_map<std::string, std::shared_ptr<const CustomKernel>> customs_;
};

// custom c @softplus(f32) -> f32 [tunable T = [1, 2]] (source "..." | file "softplus.c")
bool Parser::parse_custom_declaration() {
  take();  // 'custom'
  if (tok_.kind != Tok::Ident || (tok_.text != "c" && tok_.text != "opencl"))
    return expected("the kernel's language, 'c' or 'opencl'");
  const CustomLanguage language = take().text == "c" ? CustomLanguage::C : CustomLanguage::OpenCLC;
  if (tok_.kind != Tok::Global) return expected("a custom kernel name such as @softplus");
  const Token name = take();
  if (customs_.count(std::string(name.text)))
    return fail(name.loc, fmt::format("custom kernel @{} is declared twice", name.text));
  // The signature runs up to 'source' or 'file'; its own parser reads it.
  const Token sig_start = tok_;
  const char* sig_end = sig_start.text.data();
  while (tok_.kind != Tok::Eof && !at_ident("source") && !at_ident("file")) {
    sig_end = tok_.text.data() + tok_.text.size();
    take();
  }
  if (tok_.kind == Tok::Eof) return expected("'source \"...\"' or 'file \"...\"' after the signature");
  auto sig = CustomSignature::parse(std::string_view(sig_start.text.data(), static_cast<size_t>(sig_end - sig_start.text.data())));
  if (!sig) return fail(sig_start.loc, sig.error().message);
  const bool from_file = take().text == "file";
  if (tok_.kind != Tok::String) return expected(from_file ? "a quoted file path" : "the quoted source");
  const Token str = take();
  std::string source = text::unquote(str.text), source_file;
  if (from_file) {
    std::filesystem::path path(source);
    if (path.is_relative() && file_ != "<stdin>") path = std::filesystem::path(file_).parent_path() / path;
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail(str.loc, fmt::format("cannot read custom kernel source '{}'", path.string()));
    source.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    source_file = path.string();
  }
  auto k = make_custom_kernel(std::string(name.text), language, std::move(source), std::move(source_file), std::move(*sig));
  if (!k) return fail(name.loc, k.error().message);
  customs_.emplace(std::string(name.text), std::move(*k));
  return true;
}

// `@softplus(%x, %y)` after 'custom'.
bool Parser::parse_custom_call(Node& n) {
  if (tok_.kind != Tok::Global) return expected("the custom kernel's name such as @softplus");
  const Token name = take();
  auto it = customs_.find(std::string(name.text));
  if (it == customs_.end())
    return fail(name.loc, fmt::format("custom kernel @{} is not declared (declare it before the graph: custom c @{}(f32) "
                                      "-> f32 file \"{}.c\")", name.text, name.text, name.text));
  n.attrs = Graph::make_attrs(OpKind::Custom);
  n.attrs[0].present = true;
  n.attrs[0].custom = it->second;
  if (!expect(Tok::LParen, "'(' and the operands")) return false;
  do {
    ValueId v = 0;
    if (!parse_use(v)) return false;
    n.operands.push_back(v);
  } while (accept(Tok::Comma));
  return expect(Tok::RParen, "',' or ')' after an operand");
}

bool Parser::parse_kernel() {
  take();  // 'kernel'
  if (tok_.kind != Tok::Global) return expected("a kernel name such as @k0");
  const Token name = take();
  for (const KernelRegion& k : graph_.kernels())
    if (k.name == name.text) return fail(name.loc, fmt::format("kernel @{} is defined twice", name.text));
  KernelHeader h{0, name.loc, {}, {}};
  if (!expect(Tok::LParen, "'(' and the values the kernel reads")) return false;
  if (!accept(Tok::RParen)) {
    do {
      ValueId v = 0;
      if (!parse_use(v)) return false;
      h.inputs.push_back(v);
    } while (accept(Tok::Comma));
    if (!expect(Tok::RParen, "',' or ')' after a kernel input")) return false;
  }
  if (!expect(Tok::Arrow, "'->' and the values the kernel produces")) return false;
  if (!expect(Tok::LParen, "'(' and the values the kernel produces")) return false;
  if (!accept(Tok::RParen)) {  // "()": nothing used outside, e.g. fused dead code
    do {
      if (tok_.kind != Tok::Value) return expected("a value such as %y");
      h.outputs.push_back(take());
    } while (accept(Tok::Comma));
    if (!expect(Tok::RParen, "',' or ')' after a kernel output")) return false;
  }
  std::string note;
  if (at_ident("note")) {
    take();
    if (tok_.kind != Tok::String) return expected("a quoted note");
    note = text::unquote(take().text);
  }
  if (!expect(Tok::LBrace, "'{' to start the kernel body")) return false;
  h.kernel = graph_.add_kernel(KernelRegion{std::string(name.text), std::move(note)});
  while (tok_.kind == Tok::Value) {
    if (!parse_node()) return false;
    graph_.node(static_cast<ValueId>(graph_.size() - 1)).kernel = h.kernel;
  }
  if (!expect(Tok::RBrace, "a definition such as '%y = ...' or '}' to end the kernel")) return false;
  kernel_headers_.push_back(std::move(h));
  return true;
}

// The header is derived information written out for the reader; it must say the truth.
Status Parser::check_kernel_headers() const {
  auto list = [&](const std::vector<ValueId>& values) {
    std::string s;
    for (ValueId v : values) s += (s.empty() ? "%" : ", %") + graph_.node(v).name;
    return "(" + s + ")";
  };
  const KernelIndex index = graph_.kernel_index();
  for (const KernelHeader& h : kernel_headers_) {
    const auto k = static_cast<size_t>(h.kernel);
    const std::string& name = graph_.kernels()[k].name;
    std::vector<ValueId> outputs;
    for (const Token& t : h.outputs) {
      auto it = names_.find(std::string(t.text));
      if (it == names_.end()) return Diagnostic{file_, t.loc, fmt::format("use of undefined value '%{}'", t.text)};
      outputs.push_back(it->second.first);
    }
    if (index.members[k].empty())
      return Diagnostic{file_, h.loc, fmt::format("kernel @{} has no operations", name)};
    if (const auto& inputs = index.inputs[k]; inputs != h.inputs)
      return Diagnostic{file_, h.loc, fmt::format("kernel @{} lists inputs {} but its body reads {}", name,
                                                  list(h.inputs), list(inputs))};
    if (const auto& produced = index.outputs[k]; produced != outputs)
      return Diagnostic{file_, h.loc, fmt::format("kernel @{} lists outputs {} but the values used outside it are {}",
                                                  name, list(outputs), list(produced))};
  }
  return Status::ok();
}

bool Parser::parse_int(int64_t& out, std::string_view what) {
  if (tok_.kind != Tok::Number) return expected(what);
  return int_of(take(), out, what);
}

bool Parser::int_of(const Token& t, int64_t& out, std::string_view what) {
  const char* end = t.text.data() + t.text.size();
  auto [ptr, ec] = std::from_chars(t.text.data() + (t.text[0] == '+'), end, out);
  if (ec == std::errc::result_out_of_range && ptr == end)
    return fail(t.loc, fmt::format("integer {} is out of range for int64", t.text));
  if (ec != std::errc() || ptr != end)
    return fail(t.loc, fmt::format("expected {}, found '{}'", what, t.text));
  return true;
}

bool Parser::parse_dim_value(int64_t& out, std::string_view what) {
  // Numbers, names and '*' (an Invalid token to the lexer); '+2' and '-n' lex as numbers.
  auto in_dim = [](Tok k) { return k == Tok::Number || k == Tok::Ident || k == Tok::Invalid; };
  if (!in_dim(tok_.kind)) return expected(what);
  const Token first = take();
  Token last = first;
  while (in_dim(tok_.kind)) last = take();
  if (first.text.data() == last.text.data() && first.kind == Tok::Number) {
    if (!int_of(first, out, what)) return false;
    // Numbers that low are how symbolic dims are held: no dim or bound is written so.
    if (is_symbolic_dim(out)) return fail(first.loc, fmt::format("{} is out of range for a dimension", first.text));
    return true;
  }
  const std::string_view text(first.text.data(),
                              static_cast<size_t>(last.text.data() + last.text.size() - first.text.data()));
  std::string error;
  const std::optional<int64_t> d = parse_dim(text, &error);
  if (!d) return fail(first.loc, error);
  out = *d;
  return true;
}

bool Parser::parse_scalar(Scalar& out) {
  if (tok_.kind == Tok::Ident) {
    const Token t = take();
    if (t.text == "true" || t.text == "false") out = Scalar::from_int(t.text == "true");
    else if (t.text == "inf") out = Scalar::from_float(HUGE_VAL);
    else if (t.text == "-inf") out = Scalar::from_float(-HUGE_VAL);
    else if (t.text == "nan") out = Scalar::from_float(NAN);
    else return fail(t.loc, fmt::format("expected a number, found '{}'", t.text));
    return true;
  }
  if (tok_.kind != Tok::Number) return expected("a number");
  if (tok_.text == "+inf") {
    take();
    out = Scalar::from_float(HUGE_VAL);
    return true;
  }
  if (tok_.text.find_first_of(".eE") == std::string_view::npos) {
    int64_t v = 0;
    if (!parse_int(v, "a number")) return false;
    out = Scalar::from_int(v);
    return true;
  }
  const Token t = take();
  const std::string s(t.text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || s.find_first_of("xX") != std::string::npos)
    return fail(t.loc, fmt::format("expected a number, found '{}'", s));
  if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL))
    return fail(t.loc, fmt::format("{} is out of range for f64 (write {} for infinity)", s, v < 0 ? "-inf" : "inf"));
  out = Scalar::from_float(v);
  return true;
}

bool Parser::parse_type(TensorType& out) {
  if (tok_.kind != Tok::Ident) return expected("a type such as f32[4,4]");
  const Token name = take();
  const auto dtype = parse_dtype(name.text);
  if (!dtype)
    return fail(name.loc, fmt::format("unknown element type '{}' (expected bool, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32 or f64)", name.text));
  out.dtype = *dtype;
  out.shape = Shape();
  if (!expect(Tok::LBracket, "'[' after the element type")) return false;
  if (accept(Tok::RBracket)) return true;
  int64_t numel = 1;
  do {
    const SourceLoc loc = tok_.loc;
    int64_t d = 0;
    if (!parse_dim_value(d, "a dimension")) return false;
    if (d < 0 && !is_symbolic_dim(d)) return fail(loc, fmt::format("dimension {} is negative", d));
    if (d > 0 && numel > INT64_MAX / d)
      return fail(loc, "the shape has more elements than an int64 can count");
    if (!is_symbolic_dim(d)) numel *= d == 0 ? 1 : d;
    if (out.shape.rank() == Shape::kMaxRank)
      return fail(loc, fmt::format("rank exceeds kiln's maximum rank of {}", Shape::kMaxRank));
    out.shape.push_back(d);
  } while (accept(Tok::Comma));
  return expect(Tok::RBracket, "',' or ']' in the shape");
}

bool Parser::parse_attr_value(const AttrSpec& spec, AttrValue& out) {
  out.present = true;
  if (spec.kind == AttrKind::Flag) return true;
  if (!expect(Tok::Equal, fmt::format("'=' after attribute '{}'", spec.name))) return false;
  switch (spec.kind) {
    case AttrKind::Flag: return true;
    case AttrKind::Custom: return expected("nothing: a custom kernel is named as @name after 'custom'");
    case AttrKind::Int: return parse_int(out.i, fmt::format("an integer for '{}'", spec.name));
    case AttrKind::Scalar: return parse_scalar(out.scalar);
    case AttrKind::Ints:
    case AttrKind::Dims:
    case AttrKind::Scalars: {
      if (!expect(Tok::LBracket, fmt::format("'[' to start the list '{}'", spec.name))) return false;
      auto scalars = std::make_shared<std::vector<Scalar>>();
      if (!accept(Tok::RBracket)) {
        do {
          if (spec.kind == AttrKind::Ints || spec.kind == AttrKind::Dims) {
            int64_t v = 0;
            if (spec.kind == AttrKind::Dims ? !parse_dim_value(v, fmt::format("a dimension in '{}'", spec.name))
                                            : !parse_int(v, fmt::format("an integer in '{}'", spec.name)))
              return false;
            out.ints.push_back(v);
          } else {
            Scalar s;
            if (!parse_scalar(s)) return false;
            scalars->push_back(s);
          }
        } while (accept(Tok::Comma));
        if (!expect(Tok::RBracket, fmt::format("',' or ']' in '{}'", spec.name))) return false;
      }
      if (spec.kind == AttrKind::Scalars) out.scalars = std::move(scalars);
      return true;
    }
  }
  return true;
}

bool Parser::parse_attrs(OpKind op, SourceLoc op_loc, Attrs& out) {
  const OpInfo& info = op_info(op);
  out = Graph::make_attrs(op);
  if (accept(Tok::LBrace)) {
    do {
      if (tok_.kind != Tok::Ident) return expected("an attribute name");
      const Token name = take();
      const int i = attr_index(op, name.text);
      if (i < 0) {
        std::string known;
        std::vector<std::string_view> names;
        for (const AttrSpec& s : info.attrs) {
          known += (known.empty() ? "" : ", ") + std::string(s.name);
          names.push_back(s.name);
        }
        return fail(name.loc, fmt::format("'{}' has no attribute '{}'{} ({})", info.name, name.text,
                                          did_you_mean(name.text, names),
                                          known.empty() ? "it takes none" : "expected one of: " + known));
      }
      AttrValue& v = out[static_cast<size_t>(i)];
      if (v.present) return fail(name.loc, fmt::format("attribute '{}' is given twice", name.text));
      if (!parse_attr_value(info.attrs[static_cast<size_t>(i)], v)) return false;
    } while (accept(Tok::Comma));
    if (!expect(Tok::RBrace, "',' or '}' in the attributes")) return false;
  }
  for (size_t i = 0; i < info.attrs.size(); ++i)
    if (info.attrs[i].required && !out[i].present)
      return fail(op_loc, fmt::format("'{}' needs attribute '{}'", info.name, info.attrs[i].name));
  return true;
}

bool Parser::parse_use(ValueId& out) {
  if (tok_.kind != Tok::Value) return expected("a value such as %x");
  const Token t = take();
  auto it = names_.find(std::string(t.text));
  if (it == names_.end()) return fail(t.loc, fmt::format("use of undefined value '%{}'", t.text));
  out = it->second.first;
  return true;
}

bool Parser::define(const Token& name, ValueId id) {
  auto [it, inserted] = names_.emplace(std::string(name.text), std::pair{id, name.loc});
  if (!inserted)
    return fail(name.loc, fmt::format("value '%{}' is defined twice (first at line {}, column {})",
                                      name.text, it->second.second.line, it->second.second.col));
  return true;
}

// Scalars attributes are stored as the result element type holds them (0.1 in an f32
// constant is the float nearest 0.1), so printing gives the shortest text for that type.
void canonicalize_scalars(Node& n) {
  const DType t = n.type.dtype;
  // Integers are kept as written: the type rule rejects those that do not fit the type.
  auto canon = [t](Scalar s) { return is_float(t) ? s.cast_to(t) : s; };
  const auto specs = n.info().attrs;
  for (size_t i = 0; i < specs.size(); ++i) {
    AttrValue& v = n.attrs[i];
    if (!v.present) continue;
    if (specs[i].kind == AttrKind::Scalar) v.scalar = canon(v.scalar);
    if (specs[i].kind == AttrKind::Scalars) {
      auto values = std::make_shared<std::vector<Scalar>>(*v.scalars);
      for (Scalar& s : *values) s = canon(s);
      v.scalars = std::move(values);
    }
  }
}

bool Parser::parse_node() {
  const Token name = take();  // a Value token, checked by the caller
  if (!expect(Tok::Equal, fmt::format("'=' after '%{}'", name.text))) return false;
  if (tok_.kind != Tok::Ident) return expected("an operation name");
  const Token op_tok = take();
  const auto op = lookup_op(op_tok.text);
  if (!op || *op == OpKind::Input) {
    std::vector<std::string_view> names;
    for (const OpInfo& info : all_ops())
      if (info.kind != OpKind::Input) names.push_back(info.name);
    return fail(op_tok.loc, fmt::format("unknown operation '{}'{}", op_tok.text, did_you_mean(op_tok.text, names)));
  }
  Node n;
  n.op = *op;
  n.name = std::string(name.text);
  n.loc = op_tok.loc;
  if (*op == OpKind::Custom) {
    if (!parse_custom_call(n)) return false;
    if (!expect(Tok::Colon, "':' and the result type")) return false;
    if (!parse_type(n.type)) return false;
    return define(name, graph_.add_unchecked(std::move(n)));
  }
  if (tok_.kind == Tok::Value) {
    do {
      ValueId v = 0;
      if (!parse_use(v)) return false;
      n.operands.push_back(v);
    } while (accept(Tok::Comma));
  }
  const OpInfo& info = op_info(*op);
  if (info.arity >= 0 ? static_cast<int>(n.operands.size()) != info.arity : n.operands.empty())
    return fail(op_tok.loc, fmt::format("'{}' takes {} operand{}, got {}", info.name,
                                        info.arity >= 0 ? std::to_string(info.arity) : "one or more",
                                        info.arity == 1 ? "" : "s", n.operands.size()));
  if (!parse_attrs(*op, op_tok.loc, n.attrs)) return false;
  if (!expect(Tok::Colon, "':' and the result type")) return false;
  if (!parse_type(n.type)) return false;
  canonicalize_scalars(n);
  return define(name, graph_.add_unchecked(std::move(n)));
}

bool Parser::parse_return(const std::vector<TensorType>& results, SourceLoc results_loc) {
  const Token ret = take();
  std::vector<ValueId> outputs;
  std::vector<SourceLoc> locs;
  do {
    locs.push_back(tok_.loc);
    ValueId v = 0;
    if (!parse_use(v)) return false;
    outputs.push_back(v);
  } while (accept(Tok::Comma));
  if (outputs.size() != results.size())
    return fail(ret.loc, fmt::format("'return' gives {} value{} but the signature at line {} declares {}",
                                     outputs.size(), outputs.size() == 1 ? "" : "s", results_loc.line,
                                     results.size()));
  return_locs_ = std::move(locs);
  results_ = results;
  graph_.set_outputs(std::move(outputs));
  return expect(Tok::RBrace, "'}' after 'return'");
}

Expected<Graph> Parser::parse() {
  auto run = [&]() -> bool {
    while (at_ident("custom"))
      if (!parse_custom_declaration()) return false;
    if (!at_ident("graph")) return expected(customs_.empty() ? "'graph'" : "'custom' or 'graph'");
    take();
    if (tok_.kind != Tok::Global) return expected("a graph name such as @main");
    graph_.set_name(std::string(take().text));
    graph_.set_file(file_);
    if (!expect(Tok::LParen, "'(' to start the parameters")) return false;
    if (!accept(Tok::RParen)) {
      do {
        if (tok_.kind != Tok::Value) return expected("a parameter such as %x");
        const Token name = take();
        if (!expect(Tok::Colon, "':' after the parameter name")) return false;
        TensorType t;
        if (!parse_type(t)) return false;
        const ValueId id = graph_.add_input(std::string(name.text), t);
        graph_.node(id).loc = name.loc;
        if (!define(name, id)) return false;
      } while (accept(Tok::Comma));
      if (!expect(Tok::RParen, "',' or ')' after a parameter")) return false;
    }
    if (!expect(Tok::Arrow, "'->' and the result types")) return false;
    const SourceLoc results_loc = tok_.loc;
    std::vector<TensorType> results;
    const bool several = accept(Tok::LParen);
    do {
      TensorType t;
      if (!parse_type(t)) return false;
      results.push_back(t);
    } while (several && accept(Tok::Comma));
    if (several && !expect(Tok::RParen, "',' or ')' after a result type")) return false;
    if (!expect(Tok::LBrace, "'{' to start the graph body")) return false;
    for (;;) {
      if (tok_.kind == Tok::Value) {
        if (!parse_node()) return false;
      } else if (at_ident("kernel")) {
        if (!parse_kernel()) return false;
      } else if (at_ident("return")) {
        if (!parse_return(results, results_loc)) return false;
        break;
      } else {
        return expected("a definition such as '%y = ...', 'kernel' or 'return'");
      }
    }
    if (tok_.kind != Tok::Eof) return expected("end of file after the graph");
    return true;
  };
  if (!run()) return *err_;
  // Types are checked only now, so that an error points at the node that is wrong rather
  // than at a 'return' whose value merely inherits the wrong type.
  if (Status st = verify(graph_); !st) return st.error();
  if (Status st = check_kernel_headers(); !st) return st.error();
  for (size_t i = 0; i < results_.size(); ++i) {
    const TensorType& t = graph_.type(graph_.outputs()[i]);
    if (!(t == results_[i]))
      return Diagnostic{file_, return_locs_[i],
                        fmt::format("returned value has type {} but the signature declares {}",
                                    t.str(), results_[i].str())};
  }
  return std::move(graph_);
}

}  // namespace

Expected<Graph> parse_graph(std::string_view text, std::string_view file, int first_line) {
  return Parser(text, file, first_line).parse();
}

std::vector<TextChunk> split_input(std::string_view text) {
  std::vector<TextChunk> chunks;
  size_t chunk_start = 0, pos = 0;
  int line = 1, chunk_line = 1;
  while (pos <= text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view content = text.substr(pos, eol - pos);
    while (!content.empty() && (content.back() == ' ' || content.back() == '\r')) content.remove_suffix(1);
    if (content == "// -----") {
      chunks.push_back({text.substr(chunk_start, pos - chunk_start), chunk_line});
      chunk_start = eol + 1;
      chunk_line = line + 1;
    }
    pos = eol + 1;
    ++line;
  }
  if (chunk_start <= text.size()) chunks.push_back({text.substr(chunk_start), chunk_line});
  return chunks;
}

}  // namespace kiln
