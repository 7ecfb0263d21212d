// kiln/ir/dim.h - dims of a shape: sizes, or polynomials of named sizes (symbolic dims).
//
// A Shape's dim is an int64: a size (>= 0), or a symbolic dim such as `n`, `2*n+1` or `b*t`
// (docs/ir.md, "Symbolic dims"). A symbolic dim is a polynomial over named sizes with integer
// coefficients, kept in a canonical form (terms ordered, like terms merged, no zero terms)
// and interned process-wide; the int64 is its id, below kMaxSymbolicDim, a range no size or
// invalid negative dim reaches. Equal polynomials are one id, so `a == b` on two dims proves
// them equal for every value of their sizes; unequal ids are dims that are not provably
// equal. A polynomial that reduces to a number is that number (n - n is 0).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// The largest int64 that encodes a symbolic dim; every symbolic dim is <= it.
inline constexpr int64_t kMaxSymbolicDim = INT64_MIN + (int64_t{1} << 40);

inline bool is_symbolic_dim(int64_t d) { return d <= kMaxSymbolicDim; }

/// Whether `name` can name a size: a letter or '_', then letters, digits and '_'.
bool is_dim_symbol_name(std::string_view name);
/// The symbolic dim that is the size called `name` (is_dim_symbol_name).
int64_t dim_symbol(std::string_view name);

/// a + b, a * b and a - b: a number when both are numbers, else the canonical polynomial.
/// nullopt when a number or a coefficient overflows int64.
std::optional<int64_t> dim_add(int64_t a, int64_t b);
std::optional<int64_t> dim_sub(int64_t a, int64_t b);
std::optional<int64_t> dim_mul(int64_t a, int64_t b);
/// a / b when it is exact for every value of the sizes: every term of `a` divisible by `b`,
/// which is a number or a single term (768*n / 12 is 64*n; n*t / t is n). nullopt otherwise.
std::optional<int64_t> dim_exact_div(int64_t a, int64_t b);

/// "n", "2*n+1", "b*t-4", "n*n"; a number as itself.
std::string dim_str(int64_t d);
/// The names of the sizes `d` reads, sorted; empty for a number.
std::vector<std::string> dim_symbols(int64_t d);

/// Values of named sizes.
using DimBindings = std::map<std::string, int64_t, std::less<>>;
/// `d` with its sizes given by `b`: nullopt when one is missing or the value overflows.
std::optional<int64_t> dim_value(int64_t d, const DimBindings& b);

/// Parses a dim as dim_str writes it (spaces allowed): numbers, sizes, '*', '+' and '-'.
/// nullopt, with `error` set, on bad text or overflow.
std::optional<int64_t> parse_dim(std::string_view text, std::string* error);

}  // namespace kiln
