// kiln/codegen/rows_at_launch.h - one compiled kernel for every number of rows.
//
// A serving loop runs one program at many batch or sequence lengths, and most of its
// kernels then differ in one number only: the size of their outermost dim (a layer norm
// over [T, reduce 768], a bias over [1, T, 3072]), their rows. Where that dim is kept, no emitter needs its
// size: the cpu walks the iterations the launch asks for, and the C-family emitter reads
// the count of points from a scalar argument. rows_at_launch makes such a kernel
// independent of the size: that dim becomes the largest size of the class, every analysis
// an emitter runs holds for all points of that domain and so for every smaller one, and
// the size itself is a launch argument (Kernel::rows_arg). The kernel caches, keyed by the
// text, then hold one kernel for every size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/codegen/kernel_ir.h"
#include "kiln/codegen/schedule.h"

namespace kiln::kir {

/// The largest number of rows a kernel with 64-bit positions is compiled for.
inline constexpr int64_t kRowsAtLaunchBound = int64_t{1} << 31;

/// A kernel's rows: its first dim whose size is not 1 (the size-1 dims before it are a batch
/// of one). In a kernel with Kernel::rows_arg, the dim that holds the class's bound.
int rows_dim(const Kernel& k);

/// Why `k`, run with `s` on a device of `caps`, cannot take the size of its rows at launch
/// ("its rows are reduced", ...), or nullopt where it can.
std::optional<std::string> rows_at_launch_refusal(const Kernel& k, const Schedule& s, const Capabilities& caps);

struct RowsAtLaunch {
  Kernel kernel;      // the rows' dim is the class's bound; Kernel::rows_arg their size
  Schedule schedule;  // without the fields the launch derives from the size (iterations, geometry)
};

/// `k` and `s` for every number of rows up to a bound: kRowsAtLaunchBound, or with
/// 32-bit positions the largest size whose positions still fit. The size is a new last
/// scalar argument, of the index type. Launch the result with the concrete schedule `s`
/// and the size; rows_at_launch_refusal(k, s, caps) must be nullopt.
RowsAtLaunch rows_at_launch(const Kernel& k, const Schedule& s);

}  // namespace kiln::kir
