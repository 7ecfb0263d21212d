// ir/host_tensor.cpp - storage, copies and element access for host tensors.
#include "kiln/ir/host_tensor.h"

#include <new>
#include <string>

#include "kiln/ir/scalar_semantics.h"

namespace kiln {

namespace {
HostBuffer allocate_for(const TensorType& t) {
  const int64_t bytes = t.bytes();  // a kiln::Error when the type's size overflows
  try {
    return HostBuffer(static_cast<size_t>(bytes));
  } catch (const std::bad_alloc&) {
    throw Error("cannot allocate " + t.str() + " (" + std::to_string(bytes) + " bytes) in host memory: out of memory");
  }
}
}  // namespace

HostTensor::HostTensor(TensorType type, Uninitialized) : type_(std::move(type)), bytes_(allocate_for(type_)) {}

HostTensor::HostTensor(TensorType type) : HostTensor(std::move(type), Uninitialized{}) {
  // The allocator recycles blocks without clearing them.
  if (nbytes() > 0) std::memset(data(), 0, nbytes());
}

HostTensor HostTensor::adopt(TensorType type, HostBuffer bytes) {
  KILN_ASSERT(bytes.size() == static_cast<size_t>(type.bytes()), "an adopted buffer is its tensor's size");
  HostTensor t;
  t.type_ = std::move(type);
  t.bytes_ = std::move(bytes);
  return t;
}

HostTensor HostTensor::uninitialized(TensorType type) {
  return HostTensor(std::move(type), Uninitialized{});
}

HostTensor::HostTensor(const HostTensor& other) : type_(other.type_), bytes_(other.nbytes()) {
  if (nbytes() > 0) std::memcpy(data(), other.data(), nbytes());
}

HostTensor& HostTensor::operator=(const HostTensor& other) {
  if (this == &other) return *this;
  if (nbytes() != other.nbytes()) bytes_ = HostBuffer(other.nbytes());  // else reuse ours
  if (nbytes() > 0) std::memcpy(data(), other.data(), nbytes());
  type_ = other.type_;
  return *this;
}

namespace {
template <class T>
T load(const std::byte* p, int64_t i) {
  T v;
  std::memcpy(&v, p + static_cast<size_t>(i) * sizeof(T), sizeof(T));
  return v;
}
template <class T>
void store(std::byte* p, int64_t i, T v) {
  std::memcpy(p + static_cast<size_t>(i) * sizeof(T), &v, sizeof(T));
}
}  // namespace

double HostTensor::get_double(int64_t i) const {
  switch (dtype()) {
    case DType::F16: return scalar::f16_value(load<uint16_t>(data(), i));
    case DType::BF16: return scalar::bf16_value(load<uint16_t>(data(), i));
    case DType::F32: return load<float>(data(), i);
    case DType::F64: return load<double>(data(), i);
    default: return scalar::int_to_float(dtype(), get_int(i));
  }
}

int64_t HostTensor::get_int(int64_t i) const {
  switch (dtype()) {
    case DType::Bool: return load<uint8_t>(data(), i) != 0;
    case DType::I8: return load<int8_t>(data(), i);
    case DType::I16: return load<int16_t>(data(), i);
    case DType::I32: return load<int32_t>(data(), i);
    case DType::I64: return load<int64_t>(data(), i);
    case DType::U8: return load<uint8_t>(data(), i);
    case DType::U16: return load<uint16_t>(data(), i);
    case DType::U32: return load<uint32_t>(data(), i);
    case DType::U64: return static_cast<int64_t>(load<uint64_t>(data(), i));
    default: return scalar::float_to_int(DType::I64, get_double(i));
  }
}

void HostTensor::set_double(int64_t i, double v) {
  switch (dtype()) {
    case DType::F16: store<uint16_t>(data(), i, scalar::f16_bits(v)); return;
    case DType::BF16: store<uint16_t>(data(), i, scalar::bf16_bits(v)); return;
    case DType::F32: store<float>(data(), i, static_cast<float>(v)); return;
    case DType::F64: store<double>(data(), i, v); return;
    default: set_int(i, scalar::float_to_int(dtype(), v)); return;
  }
}

void HostTensor::set_int(int64_t i, int64_t v) {
  const int64_t w = scalar::store_int(dtype(), v);
  switch (dtype()) {
    case DType::Bool:
    case DType::U8: store<uint8_t>(data(), i, static_cast<uint8_t>(w)); return;
    case DType::I8: store<int8_t>(data(), i, static_cast<int8_t>(w)); return;
    case DType::I16: store<int16_t>(data(), i, static_cast<int16_t>(w)); return;
    case DType::U16: store<uint16_t>(data(), i, static_cast<uint16_t>(w)); return;
    case DType::I32: store<int32_t>(data(), i, static_cast<int32_t>(w)); return;
    case DType::U32: store<uint32_t>(data(), i, static_cast<uint32_t>(w)); return;
    case DType::I64:
    case DType::U64: store<int64_t>(data(), i, w); return;
    default: set_double(i, static_cast<double>(v)); return;
  }
}

}  // namespace kiln
