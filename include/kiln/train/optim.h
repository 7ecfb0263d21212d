// kiln/train/optim.h - optimizers: SGD, Adam, AdamW; clipping by global norm; schedules.
//
//   std::vector<kiln::Tensor> params = {w1, b1, w2, b2};   // leaves: requires_grad_()
//   kiln::train::AdamW opt(kiln::train::pointers(params), {.lr = 1e-3, .weight_decay = 0.01});
//   for (int step = 0; step < n; ++step) {
//     kiln::Tensor loss = model(params, batch(step));
//     loss.backward();
//     opt.step();                 // records the update: nothing runs yet
//     opt.zero_grad();
//     kiln::sync();               // one plan: forward, backward, update
//     if (step % 100 == 0) std::cout << loss.item<float>();   // computed already
//   }
//
// An optimizer holds pointers to the caller's parameter tensors and, at step(), replaces each
// with its updated value (a new leaf that requires gradients), so a model that reads its
// parameters through those tensors sees the update. Updates are recorded under NoGradGuard
// and fuse per parameter into one elementwise kernel (parameter, gradient and state in, new
// parameter and state out). The learning rate and the bias corrections are scalars bound at
// launch: a schedule that changes them every step recompiles nothing. docs/autodiff.md.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kiln/frontend/tensor.h"

namespace kiln::train {

/// Pointers to each tensor of `params`, for an optimizer's constructor.
std::vector<Tensor*> pointers(std::vector<Tensor>& params);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// Records one update of every parameter that has a gradient (parameters without one are
  /// left as they are, their state too). Throws kiln::Error if a parameter is not a leaf
  /// that requires gradients.
  void step();
  /// Clears every parameter's gradient (PyTorch's zero_grad(set_to_none=True)).
  void zero_grad();
  double lr() const { return lr_; }
  /// The learning rate of the following steps (bound at launch: no recompilation).
  void set_lr(double lr);
  /// Steps taken so far.
  int64_t steps() const { return steps_; }
  const std::vector<Tensor*>& params() const { return params_; }

 protected:
  Optimizer(std::vector<Tensor*> params, double lr, const char* name);
  /// The new value of parameter `i` (`p`, whose gradient is `g`), updating its state.
  virtual Tensor update(size_t i, const Tensor& p, const Tensor& g) = 0;
  /// bound_scalar(value, like), recorded once per step for all the parameters of `like`'s
  /// dtype and device (`which` names the quantity: the rate, a bias correction): every
  /// update reads the same launch slot, so a kernel that joins the updates (a horizontal
  /// kernel, after clipping) takes one argument for it, not one per parameter.
  Tensor step_scalar(int which, const Tensor& like, const std::function<double()>& value);

 private:
  std::vector<Tensor*> params_;
  double lr_;
  int64_t steps_ = 0;
  const char* name_;
  struct StepScalar {
    int which;
    DType dtype;
    Device device;
    Tensor value;
  };
  std::vector<StepScalar> step_scalars_;  // the current step's, cleared when it ends
};

struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;  // L2: added to the gradient as weight_decay * p
  bool nesterov = false;
};

/// Stochastic gradient descent with momentum and Nesterov momentum (PyTorch's torch.optim.SGD:
/// buf = momentum * buf + (1 - dampening) * g, the first buf = g).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor*> params, SGDOptions options = {});

 private:
  Tensor update(size_t i, const Tensor& p, const Tensor& g) override;
  SGDOptions o_;
  std::vector<Tensor> momentum_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // Adam: L2 added to the gradient; AdamW: decoupled decay of p
};

/// Adam (Kingma and Ba), as torch.optim.Adam.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor*> params, AdamOptions options = {});

 protected:
  Adam(std::vector<Tensor*> params, AdamOptions options, bool decoupled, const char* name);

 private:
  Tensor update(size_t i, const Tensor& p, const Tensor& g) override;
  AdamOptions o_;
  bool decoupled_;
  std::vector<Tensor> m_, v_;
};

/// AdamW (Loshchilov and Hutter): the decay multiplies the parameter by 1 - lr * weight_decay
/// before Adam's step, as torch.optim.AdamW (whose default weight_decay is 0.01).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor*> params, AdamOptions options = {.lr = 1e-3, .weight_decay = 1e-2});
};

/// Scales every gradient of `params` by min(1, max_norm / (norm + 1e-6)), norm being the 2-norm
/// of all of them together (torch.nn.utils.clip_grad_norm_); returns that norm (lazy, f32).
/// Parameters without a gradient are skipped.
Tensor clip_grad_norm(const std::vector<Tensor*>& params, double max_norm);

/// Learning-rate schedules: the rate for step `step` (0-based), given the base rate.
struct CosineSchedule {
  int64_t warmup_steps = 0;  // linear from 0 up to the base rate
  int64_t total_steps = 1;   // then cosine down to min_lr at total_steps
  double min_lr = 0;
  double operator()(int64_t step, double base_lr) const;
};
struct StepSchedule {
  int64_t step_size = 1;  // every step_size steps the rate is multiplied by gamma
  double gamma = 0.1;
  double operator()(int64_t step, double base_lr) const;
};

}  // namespace kiln::train
