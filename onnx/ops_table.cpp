// onnx/ops_table.cpp - every converter row, gathered from the ops_*.cpp files.
#include <vector>

#include "ops.h"

namespace kiln::onnx::detail {

std::span<const ConverterRow> converter_rows() {
  static const std::vector<ConverterRow> rows = [] {
    std::vector<ConverterRow> all;
    for (auto part : {elementwise_rows, reduce_rows, shape_rows, nn_rows, loss_rows, pool_rows, resize_rows, index_rows, recurrent_rows, grid_sample_rows, signal_rows, quant_rows}) all.insert(all.end(), part.begin(), part.end());
    return all;
  }();
  return rows;
}

}  // namespace kiln::onnx::detail
