// engine/row_classes.h - the kernels a device compiles once for every number of rows.
//
// The engine's part of kir::rows_at_launch: which kernels of a plan get it. A kernel's first
// number of rows (the size of its first dim other than 1) compiles it for that number, as
// every kernel was compiled (its own code, and the only one a program of fixed shapes ever
// needs); when the same kernel shows up with a second number, it is compiled once for its
// class, and every later number launches that one. This is PyTorch's automatic dynamic,
// decided per kernel: the graph's dims stay concrete.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "kiln/codegen/kernel_ir.h"
#include "kiln/codegen/schedule.h"

namespace kiln::engine {

class RowClasses {
 public:
  struct Choice {
    kir::Kernel kernel;      // what to compile
    kir::Schedule schedule;  // ...with this schedule
    int64_t rows = -1;       // >= 0: the size to pass at launch (after the kernel's scalars)
  };

  /// What to compile for `k` run with `s` on `device`: `k` itself, or, from its second
  /// number of rows on, kir::rows_at_launch(k, s) and that number. The switch is logged under
  /// KILN_LOG=recompile. Thread-safe.
  Choice choose(const kir::Kernel& k, const kir::Schedule& s, const Capabilities& caps, std::string_view device);

 private:
  std::mutex mutex_;
  /// Per class (the hash of the class kernel's text and schedule): the first size seen, or
  /// -1 once a second size made it compile for the class.
  std::unordered_map<std::string, int64_t> first_size_;
};

}  // namespace kiln::engine
