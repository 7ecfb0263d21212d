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
#include <cstdio>
#include <string>
#include <vector>

#include "char_gpt.h"

using namespace kiln;
using namespace char_gpt;

int main(int argc, char** argv) {
  const Device device = Device::parse(argc > 1 ? argv[1] : "cpu");
  const int64_t steps = argc > 2 ? std::stoll(argv[2]) : 500;
  const std::string path = argc > 3 ? argv[3] : "/usr/share/common-licenses/GPL-3";
  Text corpus;
  try {
    corpus = read_text(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  const std::string& text = corpus.text;
  const std::vector<char>& chars = corpus.chars;
  const std::vector<int64_t>& ids = corpus.ids;
  const int64_t vocab = corpus.vocab();
  const int64_t split = corpus.split();
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
  const Tensor mask = causal_mask(device);

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
  const size_t last = std::min<size_t>(20, losses.size());
  const double tail = mean_of_last(losses, last);

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
  return learned(steps, tail, held_out) ? 0 : 1;
}
