// ir/conv.cpp - see kiln/ir/conv.h.
#include "kiln/ir/conv.h"

#include "kiln/ir/dim.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/ir/op.h"

namespace kiln {
namespace {

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

const AttrValue& conv_attr(const Attrs& attrs, std::string_view name) {
  return attrs[static_cast<size_t>(attr_index(OpKind::Conv, name))];
}

}  // namespace

int64_t ConvGeometry::positions() const { return product(out); }
int64_t ConvGeometry::window() const { return product(kernel); }
int64_t ConvGeometry::plane() const { return product(in); }

Shape ConvGeometry::out_shape() const {
  Shape s{batch, out_channels};
  for (int64_t o : out) s.push_back(o);
  return s;
}

int64_t ConvGeometry::input_offset(int64_t e, int64_t p) const {
  int64_t offset = 0, inner = 1;
  for (int d = dims - 1; d >= 0; --d) {
    const auto dd = static_cast<size_t>(d);
    const int64_t i = p % out[dd] * strides[dd] + e % kernel[dd] * dilations[dd] - low[dd];
    if (i < 0 || i >= in[dd]) return -1;
    offset += i * inner;
    inner *= in[dd];
    e /= kernel[dd];
    p /= out[dd];
  }
  return offset;
}

std::string ConvGeometry::str() const {
  return fmt::format("im2col of [{}] windows [{}] to [{}], stride [{}], dilation [{}], low [{}]", fmt::join(in, ", "),
                     fmt::join(kernel, ", "), fmt::join(out, ", "), fmt::join(strides, ", "), fmt::join(dilations, ", "),
                     fmt::join(low, ", "));
}

Expected<ConvGeometry> conv_geometry(const Shape& x, const Shape& w, const Attrs& attrs) {
  auto fail = [&](std::string why) -> Expected<ConvGeometry> {
    return make_error(fmt::format("'conv' of x {} by w {}: {}", x.str(), w.str(), why));
  };
  if (x.rank() < 3 || x.rank() > 5 || w.rank() != x.rank())
    return fail("x must be [N, C, d1..dn] and w [M, C/groups, k1..kn] with n in 1..3");
  for (int d = 0; d < x.rank(); ++d)
    if ((d > 0 && is_symbolic_dim(x[d])) || is_symbolic_dim(w[d]))
      return fail("only the batch dim N may be symbolic (bind the others first)");
  ConvGeometry g;
  g.dims = x.rank() - 2;
  g.batch = x[0];
  g.channels = x[1];
  g.out_channels = w[0];
  const AttrValue& groups = conv_attr(attrs, "groups");
  g.groups = groups.present ? groups.i : 1;
  if (g.groups < 1 || g.channels % g.groups != 0 || g.out_channels % g.groups != 0 || w[1] * g.groups != g.channels)
    return fail(fmt::format("{} channels and {} filters of {} channels do not make {} groups", g.channels,
                            g.out_channels, w[1], g.groups));
  const auto dims = static_cast<size_t>(g.dims);
  g.strides = conv_attr(attrs, "strides").ints;
  g.low = conv_attr(attrs, "low").ints;
  const std::vector<int64_t>& high = conv_attr(attrs, "high").ints;
  const AttrValue& dil = conv_attr(attrs, "dilations");
  g.dilations = dil.present ? dil.ints : std::vector<int64_t>(dims, 1);
  if (g.strides.size() != dims || g.dilations.size() != dims || g.low.size() != dims || high.size() != dims)
    return fail(fmt::format("strides, dilations, low and high need one entry per spatial dim ({})", dims));
  for (size_t d = 0; d < dims; ++d) {
    const int64_t size = x[static_cast<int>(d + 2)], k = w[static_cast<int>(d + 2)];
    const int64_t s = g.strides[d], dl = g.dilations[d];
    if (s < 1 || dl < 1 || k < 1) return fail("strides, dilations and the window must be at least 1");
    if (g.low[d] < 0 || high[d] < 0) return fail(fmt::format("padding low {} and high {} must not be negative",
                                                            fmt::join(g.low, ", "), fmt::join(high, ", ")));
    // The window's span, (k - 1) * dilation + 1, without overflow.
    const int64_t padded = size + g.low[d] + high[d];
    if (k - 1 > (padded - 1) / dl || padded < 1)
      return fail(fmt::format("a window of {} elements, {} apart, does not fit the {} of spatial dim {} padded", k, dl,
                              padded, d));
    g.in.push_back(size);
    g.kernel.push_back(k);
    g.out.push_back((padded - (k - 1) * dl - 1) / s + 1);
  }
  return g;
}

}  // namespace kiln
