// The schedule's fields, declared once in kiln/codegen/schedule.def: each one of the walk,
// the common part and the device family's part is in the cache key (a field left out of
// Schedule::str would let two different kernels share a cache entry), the other family's
// part is not, and every field of the family is a knob by its own name.
#include <gtest/gtest.h>

#include <type_traits>

#include "kiln/codegen/schedule.h"
#include "kiln/codegen/variants.h"
#include "test_util.h"

namespace kiln {
namespace {

template <class T>
T another(T v) {
  if constexpr (std::is_same_v<T, bool>) return !v;
  else if constexpr (std::is_enum_v<T>) return static_cast<T>(static_cast<int>(v) + 1);
  else return v + 1;
}

kir::Schedule of_family(DeviceFamily f) {
  kir::Schedule s;
  s.family = f;
  return s;
}

TEST(ScheduleFields, EveryFieldOfTheFamilyChangesTheKey) {
  for (DeviceFamily f : {DeviceFamily::Cpu, DeviceFamily::WorkItems}) {
    const kir::Schedule base = of_family(f);
    int fields = 0;
    auto expect_in_key = [&](const kir::Schedule& changed, const char* name) {
      EXPECT_NE(changed.str(), base.str()) << name << " is not in the " << device_family_name(f) << " key";
      ++fields;
    };
    auto expect_not_in_key = [&](const kir::Schedule& changed, const char* name) {
      EXPECT_EQ(changed.str(), base.str()) << name << " of the other family is in the " << device_family_name(f)
                                           << " key";
    };
    kir::Schedule s;
#define KILN_WALK_FIELD(type, name, init) \
  s = base;                               \
  s.name = another(s.name);               \
  expect_in_key(s, #name);
#define KILN_COMMON_FIELD(type, name, init) \
  s = base;                                 \
  s.name = another(s.name);                 \
  expect_in_key(s, #name);
#define KILN_CPU_FIELD(type, name, init)                                                  \
  s = base;                                                                               \
  s.cpu.name = another(s.cpu.name);                                                       \
  if (f == DeviceFamily::Cpu) expect_in_key(s, #name);                                    \
  else expect_not_in_key(s, #name);
#define KILN_WORK_ITEM_FIELD(type, name, init)                                            \
  s = base;                                                                               \
  s.work_items.name = another(s.work_items.name);                                         \
  if (f == DeviceFamily::WorkItems) expect_in_key(s, #name);                              \
  else expect_not_in_key(s, #name);
#include "kiln/codegen/schedule.def"
    EXPECT_GT(fields, 10);
    s = base;
    s.custom_macros = {3};
    EXPECT_NE(s.str(), base.str());
    EXPECT_NE(of_family(DeviceFamily::Cpu).str(), of_family(DeviceFamily::WorkItems).str());
  }
}

TEST(ScheduleFields, KnobsAreTheFieldsOfTheCommonAndFamilyParts) {
  kir::Schedule cpu = of_family(DeviceFamily::Cpu), items = of_family(DeviceFamily::WorkItems);
#define KILN_COMMON_FIELD(type, name, init)                        \
  EXPECT_TRUE(cpu.set_field(#name, 3)) << #name;                   \
  EXPECT_EQ(cpu.field(#name), static_cast<int64_t>(cpu.name)) << #name; \
  EXPECT_TRUE(items.field(#name)) << #name;
#define KILN_CPU_FIELD(type, name, init)                                \
  EXPECT_TRUE(cpu.set_field(#name, 1)) << #name;                        \
  EXPECT_EQ(cpu.field(#name), static_cast<int64_t>(cpu.cpu.name)) << #name; \
  EXPECT_FALSE(items.field(#name)) << #name;                            \
  EXPECT_FALSE(items.set_field(#name, 1)) << #name;
#define KILN_WORK_ITEM_FIELD(type, name, init)                                       \
  EXPECT_TRUE(items.set_field(#name, 1)) << #name;                                   \
  EXPECT_EQ(items.field(#name), static_cast<int64_t>(items.work_items.name)) << #name; \
  EXPECT_FALSE(cpu.field(#name)) << #name;
#include "kiln/codegen/schedule.def"
  // The walk derives from the domain: no knob sets it.
  EXPECT_FALSE(cpu.set_field("iterations", 4));
  EXPECT_FALSE(cpu.field("no_such_field"));
  EXPECT_EQ(cpu.cpu.pipeline, kir::CpuPipeline::O2);
  EXPECT_EQ(items.work_items.reduction, kir::ReductionStrategy::WorkGroupTree);
}

// The tile of a kernel whose walk depends on it is a knob, and a variant's task size holds
// over the walk it gives: `task_elements` counts domain points, not iterations.
TEST(ScheduleFields, TaskElementsHoldOverANewTile) {
  const kir::Kernel k = test::only_kernel(
      "graph @g(%x: f32[64, 8192]) -> f32[64, 8192] {\n  %y = exp %x : f32[64, 8192]\n  return %y\n}\n");
  Capabilities caps;
  caps.cores = 4;
  caps.vector_bytes = 32;
  const kir::Schedule base = kir::default_schedule(k, caps);
  ASSERT_EQ(base.cpu.task_elements, 16384);
  ASSERT_EQ(base.task_grain() * base.elements_per_iteration, 16384);
  const std::optional<kir::Schedule> tiled = kir::apply_variant(k, base, *kir::Variant::parse("tile=1024"), caps);
  ASSERT_TRUE(tiled);
  EXPECT_EQ(tiled->elements_per_iteration, 1024);
  EXPECT_EQ(tiled->task_grain(), 16);
  const std::optional<kir::Schedule> one_task =
      kir::apply_variant(k, base, *kir::Variant::parse("task_elements=0"), caps);
  ASSERT_TRUE(one_task);
  EXPECT_EQ(one_task->task_grain(), one_task->iterations);
}

}  // namespace
}  // namespace kiln
