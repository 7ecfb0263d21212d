// kiln/support/error.h - user errors, located diagnostics and internal invariants.
//
// Two kinds of failure, kept apart as Halide does: a user error is something the caller
// can fix (bad IR text, mismatched shapes) and reaches them as a Diagnostic or a thrown
// kiln::Error with a message they can act on; a broken invariant is a kiln bug and goes
// through KILN_ASSERT, which names the invariant and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace kiln {

/// A position in an IR text file. `line` and `col` are 1-based; 0 means unknown.
struct SourceLoc {
  int line = 0;
  int col = 0;
  bool known() const { return line > 0; }
};

/// A user-facing error with an optional location, printed as
/// `file:line:col: error: message` (the parts that are unknown are left out).
struct Diagnostic {
  std::string file;
  SourceLoc loc;
  std::string message;

  std::string str() const;
};

/// The exception the public API throws for errors a user can fix.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  explicit Error(const Diagnostic& d) : std::runtime_error(d.str()) {}
};

/// Either a value or the Diagnostic that explains why there is none (LLVM's Expected,
/// without the obligation to check). Parser, verifier and type rules return these.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}                // NOLINT: implicit by design
  Expected(Diagnostic error) : v_(std::move(error)) {}       // NOLINT: implicit by design

  explicit operator bool() const { return v_.index() == 0; }
  T& operator*() & { return std::get<0>(v_); }
  const T& operator*() const& { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  const Diagnostic& error() const { return std::get<1>(v_); }

  /// The value, or throws kiln::Error with the diagnostic.
  T take() && {
    if (!*this) throw Error(error());
    return std::move(std::get<0>(v_));
  }

 private:
  std::variant<T, Diagnostic> v_;
};

/// Success or a Diagnostic, for checks that produce nothing.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Diagnostic error) : error_(std::move(error)) {}  // NOLINT: implicit by design
  static Status ok() { return {}; }

  explicit operator bool() const { return !error_; }
  const Diagnostic& error() const { return *error_; }
  void throw_if_error() const {
    if (error_) throw Error(*error_);
  }

 private:
  std::optional<Diagnostic> error_;
};

/// A Diagnostic with only a message (a location is added by whoever knows it).
inline Diagnostic make_error(std::string message) { return Diagnostic{{}, {}, std::move(message)}; }

namespace detail {
[[noreturn]] void assertion_failed(const char* expr, const char* message, const char* file,
                                   int line);
}  // namespace detail

}  // namespace kiln

/// Checks an internal invariant. A failure is a kiln bug, never a user error.
#define KILN_ASSERT(cond, message)                                                 \
  do {                                                                             \
    if (!(cond)) ::kiln::detail::assertion_failed(#cond, message, __FILE__, __LINE__); \
  } while (false)
