// examples/char_gpt.h - the character-level GPT of train_char_gpt.cpp and
// train_char_gpt_dist.cpp: GPT-2's block at a small size (2 layers, width 128, 4 heads,
// context 64, tied embeddings, GELU, pre-norm), and the text it learns as character ids.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace char_gpt {

using namespace kiln;

constexpr int64_t kLayers = 2, kWidth = 128, kHeads = 4, kContext = 64, kBatch = 16;

struct Block {
  Tensor ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, out_w, out_b;
};

struct Model {
  Tensor wte, wpe, lnf_w, lnf_b;
  std::vector<Block> blocks;

  std::vector<Tensor*> parameters() {
    std::vector<Tensor*> p{&wte, &wpe, &lnf_w, &lnf_b};
    for (Block& b : blocks)
      for (Tensor* t : {&b.ln1_w, &b.ln1_b, &b.qkv_w, &b.qkv_b, &b.proj_w, &b.proj_b, &b.ln2_w,
                        &b.ln2_b, &b.fc_w, &b.fc_b, &b.out_w, &b.out_b})
        p.push_back(t);
    return p;
  }
};

inline Model make_model(int64_t vocab, Device device) {
  uint64_t seed = 1;
  auto normal = [&](Shape s, double std) {
    return train::normal(std::move(s), 0, std, seed++, DType::F32, device).eval().requires_grad_();
  };
  auto zeros_p = [&](int64_t n) { return zeros({n}, DType::F32, device).eval().requires_grad_(); };
  auto ones_p = [&](int64_t n) { return ones({n}, DType::F32, device).eval().requires_grad_(); };
  const double residual_std =
      0.02 / std::sqrt(2.0 * kLayers);  // GPT-2's scaled residual projections
  Model m{normal({vocab, kWidth}, 0.02),
          normal({kContext, kWidth}, 0.01),
          ones_p(kWidth),
          zeros_p(kWidth),
          {}};
  for (int64_t l = 0; l < kLayers; ++l)
    m.blocks.push_back({ones_p(kWidth), zeros_p(kWidth), normal({3 * kWidth, kWidth}, 0.02),
                        zeros_p(3 * kWidth), normal({kWidth, kWidth}, residual_std),
                        zeros_p(kWidth), ones_p(kWidth), zeros_p(kWidth),
                        normal({4 * kWidth, kWidth}, 0.02), zeros_p(4 * kWidth),
                        normal({kWidth, 4 * kWidth}, residual_std), zeros_p(kWidth)});
  return m;
}

// Logits [B, T, vocab] of tokens [B, T].
inline Tensor forward(const Model& m, const Tensor& tokens, const Tensor& causal_mask) {
  const int64_t b = tokens.size(0), t = tokens.size(1), head = kWidth / kHeads;
  Tensor x = m.wte.take(tokens, 0) + m.wpe.slice(0, 0, t);
  for (const Block& blk : m.blocks) {
    const Tensor qkv = linear(layer_norm(x, blk.ln1_w, blk.ln1_b), blk.qkv_w, blk.qkv_b);
    auto heads = [&](int64_t i) {
      return qkv.slice(-1, i * kWidth, (i + 1) * kWidth)
          .reshape({b, t, kHeads, head})
          .permute({0, 2, 1, 3});
    };
    const Tensor y = scaled_dot_product_attention(heads(0), heads(1), heads(2), causal_mask)
                         .permute({0, 2, 1, 3})
                         .reshape({b, t, kWidth});
    x = x + linear(y, blk.proj_w, blk.proj_b);
    const Tensor h = linear(layer_norm(x, blk.ln2_w, blk.ln2_b), blk.fc_w, blk.fc_b)
                         .gelu(GeluApproximation::Tanh);
    x = x + linear(h, blk.out_w, blk.out_b);
  }
  return layer_norm(x, m.lnf_w, m.lnf_b).matmul(m.wte.transpose(0, 1));  // tied embeddings
}

// A text as character ids, and the characters by id.
struct Text {
  std::string text;
  std::vector<char> chars;
  std::vector<int64_t> ids;
  int64_t vocab() const { return static_cast<int64_t>(chars.size()); }
  int64_t split() const {
    return static_cast<int64_t>(ids.size()) * 9 / 10;
  }  // the last 10% is held out
};

inline Text read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  Text t{ss.str(), {}, {}};
  std::map<char, int64_t> index;
  for (char c : t.text) index.emplace(c, 0);
  for (auto& [c, i] : index) {
    i = static_cast<int64_t>(t.chars.size());
    t.chars.push_back(c);
  }
  for (char c : t.text) t.ids.push_back(index[c]);
  return t;
}

// The additive causal mask of one context: -inf above the diagonal.
inline Tensor causal_mask(Device device) {
  std::vector<float> v(static_cast<size_t>(kContext * kContext), 0.0f);
  for (int64_t i = 0; i < kContext; ++i)
    for (int64_t j = i + 1; j < kContext; ++j) v[static_cast<size_t>(i * kContext + j)] = -INFINITY;
  return from_vector(v, {kContext, kContext}, device);
}

// The mean of the last `n` losses (or of all, when fewer).
inline double mean_of_last(const std::vector<float>& losses, size_t n) {
  const size_t last = std::min(n, losses.size());
  double mean = 0;
  for (size_t i = losses.size() - last; i < losses.size(); ++i)
    mean += losses[i] / static_cast<double>(last);
  return mean;
}

// Whether a run of `steps` learned: after 500 steps or more, a mean training loss of the last
// 20 under 1.7 nats per character; after 20, a held-out loss under 3.2 (a model that knows only
// which letters are frequent stays near 3.2, one that knows only pairs of letters near 2.5;
// it starts at 4.36).
inline bool learned(int64_t steps, double last_20_loss, double held_out_loss) {
  return steps >= 500 ? last_20_loss < 1.7 : steps >= 20 ? held_out_loss < 3.2 : true;
}

}  // namespace char_gpt
