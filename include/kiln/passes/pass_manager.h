// kiln/passes/pass_manager.h - named graph passes and the pipelines that chain them.
//
// A pass maps a Graph to a Graph that computes the same outputs from the same parameters.
// Every pass is one function in its own file under passes/ and one row in the registry
// (passes/pass_registry.cpp); `kiln opt --passes=a,b` and `-O1`/`-O2` run them by name.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/support/error.h"

namespace kiln {

/// How the fusion planner treats a value that more than one kernel needs.
enum class MultiConsumer : uint8_t {
  Materialize,     // compute it once in its own kernel and store it
  RecomputeCheap,  // recompute it inside each consumer kernel when it is one elementwise
                   // op on values that are in memory anyway (parameters, constants, views
                   // of them); materialize otherwise
};

/// The fusion planner's rules, as data that tests and `kiln opt` can change.
struct FusionPolicy {
  bool reductions = true;       // reductions with their prologue and epilogue, row-wise chains
  bool matmul_epilogue = true;  // matmul with the elementwise ops that consume its result
  MultiConsumer multi_consumer = MultiConsumer::RecomputeCheap;
  /// Most operations (views included) in one kernel; 0: no bound. Beyond it the chain goes
  /// on in a new kernel. Bounds code size, compile time and every walk over a kernel.
  int64_t max_kernel_ops = 512;
};

/// A reduction split-reductions may cut into blocks (passes/split_reductions.cpp): what it
/// reduces, and the block counts it may use. The count is the autotuner's knob
/// `split_blocks` (docs/autotune.md), asked for through PassOptions::split_blocks.
struct ReductionSplit {
  OpKind op = OpKind::ReduceSum;
  Attrs attrs;                // the reduction's (axes, keepdims)
  std::vector<int64_t> axes;  // sorted
  TensorType input, result;
  /// The counts it may be cut into, ascending: 1 (not cut), then the powers of two up to
  /// twice max_split_blocks that divide the reduced extent into long enough blocks.
  std::vector<int64_t> blocks;
  /// What split-reductions uses on its own: the most blocks, up to max_split_blocks.
  int64_t default_blocks = 1;
  /// "reduce_sum f32[16777216] axes [0]": what is reduced, for tables and logs.
  std::string str() const;
};

/// How many blocks to cut `site` into; a count not among site.blocks means default_blocks.
using SplitChooser = std::function<int64_t(const ReductionSplit& site)>;

struct PassOptions {
  /// Allow rewrites that change NaN or infinity behaviour (x * 0 -> 0, exp(log x) -> x,
  /// x - x -> 0). Off by default: without it every pass preserves every bit of every output.
  bool fast_math = false;
  /// Largest tensor constant folding materializes as a literal (splats of any size fold).
  int64_t max_folded_elements = 4096;
  /// Most blocks split-reductions cuts one reduction into (a power of two): about as many
  /// as keep the device's cores or compute units busy. compile_graph sets it per device.
  int64_t max_split_blocks = 64;
  /// The block count of each reduction split-reductions cuts (the engine asks the autotuner);
  /// empty: every reduction gets its default_blocks.
  SplitChooser split_blocks;
  FusionPolicy fusion;
};

using PassFn = Graph (*)(const Graph&, const PassOptions&);

struct PassInfo {
  std::string_view name;     // as written in --passes
  std::string_view summary;  // one line for --help and docs
  PassFn run;
};

/// Every registered pass, in registry order.
std::span<const PassInfo> all_passes();
const PassInfo* find_pass(std::string_view name);

/// The passes of -O0 (none), -O1 (clean-up) and -O2 (everything).
std::vector<const PassInfo*> pipeline_for_level(int level);
/// Parses "cse,dce" into passes; an unknown name is an error that lists the known ones.
Expected<std::vector<const PassInfo*>> parse_pipeline(std::string_view names);

/// Counts that `kiln opt --stats` prints before and after a pipeline.
struct GraphStats {
  int64_t nodes = 0;        // operations, parameters excluded
  int64_t kernels = 0;      // launches if run as is: one per op that computes (no views/sources)
  int64_t bytes_moved = 0;  // estimate: each kernel reads its operands and writes its result once
};
GraphStats graph_stats(const Graph& g);

struct PipelineOptions {
  /// Verify the graph after every pass and fail naming the pass that broke it. On by
  /// default in debug builds; kiln opt always does.
#ifdef NDEBUG
  bool verify_each = false;
#else
  bool verify_each = true;
#endif
  /// Called after each pass with its result (kiln opt --print-after-all).
  std::function<void(const PassInfo&, const Graph&)> after_each;
};

/// Runs `passes` in order. Fails only when verification after a pass fails (a kiln bug,
/// reported with the pass's name).
Expected<Graph> run_pipeline(Graph g, std::span<const PassInfo* const> passes,
                             const PassOptions& options = {}, const PipelineOptions& pipeline = {});

// The passes, callable directly.
Graph dead_code_elimination(const Graph& g, const PassOptions& options = {});
Graph common_subexpression_elimination(const Graph& g, const PassOptions& options = {});
Graph constant_folding(const Graph& g, const PassOptions& options = {});
Graph simplify(const Graph& g, const PassOptions& options = {});
/// Groups the graph's operations into kernel regions (see docs/passes.md, "fuse").
Graph fuse(const Graph& g, const PassOptions& options = {});
/// Reductions to a few elements over a large extent become a reduction to per-block partials
/// and a reduction of those (not in -O2: float sums round the partials; the cpu device runs
/// it). See passes/split_reductions.cpp.
Graph split_reductions(const Graph& g, const PassOptions& options = {});
/// The split split-reductions may make of reduction `n` of `g` with at most
/// `max_split_blocks` blocks by default, or nullopt when it leaves `n` alone.
std::optional<ReductionSplit> reduction_split(const Graph& g, const Node& n, int64_t max_split_blocks);
/// `site`'s reduction alone: one parameter of its input type, the reduction, its result.
Graph reduction_graph(const ReductionSplit& site);
/// Every matmul becomes a broadcast product summed over the contracting axis, which fusion
/// makes one reduction kernel (for backends that generate matmul as a kernel; not in -O2).
/// See passes/contract_matmul.cpp.
Graph contract_matmul(const Graph& g, const PassOptions& options = {});
/// Convolutions with fewer than 8 filters per group (depthwise ones) or 8 output positions
/// become the sum of their windows' products, one reduction kernel, instead of a GEMM of
/// narrow tiles (in -O2, before fusion). See passes/expand_convs.cpp.
Graph expand_convs(const Graph& g, const PassOptions& options = {});
/// Attention written out in primitives (matmul, scale, bias, softmax, matmul: the frontend's
/// form and the ONNX exporters') becomes one `attention` node, which runs as one kernel with
/// an online softmax (in -O2, before fusion). See passes/fuse_attention.cpp.
Graph fuse_attention(const Graph& g, const PassOptions& options = {});

}  // namespace kiln
