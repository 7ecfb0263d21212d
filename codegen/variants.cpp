// codegen/variants.cpp - the knob space of a schedule, variants applied to it, and the keys
// the autotuner files a kernel under.
#include "kiln/codegen/variants.h"

#include <algorithm>
#include <numeric>
#include <charconv>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "kiln/codegen/c_source.h"

namespace kiln::kir {
namespace {

// Domain points per task that the cpu knob `task_elements` offers: from what hides the
// scheduler's cost on one core's worth of L1 to a few MiB per task.
constexpr int64_t kTaskElements[] = {4096, 16384, 65536, 262144};
// More tasks than this per launch cost more in scheduling than they gain in balance.
constexpr int64_t kMostTasks = 4096;

std::vector<int64_t> powers_of_two(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t p = from; p <= to; p *= 2) v.push_back(p);
  return v;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// "softplus.TERMS": the custom kernel's name keeps two kernels' macros apart.
std::string custom_knob_name(const CustomKernel& c, size_t tunable) {
  return c.name + "." + c.signature.tunables[tunable].macro;
}

void add(std::vector<Knob>& knobs, std::string name, std::vector<int64_t> values, int64_t current) {
  if (std::find(values.begin(), values.end(), current) == values.end()) values.push_back(current);
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  if (values.size() > 1) knobs.push_back({std::move(name), std::move(values), current});
}

// The knob that is field `name` of `base` (kiln/codegen/schedule.def), around its value there.
void add(std::vector<Knob>& knobs, const Schedule& base, std::string_view name, std::vector<int64_t> values) {
  const std::optional<int64_t> current = base.field(name);
  if (!current) throw std::logic_error(fmt::format("schedule knob '{}' is no field of the {} schedule", name,
                                                   device_family_name(base.family)));
  add(knobs, std::string(name), std::move(values), *current);
}

bool has_reduction_of_kind(const Kernel& k, bool arg) {
  return std::any_of(k.insts.begin(), k.insts.end(), [&](const Inst& in) {
    return in.code == Code::Reduce && op_info(in.op).has(trait::ArgReduce) == arg;
  });
}

// Whether `s` is worth timing on `caps` at all: the parallel split of a cpu-kind device
// neither drowns in tasks nor leaves cores idle on work worth splitting, and a tree of
// work-items is no wider than the row it reduces.
bool plausible(const Schedule& s, const Capabilities& caps) {
  if (s.family == DeviceFamily::WorkItems) {
    if (s.work_items.reduction != ReductionStrategy::Serial && s.lanes_reduce) {
      int64_t fit = 1;
      while (fit < s.elements_per_iteration) fit *= 2;
      if (s.work_items.local_size > std::max<int64_t>(fit, caps.subgroup_size)) return false;
    }
    return true;
  }
  const int64_t grain = s.task_grain();
  const int64_t tasks = grain >= s.iterations ? 1 : ceil_div(s.iterations, grain);
  if (tasks > kMostTasks) return false;
  const bool worth_splitting = s.iterations * std::max<int64_t>(1, s.elements_per_iteration) >= (1 << 15);
  const int64_t workers = s.cpu.threads > 0 ? std::min(s.cpu.threads, caps.cores) : caps.cores;
  if (tasks > 1 && tasks < workers && worth_splitting) return false;
  return true;
}

// Whether every setting of `v` names one of `knobs` and a value among its values.
bool names_legal_values(const std::vector<Knob>& knobs, const Variant& v) {
  return std::all_of(v.settings.begin(), v.settings.end(), [&](const auto& setting) {
    auto knob = std::find_if(knobs.begin(), knobs.end(), [&](const Knob& kn) { return kn.name == setting.first; });
    return knob != knobs.end() &&
           std::find(knob->values.begin(), knob->values.end(), setting.second) != knob->values.end();
  });
}

std::optional<int64_t> setting(const Variant& v, std::string_view name) {
  for (const auto& [n, value] : v.settings)
    if (n == name) return value;
  return std::nullopt;
}

// Every single-knob change of `base` that `apply` accepts and `keep` does not rule out,
// deduplicated by the schedule it gives, in the order they are timed: the knobs in turn,
// each knob's values nearest the default's first. A tuning whose budget runs out early has
// then tried every knob's nearest values, not all of the first knob's (PoCL's W3 ran out
// after five `local_size` values, before any `vector_width` value, which would have made it 2x faster).
template <class S, class Apply, class Keep>
std::vector<Variant> single_knob_changes(const std::vector<Knob>& knobs, const S& base, Apply apply, Keep keep) {
  std::vector<std::vector<Variant>> per_knob;
  std::vector<S> seen = {base};
  for (const Knob& knob : knobs) {
    // The values by their distance in steps from the default's, the smaller first on a tie.
    const auto home = std::find(knob.values.begin(), knob.values.end(), knob.current) - knob.values.begin();
    std::vector<std::pair<int64_t, int64_t>> order;  // (rank, value)
    for (size_t i = 0; i < knob.values.size(); ++i) {
      const auto d = static_cast<int64_t>(i) - home;
      order.emplace_back(2 * std::abs(d) - (d < 0 ? 1 : 0), knob.values[i]);
    }
    std::sort(order.begin(), order.end());
    per_knob.emplace_back();
    for (const auto& [distance, value] : order) {
      Variant v;
      v.settings.emplace_back(knob.name, value);
      const std::optional<S> s = apply(v);
      if (!s || !keep(*s) || std::find(seen.begin(), seen.end(), *s) != seen.end()) continue;
      seen.push_back(*s);
      per_knob.back().push_back(std::move(v));
    }
  }
  std::vector<Variant> out;
  for (size_t round = 0;; ++round) {
    const size_t before = out.size();
    for (const std::vector<Variant>& vs : per_knob)
      if (round < vs.size()) out.push_back(vs[round]);
    if (out.size() == before) return out;
  }
}

int64_t round_up(int64_t x, int64_t to) { return ceil_div(x, to) * to; }

// Whether a register tile of mr rows by `vectors` vectors fits the registers, with B's
// vectors and A's broadcast value beside the accumulators.
bool tile_fits_registers(int64_t mr, int64_t vectors, const Capabilities& caps) {
  return mr >= 1 && vectors >= 1 && mr * vectors + vectors + 1 <= gemm_vector_registers(caps);
}

// Local memory one step of a work-group tile stages: kept within what every device offers
// (Vulkan guarantees 16 KiB; OpenCL's full profile 32 KiB).
constexpr int64_t kGemmLocalBytes = 16 << 10;

}  // namespace

namespace {

// The knobs whose values are names, spelled as Schedule::str spells them: `pipeline=o2`,
// `reduction=workgroup-tree`. Their numbers are accepted too (tuning rows written before).
std::optional<std::string_view> value_name(std::string_view knob, int64_t value) {
  if (knob == "pipeline" && value >= 0 && value <= static_cast<int64_t>(CpuPipeline::O2))
    return cpu_pipeline_name(static_cast<CpuPipeline>(value));
  if (knob == "reduction" && value >= 0 && value <= static_cast<int64_t>(ReductionStrategy::Subgroup))
    return reduction_strategy_name(static_cast<ReductionStrategy>(value));
  return std::nullopt;
}

// Knobs that kiln before 2026-12 named apart from their fields. Tuning rows written then
// still parse: their settings read under the field's name.
constexpr std::pair<std::string_view, std::string_view> kRenamedKnobs[] = {
    {"local", "local_size"},
    {"per_item", "elements_per_item"},
    {"row_cache", "row_cache_elements"},
    {"vector", "vector_width"},
};

std::string_view current_knob_name(std::string_view name) {
  for (const auto& [old_name, field] : kRenamedKnobs)
    if (name == old_name) return field;
  return name;
}

std::optional<int64_t> value_of_name(std::string_view knob, std::string_view text) {
  for (int64_t v = 0; v < 8; ++v)
    if (const auto name = value_name(knob, v); name && *name == text) return v;
  return std::nullopt;
}

}  // namespace

std::string Variant::str() const {
  if (settings.empty()) return "default";
  std::string out;
  for (const auto& [name, value] : settings) {
    const auto named = value_name(name, value);
    out += named ? fmt::format("{}{}={}", out.empty() ? "" : " ", name, *named)
                 : fmt::format("{}{}={}", out.empty() ? "" : " ", name, value);
  }
  return out;
}

std::optional<Variant> Variant::parse(std::string_view text) {
  Variant v;
  if (text == "default") return v;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(pos, end - pos);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) return std::nullopt;
    int64_t value = 0;
    const std::string_view knob = item.substr(0, eq), digits = item.substr(eq + 1);
    if (const std::optional<int64_t> named = value_of_name(knob, digits)) {
      value = *named;
    } else {
      auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (ec != std::errc() || ptr != digits.data() + digits.size()) return std::nullopt;
    }
    v.settings.emplace_back(std::string(knob), value);
    pos = end + 1;
  }
  // Sorted as printed, then under the knobs' current names (a row written before a rename
  // sorts by the old ones).
  auto sorted_unique = [](const Variant& x) {
    if (x.settings.empty() || !std::is_sorted(x.settings.begin(), x.settings.end())) return false;
    for (size_t i = 1; i < x.settings.size(); ++i)
      if (x.settings[i].first == x.settings[i - 1].first) return false;
    return true;
  };
  if (!sorted_unique(v)) return std::nullopt;
  for (auto& [name, value] : v.settings) name = std::string(current_knob_name(name));
  std::sort(v.settings.begin(), v.settings.end());
  if (!sorted_unique(v)) return std::nullopt;
  return v;
}

std::vector<Knob> schedule_knobs(const Kernel& k, const Schedule& base, const Capabilities& caps) {
  std::vector<Knob> knobs;
  const int rank = k.domain.rank();
  if (rank == 0 || k.in_order) return knobs;  // an in-order walk has one schedule
  const bool reduces = k.has_reduction();
  for (size_t c = 0; c < k.customs.size(); ++c) {
    const auto values = custom_macro_values(k, base, c);
    for (size_t t = 0; t < values.size(); ++t)
      add(knobs, custom_knob_name(*k.customs[c], t), k.customs[c]->signature.tunables[t].values, values[t].second);
  }
  if (base.family == DeviceFamily::WorkItems) {
    const int64_t most = std::min<int64_t>(1024, std::max<int64_t>(1, caps.max_work_group));
    add(knobs, base, "local_size", powers_of_two(std::min<int64_t>(32, most), most));
    add(knobs, base, "elements_per_item", {1, 2, 4, 8});
    add(knobs, base, "vector_width", work_item_lane_counts(k));
    if (base.lanes_reduce && caps.max_work_group > 1 && caps.local_memory) {
      std::vector<int64_t> strategies = {static_cast<int64_t>(ReductionStrategy::Serial),
                                         static_cast<int64_t>(ReductionStrategy::WorkGroupTree)};
      if (caps.subgroup_size > 1) strategies.push_back(static_cast<int64_t>(ReductionStrategy::Subgroup));
      add(knobs, base, "reduction", strategies);
      // How a work-group walks its row; how many accumulator chains a row per work-item of
      // vector lanes keeps (settle_row_walk: a setting the strategy ignores is dropped, so
      // it yields the base schedule, which the tuner measures once).
      add(knobs, base, "row_blocks", {0, 1});
      if (caps.vector_values && c_lanes_as_vectors(k, base.vector_width)) add(knobs, base, "accumulators", {1, 2, 4});
    }
    // A row per work-item's row cache (PoCL): off, or the default.
    if (!row_cached_values(k, base).empty()) add(knobs, base, "row_cache_elements", {0});
    return knobs;
  }
  // Arg reductions keep their index bookkeeping per lane: scalar code only.
  if (base.vector_width > 1 && !has_reduction_of_kind(k, /*arg=*/true)) {
    // Up to twice the registers' width, also where the default took narrower vectors.
    const int64_t widest = std::max(base.vector_width, register_lanes(k, caps));
    add(knobs, base, "vector_width", powers_of_two(1, std::min<int64_t>(64, 2 * widest)));
    add(knobs, base, "vector_unroll", {1, 2, 4, 8});
  }
  if (base.lanes_reduce && base.vector_width > 1) {
    add(knobs, base, "accumulators", {1, 2, 4});
    if (base.row_cache_elements >= base.elements_per_iteration) add(knobs, base, "row_cache_elements", {0});
    add(knobs, base, "prefetch_rows", {0, 1});
  }
  if (!base.lanes_reduce) {
    const int64_t last = walked_row(k, base);
    std::vector<int64_t> tiles;
    for (int64_t t : {256, 1024, 4096, 16384})
      if (t < 2 * last) tiles.push_back(t);
    add(knobs, base, "tile", tiles);
    if (base.vector_width > 1 && merged_row_dim(k) >= 0) add(knobs, base, "merge_rows", {0, 1});
    if (reduces && has_reduction_of_kind(k, /*arg=*/false)) add(knobs, base, "unroll", {1, 2, 4, 8});
    if (reduces && window_rows(k) > 1 && window_rows(k) <= kMaxUnrolledWindowRows)
      add(knobs, base, "unroll_window", {0, 1});
    if (reduces && !base.cpu.merge_rows && !window_row_bounds(k, affine_analysis(k), rank - 1).empty())
      add(knobs, base, "split_rows", {0, 1});
    if (base.vector_width > 1 && !base.cpu.split_lanes) add(knobs, base, "masked_tail", {0, 1});
  }
  if (base.cpu.split_lanes) add(knobs, base, "split_lanes", {0, 1, 2});
  add(knobs, base, "pipeline", {static_cast<int64_t>(CpuPipeline::Lean), static_cast<int64_t>(CpuPipeline::O2)});
  if (caps.cores > 1 && base.iterations >= 2) {
    std::vector<int64_t> task_elements(std::begin(kTaskElements), std::end(kTaskElements));
    task_elements.push_back(0);  // one task
    add(knobs, base, "task_elements", task_elements);
    // Fewer workers than cores: a kernel bound by memory bandwidth may saturate it with
    // fewer, and a small one pays fewer wake-ups (0, the default, is every core).
    if (base.task_grain() < base.iterations) add(knobs, base, "threads", powers_of_two(1, caps.cores / 2));
  }
  return knobs;
}

std::optional<Schedule> apply_variant(const Kernel& k, const Schedule& base, const Variant& v,
                                      const Capabilities& caps) {
  if (v.is_default()) return base;
  if (!names_legal_values(schedule_knobs(k, base, caps), v)) return std::nullopt;
  Schedule s = base;
  for (size_t c = 0, flat = 0; c < k.customs.size(); ++c)
    for (size_t t = 0; t < k.customs[c]->signature.tunables.size(); ++t, ++flat)
      if (auto x = setting(v, custom_knob_name(*k.customs[c], t)); x && flat < s.custom_macros.size())
        s.custom_macros[flat] = *x;
  // Every other knob is the field it names; what derives from the fields follows.
  for (const auto& [name, value] : v.settings) s.set_field(name, value);
  if (s.family == DeviceFamily::WorkItems) {
    auto knob = [&](std::string_view name) -> std::optional<int> {
      if (auto x = setting(v, name)) return static_cast<int>(*x);
      return std::nullopt;
    };
    settle_row_walk(k, s, caps, knob("accumulators"), knob("row_blocks"));
    const WorkItemSchedule& w = s.work_items;
    if (w.reduction == ReductionStrategy::Subgroup && w.local_size % std::max(1, caps.subgroup_size) != 0)
      return std::nullopt;
    if (w.reduction != ReductionStrategy::Serial && (!s.lanes_reduce || w.local_size < 2)) return std::nullopt;
    const std::optional<int64_t> per_item = setting(v, "elements_per_item");
    place_work_items(s, caps, per_item.value_or(1));
    if (per_item && w.elements_per_item != *per_item) return std::nullopt;
  } else {
    // The tile of a newly merged (or unmerged) row counts points of another dim: as long as
    // the new row allows, unless the variant sets it too.
    const bool merge_changed = s.cpu.merge_rows != base.cpu.merge_rows;
    if (merge_changed && !setting(v, "tile")) s.tile = 4096;
    if (merge_changed || setting(v, "tile")) update_walk(k, s);
  }
  if (caps.max_loop_iterations > 0 && c_loop_iterations(k, s, caps) > caps.max_loop_iterations) return std::nullopt;
  return s;
}

std::vector<Variant> single_knob_variants(const Kernel& k, const Schedule& base, const Capabilities& caps) {
  return single_knob_changes(
      schedule_knobs(k, base, caps), base, [&](const Variant& v) { return apply_variant(k, base, v, caps); },
      [&](const Schedule& s) { return plausible(s, caps); });
}

std::vector<Knob> gemm_schedule_knobs(const LaunchPlan::Gemm& g, const GemmSchedule& base, const Capabilities& caps) {
  std::vector<Knob> knobs;
  if (g.m == 0 || g.n == 0 || g.batch.numel() == 0) return knobs;  // nothing is computed
  if (base.group_m > 0) {
    std::vector<int64_t> rows, cols;
    for (int64_t e : {16, 32, 64, 128}) {
      if (e % base.mr == 0 && e < 2 * round_up(g.m, base.mr)) rows.push_back(e);
      if (e % base.nr == 0 && e < 2 * round_up(g.n, base.nr)) cols.push_back(e);
    }
    add(knobs, "group_m", rows, base.group_m);
    add(knobs, "group_n", cols, base.group_n);
    if (g.k > 8) add(knobs, "group_k", {8, 16, 32}, base.group_k);
    return knobs;
  }
  // With channel_lanes the tile's rows are output positions and its columns channels.
  const bool lanes = base.channel_lanes > 0;
  const int64_t rows = lanes ? g.n : g.m, columns = lanes ? g.m : g.n;
  const int64_t vectors = base.nr / base.vector_width;
  std::vector<int64_t> mrs, nrs, kcs, mcs;
  for (int64_t mr : {2, 4, 6, 7, 8, 10, 12, 14})
    if (tile_fits_registers(mr, vectors, caps) && (lanes ? mr <= base.vector_width : mr != 7)) mrs.push_back(mr);
  for (int64_t v : {1, 2, 3, 4})
    if (tile_fits_registers(base.mr, v, caps) && v * base.vector_width < 2 * round_up(columns, base.vector_width))
      nrs.push_back(v * base.vector_width);
  for (int64_t kc : {64, 128, 256, 512, 1024})
    if (kc <= g.k) kcs.push_back(kc);
  for (int64_t panels : {2, 4, 8, 16, 32, 64})
    if (!lanes && panels * base.mr < round_up(rows, base.mr)) mcs.push_back(panels * base.mr);
  add(knobs, "mr", mrs, base.mr);
  add(knobs, "nr", nrs, base.nr);
  add(knobs, "kc", kcs, base.kc);
  add(knobs, "mc", mcs, base.mc);
  if (g.im2col && windows_in_place_legal(*g.im2col)) {
    if (!lanes) add(knobs, "windows_in_place", {0, 1}, base.windows_in_place);
    add(knobs, "channel_lanes", {0, 1}, base.channel_lanes);
  } else if (g.b_columns_adjacent()) {
    add(knobs, "channel_lanes", {0, 1}, base.channel_lanes);
  }
  if (g.k > 1 && !lanes) add(knobs, "prefetch_a", {0, 16, 64, 256}, base.prefetch_a);
  if (g.n > base.nr && !lanes) add(knobs, "prefetch_b", {0, 1}, base.prefetch_b);
  // Fewer workers than cores, as for kernels: a product that splits into tasks may run
  // faster on fewer when the cores share their caches or other work.
  const int64_t tasks = g.batch.numel() * ((rows + base.mc - 1) / base.mc) * ((columns + base.nc - 1) / base.nc);
  if (g.m * g.n * g.k >= base.serial_below && tasks > 1)
    add(knobs, "threads", powers_of_two(1, caps.cores / 2), base.threads);
  return knobs;
}

std::optional<GemmSchedule> apply_gemm_variant(const LaunchPlan::Gemm& g, const GemmSchedule& base, const Variant& v,
                                               const Capabilities& caps) {
  if (v.is_default()) return base;
  if (!names_legal_values(gemm_schedule_knobs(g, base, caps), v)) return std::nullopt;
  GemmSchedule s = base;
  // The other form of a product blocks the transposed product: it starts from
  // that form's default blocking (its epilogue, unknown here, then runs apart).
  const int64_t lanes = setting(v, "channel_lanes").value_or(base.channel_lanes);
  if (lanes != base.channel_lanes)
    s = default_gemm_schedule(g.dtype, g.m, g.n, g.k, caps, 0, g.im2col ? &*g.im2col : nullptr, lanes > 0);
  const GemmSchedule start = s;
  if (base.group_m > 0) {
    s.group_m = setting(v, "group_m").value_or(s.group_m);
    s.group_n = setting(v, "group_n").value_or(s.group_n);
    s.group_k = setting(v, "group_k").value_or(s.group_k);
    const int64_t staged = (s.group_m + s.group_n) * s.group_k * static_cast<int64_t>(dtype_size(g.dtype));
    // 2 work-items: the group PoCL's work-group compiler aborts on (default_gemm_schedule).
    if (s.local_size() > std::max<int64_t>(1, caps.max_work_group) || s.local_size() == 2 || staged > kGemmLocalBytes)
      return std::nullopt;
    LaunchPlan::Gemm tiled = g;
    tiled.schedule = s;
    if (caps.max_loop_iterations > 0 && c_gemm_loop_iterations(tiled) > caps.max_loop_iterations) return std::nullopt;
    return s;
  }
  s.mr = static_cast<int>(setting(v, "mr").value_or(s.mr));
  s.nr = static_cast<int>(setting(v, "nr").value_or(s.nr));
  s.threads = static_cast<int>(setting(v, "threads").value_or(s.threads));
  s.windows_in_place = static_cast<int>(setting(v, "windows_in_place").value_or(s.windows_in_place));
  s.prefetch_a = static_cast<int>(setting(v, "prefetch_a").value_or(s.prefetch_a));
  s.prefetch_b = static_cast<int>(setting(v, "prefetch_b").value_or(s.prefetch_b));
  if (!tile_fits_registers(s.mr, s.nr / s.vector_width, caps)) return std::nullopt;
  if (s.channel_lanes > 0 &&
      ((g.im2col && s.windows_in_place == 0) || s.prefetch_a > 0 || s.prefetch_b > 0 || s.mr > s.vector_width))
    return std::nullopt;
  if (auto kc = setting(v, "kc")) s.kc = *kc;
  // Blocks stay whole register tiles, and a multiple of what they were: the default cuts the
  // columns where the epilogue can run on each block (as wide as the product, or on whole
  // lines of a convolution's plane; cpu_gemm.cpp), and a multiple keeps that. With
  // channel_lanes, a block of positions is whole lines whatever the tile (cpu_gemm.cpp cuts
  // the tiles at each line's end).
  if (s.channel_lanes == 0) s.mc = round_up(setting(v, "mc").value_or(s.mc), s.mr);
  s.nc = std::lcm<int64_t>(start.nc, s.nr);
  return s;
}

std::vector<Variant> single_knob_gemm_variants(const LaunchPlan::Gemm& g, const GemmSchedule& base,
                                               const Capabilities& caps) {
  return single_knob_changes(
      gemm_schedule_knobs(g, base, caps), base, [&](const Variant& v) { return apply_gemm_variant(g, base, v, caps); },
      [](const GemmSchedule&) { return true; });
}

std::string gemm_structure(const LaunchPlan::Gemm& g) {
  // The batch dims' count and which operand each broadcasts over, and which operand's rows
  // are not contiguous (a transposed view, read in place): what the walk depends on.
  std::string out = fmt::format("gemm {}", dtype_name(g.dtype));
  for (size_t d = 0; d < g.a_batch_stride.size(); ++d)
    out += fmt::format(" batch{}{}", g.a_batch_stride[d] == 0 ? "-a" : "", g.b_batch_stride[d] == 0 ? "-b" : "");
  if (g.a_col_stride != 1) out += " a-strided";
  if (g.im2col) out += fmt::format(" b-im2col{}d", g.im2col->dims);
  else if (g.b_col_stride != 1) out += " b-strided";
  return out;
}

std::string gemm_shape_bucket(const LaunchPlan::Gemm& g) {
  auto up = [](int64_t x) {
    int64_t p = 1;
    while (p < x) p *= 2;
    return x == 0 ? 0 : p;
  };
  const std::string mnk = fmt::format("{}x{}x{}", up(g.m), up(g.n), up(g.k));
  return g.batch.rank() == 0 ? mnk : fmt::format("{}b{}", mnk, up(g.batch.numel()));
}

std::string kernel_structure(const Kernel& k) {
  Kernel masked = k;
  masked.name.clear();
  for (int d = 0; d < masked.domain.rank(); ++d) masked.domain[d] = 0;
  const std::vector<bool> index = index_instructions(k);
  for (size_t i = 0; i < masked.insts.size(); ++i) {
    Inst& in = masked.insts[i];
    if (!index[i]) continue;
    if (in.code == Code::Const) in.literal = Scalar::from_int(0);
    if (in.code == Code::IndexDiv || in.code == Code::IndexMod) in.imm = 0;
  }
  for (BufferParam& b : masked.buffers) b.type.shape = Shape{};
  return masked.str(/*names=*/false);
}

std::string shape_bucket(const Kernel& k) {
  std::string out;
  for (int d = 0; d < k.domain.rank(); ++d) {
    int64_t p = 1;
    while (p < k.domain[d]) p *= 2;
    out += fmt::format("{}{}{}", d == 0 ? "" : "x", k.domain[d] == 0 ? 0 : p,
                       k.reduced[static_cast<size_t>(d)] ? "r" : "");
  }
  return out.empty() ? "scalar" : out;
}

}  // namespace kiln::kir
