// examples/train_char_gpt.cpp - a 2-layer character-level GPT learns the GNU GPL.
//
//   build/bin/example_train_char_gpt [device] [steps] [text file]
//
// The text is /usr/share/common-licenses/GPL-3 (every Debian system has it; 35 KB, 80-odd
// distinct characters). The model is GPT-2's block at a small size: 2 layers, width 128,
// 4 heads, context 64, tied embeddings, GELU, pre-norm; AdamW with warmup and cosine decay,
// gradients clipped to norm 1, batches of 16 windows drawn by a fixed seed. Each step
// (forward, backward with the attention's and the embeddings' gradients, clipping, update)
// is one plan. It prints the training loss and, at the end, the loss on the last 10% of the
// text, which training never sees, and a sample. Exits 1 unless it learned: after 500 steps
// or more, a mean training loss of the last 20 steps under 1.7 nats per character; after 20
// (the tests' runs on opencl:0 and vulkan:0, where a step costs seconds), a held-out loss
// under 3.2 (a model that knows only which letters are frequent stays near 3.2, one that
// knows only pairs of letters near 2.5; it starts at 4.36).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace {

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
      for (Tensor* t : {&b.ln1_w, &b.ln1_b, &b.qkv_w, &b.qkv_b, &b.proj_w, &b.proj_b, &b.ln2_w, &b.ln2_b, &b.fc_w,
                        &b.fc_b, &b.out_w, &b.out_b})
        p.push_back(t);
    return p;
  }
};

Model make_model(int64_t vocab, Device device) {
  uint64_t seed = 1;
  auto normal = [&](Shape s, double std) { return train::normal(std::move(s), 0, std, seed++, DType::F32, device).eval().requires_grad_(); };
  auto zeros_p = [&](int64_t n) { return zeros({n}, DType::F32, device).eval().requires_grad_(); };
  auto ones_p = [&](int64_t n) { return ones({n}, DType::F32, device).eval().requires_grad_(); };
  const double residual_std = 0.02 / std::sqrt(2.0 * kLayers);  // GPT-2's scaled residual projections
  Model m{normal({vocab, kWidth}, 0.02), normal({kContext, kWidth}, 0.01), ones_p(kWidth), zeros_p(kWidth), {}};
  for (int64_t l = 0; l < kLayers; ++l)
    m.blocks.push_back({ones_p(kWidth), zeros_p(kWidth), normal({3 * kWidth, kWidth}, 0.02), zeros_p(3 * kWidth),
                        normal({kWidth, kWidth}, residual_std), zeros_p(kWidth), ones_p(kWidth), zeros_p(kWidth),
                        normal({4 * kWidth, kWidth}, 0.02), zeros_p(4 * kWidth), normal({kWidth, 4 * kWidth}, residual_std),
                        zeros_p(kWidth)});
  return m;
}

// Logits [B, T, vocab] of tokens [B, T].
Tensor forward(const Model& m, const Tensor& tokens, const Tensor& causal_mask) {
  const int64_t b = tokens.size(0), t = tokens.size(1), head = kWidth / kHeads;
  Tensor x = m.wte.take(tokens, 0) + m.wpe.slice(0, 0, t);
  for (const Block& blk : m.blocks) {
    const Tensor qkv = linear(layer_norm(x, blk.ln1_w, blk.ln1_b), blk.qkv_w, blk.qkv_b);
    auto heads = [&](int64_t i) {
      return qkv.slice(-1, i * kWidth, (i + 1) * kWidth).reshape({b, t, kHeads, head}).permute({0, 2, 1, 3});
    };
    const Tensor y = scaled_dot_product_attention(heads(0), heads(1), heads(2), causal_mask)
                         .permute({0, 2, 1, 3})
                         .reshape({b, t, kWidth});
    x = x + linear(y, blk.proj_w, blk.proj_b);
    const Tensor h = linear(layer_norm(x, blk.ln2_w, blk.ln2_b), blk.fc_w, blk.fc_b).gelu(GeluApproximation::Tanh);
    x = x + linear(h, blk.out_w, blk.out_b);
  }
  return layer_norm(x, m.lnf_w, m.lnf_b).matmul(m.wte.transpose(0, 1));  // tied embeddings
}

}  // namespace

int main(int argc, char** argv) {
  const Device device = Device::parse(argc > 1 ? argv[1] : "cpu");
  const int64_t steps = argc > 2 ? std::stoll(argv[2]) : 500;
  const std::string path = argc > 3 ? argv[3] : "/usr/share/common-licenses/GPL-3";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return 2;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::map<char, int64_t> index;
  for (char c : text) index.emplace(c, 0);
  std::vector<char> chars;
  for (auto& [c, i] : index) {
    i = static_cast<int64_t>(chars.size());
    chars.push_back(c);
  }
  const int64_t vocab = static_cast<int64_t>(chars.size());
  std::vector<int64_t> ids;
  for (char c : text) ids.push_back(index[c]);
  const int64_t split = static_cast<int64_t>(ids.size()) * 9 / 10;  // the last 10% is held out

  uint64_t state = 42;
  auto next_window = [&](int64_t lo, int64_t hi) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(hi - lo - kContext - 1));
  };
  auto batch = [&](int64_t lo, int64_t hi) {
    std::vector<int64_t> x, y;
    for (int64_t i = 0; i < kBatch; ++i) {
      const int64_t at = next_window(lo, hi);
      x.insert(x.end(), ids.begin() + at, ids.begin() + at + kContext);
      y.insert(y.end(), ids.begin() + at + 1, ids.begin() + at + kContext + 1);
    }
    return std::pair{from_vector(x, {kBatch, kContext}, device), from_vector(y, {kBatch, kContext}, device)};
  };
  std::vector<float> mask_values(static_cast<size_t>(kContext * kContext), 0.0f);
  for (int64_t i = 0; i < kContext; ++i)
    for (int64_t j = i + 1; j < kContext; ++j) mask_values[static_cast<size_t>(i * kContext + j)] = -INFINITY;
  const Tensor mask = from_vector(mask_values, {kContext, kContext}, device);

  Model model = make_model(vocab, device);
  std::vector<Tensor*> params = model.parameters();
  train::AdamW opt(params, {.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.01});
  const train::CosineSchedule schedule{.warmup_steps = 30, .total_steps = steps, .min_lr = 3e-4};
  std::printf("%lld characters (%lld distinct), %zu parameter tensors, on %s\n", static_cast<long long>(ids.size()),
              static_cast<long long>(vocab), params.size(), device.str().c_str());
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> losses;
  for (int64_t step = 0; step < steps; ++step) {
    opt.set_lr(schedule(step, 3e-3));
    const auto [x, y] = batch(0, split);
    const Tensor loss = train::cross_entropy(forward(model, x, mask), y);
    loss.backward();
    train::clip_grad_norm(params, 1.0);
    opt.step();
    opt.zero_grad();
    kiln::sync();
    losses.push_back(loss.item<float>());
    if (step % 50 == 0 || step == steps - 1)
      std::printf("step %4lld  loss %.3f  %.1f s\n", static_cast<long long>(step), losses.back(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double tail = 0;
  const size_t last = std::min<size_t>(20, losses.size());
  for (size_t i = losses.size() - last; i < losses.size(); ++i) tail += losses[i] / static_cast<double>(last);

  NoGradGuard no_grad;
  double held_out = 0;
  for (int i = 0; i < 8; ++i) {
    const auto [x, y] = batch(split, static_cast<int64_t>(ids.size()));
    held_out += train::cross_entropy(forward(model, x, mask), y).item<float>() / 8;
  }
  // A sample: the text up to the start of its preamble, continued by drawing each character
  // from the model's distribution (temperature 0.7, a fixed seed).
  const size_t prompt_end = std::max<size_t>(text.find("Preamble") + 12, static_cast<size_t>(kContext));
  std::vector<int64_t> context(ids.begin() + static_cast<int64_t>(prompt_end) - kContext,
                               ids.begin() + static_cast<int64_t>(prompt_end));
  std::string sample;
  const int sample_chars = steps >= 500 ? 120 : 16;  // a short run's sample says little
  for (int i = 0; i < sample_chars; ++i) {
    const Tensor logits = forward(model, from_vector(context, {1, kContext}, device), mask);
    const std::vector<float> p =
        (logits.slice(1, kContext - 1, kContext).reshape({vocab}) / 0.7f).softmax(-1).to_vector<float>();
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    double u = static_cast<double>(state >> 11) / static_cast<double>(1ull << 53);
    int64_t next = vocab - 1;
    for (int64_t c = 0; c < vocab; ++c)
      if ((u -= p[static_cast<size_t>(c)]) < 0) {
        next = c;
        break;
      }
    sample.push_back(chars[static_cast<size_t>(next)]);
    context.erase(context.begin());
    context.push_back(next);
  }
  std::printf("training loss (last %zu steps) %.3f, held-out loss %.3f, %lld steps in %.1f s (%.1f ms a step)\n",
              last, tail, held_out, static_cast<long long>(steps), seconds, 1000 * seconds / static_cast<double>(steps));
  std::printf("sample: %s\n", sample.c_str());
  const bool learned = steps >= 500 ? tail < 1.7 : steps >= 20 ? held_out < 3.2 : true;
  return learned ? 0 : 1;
}
