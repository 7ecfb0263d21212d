// ir/lexer.cpp - splits IR text into tokens, tracking line and column.
#include "lexer.h"

#include <cctype>

namespace kiln::text {
namespace {
bool is_ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}
}  // namespace

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::Eof: return "end of file";
    case Tok::Value: return "'%" + std::string(t.text) + "'";
    case Tok::Global: return "'@" + std::string(t.text) + "'";
    default: return "'" + std::string(t.text) + "'";
  }
}

std::string unquote(std::string_view raw) {
  std::string out;
  for (size_t i = 1; i + 1 < raw.size(); ++i) {
    if (raw[i] != '\\' || i + 2 >= raw.size()) {
      out += raw[i];
      continue;
    }
    const char c = raw[++i];
    out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
  }
  return out;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else out += (c == '"' || c == '\\') ? std::string{'\\', c} : std::string{c};
  }
  return out + "\"";
}

void Lexer::advance() {
  if (peek() == '\n') {
    ++line_;
    col_ = 1;
  } else {
    ++col_;
  }
  ++pos_;
}

void Lexer::skip_space_and_comments() {
  for (;;) {
    if (std::isspace(static_cast<unsigned char>(peek()))) {
      advance();
    } else if (peek() == '/' && peek(1) == '/') {
      while (pos_ < text_.size() && peek() != '\n') advance();
    } else {
      return;
    }
  }
}

Token Lexer::next() {
  skip_space_and_comments();
  Token t;
  t.loc = {line_, col_};
  const size_t start = pos_;
  auto take = [&](Tok kind, size_t n) {
    for (size_t i = 0; i < n; ++i) advance();
    t.kind = kind;
    t.text = text_.substr(start, n);
    return t;
  };
  const char c = peek();
  if (c == '\0' && pos_ >= text_.size()) {
    t.kind = Tok::Eof;
    return t;
  }
  switch (c) {
    case '(': return take(Tok::LParen, 1);
    case ')': return take(Tok::RParen, 1);
    case '[': return take(Tok::LBracket, 1);
    case ']': return take(Tok::RBracket, 1);
    case '{': return take(Tok::LBrace, 1);
    case '}': return take(Tok::RBrace, 1);
    case ',': return take(Tok::Comma, 1);
    case ':': return take(Tok::Colon, 1);
    case '=': return take(Tok::Equal, 1);
    default: break;
  }
  if (c == '-' && peek(1) == '>') return take(Tok::Arrow, 2);
  if (c == '"') {
    advance();
    while (pos_ < text_.size() && peek() != '"' && peek() != '\n') {
      if (peek() == '\\' && pos_ + 1 < text_.size()) advance();
      advance();
    }
    if (peek() != '"') {
      t.kind = Tok::Invalid;
      t.text = text_.substr(start, 1);
      return t;
    }
    advance();
    t.kind = Tok::String;
    t.text = text_.substr(start, pos_ - start);
    return t;
  }
  if (c == '%' || c == '@') {
    advance();
    const size_t name_start = pos_;
    while (is_ident_char(peek())) advance();
    t.kind = c == '%' ? Tok::Value : Tok::Global;
    t.text = text_.substr(name_start, pos_ - name_start);
    if (t.text.empty()) {
      t.kind = Tok::Invalid;
      t.text = text_.substr(start, 1);
    }
    return t;
  }
  if (c == '-' && text_.substr(pos_, 4) == "-inf") return take(Tok::Ident, 4);
  if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.') {
    advance();
    while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '.' ||
           ((peek() == '-' || peek() == '+') && (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E')))
      advance();
    t.kind = Tok::Number;
    t.text = text_.substr(start, pos_ - start);
    return t;
  }
  if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
    while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_') advance();
    t.kind = Tok::Ident;
    t.text = text_.substr(start, pos_ - start);
    return t;
  }
  return take(Tok::Invalid, 1);
}

}  // namespace kiln::text
