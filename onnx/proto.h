// onnx/proto.h - ONNX protobuf files read into kiln types (internal to the onnx module).
#pragma once

#include <map>
#include <optional>
#include <memory>
#include <string>
#include <string_view>

#include <onnx/onnx_pb.h>

#include "kiln/ir/dtype.h"
#include "kiln/ir/host_tensor.h"
#include "kiln/onnx/onnx.h"

namespace kiln::onnx::detail {

/// The name ONNX gives element type `elem_type` ("FLOAT", "UINT8").
std::string elem_type_name(int elem_type);
/// kiln's dtype for an ONNX element type; throws Unsupported naming `what` otherwise.
DType dtype_from_onnx(int elem_type, const std::string& what);

class MappedFile;

/// The external data files of one model, each mapped once while its tensors are read
/// (a model's hundreds of weights usually share one file).
class ExternalFiles {
 public:
  /// Files in `base_dir`; none (nullopt) for a model read from memory.
  explicit ExternalFiles(std::optional<std::string> base_dir);
  ~ExternalFiles();
  ExternalFiles(const ExternalFiles&) = delete;
  ExternalFiles& operator=(const ExternalFiles&) = delete;
  /// Bytes [offset, offset + length) (to the end for length < 0) of `location`, a path
  /// relative to the model's folder that must stay inside it. Throws kiln::Error.
  std::string_view bytes(const std::string& location, int64_t offset, int64_t length);

 private:
  std::optional<std::string> base_dir_;
  std::map<std::string, std::unique_ptr<MappedFile>> mapped_;
};

/// The tensor's values; its external data is read through `files`. Throws kiln::Error
/// (Unsupported for element types kiln lacks).
HostTensor tensor_from_proto(const ::onnx::TensorProto& t, ExternalFiles& files);

/// The parsed model file; throws kiln::Error naming the file when it is not one.
::onnx::ModelProto read_model_file(const std::string& path);

}  // namespace kiln::onnx::detail
