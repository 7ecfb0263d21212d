// onnx/proto.cpp - ONNX files and TensorProtos read into kiln types.
#include "proto.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>

namespace kiln::onnx::detail {

// A file mapped read-only: its bytes without a copy (the page cache's own pages).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(fmt::format("{}: cannot open the file", path));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw Error(fmt::format("{}: cannot open the file (not a regular file)", path));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (data_ == MAP_FAILED) {
        data_ = nullptr;
        ::close(fd);
        throw Error(fmt::format("{}: cannot map the file", path));
      }
    }
    ::close(fd);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data_) ::munmap(data_, size_);
  }
  const char* data() const { return static_cast<const char*>(data_); }
  size_t size() const { return size_; }
  /// Bytes [offset, offset + length) (to the end for length < 0); kiln::Error past the end.
  std::string_view range(int64_t offset, int64_t length) const {
    const auto size = static_cast<int64_t>(size_);
    if (offset < 0 || offset > size || (length >= 0 && (length > size || offset > size - length)))
      throw Error(fmt::format("{}: bytes [{}, {}) are past its end ({} bytes)", path_, offset,
                              length < 0 ? size : offset + length, size));
    if (length < 0) length = size - offset;
    return {data() + offset, static_cast<size_t>(length)};
  }

 private:
  std::string path_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

ExternalFiles::ExternalFiles(std::optional<std::string> base_dir) : base_dir_(std::move(base_dir)) {}
ExternalFiles::~ExternalFiles() = default;

std::string_view ExternalFiles::bytes(const std::string& location, int64_t offset, int64_t length) {
  namespace fs = std::filesystem;
  if (!base_dir_)
    throw Error(fmt::format("its external data file '{}' cannot be read: a model read from memory has no folder",
                            location));
  const fs::path p = fs::path(location);
  if (p.is_absolute() || location.find("..") != std::string::npos)
    throw Error(fmt::format("its external data file '{}' is outside the model's folder", location));
  std::unique_ptr<MappedFile>& file = mapped_[location];
  if (!file) {
    // The name stays inside the folder; what it resolves to must too (a symlink in the
    // model's folder pointing elsewhere is refused like '../' is).
    const fs::path folder = base_dir_->empty() ? fs::path(".") : fs::path(*base_dir_);
    std::error_code ec;
    const fs::path real = fs::canonical(folder / p, ec);
    if (ec) throw Error(fmt::format("{}: cannot open the file", (folder / p).string()));
    const fs::path real_folder = fs::canonical(folder, ec);
    const auto [end, at] = std::mismatch(real_folder.begin(), real_folder.end(), real.begin(), real.end());
    if (ec || end != real_folder.end())
      throw Error(fmt::format("its external data file '{}' resolves to {}, outside the model's folder", location,
                              real.string()));
    file = std::make_unique<MappedFile>(real.string());
  }
  return file->range(offset, length);
}

namespace {

// A tensor of `type` from the repeated field `field`, each value put by `set(out, i, value)`.
// The field's size is checked before anything is allocated (tensor_from_proto).
template <class Field, class Set>
HostTensor from_field(const TensorType& type, const Field& field, Set set) {
  const int64_t n = type.shape.numel();
  if (field.size() != n) throw Error(fmt::format("holds {} values for {} elements", field.size(), n));
  HostTensor out(type);
  for (int64_t i = 0; i < n; ++i) set(out, i, field.Get(static_cast<int>(i)));
  return out;
}

}  // namespace

std::string elem_type_name(int elem_type) {
  if (!::onnx::TensorProto_DataType_IsValid(elem_type)) return fmt::format("element type {}", elem_type);
  return ::onnx::TensorProto_DataType_Name(static_cast<::onnx::TensorProto_DataType>(elem_type));
}

DType dtype_from_onnx(int elem_type, const std::string& what) {
  using P = ::onnx::TensorProto;
  switch (elem_type) {
    case P::FLOAT: return DType::F32;
    case P::DOUBLE: return DType::F64;
    case P::INT32: return DType::I32;
    case P::INT64: return DType::I64;
    case P::BOOL: return DType::Bool;
    case P::FLOAT16: return DType::F16;
    case P::BFLOAT16: return DType::BF16;
    case P::INT8: return DType::I8;
    case P::INT16: return DType::I16;
    case P::UINT8: return DType::U8;
    case P::UINT16: return DType::U16;
    case P::UINT32: return DType::U32;
    case P::UINT64: return DType::U64;
    default: break;
  }
  throw Unsupported(fmt::format("{} has element type {}, which kiln does not support (it has the float, double, "
                                "float16, bfloat16, signed and unsigned integer and bool tensors)",
                                what, elem_type_name(elem_type)));
}

HostTensor tensor_from_proto(const ::onnx::TensorProto& t, ExternalFiles& files) {
  using P = ::onnx::TensorProto;
  const std::string what = t.name().empty() ? std::string("a tensor") : fmt::format("tensor '{}'", t.name());
  const DType dtype = dtype_from_onnx(t.data_type(), what);
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  for (int64_t d : dims)
    if (d < 0) throw Error(fmt::format("{} has a negative dimension", what));
  const TensorType type{dtype, Shape(dims)};
  if (!checked_bytes(type)) throw Error(fmt::format("{} of {} is too large", what, type.str()));
  // The tensor is allocated only once its data is known to fill it: dims that disagree with
  // the data are an error, not an allocation of whatever size they say (a protobuf of
  // another message type parses as a TensorProto with garbage dims; on a machine that
  // overcommits memory, the 1.5 TB tensor it named was allocated and filled, and the
  // kernel killed the process).
  try {
    // Raw bytes are copied once, from the parsed message or the mapped external file into
    // the tensor (whose alignment kernels rely on).
    std::string_view raw;
    bool has_raw = t.has_raw_data();
    if (t.data_location() == P::EXTERNAL) {
      std::string location;
      int64_t offset = 0, length = -1;
      for (const auto& kv : t.external_data()) {
        if (kv.key() == "location") location = kv.value();
        else if (kv.key() == "offset") offset = std::stoll(kv.value());
        else if (kv.key() == "length") length = std::stoll(kv.value());
      }
      if (location.empty()) throw Error("its external data names no location");
      raw = files.bytes(location, offset, length);
      has_raw = true;
    } else if (has_raw) {
      raw = t.raw_data();
    }
    if (has_raw) {  // little-endian elements, as HostTensor holds them
      if (static_cast<int64_t>(raw.size()) != *checked_bytes(type))
        throw Error(fmt::format("raw_data holds {} bytes for {} elements of {} bytes", raw.size(), type.shape.numel(),
                                dtype_size(dtype)));
      HostTensor out = HostTensor::uninitialized(type);
      if (!raw.empty()) std::memcpy(out.data(), raw.data(), raw.size());
      if (dtype == DType::Bool)
        for (int64_t i = 0; i < out.numel(); ++i) out.set_int(i, out.get_int(i) != 0);
      return out;
    }
    switch (dtype) {
      case DType::F32:
        return from_field(type, t.float_data(), [](HostTensor& o, int64_t i, float v) { o.set_double(i, v); });
      case DType::F64:
        return from_field(type, t.double_data(), [](HostTensor& o, int64_t i, double v) { o.set_double(i, v); });
      case DType::I64:
        return from_field(type, t.int64_data(), [](HostTensor& o, int64_t i, int64_t v) { o.set_int(i, v); });
      case DType::U32:
      case DType::U64:
        return from_field(type, t.uint64_data(),
                          [](HostTensor& o, int64_t i, uint64_t v) { o.set_int(i, static_cast<int64_t>(v)); });
      case DType::F16:
      case DType::BF16:  // their bits, in int32_data
        return from_field(type, t.int32_data(), [](HostTensor& o, int64_t i, int32_t v) {
          const auto bits = static_cast<uint16_t>(v);
          std::memcpy(o.data() + 2 * i, &bits, 2);
        });
      default:  // bool and the narrow integers are stored in int32_data
        return from_field(type, t.int32_data(), [&](HostTensor& o, int64_t i, int32_t v) {
          o.set_int(i, dtype == DType::Bool ? v != 0 : v);
        });
    }
  } catch (const Unsupported&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format("{} ({}): {}", what, type.str(), e.what()));
  }
}

::onnx::ModelProto read_model_file(const std::string& path) {
  const MappedFile file(path);
  if (file.size() > static_cast<size_t>(INT_MAX))
    throw Error(fmt::format("{}: {} bytes is past protobuf's 2 GiB limit (large weights belong in external data)",
                            path, file.size()));
  ::onnx::ModelProto model;
  if (!model.ParseFromArray(file.data(), static_cast<int>(file.size())))
    throw Error(fmt::format("{}: not an ONNX model (the protobuf does not parse)", path));
  if (!model.has_graph()) throw Error(fmt::format("{}: the model has no graph", path));
  return model;
}

}  // namespace kiln::onnx::detail
