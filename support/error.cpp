// support/error.cpp - diagnostics formatting and the internal-assert sink.
#include "kiln/support/error.h"

#include <fmt/format.h>

namespace kiln {

std::string Diagnostic::str() const {
  std::string out;
  if (!file.empty()) {
    out += file;
    if (loc.known()) out += fmt::format(":{}:{}", loc.line, loc.col);
    out += ": ";
  } else if (loc.known()) {
    out += fmt::format("{}:{}: ", loc.line, loc.col);
  }
  out += "error: ";
  out += message;
  return out;
}

namespace detail {
void assertion_failed(const char* expr, const char* message, const char* file, int line) {
  std::fprintf(stderr, "kiln internal error: %s (%s) at %s:%d\nThis is a kiln bug.\n", message,
               expr, file, line);
  std::abort();
}
}  // namespace detail

}  // namespace kiln
