// kiln/codegen/variants.h - the knobs of a schedule as data: what the autotuner varies.
//
// A kernel's default schedule (default_schedule) is one point of a space: each knob of that
// space is a named field of the schedule with the values this kernel may legally take on
// this device. A Variant names a value per knob; applying it to the default schedule gives a
// schedule whose derived fields (the walk, the launch geometry) are recomputed. Variants are
// stored by the autotuner as text ("elements_per_item=2 local_size=128"), so a choice made
// for one kernel can be applied to another of the same structure and shape bucket, and one
// that is no longer legal (a new kiln, another shape) is recognized and ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/codegen/kernel_ir.h"
#include "kiln/codegen/lower.h"
#include "kiln/codegen/schedule.h"

namespace kiln::kir {

/// One tunable field of a schedule and the values this kernel may take for it. A knob is
/// named as the field it sets (kiln/codegen/schedule.def); docs/autotune.md tables them.
///
/// cpu family: `vector_width`, `vector_unroll`, `accumulators`, `unroll`, `tile`,
/// `merge_rows`, `split_lanes`, `masked_tail`, `task_elements` (0: one task), `threads` (0: every core),
/// `row_cache_elements` (0: none), `prefetch_rows`, `pipeline` (0 lean, 1 o2).
/// work-item family: `local_size`, `elements_per_item` (grid-stride), `reduction` (0 serial,
/// 1 work-group tree, 2 subgroup shuffles), `row_blocks`, `accumulators`, `vector_width`
/// (lanes per work-item: work_item_lane_counts), `row_cache_elements`.
/// every device: `NAME.MACRO` for each tunable macro of each custom kernel `k` calls.
/// GEMM steps (gemm_schedule_knobs): cpu `mr`, `nr` (the register tile), `kc` (panel depth),
/// `mc` (rows of an A block), `windows_in_place`, `channel_lanes` (a convolution's product
/// transposed, from that form's default blocking), `prefetch_a`, `prefetch_b`, `threads`;
/// work-item devices `group_m`,
/// `group_n`, `group_k` (the work-group's tile of C and its depth along K).
struct Knob {
  std::string name;
  std::vector<int64_t> values;  // ascending; the default's value is among them
  int64_t current = 0;          // the default's value
};

/// A value per knob, by name, sorted by name; knobs not named keep the default's value. The
/// empty variant is the default schedule. parse() reads the names knobs had before they
/// were named as their fields (`local`, `per_item`, `row_cache`, `vector`), which tuning
/// rows written then hold.
struct Variant {
  std::vector<std::pair<std::string, int64_t>> settings;

  bool is_default() const { return settings.empty(); }
  /// "default", or the settings as `name=value` separated by spaces.
  std::string str() const;
  /// The inverse of str(); nullopt for text it cannot have printed.
  static std::optional<Variant> parse(std::string_view text);
  friend bool operator==(const Variant&, const Variant&) = default;
};

/// The knobs of `k` on a device with `caps`, around its default schedule `base`. A knob with
/// a single legal value is left out.
std::vector<Knob> schedule_knobs(const Kernel& k, const Schedule& base, const Capabilities& caps);

/// `base` with `v`'s settings, the walk and the geometry recomputed; nullopt when `v` names a
/// knob `k` lacks, a value not among its legal values, or gives a schedule the device cannot
/// run (past its loop budget or work-group limits).
std::optional<Schedule> apply_variant(const Kernel& k, const Schedule& base, const Variant& v,
                                      const Capabilities& caps);

/// The variants worth timing first: every single-knob change of the default that a simple
/// cost model does not rule out (a parallel split into more tasks than the scheduler hides or
/// fewer than the cores, tiles past the row), deduplicated by the schedule they give; the
/// default is not among them. In the order they are worth timing in: the knobs in turn, each
/// knob's values nearest the default's first.
std::vector<Variant> single_knob_variants(const Kernel& k, const Schedule& base, const Capabilities& caps);

/// The same for a GEMM step `g` whose default blocking is `base`: the knobs of its blocking,
/// a variant applied to it (nullopt when the register tile would not fit the registers, a
/// work-group would be past the device's size, its tiles past 16 KiB of local memory, or its
/// loops past the device's loop budget), and the single-knob variants. A cpu variant keeps
/// the B block's width (`nc`): one as wide as the product lets the epilogue run on each
/// block of rows while it is in cache.
std::vector<Knob> gemm_schedule_knobs(const LaunchPlan::Gemm& g, const GemmSchedule& base, const Capabilities& caps);
std::optional<GemmSchedule> apply_gemm_variant(const LaunchPlan::Gemm& g, const GemmSchedule& base, const Variant& v,
                                               const Capabilities& caps);
std::vector<Variant> single_knob_gemm_variants(const LaunchPlan::Gemm& g, const GemmSchedule& base,
                                               const Capabilities& caps);

/// What the autotuner keys a GEMM step by: its dtype and batch structure ("gemm f32 batch-a":
/// one batch dim over which A broadcasts), and m x n x k (and the batch count) each rounded
/// up to a power of two ("1024x1024x1024", "128x128x64b8").
std::string gemm_structure(const LaunchPlan::Gemm& g);
std::string gemm_shape_bucket(const LaunchPlan::Gemm& g);

/// What the autotuner keys a kernel by, beside the device: its structure, without the sizes
/// its domain and index arithmetic are specialized to (so kernels that differ only in shape
/// share it), and the bucket of its shape (each extent rounded up to a power of two, reduced
/// dims marked `r`: "64x1024r").
std::string kernel_structure(const Kernel& k);
std::string shape_bucket(const Kernel& k);

}  // namespace kiln::kir
