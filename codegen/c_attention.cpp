// codegen/c_attention.cpp - an attention step as one C-family kernel: a work-item per query
// row, an online softmax over the keys, the row's output accumulated in registers.
//
// Work-item r (of batch entry r / rows) holds its q row, then walks every key: the score (a
// dot product over the depth, scaled, plus the bias), the running maximum m and sum l, and
// the output accumulators, rescaled by exp(m_old - m_new) whenever the maximum grows, with
// the key's v row added at weight exp(score - m). Where the language computes on vectors
// (OpenCL C), q's, k's and v's rows are read and held as vectors of the schedule's
// vector_width. The scores are never in memory. Every
// work-item of a group runs the same loops (a work-item past the last row recomputes the
// last row and does not store): PoCL's work-group compiler miscompiles loops whose trip
// count differs between the work-items of a group (see c_gemm.cpp).
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "c_dialect.h"
#include "kiln/codegen/c_source.h"
#include "kiln/support/error.h"

namespace kiln::kir {
namespace {

// Depth and width a work-item holds in private arrays: past it they would spill.
constexpr int64_t kMostPrivate = 256;

std::string attention_program(const LaunchPlan::Attention& a, std::string_view name, const CDialect& d) {
  const bool bias = a.bias.buffer >= 0;
  Kernel sig;
  sig.name = std::string(name);
  const TensorType t{DType::F32, Shape{}};
  sig.buffers = {{"q", t, false}, {"k", t, false}, {"v", t, false}};
  if (bias) sig.buffers.push_back({"bias", t, false});
  sig.buffers.push_back({"out", t, true});
  const int out_buffer = bias ? 4 : 3;
  Schedule geometry;
  geometry.family = DeviceFamily::WorkItems;
  geometry.work_items.local_size = a.schedule.local_size;

  const std::string i64 = d.type(DType::I64), f32 = d.type(DType::F32);
  const std::string exp = d.math("exp", DType::F32);
  std::set<std::string> helpers;
  if (exp.starts_with("kiln_")) helpers.insert(exp);  // a function the dialect supplies
  auto lit = [&](int64_t v) { return d.int_literal(v, DType::I64); };
  auto flit = [&](double v) { return d.float_literal(v, DType::F32); };
  std::string out;
  auto line = [&](int indent, std::string_view text) {
    out.append(static_cast<size_t>(indent) * 2, ' ');
    out += text;
    out += '\n';
  };
  const int64_t rows = a.batch.numel() * a.rows;
  line(1, fmt::format("{}{} gid = {};", d.let(), i64, d.global_id(DType::I64)));
  line(1, fmt::format("{}{} row = gid < {} ? gid : {};", d.let(), i64, lit(rows), lit(std::max<int64_t>(rows - 1, 0))));
  line(1, fmt::format("{}{} i = row % {};", d.let(), i64, lit(a.rows)));
  line(1, fmt::format("{}{} bt = row / {};", d.let(), i64, lit(a.rows)));
  // Each operand's base for this batch entry.
  const LaunchPlan::Attention::Operand* ops[] = {&a.q, &a.k, &a.v, &a.bias};
  const char* names[] = {"q", "k", "v", "bias"};
  std::string base[4];
  for (size_t o = 0; o < 4; ++o) base[o] = lit(ops[o]->offset);
  int64_t stride = 1;
  for (int j = a.batch.rank(); j-- > 0;) {
    std::string x = "bt";
    if (stride > 1) x = fmt::format("(bt / {})", lit(stride));
    if (j > 0) x = fmt::format("({} % {})", x, lit(a.batch[j]));
    line(1, fmt::format("{}{} batch{} = {};", d.let(), i64, j, x));
    stride *= a.batch[j];
    for (size_t o = 0; o < 4; ++o)
      if (ops[o]->buffer >= 0 && ops[o]->batch_stride[static_cast<size_t>(j)] != 0)
        base[o] += fmt::format(" + batch{} * {}", j, lit(ops[o]->batch_stride[static_cast<size_t>(j)]));
  }
  for (size_t o = 0; o < (bias ? 4u : 3u); ++o) line(1, fmt::format("{}{} {}_base = {};", d.let(), i64, names[o], base[o]));
  auto at = [&](int buffer, const LaunchPlan::Attention::Operand& x, std::string_view b, std::string_view r,
                std::string_view c) {
    return d.element(buffer, fmt::format("{}_base + {} * {} + {} * {}", b, r, lit(x.row_stride), c, lit(x.col_stride)));
  };
  // Vectors of `lanes` along q's, k's and v's rows where the schedule asks for them and the
  // rows are contiguous: the dot product and the accumulators are then vector arithmetic.
  const int lanes = a.schedule.vector_width > 1 && d.vector_values() && a.q.col_stride == 1 && a.k.col_stride == 1 &&
                            a.v.col_stride == 1 && a.depth % a.schedule.vector_width == 0 &&
                            a.width % a.schedule.vector_width == 0
                        ? a.schedule.vector_width
                        : 1;
  const std::string vty = lanes > 1 ? d.vector_type(DType::F32, lanes) : f32;
  const int64_t depth = a.depth / lanes, width = a.width / lanes;
  // Element `c` (in vectors) of an operand's row `r`.
  auto row_at = [&](int buffer, const LaunchPlan::Attention::Operand& x, std::string_view b, std::string_view r,
                    std::string_view c) {
    if (lanes == 1) return at(buffer, x, b, r, c);
    return d.vector_load(fmt::format("b{}", buffer),
                         fmt::format("{}_base + {} * {} + {} * {}", b, r, lit(x.row_stride), c, lit(lanes)), lanes);
  };
  const std::string zero = lanes > 1 ? d.vector_splat(flit(0), DType::F32, lanes) : flit(0);
  line(1, fmt::format("{} qs[{}];", vty, depth));
  line(1, fmt::format("{} acc[{}];", vty, width));
  line(1, fmt::format("for ({} e = 0; e < {}; ++e) {} = {};", i64, lit(depth), d.subscript("qs", "e"),
                      row_at(0, a.q, "q", "i", "e")));
  line(1, fmt::format("for ({} c = 0; c < {}; ++c) {} = {};", i64, lit(width), d.subscript("acc", "c"), zero));
  const double inf = std::numeric_limits<double>::infinity();
  line(1, fmt::format("{} m = {};", f32, flit(-inf)));
  line(1, fmt::format("{} l = {};", f32, flit(0)));
  line(1, fmt::format("{} nan_score = false;", d.type(DType::Bool)));
  line(1, fmt::format("for ({} j = 0; j < {}; ++j) {{", i64, lit(a.keys)));
  line(2, fmt::format("{} dots = {};", vty, zero));
  line(2, fmt::format("for ({} e = 0; e < {}; ++e) dots += {} * {};", i64, lit(depth), d.subscript("qs", "e"),
                      row_at(1, a.k, "k", "j", "e")));
  std::string dot = "dots";
  if (lanes > 1) {
    dot = d.vector_lane("dots", 0);
    for (int l = 1; l < lanes; ++l) dot += " + " + d.vector_lane("dots", l);
  }
  std::string x = fmt::format("({}) * {}", dot, flit(static_cast<float>(a.scale)));
  if (bias) x += " + " + at(3, a.bias, "bias", "i", "j");
  line(2, fmt::format("{}{} x = {};", d.let(), f32, x));
  line(2, fmt::format("nan_score = nan_score || {};", d.is_nan("x")));
  // A NaN score leaves the maximum alone (and makes the row undefined); while every score
  // so far is -inf, nothing is added.
  line(2, fmt::format("{}{} most = x > m ? x : m;", d.let(), f32));
  line(2, fmt::format("{}{} alpha = most == {} ? {} : {}(m - most);", d.let(), f32, flit(-inf), flit(1), exp));
  line(2, fmt::format("{}{} p = most == {} ? {} : {}(x - most);", d.let(), f32, flit(-inf), flit(0), exp));
  line(2, "l = l * alpha + p;");
  line(2, fmt::format("for ({} c = 0; c < {}; ++c) {} = {} * alpha + p * {};", i64, lit(width),
                      d.subscript("acc", "c"), d.subscript("acc", "c"), row_at(2, a.v, "v", "j", "c")));
  line(2, "m = most;");
  line(1, "}");
  // Undefined: no finite maximum, or a NaN score (whose softmax is NaN throughout).
  line(1, fmt::format("{}{} undefined = nan_score || m == {} || m == {};", d.let(), d.type(DType::Bool), flit(-inf),
                      flit(inf)));
  const std::string fill = flit(a.masked_zero ? 0.0 : std::numeric_limits<double>::quiet_NaN());
  line(1, fmt::format("if (gid < {}) {{", lit(rows)));
  line(2, fmt::format("for ({} c = 0; c < {}; ++c) {{", i64, lit(width)));
  line(3, fmt::format("{}{} y = {} / l;", d.let(), vty, d.subscript("acc", "c")));
  for (int l = 0; l < lanes; ++l)
    line(3, fmt::format("{} = undefined ? {} : {};",
                        d.element(out_buffer, fmt::format("row * {} + c * {} + {}", lit(a.width), lit(lanes), lit(l))), fill,
                        lanes > 1 ? d.vector_lane("y", l) : std::string("y")));
  line(2, "}");
  line(1, "}");

  const std::string entry = entry_with_locals(d, d.entry(sig, geometry), "");
  Kernel named;
  named.name = std::string(name);
  const Kernel* kernels[] = {&named};
  const std::string helper_text = emit_c_helpers(helpers, d);
  const bool doubles = helper_text.find(d.type(DType::F64)) != std::string::npos;
  return d.prologue(kernels, doubles, /*subgroups=*/false) + helper_text + entry + out + "}\n";
}

}  // namespace

int64_t c_attention_loop_iterations(const LaunchPlan::Attention& a) {
  // attention_program's loops: q's row, the accumulators, per key the dot product and the
  // accumulators' update, and the store.
  return a.depth + a.width + a.keys * (1 + a.depth + a.width) + a.width;
}

bool attention_fits(const LaunchPlan::Attention& a, const Capabilities& caps) {
  if (caps.family == DeviceFamily::Cpu) return true;  // the cpu's blocked kernel has no such limits
  if (a.depth > kMostPrivate || a.width > kMostPrivate) return false;
  return caps.max_loop_iterations <= 0 || c_attention_loop_iterations(a) <= caps.max_loop_iterations;
}

int64_t attention_work_groups(const LaunchPlan::Attention& a) {
  const int64_t rows = a.batch.numel() * a.rows, ls = std::max<int64_t>(1, a.schedule.local_size);
  return (rows + ls - 1) / ls;
}

std::string attention_canonical(const LaunchPlan::Attention& a, std::string_view fingerprint) {
  std::string operands;
  for (const LaunchPlan::Attention::Operand* x : {&a.q, &a.k, &a.v, &a.bias})
    operands += fmt::format("{} {} {} {} [{}];", x->buffer >= 0, x->offset, x->row_stride, x->col_stride,
                            fmt::join(x->batch_stride, ","));
  return fmt::format("attention|{}x{}x{}x{}|batch {}|scale {}|masked_zero {}|{}|{}|{}", a.rows, a.keys, a.depth,
                     a.width, a.batch.str(), a.scale, a.masked_zero, operands, a.schedule.str(), fingerprint);
}

std::string emit_c_attention(const LaunchPlan::Attention& a, std::string_view name, const Capabilities& caps,
                             const CDialect& dialect) {
  KILN_ASSERT(a.schedule.local_size > 0, "an attention kernel needs the GPU form of its schedule");
  if (!attention_fits(a, caps))
    throw Error(fmt::format("attention @{} ({} rows, {} keys, depth {}, width {}) is past this device's loop budget "
                            "or private memory",
                            a.name, a.rows, a.keys, a.depth, a.width));
  return attention_program(a, name, dialect);
}

}  // namespace kiln::kir
