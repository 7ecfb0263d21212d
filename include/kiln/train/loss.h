// kiln/train/loss.h - losses and initializers for training with kiln::Tensor.
#pragma once

#include <cstdint>

#include "kiln/frontend/tensor.h"

namespace kiln::train {

enum class Reduction { Mean, Sum, None };

/// Cross-entropy of `logits` [.., C] (classes on the last axis, as a language model's) against
/// class indices `targets` [..] (i32 or i64): -log_softmax(logits)[target], through the
/// log-softmax's row kernel. Targets equal to `ignore_index` add nothing and are not counted by
/// the mean (PyTorch's F.cross_entropy with the class axis last). A target outside [0, C)
/// other than ignore_index makes the loss NaN (its value is known only when the step runs).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, Reduction reduction = Reduction::Mean,
                     int64_t ignore_index = -100);

/// Mean (or sum) of (input - target)^2, target broadcasting to input (F.mse_loss).
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

/// Initializers, PyTorch's torch.nn.init, drawn by kiln's counter-based generator (the same
/// numbers for the same seed on every device). Fans are PyTorch's: fan_in = shape[1] *
/// receptive field, fan_out = shape[0] * receptive field (a Linear weight is [out, in]).
Tensor uniform(Shape shape, double low, double high, uint64_t seed, DType dtype = DType::F32, Device device = {});
Tensor normal(Shape shape, double mean, double std, uint64_t seed, DType dtype = DType::F32, Device device = {});
/// U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform(Shape shape, uint64_t seed, double gain = 1, DType dtype = DType::F32, Device device = {});
/// U(-b, b), b = sqrt(6 / ((1 + a^2) fan_in)); a = sqrt(5) is nn.Linear's and nn.Conv's default.
Tensor kaiming_uniform(Shape shape, uint64_t seed, double a = 2.23606797749979, DType dtype = DType::F32,
                       Device device = {});
/// N(0, std^2), std = sqrt(2 / fan_in) (ReLU's gain, fan_in mode).
Tensor kaiming_normal(Shape shape, uint64_t seed, DType dtype = DType::F32, Device device = {});

}  // namespace kiln::train
