// support/spelling.cpp - see kiln/support/spelling.h.
#include "kiln/support/spelling.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace kiln {
namespace {

// Optimal string alignment distance: Levenshtein plus a swap of two neighbours as one edit.
size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::optional<std::string> closest_name(std::string_view name, std::span<const std::string_view> candidates) {
  const size_t limit = name.size() <= 4 ? 1 : name.size() / 3;
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (std::string_view c : candidates) {
    const size_t d = distance(name, c);
    if (d < best_distance) {
      best_distance = d;
      best = std::string(c);
    }
  }
  return best;
}

std::string did_you_mean(std::string_view name, std::span<const std::string_view> candidates) {
  const std::optional<std::string> c = closest_name(name, candidates);
  return c ? fmt::format(" (did you mean '{}'?)", *c) : std::string();
}

}  // namespace kiln
