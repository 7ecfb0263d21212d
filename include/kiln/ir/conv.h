// kiln/ir/conv.h - the geometry of a `conv` node: sizes, windows and groups, read once from
// its operand shapes and attributes for the type rule, the interpreter, lowering and the
// frontend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/ir/attrs.h"
#include "kiln/ir/shape.h"
#include "kiln/support/error.h"

namespace kiln {

struct ConvGeometry {
  int dims = 0;  // spatial dims, 1..3
  int64_t batch = 0, channels = 0, out_channels = 0, groups = 1;
  std::vector<int64_t> in, kernel, out, strides, dilations, low;  // per spatial dim

  int64_t channels_per_group() const { return channels / groups; }
  int64_t out_channels_per_group() const { return out_channels / groups; }
  /// Output positions per channel (the product of `out`), and window elements per channel.
  int64_t positions() const;
  int64_t window() const;
  /// Elements of one input channel (the product of `in`).
  int64_t plane() const;
  /// The result's shape, [N, M, o1..on].
  Shape out_shape() const;
  /// Where window element `e` (row-major over `kernel`) of output position `p` (row-major
  /// over `out`) lies in its input channel's plane, or -1 where it falls in the padding.
  int64_t input_offset(int64_t e, int64_t p) const;
  /// "im2col of [56, 56] windows [3, 3] to [56, 56], stride [1, 1], dilation [1, 1], low [1, 1]"
  std::string str() const;
};

/// The geometry of conv(x, w) with `attrs` (the conv op's schema), or an error naming what
/// does not fit: ranks, channels and groups, window and padding sizes.
Expected<ConvGeometry> conv_geometry(const Shape& x, const Shape& w, const Attrs& attrs);

}  // namespace kiln
