// frontend/tensor.cpp - the Tensor handle, sync points and factories.
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "kiln/frontend/autodiff.h"
#include "kiln/frontend/lazy.h"
#include "capture_state.h"
#include "lazy_value.h"
#include "record.h"

namespace kiln {

using detail::LazyValue;

Tensor::Tensor(const Tensor& other) : value_(other.value_) {
  if (value_) detail::retain(value_);
}
Tensor::Tensor(Tensor&& other) noexcept : value_(other.value_) {
  if (detail::any_capture_recording()) [[unlikely]] detail::note_tensor_change(&other);
  other.value_ = nullptr;
}
Tensor& Tensor::operator=(const Tensor& other) {
  if (detail::any_capture_recording()) [[unlikely]] detail::note_tensor_change(this);
  if (other.value_) detail::retain(other.value_);
  if (value_) detail::release(value_);
  value_ = other.value_;
  return *this;
}
Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    if (detail::any_capture_recording()) [[unlikely]] {
      detail::note_tensor_change(this);
      detail::note_tensor_change(&other);
    }
    if (value_) detail::release(value_);
    value_ = other.value_;
    other.value_ = nullptr;
  }
  return *this;
}
Tensor::~Tensor() {
  if (detail::any_capture_recording()) [[unlikely]] detail::note_tensor_destroyed(this);
  if (value_) detail::release(value_);
}

const Shape& Tensor::shape() const {
  detail::require_defined("shape", *this);
  return value_->type.shape;
}
DType Tensor::dtype() const {
  detail::require_defined("dtype", *this);
  return value_->type.dtype;
}
Device Tensor::device() const {
  detail::require_defined("device", *this);
  return value_->device;
}
int64_t Tensor::size(int64_t dim) const { return shape()[static_cast<int>(detail::normalize_axis("size", dim, *this))]; }

const Tensor& Tensor::eval() const {
  detail::require_defined("eval", *this);
  if (value_->pending()) detail::evaluate({&value_, 1});
  return *this;
}

bool Tensor::is_evaluated() const { return value_ && !value_->pending(); }

HostTensor Tensor::host() const {
  eval();
  return engine_for(value_->device).download(*value_->buffer);
}

std::shared_ptr<const Buffer> Tensor::buffer() const {
  eval();
  return value_->buffer;
}

Tensor Tensor::to(Device device) const {
  detail::require_defined("to", *this);
  if (value_->device == device) return *this;
  if (value_->grad_fn && grad_enabled())
    detail::fail("to", fmt::format("{} requires a gradient, and a copy to {} is not differentiable: detach() it, or "
                                   "make the tensor on {} to begin with",
                                   detail::type_str(*this), device.str(), device.str()));
  eval();
  return Tensor(detail::make_evaluated(copy_to_device(value_->buffer, device), device));
}

namespace {
template <class T>
T single_item(const Tensor& t) {
  detail::require_defined("item", t);
  if (t.numel() != 1)
    detail::fail("item", fmt::format("needs a tensor with one element, got {}", TensorType{t.dtype(), t.shape()}.str()));
  return t.to_vector<T>()[0];
}
}  // namespace

template <> float Tensor::item<float>() const { return single_item<float>(*this); }
template <> double Tensor::item<double>() const { return single_item<double>(*this); }
template <> int32_t Tensor::item<int32_t>() const { return single_item<int32_t>(*this); }
template <> int64_t Tensor::item<int64_t>() const { return single_item<int64_t>(*this); }
template <> bool Tensor::item<bool>() const { return single_item<bool>(*this); }

// ---- factories ---------------------------------------------------------------------------

Tensor from_host(HostTensor data, Device device) {
  return Tensor(detail::make_evaluated(engine_for(device).upload(std::move(data)), device));
}

Tensor from_host(std::shared_ptr<const HostTensor> data, Device device) {
  if (!data) detail::fail("from_host", "no tensor given (a null pointer)");
  return Tensor(detail::make_evaluated(engine_for(device).upload_shared(std::move(data)), device));
}

template <class T>
Tensor from_vector(std::vector<T> data, Shape shape, Device device) {
  if (!checked_numel(shape))
    detail::fail("from_vector", fmt::format("shape {} has a negative dimension or too many elements", shape.str()));
  if (static_cast<int64_t>(data.size()) != shape.numel())
    detail::fail("from_vector", fmt::format("{} values cannot fill shape {} ({} elements)", data.size(), shape.str(),
                                            shape.numel()));
  return from_host(HostTensor::from_vector(data, shape), device);
}
template Tensor from_vector<float>(std::vector<float>, Shape, Device);
template Tensor from_vector<double>(std::vector<double>, Shape, Device);
template Tensor from_vector<int32_t>(std::vector<int32_t>, Shape, Device);
template Tensor from_vector<int64_t>(std::vector<int64_t>, Shape, Device);
template Tensor from_vector<bool>(std::vector<bool>, Shape, Device);
template Tensor from_vector<int8_t>(std::vector<int8_t>, Shape, Device);
template Tensor from_vector<int16_t>(std::vector<int16_t>, Shape, Device);
template Tensor from_vector<uint8_t>(std::vector<uint8_t>, Shape, Device);
template Tensor from_vector<uint16_t>(std::vector<uint16_t>, Shape, Device);
template Tensor from_vector<uint32_t>(std::vector<uint32_t>, Shape, Device);
template Tensor from_vector<uint64_t>(std::vector<uint64_t>, Shape, Device);

namespace {
Tensor source(std::string_view fn, OpKind op, const TensorType& type, Device device, Attrs attrs) {
  if (!checked_bytes(type))
    detail::fail(fn, fmt::format("{} has a negative dimension or more bytes than an int64 counts", type.str()));
  if (auto checked = infer_type(op, {}, attrs, &type); !checked) detail::fail(fn, checked.error().message);
  return Tensor(detail::make_pending(op, type, device, {}, std::move(attrs)));
}

// `full`'s value is the caller's (bound at launch: a scalar node); zeros' and ones' never
// change (constants, which fold).
Tensor splat(std::string_view fn, OpKind op, Shape shape, Number value, DType dtype, Device device) {
  Attrs a = Graph::make_attrs(op);
  AttrValue& v = detail::attr_slot(a, op, "value");
  v.scalar = is_float(dtype) ? value.value().cast_to(dtype) : value.value();  // ints: range-checked
  if (op == OpKind::ScalarParam) detail::attr_slot(a, op, "slot").i = 0;  // numbered when the stream is cut
  return source(fn, op, TensorType{dtype, shape}, device, std::move(a));
}
}  // namespace

Tensor full(Shape shape, Number value, DType dtype, Device device) {
  return splat("full", OpKind::ScalarParam, std::move(shape), value, dtype, device);
}
Tensor constant(const HostTensor& data, Device device) {
  Attrs a = Graph::make_attrs(OpKind::Constant);
  auto values = std::make_shared<std::vector<Scalar>>(static_cast<size_t>(data.numel()));
  for (int64_t i = 0; i < data.numel(); ++i)
    (*values)[static_cast<size_t>(i)] = is_float(data.dtype()) ? Scalar::from_float(data.get_double(i))
                                                               : Scalar::from_int(data.get_int(i));
  detail::attr_slot(a, OpKind::Constant, "data").scalars = std::move(values);
  return source("constant", OpKind::Constant, data.type(), device, std::move(a));
}
Tensor zeros(Shape shape, DType dtype, Device device) { return splat("zeros", OpKind::Constant, std::move(shape), 0, dtype, device); }
Tensor ones(Shape shape, DType dtype, Device device) { return splat("ones", OpKind::Constant, std::move(shape), 1, dtype, device); }

Tensor arange(int64_t n, DType dtype, Device device) {
  if (n < 0) detail::fail("arange", fmt::format("length {} is negative", n));
  Attrs a = Graph::make_attrs(OpKind::Arange);
  auto& start = detail::attr_slot(a, OpKind::Arange, "start");
  auto& step = detail::attr_slot(a, OpKind::Arange, "step");
  start.present = step.present = true;
  start.scalar = (is_float(dtype) ? Scalar::from_float(0) : Scalar::from_int(0));
  step.scalar = (is_float(dtype) ? Scalar::from_float(1) : Scalar::from_int(1));
  return source("arange", OpKind::Arange, TensorType{dtype, {n}}, device, std::move(a));
}

Tensor arange(double start, double stop, double step, DType dtype, Device device) {
  if (step == 0 || !std::isfinite(step) || !std::isfinite(start) || !std::isfinite(stop))
    detail::fail("arange", fmt::format("needs finite start, stop and a non-zero step, got {}, {}, {}", start, stop, step));
  const double count = std::max(0.0, std::ceil((stop - start) / step));
  if (!(count < 9.0e18)) detail::fail("arange", fmt::format("{} elements are more than an int64 counts", count));
  const auto n = static_cast<int64_t>(count);
  Attrs a = Graph::make_attrs(OpKind::Arange);
  auto& s0 = detail::attr_slot(a, OpKind::Arange, "start");
  auto& s1 = detail::attr_slot(a, OpKind::Arange, "step");
  s0.present = s1.present = true;
  auto as_scalar = [&](double v) {
    if (is_float(dtype)) return Scalar::from_float(v).cast_to(dtype);
    if (v != std::floor(v)) detail::fail("arange", fmt::format("{} needs integer start and step, got {}", dtype_name(dtype), v));
    return Scalar::from_int(static_cast<int64_t>(v));
  };
  s0.scalar = as_scalar(start);
  s1.scalar = as_scalar(step);
  return source("arange", OpKind::Arange, TensorType{dtype, {n}}, device, std::move(a));
}

Tensor rand(Shape shape, uint64_t seed, DType dtype, Device device) {
  Attrs a = Graph::make_attrs(OpKind::Rand);
  auto& s = detail::attr_slot(a, OpKind::Rand, "seed");
  s.present = true;
  s.i = static_cast<int64_t>(seed);
  return source("rand", OpKind::Rand, TensorType{dtype, shape}, device, std::move(a));
}

Tensor randn(Shape shape, uint64_t seed, DType dtype, Device device) {
  if (!is_float(dtype)) detail::fail("randn", fmt::format("produces floating point, not {}", dtype_name(dtype)));
  const detail::BakedScalars baked;  // Box-Muller's own constants fold
  // Box-Muller: u1 in (0, 1) never makes log infinite.
  const Tensor u1 = rand(shape, seed, dtype, device);
  const Tensor u2 = rand(shape, seed ^ 0x632be59bd9b4e019ULL, dtype, device);
  return (u1.log() * -2.0).sqrt() * (u2 * (2 * std::numbers::pi)).cos();
}

}  // namespace kiln
