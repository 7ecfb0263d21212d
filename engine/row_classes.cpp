// engine/row_classes.cpp - a kernel's first size specialized, the second one its class.
#include "row_classes.h"

#include <fmt/format.h>

#include "kiln/codegen/rows_at_launch.h"
#include "kiln/ir/hash.h"
#include "kiln/support/env.h"
#include "kiln/support/log.h"

namespace kiln::engine {

RowClasses::Choice RowClasses::choose(const kir::Kernel& k, const kir::Schedule& s, const Capabilities& caps,
                                      std::string_view device) {
  // KILN_SPECIALIZE=1: every kernel for the sizes it runs at, what a class is measured against.
  static const bool specialize = env_flag("KILN_SPECIALIZE").value_or(false);
  if (specialize || kir::rows_at_launch_refusal(k, s, caps)) return {k, s, -1};
  kir::RowsAtLaunch general = kir::rows_at_launch(k, s);
  const std::string key = hash_text(general.kernel.str(false) + general.schedule.str()).hex();
  const int64_t rows = k.domain[kir::rows_dim(k)];
  {
    std::lock_guard lock(mutex_);
    auto [it, first] = first_size_.try_emplace(key, rows);
    if (first || it->second == rows) return {k, s, -1};
    if (it->second >= 0) {
      log_line("recompile", fmt::format("{}: kernel @{} over {} ran at a second number of rows ({}, then {}): "
                                        "compiled once for every size up to {}",
                                        device, k.name, k.domain_str(), it->second, rows,
                                        general.kernel.domain[kir::rows_dim(general.kernel)]));
      it->second = -1;
    }
  }
  return {std::move(general.kernel), std::move(general.schedule), rows};
}

}  // namespace kiln::engine
