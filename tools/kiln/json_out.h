// tools/kiln/json_out.h - the `--json` output of run, check and cache list (docs/cli.md,
// "JSON output"): one object on stdout, written by hand, no dependency.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/ir/host_tensor.h"

namespace kiln::cli {

/// `text` as a JSON string, quotes included.
std::string json_string(std::string_view text);
/// A JSON number, or null for NaN and infinities (which JSON has no spelling for).
std::string json_number(double v);

/// {"elements", "nan", "min", "max", "mean"} of a tensor's values (NaN left out of the rest).
std::string json_summary(const HostTensor& t);
/// {"elements_differ", "max_abs", "max_rel", "max_ulp"} of `got` against `want`, or
/// {"type_differs": ...} when their types differ.
std::string json_difference(const HostTensor& got, const HostTensor& want);

}  // namespace kiln::cli
