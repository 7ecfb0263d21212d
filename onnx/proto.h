// onnx/proto.h - ONNX protobuf files read into kiln types (internal to the onnx module).
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

#include "kiln/ir/dtype.h"
#include "kiln/ir/host_tensor.h"
#include "kiln/onnx/onnx.h"

namespace kiln::onnx::detail {

/// The name ONNX gives element type `elem_type` ("FLOAT", "UINT8").
std::string elem_type_name(int elem_type);
/// kiln's dtype for an ONNX element type; throws Unsupported naming `what` otherwise.
DType dtype_from_onnx(int elem_type, const std::string& what);

/// The tensor's values; external data is read relative to `base_dir`. Throws kiln::Error
/// (Unsupported for element types kiln lacks).
HostTensor tensor_from_proto(const ::onnx::TensorProto& t, const std::string& base_dir);

/// The parsed model file; throws kiln::Error naming the file when it is not one.
::onnx::ModelProto read_model_file(const std::string& path);

}  // namespace kiln::onnx::detail
