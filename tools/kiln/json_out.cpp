// tools/kiln/json_out.cpp - see json_out.h.
#include "json_out.h"

#include <cmath>

#include <fmt/format.h>

#include "commands.h"

namespace kiln::cli {

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<int>(c));
        else out += c;
    }
  }
  return out + "\"";
}

std::string json_number(double v) { return std::isfinite(v) ? fmt::format("{}", v) : "null"; }

std::string json_summary(const HostTensor& t) {
  const ValueSummary s = summary_of(t);
  return fmt::format(R"({{"elements": {}, "nan": {}, "min": {}, "max": {}, "mean": {}}})", t.numel(), s.nans,
                     json_number(s.min), json_number(s.max), json_number(s.mean));
}

std::string json_difference(const HostTensor& got, const HostTensor& want) {
  if (!(got.type() == want.type()))
    return fmt::format(R"({{"type_differs": {}}})", json_string(got.type().str() + " vs " + want.type().str()));
  const ValueDifference d = difference_of(got, want);
  return fmt::format(R"({{"elements_differ": {}, "max_abs": {}, "max_rel": {}, "max_ulp": {}}})", d.differ,
                     json_number(d.max_abs), json_number(d.max_rel), json_number(d.max_ulp));
}

}  // namespace kiln::cli
