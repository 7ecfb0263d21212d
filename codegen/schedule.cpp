// codegen/schedule.cpp - default schedules and their text form.
#include "kiln/codegen/schedule.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kiln/codegen/c_source.h"
#include "kiln/ir/canonical.h"

namespace kiln {

std::string_view device_family_name(DeviceFamily f) {
  switch (f) {
    case DeviceFamily::Cpu: return "cpu";
    case DeviceFamily::WorkItems: return "work-items";
  }
  return "?";
}

}  // namespace kiln

namespace kiln::kir {
namespace {

// Bytes of the widest element a kernel moves (loads, stores, accumulators): the vector
// width follows the data, not the i64 index math.
size_t widest_element(const Kernel& k) {
  size_t widest = 1;
  auto bytes = [](DType t) { return t == DType::Bool ? size_t{1} : dtype_size(t); };
  for (const Store& s : k.stores) widest = std::max(widest, bytes(k.insts[static_cast<size_t>(s.value)].type));
  for (const Inst& in : k.insts) {
    if (in.code == Code::Load) widest = std::max(widest, bytes(in.type));
    if (in.code == Code::Reduce) widest = std::max(widest, dtype_size(in.type == DType::Bool ? DType::I32 : in.type));
  }
  return widest;
}

bool has_expensive_op(const Kernel& k) {
  return std::any_of(k.insts.begin(), k.insts.end(),
                     [](const Inst& in) { return in.code == Code::Op && op_info(in.op).has(trait::Expensive); });
}

bool has_arg_reduction(const Kernel& k) {
  return std::any_of(k.insts.begin(), k.insts.end(),
                     [](const Inst& in) { return in.code == Code::Reduce && op_info(in.op).has(trait::ArgReduce); });
}

}  // namespace

std::vector<int64_t> work_item_lane_counts(const Kernel& k) {
  std::vector<int64_t> out = {1};
  const int rank = k.domain.rank();
  if (rank == 0 || k.in_order) return out;
  for (int64_t lanes = 2; lanes <= 16; lanes *= 2)
    if (k.domain[rank - 1] % lanes == 0) out.push_back(lanes);
  return out;
}

namespace {

// Points below which a GPU kernel keeps one per work-item: on an H100 a 131072-point
// elementwise kernel took 15.1 us with 4 lanes against 13.3 with one.
constexpr int64_t kSmallGpuKernel = int64_t{1} << 20;

// A work-item's lanes by default on a work-item device (work_item_lane_counts), from what
// the tuner measured (benchmarks/RESULTS.md):
// - PoCL (Capabilities::vectorizes_work_item_loop) in OpenCL C, whose vector values
//   (Capabilities::vector_values) hold a work-item's lanes where the kernel allows them
//   (c_lanes_as_vectors): a native register of the widest element, 16 f32 lanes with
//   AVX-512, in every kernel, elementwise ones too. With the lanes as float16 values (and
//   W3's row cache) W2 ran 5.25 ms against 10.1 with one lane, W3 5.4 against 16.6 with 4
//   scalar lanes, W4 4.25 against 5.26; 8 lanes were within the noise of 16. Otherwise:
// - PoCL (Capabilities::vectorizes_work_item_loop) vectorizes the loop over a work-group's
//   work-items only where it is innermost, which a walk along a reduction is not; lanes are
//   what it vectorizes there. Rows (the last dim reduced) take up to 4: W3 16.9 ms against
//   30.5 with one lane, W4 5.0 against 11.3, W5a's partial sums 4.1 against 7.0 (8 lanes:
//   W3 14.0, W5a 3.6, but W4 10.7; the tuner finds those per kernel). Kept lanes under a
//   reduction loop (column sums) take up to 8: W5b 5.3x and 3.1x faster. Kept lanes
//   without one ran 3-7x slower: the work-item loop is innermost and vectorized already.
// - lavapipe (work-groups emulated too, work-items in SIMD lanes) ran rows faster with 4
//   lanes (W4 42.0 ms against 52.6) and column sums slower (W5b's kernels 1.05-9.8x); kept lanes of
//   elementwise kernels gained 1.4x, which is left to the tuner.
// - A GPU whose language has vector loads (OpenCL C) takes up to 4 lanes, 16-byte loads of
//   f32, in elementwise kernels: on an H100, W1 ran 62-65 us against 75-82 with one lane and
//   W2 87-90 against 93-103 (whole calls, in alternation). Rows stay with one: 4 lanes made
//   W3 1.15-1.25x faster but W4 1.07-1.2x slower, and the tuner finds each; kept lanes under
//   a reduction loop ran slower (W5b's partials 46.3 us against 36.2), and so did kernels too
//   small to fill the GPU (kSmallGpuKernel), whose launch costs more than their loads. GLSL
//   reads lanes one by one, and Vulkan GPUs keep one lane.
int default_lanes(const Kernel& k, const Schedule& s, const Capabilities& caps) {
  if (caps.vectorizes_work_item_loop && caps.vector_values) {  // a native register of the widest element
    int64_t widest = 1;
    for (int64_t lanes : work_item_lane_counts(k))
      if (lanes <= register_lanes(k, caps)) widest = lanes;
    // Whether lanes are vectors does not depend on how many there are: the widest decides.
    if (widest > 1 && c_lanes_as_vectors(k, static_cast<int>(widest))) return static_cast<int>(widest);
  }
  int64_t most = 1;
  if (caps.emulated_work_groups && s.lanes_reduce) most = 4;
  else if (caps.vectorizes_work_item_loop && k.has_reduction()) most = 8;
  else if (!caps.emulated_work_groups && caps.vector_loads && !k.has_reduction() && k.domain.numel() >= kSmallGpuKernel)
    most = 4;
  int64_t best = 1;
  for (int64_t lanes : work_item_lane_counts(k))
    if (lanes <= most) best = lanes;
  return static_cast<int>(best);
}

}  // namespace

std::string_view reduction_strategy_name(ReductionStrategy s) {
  switch (s) {
    case ReductionStrategy::Serial: return "serial";
    case ReductionStrategy::WorkGroupTree: return "workgroup-tree";
    case ReductionStrategy::Subgroup: return "subgroup";
  }
  return "?";
}

std::string_view cpu_pipeline_name(CpuPipeline p) {
  switch (p) {
    case CpuPipeline::Lean: return "lean";
    case CpuPipeline::O2: return "o2";
  }
  return "?";
}

namespace {

template <class T>
std::string field_text(T v) {
  if constexpr (std::is_same_v<T, CpuPipeline>) return std::string(cpu_pipeline_name(v));
  else if constexpr (std::is_same_v<T, ReductionStrategy>) return std::string(reduction_strategy_name(v));
  else return std::to_string(v);
}

}  // namespace

std::string Schedule::str() const {
  std::string out = fmt::format("schedule {{{}", lanes_reduce ? "rows" : "tiles");
#define KILN_WALK_FIELD(type, name, init) \
  if constexpr (!std::is_same_v<type, bool>) out += fmt::format(", " #name " = {}", field_text(name));
#define KILN_COMMON_FIELD(type, name, init) out += fmt::format(", " #name " = {}", field_text(name));
#include "kiln/codegen/schedule.def"
  const char* sep = "";
  if (family == DeviceFamily::Cpu) {
    out += ", cpu {";
#define KILN_CPU_FIELD(type, name, init) \
  out += fmt::format("{}" #name " = {}", std::exchange(sep, ", "), field_text(cpu.name));
#include "kiln/codegen/schedule.def"
  } else {
    out += ", work_items {";
#define KILN_WORK_ITEM_FIELD(type, name, init) \
  out += fmt::format("{}" #name " = {}", std::exchange(sep, ", "), field_text(work_items.name));
#include "kiln/codegen/schedule.def"
  }
  out += "}}";
  if (!custom_macros.empty()) out += fmt::format(" custom {{{}}}", fmt::join(custom_macros, ", "));
  return out;
}

namespace {

// Calls `fn(field)` on the field `name` of the common part or of `s`'s family part (a const
// or mutable Schedule); false when there is no such field.
template <class S, class Fn>
bool with_field(S& s, std::string_view name, Fn fn) {
#define KILN_COMMON_FIELD(type, n, init) \
  if (name == #n) return fn(s.n), true;
#include "kiln/codegen/schedule.def"
  if (s.family == DeviceFamily::Cpu) {
#define KILN_CPU_FIELD(type, n, init) \
  if (name == #n) return fn(s.cpu.n), true;
#include "kiln/codegen/schedule.def"
  } else {
#define KILN_WORK_ITEM_FIELD(type, n, init) \
  if (name == #n) return fn(s.work_items.n), true;
#include "kiln/codegen/schedule.def"
  }
  return false;
}

}  // namespace

std::optional<int64_t> Schedule::field(std::string_view name) const {
  int64_t value = 0;
  if (!with_field(*this, name, [&](const auto& f) { value = static_cast<int64_t>(f); })) return std::nullopt;
  return value;
}

bool Schedule::set_field(std::string_view name, int64_t value) {
  return with_field(*this, name, [&](auto& f) { f = static_cast<std::remove_reference_t<decltype(f)>>(value); });
}

int64_t Schedule::task_grain() const {
  if (cpu.task_elements <= 0) return std::max<int64_t>(1, iterations);
  return std::max<int64_t>(1, cpu.task_elements / std::max<int64_t>(1, elements_per_iteration));
}

std::vector<std::pair<std::string, int64_t>> custom_macro_values(const Kernel& k, const Schedule& s, size_t c) {
  size_t first = 0;
  for (size_t i = 0; i < c; ++i) first += k.customs[i]->signature.tunables.size();
  std::vector<std::pair<std::string, int64_t>> out;
  const auto& tunables = k.customs[c]->signature.tunables;
  for (size_t t = 0; t < tunables.size(); ++t)
    out.emplace_back(tunables[t].macro,
                     first + t < s.custom_macros.size() ? s.custom_macros[first + t] : tunables[t].default_value);
  return out;
}

std::string kernel_canonical(const Kernel& k, const Schedule& s, std::string_view fingerprint) {
  CanonicalWriter w;
  w.bytes(k.str(/*names=*/false));
  w.bytes(s.str());
  w.bytes(fingerprint);
  return w.take();
}

void update_walk(const Kernel& k, Schedule& s) {
  const int rank = k.domain.rank();
  if (rank == 0) {
    s.iterations = 1;
    s.elements_per_iteration = 1;
    return;
  }
  int64_t kept = 1, reduced = 1;
  for (int d = 0; d < rank; ++d) (k.reduced[static_cast<size_t>(d)] ? reduced : kept) *= k.domain[d];
  s.lanes_reduce = k.reduced[static_cast<size_t>(rank - 1)];
  if (s.lanes_reduce) {
    s.iterations = kept;
    s.elements_per_iteration = reduced;
    return;
  }
  if (merged_row_dim(k) < 0) s.cpu.merge_rows = 0;
  const int64_t last = walked_row(k, s);
  s.tile = std::max<int64_t>(1, std::min(s.tile, last));
  const int64_t tiles = (last + s.tile - 1) / s.tile;
  s.iterations = last == 0 ? 0 : kept / last * tiles;
  s.elements_per_iteration = s.tile * reduced;
}

int64_t window_rows(const Kernel& k) {
  int64_t rows = 1;
  bool inner = true;  // the last reduced dim, walked by the step itself
  for (int d = k.domain.rank() - 1; d >= 0; --d) {
    if (!k.reduced[static_cast<size_t>(d)]) continue;
    if (!inner) rows *= k.domain[d];
    inner = false;
  }
  return rows;
}

int64_t walked_row(const Kernel& k, const Schedule& s) {
  const int rank = k.domain.rank();
  if (rank == 0) return 1;
  return k.domain[rank - 1] * (s.cpu.merge_rows ? k.domain[merged_row_dim(k)] : 1);
}

int register_lanes(const Kernel& k, const Capabilities& caps) {
  return static_cast<int>(std::clamp<size_t>(static_cast<size_t>(caps.vector_bytes) / widest_element(k), 1, 64));
}

void place_work_items(Schedule& s, const Capabilities& caps, int64_t per_item) {
  // Kept lanes (the last dim kept) are several points per work-item.
  WorkItemSchedule& w = s.work_items;
  const int64_t lanes = !s.lanes_reduce ? std::max(1, s.vector_width) : 1;
  const int64_t items = w.reduction == ReductionStrategy::Serial ? s.iterations / lanes : s.iterations * w.local_size;
  int64_t groups = (items + w.local_size - 1) / w.local_size;
  w.elements_per_item = std::max<int64_t>(1, per_item);
  groups = (groups + w.elements_per_item - 1) / w.elements_per_item;
  // Past the device's work-group limit, each work-group (each work-item, a row per item)
  // walks several rows: the emitter's grid-stride loop.
  if (caps.max_work_groups > 0 && groups > caps.max_work_groups) {
    const int64_t more = (groups + caps.max_work_groups - 1) / caps.max_work_groups;
    w.elements_per_item *= more;
    groups = (groups + more - 1) / more;
  }
  w.global_size = groups * w.local_size;
}

void settle_row_walk(const Kernel& k, Schedule& s, const Capabilities& caps, std::optional<int> chains,
                     std::optional<int> blocks) {
  s.accumulators = 1;
  s.work_items.row_blocks = 0;
  if (!s.lanes_reduce) return;
  if (s.work_items.reduction != ReductionStrategy::Serial) {
    // A group's work-items, run one after another where the kernel has a loop of its own
    // (every tree does), each stream a contiguous block of the row; interleaved, each read a
    // few lanes per stride of the group (W5a: 2.85 -> 1.21 ms on PoCL).
    s.work_items.row_blocks = blocks.value_or(caps.vectorizes_work_item_loop ? 1 : 0);
    return;
  }
  if (!caps.vector_values || s.vector_width < 2 || !c_lanes_as_vectors(k, s.vector_width)) return;
  // One vector max per step is a chain of ~5 dependent instructions: four chains on PoCL
  // (W3 5.0 -> 4.5 ms). As many as divide the row, as the emitter takes them.
  s.accumulators = chains.value_or(caps.emulated_work_groups ? 4 : 1);
  while (s.accumulators > 1 && s.elements_per_iteration % (int64_t{s.vector_width} * s.accumulators) != 0)
    s.accumulators /= 2;
}

namespace {

// Domain points per task of the cpu's split: ~16K, enough to hide the scheduler, many per
// core; one task (0) below 32K points in all.
int64_t default_task_elements(const Schedule& s, const Capabilities& caps) {
  const int64_t per = std::max<int64_t>(1, s.elements_per_iteration);
  return caps.cores > 1 && s.iterations >= 2 && s.iterations * per >= (1 << 15) ? 1 << 14 : 0;
}

// A work-item device's geometry: a work-item per iteration, or a work-group per row when
// rows reduce cooperatively in local memory.
void default_work_items(const Kernel& k, Schedule& s, const Capabilities& caps) {
  WorkItemSchedule& w = s.work_items;
  w.local_size = std::min<int64_t>(256, std::max<int64_t>(1, caps.max_work_group));
  // A work-group per row, reducing in a tree, when the rows are long enough to give each
  // work-item of a group several elements, or too few to fill the device a row per
  // work-item; otherwise a row per work-item, in groups of many rows. Where work-groups are
  // loops on CPU cores (PoCL), only the second reason counts: barriers split those loops (W4
  // on PoCL: 47.6 ms with trees, 18.0 ms a row per work-item).
  const bool rows_fill_device = caps.emulated_work_groups ? s.iterations >= w.local_size * caps.cores
                                                          : s.iterations >= 4 * caps.cores;
  // A row per work-item must also stay within the device's loop budget.
  const bool row_over_budget = caps.max_loop_iterations > 0 && c_loop_iterations(k, s, caps) > caps.max_loop_iterations;
  const bool cooperative = !rows_fill_device || row_over_budget ||
                           (!caps.emulated_work_groups && s.elements_per_iteration >= 4 * w.local_size);
  w.reduction = s.lanes_reduce && caps.local_memory && w.local_size > 1 && cooperative ? ReductionStrategy::WorkGroupTree
                                                                                       : ReductionStrategy::Serial;
  if (w.reduction == ReductionStrategy::WorkGroupTree) {
    int64_t fit = 1;  // no more work-items than a row has lanes' worth of elements
    while (fit * s.vector_width < s.elements_per_iteration && fit < w.local_size) fit *= 2;
    w.local_size = fit;
    // Where work-groups are loops on CPU cores, each level of the tree is a barrier that
    // splits the group's loop: 64 work-items (6 levels) ran W5a's partial sums on PoCL in
    // 6.9 ms against 256's 11.8 (the autotuner's choice there, benchmarks/RESULTS.md).
    if (caps.emulated_work_groups) w.local_size = std::min<int64_t>(w.local_size, 64);
    // A row still past the loop budget (its fmods' loops: c_loop_iterations) takes the widest
    // group the device allows, one point per work-item per trip.
    if (caps.max_loop_iterations > 0 && c_loop_iterations(k, s, caps) > caps.max_loop_iterations) {
      s.vector_width = 1;
      while (w.local_size * 2 <= std::min(s.elements_per_iteration, caps.max_work_group)) w.local_size *= 2;
    }
    // Where the device shuffles within subgroups, a butterfly there and one local-memory
    // slot per subgroup replace the tree's log2(local_size) barriers; the groups must be
    // whole subgroups.
    if (caps.subgroup_size > 1 && w.local_size % caps.subgroup_size == 0) w.reduction = ReductionStrategy::Subgroup;
  }
  settle_row_walk(k, s, caps, std::nullopt, std::nullopt);
  place_work_items(s, caps, 1);
}

// The LLVM passes a cpu kernel is optimized with. The lean pipeline is for code that is
// vectorized by construction. Scalar code (a walk in order, arg reductions) gains from O2's
// loop passes (scatter_add: 12% faster), and the cpu backend widens a custom kernel's call
// through a loop that LLVM's loop vectorizer must widen (llvm_codegen.cpp, emit_custom_call),
// which only O2 runs. A sum over middle axes along a kept innermost one (a depthwise
// convolution's or a pooling's window, summed tap by tap along output rows) gains from O2's
// loop passes too: W10 (a 3x3 depthwise conv over 96 x 112 x 112) 0.78 -> 0.45 ms, as the
// tuner found.
CpuPipeline default_cpu_pipeline(const Kernel& k, const Schedule& s) {
  if (!k.customs.empty() || s.vector_width == 1) return CpuPipeline::O2;
  const bool middle_reduction = k.domain.rank() > 1 && !k.reduced[static_cast<size_t>(k.domain.rank() - 1)] &&
                                std::find(k.reduced.begin(), k.reduced.end(), true) != k.reduced.end();
  return middle_reduction ? CpuPipeline::O2 : CpuPipeline::Lean;
}

}  // namespace

Schedule default_schedule(const Kernel& k, const Capabilities& caps) {
  Schedule s;
  s.family = caps.family;
  const bool work_items = caps.family == DeviceFamily::WorkItems;
  CpuSchedule& c = s.cpu;
  WorkItemSchedule& w = s.work_items;
  const int rank = k.domain.rank();
  const bool reduces = k.has_reduction();
  if (rank > 0 && !k.reduced[static_cast<size_t>(rank - 1)]) {
    const int64_t last = k.domain[rank - 1];
    int64_t kept = 1;
    for (int d = 0; d < rank; ++d)
      if (!k.reduced[static_cast<size_t>(d)]) kept *= k.domain[d];
    // Tiles of the last dim: wide enough to amortize the loop over reduced dims, small
    // enough that a tile's accumulators stay in L1 and that a 1-D domain still splits.
    s.tile = reduces ? 256 : 4096;
    // With enough kept rows to share out, a reduction takes long pieces of rows (contiguous
    // reads); its per-lane accumulators (up to 8 bytes each) must stay in L1 beside the rows.
    if (reduces && kept / std::max<int64_t>(1, last) >= 16) s.tile = 4096;
    // Work-item devices run one kept point per work-item.
    if (work_items) s.tile = 1;
  }
  const int64_t tile = s.tile;
  update_walk(k, s);

  // One register of the widest element per step; arg reductions run scalar (their index
  // bookkeeping is per lane). Along a reduced row, two registers per step: two independent
  // accumulator chains (LLVM splits the wide vectors into native registers).
  s.vector_width = has_arg_reduction(k) || rank == 0 ? 1 : register_lanes(k, caps);
  s.accumulators = s.lanes_reduce && s.vector_width > 1 ? 2 : 1;
  // A reduction whose rows fill less than a vector, in planes of one to four vectors, walks
  // a plane per iteration (kir::merge_rows): a 7x7 depthwise convolution's taps then sum in
  // 4 independent chains of full vectors instead of one chain of 7 lanes (C=576, 5x5 taps:
  // 115 -> 16.5 us; 8x8 planes 75 -> 36 us). Planes of 7 vectors and more ran slower (10x10:
  // 55 -> 120 us, the vectors' i64 positions spill), and a 3x3 plane fills no vector. Not
  // where a merged position is no longer affine: a stride-2 window's rows do not follow each
  // other, and its merged reads are gathers (5x5 over 14x14 to 7x7, 288 channels, AVX-512:
  // 127 us merged, 60 us row by row).
  //
  // An elementwise tile walks its row in vector steps, then a lane at a time for what is
  // left: a row of 7 (a 7x7 plane's) is 7 scalar steps, a row of 56 three vector steps and
  // 8 scalar ones. Where the rows follow each other in every buffer it reads and writes,
  // the plane walks as one row (SE block's scale, [1, 576, 7, 7]: 24.6 -> 3.3 us).
  if (!work_items && !s.lanes_reduce && s.vector_width > 1 && merged_row_dim(k) >= 0) {
    const int64_t row = k.domain[rank - 1], plane = row * k.domain[merged_row_dim(k)];
    const int64_t lanes = s.vector_width;
    const bool merge = reduces ? row < lanes && plane >= lanes && plane <= 4 * lanes &&
                                     merge_keeps_positions_affine(k, /*compares=*/false)
                               : row % lanes != 0 && merge_keeps_positions_affine(k);
    if (merge) {
      c.merge_rows = 1;
      // Its window's rows unrolled: a step's positions, bounds and masks are then constants
      // (5x5 over 7x7, 576 channels: 43-50 -> 21-25 us). Rows walked one by one gain nothing from
      // it (the row's own index stays a variable), and the code grows with every row.
      if (reduces && window_rows(k) <= kMaxUnrolledWindowRows) c.unroll_window = 1;
      s.tile = tile;
      update_walk(k, s);
    }
  }
  // A reduction's tile walks its row in vector steps, each summing in a chain of dependent
  // adds. Where the walk is split into stretches (split_lanes, below), what the vectors
  // leave goes one lane at a time: a row of 14 with 16 lanes is 14 scalar steps, with 4
  // lanes 3 vector steps and 2 scalar ones. The fewest steps, down to 4 lanes (depthwise
  // 5x5 over 14x14, 240 channels: 16 lanes 113 us, 4 lanes 48 us; 3x3 over 28x28: 32 -> 16
  // us with 8; 56x56, 144 channels: 16 lanes 400-470 us, 8 lanes 220-268; AVX2).
  const int full_width = s.vector_width;
  if (!work_items && !s.lanes_reduce && reduces && s.vector_width > 4) {
    const int64_t row = s.tile;
    auto steps = [&](int64_t lanes) { return row / lanes + row % lanes; };
    int best = s.vector_width;
    for (int lanes = s.vector_width / 2; lanes >= 4; lanes /= 2)
      if (steps(lanes) < steps(best)) best = lanes;
    s.vector_width = best;
  }
  // A walk of lanes splits where its masks settle (kir::lane_bounds). At cuts (a concat's
  // operands, a horizontal kernel's parts) each stretch computes only its own part. Around a
  // padded window's interior, whose bounds each row computes anew, where its tile is at
  // least 8 vectors (a depthwise 3x3 over 112x112, W10: 2.3 -> 1.9 ms; over 56x56 no
  // difference, over 14x14 with 4 lanes 1.5x slower: the borders walk lane by lane).
  // Where each access lies, for the lane cuts and the window rows below.
  const std::vector<std::optional<Affine>> affine = work_items ? std::vector<std::optional<Affine>>{} : affine_analysis(k);
  if (!work_items && rank > 0) {
    const std::vector<LaneBound> bounds = lane_bounds(k, affine, rank - 1);
    const int64_t lanes_walked = s.lanes_reduce ? k.domain[rank - 1] : s.tile;
    const bool interior = std::any_of(bounds.begin(), bounds.end(), [](const LaneBound& b) { return !is_cut(b); });
    if (interior && lanes_walked >= 8 * int64_t{s.vector_width}) c.split_lanes = 2;
    else if (std::any_of(bounds.begin(), bounds.end(), is_cut)) c.split_lanes = 1;
  }
  // Elsewhere a tile whose lanes end past its last whole vector walks them in one more
  // vector step with the lanes past the end masked off, at the registers' full width
  // (depthwise 5x5 over 14x14, 240 channels: one step of 16 lanes a row, AVX-512, 56-97 us,
  // where 4 lanes took 105 and 16 lane by lane 217; AVX2 119 -> 72-91 us with 2 steps of 8).
  // Not where the walk is split into stretches, which share the accumulators (llvm_codegen's
  // masked_tail).
  const auto leaves_lanes = [&](int64_t lanes) {
    const int64_t row = walked_row(k, s);
    return s.tile % lanes != 0 || row % s.tile % lanes != 0;
  };
  if (!work_items && !s.lanes_reduce && reduces && c.split_lanes == 0 && full_width > 1 && leaves_lanes(full_width)) {
    c.masked_tail = 1;
    s.vector_width = full_width;
  }
  // Work-item devices: a point per work-item unless tuned otherwise (the `vector_width` knob:
  // lanes per work-item, read with vector loads where the language has them).
  if (work_items) {
    s.vector_width = default_lanes(k, s, caps);
    s.accumulators = 1;
  }
  // Cheap elementwise tiles (no reduction, nothing transcendental) take several vector steps
  // per trip of their loop, whose own cost shows beside a load, an add and a store (an
  // embedding's gather ran 25% slower without). Bodies with exp or tanh do enough per step,
  // and unrolling them would multiply their compile time.
  if (!work_items) {
    c.vector_unroll = !s.lanes_reduce && !k.has_reduction() && !has_expensive_op(k) ? 4 : 1;
    c.unroll = 4;
    // Rows of a reduction combined per accumulator update: 4, or the whole innermost reduced
    // dim where it is shorter, which 4 would leave uncombined (a 3-tap window line: W10, a
    // depthwise 3x3 over 112x112, 1.46 -> 0.68 ms). Window lines of up to 5 taps also take 4
    // vector steps per trip (3x3 with stride 2 over 56x56 134 -> 74 us, 5x5 over 28x28 139 ->
    // 105 us); 7 taps ran 1.5-2x slower so (benchmarks/RESULTS.md, twenty-fourth session).
    if (rank > 0 && !s.lanes_reduce) {
      for (int d = rank - 1; d >= 0; --d)
        if (k.reduced[static_cast<size_t>(d)]) {
          if (k.domain[d] >= 2 && k.domain[d] < c.unroll) c.unroll = static_cast<int>(k.domain[d]);
          if (k.domain[d] <= 5) c.vector_unroll = 4;
          break;
        }
    }
  }
  // A window's rows lie inside the input in most iterations (all but 4 of each 14 rows for
  // a 5x5 window): those walk with the row bounds known, a branch per iteration for a compare
  // and a mask per window row (AVX-512, depthwise: 3x3 over 56x56, 144 channels, 102 -> 85
  // us; 3x3 with stride 2 over 112x112, 96 channels, 148 -> 113 us; 5x5 over 14x14 and 28x28
  // unchanged). Not in a merged plane, whose rows are its lanes.
  if (!work_items && !s.lanes_reduce && reduces && !c.merge_rows &&
      !window_row_bounds(k, affine, rank - 1).empty())
    c.split_rows = 1;
  s.f32_run = 256;
  // Rows up to 16K elements keep expensive values (softmax's exp) between passes, in at most
  // 128 KiB of stack (TBB workers have a few MiB).
  s.row_cache_elements = 16384;
  s.row_cache_bytes = 128 * 1024;
  // A row per work-item caches them in private arrays: on the stack of a CPU thread where
  // work-groups are its loops (PoCL, whose threads have a few MiB), spilled to memory on a
  // GPU, which recomputes instead.
  if (work_items) {
    s.row_cache_bytes = caps.vectorizes_work_item_loop ? 64 * 1024 : 0;
    if (s.row_cache_bytes == 0) s.row_cache_elements = 0;
  }
  // A row's first pass reads it from memory, and the passes after it (softmax's exp and
  // division, layer norm's variance and stores) compute from cache while the memory system
  // idles: the second pass prefetches the next row, and this row's stores for writing.
  // Rows of 4 KiB (64 lines: the hardware's own prefetcher stops at the end of each row it
  // streams) to 256 KiB (a quarter of a core's L2: longer rows leave it before the passes
  // after the first read them, and the next row's lines would too). W3 ran 3.63 -> 2.95
  // ms, W4 2.46 -> 2.29 (benchmarks/RESULTS.md).
  if (work_items) {
    default_work_items(k, s, caps);
  } else {
    const int64_t row_bytes = s.elements_per_iteration * static_cast<int64_t>(widest_element(k));
    c.prefetch_rows = s.lanes_reduce && s.vector_width > 1 && row_bytes >= (4 << 10) && row_bytes <= (256 << 10);
    c.task_elements = default_task_elements(s, caps);
  }
  if (k.in_order && k.rows_independent && rank > 0) {
    // A row per iteration, walked in order by one lane; rows split across workers as an
    // elementwise kernel's tiles do, a row per work-item on work-item devices.
    s.vector_width = 1;
    s.accumulators = 1;
    s.tile = k.domain[rank - 1];
    update_walk(k, s);
    if (work_items) {
      w.local_size = std::min<int64_t>(64, std::max<int64_t>(1, caps.max_work_group));
      w.reduction = ReductionStrategy::Serial;
      place_work_items(s, caps, 1);
    } else {
      c.task_elements = default_task_elements(s, caps);
    }
  } else if (k.in_order) {
    // One worker, one lane, the iterations in order (a tile is a run of the last dim).
    s.vector_width = 1;
    s.accumulators = 1;
    c.task_elements = 0;
    if (work_items) {
      w.local_size = 1;
      w.reduction = ReductionStrategy::Serial;
      place_work_items(s, Capabilities{}, s.iterations);
    }
  }
  // Work-item devices compute positions in 32 bits where that is exact; the cpu backend's
  // LLVM code keeps i64 (its address arithmetic is native).
  if (work_items && index_fits_32(k)) w.index_bits = 32;
  for (const auto& custom : k.customs)
    for (const CustomTunable& t : custom->signature.tunables) s.custom_macros.push_back(t.default_value);
  if (!work_items) c.pipeline = default_cpu_pipeline(k, s);
  return s;
}

}  // namespace kiln::kir

namespace kiln::kir {

std::string GemmSchedule::str() const {
  if (group_m > 0)
    return fmt::format("gemm {{group = {}x{}x{}, mr = {}, nr = {}, local = {}}}", group_m, group_n, group_k, mr, nr,
                       local_size());
  return fmt::format("gemm {{mr = {}, nr = {}, vector = {}, kc = {}, mc = {}, nc = {}, serial_below = {}{}{}{}{}{}}}", mr,
                     nr, vector_width, kc, mc, nc, serial_below, threads > 0 ? fmt::format(", threads = {}", threads) : "",
                     windows_in_place > 0 ? ", windows_in_place = 1" : "",
                     channel_lanes > 0 ? ", channel_lanes = 1" : "",
                     prefetch_a > 0 ? fmt::format(", prefetch_a = {}", prefetch_a) : "",
                     prefetch_b > 0 ? ", prefetch_b = 1" : "");
}

namespace {

// The GPU form. A work-item holds 4 rows of C times one vector of columns (4 scalar columns
// where the device prefers scalars, as GPUs do: 16 accumulators and 8 operands, what a GPU
// thread's registers hold beside its addresses; PoCL on AVX-512 prefers 16 floats, and a
// 4 x 16 block of float16 vectors runs W6 at 27 GFLOP/s there against 8 with 4 x 4 scalars).
// Work-group tiles are 64 rows by 16 work-items' columns (8 work-items of 16-wide vectors),
// no larger than the product needs (a 10-column product gets one vector, not 128 columns);
// 16 deep, so a step's tiles leave local memory for more than one group per compute unit.
GemmSchedule default_gpu_gemm_schedule(DType dtype, int64_t m, int64_t n, const Capabilities& caps) {
  GemmSchedule s;
  const int es = static_cast<int>(dtype == DType::Bool ? 1 : dtype_size(dtype));
  s.vector_width = is_float(dtype) ? std::clamp(caps.vector_bytes / es, 1, 16) : 1;
  while (s.vector_width > 1 && s.vector_width >= 2 * n) s.vector_width /= 2;  // lanes past the last column are waste
  s.mr = 4;
  s.nr = std::max(4, s.vector_width);
  auto extent = [](int64_t size, int64_t block, int64_t most) {
    int64_t e = block;
    while (e < most && e < size) e *= 2;
    return e;
  };
  s.group_m = extent(m, s.mr, 64);
  s.group_n = extent(n, s.nr, s.vector_width >= 8 ? 128 : 64);
  s.group_k = 16;
  // Not 2 work-items where the device has 4: PoCL 3.1's work-group compiler aborts
  // (ParallelRegion.cc:346, `exit != NULL`) on this kernel with 2 work-items and more than
  // one step along K (1, and 4 and more, are fine); a product this small loses nothing by a
  // taller tile.
  const int64_t limit = std::max<int64_t>(1, caps.max_work_group);
  if (s.local_size() == 2 && limit >= 4) s.group_m *= 2;
  while (s.local_size() > limit && (s.group_m > s.mr || s.group_n > s.nr)) {
    if (s.group_m >= s.group_n && s.group_m > s.mr) s.group_m /= 2;
    else s.group_n /= 2;
  }
  return s;
}

}  // namespace

int gemm_vector_registers(const Capabilities& caps) { return caps.vector_bytes >= 64 ? 32 : 16; }

bool windows_in_place_legal(const ConvGeometry& c) {
  return c.dims >= 1 && std::all_of(c.low.begin(), c.low.end(), [](int64_t low) { return low >= 0; });
}

namespace {

// Whether reading a convolution's windows in place pays on a CPU. A tile never crosses an
// output line, so a line of 7 positions fills 16-wide tiles less than half: lines narrower
// than a tile, or wasting more than 1/8 of the lanes, gather the windows into whole panels
// (ResNet-18's 14-wide lines ran 1.2-1.5x faster gathered on AVX2, where they fill 16-wide
// tiles; its 28-wide ones 1.6-1.8x slower). A line that one narrow tile (a vector wide)
// holds with at most 1/8 of it idle is read in place: on AVX-512, 14-wide lines in 16-lane
// tiles (ResNet-50's 3x3 products over 14x14, batch 4: 5.9-6.5 -> 5.2-5.6 ms each). AVX2's
// 8-lane tiles were not measured so, and keep the gathered panels. And a window of one
// element per channel (a strided 1x1 convolution) makes each step of the depth a line of
// another plane: the tile's steps spread over as many pages as it has channels, where the
// gathered panel is contiguous (ResNet-50's downsampling products ran 1.2x slower so).
bool windows_in_place_pay(const ConvGeometry& c, int nr, int vector_width) {
  const int64_t line = c.out.back();
  if (!windows_in_place_legal(c) || c.window() < 4) return false;
  if (line <= vector_width && vector_width >= 16) return vector_width * 7 <= line * 8;
  return line > nr && (line + nr - 1) / nr * nr * 7 <= line * 8;
}

// Vectors of output channels per tile row with channel_lanes, where `m` channels fill them
// to within 1/8 (two where they fill both, else one): 0 where neither does.
int channel_lane_vectors(int64_t m, int vector_width) {
  for (int vectors : {2, 1}) {
    const int64_t lanes = int64_t{vectors} * vector_width;
    if (m >= lanes / 2 && (m + lanes - 1) / lanes * lanes * 7 <= m * 8) return vectors;
  }
  return 0;
}

// Whether a convolution's product pays run with output channels in the lanes
// (GemmSchedule::channel_lanes): its windows are read in place, the channels fill the lanes
// and the window has 4 elements or more per channel (a strided 1x1 window's step is a line
// of another plane: not measured so). A tile of positions fits a line of any width where
// one of positions in the lanes leaves lanes idle: ResNet-18's 3x3 products ran at 68-77%
// of the multiply-add peak with positions in the lanes, 80-90% in a hand-written loop of
// this form.
bool channel_lanes_pay(const ConvGeometry& c, int64_t m, int vector_width) {
  return windows_in_place_legal(c) && c.window() >= 4 && channel_lane_vectors(m, vector_width) > 0;
}

// The blocking of a product run transposed (GemmSchedule::channel_lanes), its fields over
// C^T: `mr` positions of a line per tile (as many as the registers hold beside the weights'
// vectors, evened out over the line: 56 is 4 x 14, 17 is 9 + 8; a plain product's line is
// a row of C), `nr` channels in lanes; the depth in equal panels of at most 1024 steps (each
// adding into C once); the channels split among the cores where there are enough, every
// task walking all positions (whole rows of C, for the epilogue), else the lines (not for a
// product that runs on one thread, below serial_below: its epilogue then runs on the whole
// of it). `windows`: the convolution's, read in place; null for a plain product.
GemmSchedule channel_lanes_schedule(GemmSchedule s, int64_t m, int64_t n, int64_t k, const Capabilities& caps,
                                    int64_t epilogue_columns, const ConvGeometry* windows) {
  const int vectors = std::max(1, channel_lane_vectors(m, s.vector_width));
  s.windows_in_place = windows != nullptr ? 1 : 0;
  s.channel_lanes = 1;
  s.prefetch_a = 0;  // the positions are not a packed panel
  s.prefetch_b = 0;
  s.nr = vectors * s.vector_width;
  const int64_t line = std::max<int64_t>(1, windows != nullptr ? windows->out.back() : n);
  // At most a vector of rows: the micro-kernel stores the tile transposed, a column of it
  // (a channel's positions) a vector.
  const int64_t most_rows =
      std::clamp((gemm_vector_registers(caps) - vectors - 1) / vectors, 1, std::min(14, s.vector_width));
  const int64_t tiles_per_line = (line + most_rows - 1) / most_rows;
  s.mr = static_cast<int>((line + tiles_per_line - 1) / tiles_per_line);
  const int64_t depth_panels = (std::max<int64_t>(k, 1) + 1023) / 1024;
  s.kc = (std::max<int64_t>(k, 1) + depth_panels - 1) / depth_panels;
  const int64_t cores = std::max(1, caps.cores), channel_panels = std::max<int64_t>(1, (m + s.nr - 1) / s.nr);
  s.mc = std::max<int64_t>(n, 1);
  s.nc = s.nr * ((channel_panels + std::min(cores, channel_panels) - 1) / std::min(cores, channel_panels));
  if (channel_panels < cores && m * n * k >= s.serial_below) {
    const int64_t lines = (n + line - 1) / line;
    s.mc = std::max<int64_t>(1, (lines + cores - 1) / cores) * line;
    if (epilogue_columns > 0 && epilogue_columns < n) {
      const int64_t unit = std::lcm<int64_t>(line, epilogue_columns);
      const int64_t mc = (s.mc + unit - 1) / unit * unit;
      if ((n + mc - 1) / mc >= cores) s.mc = mc;
    }
  }
  return s;
}

}  // namespace

bool rows_in_lanes_pay(DType dtype, int64_t m, int64_t n, int64_t k, const Capabilities& caps) {
  if (caps.family == DeviceFamily::WorkItems) return false;
  const int es = static_cast<int>(dtype == DType::Bool ? 1 : dtype_size(dtype));
  const int lanes = std::max(1, caps.vector_bytes / es);
  const int64_t tile = 2 * int64_t{lanes}, idle = (n + tile - 1) / tile * tile - n;
  return k >= 64 && idle * 16 > n && channel_lane_vectors(m, lanes) > 0;
}

GemmSchedule default_gemm_schedule(DType dtype, int64_t m, int64_t n, int64_t k, const Capabilities& caps,
                                   int64_t epilogue_columns, const ConvGeometry* windows,
                                   std::optional<bool> channel_lanes) {
  if (caps.family == DeviceFamily::WorkItems) return default_gpu_gemm_schedule(dtype, m, n, caps);
  GemmSchedule s;
  const int es = static_cast<int>(dtype == DType::Bool ? 1 : dtype_size(dtype));
  s.vector_width = std::max(1, caps.vector_bytes / es);
  // Register tile: two vectors per row of C, and as many rows as the registers hold next to
  // the two B vectors and the broadcast A value.
  const int registers = gemm_vector_registers(caps);
  const int per_row = 2;
  s.nr = per_row * s.vector_width;
  s.mr = std::clamp((registers - per_row - 1) / per_row, 1, 8);
  // A's panel a few cache lines ahead: ResNet-18's 3x3 products over 512 channels (9.4 MB
  // of weights, from memory at every call) ran 1.65 -> 1.38 ms so on an AVX-512 Xeon, and
  // nothing in cache ran slower (64 steps: 2 KiB of an 8-row f32 panel).
  s.prefetch_a = 64;
  // And B's next micro-panel, where B is packed once (GPT-2 150 -> 145 ms a call, BERT 1-3%).
  s.prefetch_b = 1;
  // A micro-panel of B (kc x nr) stays in L1 while the A panels stream past it. A B past
  // 2 MiB streams from L3 however it is cut: its panels are as deep as the product up to
  // 1024, so that each tile of C is written once, and B's micro-panel (128 KiB) streams from
  // L2 beside the A block, as in the peers' hand-written GEMM (W6: 4% faster; W7's 1-2 MiB
  // operands ran 5% slower so).
  const bool b_past_l2 = k * n * es > (int64_t{2} << 20);
  const int64_t micro_panel_bytes = b_past_l2 ? 131072 : 32768;
  s.kc = std::clamp<int64_t>(micro_panel_bytes / (s.nr * es), 64, b_past_l2 ? 1024 : 512);
  s.kc = std::min(s.kc, std::max<int64_t>(k, 1));
  // Transposed, C's rows in the lanes, where asked (a plain product: rows_in_lanes_pay) or
  // where a convolution's output channels fill them.
  if ((windows == nullptr || windows_in_place_legal(*windows)) &&
      channel_lanes.value_or(windows != nullptr && channel_lanes_pay(*windows, m, s.vector_width)))
    return channel_lanes_schedule(s, m, n, k, caps, epilogue_columns, windows);
  // Windows read in place have no B panel to keep in L1: the depth is cut only into equal
  // panels of at most 1024 steps, each adding its tile into C once (a 3x3 window over 64
  // channels ran 10% faster as one panel of 576 than as two of 288).
  const bool in_place = windows != nullptr && windows_in_place_pay(*windows, s.nr, s.vector_width);
  if (in_place) {
    s.windows_in_place = 1;
    const int64_t panels = (std::max<int64_t>(k, 1) + 1023) / 1024;
    s.kc = (std::max<int64_t>(k, 1) + panels - 1) / panels;
  }
  // Blocks of columns that are whole output lines: a tile cut by a block's end is an edge tile.
  const auto whole_lines = [&](int64_t nc) {
    if (!in_place) return nc;
    const int64_t line = windows->out.back();
    return std::min(std::max<int64_t>(n, 1), std::max<int64_t>(line, nc / line * line));
  };
  // An A block (mc x kc) in L2, and a number of blocks the cores share evenly (5 blocks on
  // 2 cores leave one idle for a fifth of the time).
  const int64_t rows_l2 = std::max<int64_t>(s.mr, (262144 / (s.kc * es)) / s.mr * s.mr);
  const int64_t cores = std::max(1, caps.cores), panels = std::max<int64_t>(1, (m + s.mr - 1) / s.mr);
  // A short, wide product (a convolution's: 64 filters x 3136 positions; a transformer's
  // 197 tokens x 3072 features) keeps all of A in one L2 block and splits the columns among
  // the cores instead: each task packs its own B block (gathered windows, for a convolution)
  // into L2 and uses it at once, where packing all of B first would write and read back
  // more than the caches hold; a B packed once is read from memory once, not once per block
  // of rows (ViT-B/16's products on a 1 MiB L2: 227-231 -> 205 ms a call). The depth is cut
  // into equal panels where that keeps A in L2, down to 256 steps (each panel adds into C).
  const int64_t a_block_bytes = std::max<int64_t>(524288, caps.l2_bytes * 3 / 4);
  const int64_t mpad = panels * s.mr;  // an empty A: one panel
  const int64_t kc_in_l2 = a_block_bytes / (mpad * es);
  if (kc_in_l2 >= std::min<int64_t>(s.kc, 256) && n >= 4 * s.nr * cores) {
    if (s.kc > kc_in_l2) {
      const int64_t depth_panels = (k + kc_in_l2 - 1) / kc_in_l2;
      s.kc = (k + depth_panels - 1) / depth_panels;
    }
    s.mc = mpad;
    // B blocks of at most 512 KiB, as many as a multiple of the cores (768 columns in 5
    // blocks left one core idle a fifth of the time); and C's block too, which a shallow
    // product writes more of than it reads of B, and its epilogue reads back: in L2 while
    // it does (medians of 8 alternations: EfficientNet's 96 x 12544 x 16 with its SiLU 0.72 ->
    // 0.69 ms; ResNet-50's 256 x 3136 x 64, batch 4, with its residual add and relu 4.6 -> 4.1).
    const int64_t l2_columns =
        std::max<int64_t>(s.nr, (524288 / (std::max(s.kc, mpad) * es)) / s.nr * s.nr);
    const int64_t nblocks = ((n + l2_columns - 1) / l2_columns + cores - 1) / cores * cores;
    s.nc = std::max<int64_t>(s.nr, ((n + nblocks - 1) / nblocks + s.nr - 1) / s.nr * s.nr);
    if (in_place) {
      const int64_t line = windows->out.back(), lines = (n + line - 1) / line;
      s.nc = (lines + nblocks - 1) / nblocks * line;
    }
    // The epilogue (a convolution's bias, activation and residual) runs on each block while
    // it is in cache when the blocks start where its iterations do: whole lines of the
    // output plane. Not at the cost of the cores: with too few blocks left, it runs apart.
    if (epilogue_columns > 0 && epilogue_columns < n) {
      const int64_t unit = std::lcm<int64_t>(in_place ? windows->out.back() : s.nr, epilogue_columns);
      const int64_t nc = (s.nc + unit - 1) / unit * unit;
      if ((n + nc - 1) / nc >= cores) s.nc = nc;
    }
    return s;
  }
  int64_t blocks = std::max<int64_t>((m + rows_l2 - 1) / rows_l2, std::min(cores, panels));
  if ((blocks + cores - 1) / cores * cores <= panels) blocks = (blocks + cores - 1) / cores * cores;
  s.mc = ((m + blocks - 1) / blocks + s.mr - 1) / s.mr * s.mr;
  s.mc = std::max<int64_t>(s.mc, s.mr);
  // A B block (kc x nc) in a slice of L3.
  const int64_t all_columns = std::max<int64_t>(s.nr, (n + s.nr - 1) / s.nr * s.nr);
  s.nc = whole_lines(std::clamp<int64_t>((4 << 20) / (s.kc * es) / s.nr * s.nr, s.nr, all_columns));
  // An epilogue runs on a block of C in cache only where the block's columns start where its
  // iterations do, and an elementwise epilogue's iteration is often a whole row: cut into
  // blocks of columns, the product leaves it to a pass of its own that reads C back (an
  // optimizer's update after a weight gradient: 1.5 ms of a GPT-2 block's step). With B
  // packed whole, as it is for two blocks of rows or more, nc only sets how many micro-panels
  // of B a task walks: the caches see the same panels either way.
  if (epilogue_columns > 0 && (m + s.mc - 1) / s.mc >= cores) s.nc = in_place ? n : all_columns;
  return s;
}

}  // namespace kiln::kir

namespace kiln::kir {

std::string AttentionSchedule::str() const {
  if (local_size > 0) return fmt::format("attention {{local = {}, vector = {}}}", local_size, vector_width);
  return fmt::format("attention {{rows = {}, keys = {}, tile = {}x{}, vector = {}}}", block_rows, block_keys, tile.mr,
                     tile.nr, tile.vector_width);
}

AttentionSchedule default_attention_schedule(int64_t rows, int64_t keys, int64_t depth, int64_t width,
                                             const Capabilities& caps) {
  AttentionSchedule s;
  if (caps.family == DeviceFamily::WorkItems) {
    // A row per work-item: its accumulators are registers, so a group is no wider than a
    // GPU's warp needs. Where the language computes on vectors (PoCL vectorizes them, not
    // the walk over keys every work-item runs alike), the widest that divides both rows.
    s.local_size = std::clamp<int64_t>(64, 1, std::max<int64_t>(1, caps.max_work_group));
    if (caps.vector_values)
      for (int lanes : {16, 8, 4, 2})
        if (lanes * 4 <= std::max(4, caps.vector_bytes) && depth % lanes == 0 && width % lanes == 0) {
          s.vector_width = lanes;
          break;
        }
    return s;
  }
  // The micro-kernel's register tile, as the GEMM's; a block of scores (block_rows x
  // block_keys floats) and the rows' accumulators stay in L1 and L2 beside the packed panels.
  s.tile = default_gemm_schedule(DType::F32, rows, keys, depth, caps);
  const int64_t mr = s.tile.mr, nr = s.tile.nr;
  s.block_rows = std::clamp<int64_t>((rows + mr - 1) / mr * mr, mr, 4 * mr);
  s.block_keys = std::clamp<int64_t>((keys + nr - 1) / nr * nr, nr, 8 * nr);
  return s;
}

}  // namespace kiln::kir
