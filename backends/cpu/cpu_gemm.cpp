// backends/cpu/cpu_gemm.cpp - see cpu_gemm.h.
//
// The blocking of BLIS and of Goto's GEMM: for each task's mc x nc block of C, walk the
// depth in panels of kc; pack A's mc x kc block into row panels of mr (so that the
// micro-kernel reads one contiguous column of the tile per step) and B's kc x nc block into
// column panels of nr; then for each nr panel of B (kept in L1) run the micro-kernel down
// the mr panels of A (kept in L2). Edge tiles are padded with zeros in the packed panels and
// computed into a scratch tile, of which the part inside C is stored (first panel) or added.
// When several blocks of rows read the same panels of B, B is packed once, in parallel,
// before the tasks start, instead of once per task (W6: 16 packings of a 1 MiB block).
// A convolution's B is its windows: gathered while packing, or read in place from a padded
// copy of the input (PaddedWindows). A product whose rows fill the vector lanes better than
// its columns runs transposed (run_channel_lanes): C's rows in the lanes, its columns
// broadcast from B read in place.
#include "cpu_gemm.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <list>
#include <mutex>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cpu_jit.h"
#include "kiln/runtime/stats.h"
#include "kiln/support/env.h"
#include "packing.h"
#include "parallel.h"

namespace kiln::cpu {
namespace {

// Whether an operand with these batch strides is the same matrix for every batch entry.
bool same_for_every_batch(const std::vector<int64_t>& batch_strides) {
  return std::all_of(batch_strides.begin(), batch_strides.end(), [](int64_t stride) { return stride == 0; });
}

// Element offsets of batch `batch`'s A and B matrices (broadcast batch dims have stride 0).
std::pair<int64_t, int64_t> batch_offsets(const LaunchPlan::Gemm& g, int64_t batch) {
  int64_t aoff = g.a_offset, boff = g.b_offset, rem = batch;
  for (int j = g.batch.rank() - 1; j >= 0; --j) {
    const int64_t idx = rem % g.batch[j];
    rem /= g.batch[j];
    aoff += idx * g.a_batch_stride[static_cast<size_t>(j)];
    boff += idx * g.b_batch_stride[static_cast<size_t>(j)];
  }
  return {aoff, boff};
}

// As pack_b, B's rows p0.. and columns j0.. of a convolution's windows (Gemm::im2col) over
// the channel planes at `x`. A panel's columns are cut once into runs along the last spatial
// dim (one output line each); then each row of the panel is, per run, a check of the outer
// coordinates and a copy of the part of the line inside the input (contiguous at stride 1),
// with zeros around it. Where each row's window element lies is worked out once per block,
// stepping through the window without a division: the rows are the same for every panel, and
// a row's divisions cost more than its copies (a fifth of ResNet-18's call was this packing).
// n zeros, 8 at a time where there are that many.
template <class T>
inline void zero_run(T* dst, int64_t n) {
  static constexpr T kZeros[8] = {};
  int64_t t = 0;
  for (; t + 8 <= n; t += 8) std::memcpy(dst + t, kZeros, sizeof kZeros);
  for (; t < n; ++t) dst[t] = T(0);
}

template <class T>
void pack_b_im2col(const ConvGeometry& ic, const T* x, int64_t p0, int64_t depth, int64_t j0,
                   int64_t cols, int nr, T* out) {
  const int dims = ic.dims, last = dims - 1;
  const auto ul = static_cast<size_t>(last);
  const int64_t window = ic.window(), plane_size = ic.plane(), stride = ic.strides[ul], width = ic.in[ul];
  struct Run {
    int64_t begin, end;   // columns of the panel
    int64_t outer[2];     // window starts along the dims before the last
    int64_t first;        // window start along the last dim at column `begin`
  };
  struct Row {
    int64_t plane;    // the channel plane's first element
    int64_t reach[3];  // the window element's offset from the window's start, per dim
  };
  thread_local std::vector<Run> runs;
  thread_local std::vector<Row> rows;
  rows.resize(static_cast<size_t>(depth));
  {
    int64_t at[3] = {0, 0, 0}, e = p0 % window;  // the window element of row p0, per dim
    for (int d = last; d >= 0; --d) {
      at[d] = e % ic.kernel[static_cast<size_t>(d)];
      e /= ic.kernel[static_cast<size_t>(d)];
    }
    int64_t plane = p0 / window * plane_size;
    for (int64_t p = 0; p < depth; ++p) {
      Row& r = rows[static_cast<size_t>(p)];
      r.plane = plane;
      for (int d = 0; d < 3; ++d) r.reach[d] = d < dims ? at[d] * ic.dilations[static_cast<size_t>(d)] : 0;
      int d = last;  // the next element: the last dim first, carrying into the channel
      while (d >= 0 && ++at[d] == ic.kernel[static_cast<size_t>(d)]) at[d--] = 0;
      if (d < 0) plane += plane_size;
    }
  }
  for (int64_t jp = 0; jp < cols; jp += nr, out += depth * nr) {
    const int64_t w = std::min<int64_t>(nr, cols - jp);
    runs.clear();
    for (int64_t j = 0; j < w;) {
      int64_t q = j0 + jp + j;
      Run r{j, 0, {0, 0}, 0};
      const int64_t o_last = q % ic.out[ul];
      r.first = o_last * stride - ic.low[ul];
      q /= ic.out[ul];
      for (int d = last - 1; d >= 0; --d) {
        const auto dd = static_cast<size_t>(d);
        r.outer[d] = q % ic.out[dd] * ic.strides[dd] - ic.low[dd];
        q /= ic.out[dd];
      }
      r.end = std::min(w, j + ic.out[ul] - o_last);
      runs.push_back(r);
      j = r.end;
    }
    for (int64_t p = 0; p < depth; ++p) {
      const Row& row = rows[static_cast<size_t>(p)];
      const T* plane = x + row.plane;
      T* o = out + p * nr;
      for (const Run& r : runs) {
        bool inside = true;
        int64_t line = 0;  // the input line's first element
        for (int d = 0; d < last; ++d) {
          const int64_t i = r.outer[d] + row.reach[d];
          inside = inside && i >= 0 && i < ic.in[static_cast<size_t>(d)];
          line = line * ic.in[static_cast<size_t>(d)] + i;
        }
        T* dst = o + r.begin;
        const int64_t n = r.end - r.begin;
        if (!inside) {
          zero_run(dst, n);
          continue;
        }
        // Column t of the run reads element start + t * stride of the line: inside for t in
        // [lo, hi).
        const int64_t start = r.first + row.reach[last];
        int64_t lo = 0, hi = 0;
        if (stride == 1) {
          lo = std::clamp<int64_t>(-start, 0, n);
          hi = std::clamp<int64_t>(width - start, lo, n);
        } else {
          lo = start >= 0 ? 0 : std::min(n, (-start + stride - 1) / stride);
          hi = start >= width ? 0 : std::clamp<int64_t>((width - start + stride - 1) / stride, lo, n);
        }
        zero_run(dst, lo);
        const T* src = plane + line * width + start;
        if (stride == 1) {
          int64_t t = lo;
          for (; t + 8 <= hi; t += 8) std::memcpy(dst + t, src + t, 8 * sizeof(T));  // one vector move
          for (; t < hi; ++t) dst[t] = src[t];
        } else {
          for (int64_t t = lo; t < hi; ++t) dst[t] = src[t * stride];
        }
        zero_run(dst + std::max(lo, hi), n - std::max(lo, hi));
      }
      zero_run(o + w, nr - w);
    }
  }
}

// B's block of `depth` rows from p0 and `cols` columns from j0, packed as pack_b packs it,
// from batch matrix `bm` (the batch's B, or its channel planes for a convolution).
template <class T>
void pack_b_block(const LaunchPlan::Gemm& g, const T* bm, int64_t p0, int64_t depth, int64_t j0, int64_t cols, int nr,
                  T* out) {
  if (g.im2col) return pack_b_im2col(*g.im2col, bm, p0, depth, j0, cols, nr, out);
  pack_b(bm + p0 * g.b_row_stride + j0 * g.b_col_stride, g.b_row_stride, g.b_col_stride, depth, cols, nr, out);
}

// Integers wrap, as in the micro-kernel (and the interpreter); signed overflow would be UB.
template <class T>
T wrapping_add(T x, T y) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(x) + static_cast<std::make_unsigned_t<T>>(y));
  else
    return x + y;
}

template <class T>
T* scratch(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

// Buffers of packed B, reused by later products: each product takes one for its duration
// (products run at once from several threads, or nest when a oneTBB worker that waits
// steals another's task, so no thread owns one) and gives it back. The pool keeps a few of
// at most kKeptBytes; a larger one is freed after its product, whose work dwarfs its page
// faults.
template <class T>
class PackedBPool {
 public:
  static PackedBPool& instance() {
    static auto* pool = new PackedBPool();  // never destroyed: products may run during exit
    return *pool;
  }
  /// A buffer of at least n elements, whose contents are whatever its last product left:
  /// the smallest kept one that holds n, else a new one. Resizing a kept buffer of another
  /// product's size would fill the difference with zeros at every call (MobileNetV3's
  /// products of several sizes spent 2% of a call in that memset).
  std::vector<T> take(int64_t n) {
    const size_t wanted = static_cast<size_t>(n);
    {
      std::lock_guard lock(mutex_);
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->size() >= wanted && (best == free_.end() || it->size() < best->size())) best = it;
      if (best != free_.end()) {
        std::vector<T> v = std::move(*best);
        free_.erase(best);
        return v;
      }
    }
    return std::vector<T>(wanted);
  }
  /// Kept unless larger than kKeptBytes; a full pool keeps the larger buffers.
  void give(std::vector<T> v) {
    if (static_cast<int64_t>(v.size() * sizeof(T)) > kKeptBytes) return;
    std::lock_guard lock(mutex_);
    if (free_.size() < kKept) {
      free_.push_back(std::move(v));
      return;
    }
    auto smallest = std::min_element(free_.begin(), free_.end(),
                                     [](const std::vector<T>& a, const std::vector<T>& b) { return a.size() < b.size(); });
    if (smallest->size() < v.size()) *smallest = std::move(v);
  }

 private:
  static constexpr int64_t kKeptBytes = int64_t{16} << 20;
  static constexpr size_t kKept = 4;
  std::mutex mutex_;
  std::vector<std::vector<T>> free_;
};

// Whether `g` reads its convolution's windows in place (GemmSchedule::windows_in_place).
bool reads_windows_in_place(const LaunchPlan::Gemm& g) {
  return g.im2col && g.schedule.windows_in_place > 0 && kir::windows_in_place_legal(*g.im2col) && g.k > 0;
}

// Whether `g` runs transposed, C's rows in the lanes (GemmSchedule::channel_lanes): its
// columns are read in place, a convolution's windows from their padded copy or a plain
// product's B where it lies (adjacent columns).
bool runs_channel_lanes(const LaunchPlan::Gemm& g) {
  return g.schedule.channel_lanes > 0 && g.k > 0 && (g.im2col ? reads_windows_in_place(g) : g.b_columns_adjacent());
}

MicroKernelForm micro_form(const LaunchPlan::Gemm& g) {
  const bool lanes = runs_channel_lanes(g);
  return {.b_offsets = reads_windows_in_place(g) && !lanes, .a_offsets = lanes, .c_transposed = lanes};
}

// The micro-kernels a product runs: its tile's, and for windows read in place, one a vector
// wide for what is left of a line; held for the product's duration.
struct MicroKernels {
  std::shared_ptr<const CpuKernel> tile_code, narrow_code;
  KernelFn tile = nullptr;
  KernelFn narrow = nullptr;
  int64_t narrow_nr = 0;
};

kir::GemmSchedule narrow_tile(const kir::GemmSchedule& s) {
  kir::GemmSchedule narrow = s;
  narrow.nr = narrow.vector_width;
  return narrow;
}

MicroKernels micro_kernels(const LaunchPlan::Gemm& g) {
  MicroKernels out;
  out.tile_code = Jit::instance().gemm_microkernel(g.schedule, g.dtype, micro_form(g));
  out.tile = out.tile_code->fn();
  if (reads_windows_in_place(g) && !runs_channel_lanes(g) && g.schedule.nr > g.schedule.vector_width) {
    out.narrow_code = Jit::instance().gemm_microkernel(narrow_tile(g.schedule), g.dtype, micro_form(g));
    out.narrow = out.narrow_code->fn();
    out.narrow_nr = g.schedule.vector_width;
  }
  return out;
}

// A convolution's input planes copied once into planes padded by its padding, so that a
// window's step is one offset from its first position at every output position, and a tile
// of nr positions along an output line is nr adjacent elements: the micro-kernel reads B
// there (MicroKernelForm::b_offsets) where the gathered packing wrote nine times the input
// for a 3x3 window (a quarter of ResNet-18's cycles). Windows that step by s > 1 along the
// last dim read every s-th element: each padded line is stored as s phases (the elements at
// i % s == 0, then 1, ...), so that a window's element at column ow * s + reach is column
// ow + reach / s of phase reach % s, adjacent for adjacent ow.
template <class T>
class PaddedWindows {
 public:
  PaddedWindows(const LaunchPlan::Gemm& g, const T* b, bool parallel) : c_(*g.im2col) {
    const int dims = c_.dims, last = dims - 1;
    const auto ul = static_cast<size_t>(last);
    std::vector<int64_t> padded(static_cast<size_t>(dims)), pstride(static_cast<size_t>(dims));
    for (int d = 0; d < dims; ++d) {
      const auto u = static_cast<size_t>(d);
      padded[u] = std::max(c_.in[u] + c_.low[u], (c_.out[u] - 1) * c_.strides[u] + (c_.kernel[u] - 1) * c_.dilations[u] + 1);
    }
    const int64_t phases = c_.strides[ul];
    phase_ = (padded[ul] + phases - 1) / phases;  // elements per phase of a line
    int64_t step = phases * phase_;
    for (int d = last - 1; d >= 0; --d) {
      pstride[static_cast<size_t>(d)] = step;
      step *= padded[static_cast<size_t>(d)];
    }
    plane_ = step;
    // Where padded element `i` of a line is in its phases.
    const auto in_line = [&](int64_t i) { return i % phases * phase_ + i / phases; };
    const int64_t window = c_.window(), channels = g.k / window;
    // Where step p of the depth lies from a window's first element: its channel's plane, then
    // its window element, dilated.
    offsets_.resize(static_cast<size_t>(g.k));
    for (int64_t p = 0; p < g.k; ++p) {
      int64_t e = p % window;
      int64_t off = p / window * plane_ + in_line(e % c_.kernel[ul] * c_.dilations[ul]);
      e /= c_.kernel[ul];
      for (int d = last - 1; d >= 0; --d) {
        const auto u = static_cast<size_t>(d);
        off += e % c_.kernel[u] * c_.dilations[u] * pstride[u];
        e /= c_.kernel[u];
      }
      offsets_[static_cast<size_t>(p)] = off;
    }
    // Where each output line's first window starts.
    int64_t lines = 1;
    for (int d = 0; d < last; ++d) lines *= c_.out[static_cast<size_t>(d)];
    line_start_.resize(static_cast<size_t>(lines));
    for (int64_t l = 0; l < lines; ++l) {
      int64_t q = l, start = 0;
      for (int d = last - 1; d >= 0; --d) {
        const auto u = static_cast<size_t>(d);
        start += q % c_.out[u] * c_.strides[u] * pstride[u];
        q /= c_.out[u];
      }
      line_start_[static_cast<size_t>(l)] = start;
    }
    // The planes, once per batch entry (once for all when B broadcasts over every batch
    // dim), and a tile past the last: an edge tile reads whole vectors (nr positions), or
    // all its rows (mr, with channel_lanes).
    batches_ = same_for_every_batch(g.b_batch_stride) ? 1 : g.batch.numel();
    batch_elements_ = channels * plane_;
    tail_ = std::max(g.schedule.nr, g.schedule.mr);
    data_ = PackedBPool<T>::instance().take(batches_ * batch_elements_ + tail_);
    int64_t in_lines = 1;
    for (int d = 0; d < last; ++d) in_lines *= c_.in[static_cast<size_t>(d)];
    const int64_t width = c_.in[ul], low = c_.low[ul];
    // Where input line `l` of a plane starts among the padded planes' lines.
    auto padded_line = [&](int64_t l) {
      int64_t q = l, at = 0;
      for (int d = last - 1; d >= 0; --d) {
        const auto v = static_cast<size_t>(d);
        at += (q % c_.in[v] + c_.low[v]) * pstride[v];
        q /= c_.in[v];
      }
      return at;
    };
    // Element i of an input line is padded element i + low, of phase (i + low) % s at
    // (i + low) / s in it: each phase of a padded line holds one contiguous run of the
    // input's elements, from its `first`, `count` of them, at `at` in the padded line.
    struct Run {
      int64_t first, at, count;
    };
    std::vector<Run> runs;
    for (int64_t ph = 0; ph < phases; ++ph) {
      const int64_t first = ((ph - low) % phases + phases) % phases;
      runs.push_back({first, ph * phase_ + (first + low) / phases, first < width ? (width - 1 - first) / phases + 1 : 0});
    }
    // One input line into its padded line, run by run (a division per element took a
    // quarter of the 7x7 stem's product). Floats at a stride of 2 are split with vector
    // shuffles (element by element, the copy took a third of the time of MobileNetV3's stem
    // product).
    auto copy_line = [&](const T* line, T* dst) {
      if (phases == 1) {
        std::memcpy(dst + low, line, static_cast<size_t>(width) * sizeof(T));
        return;
      }
      if constexpr (std::is_same_v<T, float>) {
        if (phases == 2) {
          // Even elements to phase low % 2 from (low / 2), odd ones to the other phase.
          T* even = dst + low % 2 * phase_ + low / 2;
          T* odd = dst + (low + 1) % 2 * phase_ + (low + 1) / 2;
          deinterleave_pairs(line, width / 2, even, odd);
          if (width % 2) even[width / 2] = line[width - 1];
          return;
        }
      }
      for (const Run& r : runs) {
        T* out = dst + r.at;
        for (int64_t i = r.first; i < width; i += phases) *out++ = line[i];
      }
    };
    // The elements of a padded line that no input element lands on: each phase's head and
    // tail, around its run (zeroing whole planes before the copy wrote the stem's planes
    // twice).
    std::vector<std::pair<int64_t, int64_t>> line_padding;  // [from, to) in a padded line
    for (int64_t ph = 0; ph < phases; ++ph) {
      const Run& r = runs[static_cast<size_t>(ph)];
      line_padding.emplace_back(ph * phase_, r.count ? r.at : (ph + 1) * phase_);
      if (r.count) line_padding.emplace_back(r.at + r.count, (ph + 1) * phase_);
    }
    // Tasks of about 16K elements. A 2-D plane is cut into ranges of its lines, each zeroing
    // the padding of its own padded lines (the first and the last range the lines above and
    // below): the stem's three planes of 224 x 224 kept one of two cores idle for a third of
    // the copy as three tasks.
    const int64_t planes = batches_ * channels;
    const int64_t parts = dims == 2 ? std::clamp<int64_t>(c_.in[0] * c_.in[1] / 16384, 1, c_.in[0]) : 1;
    auto copy_parts = [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) {
        const int64_t plane = u / parts, part = u % parts;
        const int64_t bi = plane / channels, ch = plane % channels;
        const T* src = b + batch_offsets(g, bi).second + ch * c_.plane();
        T* dst = data_.data() + bi * batch_elements_ + ch * plane_;
        const int64_t l0 = in_lines * part / parts, l1 = in_lines * (part + 1) / parts;
        if (dims != 2) {
          std::fill_n(dst, plane_, T(0));
        } else {
          const int64_t line = pstride[0], below = (c_.in[0] + c_.low[0]) * line;
          if (part == 0) std::fill_n(dst, c_.low[0] * line, T(0));
          if (part == parts - 1) std::fill_n(dst + below, plane_ - below, T(0));
        }
        for (int64_t l = l0; l < l1; ++l) {
          T* to = dst + padded_line(l);
          if (dims == 2)
            for (const auto& [head, tail] : line_padding) std::fill(to + head, to + tail, T(0));
          copy_line(src + l * width, to);
        }
      }
      if (end == planes * parts) std::fill_n(data_.data() + batches_ * batch_elements_, tail_, T(0));
    };
    const int64_t units_per_task = std::max<int64_t>(1, 16384 * parts / std::max<int64_t>(1, plane_));
    if (parallel) parallel_range(planes * parts, units_per_task, copy_parts, g.schedule.threads);
    else copy_parts(0, planes * parts);
  }
  PaddedWindows(const PaddedWindows&) = delete;
  PaddedWindows& operator=(const PaddedWindows&) = delete;
  ~PaddedWindows() { PackedBPool<T>::instance().give(std::move(data_)); }

  /// Output positions per line: a tile of the micro-kernel stays inside one.
  int64_t line() const { return c_.out.back(); }
  /// With channel_lanes, the first of the columns (positions) of a tile from `j` and the
  /// offsets of its steps from p0 on: rows past the tile's `h` (to mr) read what follows, in
  /// the copy.
  std::pair<const T*, const int64_t*> tile(int64_t bi, int64_t j, int64_t p0, int64_t, int64_t) {
    return {window(bi, j), offsets(p0)};
  }
  /// Where output position `j`'s window starts in batch `bi`'s padded planes.
  const T* window(int64_t bi, int64_t j) const {
    return data_.data() + (batches_ == 1 ? 0 : bi) * batch_elements_ + line_start_[static_cast<size_t>(j / line())] +
           j % line();
  }
  /// The offsets of the depth's steps from p0 on, from a window's first element.
  int64_t* offsets(int64_t p0) { return offsets_.data() + p0; }

 private:
  const ConvGeometry& c_;
  int64_t phase_ = 0, plane_ = 0, batches_ = 1, batch_elements_ = 0, tail_ = 0;
  std::vector<int64_t> offsets_, line_start_;
  std::vector<T> data_;
};

// The most memory a product's B packed once may take.
constexpr int64_t kMostPackedB = int64_t{256} << 20;

// B packed as pack_b packs a kc x nc block, for all the blocks at once, once per batch
// (once for all when B broadcasts over every batch dim): batch `bi`'s depth panel at p0
// starts at bi * k * npad + p0 * npad, and within it the column panel jp (of nr columns) at
// jp * nr * depth, so an nc block starting at column j0 (a multiple of nr) is at j0 * depth.
template <class T>
class PackedB {
 public:
  /// The elements (and bytes) B of `g` takes packed.
  static int64_t elements(const LaunchPlan::Gemm& g) { return batches(g) * g.k * padded_columns(g); }
  static int64_t bytes(const LaunchPlan::Gemm& g) { return elements(g) * static_cast<int64_t>(sizeof(T)); }

  /// Packs all of B into `out` (elements(g) of them).
  static void pack(const LaunchPlan::Gemm& g, const T* b, bool parallel, T* out) {
    const kir::GemmSchedule& s = g.schedule;
    const int64_t npad = padded_columns(g);
    const int64_t kpanels = (g.k + s.kc - 1) / s.kc, cpanels = npad / s.nr;
    auto pack_range = [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) {
        const int64_t bi = u / (kpanels * cpanels), p0 = u / cpanels % kpanels * s.kc, jp = u % cpanels;
        const int64_t w = std::min<int64_t>(s.nr, g.n - jp * s.nr);
        pack_b_block(g, b + batch_offsets(g, bi).second, p0, std::min(s.kc, g.k - p0), jp * s.nr, w, s.nr,
                     out + offset(g, bi, p0, jp * s.nr));
      }
    };
    const int64_t panels = batches(g) * kpanels * cpanels;
    if (parallel) parallel_range(panels, 16, pack_range, s.threads);
    else pack_range(0, panels);
  }

  /// B packed now, into memory from the pool.
  PackedB(const LaunchPlan::Gemm& g, const T* b, bool parallel)
      : g_(g), owned_(PackedBPool<T>::instance().take(elements(g))), data_(owned_.data()) {
    pack(g, b, parallel, owned_.data());
  }
  /// B packed before (an operand that never changes: PackedOperands).
  PackedB(const LaunchPlan::Gemm& g, std::shared_ptr<const T[]> kept)
      : g_(g), kept_(std::move(kept)), data_(kept_.get()) {}
  PackedB(const PackedB&) = delete;
  PackedB& operator=(const PackedB&) = delete;
  ~PackedB() {
    if (!owned_.empty()) PackedBPool<T>::instance().give(std::move(owned_));
  }

  /// The packed kc x nc block of batch `bi` at depth `p0` and column `j0`.
  const T* panel(int64_t bi, int64_t p0, int64_t j0) const { return data_ + offset(g_, bi, p0, j0); }

 private:
  static int64_t batches(const LaunchPlan::Gemm& g) {
    return same_for_every_batch(g.b_batch_stride) ? 1 : g.batch.numel();
  }
  static int64_t padded_columns(const LaunchPlan::Gemm& g) {
    return (g.n + g.schedule.nr - 1) / g.schedule.nr * g.schedule.nr;
  }
  static int64_t offset(const LaunchPlan::Gemm& g, int64_t bi, int64_t p0, int64_t j0) {
    return (batches(g) == 1 ? 0 : bi) * g.k * padded_columns(g) + p0 * padded_columns(g) +
           j0 * std::min(g.schedule.kc, g.k - p0);
  }
  const LaunchPlan::Gemm& g_;
  std::vector<T> owned_;
  std::shared_ptr<const T[]> kept_;
  const T* data_;
};

// All of A packed as pack_a packs an mc x kc block, once per batch (once for all when A
// broadcasts over every batch dim): batch `bi`'s depth panel at p0 starts at (bi * k + p0) *
// mpad, and within it the block of rows from i0 (a multiple of mr) at i0 * depth.
template <class T>
struct PackedA {
  static int64_t padded_rows(const LaunchPlan::Gemm& g) { return (g.m + g.schedule.mr - 1) / g.schedule.mr * g.schedule.mr; }
  static bool broadcast(const LaunchPlan::Gemm& g) {
    return same_for_every_batch(g.a_batch_stride);
  }
  static int64_t elements(const LaunchPlan::Gemm& g) {
    return (broadcast(g) ? 1 : g.batch.numel()) * padded_rows(g) * g.k;
  }
  static void pack(const LaunchPlan::Gemm& g, const T* a, T* out) {
    const kir::GemmSchedule& s = g.schedule;
    const int64_t copies = broadcast(g) ? 1 : g.batch.numel();
    for (int64_t bi = 0; bi < copies; ++bi)
      for (int64_t p0 = 0; p0 < g.k; p0 += s.kc)
        pack_a(a + batch_offsets(g, bi).first + p0 * g.a_col_stride, g.a_row_stride, g.a_col_stride, g.m,
               std::min(s.kc, g.k - p0), s.mr, out + (bi * g.k + p0) * padded_rows(g));
  }
};

// Packed panels of operands that never change (DeviceMemory::immutable: a model's weights,
// a plan's constants), kept across products, keyed by the memory's id and the packing: each
// product packed its weights again at every call (ResNet-18's last 3x3 convolutions, 9.4 MB
// of weights each, spent about 40% of their time so). At most KILN_PACKED_WEIGHTS_MB of them
// (default 1024) are kept, the least recently used dropped first.
class PackedOperands {
 public:
  static PackedOperands& instance() {
    static auto* cache = new PackedOperands();  // never destroyed: products may run during exit
    return *cache;
  }
  template <class T, class Pack>
  std::shared_ptr<const T[]> get(const std::string& key, int64_t elements, Pack&& pack) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = index_.find(key); it != index_.end()) {
        order_.splice(order_.begin(), order_, it->second);
        runtime_counters().packed_operand_hits++;
        return std::static_pointer_cast<const T[]>(it->second->value);
      }
    }
    runtime_counters().packed_operands++;
    // Not zero-filled: the packing writes every element, padding included, and its threads
    // touch the pages first (a value-initialized vector had one thread zero all of GPT-2's
    // 340 MB of panels before the packing wrote them).
    std::shared_ptr<T[]> packed = std::make_shared_for_overwrite<T[]>(static_cast<size_t>(elements));
    pack(packed.get());
    const int64_t bytes = elements * static_cast<int64_t>(sizeof(T));
    if (bytes > budget_) return packed;  // used once, kept by no one
    std::lock_guard lock(mutex_);
    if (index_.count(key) == 0) {
      order_.push_front({key, packed, bytes});
      index_[key] = order_.begin();
      kept_ += bytes;
      while (kept_ > budget_) {
        kept_ -= order_.back().bytes;
        index_.erase(order_.back().key);
        order_.pop_back();
      }
    }
    return packed;
  }

 private:
  PackedOperands()
      : budget_(env_int("KILN_PACKED_WEIGHTS_MB", 0, int64_t{1} << 30).value_or(1024) * (int64_t{1} << 20)) {}
  struct Entry {
    std::string key;
    std::shared_ptr<const void> value;
    int64_t bytes = 0;
  };
  std::mutex mutex_;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  int64_t kept_ = 0;
  int64_t budget_;
};

// The keys of A and B's packings under `g`'s blocking, in memory `id`.
std::string packed_a_key(const LaunchPlan::Gemm& g, uint64_t id) {
  return fmt::format("A {} {} {}x{} at {} {} {} batch {} [{}] mr {} kc {}", id, dtype_name(g.dtype), g.m, g.k, g.a_offset,
                     g.a_row_stride, g.a_col_stride, g.batch.str(), fmt::join(g.a_batch_stride, ","), g.schedule.mr,
                     g.schedule.kc);
}
std::string packed_b_key(const LaunchPlan::Gemm& g, uint64_t id) {
  return fmt::format("B {} {} {}x{} at {} {} {} batch {} [{}] {} nr {} kc {}", id, dtype_name(g.dtype), g.k, g.n,
                     g.b_offset, g.b_row_stride, g.b_col_stride, g.batch.str(), fmt::join(g.b_batch_stride, ","),
                     g.im2col ? g.im2col->str() : "", g.schedule.nr, g.schedule.kc);
}

template <class T>
void run_typed(const LaunchPlan::Gemm& g, const T* a, const T* b, T* c, const MicroKernels& micro,
               const BlockDone* block_done, const ImmutableOperands& fixed) {
  const kir::GemmSchedule& s = g.schedule;
  const int64_t m = g.m, n = g.n, k = g.k;
  const int64_t ars = g.a_row_stride, acs = g.a_col_stride, brs = g.b_row_stride, bcs = g.b_col_stride;
  const int64_t mblocks = (m + s.mc - 1) / s.mc, nblocks = (n + s.nc - 1) / s.nc;
  const int64_t tasks = g.batch.numel() * mblocks * nblocks;
  const bool parallel = m * n * k >= s.serial_below && tasks > 1;
  std::optional<PackedB<T>> packed_b;
  std::optional<PaddedWindows<T>> windows;
  if (reads_windows_in_place(g)) {
    windows.emplace(g, b, parallel);
  } else if (fixed.b != 0 && k > 0 && !g.im2col && PackedB<T>::bytes(g) <= kMostPackedB) {
    // An operand that never changes is packed once for all products (PackedOperands).
    packed_b.emplace(g, PackedOperands::instance().get<T>(packed_b_key(g, fixed.b), PackedB<T>::elements(g),
                                                          [&](T* out) { PackedB<T>::pack(g, b, parallel, out); }));
  } else if (mblocks > 1 && k > 0 && PackedB<T>::bytes(g) <= kMostPackedB) {
    // Packed once, B takes as much memory again (every batch's): past kMostPackedB, as for a
    // long batch of large products, each task packs its own blocks instead.
    packed_b.emplace(g, b, parallel);
  }
  // All of A packed before the tasks: an operand that never changes, once for all products;
  // or, for one block of rows and several of columns (a short, wide product: a
  // convolution's, a language model's head), once per product rather than once per task.
  const int64_t mpad = PackedA<T>::padded_rows(g);
  const bool a_broadcast = PackedA<T>::broadcast(g);
  std::vector<T> packed_a_now;
  std::shared_ptr<const T[]> packed_a_kept;
  const T* packed_a = nullptr;
  if (fixed.a != 0 && k > 0) {
    packed_a_kept = PackedOperands::instance().get<T>(packed_a_key(g, fixed.a), PackedA<T>::elements(g),
                                                      [&](T* out) { PackedA<T>::pack(g, a, out); });
    packed_a = packed_a_kept.get();
  } else if (mblocks == 1 && nblocks > 1 && k > 0) {
    packed_a_now.resize(static_cast<size_t>(PackedA<T>::elements(g)));
    PackedA<T>::pack(g, a, packed_a_now.data());
    packed_a = packed_a_now.data();
  }
  auto task = [&](int64_t t) {
    const int64_t bi = t / (mblocks * nblocks), ib = t / nblocks % mblocks, jb = t % nblocks;
    const auto [aoff, boff] = batch_offsets(g, bi);
    const T* am = a + aoff;
    const T* bm = b + boff;
    T* cm = c + bi * m * n;
    const int64_t i0 = ib * s.mc, rows = std::min(s.mc, m - i0);
    const int64_t j0 = jb * s.nc, cols = std::min(s.nc, n - j0);
    if (k == 0)  // no panel writes C
      for (int64_t i = 0; i < rows; ++i) std::fill_n(cm + (i0 + i) * n + j0, cols, T(0));
    thread_local std::vector<T> apack, bpack, tile;
    const int64_t rpanels = (rows + s.mr - 1) / s.mr, cpanels = (cols + s.nr - 1) / s.nr;
    T* ap = scratch(apack, rpanels * s.mr * std::min(s.kc, std::max<int64_t>(k, 1)));
    T* bp = packed_b || windows ? nullptr : scratch(bpack, cpanels * s.nr * std::min(s.kc, std::max<int64_t>(k, 1)));
    T* edge = scratch(tile, static_cast<int64_t>(s.mr) * s.nr);
    // The tile of row panel ip at C's column j, w columns of the `nr` its micro-kernel `fn`
    // computes, from B at `bpanel` (b_arg: the micro-kernel's args[4]). An edge tile goes
    // through `edge`; the first panel of the depth overwrites C.
    auto run_tile = [&](KernelFn fn, int64_t nr, int64_t ip, int64_t p0, int64_t depth, int64_t j, int64_t w,
                        const T* bpanel, void* b_arg) {
      const int64_t h = std::min<int64_t>(s.mr, rows - ip * s.mr);
      T* ct = cm + (i0 + ip * s.mr) * n + j;
      const bool whole = h == s.mr && w == nr;
      void* accumulate = whole && p0 > 0 ? ct : nullptr;
      void* args[5] = {ap + ip * s.mr * depth, const_cast<T*>(bpanel), whole ? ct : edge, accumulate, b_arg};
      call_kernel(fn, args, depth, whole ? n : nr);
      if (!whole)
        for (int64_t i = 0; i < h; ++i)
          for (int64_t jj = 0; jj < w; ++jj)
            ct[i * n + jj] = p0 == 0 ? edge[i * nr + jj] : wrapping_add(ct[i * n + jj], edge[i * nr + jj]);
    };
    for (int64_t p0 = 0; p0 < k; p0 += s.kc) {
      const int64_t depth = std::min(s.kc, k - p0);
      if (packed_a) ap = const_cast<T*>(packed_a) + ((a_broadcast ? 0 : bi) * k + p0) * mpad + i0 * depth;
      else pack_a(am + i0 * ars + p0 * acs, ars, acs, rows, depth, s.mr, ap);
      if (windows) {
        // Tiles along each output line, cut where a line or the block ends; what is left of
        // a line in a tile a vector wide where it fits one (56 = 16 + 16 + 16 + 8), else in
        // an edge tile (28 = 16 + 12).
        for (int64_t j = j0; j < j0 + cols;) {
          const int64_t w = std::min({int64_t{s.nr}, windows->line() - j % windows->line(), j0 + cols - j});
          const bool narrow = w <= micro.narrow_nr;
          for (int64_t ip = 0; ip < rpanels; ++ip)
            run_tile(narrow ? micro.narrow : micro.tile, narrow ? micro.narrow_nr : s.nr, ip, p0, depth, j, w,
                     windows->window(bi, j), windows->offsets(p0));
          j += w;
        }
        continue;
      }
      // One row panel uses each B panel once: its whole panels are read in place, unpacked,
      // where a row's columns are adjacent.
      const bool b_in_place = rpanels == 1 && !packed_b && bcs == 1 && !g.im2col;
      const T* bblock = packed_b ? packed_b->panel(bi, p0, j0) : bp;
      const T* bpos = bm + p0 * brs + j0 * bcs;  // the block's first element
      if (!packed_b && !b_in_place) pack_b_block(g, bm, p0, depth, j0, cols, s.nr, bp);
      for (int64_t jp = 0; jp < cpanels; ++jp) {
        const int64_t w = std::min<int64_t>(s.nr, cols - jp * s.nr);
        const T* bpanel = bblock + jp * s.nr * depth;
        int64_t ldb = s.nr;
        if (b_in_place && w == s.nr) {
          bpanel = bpos + jp * s.nr;
          ldb = brs;
        } else if (b_in_place) {  // a partial panel still needs its zero padding
          pack_b(bpos + jp * s.nr, brs, 1, depth, w, s.nr, bp);
          bpanel = bp;
        }
        // B's next micro-panel, a slice per row panel, into L2 (GemmSchedule::prefetch_b).
        const char* next = s.prefetch_b > 0 && packed_b && jp + 1 < cpanels
                               ? reinterpret_cast<const char*>(bblock + (jp + 1) * s.nr * depth)
                               : nullptr;
        const int64_t next_bytes = s.nr * depth * static_cast<int64_t>(sizeof(T));
        const int64_t slice = (next_bytes / rpanels + 63) / 64 * 64;
        for (int64_t ip = 0; ip < rpanels; ++ip) {
          if (next)
            for (int64_t at = ip * slice; at < std::min(next_bytes, (ip + 1) * slice); at += 64)
              __builtin_prefetch(next + at, 0, 2);
          run_tile(micro.tile, s.nr, ip, p0, depth, j0 + jp * s.nr, w, bpanel, &ldb);
        }
      }
    }
    if (block_done) (*block_done)(bi * m + i0, bi * m + i0 + rows, j0, j0 + cols);
  };
  run_tasks(tasks, parallel, s.threads, task);
}

// A plain product's B read in place by the transposed product (channel_lanes): a tile's
// column j + i (a row of C^T) at step p is B[p * b_row_stride + j + i]. The tile at the end
// of a row whose mr columns would reach past it (and past the buffer, for the last step) is
// copied first into a panel of its own, zeros past the row.
template <class T>
class RowsInPlace {
 public:
  RowsInPlace(const LaunchPlan::Gemm& g, const T* b) : g_(g), b_(b) {
    offsets_.resize(static_cast<size_t>(g.k));
    for (int64_t p = 0; p < g.k; ++p) offsets_[static_cast<size_t>(p)] = p * g.b_row_stride;
    edge_offsets_.resize(static_cast<size_t>(std::min(g.schedule.kc, g.k)));
    for (size_t q = 0; q < edge_offsets_.size(); ++q) edge_offsets_[q] = static_cast<int64_t>(q) * g.schedule.mr;
  }
  int64_t line() const { return g_.n; }
  std::pair<const T*, const int64_t*> tile(int64_t bi, int64_t j, int64_t p0, int64_t depth, int64_t h) const {
    const T* first = b_ + batch_offsets(g_, bi).second + j;
    const int mr = g_.schedule.mr;
    if (j + mr <= g_.n) return {first, offsets_.data() + p0};
    thread_local std::vector<T> edge;
    T* panel = scratch(edge, depth * mr);
    for (int64_t q = 0; q < depth; ++q) {
      const T* row = first + (p0 + q) * g_.b_row_stride;
      std::copy_n(row, h, panel + q * mr);
      std::fill(panel + q * mr + h, panel + (q + 1) * mr, T(0));
    }
    return {panel, edge_offsets_.data()};
  }

 private:
  const LaunchPlan::Gemm& g_;
  const T* b_;
  std::vector<int64_t> offsets_, edge_offsets_;
};

// A product's A (m rows x k steps: a convolution's weights) as the B operand of the
// transposed product (k x m), for packing it as B is packed.
LaunchPlan::Gemm transposed_weights(const LaunchPlan::Gemm& g) {
  LaunchPlan::Gemm t;
  t.dtype = g.dtype;
  t.m = g.n;
  t.n = g.m;
  t.k = g.k;
  t.batch = g.batch;
  t.a_batch_stride = g.b_batch_stride;
  t.b_batch_stride = g.a_batch_stride;
  t.b_offset = g.a_offset;
  t.b_row_stride = g.a_col_stride;
  t.b_col_stride = g.a_row_stride;
  t.schedule = g.schedule;
  return t;
}

// A product transposed (GemmSchedule::channel_lanes): C^T = B^T x A^T, for a convolution
// windows^T x W^T; a tile of mr positions along an output line (the padded copy, or B where
// it lies, at per-step offsets) by nr output channels (the weights, packed once). The
// micro-kernel stores the tile transposed, each channel's positions a run of its row of C
// (MicroKernelForm::c_transposed).
// A task is (batch entry, block of mc positions, block of nc channels); per panel of the
// depth and of nr channels (in L2), it walks its positions' tiles.
template <class T>
void run_channel_lanes(const LaunchPlan::Gemm& g, const T* a, const T* b, T* c, const MicroKernels& micro,
                       const BlockDone* block_done, const ImmutableOperands& fixed) {
  const kir::GemmSchedule& s = g.schedule;
  const int64_t m = g.m, n = g.n, k = g.k;
  const int64_t pblocks = (n + s.mc - 1) / s.mc, cblocks = (m + s.nc - 1) / s.nc;
  const int64_t tasks = g.batch.numel() * pblocks * cblocks;
  const bool parallel = m * n * k >= s.serial_below && tasks > 1;
  std::optional<PaddedWindows<T>> windows;
  std::optional<RowsInPlace<T>> rows;
  if (g.im2col) windows.emplace(g, b, parallel);
  else rows.emplace(g, b);
  const int64_t line = windows ? windows->line() : rows->line();
  const LaunchPlan::Gemm wt = transposed_weights(g);
  std::optional<PackedB<T>> weights;
  if (fixed.a != 0 && PackedB<T>::bytes(wt) <= kMostPackedB)
    weights.emplace(wt, PackedOperands::instance().get<T>(packed_b_key(wt, fixed.a), PackedB<T>::elements(wt),
                                                          [&](T* out) { PackedB<T>::pack(wt, a, parallel, out); }));
  else
    weights.emplace(wt, a, parallel);
  auto task = [&](int64_t t) {
    const int64_t bi = t / (pblocks * cblocks), pb = t / cblocks % pblocks, cb = t % cblocks;
    const int64_t j0 = pb * s.mc, positions = std::min(s.mc, n - j0);
    const int64_t c0 = cb * s.nc, channels = std::min(s.nc, m - c0);
    T* cm = c + bi * m * n;
    int64_t ldb = s.nr;
    for (int64_t p0 = 0; p0 < k; p0 += s.kc) {
      const int64_t depth = std::min(s.kc, k - p0);
      for (int64_t cp = c0; cp < c0 + channels; cp += s.nr) {
        const int64_t w = std::min<int64_t>(s.nr, c0 + channels - cp);
        const T* panel = weights->panel(bi, p0, cp);
        for (int64_t j = j0; j < j0 + positions;) {
          const int64_t h = std::min({int64_t{s.mr}, line - j % line, j0 + positions - j});
          const auto [first, offsets] = windows ? windows->tile(bi, j, p0, depth, h) : rows->tile(bi, j, p0, depth, h);
          T* ct = cm + cp * n + j;
          int64_t extent[2] = {h, w};
          void* args[7] = {const_cast<T*>(first), const_cast<T*>(panel), ct, p0 > 0 ? ct : nullptr, &ldb,
                           const_cast<int64_t*>(offsets), extent};
          call_kernel(micro.tile, args, depth, n);
          j += h;
        }
      }
    }
    if (block_done) (*block_done)(bi * m + c0, bi * m + c0 + channels, j0, j0 + positions);
  };
  run_tasks(tasks, parallel, s.threads, task);
}

// Columns of C per task (a multiple of which the blocks start at): positions per block
// with channel_lanes, where the blocking describes C^T.
int64_t column_block(const LaunchPlan::Gemm& g) { return runs_channel_lanes(g) ? g.schedule.mc : g.schedule.nc; }

bool empty_product(const LaunchPlan::Gemm& g) { return g.m == 0 || g.n == 0 || g.batch.numel() == 0; }

void dispatch(const LaunchPlan::Gemm& g, const std::byte* a, const std::byte* b, std::byte* c,
              const BlockDone* block_done, const ImmutableOperands& fixed) {
  if (empty_product(g)) return;
  const MicroKernels fn = micro_kernels(g);
  auto run = [&]<class T>(T) {
    const auto* ta = reinterpret_cast<const T*>(a);
    const auto* tb = reinterpret_cast<const T*>(b);
    auto* tc = reinterpret_cast<T*>(c);
    if (runs_channel_lanes(g)) run_channel_lanes(g, ta, tb, tc, fn, block_done, fixed);
    else run_typed(g, ta, tb, tc, fn, block_done, fixed);
  };
  switch (g.dtype) {
    case DType::F32: return run(float{});
    case DType::F64: return run(double{});
    case DType::I32: return run(int32_t{});
    case DType::I64: return run(int64_t{});
    default: break;
  }
  throw Error("matmul of bool tensors is not supported on the cpu device");
}

}  // namespace

double fma_peak_gflops(const Capabilities& caps) {
  LaunchPlan::Gemm g;
  g.dtype = DType::F32;
  g.schedule = kir::default_gemm_schedule(DType::F32, 512, 512, 512, caps);
  const kir::GemmSchedule& s = g.schedule;
  const KernelFn micro = Jit::instance().gemm_microkernel(s, DType::F32)->fn();
  constexpr int64_t kDepth = 128;  // A and B panels: (mr + nr) x 128 floats, in L1
  const int cores = std::max(1, caps.cores);
  std::vector<double> rates(static_cast<size_t>(cores), 0);
  parallel_range(
      cores, 1,
      [&](int64_t begin, int64_t end) {
        for (int64_t core = begin; core < end; ++core) {
          std::vector<float> a(static_cast<size_t>(s.mr * kDepth), 0.5f), b(static_cast<size_t>(s.nr * kDepth), 0.25f);
          std::vector<float> c(static_cast<size_t>(s.mr * s.nr), 0);
          int64_t ldb = s.nr;
          void* args[5] = {a.data(), b.data(), c.data(), c.data(), &ldb};
          // The best of five rounds of 20 ms: another process only ever slows one down.
          for (int round = 0; round < 5; ++round) {
            int64_t calls = 0;
            const auto t0 = std::chrono::steady_clock::now();
            double seconds = 0;
            while (seconds < 0.02) {
              for (int i = 0; i < 256; ++i) call_kernel(micro, args, kDepth, s.nr);
              calls += 256;
              seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            }
            const double rate = 2.0 * s.mr * s.nr * kDepth * static_cast<double>(calls) / seconds / 1e9;
            rates[static_cast<size_t>(core)] = std::max(rates[static_cast<size_t>(core)], rate);
          }
        }
      },
      cores);
  double total = 0;
  for (double r : rates) total += r;
  return total;
}

void prepare_gemm(const LaunchPlan::Gemm& g) {
  if (!empty_product(g)) micro_kernels(g);
}

void run_gemm(const LaunchPlan::Gemm& g, const std::byte* a, const std::byte* b, std::byte* c,
              const ImmutableOperands& fixed) {
  dispatch(g, a, b, c, nullptr, fixed);
}

bool run_gemm_by_blocks(const LaunchPlan::Gemm& g, const std::byte* a, const std::byte* b, std::byte* c,
                        const BlockDone& block_done, int64_t column_granule, const ImmutableOperands& fixed) {
  if (g.n > column_block(g) && (column_granule <= 0 || column_block(g) % column_granule != 0)) return false;
  if (empty_product(g)) {
    block_done(0, g.batch.numel() * g.m, 0, g.n);
    return true;
  }
  dispatch(g, a, b, c, &block_done, fixed);
  return true;
}

}  // namespace kiln::cpu
