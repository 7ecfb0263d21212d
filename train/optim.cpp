// train/optim.cpp - optimizers: each step records every parameter's update as tensor ops.
#include "kiln/train/optim.h"

#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "kiln/frontend/autodiff.h"
#include "kiln/frontend/capture.h"
#include "kiln/support/error.h"

namespace kiln::train {
namespace {

// What Optimizer::step_scalar records once per step (its `which`).
enum StepQuantity : int { kRate, kDecay, kStepSize, kRootCorrection };

}  // namespace

std::vector<Tensor*> pointers(std::vector<Tensor>& params) {
  std::vector<Tensor*> out;
  out.reserve(params.size());
  for (Tensor& p : params) out.push_back(&p);
  return out;
}

Optimizer::Optimizer(std::vector<Tensor*> params, double lr, const char* name)
    : params_(std::move(params)), lr_(lr), name_(name) {
  if (!(lr >= 0)) throw Error(fmt::format("{}: the learning rate must be >= 0, got {}", name, lr));
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor* p = params_[i];
    if (!p || !p->defined() || !p->requires_grad() || !p->is_leaf())
      throw Error(fmt::format("{}: parameter {} is not a leaf that requires gradients (call requires_grad_() on it)",
                              name, i));
  }
}

void Optimizer::set_lr(double lr) {
  if (!(lr >= 0)) throw Error(fmt::format("{}: the learning rate must be >= 0, got {}", name_, lr));
  lr_ = lr;
}

void Optimizer::step() {
  ++steps_;
  on_replay([this] { ++steps_; });  // a captured step counts its replays too
  NoGradGuard no_grad;
  step_scalars_.clear();  // not a step that threw's
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = *params_[i];
    if (!p.defined() || !p.requires_grad() || !p.is_leaf())
      throw Error(fmt::format("{}: parameter {} is no longer a leaf that requires gradients", name_, i));
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor next = update(i, p, g);
    // The new value replaces the parameter as a fresh leaf. The old one's gradient is spent:
    // cleared, so that a tape still holding the old leaf (the loss's) does not keep it, and
    // the step's plan need not store it.
    p.set_grad({});
    p = std::move(next);
    p.requires_grad_();
  }
  step_scalars_.clear();
}

Tensor Optimizer::step_scalar(int which, const Tensor& like, const std::function<double()>& value) {
  for (const StepScalar& s : step_scalars_)
    if (s.which == which && s.dtype == like.dtype() && s.device == like.device()) return s.value;
  step_scalars_.push_back({which, like.dtype(), like.device(), bound_scalar(value, like)});
  return step_scalars_.back().value;
}

void Optimizer::zero_grad() {
  for (Tensor* p : params_)
    if (p->defined() && p->requires_grad() && p->is_leaf()) p->set_grad({});
}

SGD::SGD(std::vector<Tensor*> params, SGDOptions options)
    : Optimizer(std::move(params), options.lr, "SGD"), o_(options), momentum_(this->params().size()) {
  if (o_.momentum < 0 || o_.weight_decay < 0)
    throw Error(fmt::format("SGD: momentum ({}) and weight_decay ({}) must be >= 0", o_.momentum, o_.weight_decay));
  if (o_.nesterov && (o_.momentum <= 0 || o_.dampening != 0))
    throw Error("SGD: Nesterov momentum needs a momentum and no dampening");
}

Tensor SGD::update(size_t i, const Tensor& p, const Tensor& g0) {
  Tensor g = o_.weight_decay != 0 ? g0 + p * o_.weight_decay : g0;
  if (o_.momentum != 0) {
    Tensor& buf = momentum_[i];
    buf = buf.defined() ? buf * o_.momentum + g * (1 - o_.dampening) : g;
    g = o_.nesterov ? g + buf * o_.momentum : buf;
  }
  return p - g * step_scalar(kRate, g, [this] { return lr(); });
}

Adam::Adam(std::vector<Tensor*> params, AdamOptions options) : Adam(std::move(params), options, false, "Adam") {}

Adam::Adam(std::vector<Tensor*> params, AdamOptions options, bool decoupled, const char* name)
    : Optimizer(std::move(params), options.lr, name),
      o_(options),
      decoupled_(decoupled),
      m_(this->params().size()),
      v_(this->params().size()) {
  if (!(o_.beta1 >= 0 && o_.beta1 < 1 && o_.beta2 >= 0 && o_.beta2 < 1))
    throw Error(fmt::format("{}: betas must be in [0, 1), got {} and {}", name, o_.beta1, o_.beta2));
  if (!(o_.eps >= 0) || !(o_.weight_decay >= 0))
    throw Error(fmt::format("{}: eps ({}) and weight_decay ({}) must be >= 0", name, o_.eps, o_.weight_decay));
}

Tensor Adam::update(size_t i, const Tensor& p0, const Tensor& g0) {
  Tensor p = p0, g = g0;
  if (o_.weight_decay != 0) {
    if (decoupled_) p = p * step_scalar(kDecay, p, [this] { return 1 - lr() * o_.weight_decay; });
    else g = g + p * o_.weight_decay;
  }
  Tensor& m = m_[i];
  Tensor& v = v_[i];
  m = m.defined() ? m * o_.beta1 + g * (1 - o_.beta1) : g * (1 - o_.beta1);
  v = v.defined() ? v * o_.beta2 + g * g * (1 - o_.beta2) : g * g * (1 - o_.beta2);
  // The bias corrections change every step: launch-bound scalars like the rate, read again
  // at each replay of a captured step.
  const Tensor step_size =
      step_scalar(kStepSize, m, [this] { return lr() / (1 - std::pow(o_.beta1, static_cast<double>(steps()))); });
  const Tensor root_correction = step_scalar(
      kRootCorrection, v, [this] { return std::sqrt(1 - std::pow(o_.beta2, static_cast<double>(steps()))); });
  return p - m * step_size / ((v.sqrt() / root_correction) + o_.eps);
}

AdamW::AdamW(std::vector<Tensor*> params, AdamOptions options) : Adam(std::move(params), options, true, "AdamW") {}

Tensor clip_grad_norm(const std::vector<Tensor*>& params, double max_norm) {
  if (!(max_norm > 0)) throw Error(fmt::format("clip_grad_norm: max_norm must be > 0, got {}", max_norm));
  NoGradGuard no_grad;
  Tensor total;
  for (const Tensor* p : params) {
    const Tensor g = p->grad();
    if (!g.defined()) continue;
    const Tensor g32 = g.to(DType::F32);
    const Tensor sq = (g32 * g32).sum();
    total = total.defined() ? total + sq : sq;
  }
  if (!total.defined()) return zeros({});
  const Tensor norm = total.sqrt();
  const Tensor scale = (max_norm / (norm + 1e-6)).minimum(ones({}, DType::F32, norm.device()));
  for (Tensor* p : params) {
    const Tensor g = p->grad();
    if (g.defined()) p->set_grad(g * scale.to(g.dtype()));
  }
  return norm;
}

double CosineSchedule::operator()(int64_t step, double base_lr) const {
  if (step < warmup_steps) return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (step >= total_steps) return min_lr;
  const double span = static_cast<double>(std::max<int64_t>(total_steps - warmup_steps, 1));
  const double progress = static_cast<double>(step - warmup_steps) / span;
  return min_lr + (base_lr - min_lr) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

double StepSchedule::operator()(int64_t step, double base_lr) const {
  return base_lr * std::pow(gamma, static_cast<double>(step / std::max<int64_t>(step_size, 1)));
}

}  // namespace kiln::train
