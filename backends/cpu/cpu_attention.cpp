// backends/cpu/cpu_attention.cpp - see cpu_attention.h.
//
// FlashAttention's loop on the GEMM's parts. k's and v's blocks of block_keys keys are packed
// as B panels once per batch entry, before the tasks start. A task owns block_rows query rows
// of one batch entry: it packs their q rows once as A panels, then for each block of keys
//   1. runs the micro-kernel over the tiles of q's panels and k's: the block's scores, rows x
//      keys, in a buffer that stays in L1/L2;
//   2. runs the online softmax on them (attention_codegen.h), which scales them and adds the
//      bias (noting a NaN score for its row): the rows' running maximum and sum, the scores
//      replaced by their exp, and the factor alpha by which the maximum's growth shrinks what
//      the rows accumulated so far;
//   3. scales the rows' accumulators by alpha and adds the product of the exps, read in
//      place, with v's block into them (the micro-kernel's C += tile).
// Last, each row's accumulators divided by its sum are stored. Buffers are padded to whole
// register tiles, so every tile is whole (the softmax reads the scores past a block's keys
// as -inf: their exp is 0).
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
// The most memory k's and v's panels, packed once for all tasks, may take.
constexpr int64_t kMostPacked = int64_t{256} << 20;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

float* scratch(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

}  // namespace

void run_attention(const LaunchPlan::Attention& a, const float* q, const float* k, const float* v, const float* bias,
                   float* out) {
  const int64_t batches = a.batch.numel();
  if (batches == 0 || a.rows == 0 || a.width == 0) return;
  const kir::AttentionSchedule& s = a.schedule;
  const kir::GemmSchedule& tile = s.tile;
  KILN_ASSERT(s.block_rows % tile.mr == 0 && s.block_keys % tile.nr == 0 && s.block_keys % tile.vector_width == 0,
              "attention blocks are whole register tiles");
  const KernelFn micro = Jit::instance().gemm_microkernel(tile, DType::F32)->fn();
  const KernelFn micro_rows = Jit::instance().gemm_microkernel(tile, DType::F32, {.a_rows = true})->fn();
  const KernelFn softmax = Jit::instance().attention_softmax(tile.vector_width)->fn();
  const int mr = tile.mr, nr = tile.nr;
  const int64_t br = s.block_rows, bk = s.block_keys, depth = a.depth, width = a.width;
  const int64_t wpad = round_up(width, nr);
  const int64_t row_blocks = (a.rows + br - 1) / br, tasks = batches * row_blocks;
  const float scale = static_cast<float>(a.scale);
  const int64_t work = batches * a.rows * a.keys * (depth + width);
  const bool parallel = work >= kSerialBelow && tasks > 1;

  // Key block `blk` of batch entry `bi`: k's block as B panels (depth x bk, B[e, j] = k[j, e])
  // and v's (bk x wpad), packed into `kp` and `vp`.
  const int64_t key_blocks = (a.keys + bk - 1) / bk;
  auto pack_keys = [&](int64_t bi, int64_t blk, float* kp, float* vp) {
    const std::array<int64_t, 4> base = a.batch_offsets(bi);
    const int64_t j0 = blk * bk, kw = std::min(bk, a.keys - j0);
    pack_b(k + base[1] + j0 * a.k.row_stride, a.k.col_stride, a.k.row_stride, depth, kw, nr, kp);
    pack_b(v + base[2] + j0 * a.v.row_stride, a.v.row_stride, a.v.col_stride, kw, width, nr, vp);
  };
  // Every task of a batch entry reads all its keys: they are packed once, before the tasks
  // (Whisper's 1500 keys were packed 47 times per head, once per block of 32 rows, where
  // packing cost more than the products), unless that takes more than kMostPacked.
  const int64_t k_panel = bk * depth, v_panel = bk * wpad, per_batch = key_blocks * (k_panel + v_panel);
  std::vector<float> packed;
  if (per_batch * batches * static_cast<int64_t>(sizeof(float)) <= kMostPacked) {
    packed.resize(static_cast<size_t>(per_batch * batches));
    auto pack = [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) {
        float* at = packed.data() + u * (k_panel + v_panel);
        pack_keys(u / key_blocks, u % key_blocks, at, at + k_panel);
      }
    };
    if (parallel) parallel_range(batches * key_blocks, 1, pack, tile.threads);
    else pack(0, batches * key_blocks);
  }

  auto task = [&](int64_t t) {
    const int64_t bi = t / row_blocks, r0 = t % row_blocks * br, h = std::min(br, a.rows - r0);
    const int64_t hpad = round_up(h, mr), rpanels = hpad / mr;
    const std::array<int64_t, 4> base = a.batch_offsets(bi);
    thread_local std::vector<float> qpack_v, kpack_v, vpack_v, scores_v, acc_v, stats_v;
    thread_local std::vector<uint8_t> nan;  // per row: a NaN score seen (the softmax sets it)
    float* qpack = scratch(qpack_v, hpad * std::max<int64_t>(depth, 1));
    float* kscratch = packed.empty() ? scratch(kpack_v, std::max<int64_t>(k_panel, 1)) : nullptr;
    float* vscratch = packed.empty() ? scratch(vpack_v, v_panel) : nullptr;
    float* scores = scratch(scores_v, hpad * bk);
    float* acc = scratch(acc_v, hpad * wpad);
    float* stats = scratch(stats_v, 3 * hpad);
    float *most = stats, *sum = stats + hpad, *alpha = stats + 2 * hpad;
    nan.assign(static_cast<size_t>(h), 0);
    std::fill(most, most + hpad, -std::numeric_limits<float>::infinity());
    std::fill(sum, sum + hpad, 0.0f);
    std::fill(acc, acc + hpad * wpad, 0.0f);
    pack_a(q + base[0] + r0 * a.q.row_stride, a.q.row_stride, a.q.col_stride, h, depth, mr, qpack);
    int64_t ldb = nr;
    for (int64_t j0 = 0; j0 < a.keys; j0 += bk) {
      const int64_t kw = std::min(bk, a.keys - j0), kwpad = round_up(kw, nr);
      const int64_t blk = j0 / bk;
      const float* kpack = kscratch;
      const float* vpack = vscratch;
      if (packed.empty()) {
        pack_keys(bi, blk, kscratch, vscratch);
      } else {
        kpack = packed.data() + (bi * key_blocks + blk) * (k_panel + v_panel);
        vpack = kpack + k_panel;
      }
      // 1. Scores: q's rows times k's block, transposed.
      for (int64_t jp = 0; jp < kwpad / nr; ++jp)
        for (int64_t ip = 0; ip < rpanels; ++ip) {
          void* args[5] = {qpack + ip * mr * depth, const_cast<float*>(kpack + jp * nr * depth),
                           scores + ip * mr * bk + jp * nr, nullptr, &ldb};
          call_kernel(micro, args, depth, bk);
        }
      // 2. The online softmax of the block's rows, which adds a bias contiguous along its rows;
      // one that is not (broadcast along the keys) is added here to the scaled scores, which
      // the softmax then scales by 1.
      const float* bias_rows = bias ? bias + base[3] + r0 * a.bias.row_stride + j0 : nullptr;
      float block_scale = scale;
      if (bias && a.bias.col_stride != 1) {
        for (int64_t r = 0; r < h; ++r) {
          float* row = scores + r * bk;
          const float* brow = bias + base[3] + (r0 + r) * a.bias.row_stride + j0 * a.bias.col_stride;
          for (int64_t j = 0; j < kw; ++j) row[j] = row[j] * scale + brow[j * a.bias.col_stride];
        }
        bias_rows = nullptr;
        block_scale = 1.0f;
      }
      int64_t ld = bk, bias_ld = a.bias.row_stride;
      void* sargs[9] = {scores, most, sum, alpha, &block_scale, &ld, nan.data(), const_cast<float*>(bias_rows), &bias_ld};
      call_kernel(softmax, sargs, h, kw);
      // 3. The accumulators rescaled, then the block's exps times v's block added.
      for (int64_t r = 0; r < h; ++r)
        if (alpha[r] != 1.0f)
          for (int64_t c = 0; c < width; ++c) acc[r * wpad + c] *= alpha[r];
      for (int64_t jp = 0; jp < wpad / nr; ++jp)
        for (int64_t ip = 0; ip < rpanels; ++ip) {
          float* c = acc + ip * mr * wpad + jp * nr;
          void* args[6] = {scores + ip * mr * bk, const_cast<float*>(vpack + jp * nr * kw), c, c, &ldb, &ld};
          call_kernel(micro_rows, args, kw, wpad);
        }
    }
    // Undefined rows: no finite maximum, or a NaN score.
    const float undefined = a.masked_zero ? 0.0f : std::numeric_limits<float>::quiet_NaN();
    for (int64_t r = 0; r < h; ++r) {
      float* y = out + (bi * a.rows + r0 + r) * width;
      if (nan[static_cast<size_t>(r)] != 0 || !std::isfinite(most[r])) {
        std::fill(y, y + width, undefined);
        continue;
      }
      const float l = sum[r];
      for (int64_t c = 0; c < width; ++c) y[c] = acc[r * wpad + c] / l;
    }
  };
  run_tasks(tasks, parallel, tile.threads, task);
}

}  // namespace kiln::cpu
