// kiln/ir/host_tensor.h - a dense, row-major tensor in host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kiln/ir/shape.h"
#include "kiln/support/allocator.h"
#include "kiln/support/error.h"

namespace kiln {

/// Owns `numel * dtype_size` bytes in C order. bool is one byte holding 0 or 1, as NumPy.
/// The bytes come from the caching host allocator (allocator.h): 64-byte aligned, on huge
/// pages from 1 MiB up. Copies are deep.
class HostTensor {
 public:
  HostTensor() = default;
  /// Zero-filled.
  explicit HostTensor(TensorType type);
  /// Contents undefined (a recycled block may hold an earlier tensor's bytes): for
  /// producers that write every element, which then skip the zero fill.
  static HostTensor uninitialized(TensorType type);

  HostTensor(const HostTensor& other);
  HostTensor& operator=(const HostTensor& other);
  HostTensor(HostTensor&&) noexcept = default;
  HostTensor& operator=(HostTensor&&) noexcept = default;
  ~HostTensor() = default;

  const TensorType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }
  int64_t numel() const { return type_.shape.numel(); }
  size_t nbytes() const { return bytes_.size(); }
  std::byte* data() { return bytes_.data(); }
  const std::byte* data() const { return bytes_.data(); }

  /// A tensor of `type` over `bytes` (exactly type.bytes() of them), taken over without a
  /// copy: how host-memory devices hand their buffers out.
  static HostTensor adopt(TensorType type, HostBuffer bytes);
  /// Gives up the storage (the tensor is left empty): how host-memory devices take a
  /// tensor in without a copy.
  HostBuffer release() && { return std::move(bytes_); }

  /// Element `i` (flat, row-major) converted to double or int64.
  double get_double(int64_t i) const;
  int64_t get_int(int64_t i) const;
  /// Stores `v` in element `i`, converted as the `cast` op converts (f32 rounds, i32 wraps).
  void set_double(int64_t i, double v);
  void set_int(int64_t i, int64_t v);

  /// Copies a typed vector in; T must match the dtype (float=f32, double=f64, int8_t=i8 ...
  /// uint64_t=u64, bool).
  template <class T>
  static HostTensor from_vector(const std::vector<T>& values, Shape shape);
  template <class T>
  std::vector<T> to_vector() const;

 private:
  struct Uninitialized {};
  HostTensor(TensorType type, Uninitialized);
  template <class T>
  static DType dtype_of();
  TensorType type_;
  HostBuffer bytes_;
};

template <class T>
DType HostTensor::dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::F32;
  else if constexpr (std::is_same_v<T, double>) return DType::F64;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::I32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::I64;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::I8;
  else if constexpr (std::is_same_v<T, int16_t>) return DType::I16;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::U8;
  else if constexpr (std::is_same_v<T, uint16_t>) return DType::U16;
  else if constexpr (std::is_same_v<T, uint32_t>) return DType::U32;
  else if constexpr (std::is_same_v<T, uint64_t>) return DType::U64;
  else {
    static_assert(std::is_same_v<T, bool>, "HostTensor holds float, double, the fixed-width integers or bool "
                                           "(f16 and bf16 through set_double and get_double)");
    return DType::Bool;
  }
}

template <class T>
HostTensor HostTensor::from_vector(const std::vector<T>& values, Shape shape) {
  if (static_cast<int64_t>(values.size()) != shape.numel())
    throw Error("from_vector: " + std::to_string(values.size()) + " values for shape " + shape.str());
  HostTensor t = uninitialized(TensorType{dtype_of<T>(), shape});  // every element written below
  for (size_t i = 0; i < values.size(); ++i) {
    const T v = values[i];
    std::memcpy(t.data() + i * sizeof(T), &v, sizeof(T));
  }
  return t;
}

template <class T>
std::vector<T> HostTensor::to_vector() const {
  if (dtype_of<T>() != dtype())
    throw Error("to_vector: tensor holds " + type_.str() + ", not the requested element type");
  std::vector<T> out(static_cast<size_t>(numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    T v;  // through a temporary: std::vector<bool> has no addressable elements
    std::memcpy(&v, data() + i * sizeof(T), sizeof(T));
    out[i] = v;
  }
  return out;
}

}  // namespace kiln
