// onnx/ops_quant.cpp - ONNX's linear quantization: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, MatMulInteger and QLinearMatMul (the convolutions are in
// ops_pool.cpp, beside Conv).
//
// Quantized values are u8 or i8; arithmetic on them runs in i32 (exact: a product of two
// 8-bit values and a sum of fewer than 2^15 of them fit), scales in f32, as ONNX Runtime.
#include <fmt/format.h>

#include "ops.h"

namespace kiln::onnx::detail {
namespace {

std::vector<Tensor> QuantizeLinear(NodeContext& c) {
  const Tensor x = c.input(0);
  const int64_t axis = c.attr_int("axis", 1);
  const Tensor scale = per_axis(c, c.input(1), axis, x.rank(), "y_scale");
  const DType to = c.has_input(2) ? c.dtype(2) : DType::U8;
  require_quantized(c, to, "y_zero_point");
  Tensor zero = c.has_input(2) ? per_axis(c, c.input(2), axis, x.rank(), "y_zero_point") : c.scalar(0, to);
  return {quantize(c, x.to(DType::F32) / scale.to(DType::F32), zero, to)};
}

std::vector<Tensor> DequantizeLinear(NodeContext& c) {
  const Tensor x = c.input(0);
  const int64_t axis = c.attr_int("axis", 1);
  const Tensor scale = per_axis(c, c.input(1), axis, x.rank(), "x_scale");
  Tensor centered = x.to(DType::I32);
  if (c.has_input(2)) centered = centered - per_axis(c, c.input(2), axis, x.rank(), "x_zero_point").to(DType::I32);
  // In f32, as ONNX Runtime computes; from version 19 the result has the scale's type
  // (f16, bf16), before it the scale is f32.
  return {(centered.to(DType::F32) * scale.to(DType::F32)).to(scale.dtype())};
}

// Scale and zero point from the data's range, widened to hold 0, for uint8.
std::vector<Tensor> DynamicQuantizeLinear(NodeContext& c) {
  const Tensor x = c.input(0);
  if (x.dtype() != DType::F32) c.invalid(fmt::format("x must be float, got {}", dtype_name(x.dtype())));
  const Tensor zero = c.scalar(0, DType::F32);
  const Tensor lo = x.min().minimum(zero), hi = x.max().maximum(zero);
  const Tensor scale = (hi - lo) / c.scalar(255, DType::F32);
  const Tensor zero_point = quantize(c, (zero - lo) / scale, c.scalar(0, DType::U8), DType::U8);
  return {quantize(c, x / scale, zero_point, DType::U8), scale, zero_point};
}

// A and B less their zero points (a scalar, or A's per row and B's per column), in i32.
Tensor centered(NodeContext& c, size_t value, size_t zero, int64_t axis_from_end) {
  const Tensor v = c.input(value);
  require_quantized(c, v.dtype(), "an operand");
  Tensor out = v.to(DType::I32);
  if (!c.has_input(zero)) return out;
  const Tensor z = c.input(zero);
  if (z.dtype() != v.dtype()) c.invalid("a zero point must have its operand's type");
  return out - per_axis(c, z, v.rank() - axis_from_end, v.rank(), "a zero point").to(DType::I32);
}

std::vector<Tensor> MatMulInteger(NodeContext& c) {
  return {centered(c, 0, 2, 2).matmul(centered(c, 1, 3, 1))};
}

std::vector<Tensor> QLinearMatMul(NodeContext& c) {
  const Tensor a = c.input(0), b = c.input(3);
  const Tensor acc = centered(c, 0, 2, 2).matmul(centered(c, 3, 5, 1));
  const Tensor scale = per_axis(c, c.input(1), a.rank() - 2, a.rank(), "a_scale") *
                       per_axis(c, c.input(4), b.rank() - 1, b.rank(), "b_scale") / c.input(6);
  const DType to = c.dtype(7);
  require_quantized(c, to, "y_zero_point");
  return {quantize(c, acc.to(DType::F32) * scale, c.input(7), to)};
}

constexpr std::string_view kAxis[] = {"axis"};
// Version 19's saturate applies to float8 results only, which kiln refuses by their type.
constexpr std::string_view kAxisSaturate[] = {"axis", "saturate"};

}  // namespace

Tensor per_axis(NodeContext& c, const Tensor& v, int64_t axis, int64_t rank, std::string_view what) {
  if (v.rank() == 0 || (v.rank() == 1 && v.size(0) == 1)) return v.reshape({});
  if (v.rank() != 1) c.invalid(fmt::format("{} must be a scalar or 1-D, got {}", what, v.shape().str()));
  return along_axis(v, normalize_axis(c, axis, rank, "axis"), rank);
}

void require_quantized(NodeContext& c, DType t, std::string_view what) {
  if (t != DType::U8 && t != DType::I8)
    c.unsupported(fmt::format("{} of type {} is not supported (quantized values are uint8 or int8)", what, dtype_name(t)));
}

Tensor quantize(NodeContext& c, const Tensor& scaled, const Tensor& zero_point, DType to) {
  const Tensor q = scaled.round() + zero_point.to(DType::F32);
  return q.maximum(c.scalar(static_cast<double>(int_min(to)), DType::F32))
      .minimum(c.scalar(static_cast<double>(int_max(to)), DType::F32))
      .to(to);
}

const ConverterRow kQuantRows[] = {
    {"QuantizeLinear", 10, 19, QuantizeLinear, kAxisSaturate},
    {"DequantizeLinear", 10, 19, DequantizeLinear, kAxis},
    {"DynamicQuantizeLinear", 11, 11, DynamicQuantizeLinear, {}},
    {"MatMulInteger", 10, 10, MatMulInteger, {}},
    {"QLinearMatMul", 10, 21, QLinearMatMul, {}},
};
const std::span<const ConverterRow> quant_rows = kQuantRows;

}  // namespace kiln::onnx::detail
