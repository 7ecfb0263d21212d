// benchmarks/index_bench.cpp - kiln's gather and scatter against hand-written loops.
//
//   embedding   rows of a [vocab, dim] f32 table by token: table.take(tokens, 0) + positions,
//               one fused kernel (the transformer example's first kernel), against an OpenMP
//               loop over tokens that adds the position row as it copies
//   scatter_add the same rows summed back into a zeroed [vocab, dim] table at the tokens
//               (an embedding's gradient): kiln's in-order scatter kernel (one worker) after
//               the copy of its data, against a serial loop
//   argsort     the positions that sort each of --rows rows of --row-len floats (a TopK over
//               a classifier's logits): kiln's bitonic network, against an OpenMP loop of
//               std::sort over rows, ties by position; checked exactly (both are stable)
// Medians of --reps runs in one process, in alternation; results are checked against the
// loops (the sums exactly: both add in token order). The loops write into arrays that stay
// allocated, while each eval() makes a new result: the `add` row (no gather) shows what that
// costs at the embedding's size.
//
//   kiln_index_bench [--vocab V] [--dim D] [--tokens T] [--rows N] [--row-len L] [--reps R] [--device D]
#include <fmt/format.h>
#include <kiln/kiln.h>
#include <omp.h>

#include "timing.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

using kiln::bench::median;
using kiln::bench::seconds;

}  // namespace

int main(int argc, char** argv) try {
  long vocab = 32000, dim = 512, tokens = 8192, rows = 4096, row_len = 1000;
  int reps = 9;
  std::string device = "cpu";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--vocab") vocab = std::atol(argv[i + 1]);
    else if (a == "--dim") dim = std::atol(argv[i + 1]);
    else if (a == "--tokens") tokens = std::atol(argv[i + 1]);
    else if (a == "--rows") rows = std::atol(argv[i + 1]);
    else if (a == "--row-len") row_len = std::atol(argv[i + 1]);
    else if (a == "--reps") reps = std::atoi(argv[i + 1]);
    else if (a == "--device") device = argv[i + 1];
    else throw kiln::Error("unknown flag " + a);
  }
  const kiln::Device d = kiln::Device::parse(device);
  std::vector<float> table(static_cast<size_t>(vocab * dim)), pos(static_cast<size_t>(tokens * dim));
  std::vector<int64_t> ids(static_cast<size_t>(tokens));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<float>(i % 97) * 1e-2f;
  for (size_t t = 0; t < ids.size(); ++t) ids[t] = static_cast<int64_t>((t * 40503u + 7) % static_cast<size_t>(vocab));
  const kiln::Tensor table_t = kiln::from_vector(table, {vocab, dim}, d);
  const kiln::Tensor pos_t = kiln::from_vector(pos, {tokens, dim}, d);
  const kiln::Tensor ids_t = kiln::from_vector(ids, {tokens}, d);

  std::unique_ptr<float[]> emb(new float[static_cast<size_t>(tokens * dim)]), grad(new float[static_cast<size_t>(vocab * dim)]);
  std::unique_ptr<float[]> sum(new float[static_cast<size_t>(tokens * dim)]);
  auto hand_add = [&] {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < tokens * dim; ++i) sum[static_cast<size_t>(i)] = pos[static_cast<size_t>(i)] + pos[static_cast<size_t>(i)];
  };
  auto hand_embedding = [&] {
#pragma omp parallel for schedule(static)
    for (long t = 0; t < tokens; ++t) {
      const float* row = table.data() + ids[static_cast<size_t>(t)] * dim;
      const float* p = pos.data() + t * dim;
      float* out = emb.get() + t * dim;
#pragma omp simd
      for (long j = 0; j < dim; ++j) out[j] = row[j] + p[j];
    }
  };
  auto hand_scatter = [&] {
    std::fill(grad.get(), grad.get() + vocab * dim, 0.0f);
    for (long t = 0; t < tokens; ++t) {
      float* row = grad.get() + ids[static_cast<size_t>(t)] * dim;
      const float* p = pos.data() + t * dim;
#pragma omp simd
      for (long j = 0; j < dim; ++j) row[j] += p[j];
    }
  };
  std::vector<float> logits(static_cast<size_t>(rows * row_len));
  for (size_t i = 0; i < logits.size(); ++i) {  // splitmix64: no runs for either sort to exploit
    uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    logits[i] = static_cast<float>((z ^ (z >> 31)) >> 40) * 1e-3f;
  }
  std::vector<int64_t> order(logits.size());
  auto hand_argsort = [&] {
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; ++r) {
      int64_t* o = order.data() + r * row_len;
      const float* x = logits.data() + r * row_len;
      for (long j = 0; j < row_len; ++j) o[j] = j;
      std::sort(o, o + row_len, [&](int64_t a, int64_t b) { return x[a] < x[b] || (x[a] == x[b] && a < b); });
    }
  };
  const kiln::Tensor logits_t = kiln::from_vector(logits, {rows, row_len}, d);
  kiln::Tensor y_add, y_emb, y_grad, y_sort;
  auto kiln_argsort = [&] { y_sort = logits_t.argsort(1).eval(); };
  auto kiln_add = [&] { y_add = (pos_t + pos_t).eval(); };
  // Named before eval(): the take() temporary would be alive during eval() and stored too.
  auto kiln_embedding = [&] {
    kiln::Tensor e = table_t.take(ids_t, 0) + pos_t;
    y_emb = e.eval();
  };
  const kiln::Tensor zeros = kiln::zeros({vocab, dim}, kiln::DType::F32, d);
  const kiln::Tensor at = ids_t.reshape({tokens, 1}).expand({tokens, dim});
  auto kiln_scatter = [&] { y_grad = zeros.scatter_add(0, at, pos_t).eval(); };

  struct Case {
    const char* name;
    std::function<void()> kiln, hand;
    double bytes;  // moved by one run: read and written
  };
  const double row_bytes = static_cast<double>(dim) * 4;
  const std::vector<Case> cases = {
      {"add (no gather: what eval() costs)", kiln_add, hand_add, 3.0 * static_cast<double>(tokens) * row_bytes},
      {"embedding", kiln_embedding, hand_embedding, 3.0 * static_cast<double>(tokens) * row_bytes},
      {"scatter_add", kiln_scatter, hand_scatter,
       static_cast<double>(vocab) * row_bytes + 3.0 * static_cast<double>(tokens) * row_bytes},
      {"argsort", kiln_argsort, hand_argsort, 12.0 * static_cast<double>(rows * row_len)}};
  std::printf("| case | vocab x dim, tokens | kiln (%s) | hand loop | kiln / hand | kiln GB/s | hand GB/s |\n", device.c_str());
  std::printf("|---|---|---|---|---|---|---|\n");
  int status = 0;
  for (const Case& c : cases) {
    c.kiln(), c.hand();  // compiles, warms the caches
    std::vector<double> tk, th;
    for (int r = 0; r < reps; ++r) {
      tk.push_back(seconds(c.kiln));
      th.push_back(seconds(c.hand));
    }
    const std::string name = c.name;
    if (name == "argsort") {
      if (y_sort.to_vector<int64_t>() != order) {
        std::fprintf(stderr, "argsort: the positions differ from the hand loop's\n");
        status = 1;
      }
      const double mk = median(tk), mh = median(th);
      std::printf("| %s | %ld rows of %ld | %.2f ms | %.2f ms | %.2fx | %.1f | %.1f |\n", c.name, rows, row_len, mk * 1e3,
                  mh * 1e3, mk / mh, c.bytes / mk * 1e-9, c.bytes / mh * 1e-9);
      continue;
    }
    const std::vector<float> got = (name == "embedding" ? y_emb : name == "scatter_add" ? y_grad : y_add).to_vector<float>();
    const float* want = name == "embedding" ? emb.get() : name == "scatter_add" ? grad.get() : sum.get();
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != want[i]) {
        std::fprintf(stderr, "%s: element %zu is %g, the hand loop's %g\n", c.name, i, static_cast<double>(got[i]),
                     static_cast<double>(want[i]));
        status = 1;
        break;
      }
    const double mk = median(tk), mh = median(th);
    std::printf("| %s | %ld x %ld, %ld | %.2f ms | %.2f ms | %.2fx | %.1f | %.1f |\n", c.name, vocab, dim, tokens,
                mk * 1e3, mh * 1e3, mk / mh, c.bytes / mk * 1e-9, c.bytes / mh * 1e-9);
  }
  std::printf("\n(hand loops: embedding and argsort on %d threads, scatter_add serial as kiln's; kiln's times are eval().)\n",
              omp_get_max_threads());
  return status;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
