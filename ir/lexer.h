// ir/lexer.h - tokens of the IR text form (internal to ir/).
#pragma once

#include <string>
#include <string_view>

#include "kiln/support/error.h"

namespace kiln::text {

enum class Tok {
  Eof, Value, Global, Ident, Number, LParen, RParen, LBracket, RBracket, LBrace, RBrace,
  Comma, Colon, Equal, Arrow, String, Invalid,
};

struct Token {
  Tok kind = Tok::Eof;
  std::string_view text;  // without the sigil for %value and @global; a String's raw text
  SourceLoc loc;
};

/// What a token looks like in "expected X, found Y" messages.
std::string describe(const Token& t);

/// The value of a String token's raw text `"..."` (escapes \" \\ \n \t undone).
std::string unquote(std::string_view raw);
/// `s` as a string literal that unquote() reads back.
std::string quote(std::string_view s);

class Lexer {
 public:
  Lexer(std::string_view text, int first_line) : text_(text), line_(first_line) {}
  Token next();

 private:
  void skip_space_and_comments();
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  void advance();

  std::string_view text_;
  size_t pos_ = 0;
  int line_;
  int col_ = 1;
};

}  // namespace kiln::text
