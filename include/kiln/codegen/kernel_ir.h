// kiln/codegen/kernel_ir.h - Kernel IR: one fused kernel as a scalar program over a domain.
//
// A kernel computes, for every point (d0, d1, ...) of its iteration domain, a DAG of scalar
// instructions: loads through index arithmetic, the elementwise ops of ops.def, reductions
// over the domain's reduced dims, and stores. The same program drives every backend:
//   - CPU (LLVM): the kept dims are split across cores, the last dim becomes the vector lanes;
//   - GPU (Vulkan, OpenCL): kept points map onto work-items, or onto work-groups that reduce
//     their rows cooperatively when the domain has reduced dims.
// Instructions are in SSA form and ordered so that arguments come first. Every conversion
// is explicit (a `cast`), so a backend never applies promotion rules of its own.
// Instructions compute in the compute types only (bool, i32, i64, f32, f64: dtype.h); a
// buffer of a storage type (u8, f16, ...) is converted by the load that reads it and the
// store that writes it, and a `narrow` wraps a value into a storage type where the graph's
// semantics ask for it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/attrs.h"
#include "kiln/ir/custom_kernel.h"
#include "kiln/ir/op.h"
#include "kiln/ir/shape.h"

namespace kiln::kir {

/// An instruction of a kernel, by position in Kernel::insts.
using Ref = int32_t;
inline constexpr Ref kNoRef = -1;

/// Code::Cast's imm for an f64 to f32 that a narrow to f16 or bf16 follows: toward zero,
/// its last bit set where inexact ("round to odd"). Rounded to nearest, the f32 can land on
/// a halfway point of the f16s that the double was not on, and the second rounding goes the
/// wrong way; rounded to odd, with more than two bits to spare past the f16's (or bf16's)
/// significand, the narrow rounds as once from the double (docs/ir.md 5.2).
inline constexpr int64_t kCastToOdd = 1;

enum class Code : uint8_t {
  Dim,       // i64: the domain index along dim `imm`
  Const,     // `literal`, of `type`
  Load,      // element args[0] (a flat i64 offset) of buffer `buffer`; args[1], when present,
             // is a bool mask: where it is false nothing is read and the result is 0
  Op,        // the elementwise op `op` of ops.def on args, converted already: arithmetic
             // takes and gives `type`; comparisons take two equal types and give bool;
             // predicates (isnan, isinf) take a float and give bool;
             // where takes (bool, type, type); custom calls Kernel::customs[imm] on
             // arguments of its parameters' types
  Cast,      // args[0] converted to `type` with the semantics of the cast op; an f64 to f32
             // with imm kCastToOdd rounds to odd instead (kCastToOdd's comment)
  Narrow,    // args[0], of compute type `type`, wrapped into storage type `imm` (a DType):
             // an integer keeps that type's low bits (sign-extended for i8 and i16), an f32
             // rounds to f16 or bf16 (to nearest even); the result is of `type` again
  IndexDiv,  // i64 args[0] floordiv imm (args[0] >= 0, imm > 0)
  IndexMod,  // i64 args[0] mod imm (args[0] >= 0, imm > 0)
  Rand,      // `type`: the rand op's element at flat index args[0] (i64) of seed `imm`
  Reduce,    // reduction `op` (reduce_sum ... argmin) of args[0] over the reduced dims; for
             // argmax/argmin args[1] is the position along the reduced axis
  Arg,       // `type`: scalar argument `imm` of the launch (Kernel::scalars), the same for
             // every point: a learning rate changes without recompiling
};

struct Inst {
  Code code = Code::Const;
  OpKind op = OpKind::Add;  // Op, Reduce
  DType type = DType::F32;
  std::vector<Ref> args;
  int32_t buffer = -1;  // Load
  int64_t imm = 0;      // Dim, IndexDiv, IndexMod, Rand, Arg, Op custom, Narrow
  Scalar literal;       // Const
};

/// A tensor the kernel reads or writes, bound at launch.
struct BufferParam {
  std::string name;  // the graph value it holds, for printing
  TensorType type;
  bool written = false;
};

/// buffer[offset] = value, where `guard` (a bool, or kNoRef) holds.
struct Store {
  int32_t buffer = -1;
  Ref offset = kNoRef;
  Ref value = kNoRef;
  Ref guard = kNoRef;
};

struct Kernel {
  std::string name;            // the fused region's name: "k0"
  Shape domain;                // the iteration domain
  std::vector<bool> reduced;   // per domain dim: reduced (true) or kept
  std::vector<BufferParam> buffers;
  std::vector<DType> scalars;  // scalar arguments, bound at launch (Code::Arg)
  std::vector<std::shared_ptr<const CustomKernel>> customs;  // the custom kernels it calls
  std::vector<Inst> insts;
  std::vector<Store> stores;
  /// The points must run one after another in row-major order, by one worker: a point may
  /// load what an earlier point stored (a scatter that combines, or replaces at a repeated
  /// index). Schedules walk such a kernel serially, with scalar code.
  bool in_order = false;
  /// With in_order: only the points of one row (a run of the last dim) depend on each other,
  /// so rows may run in parallel, each walked in order (a scatter or cumsum whose axis the
  /// domain puts last: updates in different rows never meet).
  bool rows_independent = false;
  /// A horizontal kernel's parts (merge_horizontal), in order along its one dim: the first
  /// instruction of each and its points. Each point computes one part's instructions, which
  /// the profiler counts so; the masks in the instructions say the same to every emitter.
  struct Part {
    Ref first = 0;
    int64_t points = 0;
  };
  std::vector<Part> parts;
  /// >= 0: the size of the kernel's rows (its first dim of a size other than 1) is scalar
  /// argument `rows_arg`, bound at launch, and the domain holds only the largest size the
  /// kernel is compiled for (kir::rows_at_launch): one compiled kernel for every batch or
  /// sequence length. -1: the domain holds the sizes.
  int32_t rows_arg = -1;

  bool has_reduction() const;
  /// The text form: one instruction per line. Without names (the kernel's and its
  /// buffers'), two kernels with the same text compute the same thing: the key of the kernel
  /// caches.
  std::string str(bool names = true) const;
  /// The domain as the text form writes it: "[64, reduce 1000]", "[$2 <= 4096, 768]".
  std::string domain_str() const;
};

/// The kept dim that merge_rows folds into the last: the last kept dim before it, or -1
/// where there is none (or the last dim is reduced, or the kernel walks in order, or its
/// domain is empty).
int merged_row_dim(const Kernel& k);
/// `k` over a domain whose last dim is merged_row_dim(k) and the last dim as one (row-major:
/// position p of it is (p floordiv W, p mod W), W the last dim's size), the dim moved out
/// from the middle. The same points and the same values: a schedule choice
/// (Schedule::merge_rows) that fills vector lanes with a narrow plane's rows. Throws where
/// merged_row_dim(k) < 0.
Kernel merge_rows(const Kernel& k);
/// Whether merge_rows(k) reads and writes every position that `k` computes as an affine
/// function of the dims (a vector load where it steps by one) as an affine function too,
/// and compares affine positions only where `k` did: true where the rows follow each other
/// in every buffer, false where one is read across rows (a broadcast row, a transpose), which
/// would become a gather. False where merged_row_dim(k) < 0. With `compares` false, only
/// the buffers' offsets count: a padded window's bounds may become the merged position's
/// `mod` arithmetic, computed per lane, while its reads stay contiguous vectors.
bool merge_keeps_positions_affine(const Kernel& k, bool compares = true);

/// `k` over a domain without its dims of one point (but one of each kind, kept and reduced,
/// that it has) and with neighbouring dims of the same kind merged into one (row-major)
/// where every load and store offset and every compared position steps along the outer by
/// what it steps over the whole inner: the same points and values, positions affine as
/// before, rows as long as the memory allows (a pooled [1, 576, 1, 1]'s 1x1 convolution over
/// [1, 1, 144, 1, reduce 576, reduce 1, reduce 1, 1] becomes [144, reduce 576]). `k` itself
/// where nothing merges, and for kernels that walk in order, horizontal ones and ones with
/// rows bound at launch. Dims before `apart` never merge with dims from it on (a GEMM's
/// epilogue keeps its rows apart from the product's columns, by which it runs on the
/// product's blocks).
Kernel coalesce_dims(const Kernel& k, int apart = 0);

/// Drops the instructions no store needs and renumbers the rest (in order).
void remove_dead_instructions(Kernel& k);

/// Per instruction: the bit set of domain dims its value depends on (a reduction's value
/// depends on its kept dims only).
std::vector<uint64_t> dim_dependence(const Kernel& k);

/// Per instruction: the reduction stage that must finish before it can be computed (0 when
/// it needs no reduction; a reduction whose argument needs the results of stage-1 reductions
/// is in stage 2, as softmax's sum follows its max).
std::vector<int> reduction_stage(const Kernel& k);

/// Per instruction: whether it only computes a position. These are domain dims, constants,
/// and the sums, products, quotients and remainders of such values, where every use is the
/// offset of a load or store, another such instruction, or one side of a comparison between
/// two of them (a mask). A backend may compute them in a narrower integer type than their
/// i64 (index_fits_32).
std::vector<bool> index_instructions(const Kernel& k);

/// Whether 32-bit signed arithmetic computes `k`'s positions exactly. That needs every value
/// shaped like a position (index_instructions(k), and those of the same shape that other uses
/// keep in i64) to lie in [-2^31, 2^31) for every point of the domain (interval arithmetic
/// over the dims' ranges), and the flat counts of kept and reduced points to lie
/// below 2^31 - 2^16, so a work-item's loop bound plus a work-group never overflows.
bool index_fits_32(const Kernel& k);

/// Per instruction: the value as an affine function of the domain indices,
/// `base + sum(stride[d] * dim d)`, or nullopt when it is not one (a div, a mod of a
/// non-multiple, a load, any non-index op). Computed once, read by every backend: a load
/// whose offset has stride 1 along the last dim is contiguous there; stride 0, uniform.
struct Affine {
  int64_t base = 0;
  std::vector<int64_t> stride;  // per domain dim
};
std::vector<std::optional<Affine>> affine_analysis(const Kernel& k);
/// `4096*d0 + 1*d1 + 8`
std::string affine_str(const Affine& a);

/// A compare of two affine positions that holds on one side of a threshold along the lane
/// dim: `lane * l + e >= 0` at lane position l, where e is `rest` (affine in the other dims;
/// its stride along the lane dim is 0). lane > 0 bounds the lanes from below, < 0 from above.
struct LaneBound {
  Ref compare = kNoRef;
  int64_t lane = 0;
  Affine rest;
};
/// The compares of `k` along dim `lane` that an emitter may split its lane walk at
/// (codegen/lane_bounds.cpp): those that hold on more than half of the dim wherever the
/// other dims are (a padded window's masks; all of them hold together on one interval of
/// each row), and cuts, whose `rest` is a constant (a concat's or pad's along the lane dim),
/// unless there are more than kMaxLaneCuts of these.
std::vector<LaneBound> lane_bounds(const Kernel& k, const std::vector<std::optional<Affine>>& affine, int lane);
inline constexpr int64_t kMaxLaneCuts = 160;
/// The compares of `k` that hold or fail for a whole iteration of a tile walk along dim
/// `lane`: those the lane does not enter and a reduced dim does (a window's row bounds,
/// `0 <= h*s + kh - p < H`), each as the least over the reduced dims of its `lane * l + rest
/// >= 0` form (`lane` 0, `rest` affine in the kept dims alone): where an iteration's kept
/// dims make every `rest` >= 0, every compare holds at every reduced point, and an emitter
/// may walk it with them known (Schedule's cpu.split_rows): a window inside the input.
std::vector<LaneBound> window_row_bounds(const Kernel& k, const std::vector<std::optional<Affine>>& affine, int lane);
/// Whether `b` is a cut, and the lane where it flips: it holds from there on (lane > 0) or
/// before there (lane < 0).
bool is_cut(const LaneBound& b);
int64_t cut_lane(const LaneBound& b);

}  // namespace kiln::kir
