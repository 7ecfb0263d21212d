// ir/dim.cpp - symbolic dims: canonical polynomials over named sizes, interned.
//
// A polynomial is a list of terms, each a coefficient and a sorted list of size names (n*n
// is {n, n}). Canonical order: higher degree first, then names in lexicographic order, the
// number last; like terms merged; zero terms dropped. Its printed form is its interning key,
// so ids depend on nothing but the polynomial within a process, and the text is the same in
// every process (canonical serializations write the text, never the id).
#include "kiln/ir/dim.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "kiln/support/error.h"

namespace kiln {
namespace {

struct Term {
  int64_t coef = 0;
  std::vector<std::string> names;  // sorted; repeated for powers
};
using Poly = std::vector<Term>;

bool term_before(const Term& a, const Term& b) {
  if (a.names.size() != b.names.size()) return a.names.size() > b.names.size();
  return a.names < b.names;
}

std::string poly_str(const Poly& p) {
  if (p.empty()) return "0";
  std::string s;
  for (size_t i = 0; i < p.size(); ++i) {
    const Term& t = p[i];
    // |coef| as unsigned: a coefficient may be INT64_MIN.
    const uint64_t magnitude = t.coef < 0 ? ~static_cast<uint64_t>(t.coef) + 1 : static_cast<uint64_t>(t.coef);
    if (i > 0) s += t.coef < 0 ? "-" : "+";
    else if (t.coef < 0) s += "-";
    const bool show_coef = t.names.empty() || magnitude != 1;
    if (show_coef) s += std::to_string(magnitude);
    for (size_t k = 0; k < t.names.size(); ++k) {
      if (show_coef || k > 0) s += "*";
      s += t.names[k];
    }
  }
  return s;
}

class DimTable {
 public:
  static DimTable& get() {
    static DimTable* table = new DimTable;  // never destroyed: dims live as long as the process
    return *table;
  }

  int64_t intern(Poly p) {
    const std::string key = poly_str(p);
    std::lock_guard lock(mutex_);
    auto [it, inserted] = ids_.try_emplace(key, 0);
    if (inserted) {
      if (polys_.size() >= (size_t{1} << 40)) throw Error("too many distinct symbolic dims in one process");
      it->second = INT64_MIN + static_cast<int64_t>(polys_.size());
      polys_.push_back(std::move(p));
      texts_.push_back(key);
    }
    return it->second;
  }

  Poly poly(int64_t id) {
    std::lock_guard lock(mutex_);
    return polys_[checked(id)];
  }
  std::string text(int64_t id) {
    std::lock_guard lock(mutex_);
    return texts_[checked(id)];
  }

 private:
  // The table index of `id`; a number in the symbolic range that no dim was given (a
  // corrupt type built in C++) is an error, not a read past the table.
  size_t checked(int64_t id) const {
    const auto i = static_cast<size_t>(static_cast<uint64_t>(id) - static_cast<uint64_t>(INT64_MIN));
    if (i >= polys_.size()) throw Error(fmt::format("{} is not a dimension: a negative number, and no symbolic dim", id));
    return i;
  }
  std::mutex mutex_;
  std::unordered_map<std::string, int64_t> ids_;
  std::vector<Poly> polys_;
  std::vector<std::string> texts_;
};

Poly to_poly(int64_t d) {
  if (is_symbolic_dim(d)) return DimTable::get().poly(d);
  if (d == 0) return {};
  return {Term{d, {}}};
}

// Sorts, merges like terms and drops zeros; nullopt on overflow.
std::optional<Poly> canonical(Poly p) {
  std::sort(p.begin(), p.end(), term_before);
  Poly out;
  for (Term& t : p) {
    if (!out.empty() && out.back().names == t.names) {
      if (__builtin_add_overflow(out.back().coef, t.coef, &out.back().coef)) return std::nullopt;
    } else {
      out.push_back(std::move(t));
    }
  }
  std::erase_if(out, [](const Term& t) { return t.coef == 0; });
  return out;
}

std::optional<int64_t> from_poly(std::optional<Poly> p) {
  if (!p) return std::nullopt;
  if (p->empty()) return 0;
  if (p->size() == 1 && p->front().names.empty()) return p->front().coef;
  return DimTable::get().intern(std::move(*p));
}

}  // namespace

bool is_dim_symbol_name(std::string_view name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

int64_t dim_symbol(std::string_view name) { return DimTable::get().intern({Term{1, {std::string(name)}}}); }

std::optional<int64_t> dim_add(int64_t a, int64_t b) {
  if (!is_symbolic_dim(a) && !is_symbolic_dim(b)) {
    int64_t s = 0;
    if (__builtin_add_overflow(a, b, &s)) return std::nullopt;
    return s;
  }
  Poly p = to_poly(a);
  for (Term& t : to_poly(b)) p.push_back(std::move(t));
  return from_poly(canonical(std::move(p)));
}

std::optional<int64_t> dim_sub(int64_t a, int64_t b) {
  if (!is_symbolic_dim(a) && !is_symbolic_dim(b)) {
    int64_t s = 0;
    if (__builtin_sub_overflow(a, b, &s)) return std::nullopt;
    return s;
  }
  const std::optional<int64_t> minus_b = dim_mul(b, -1);
  if (!minus_b) return std::nullopt;
  return dim_add(a, *minus_b);
}

std::optional<int64_t> dim_mul(int64_t a, int64_t b) {
  if (!is_symbolic_dim(a) && !is_symbolic_dim(b)) {
    int64_t s = 0;
    if (__builtin_mul_overflow(a, b, &s)) return std::nullopt;
    return s;
  }
  Poly p;
  for (const Term& x : to_poly(a))
    for (const Term& y : to_poly(b)) {
      Term t;
      if (__builtin_mul_overflow(x.coef, y.coef, &t.coef)) return std::nullopt;
      t.names = x.names;
      t.names.insert(t.names.end(), y.names.begin(), y.names.end());
      std::sort(t.names.begin(), t.names.end());
      p.push_back(std::move(t));
    }
  return from_poly(canonical(std::move(p)));
}

std::optional<int64_t> dim_exact_div(int64_t a, int64_t b) {
  if (!is_symbolic_dim(a) && !is_symbolic_dim(b)) {
    if (b == 0 || (a == INT64_MIN && b == -1) || a % b != 0) return std::nullopt;
    return a / b;
  }
  const Poly divisor = to_poly(b);
  if (divisor.size() != 1) return std::nullopt;
  const Term& d = divisor.front();
  Poly p;
  for (const Term& x : to_poly(a)) {
    if (x.coef % d.coef != 0) return std::nullopt;
    Term t{x.coef / d.coef, {}};
    std::vector<std::string> rest = x.names;
    for (const std::string& n : d.names) {
      auto it = std::find(rest.begin(), rest.end(), n);
      if (it == rest.end()) return std::nullopt;
      rest.erase(it);
    }
    t.names = std::move(rest);
    p.push_back(std::move(t));
  }
  return from_poly(canonical(std::move(p)));
}

std::string dim_str(int64_t d) { return is_symbolic_dim(d) ? DimTable::get().text(d) : std::to_string(d); }

std::vector<std::string> dim_symbols(int64_t d) {
  std::vector<std::string> names;
  if (!is_symbolic_dim(d)) return names;
  for (const Term& t : to_poly(d)) names.insert(names.end(), t.names.begin(), t.names.end());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::optional<int64_t> dim_value(int64_t d, const DimBindings& b) {
  if (!is_symbolic_dim(d)) return d;
  int64_t sum = 0;
  for (const Term& t : to_poly(d)) {
    int64_t v = t.coef;
    for (const std::string& n : t.names) {
      const auto it = b.find(n);
      if (it == b.end() || __builtin_mul_overflow(v, it->second, &v)) return std::nullopt;
    }
    if (__builtin_add_overflow(sum, v, &sum)) return std::nullopt;
  }
  return sum;
}

std::optional<int64_t> parse_dim(std::string_view text, std::string* error) {
  size_t at = 0;
  auto skip = [&] {
    while (at < text.size() && text[at] == ' ') ++at;
  };
  auto fail = [&](std::string message) -> std::optional<int64_t> {
    if (error) *error = std::move(message);
    return std::nullopt;
  };
  // factor := number | name
  auto factor = [&]() -> std::optional<int64_t> {
    skip();
    const size_t start = at;
    if (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) {
      int64_t v = 0;
      while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])))
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, text[at++] - '0', &v))
          return fail(fmt::format("the number in '{}' is too large for an int64", text));
      return v;
    }
    while (at < text.size() && (std::isalnum(static_cast<unsigned char>(text[at])) || text[at] == '_')) ++at;
    const std::string_view name = text.substr(start, at - start);
    if (!is_dim_symbol_name(name))
      return fail(fmt::format("expected a size or a name in the dimension '{}'", text));
    return dim_symbol(name);
  };
  // term := factor ('*' factor)*
  auto term = [&]() -> std::optional<int64_t> {
    std::optional<int64_t> v = factor();
    for (skip(); v && at < text.size() && text[at] == '*'; skip()) {
      ++at;
      const std::optional<int64_t> f = factor();
      if (!f) return std::nullopt;
      v = dim_mul(*v, *f);
      if (!v) return fail(fmt::format("the dimension '{}' overflows int64", text));
    }
    return v;
  };
  skip();
  bool negate = at < text.size() && text[at] == '-';
  if (negate || (at < text.size() && text[at] == '+')) ++at;
  std::optional<int64_t> sum = 0;
  for (;;) {
    std::optional<int64_t> t = term();
    if (!t) return std::nullopt;
    sum = negate ? dim_sub(*sum, *t) : dim_add(*sum, *t);
    if (!sum) return fail(fmt::format("the dimension '{}' overflows int64", text));
    skip();
    if (at == text.size()) return sum;
    if (text[at] != '+' && text[at] != '-')
      return fail(fmt::format("unexpected '{}' in the dimension '{}'", text[at], text));
    negate = text[at++] == '-';
  }
}

}  // namespace kiln
