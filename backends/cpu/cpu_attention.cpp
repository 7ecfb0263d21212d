// backends/cpu/cpu_attention.cpp - see cpu_attention.h.
//
// FlashAttention's loop on the GEMM's parts. A task owns block_rows query rows of one batch
// entry: it packs their q rows once as A panels, then for each block of block_keys keys
//   1. packs k's block as B panels and runs the micro-kernel over the tiles: the block's
//      scores, rows x keys, in a buffer that stays in L1/L2;
//   2. scales them and adds the bias (a NaN score is noted for its row);
//   3. runs the online softmax on them (attention_codegen.h): the rows' running maximum
//      and sum, the scores replaced by their exp, and the factor alpha by which the maximum's
//      growth shrinks what the rows accumulated so far;
//   4. scales the rows' accumulators by alpha, packs the exps as A panels and v's block as
//      B panels, and adds their product into the accumulators (the micro-kernel's C += tile).
// Last, each row's accumulators divided by its sum are stored. Buffers are padded to whole
// register tiles (padding scores are -inf, so their exp is 0), so every tile is whole.
#include "cpu_attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "cpu_jit.h"
#include "packing.h"
#include "parallel.h"

namespace kiln::cpu {
namespace {

// Below this many multiply-adds (both products) the step runs on the calling thread.
constexpr int64_t kSerialBelow = int64_t{1} << 18;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

float* scratch(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

}  // namespace

void prepare_attention(const LaunchPlan::Attention& a) {
  const kir::GemmSchedule& tile = a.schedule.tile;
  Jit::instance().gemm_microkernel(tile, DType::F32);
  Jit::instance().attention_softmax(tile.vector_width);
}

void run_attention(const LaunchPlan::Attention& a, const float* q, const float* k, const float* v, const float* bias,
                   float* out) {
  const int64_t batches = a.batch.numel();
  if (batches == 0 || a.rows == 0 || a.width == 0) return;
  const kir::AttentionSchedule& s = a.schedule;
  const kir::GemmSchedule& tile = s.tile;
  KILN_ASSERT(s.block_rows % tile.mr == 0 && s.block_keys % tile.nr == 0 && s.block_keys % tile.vector_width == 0,
              "attention blocks are whole register tiles");
  const KernelFn micro = Jit::instance().gemm_microkernel(tile, DType::F32)->fn();
  const KernelFn softmax = Jit::instance().attention_softmax(tile.vector_width)->fn();
  const int mr = tile.mr, nr = tile.nr;
  const int64_t br = s.block_rows, bk = s.block_keys, depth = a.depth, width = a.width;
  const int64_t wpad = round_up(width, nr);
  const int64_t row_blocks = (a.rows + br - 1) / br, tasks = batches * row_blocks;
  const float inf = std::numeric_limits<float>::infinity();
  const float scale = static_cast<float>(a.scale);

  auto task = [&](int64_t t) {
    const int64_t bi = t / row_blocks, r0 = t % row_blocks * br, h = std::min(br, a.rows - r0);
    const int64_t hpad = round_up(h, mr), rpanels = hpad / mr;
    const std::array<int64_t, 4> base = a.batch_offsets(bi);
    thread_local std::vector<float> qpack_v, kpack_v, scores_v, ppack_v, vpack_v, acc_v, stats_v;
    float* qpack = scratch(qpack_v, hpad * std::max<int64_t>(depth, 1));
    float* kpack = scratch(kpack_v, bk * std::max<int64_t>(depth, 1));
    float* scores = scratch(scores_v, hpad * bk);
    float* ppack = scratch(ppack_v, hpad * bk);
    float* vpack = scratch(vpack_v, bk * wpad);
    float* acc = scratch(acc_v, hpad * wpad);
    float* stats = scratch(stats_v, 3 * hpad);
    float *most = stats, *sum = stats + hpad, *alpha = stats + 2 * hpad;
    std::vector<bool> nan(static_cast<size_t>(h), false);
    std::fill(most, most + hpad, -inf);
    std::fill(sum, sum + hpad, 0.0f);
    std::fill(acc, acc + hpad * wpad, 0.0f);
    pack_a(q + base[0] + r0 * a.q.row_stride, a.q.row_stride, a.q.col_stride, h, depth, mr, qpack);
    int64_t ldb = nr;
    for (int64_t j0 = 0; j0 < a.keys; j0 += bk) {
      const int64_t kw = std::min(bk, a.keys - j0), kwpad = round_up(kw, nr);
      // 1. Scores: q's rows times k's block, transposed (B[e, j] = k[j, e]).
      pack_b(k + base[1] + j0 * a.k.row_stride, a.k.col_stride, a.k.row_stride, depth, kw, nr, kpack);
      for (int64_t jp = 0; jp < kwpad / nr; ++jp)
        for (int64_t ip = 0; ip < rpanels; ++ip) {
          void* args[5] = {qpack + ip * mr * depth, kpack + jp * nr * depth, scores + ip * mr * bk + jp * nr, nullptr,
                           &ldb};
          call_kernel(micro, args, depth, bk);
        }
      // 2. Scale and bias; the block's padding is -inf.
      for (int64_t r = 0; r < h; ++r) {
        float* row = scores + r * bk;
        const float* brow = bias ? bias + base[3] + (r0 + r) * a.bias.row_stride + j0 * a.bias.col_stride : nullptr;
        bool row_nan = false;
        for (int64_t j = 0; j < kw; ++j) {
          float x = row[j] * scale;
          if (brow) x += brow[j * a.bias.col_stride];
          row_nan = row_nan || std::isnan(x);
          row[j] = x;
        }
        std::fill(row + kw, row + bk, -inf);
        if (row_nan) nan[static_cast<size_t>(r)] = true;
      }
      // 3. The online softmax of the block's rows.
      void* sargs[4] = {scores, most, sum, alpha};
      call_kernel(softmax, sargs, h, bk);
      // 4. The accumulators rescaled, then the block's exps times v's block added.
      for (int64_t r = 0; r < h; ++r)
        if (alpha[r] != 1.0f)
          for (int64_t c = 0; c < width; ++c) acc[r * wpad + c] *= alpha[r];
      pack_a(scores, bk, int64_t{1}, h, kw, mr, ppack);
      pack_b(v + base[2] + j0 * a.v.row_stride, a.v.row_stride, a.v.col_stride, kw, width, nr, vpack);
      for (int64_t jp = 0; jp < wpad / nr; ++jp)
        for (int64_t ip = 0; ip < rpanels; ++ip) {
          float* c = acc + ip * mr * wpad + jp * nr;
          void* args[5] = {ppack + ip * mr * kw, vpack + jp * nr * kw, c, c, &ldb};
          call_kernel(micro, args, kw, wpad);
        }
    }
    // Undefined rows: no finite maximum, or a NaN score.
    const float undefined = a.masked_zero ? 0.0f : std::numeric_limits<float>::quiet_NaN();
    for (int64_t r = 0; r < h; ++r) {
      float* y = out + (bi * a.rows + r0 + r) * width;
      if (nan[static_cast<size_t>(r)] || !std::isfinite(most[r])) {
        std::fill(y, y + width, undefined);
        continue;
      }
      const float l = sum[r];
      for (int64_t c = 0; c < width; ++c) y[c] = acc[r * wpad + c] / l;
    }
  };
  const int64_t work = batches * a.rows * a.keys * (depth + width);
  if (work < kSerialBelow || tasks == 1) {
    for (int64_t t = 0; t < tasks; ++t) task(t);
    return;
  }
  parallel_range(
      tasks, 1,
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) task(t);
      },
      tile.threads);
}

}  // namespace kiln::cpu
