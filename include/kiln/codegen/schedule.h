// kiln/codegen/schedule.h - how a kernel runs, as data: the layer the autotuner varies.
//
// A Kernel says what is computed; a Schedule says how a backend walks it: the split of the
// domain into independent iterations, launch geometry, the reduction strategy, vector
// width, accumulator chains, unrolling, tiles and the grain of the parallel split. Backends
// read every such knob from here (no tuning literal lives inside an emitter), the schedule is
// part of every kernel cache key, and `kiln codegen --target kernel` prints it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/codegen/kernel_ir.h"
#include "kiln/ir/conv.h"

namespace kiln {

/// How a device runs a kernel, which decides the part of a schedule its emitter reads:
/// tasks of iterations on CPU cores (Schedule::cpu), or a grid of work-items in work-groups
/// (Schedule::work_items: OpenCL, Vulkan, also where the work-groups are loops on CPU cores).
enum class DeviceFamily : uint8_t { Cpu, WorkItems };
std::string_view device_family_name(DeviceFamily f);

/// What a device offers to kernels: read by default_schedule and by the engine (which
/// dtypes a backend can run).
struct Capabilities {
  DeviceFamily family = DeviceFamily::Cpu;
  bool fp64 = true;
  bool int64 = true;
  bool storage16 = true;      // buffers of 16-bit elements (i16, u16, f16, bf16)
  bool local_memory = false;  // work-group shared memory: work-group tree and subgroup reductions
  int subgroup_size = 1;      // lanes that run in lockstep and can shuffle (1: none)
  int64_t max_work_group = 1;
  /// Work-groups one launch may have (0: no limit; Vulkan guarantees 65535): beyond it each
  /// work-item runs several iterations (`elements_per_item`).
  int64_t max_work_groups = 0;
  int vector_bytes = 16;      // widest native vector register (CPU: 64 with AVX-512)
  int cores = 1;              // independent workers the launch can split across
  /// A core's L2 cache in bytes (0: not known): the CPU GEMM sizes the A block it keeps
  /// there from it (default_gemm_schedule).
  int64_t l2_bytes = 0;
  /// Work-groups run as loops on CPU cores (PoCL): a barrier splits the loop, so a tree
  /// reduction costs more than a row per work-item whenever the rows fill the cores.
  bool emulated_work_groups = false;
  /// The compiler vectorizes a work-group's loop over its work-items, but only where that
  /// loop is innermost (PoCL): in a kernel that walks a reduction's loop of its own, vectors
  /// come from lanes per work-item instead (`Schedule::vector_width`; default_schedule).
  bool vectorizes_work_item_loop = false;
  /// The kernel language reads a work-item's lanes of consecutive elements with one vector
  /// load (OpenCL C's vloadN); GLSL's storage buffers are arrays of scalars, read lane by lane.
  bool vector_loads = false;
  /// The kernel language computes on vectors (OpenCL C's float16), so a work-item's lanes
  /// are one vector value wherever the kernel allows it (c_lanes_as_vectors), not a scalar
  /// per lane that the driver's compiler must put back together.
  bool vector_values = false;
  /// Bytes every buffer's base is aligned to (0: not known). A vector access of at most that
  /// many bytes at an offset its size divides is written as an aligned one: PoCL writes
  /// OpenCL's element-aligned vstore16 as three stores.
  int buffer_alignment = 0;
  /// f32 division and square roots round correctly, as the interpreter's (OpenCL built with
  /// -cl-fp32-correctly-rounded-divide-sqrt where the device offers it): the C-family emitter
  /// writes them in f32, not through double (which rounds to the same value, at a cost).
  bool exact_f32_divide_sqrt = false;
  /// Loop iterations one work-item may run in all, over every loop of its kernel (0: no
  /// limit). lavapipe ends a shader's loops after 65535 back-edges (Mesa's
  /// LP_MAX_TGSI_LOOP_ITERATIONS), silently; default_schedule keeps rows under it and the
  /// C-family emitter refuses a kernel that could exceed it.
  int64_t max_loop_iterations = 0;
  /// The languages of custom kernels (docs/custom_kernels.md) the device compiles: C and
  /// OpenCL C on cpu (through Clang), OpenCL C on opencl, neither on vulkan.
  bool custom_c = false;
  bool custom_opencl_c = false;
  /// Whether transcendental functions (sin, exp, pow...) round exactly as the host's libm,
  /// which the interpreter calls: the differential oracle compares them bit for bit then.
  bool exact_math = true;
  /// Independent elementwise kernels of one body run as one launch (merge_horizontal), at
  /// most this many to a launch (0: never): the cpu walks each part apart (its masks are
  /// kir::lane_bounds' cuts); the C-family emitter puts each part in a branch that only the
  /// work-items meeting its range take.
  int horizontal_parts = 0;
  /// What a kernel that kiln joins from others may take (0: no limit): buffer parameters
  /// (Vulkan's maxPerStageDescriptorStorageBuffers), and bytes of arguments, counting 8 for
  /// each scalar and `buffer_argument_bytes` for each buffer (OpenCL's
  /// CL_DEVICE_MAX_PARAMETER_SIZE, where a buffer is a cl_mem; Vulkan's push constants, which
  /// hold the scalars only).
  int64_t max_kernel_buffers = 0;
  int64_t max_argument_bytes = 0;
  int buffer_argument_bytes = 0;
};

namespace kir {

enum class ReductionStrategy : uint8_t {
  Serial,         // one worker reduces a whole row (CPU; GPU rows shorter than a group)
  WorkGroupTree,  // a work-group reduces a row cooperatively, a tree in local memory
  Subgroup,       // subgroup shuffles, then across subgroups
};
std::string_view reduction_strategy_name(ReductionStrategy s);

/// The LLVM pass pipeline the cpu backend optimizes a kernel with.
enum class CpuPipeline : uint8_t {
  /// The passes kiln's IR needs: it is vectorized and blocked by the schedule already, so
  /// inlining, scalar cleanup, loop-invariant code motion, full unrolling of constant loops
  /// and the unrolling `vector_unroll` asks for are what is left to do. Half of O2's
  /// compile time; the default for vector code.
  Lean,
  /// LLVM's O2: its loop passes, which scalar code needs, and the loop vectorizer, which
  /// widens a custom kernel's call (the default for both).
  O2,
};
std::string_view cpu_pipeline_name(CpuPipeline p);

/// The cpu family's part of a schedule: how tasks of iterations walk their lanes on cores.
struct CpuSchedule {
#define KILN_CPU_FIELD(type, name, init) type name = init;
#include "kiln/codegen/schedule.def"
  friend bool operator==(const CpuSchedule&, const CpuSchedule&) = default;
};

/// The work-item family's part: the launch geometry and how a work-group reduces a row.
struct WorkItemSchedule {
#define KILN_WORK_ITEM_FIELD(type, name, init) type name = init;
#include "kiln/codegen/schedule.def"
  friend bool operator==(const WorkItemSchedule&, const WorkItemSchedule&) = default;
};

/// How a kernel runs: the walk, the knobs every family reads, and the part of the device's
/// family (kiln/codegen/schedule.def declares every field; the other family's part keeps its
/// defaults and is not in the cache key).
struct Schedule {
  DeviceFamily family = DeviceFamily::Cpu;
#define KILN_WALK_FIELD(type, name, init) type name = init;
#define KILN_COMMON_FIELD(type, name, init) type name = init;
#include "kiln/codegen/schedule.def"
  CpuSchedule cpu;
  WorkItemSchedule work_items;
  /// The custom kernels' tunable macros (CustomSignature::tunables): a value per macro, in
  /// Kernel::customs order then each one's tunables order.
  std::vector<int64_t> custom_macros;

  /// Iterations per task of the cpu's parallel split (>= iterations: one task), from
  /// `cpu.task_elements`.
  int64_t task_grain() const;

  /// The value of the knob (the field) `name` of the common part or the family's, as an
  /// integer; nullopt for a name that is no such field.
  std::optional<int64_t> field(std::string_view name) const;
  /// Sets it; false for a name that is no such field.
  bool set_field(std::string_view name, int64_t value);

  /// One line, every field of the walk, the common part and the family's part:
  /// `schedule {tiles, iterations = 8, ..., cpu {merge_rows = 0, ...}}`; part of the kernel
  /// cache keys.
  std::string str() const;
  friend bool operator==(const Schedule&, const Schedule&) = default;
};

/// How a GEMM step (LaunchPlan::Gemm) runs: the blocking of a register-blocked matrix
/// product.
///
/// CPU (`group_m == 0`): C is computed in tiles of `mr` x `nr` by a micro-kernel that keeps
/// the tile in registers; A is packed in blocks of `mc` x `kc` (in L2), B in blocks of `kc` x
/// `nc` (in L3); the tasks of the parallel split are (batch, mc block, nc block), on at most
/// `threads` workers. With `windows_in_place` (a convolution's product, Gemm::im2col), B is
/// not gathered into packed panels: the input is copied once into planes padded by the
/// convolution's padding (each line split into phases by the windows' stride along it), and
/// the micro-kernel reads step p of a tile's windows where they lie in that copy, at a
/// per-step offset from the tile's first position (a tile never crosses an output line).
/// With `channel_lanes`, the product runs transposed, C^T = B^T x A^T (for a convolution,
/// windows^T x W^T): a register tile is `mr` columns of C (output positions, broadcast from
/// B read in place, or from the padded copy, adjacent along a line) by `nr` rows of C (output
/// channels: vector lanes, from A packed as B is), and the blocking fields describe C^T:
/// `mc` positions, `nc` channels per task.
///
/// GPU (`group_m > 0`): a work-group computes a `group_m` x `group_n` tile of C, stepping
/// along K by `group_k`: each step stages a `group_m` x `group_k` tile of A and a `group_k` x
/// `group_n` tile of B in local memory, then every work-item adds their product into its own
/// `mr` x `nr` block of registers, whose elements are `group_m / mr` rows and `group_n / nr`
/// column vectors apart (neighbouring work-items touch neighbouring columns); a column vector
/// is `vector_width` adjacent columns (floats only; 1: scalars). Work-groups hold
/// (group_m / mr) * (group_n / nr) work-items.
struct GemmSchedule {
  int mr = 4;          // rows of a register tile
  int nr = 4;          // columns of a register tile: a multiple of `vector_width`
  int vector_width = 1;  // lanes per vector of the micro-kernel
  int64_t kc = 256;    // depth of a packed panel
  int64_t mc = 64;     // rows of a packed A block
  int64_t nc = 1024;   // columns of a packed B block
  /// Below this many multiply-adds (m * n * k) the product runs on the calling thread.
  int64_t serial_below = 1 << 18;
  int threads = 0;  // cpu: most workers the tasks (and B's packing) run on (0: every core)
  int windows_in_place = 0;  // cpu, convolutions: 1 reads B from a padded copy of the input
  /// cpu: 1 puts C's rows (output channels) in the vector lanes and its columns (output
  /// positions) in the tile's rows: a convolution's product read in place (a line of 56 fills
  /// four tiles of 14 positions, where 16 lanes of positions leave 1/8 of them idle, and a
  /// 7-wide line more than half), or a plain one whose B has adjacent columns.
  int channel_lanes = 0;
  /// cpu: steps of the depth ahead of the current one at which the micro-kernel prefetches
  /// packed A into L1 (0: none). A's panels are contiguous, one after the other, so the
  /// prefetch runs on into the next tile's panel; weights too large for the caches stream
  /// from memory, which the hardware prefetcher alone leaves the micro-kernel waiting on.
  int prefetch_a = 0;
  /// cpu: 1 spreads the prefetch of B's next packed micro-panel into L2 over the calls of the
  /// micro-kernel on the current one (B packed once: a weight streamed from memory, as a
  /// language model's are at every call), 0 leaves it to the hardware.
  int prefetch_b = 0;
  // ---- work-group tiling (GPU backends; 0 on cpu) ----
  int64_t group_m = 0;  // rows of C per work-group: a multiple of mr
  int64_t group_n = 0;  // columns of C per work-group: a multiple of nr
  int64_t group_k = 0;  // depth of the tiles staged in local memory per step

  /// Work-items per work-group of the GPU form.
  int64_t local_size() const { return group_m > 0 ? (group_m / mr) * (group_n / nr) : 1; }

  /// `gemm {mr = 8, nr = 32, ...}`: part of the micro-kernel's cache key.
  std::string str() const;
  friend bool operator==(const GemmSchedule&, const GemmSchedule&) = default;
};

/// How an attention step (LaunchPlan::Attention) runs.
///
/// CPU (`local_size == 0`): a task per `block_rows` query rows of one batch entry walks the
/// keys in blocks of `block_keys`: the block's scores are register tiles of `tile` (the GEMM
/// micro-kernel's mr x nr) over packed q and k panels, then their online softmax (the
/// running maximum and sum per row), then their product with v's block added to the rows'
/// accumulators, in cache; the rows x keys scores are never in memory.
///
/// GPU (`local_size > 0`): a work-item per query row walks every key, keeping its row's
/// running maximum, sum and output accumulators in registers; `local_size` work-items per
/// work-group.
struct AttentionSchedule {
  int64_t block_rows = 0;  // cpu: query rows per task, a multiple of tile.mr
  int64_t block_keys = 0;  // cpu: keys per block, a multiple of tile.nr
  GemmSchedule tile;       // cpu: the micro-kernel's register tile (mr, nr, vector_width)
  int64_t local_size = 0;  // GPU: work-items per work-group
  /// GPU: lanes of the vectors a work-item reads q's, k's and v's rows in and holds its
  /// accumulators in, where the language computes on vectors (OpenCL C) and the rows are
  /// contiguous; 1: scalars.
  int vector_width = 1;

  /// `attention {rows = 32, keys = 256, tile = 8x32 vector 16}`: part of kernel cache keys.
  std::string str() const;
  friend bool operator==(const AttentionSchedule&, const AttentionSchedule&) = default;
};

/// The blocking an attention step of `rows` query rows (per batch entry), `keys` keys, q and
/// k rows of `depth` and v rows of `width` runs with on a device of `caps` unless the autotuner knows better.
AttentionSchedule default_attention_schedule(int64_t rows, int64_t keys, int64_t depth, int64_t width,
                                             const Capabilities& caps);

/// Vector registers a cpu GEMM register tile may fill (its accumulators, the B vectors of a
/// step and the broadcast A value): 32 with AVX-512, else 16.
int gemm_vector_registers(const Capabilities& caps);

/// The blocking a backend runs a `dtype` product of m x k by k x n with unless the autotuner
/// knows better. CPU: a register tile that fills the vector registers `caps` has, panels
/// sized for typical L1/L2/L3, and no more mc blocks than the product needs. Work-item
/// devices (DeviceFamily::WorkItems): work-group tiles no larger than the product needs, within the
/// device's work-group size. `epilogue_columns` > 0: an epilogue follows that a CPU runs on
/// each block of the product as it is finished, on blocks of columns starting at multiples
/// of it (gemm_epilogue_columns_per_iteration); the blocks are cut so. `windows`: the
/// convolution whose windows are B (Gemm::im2col), read in place on a CPU where that pays.
/// `channel_lanes` chooses GemmSchedule::channel_lanes for `windows` (nullopt: where it pays).
GemmSchedule default_gemm_schedule(DType dtype, int64_t m, int64_t n, int64_t k, const Capabilities& caps,
                                   int64_t epilogue_columns = 0, const ConvGeometry* windows = nullptr,
                                   std::optional<bool> channel_lanes = std::nullopt);

/// Whether a CPU product of m x k by k x n whose B has adjacent columns pays run transposed,
/// C's rows in the vector lanes (GemmSchedule::channel_lanes): its rows fill them (to within
/// 1/8) where its columns leave more than 1/16 of the default tiles' lanes idle (a 1x1
/// convolution over 14 x 14 positions: 196 of 224), over at least 64 steps of depth.
bool rows_in_lanes_pay(DType dtype, int64_t m, int64_t n, int64_t k, const Capabilities& caps);

/// Whether a CPU product may read the windows of `c` in place (GemmSchedule::windows_in_place):
/// the padding is not negative.
bool windows_in_place_legal(const ConvGeometry& c);

/// The schedule a backend runs `k` with unless the autotuner knows better: the walk, and
/// knobs chosen for `caps` (vector width from the widest element type and the vector
/// registers, tiles that keep accumulators in L1, grains of ~16K elements).
Schedule default_schedule(const Kernel& k, const Capabilities& caps);

/// The macros custom kernel `k.customs[c]` is compiled with under `s`: (name, value) pairs.
std::vector<std::pair<std::string, int64_t>> custom_macro_values(const Kernel& k, const Schedule& s, size_t c);

/// The canonical serialization (kiln/ir/canonical.h) of what a compiled kernel depends on:
/// the kernel without names, its schedule, and the backend's fingerprint. Every kernel cache
/// of every backend keys by its hash and compares it on a hit.
std::string kernel_canonical(const Kernel& k, const Schedule& s, std::string_view fingerprint);

/// The launch geometry of a work-item device (`global_size`, `elements_per_item`) from the
/// walk, `s.work_items.local_size` and `.reduction`: at least `per_item` iterations per work-item, more
/// where the device's limit on work-groups per launch needs it.
void place_work_items(Schedule& s, const Capabilities& caps, int64_t per_item);

/// The values a row's walk (case A) computes once and keeps in a per-row array for its later
/// passes over the row (softmax's exp, which its sum and its stores both read): the
/// expensive float ops that vary along the row and that two passes need, in instruction
/// order, while the row has at most `s.row_cache_elements` elements and the arrays fit
/// `s.row_cache_bytes`. Empty when the schedule has no row cache.
std::vector<Ref> row_cached_values(const Kernel& k, const Schedule& s);

/// Lanes a work-item of a work-item device may compute (`vector_width` there: consecutive
/// points of the last dim, read with vector loads where the language has them): 1, and the
/// powers of two up to 16 that divide the last dim (1 only for 0-d and in-order kernels).
std::vector<int64_t> work_item_lane_counts(const Kernel& k);

/// Recomputes the walk (`iterations`, `elements_per_iteration`) after a knob changed `tile`
/// or `merge_rows` (a merge the kernel has no dims for is dropped).
void update_walk(const Kernel& k, Schedule& s);
/// The row a case-B walk cuts into tiles: the last dim, times the kept dim merged into it
/// where `s.cpu.merge_rows`.
int64_t walked_row(const Kernel& k, const Schedule& s);
/// Points of the reduced dims before the last reduced one (a window's rows, which
/// `cpu.unroll_window` emits one by one): 1 where fewer than two dims are reduced.
int64_t window_rows(const Kernel& k);
/// The most window rows `cpu.unroll_window` unrolls: each is a copy of the step's code.
inline constexpr int64_t kMaxUnrolledWindowRows = 7;
/// Lanes of the kernel's widest element that fill one vector register of the device.
int register_lanes(const Kernel& k, const Capabilities& caps);

/// How a work-item device walks a reduced row under `s.work_items.reduction`, as the C-family emitter
/// reads it: a row per work-item whose lanes are vectors takes `chains` accumulator chains
/// (by default 4 on PoCL, else 1), as many as divide the row; a work-group per row takes
/// `blocks` (by default 1 where the device runs a group's work-items one after another:
/// `vectorizes_work_item_loop`, PoCL). The other field is 1 or 0: it would change nothing, and
/// a tuner candidate that differs only there would run the same code.
void settle_row_walk(const Kernel& k, Schedule& s, const Capabilities& caps, std::optional<int> chains,
                     std::optional<int> blocks);

}  // namespace kir
}  // namespace kiln
