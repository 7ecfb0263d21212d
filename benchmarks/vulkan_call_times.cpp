// vulkan_call_times.cpp - where a Vulkan program's host time goes, call by call: an
// LD_PRELOAD library that times the Vulkan entry points kiln's backend calls on every launch
// and synchronization, and prints per entry point its calls, total and mean time when the
// process exits. What it answers: of a vulkan:N launch's fixed cost (benchmarks/RESULTS.md),
// how much is the driver's submit and fence wait, and how much is kiln's bookkeeping around it.
//   LD_PRELOAD=build/lib/libkiln_vulkan_call_times.so build/bin/kiln_workload_bench --device vulkan:0 ...
// It finds the loader's functions with dlsym(RTLD_NEXT), so it works wherever the program
// links libvulkan.so.1 itself (kiln does) rather than going through vkGet*ProcAddr.
#include <dlfcn.h>
#include <vulkan/vulkan.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

struct Stat {
  const char* name;
  std::atomic<long long> calls{0}, ns{0};
};

struct Report {
  std::vector<Stat*> stats;
  ~Report() {
    std::sort(stats.begin(), stats.end(), [](const Stat* a, const Stat* b) { return a->ns > b->ns; });
    std::fprintf(stderr, "vulkan call times (host, whole process):\n%-28s %10s %12s %10s\n", "entry point", "calls",
                 "total ms", "mean us");
    for (const Stat* s : stats)
      if (s->calls > 0)
        std::fprintf(stderr, "%-28s %10lld %12.3f %10.2f\n", s->name, s->calls.load(), s->ns / 1e6,
                     static_cast<double>(s->ns) / 1e3 / static_cast<double>(s->calls));
  }
};

Report& report() {
  static Report r;
  return r;
}

template <typename Fn>
Fn next(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (!f) {
    std::fprintf(stderr, "vulkan_call_times: no %s after this library\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

// Times one call of the real entry point `Name` and adds it to that entry point's row.
template <typename Fn, const char* Name>
struct Timed {
  static Stat& stat() {
    static Stat* s = [] {
      auto* made = new Stat{Name};
      report().stats.push_back(made);
      return made;
    }();
    return *s;
  }
  template <typename... Args>
  static auto call(Args... args) {
    static const Fn real = next<Fn>(Name);
    Stat& s = stat();
    const auto t0 = std::chrono::steady_clock::now();
    struct Add {
      Stat& s;
      std::chrono::steady_clock::time_point t0;
      ~Add() {
        s.ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
        s.calls += 1;
      }
    } add{s, t0};
    return real(args...);
  }
};

}  // namespace

#define KILN_TIMED(ret, name, params, args)               \
  namespace {                                             \
  constexpr char name##_name[] = #name;                   \
  }                                                       \
  extern "C" VKAPI_ATTR ret VKAPI_CALL name params {      \
    return Timed<PFN_##name, name##_name>::call args;     \
  }

KILN_TIMED(VkResult, vkQueueSubmit, (VkQueue q, uint32_t n, const VkSubmitInfo* s, VkFence f), (q, n, s, f))
KILN_TIMED(VkResult, vkWaitForFences, (VkDevice d, uint32_t n, const VkFence* f, VkBool32 all, uint64_t t),
           (d, n, f, all, t))
KILN_TIMED(VkResult, vkResetFences, (VkDevice d, uint32_t n, const VkFence* f), (d, n, f))
KILN_TIMED(VkResult, vkBeginCommandBuffer, (VkCommandBuffer c, const VkCommandBufferBeginInfo* i), (c, i))
KILN_TIMED(VkResult, vkEndCommandBuffer, (VkCommandBuffer c), (c))
KILN_TIMED(VkResult, vkResetCommandBuffer, (VkCommandBuffer c, VkCommandBufferResetFlags f), (c, f))
KILN_TIMED(VkResult, vkAllocateDescriptorSets,
           (VkDevice d, const VkDescriptorSetAllocateInfo* i, VkDescriptorSet* s), (d, i, s))
KILN_TIMED(void, vkUpdateDescriptorSets,
           (VkDevice d, uint32_t nw, const VkWriteDescriptorSet* w, uint32_t nc, const VkCopyDescriptorSet* c),
           (d, nw, w, nc, c))
KILN_TIMED(VkResult, vkResetDescriptorPool, (VkDevice d, VkDescriptorPool p, VkDescriptorPoolResetFlags f), (d, p, f))
KILN_TIMED(VkResult, vkAllocateMemory,
           (VkDevice d, const VkMemoryAllocateInfo* i, const VkAllocationCallbacks* a, VkDeviceMemory* m), (d, i, a, m))
KILN_TIMED(void, vkFreeMemory, (VkDevice d, VkDeviceMemory m, const VkAllocationCallbacks* a), (d, m, a))
KILN_TIMED(VkResult, vkCreateBuffer,
           (VkDevice d, const VkBufferCreateInfo* i, const VkAllocationCallbacks* a, VkBuffer* b), (d, i, a, b))
KILN_TIMED(void, vkDestroyBuffer, (VkDevice d, VkBuffer b, const VkAllocationCallbacks* a), (d, b, a))
KILN_TIMED(VkResult, vkBindBufferMemory, (VkDevice d, VkBuffer b, VkDeviceMemory m, VkDeviceSize o), (d, b, m, o))
KILN_TIMED(VkResult, vkMapMemory,
           (VkDevice d, VkDeviceMemory m, VkDeviceSize o, VkDeviceSize s, VkMemoryMapFlags f, void** p),
           (d, m, o, s, f, p))
KILN_TIMED(void, vkCmdDispatch, (VkCommandBuffer c, uint32_t x, uint32_t y, uint32_t z), (c, x, y, z))
KILN_TIMED(void, vkCmdPipelineBarrier,
           (VkCommandBuffer c, VkPipelineStageFlags s, VkPipelineStageFlags d, VkDependencyFlags f, uint32_t nm,
            const VkMemoryBarrier* m, uint32_t nb, const VkBufferMemoryBarrier* b, uint32_t ni,
            const VkImageMemoryBarrier* i),
           (c, s, d, f, nm, m, nb, b, ni, i))
KILN_TIMED(void, vkCmdCopyBuffer,
           (VkCommandBuffer c, VkBuffer s, VkBuffer d, uint32_t n, const VkBufferCopy* r), (c, s, d, n, r))
KILN_TIMED(void, vkCmdBindPipeline, (VkCommandBuffer c, VkPipelineBindPoint b, VkPipeline p), (c, b, p))
KILN_TIMED(void, vkCmdBindDescriptorSets,
           (VkCommandBuffer c, VkPipelineBindPoint b, VkPipelineLayout l, uint32_t first, uint32_t n,
            const VkDescriptorSet* s, uint32_t nd, const uint32_t* d),
           (c, b, l, first, n, s, nd, d))
KILN_TIMED(void, vkCmdPushConstants,
           (VkCommandBuffer c, VkPipelineLayout l, VkShaderStageFlags s, uint32_t o, uint32_t n, const void* v),
           (c, l, s, o, n, v))
KILN_TIMED(VkResult, vkGetPipelineCacheData, (VkDevice d, VkPipelineCache p, size_t* n, void* v), (d, p, n, v))
