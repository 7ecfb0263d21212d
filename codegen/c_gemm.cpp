// codegen/c_gemm.cpp - a GEMM step as one C-family kernel: work-group tiles staged in local
// memory, a block of accumulators per work-item, and the epilogue computed on each element
// while it is still in a register.
//
// The blocking is the GPU form of GemmSchedule (schedule.h): work-group (batch, tile row,
// tile column) computes a group_m x group_n tile of C. Each step along K, its work-items copy
// a group_m x group_k tile of A (transposed, so a work-item's operands along a row of the
// tile are one local array row) and a group_k x group_n tile of B into local memory, zero
// outside the matrices, wait, and add the product into their mr x nr accumulators. Every loop
// a work-item runs has the same trip count in the whole group (bodies are guarded instead):
// work-group compilers such as PoCL's miscompile loops whose trip count differs between the
// work-items of a group (see reduced_loop_head in c_emitter.cpp).
//
// Arithmetic: float products accumulate with fma in the operand type (as a BLAS does; the
// interpreter's Eigen product differs from it by the order of the sum only); integers
// accumulate in the unsigned type of their width, which wraps exactly as the interpreter.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "c_dialect.h"
#include "kiln/codegen/c_source.h"
#include "kiln/support/error.h"

namespace kiln::kir {
namespace {

class GemmEmitter {
 public:
  GemmEmitter(const LaunchPlan::Gemm& g, const GemmEpilogueSource* epilogue, bool store_product, std::string name,
              const Capabilities& caps, const CDialect& d)
      : g_(g), s_(g.schedule), epilogue_(epilogue), store_product_(store_product), name_(std::move(name)), caps_(caps), d_(d) {
    KILN_ASSERT(s_.group_m > 0 && s_.group_n > 0 && s_.group_k > 0 && s_.group_m % s_.mr == 0 && s_.group_n % s_.nr == 0,
                "a GEMM kernel needs the GPU form of its schedule");
    KILN_ASSERT(s_.vector_width == 1 || (is_float(g.dtype) && s_.nr % s_.vector_width == 0),
                "GEMM vectors are of floats, and a whole number of them per register block");
  }

  std::string program();

 private:
  std::string lit(int64_t v) const { return d_.int_literal(v, DType::I64); }
  std::string scaled(std::string_view x, int64_t stride) const {
    return stride == 1 ? std::string(x) : fmt::format("{} * {}", x, lit(stride));
  }
  std::string signature() const;
  std::string body(std::set<std::string>& helpers);

  const LaunchPlan::Gemm& g_;
  const GemmSchedule& s_;
  const GemmEpilogueSource* epilogue_;
  bool store_product_;
  std::string name_;
  const Capabilities& caps_;
  const CDialect& d_;
};

// The entry point: A, B and C, then the epilogue's buffers and scalars.
std::string GemmEmitter::signature() const {
  Kernel sig;
  sig.name = name_;
  const TensorType t{g_.dtype, Shape{}};
  sig.buffers = {{"a", t, false}, {"b", t, false}, {"c", t, store_product_}};
  if (epilogue_) {
    sig.buffers.insert(sig.buffers.end(), epilogue_->kernel.buffers.begin(), epilogue_->kernel.buffers.end());
    sig.scalars = epilogue_->kernel.scalars;
  }
  Schedule geometry;
  geometry.family = DeviceFamily::WorkItems;
  geometry.work_items.local_size = s_.local_size();
  return d_.entry(sig, geometry);
}

std::string GemmEmitter::body(std::set<std::string>& helpers) {
  const DType t = g_.dtype;
  const bool f = is_float(t);
  const std::string i64 = d_.type(DType::I64), ty = d_.type(t);
  const std::string acc_ty = f ? ty : d_.unsigned_type(t);
  const int64_t gm = s_.group_m, gn = s_.group_n, gk = s_.group_k, ls = s_.local_size();
  const int64_t cols = gn / s_.nr;  // work-items along a tile row
  // A work-item's nr columns are nr / vw vectors of vw adjacent columns; vector j of
  // work-item tx starts at column (tx + j * cols) * vw of the tile.
  const int vw = s_.vector_width, vectors = s_.nr / vw;
  const std::string vty = vw > 1 ? d_.vector_type(t, vw) : ty;
  // (At least one each in the text: an empty product is never launched, but printed.)
  const int64_t tiles_m = std::max<int64_t>(1, (g_.m + gm - 1) / gm), tiles_n = std::max<int64_t>(1, (g_.n + gn - 1) / gn);
  const int nb = g_.batch.rank();
  std::string out;
  auto line = [&](int indent, std::string_view text) {
    out.append(static_cast<size_t>(indent) * 2, ' ');
    out += text;
    out += '\n';
  };
  const std::string zero = f ? d_.float_literal(0, t) : d_.int_literal(0, t);

  line(1, fmt::format("{}{} lid = {};", d_.let(), i64, d_.local_id(DType::I64)));
  line(1, fmt::format("{}{} group = {};", d_.let(), i64, d_.group_id(DType::I64)));
  line(1, fmt::format("{}{} tn = group % {};", d_.let(), i64, lit(tiles_n)));
  line(1, fmt::format("{}{} tm = (group / {}) % {};", d_.let(), i64, lit(tiles_n), lit(tiles_m)));
  line(1, fmt::format("{}{} bt = group / {};", d_.let(), i64, lit(tiles_n * tiles_m)));
  // The batch dims (the epilogue's d0...), and each operand's offset in its buffer.
  std::string a_off = lit(g_.a_offset), b_off = lit(g_.b_offset);
  int64_t stride = 1;
  for (int j = nb; j-- > 0;) {
    std::string x = "bt";
    if (stride > 1) x = fmt::format("(bt / {})", lit(stride));
    if (j > 0) x = fmt::format("({} % {})", x, lit(g_.batch[j]));
    line(1, fmt::format("{}{} batch{} = {};", d_.let(), i64, j, x));
    stride *= g_.batch[j];
    const auto sj = static_cast<size_t>(j);
    if (g_.a_batch_stride[sj] != 0) a_off += fmt::format(" + batch{} * {}", j, lit(g_.a_batch_stride[sj]));
    if (g_.b_batch_stride[sj] != 0) b_off += fmt::format(" + batch{} * {}", j, lit(g_.b_batch_stride[sj]));
  }
  line(1, fmt::format("{}{} a_base = {};", d_.let(), i64, a_off));
  line(1, fmt::format("{}{} b_base = {};", d_.let(), i64, b_off));
  line(1, fmt::format("{}{} c_base = bt * {};", d_.let(), i64, lit(g_.m * g_.n)));
  line(1, fmt::format("{}{} tx = lid % {};", d_.let(), i64, lit(cols)));
  line(1, fmt::format("{}{} ty = lid / {};", d_.let(), i64, lit(cols)));
  for (int i = 0; i < s_.mr; ++i)
    for (int j = 0; j < vectors; ++j)
      line(1, fmt::format("{} acc{}_{} = {};", vw > 1 ? vty : acc_ty, i, j,
                          vw > 1 ? d_.vector_splat(zero, t, vw) : f ? zero : "0"));

  // B as a convolution's windows (Gemm::im2col): from row (channel, window element) and
  // column (output position), the input element `at` of the batch's planes, and the
  // condition that it lies inside the input (else B holds a zero there).
  auto im2col_lines = [&](int indent, const auto& emit) {
    const ConvGeometry& ic = *g_.im2col;
    std::string inside, at = fmt::format("(row / {}) * {}", lit(ic.window()), lit(ic.plane()));
    emit(indent, fmt::format("{}{} we = row % {};", d_.let(), i64, lit(ic.window())));
    int64_t kinner = 1, oinner = 1, iinner = 1;
    for (int d = ic.dims; d-- > 0;) {
      const auto dd = static_cast<size_t>(d);
      auto digit = [&](std::string_view x, int64_t inner, int64_t size) {
        std::string v = inner == 1 ? std::string(x) : fmt::format("({} / {})", x, lit(inner));
        return d == 0 && x == "we" ? v : fmt::format("({} % {})", v, lit(size));
      };
      emit(indent, fmt::format("{}{} x{} = {} * {} + {} * {} - {};", d_.let(), i64, d, digit("col", oinner, ic.out[dd]),
                               lit(ic.strides[dd]), digit("we", kinner, ic.kernel[dd]), lit(ic.dilations[dd]),
                               lit(ic.low[dd])));
      inside += fmt::format(" && x{0} >= 0 && x{0} < {1}", d, lit(ic.in[dd]));
      at += fmt::format(" + x{} * {}", d, lit(iinner));
      kinner *= ic.kernel[dd];
      oinner *= ic.out[dd];
      iinner *= ic.in[dd];
    }
    emit(indent, fmt::format("{}{} at = {};", d_.let(), i64, at));
    return inside;
  };
  // Steps along K: stage the tiles, wait, multiply, wait.
  line(1, fmt::format("for ({0} k0 = 0; k0 < {1}; k0 += {2}) {{", i64, lit(g_.k), lit(gk)));
  auto stage = [&](std::string_view array, int64_t rows, int64_t row_len, std::string_view row_expr, std::string_view col_expr,
                   std::string in_bounds, std::string_view global, std::string_view local_index, bool gathered) {
    line(2, fmt::format("for ({0} e0 = 0; e0 < {1}; e0 += {2}) {{", i64, lit(rows * row_len), lit(ls)));
    line(3, fmt::format("{}{} e = e0 + lid;", d_.let(), i64));
    line(3, fmt::format("if (e < {}) {{", lit(rows * row_len)));
    line(4, fmt::format("{}{} er = e / {}, ec = e % {};", d_.let(), i64, lit(row_len), lit(row_len)));
    line(4, fmt::format("{}{} row = {}, col = {};", d_.let(), i64, row_expr, col_expr));
    if (gathered) in_bounds += im2col_lines(4, line);
    line(4, fmt::format("{} = ({}) ? {} : {};", d_.subscript(array, local_index), in_bounds, global, zero));
    line(3, "}");
    line(2, "}");
  };
  // A: consecutive work-items read consecutive elements of a row of A.
  stage("ta", gm, gk, fmt::format("tm * {} + er", lit(gm)), "k0 + ec", fmt::format("row < {} && col < {}", lit(g_.m), lit(g_.k)),
        d_.element(0, fmt::format("a_base + {} + {}", scaled("row", g_.a_row_stride), scaled("col", g_.a_col_stride))),
        fmt::format("ec * {} + er", lit(gm)), false);
  stage("tb", gk, gn, "k0 + er", fmt::format("tn * {} + ec", lit(gn)), fmt::format("row < {} && col < {}", lit(g_.k), lit(g_.n)),
        d_.element(1, g_.im2col ? std::string("b_base + at")
                                : fmt::format("b_base + {} + {}", scaled("row", g_.b_row_stride), scaled("col", g_.b_col_stride))),
        fmt::format("er * {} + ec", lit(gn)), g_.im2col.has_value());
  line(2, d_.barrier());
  line(2, fmt::format("for ({0} kk = 0; kk < {1}; kk += 1) {{", i64, lit(gk)));
  for (int i = 0; i < s_.mr; ++i)
    line(3, fmt::format("{}{} x{} = {};", d_.let(), ty, i,
                        d_.subscript("ta", fmt::format("kk * {} + ty + {}", lit(gm), lit(i * (gm / s_.mr))))));
  for (int j = 0; j < vectors; ++j) {
    const std::string at = vw > 1 ? fmt::format("(tx + {}) * {}", lit(j * cols), lit(vw)) : fmt::format("tx + {}", lit(j * cols));
    const std::string index = fmt::format("kk * {} + {}", lit(gn), at);
    line(3, fmt::format("{}{} y{} = {};", d_.let(), vty, j, vw > 1 ? d_.vector_load("tb", index, vw) : d_.subscript("tb", index)));
  }
  for (int i = 0; i < s_.mr; ++i) {
    if (vw > 1) line(3, fmt::format("{}{} xv{} = {};", d_.let(), vty, i, d_.vector_splat(fmt::format("x{}", i), t, vw)));
    for (int j = 0; j < vectors; ++j) {
      if (f) {
        line(3, fmt::format("acc{0}_{1} = {2}(x{3}{0}, y{1}, acc{0}_{1});", i, j, d_.math("fma", t), vw > 1 ? "v" : ""));
      } else {
        line(3, fmt::format("acc{0}_{1} += {2} * {3};", i, j, d_.convert(fmt::format("x{}", i), acc_ty),
                            d_.convert(fmt::format("y{}", j), acc_ty)));
      }
    }
  }
  line(2, "}");
  line(2, d_.barrier());
  line(1, "}");

  // Each element of the block: the product, then the epilogue at its point. The block goes
  // through a private array so that the epilogue is written once, in a loop, rather than
  // once per element: unrolled, a 4 x 16 block's 64 copies tripled PoCL's compile time (its
  // first launch: 100 -> 300 ms); the loop runs once per element of C, after the K loop.
  const std::string per_item = lit(s_.mr * s_.nr);
  line(1, fmt::format("{} block[{}];", ty, s_.mr * s_.nr));
  for (int i = 0; i < s_.mr; ++i)
    for (int j = 0; j < vectors; ++j)
      for (int lane = 0; lane < vw; ++lane) {
        const std::string acc = vw > 1 ? d_.vector_lane(fmt::format("acc{}_{}", i, j), lane) : fmt::format("acc{}_{}", i, j);
        line(1, fmt::format("{} = {};", d_.subscript("block", std::to_string(i * s_.nr + j * vw + lane)),
                            f ? acc : d_.bitcast(acc, t, false)));
      }
  std::string point;
  if (epilogue_) {
    Kernel shifted = epilogue_->kernel;  // its buffers follow A, B and C in the signature
    for (Inst& in : shifted.insts)
      if (in.code == Code::Load) in.buffer += 3;
    for (Store& st : shifted.stores) st.buffer += 3;
    // A, B and C in front, so that a buffer's position names its type as the signature does.
    shifted.buffers.insert(shifted.buffers.begin(), 3, BufferParam{"", TensorType{t, g_.batch}, false});
    const int replaced = epilogue_->product_param >= 0 ? epilogue_->product_param + 3 : -1;
    point = emit_c_point(shifted, caps_, d_, helpers, 3, replaced, "product");
  }
  line(1, fmt::format("for ({0} e = 0; e < {1}; e += 1) {{", i64, per_item));
  line(2, fmt::format("{3}{0} i = e / {1}, j = (e % {1}) / {2}, lane = e % {2};", i64, lit(s_.nr), lit(vw), d_.let()));
  line(2, fmt::format("{}{} crow = tm * {} + ty + i * {};", d_.let(), i64, lit(gm), lit(gm / s_.mr)));
  line(2, fmt::format("{}{} ccol = tn * {} + (tx + j * {}) * {} + lane;", d_.let(), i64, lit(gn), lit(cols), lit(vw)));
  line(2, fmt::format("if (crow < {} && ccol < {}) {{", lit(g_.m), lit(g_.n)));
  line(3, fmt::format("{}{} product = {};", d_.let(), ty, d_.subscript("block", "e")));
  if (store_product_)
    line(3, fmt::format("{} = product;", d_.element(2, fmt::format("c_base + crow * {} + ccol", lit(g_.n)))));
  // The epilogue's point: the product's batch dims, row and column, or, when its domain
  // splits the columns into dims of their own (a conv's [N, M, o1..on]), those dims of the
  // element's place in C.
  if (epilogue_) {
    const Shape& domain = epilogue_->kernel.domain;
    Shape c = g_.batch;
    c.push_back(g_.m);
    c.push_back(g_.n);
    if (domain == c) {
      for (int j = 0; j < nb; ++j) line(3, fmt::format("{}{} d{} = batch{};", d_.let(), i64, j, j));
      line(3, fmt::format("{}{} d{} = crow;", d_.let(), i64, nb));
      line(3, fmt::format("{}{} d{} = ccol;", d_.let(), i64, nb + 1));
    } else {
      line(3, fmt::format("{}{} c_flat = c_base + crow * {} + ccol;", d_.let(), i64, lit(g_.n)));
      int64_t inner = 1;
      for (int j = domain.rank(); j-- > 0;) {
        std::string x = inner == 1 ? std::string("c_flat") : fmt::format("(c_flat / {})", lit(inner));
        if (j > 0) x = fmt::format("({} % {})", x, lit(domain[j]));
        line(3, fmt::format("{}{} d{} = {};", d_.let(), i64, j, x));
        inner *= domain[j];
      }
    }
  }
  out += point;
  line(2, "}");
  line(1, "}");
  return out;
}

std::string GemmEmitter::program() {
  const DType t = g_.dtype;
  std::set<std::string> helpers;
  const std::string text = body(helpers);
  const std::string locals = d_.local_array("ta", t, s_.group_m * s_.group_k) + d_.local_array("tb", t, s_.group_k * s_.group_n);
  const std::string entry = entry_with_locals(d_, signature(), locals);
  const std::string helper_text = emit_c_helpers(helpers, d_);
  const std::string dbl = d_.type(DType::F64);
  const bool doubles = t == DType::F64 || text.find(dbl) != std::string::npos || helper_text.find(dbl) != std::string::npos;
  Kernel named;
  named.name = name_;
  const Kernel* kernels[] = {&named};
  return d_.prologue(kernels, doubles, /*subgroups=*/false) + helper_text + entry + text + "}\n";
}

}  // namespace

std::optional<GemmEpilogueSource> gemm_epilogue_source(const LaunchPlan& plan, size_t step) {
  if (gemm_epilogue_iterations_per_row(plan, step) <= 0) return std::nullopt;
  const LaunchPlan::Step& next = plan.steps[step + 1];
  const auto& b = next.bindings;
  const auto at = std::find(b.begin(), b.end(), plan.steps[step].gemm.c);
  return GemmEpilogueSource{plan.kernels[static_cast<size_t>(next.kernel)],
                            at == b.end() ? -1 : static_cast<int32_t>(at - b.begin())};
}

std::string gemm_canonical(const LaunchPlan::Gemm& g, const GemmEpilogueSource* epilogue, bool store_product,
                           std::string_view fingerprint) {
  std::string strides = fmt::format("a {} {} {}, b {} {} {};", g.a_offset, g.a_row_stride, g.a_col_stride, g.b_offset,
                                    g.b_row_stride, g.b_col_stride);
  for (size_t j = 0; j < g.a_batch_stride.size(); ++j)
    strides += fmt::format("{},{};", g.a_batch_stride[j], g.b_batch_stride[j]);
  if (g.im2col) strides += g.im2col->str() + ";";
  std::string canonical =
      fmt::format("gemm|{}|{}x{}x{}|batch {}|strides {}|{}|store {}|product {}|", dtype_name(g.dtype), g.m, g.n, g.k,
                  g.batch.str(), strides, g.schedule.str(), store_product, epilogue ? epilogue->product_param : -1);
  const std::string tail =
      epilogue ? kernel_canonical(epilogue->kernel, Schedule{}, fingerprint) : std::string(fingerprint);
  return canonical + fmt::format("{}:{}", tail.size(), tail);
}

void check_matmul_dtype(DType dtype, const Capabilities& caps, const DeviceNames& names) {
  if ((dtype == DType::F64 && !caps.fp64) || (dtype == DType::I64 && !caps.int64))
    throw Error(fmt::format("matmul of type {} cannot run on {}: the device has no {}", dtype_name(dtype), names.device,
                            dtype == DType::F64 ? names.f64_feature : names.i64_feature));
}

int64_t c_gemm_loop_iterations(const LaunchPlan::Gemm& g, const GemmEpilogueSource* epilogue) {
  // GemmEmitter::body's loops: the steps along K, each staging both tiles and multiplying
  // group_k deep, then the walk over the register block, where each element may run the
  // epilogue's helper loops.
  const GemmSchedule& s = g.schedule;
  const int64_t ls = std::max<int64_t>(1, s.local_size());
  const int64_t steps = (g.k + s.group_k - 1) / s.group_k;
  const int64_t per_step = 1 + (s.group_m * s.group_k + ls - 1) / ls + (s.group_k * s.group_n + ls - 1) / ls + s.group_k;
  const int64_t helpers = epilogue ? helper_iterations_per_point(epilogue->kernel) : 0;
  return steps * per_step + int64_t{s.mr} * s.nr * (1 + helpers);
}

bool gemm_epilogue_fits(const LaunchPlan::Gemm& g, const GemmEpilogueSource& epilogue, const Capabilities& caps) {
  return caps.max_loop_iterations <= 0 || c_gemm_loop_iterations(g, &epilogue) <= caps.max_loop_iterations;
}

std::string emit_c_gemm(const LaunchPlan::Gemm& g, const GemmEpilogueSource* epilogue, bool store_product,
                        std::string_view name, const Capabilities& caps, const CDialect& dialect) {
  if (g.dtype == DType::Bool) throw Error("matmul of bool tensors is not supported (cast them to an integer type)");
  check_loop_budget(c_gemm_loop_iterations(g, epilogue), caps,
                    fmt::format("a {}x{}x{} matmul (work-groups of {} x {} tiles, {} work-items)", g.m, g.k, g.n, g.schedule.group_m,
                                g.schedule.group_n, g.schedule.local_size()));
  return GemmEmitter(g, epilogue, store_product, std::string(name), caps, dialect).program();
}

}  // namespace kiln::kir
