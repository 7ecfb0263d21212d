// kiln/codegen/lower.h - from a fused graph to kernels and the order to launch them.
//
// Every kernel region of the fused graph becomes one Kernel IR kernel (a matmul region
// becomes the contraction kernel of its product, which runs as a GEMM step, and a kernel for
// its epilogue when it has one; any other kernel that is a contraction runs as a GEMM step
// too: kir::gemm_of_contraction). Graph outputs that
// no kernel writes (a view, a constant, a source) get a small kernel of their own. Buffers
// come from the memory plan; values outside kernels that are cheap to recompute (views,
// splat constants, arange, rand) are recomputed where they are read.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/codegen/kernel_ir.h"
#include "kiln/codegen/schedule.h"
#include "kiln/ir/conv.h"
#include "kiln/ir/graph.h"
#include "kiln/passes/memory_plan.h"

namespace kiln {

struct LaunchPlan {
  struct Buffer {
    enum class Kind : uint8_t {
      Param,     // graph parameter `index`
      Temp,      // allocated for the execution, freed after it
      Output,    // allocated for the execution and returned as graph output(s)
      Constant,  // `data`, owned by the plan
    };
    Kind kind = Kind::Temp;
    int32_t index = -1;  // Param: parameter position
    TensorType type;     // Output: the returned type; otherwise the first value it holds
    int64_t bytes = 0;
    std::vector<std::byte> data;  // Constant
  };

  /// C[b] = A[b] x B[b] over the broadcast batch dims `batch`, all of `dtype`. C is
  /// row-major; an operand is read where it lies: a view of a stored value (a transpose,
  /// a slice, a broadcast) is not copied first. Element (b..., i, j) of A is at
  /// a_offset + sum(b_d * a_batch_stride[d]) + i * a_row_stride + j * a_col_stride of its
  /// buffer, and likewise for B; lower_to_kernels sets every stride.
  struct Gemm {
    int32_t a = -1, b = -1, c = -1;  // buffers
    DType dtype = DType::F32;
    int64_t m = 0, n = 0, k = 0;
    Shape batch;                        // the result's batch dims
    std::vector<int64_t> a_batch_stride;  // per batch dim, in elements (0: broadcast)
    std::vector<int64_t> b_batch_stride;
    int64_t a_offset = 0, a_row_stride = 0, a_col_stride = 0;  // in elements: along m, along k
    int64_t b_offset = 0, b_row_stride = 0, b_col_stride = 0;  // along k, along n

    /// B as the windows of a convolution's input (implicit GEMM), when set: row p of B is
    /// channel p / window at window element p % window, column j is output position j, and
    /// B[p, j] is the element ConvGeometry::input_offset(p % window, j) of channel p / window's
    /// plane (planes `plane()` apart from b_offset and the batch strides), or zero in the
    /// padding. b_row_stride and b_col_stride are unused. The packing step (cpu) and the tile
    /// staging (GPUs) gather it.
    std::optional<ConvGeometry> im2col;

    /// Elements operand A (or B) reaches in its buffer: one past the farthest, 0 when the
    /// product reads none.
    int64_t a_extent() const;
    int64_t b_extent() const;
    /// Whether B is a plain operand (no im2col) whose columns are adjacent in memory: its
    /// rows can then be read where they lie, as the transposed form
    /// (GemmSchedule::channel_lanes) reads them.
    bool b_columns_adjacent() const { return !im2col && b_col_stride == 1; }
    /// How it runs; filled by the backend's engine like `schedules` (default after lowering).
    kir::GemmSchedule schedule;
    /// The kernel region whose contraction it computes (kir::gemm_of_contraction), for dumps.
    std::string name;
  };

  /// out[b] = softmax(scale * Q[b] K[b]^T + bias[b]) V[b] (the `attention` op) for every
  /// entry b of the batch dims `batch`, in f32: one step, whose kernel keeps a block of query
  /// rows' scores in registers or cache with an online softmax (AttentionSchedule), never
  /// the rows x keys scores in memory. Q is rows x depth, K keys x depth, V keys x width and
  /// the bias rows x keys; each is read where it lies, element (b..., i, j) at offset +
  /// sum(b_d * batch_stride[d]) + i * row_stride + j * col_stride of its buffer (a stride 0
  /// broadcasts). `out` is row-major [batch..., rows, width].
  struct Attention {
    struct Operand {
      int32_t buffer = -1;  // -1: none (the bias)
      int64_t offset = 0;
      std::vector<int64_t> batch_stride;  // per batch dim, in elements
      int64_t row_stride = 0, col_stride = 0;
      /// Elements it reaches in its buffer: one past the farthest.
      int64_t extent(const Shape& batch, int64_t rows, int64_t cols) const;
    };
    Operand q, k, v, bias;
    int32_t out = -1;
    Shape batch;
    int64_t rows = 0, keys = 0, depth = 0, width = 0;
    double scale = 1;
    /// A row whose softmax is undefined gives zeros, not NaN (the op's `masked_zero`).
    bool masked_zero = false;
    /// How it runs; set by the engine like Gemm::schedule.
    kir::AttentionSchedule schedule;
    /// The kernel region of the attention node, for dumps and the profiler.
    std::string name;
    /// Element offsets of batch entry `bi` (row-major over `batch`) in q, k, v and bias.
    std::array<int64_t, 4> batch_offsets(int64_t bi) const;
  };

  struct Step {
    int32_t kernel = -1;            // a launch of kernels[kernel], or -1 for `gemm`
    std::vector<int32_t> bindings;  // kernel buffer param -> plan buffer
    std::vector<int32_t> scalar_bindings;  // kernel scalar argument -> launch slot
    /// The kernel's scalar arguments after those bound to launch slots, fixed by the plan:
    /// one kernel launched once per stage of a sorting network, each with its stage.
    std::vector<Scalar> fixed_scalars;
    Gemm gemm;
    /// Set for an attention step (kernel -1).
    std::optional<Attention> attention;

    bool is_gemm() const { return kernel < 0 && !attention; }
  };

  std::vector<kir::Kernel> kernels;
  /// Per kernel, how it runs; filled by the backend that compiles the plan (empty after
  /// lowering alone).
  std::vector<kir::Schedule> schedules;
  std::vector<Step> steps;
  std::vector<Buffer> buffers;
  std::vector<int32_t> outputs;  // per graph output: the buffer returned
  std::vector<TensorType> output_types;
  /// The graph parameters whose buffer a kernel overwrites (memory plan, donated inputs).
  std::vector<int32_t> overwritten_params;

  /// Every kernel's text and the launch list, for KILN_DUMP=kernel and `kiln codegen`.
  std::string str() const;
};

/// When steps[i] is a GEMM and steps[i + 1] a kernel (scheduled) that may run on each block
/// of rows of the product as soon as that block is computed, while it is in cache: its
/// domain is the product's shape without reductions, it reads and writes the product's
/// buffer only at its own position, it writes neither operand, and it calls no custom
/// kernel. Returns the kernel's iterations per row of the product (rows of all batches,
/// row-major), else 0.
int64_t gemm_epilogue_iterations_per_row(const LaunchPlan& plan, size_t i);

/// With such an epilogue, the columns of a row each of its iterations covers when they all
/// cover the same number (its tile along the last dim divides that dim), so that a block of
/// the product's columns starting at a multiple of it is a run of iterations; else the row's
/// width (the epilogue runs on whole rows only). 0 without an epilogue.
int64_t gemm_epilogue_columns_per_iteration(const LaunchPlan& plan, size_t i);

/// Whether the product of GEMM step steps[i] may be read after step i + 1 (its epilogue):
/// its buffer is not a temporary, or a later step binds it; never when the epilogue writes
/// its result over the product.
bool gemm_product_read_after_epilogue(const LaunchPlan& plan, size_t i);

namespace kir {

/// The GEMM step that computes `k`, when `k` is a matrix product written as a contraction
/// (an einsum, a broadcast product summed; codegen/contraction.cpp): one store, row-major
/// over the kept dims, of the sum over the one reduced dim of the product of two plain
/// loads, all of f32, f64, i32 or i64, where only one load steps along the next-to-last
/// kept dim (C's rows: that load is A) and only the other along the last (C's columns);
/// earlier kept dims are batch dims. `a`, `b` and `c` are `k`'s buffer params, strides and
/// offsets those of the loads; the schedule is left default. nullopt for any other kernel.
std::optional<LaunchPlan::Gemm> gemm_of_contraction(const Kernel& k);

}  // namespace kir

/// Merges each run of consecutive kernel steps that compute one elementwise body over
/// different shapes, none touching what another writes (an optimizer's updates after
/// gradient clipping), into one launch of a kernel over one flat dim, each part masked to its
/// range (codegen/horizontal.cpp), at most `caps.horizontal_parts` to a kernel and within the
/// device's argument limits (Capabilities::max_kernel_buffers, max_argument_bytes); parts
/// that read the same buffer or launch scalar share the parameter. A kernel right after a
/// GEMM stays (it may be the GEMM's epilogue). Before schedules are chosen; returns how many
/// kernels it made.
int merge_horizontal(LaunchPlan& plan, const Capabilities& caps);

/// Lowers `fused` (the output of the fuse pass) with buffers from `memory`. Throws
/// kiln::Error naming the kernel when a region cannot be lowered.
LaunchPlan lower_to_kernels(const Graph& fused, const MemoryPlan& memory);

}  // namespace kiln
