// GEMM steps against the interpreter: every dtype, sizes on and off the register tile and
// the packed blocks (cpu: backends/cpu/cpu_gemm.cpp) or work-group tiles (opencl: the tiled
// kernel of codegen/c_gemm.cpp, as opencl.DeviceGemm.*), an empty depth, transposed and
// broadcast operands, epilogues. Integers must wrap exactly as the interpreter's; floats
// differ only by the order of accumulation (relative 1e-5 of the sum of |a*b| for f32, 1e-12
// for f64).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "kiln/engine/engine.h"
#include "kiln/kiln.h"
#include "kiln/ir/interpreter.h"
#include "kiln/runtime/stats.h"
#include "test_util.h"

namespace kiln {
namespace {

HostTensor filled(DType t, const Shape& s, uint64_t seed, bool huge_ints = false) {
  HostTensor x(TensorType{t, s});
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < x.numel(); ++i) {
    z ^= z << 13;
    z ^= z >> 7;
    z ^= z << 17;
    if (is_float(t)) x.set_double(i, static_cast<double>(z % 2001) / 1000.0 - 1.0);
    else x.set_int(i, huge_ints ? static_cast<int64_t>(z) : static_cast<int64_t>(z % 19) - 9);
  }
  return x;
}

// Runs `text` on the device under test and the interpreter and compares every output (see
// the file comment).
void expect_same(const std::string& text, std::vector<HostTensor> inputs, const std::string& what) {
  const Graph g = test::parse_or_fail(text);
  const std::vector<HostTensor> want = interpret(g, inputs);
  const std::vector<HostTensor> got = run_on_host(test::device_under_test(), g, inputs);
  ASSERT_EQ(got.size(), want.size());
  // The magnitude of the terms: |A| x |B| would be exact, the extent of the depth bounds it.
  const Shape& as = inputs[0].shape();
  const double k = static_cast<double>(as[as.rank() - 1]);
  for (size_t o = 0; o < want.size(); ++o) {
    const HostTensor& w = want[o];
    const HostTensor& c = got[o];
    ASSERT_EQ(c.type(), w.type()) << what << " output " << o;
    for (int64_t i = 0; i < w.numel(); ++i) {
      if (!is_float(w.dtype())) {
        ASSERT_EQ(c.get_int(i), w.get_int(i)) << what << " output " << o << " element " << i;
        continue;
      }
      // f16 and bf16 are rounded once from another order of f32 sums: an ulp of the result.
      const double ulp = w.dtype() == DType::F16 ? 0x1p-10 : w.dtype() == DType::BF16 ? 0x1p-7 : 0;
      const double tol = ulp > 0 ? ulp * std::max(1.0, std::abs(w.get_double(i)))
                                 : (w.dtype() == DType::F32 ? 1e-5 : 1e-12) * (k + 1);
      ASSERT_NEAR(c.get_double(i), w.get_double(i), tol) << what << " output " << o << " element " << i;
    }
  }
}

std::string matmul_graph(DType t, const Shape& a, const Shape& b, const Shape& c) {
  const std::string n = std::string(dtype_name(t));
  return fmt::format("graph @g(%a: {0}{1}, %b: {0}{2}) -> {0}{3} {{\n  %c = matmul %a, %b : {0}{3}\n  return %c\n}}\n", n,
                     a.str(), b.str(), c.str());
}

TEST(DeviceGemm, EveryDtypeAndSizesAroundTheTiles) {
  // Off the cpu every shape is a driver compile (~0.5 s on PoCL): f32 gets the whole grid
  // there (one and several work-group tiles and K steps, edges in each), the others its corners.
  const bool cpu = test::device_under_test() == Device::cpu();
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64}) {
    const bool whole = cpu || t == DType::F32;
    const std::vector<int64_t> ms = cpu ? std::vector<int64_t>{1, 7, 33, 65, 130}
                                    : whole ? std::vector<int64_t>{1, 7, 65, 130} : std::vector<int64_t>{7, 130};
    const std::vector<int64_t> ns = cpu ? std::vector<int64_t>{1, 17, 33, 100}
                                    : whole ? std::vector<int64_t>{1, 17, 100} : std::vector<int64_t>{17, 100};
    const std::vector<int64_t> ks = whole ? std::vector<int64_t>{1, 9, 300} : std::vector<int64_t>{9, 300};
    for (int64_t m : ms)
      for (int64_t n : ns)
        for (int64_t k : ks) {
          const Shape a{m, k}, b{k, n}, c{m, n};
          expect_same(matmul_graph(t, a, b, c), {filled(t, a, 1), filled(t, b, 2)},
                      fmt::format("{} {}x{}x{}", dtype_name(t), m, n, k));
        }
  }
}

// A storage type's product is computed in its compute type (f32, or i32/i64 wrapping) from
// operands converted first, then stored once in the storage type: as the interpreter rounds
// or wraps it (docs/ir.md 5.7). Integers wide enough to wrap, a batch, a transposed operand.
TEST(DeviceGemm, StorageTypesMultiplyInTheirComputeType) {
  for (DType t : {DType::F16, DType::BF16, DType::I8, DType::I16, DType::U8, DType::U16, DType::U32, DType::U64}) {
    const std::string ty(dtype_name(t));
    const std::string text = fmt::format(R"(graph @g(%a: {0}[2,33,40], %b: {0}[20,40]) -> {0}[2,33,20] {{
  %bt = permute %b {{perm = [1, 0]}} : {0}[40,20]
  %c = matmul %a, %bt : {0}[2,33,20]
  return %c
}})",
                                         ty);
    expect_same(text, {filled(t, Shape{2, 33, 40}, 5, true), filled(t, Shape{20, 40}, 6, true)}, ty);
  }
}

TEST(DeviceGemm, LargeOddSizes) {
  // Several mc and nc blocks, k deeper than one packed panel, edges everywhere.
  const Shape a{1023, 517}, b{517, 1041}, c{1023, 1041};
  expect_same(matmul_graph(DType::F32, a, b, c), {filled(DType::F32, a, 3), filled(DType::F32, b, 4)}, "f32 1023x1041x517");
}

TEST(DeviceGemm, EmptyDepthIsZero) {
  for (DType t : {DType::F32, DType::I64}) {
    const Shape a{5, 0}, b{0, 7}, c{5, 7};
    expect_same(matmul_graph(t, a, b, c), {filled(t, a, 1), filled(t, b, 2)}, "empty depth");
  }
}

TEST(DeviceGemm, IntegersWrapAsTheInterpreter) {
  for (DType t : {DType::I32, DType::I64}) {
    const Shape a{9, 40}, b{40, 35}, c{9, 35};
    expect_same(matmul_graph(t, a, b, c), {filled(t, a, 5, true), filled(t, b, 6, true)}, "wrapping");
  }
}

TEST(DeviceGemm, BatchedBroadcastAndTransposedOperands) {
  // A batch of 3 against one shared B (broadcast batch dim), then B read transposed.
  expect_same(matmul_graph(DType::F32, Shape{3, 20, 30}, Shape{1, 30, 40}, Shape{3, 20, 40}),
              {filled(DType::F32, Shape{3, 20, 30}, 7), filled(DType::F32, Shape{1, 30, 40}, 8)}, "broadcast batch");
  expect_same(R"(graph @g(%a: f32[8,128,64], %b: f32[8,128,64]) -> f32[8,128,128] {
  %t = permute %b {perm = [0, 2, 1]} : f32[8,64,128]
  %c = matmul %a, %t : f32[8,128,128]
  return %c
})",
              {filled(DType::F32, Shape{8, 128, 64}, 9), filled(DType::F32, Shape{8, 128, 64}, 10)}, "transposed B");
}

// Operands that are views of stored values (transposed, permuted batch dims, sliced with a
// step or backwards, broadcast by expand) are read where they lie: the plan has no kernel
// that copies them, and the product is the interpreter's. Sizes span several blocks of
// rows and depth panels, so that B is packed once, per task, and read unpacked.
TEST(DeviceGemm, OperandsAreReadInPlaceThroughViews) {
  const std::string text = R"(graph @g(%a: T[300,130], %b: T[3,520,300], %c: T[300,3,90]) -> (T[3,130,520], T[3,130,45], T[3,45,520]) {
  %at = permute %a {perm = [1, 0]} : T[130,300]
  %bt = permute %b {perm = [0, 2, 1]} : T[3,300,520]
  %p = matmul %at, %bt : T[3,130,520]
  %a2 = slice %a {start = [299, 0], stop = [-1, 130], step = [-1, 1]} : T[300,130]
  %a3 = permute %a2 {perm = [1, 0]} : T[130,300]
  %a4 = reshape %a3 : T[1,130,300]
  %a5 = expand %a4 : T[3,130,300]
  %cs = slice %c {start = [0, 0, 0], stop = [300, 3, 90], step = [1, 1, 2]} : T[300,3,45]
  %ct = permute %cs {perm = [1, 0, 2]} : T[3,300,45]
  %q = matmul %a5, %ct : T[3,130,45]
  %ctt = permute %ct {perm = [0, 2, 1]} : T[3,45,300]
  %r = matmul %ctt, %bt : T[3,45,520]
  return %p, %q, %r
})";
  for (DType t : {DType::F32, DType::I32}) {
    std::string typed = text;
    for (size_t at; (at = typed.find("T[")) != std::string::npos;) typed.replace(at, 1, dtype_name(t));
    const Graph fused = run_pipeline(test::parse_or_fail(typed), pipeline_for_level(2)).take();
    const LaunchPlan plan = lower_to_kernels(fused, plan_memory(fused));
    for (const kir::Kernel& k : plan.kernels) EXPECT_EQ(k.name.rfind("copy_", 0), std::string::npos) << plan.str();
    expect_same(typed, {filled(t, Shape{300, 130}, 13), filled(t, Shape{3, 520, 300}, 14), filled(t, Shape{300, 3, 90}, 15)},
                fmt::format("views of {}", dtype_name(t)));
  }
}

// A training step's weight gradient, g^T x over a batch of sequences: both operands are
// [B,T,C] values read as [B*T,C], one of them transposed. Their positions are divisions and
// remainders that kir::affine_analysis recombines, so neither is copied first.
TEST(DeviceGemm, SequencesMergedIntoRowsAreReadInPlace) {
  const std::string text = R"(graph @g(%g: f32[4,24,40], %x: f32[4,24,36]) -> f32[40,36] {
  %g2 = reshape %g : f32[96,40]
  %gt = permute %g2 {perm = [1, 0]} : f32[40,96]
  %x2 = reshape %x : f32[96,36]
  %w = matmul %gt, %x2 : f32[40,36]
  return %w
})";
  const Graph fused = run_pipeline(test::parse_or_fail(text), pipeline_for_level(2)).take();
  const LaunchPlan plan = lower_to_kernels(fused, plan_memory(fused));
  for (const kir::Kernel& k : plan.kernels) EXPECT_EQ(k.name.rfind("copy_", 0), std::string::npos) << plan.str();
  expect_same(text, {filled(DType::F32, Shape{4, 24, 40}, 16), filled(DType::F32, Shape{4, 24, 36}, 17)}, "g^T x");
}

// A matrix product written as a broadcast product summed over one axis (an einsum) is a
// reduction kernel that lowering runs as a GEMM step (kir::gemm_of_contraction): every dtype
// the GEMM multiplies, sizes off the tiles, an empty sum, a batch over which B broadcasts,
// and C's dims in either order (which load is A follows from them). One with fewer than 8
// rows or columns (a matrix-vector product) stays a reduction kernel.
TEST(DeviceGemm, ContractionsRunAsGemmSteps) {
  // C[b, i, j] = sum_p a[b, i, p] * w[j, p], or C[b, j, i] when `swapped`.
  auto contraction = [](DType t, int64_t batch, int64_t m, int64_t n, int64_t k, bool swapped) {
    const std::string ty(dtype_name(t));
    const std::string c = swapped ? fmt::format("[{},{},{}]", batch, n, m) : fmt::format("[{},{},{}]", batch, m, n);
    const std::string full = swapped ? fmt::format("[{},{},{},{}]", batch, n, m, k) : fmt::format("[{},{},{},{}]", batch, m, n, k);
    const std::string a1 = swapped ? fmt::format("[{},1,{},{}]", batch, m, k) : fmt::format("[{},{},1,{}]", batch, m, k);
    const std::string w1 = swapped ? fmt::format("[1,{},1,{}]", n, k) : fmt::format("[1,1,{},{}]", n, k);
    return fmt::format(R"(graph @g(%a: {0}[{1},{2},{4}], %w: {0}[{3},{4}]) -> {0}{5} {{
  %a1 = reshape %a : {0}{7}
  %a2 = expand %a1 : {0}{6}
  %w1 = reshape %w : {0}{8}
  %w2 = expand %w1 : {0}{6}
  %p = mul %a2, %w2 : {0}{6}
  %c = reduce_sum %p {{axes = [3]}} : {0}{5}
  return %c
}})",
                       ty, batch, m, n, k, c, full, a1, w1);
  };
  struct Case {
    DType t;
    int64_t batch, m, n, k;
    bool swapped;
  };
  for (const Case& c : {Case{DType::F32, 3, 33, 70, 300, false}, Case{DType::F32, 2, 9, 8, 33, true},
                        Case{DType::F64, 1, 8, 33, 7, false}, Case{DType::I64, 2, 40, 33, 1023, true},
                        Case{DType::F32, 2, 8, 9, 0, false}, Case{DType::F32, 2, 7, 70, 300, false},
                        Case{DType::F32, 1, 1, 70, 300, true}}) {
    const std::string text = contraction(c.t, c.batch, c.m, c.n, c.k, c.swapped);
    const Graph fused = run_pipeline(test::parse_or_fail(text), pipeline_for_level(2)).take();
    const LaunchPlan plan = lower_to_kernels(fused, plan_memory(fused));
    ASSERT_EQ(plan.steps.size(), 1u) << text << plan.str();
    // Unswapped, w is the same for every batch and a's rows run on into the next batch: the
    // batch folds into the rows (kir::gemm_of_contraction), so 2 x 7 rows are 14.
    const bool gemm = (c.swapped ? c.m : c.batch * c.m) >= 8 && c.n >= 8;
    EXPECT_EQ(plan.steps[0].kernel, gemm ? -1 : 0) << text << plan.str();
    expect_same(text, {filled(c.t, Shape{c.batch, c.m, c.k}, 16), filled(c.t, Shape{c.n, c.k}, 17)}, text);
  }
}

// Several blocks of rows read the same panels of B, which the cpu packs once for all of them
// (PackedB): per-batch and broadcast B, depth panels and columns with edges, exact integers.
TEST(DeviceGemm, BPackedOnceForSeveralBlocksOfRows) {
  for (DType t : {DType::F32, DType::I32}) {
    const Shape a{3, 300, 600}, c{3, 300, 70};
    for (const Shape& b : {Shape{3, 600, 70}, Shape{1, 600, 70}})
      expect_same(matmul_graph(t, a, b, c), {filled(t, a, 11), filled(t, b, 12)},
                  fmt::format("{} {} by {}", dtype_name(t), a.str(), b.str()));
  }
}

// Weights held in shared host tensors (borrowed: never written) as B of a linear layer and as
// A of a convolution: the cpu packs them once and keeps the panels for the next products
// that read the same tensors, keyed by their memory's id, so that new weights (perhaps at the
// same address) are never mistaken for the old.
TEST(DeviceGemm, OperandsThatNeverChangeArePackedOnceAndNeverMistaken) {
  const Device device = test::device_under_test();
  for (uint64_t round = 0; round < 3; ++round) {
    const auto w = std::make_shared<const HostTensor>(filled(DType::F32, {64, 96}, 30 + round));
    const auto f = std::make_shared<const HostTensor>(filled(DType::F32, {16, 8, 3, 3}, 40 + round));
    const HostTensor x = filled(DType::F32, {40, 64}, 50 + round), image = filled(DType::F32, {1, 8, 12, 12}, 60 + round);
    const Graph g = test::parse_or_fail(
        "graph @g(%x: f32[40,64], %w: f32[64,96], %i: f32[1,8,12,12], %f: f32[16,8,3,3]) -> (f32[40,96], f32[1,16,12,12]) {\n"
        "  %y = matmul %x, %w : f32[40,96]\n"
        "  %c = conv %i, %f {strides = [1, 1], low = [1, 1], high = [1, 1]} : f32[1,16,12,12]\n"
        "  return %y, %c\n}\n");
    const std::vector<HostTensor> inputs = {x, *w, image, *f};
    const std::vector<HostTensor> want = interpret(g, inputs);
    const uint64_t hits = runtime_counters().packed_operand_hits;
    // The weights' tensors, as a model holds them between calls.
    const Tensor weights = from_host(w, device), filters = from_host(f, device);
    for (int call = 0; call < 2; ++call) {
      const Tensor y = from_host(x, device).matmul(weights);
      ConvOptions o;
      o.strides = {1, 1};
      o.pad_low = {1, 1};
      o.pad_high = {1, 1};
      const Tensor c = from_host(image, device).conv(filters, o);
      const std::vector<float> got_y = y.to_vector<float>(), got_c = c.to_vector<float>();
      for (int64_t i = 0; i < want[0].numel(); ++i)
        ASSERT_NEAR(got_y[static_cast<size_t>(i)], want[0].get_double(i), 1e-4) << "round " << round << " call " << call;
      for (int64_t i = 0; i < want[1].numel(); ++i)
        ASSERT_NEAR(got_c[static_cast<size_t>(i)], want[1].get_double(i), 1e-4) << "round " << round << " call " << call;
    }
    // The second call found both operands packed.
    if (device == Device::cpu()) {
      EXPECT_GE(runtime_counters().packed_operand_hits, hits + 2) << "round " << round;
    }
  }
}

// An elementwise epilogue that reads the product only where it writes runs on each block
// of rows right after the block is computed (one launch for both steps); one that reads the
// product elsewhere (a transpose) waits for the whole product. (A is taller than one L2
// block on any vector width, so the GEMM blocks rows, not columns: a short, wide product's
// column blocks, on a machine with narrow vectors, would leave its epilogue apart.)
TEST(DeviceGemm, EpilogueRunsOnBlocksOfRowsOnlyWhereItMay) {
  const std::string fused = R"(graph @g(%a: f32[2100,200], %b: f32[200,129], %bias: f32[129]) -> f32[2100,129] {
  %p = matmul %a, %b : f32[2100,129]
  %q = add %p, %bias : f32[2100,129]
  %r = relu %q : f32[2100,129]
  return %r
})";
  const auto before = runtime_counters().launches.load();
  expect_same(fused, {filled(DType::F32, Shape{2100, 200}, 11), filled(DType::F32, Shape{200, 129}, 12),
                      filled(DType::F32, Shape{129}, 13)}, "matmul + bias + relu");
  EXPECT_EQ(runtime_counters().launches.load() - before, 1u);
  const std::string transposed = R"(graph @g(%a: f32[150,150], %b: f32[150,150]) -> f32[150,150] {
  %p = matmul %a, %b : f32[150,150]
  %t = permute %p {perm = [1, 0]} : f32[150,150]
  %s = add %p, %t : f32[150,150]
  return %s
})";
  const auto before2 = runtime_counters().launches.load();
  expect_same(transposed, {filled(DType::F32, Shape{150, 150}, 14), filled(DType::F32, Shape{150, 150}, 15)},
              "matmul + its transpose");
  EXPECT_EQ(runtime_counters().launches.load() - before2, 2u);
}

// A convolution with few filters cuts its product into blocks of columns (output positions)
// so that both cores have work; its bias, residual and relu still run on each block in
// cache, from whole lines of the plane (one launch), and a product whose epilogue covers a
// batch of two planes as well. Then the same product in a training step's form, a weight's
// gradient with its update (whole rows of a wide product in one block of columns).
TEST(DeviceGemm, EpilogueRunsOnBlocksOfColumnsFromWholeLines) {
  for (const int64_t batch : {1, 2}) {
    const std::string text = fmt::format(R"(graph @g(%x: f32[{0},16,56,56], %w: f32[16,16,3,3], %bias: f32[1,16,1,1]) -> f32[{0},16,56,56] {{
  %c = conv %x, %w {{strides = [1, 1], low = [1, 1], high = [1, 1]}} : f32[{0},16,56,56]
  %b = add %c, %bias : f32[{0},16,56,56]
  %s = add %b, %x : f32[{0},16,56,56]
  %r = relu %s : f32[{0},16,56,56]
  return %r
}})",
                                         batch);
    const auto before = runtime_counters().launches.load();
    expect_same(text, {filled(DType::F32, Shape{batch, 16, 56, 56}, 18), filled(DType::F32, Shape{16, 16, 3, 3}, 19),
                       filled(DType::F32, Shape{1, 16, 1, 1}, 20)},
                fmt::format("conv + bias + residual + relu, batch {}", batch));
    EXPECT_EQ(runtime_counters().launches.load() - before, 1u) << "batch " << batch;
  }
  const std::string update = R"(graph @g(%g: f32[256,40], %x: f32[256,3000], %p: f32[40,3000]) -> f32[40,3000] {
  %gt = permute %g {perm = [1, 0]} : f32[40,256]
  %d = matmul %gt, %x : f32[40,3000]
  %s = scalar {slot = 0, value = 0.01} : f32[]
  %u = mul %d, %s : f32[40,3000]
  %q = sub %p, %u : f32[40,3000]
  return %q
})";
  expect_same(update, {filled(DType::F32, Shape{256, 40}, 21), filled(DType::F32, Shape{256, 3000}, 22),
                       filled(DType::F32, Shape{40, 3000}, 23)}, "a weight's update after its gradient");
}

// An epilogue with a launch scalar and two outputs, once with the product returned too (a
// device that computes the epilogue in registers must then also store the product) and once
// without.
TEST(DeviceGemm, EpilogueWithScalarsAndSeveralOutputs) {
  for (const bool product_returned : {false, true}) {
    const std::string text = fmt::format(R"(graph @g(%a: f32[2,45,70], %b: f32[70,33]) -> ({}f32[2,45,33], f32[2,45,33]) {{
  %p = matmul %a, %b : f32[2,45,33]
  %s = scalar {{slot = 0, value = 0.5}} : f32[]
  %q = mul %p, %s : f32[2,45,33]
  %r = relu %q : f32[2,45,33]
  %t = neg %p : f32[2,45,33]
  return {}%r, %t
}})",
                                         product_returned ? "f32[2,45,33], " : "", product_returned ? "%p, " : "");
    expect_same(text, {filled(DType::F32, Shape{2, 45, 70}, 16), filled(DType::F32, Shape{70, 33}, 17)},
                product_returned ? "epilogue beside the product" : "epilogue alone");
  }
}

}  // namespace
}  // namespace kiln
