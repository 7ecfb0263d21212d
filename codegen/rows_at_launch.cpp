// codegen/rows_at_launch.cpp - a kernel made independent of the size of its rows.
//
// The rows are the first dim whose size is not 1 (a batch of one, [1, T, 768], keeps its
// leading 1). Why the result is right at every size up to the bound: the emitters read the
// rows' size only through analyses that prove facts for all points of the domain
// (affine_analysis's quotients, lane bounds, index ranges, index_fits_32), and a fact true
// of every point of [bound, ...] is true of every point of [n, ...] for n <= bound; where
// they split a flat point number into dims, the rows are outermost but for dims of size 1,
// so the number is below n times the rest of a row and the dims before stay 0 whether the
// bound or n divides it. The one place the size is used as a number, the count of points a
// walk covers, becomes the launch argument. Kernels that would need more (reduced rows,
// rows merged into the lanes, horizontal parts, an in-order walk) are refused.
#include "kiln/codegen/rows_at_launch.h"

#include "kiln/codegen/c_source.h"

namespace kiln::kir {

int rows_dim(const Kernel& k) {
  int d = 0;
  while (d < k.domain.rank() && k.domain[d] == 1) ++d;
  return d;
}

std::optional<std::string> rows_at_launch_refusal(const Kernel& k, const Schedule& s, const Capabilities& caps) {
  if (k.rows_arg >= 0) return "its rows are bound at launch already";
  const int r = rows_dim(k);
  if (r + 1 >= k.domain.rank()) return "it has no dim of size other than 1 before its lane dim";
  for (int d = 0; d <= r; ++d)
    if (k.reduced[static_cast<size_t>(d)]) return "its rows are reduced";
  if (k.in_order) return "it walks its points in order";
  if (!k.parts.empty()) return "it is a horizontal kernel (its parts' ranges are sizes)";
  if (!k.customs.empty()) return "it calls custom kernels";
  if (s.cpu.merge_rows) return "its schedule merges rows into the lanes";
  if (s.work_items.index_bits == 64 && k.domain[r] > kRowsAtLaunchBound) return "its rows are more than the class bound";
  // The walk's loop count is the launch's: lavapipe's budget is checked on the sizes of the
  // launch, which the kernel compiled for the class no longer knows.
  if (caps.max_loop_iterations > 0 && c_loop_iterations(k, s, caps) > caps.max_loop_iterations)
    return "its loops exceed the device's budget at this size";
  return std::nullopt;
}

RowsAtLaunch rows_at_launch(const Kernel& k, const Schedule& s) {
  RowsAtLaunch out{k, s};
  Kernel& g = out.kernel;
  g.rows_arg = static_cast<int32_t>(g.scalars.size());
  g.scalars.push_back(s.work_items.index_bits == 32 ? DType::I32 : DType::I64);
  // No emitter reads the buffers' shapes; left in, they would key the text by the size.
  for (BufferParam& b : g.buffers) b.type.shape = Shape{};
  const int r = rows_dim(k);
  if (s.work_items.index_bits == 32) {
    // The largest size whose positions still fit 32 bits (index_fits_32 grows false
    // with it): a function of the rest of the kernel, so every size of the class finds it.
    int64_t lo = k.domain[r], hi = (int64_t{1} << 31) - 1;
    auto fits = [&](int64_t n) {
      g.domain[r] = n;
      return index_fits_32(g);
    };
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (fits(mid)) lo = mid;
      else hi = mid - 1;
    }
    g.domain[r] = lo;
  } else {
    g.domain[r] = kRowsAtLaunchBound;
  }
  // What the launch derives from the size: the cpu splits its iterations, a GPU sizes its
  // grid; the compiled kernel reads neither.
  Schedule& c = out.schedule;
  c.iterations = 0;
  c.elements_per_iteration = 0;
  c.cpu.task_elements = 0;
  c.work_items.global_size = 0;
  c.work_items.elements_per_item = 0;
  return out;
}

}  // namespace kiln::kir
