// backends/vulkan/vulkan_backend.cpp - the `vulkan:N` devices: GLSL compute shaders from the
// shared C-family emitter (kir::glsl_source), SPIR-V by shaderc, one compute queue.
//
// Work is recorded, not run: launches, copies and uploads go into one command buffer with the
// pipeline barriers their buffers' dependencies need, and the buffer is submitted once, when
// the host must see a result (download) or waits for the device (finish). Tensors are ranges
// of large memory blocks (vk_memory.h); uploads and downloads pass through host-visible
// staging ranges that live until the submit that reads or fills them has completed.
//
// Shaders come from the kernel store (kiln/runtime/kernel_store.h); its disk entries are
// SPIR-V, keyed by the device's pipeline-cache UUID, driver version, kiln version and the kernel with its
// schedule; the driver's own compiled pipelines persist in a VkPipelineCache stored beside
// them.
#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "kiln/backends/indexed_backend.h"
#include "kiln/backends/scalar_abi.h"
#include "kiln/backends/vulkan.h"
#include "kiln/codegen/c_source.h"
#include "kiln/codegen_id.h"
#include "kiln/ir/hash.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/runtime/compile_policy.h"
#include "kiln/runtime/disk_cache.h"
#include "kiln/runtime/kernel_store.h"
#include "kiln/runtime/stats.h"
#include "kiln/support/error.h"
#include "kiln/support/log.h"
#include "kiln/version.h"
#include "vk_api.h"
#include "vk_memory.h"

namespace kiln::vulkan {
namespace {

// Recorded commands after which a batch is submitted even though nobody waits for it yet,
// so that a program that never synchronizes does not grow one command buffer and its
// descriptor pools without bound.
constexpr size_t kMaxBatchCommands = 8192;
// Descriptor sets per pool; a batch that needs more takes another pool.
constexpr uint32_t kSetsPerPool = 1024, kDescriptorsPerSet = 8;
// How long a wait polls a GPU's fence before sleeping on it (wait_for_fence): long enough for
// a kernel over a few hundred MiB, short enough that a longer one pays its wake-up only once.
constexpr auto kPollBeforeSleeping = std::chrono::milliseconds(1);

class VkMemory final : public DeviceMemory {
 public:
  VkMemory(int64_t bytes, Region region, BlockAllocator& allocator)
      : DeviceMemory(bytes), region_(region), allocator_(allocator) {}
  ~VkMemory() override { allocator_.free(region_); }
  const Region& region() const { return region_; }

 private:
  Region region_;
  BlockAllocator& allocator_;  // the backend's, which lives as long as the process
};

const Region& region_of(const DeviceMemory& m) { return static_cast<const VkMemory&>(m).region(); }

// Where each scalar goes in the push-constant block: std430, each aligned to its own size,
// bool as a 32-bit uint, then the 32-bit zero word `kiln_zero` (the GLSL dialect's `Scalars`
// block). The block is zero-filled, which sets the word.
struct PushLayout {
  std::vector<uint32_t> offsets;
  uint32_t bytes = 0;
};
// GLSL has no integer narrower than 32 bits in a push-constant block.
constexpr ScalarAbi kScalarAbi{.bool_bytes = 4};

PushLayout push_layout(std::span<const DType> scalars) {
  PushLayout p;
  for (DType t : scalars) {
    const uint32_t size = scalar_bytes(t, kScalarAbi);
    p.bytes = (p.bytes + size - 1) / size * size;
    p.offsets.push_back(p.bytes);
    p.bytes += size;
  }
  p.bytes += 4;  // kiln_zero
  return p;
}

// Whether rows reduce through subgroup shuffles (ReductionStrategy::Subgroup): the GLSL
// dialect's butterfly needs shuffles in compute shaders, and a subgroup size that divides
// the power-of-two work-groups.
bool subgroup_reductions(const VulkanDeviceInfo& d) {
  return d.subgroup_shuffle_in_compute && d.subgroup_size > 1 && std::has_single_bit(static_cast<unsigned>(d.subgroup_size));
}

// Pipelines whose kernels were dropped, destroyed once no recorded command can use them:
// the engine may drop a kernel while its launches wait in the batch.
class Graveyard {
 public:
  void bury(VkPipeline p, VkShaderModule m) {
    std::lock_guard lock(mutex_);
    dead_.emplace_back(p, m);
  }
  void destroy_all(VkDevice device) {
    std::lock_guard lock(mutex_);
    for (auto [p, m] : dead_) {
      vkDestroyPipeline(device, p, nullptr);
      vkDestroyShaderModule(device, m, nullptr);
    }
    dead_.clear();
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<VkPipeline, VkShaderModule>> dead_;
};

class VkKernel final : public CompiledKernel {
 public:
  VkKernel(Graveyard& graveyard, VkShaderModule module, VkPipeline pipeline, VkPipelineLayout layout,
           VkDescriptorSetLayout set_layout, std::vector<bool> written, std::vector<DType> scalars, std::string name)
      : graveyard_(graveyard), module_(module), pipeline_(pipeline), layout_(layout), set_layout_(set_layout),
        written_(std::move(written)), scalars_(std::move(scalars)), push_(push_layout(scalars_)), name_(std::move(name)) {}
  ~VkKernel() override { graveyard_.bury(pipeline_, module_); }
  VkPipeline pipeline() const { return pipeline_; }
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  /// Per bound buffer: whether the shader writes it (the others are only read).
  const std::vector<bool>& written() const { return written_; }
  const std::vector<DType>& scalar_types() const { return scalars_; }
  const PushLayout& push() const { return push_; }
  const std::string& name() const { return name_; }

 private:
  Graveyard& graveyard_;  // the backend's, which lives as long as the process
  VkShaderModule module_;
  VkPipeline pipeline_;
  VkPipelineLayout layout_;            // shared per signature, owned by the backend
  VkDescriptorSetLayout set_layout_;   // likewise
  std::vector<bool> written_;
  std::vector<DType> scalars_;
  PushLayout push_;
  std::string name_;
};

// The buffer ranges read and written since the last barrier: a command that reads or writes
// a range written there, or writes a range read there, needs a barrier before it. Ranges,
// not tensors: a range freed and handed to a new tensor in the same batch still orders after
// the commands that used it before.
class HazardTracker {
 public:
  struct Access {
    VkBuffer buffer;
    VkDeviceSize begin, end;
    bool write;
  };
  bool needs_barrier(std::span<const Access> next) const {
    for (const Access& a : next) {
      for (const Access& w : written_)
        if (overlap(a, w)) return true;
      if (a.write)
        for (const Access& r : read_)
          if (overlap(a, r)) return true;
    }
    return false;
  }
  void record(std::span<const Access> next) {
    for (const Access& a : next) (a.write ? written_ : read_).push_back(a);
  }
  void clear() {
    written_.clear();
    read_.clear();
  }

 private:
  static bool overlap(const Access& a, const Access& b) {
    return a.buffer == b.buffer && a.begin < b.end && b.begin < a.end;
  }
  std::vector<Access> written_, read_;
};

HazardTracker::Access access(const Region& r, VkDeviceSize bytes, bool write) {
  return {r.buffer, r.offset, r.offset + std::max<VkDeviceSize>(bytes, 1), write};
}

std::string hex_key(std::string_view text) { return hash_text(text).hex(); }

// The device and its toolchain in one: a pipeline is made on the device.
class VulkanBackend final : public Backend, public Toolchain {
 public:
  explicit VulkanBackend(int index) : Toolchain("vulkan", fmt::format("vulkan:{}", index)), index_(index) {
    const std::vector<FoundDevice>& found = found_devices();
    KILN_ASSERT(index >= 0 && static_cast<size_t>(index) < found.size(), "vulkan_backend checks the index");
    const FoundDevice& f = found[static_cast<size_t>(index)];
    physical_ = f.physical;
    info_ = f.info;
    make_device(f.queue_family);

    caps_.fp64 = info_.fp64;
    caps_.int64 = info_.int64;
    caps_.family = DeviceFamily::WorkItems;
    caps_.local_memory = true;
    caps_.subgroup_size = subgroup_reductions(info_) ? info_.subgroup_size : 1;
    if (info_.driver_name == "llvmpipe") caps_.max_loop_iterations = 65535;  // LP_MAX_TGSI_LOOP_ITERATIONS
    caps_.max_work_group = std::max<int64_t>(1, info_.max_work_group);
    caps_.max_work_groups = std::max<int64_t>(1, info_.max_work_group_count);
    caps_.vector_bytes = 4;  // GLSL's vectors are of 2-4 lanes; GPUs load scalars per lane
    // lavapipe runs work-groups as loops on a thread per core. A GPU whose driver does not
    // say how many compute units it has is taken to have 64.
    caps_.emulated_work_groups = info_.type == "cpu";
    caps_.cores = caps_.emulated_work_groups ? static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))
                  : info_.compute_units > 0 ? info_.compute_units
                                            : 64;
    caps_.exact_math = false;  // the driver's math, with Vulkan's precision rules
    // Horizontal kernels: each part's body in a branch of its own (c_emitter.cpp), as many
    // parts as the cpu's, within the descriptors a shader may bind and the push constants
    // that hold its scalars (less the zero word, push_layout).
    caps_.horizontal_parts = 64;
    caps_.max_kernel_buffers = info_.max_storage_buffers;
    caps_.max_argument_bytes = info_.max_push_constants - 4;
    names_ = {fmt::format("vulkan:{} ({})", index, info_.name), "shaderFloat64", "shaderInt64",
              "storageBuffer16BitAccess and shaderInt16"};
    fingerprint_ = fmt::format("vulkan|{}|{}|{}|{}|api {}|uuid {}|{:04x}:{:04x}|kiln {} codegen {}", info_.name,
                               info_.driver_name, info_.driver_info, info_.driver_version, info_.api_version, info_.uuid,
                               info_.vendor_id, info_.device_id, KILN_VERSION_STRING, KILN_CODEGEN_ID);
    load_pipeline_cache();
  }

  std::string_view name() const override { return "vulkan"; }
  std::string fingerprint() const override { return fingerprint_; }
  std::string device_fingerprint() const override {
    return fmt::format("vulkan|{:04x}:{:04x}|{}|{}|{}|{}", info_.vendor_id, info_.device_id, info_.name,
                       info_.driver_name, info_.driver_info, info_.driver_version);
  }
  std::string device_name() const override { return info_.name; }
  const Capabilities& capabilities() const override { return caps_; }
  std::vector<const PassInfo*> extra_passes() const override { return {find_pass("split-reductions")}; }

  // ---- toolchain ----
  Toolchain& toolchain() override { return *this; }

  std::string render(const kir::Kernel& k, const kir::Schedule& s, std::string_view stage) override {
    if (stage == "glsl") return kir::glsl_source(k, s, caps_);
    if (stage == "spirv") return disassemble_spirv(to_spirv(kir::glsl_source(k, s, caps_), "@" + k.name));
    return {};
  }
  void check_kernel(const kir::Kernel& k) const override {
    kir::check_dtypes(k, caps_, names_);
    check_push_constants(k.scalars, "@" + k.name);
  }
  KernelStore::Built build(std::span<const kir::Kernel* const> kernels,
                           std::span<const kir::Schedule* const> schedules, std::string_view) override {
    KILN_ASSERT(kernels.size() == 1, "vulkan builds one shader at a time (builds_together)");
    return built_spirv(kir::glsl_source(*kernels[0], *schedules[0], caps_), "@" + kernels[0]->name);
  }
  KernelStore::Object load(std::string_view bytes, std::string_view) override { return spirv_of(bytes); }
  std::shared_ptr<const CompiledKernel> member(const KernelStore::Object& spirv, size_t position, const kir::Kernel& k,
                                               const kir::Schedule& s) override {
    std::vector<bool> written;
    for (const kir::BufferParam& b : k.buffers) written.push_back(b.written);
    return pipeline_of(spirv, position, "@" + k.name, written, k.scalars, s.work_items.local_size);
  }

  // ---- buffers ----
  std::shared_ptr<DeviceMemory> alloc(int64_t bytes) override {
    KILN_ASSERT(bytes >= 0, "buffer sizes are non-negative");
    if (bytes > info_.max_storage_buffer_range)
      throw Error(fmt::format("vulkan:{} ({}) binds at most {} bytes per buffer (maxStorageBufferRange); a tensor of {} bytes "
                              "cannot be bound to a kernel there",
                              index_, info_.name, info_.max_storage_buffer_range, bytes));
    std::optional<Region> r = memory_->allocate(static_cast<VkDeviceSize>(bytes));
    if (!r) throw std::bad_alloc();  // the engine names the tensor
    return std::make_shared<VkMemory>(bytes, *r, *memory_);
  }

  void upload(DeviceMemory& dst, const std::byte* src, int64_t bytes) override {
    if (bytes <= 0) return;
    std::lock_guard lock(mutex_);
    const Region staging = take_staging(bytes);
    std::memcpy(staging.mapped, src, static_cast<size_t>(bytes));
    record_copy(staging, region_of(dst), bytes);
  }

  void download(const DeviceMemory& src, std::byte* dst, int64_t bytes) override {
    if (bytes <= 0) return;
    std::lock_guard lock(mutex_);
    const Region staging = take_staging(bytes);
    staging_in_flight_.pop_back();  // freed here, once read, not by the submit
    struct Release {
      BlockAllocator& a;
      const Region& r;
      ~Release() { a.free(r); }
    } release{*staging_, staging};
    record_copy(region_of(src), staging, bytes);
    // The copy's writes become visible to the host's reads after the fence.
    auto to_host = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    to_host.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, nullptr, 0,
                         nullptr);
    submit_and_wait();
    std::memcpy(dst, staging.mapped, static_cast<size_t>(bytes));
  }

  void copy(const DeviceMemory& src, DeviceMemory& dst, int64_t bytes) override {
    if (bytes <= 0) return;
    std::lock_guard lock(mutex_);
    record_copy(region_of(src), region_of(dst), bytes);
  }

  void finish() override {
    std::lock_guard lock(mutex_);
    submit_and_wait();
  }

  // ---- launch ----
  void launch(const CompiledKernel& compiled, const kir::Schedule& s, std::span<DeviceMemory* const> buffers,
              std::span<const Scalar> scalars) override {
    if (s.work_items.global_size <= 0) return;  // an empty domain: nothing to compute
    dispatch(static_cast<const VkKernel&>(compiled), buffers, scalars, s.work_items.global_size / s.work_items.local_size);
  }

  bool gemm(const LaunchPlan::Gemm& g, std::span<DeviceMemory* const> buffers) override {
    run_gemm(g, buffers, nullptr);
    return true;
  }
  void prepare_gemm(const LaunchPlan::Gemm& g) override {
    if (kir::gemm_work_groups(g) > 0) gemm_kernel(g, nullptr, /*store_product=*/true);
  }
  bool attention(const LaunchPlan::Attention& a, std::span<DeviceMemory* const> buffers) override {
    const int64_t groups = kir::attention_work_groups(a);
    if (groups == 0 || a.width == 0) return true;  // no rows: nothing to compute
    std::vector<bool> written = {false, false, false};
    if (a.bias.buffer >= 0) written.push_back(false);
    written.push_back(true);
    const std::shared_ptr<const VkKernel> k =
        pipeline(kir::attention_canonical(a, fingerprint_), "attention @" + a.name,
                 [&] { return kir::glsl_attention_source(a, caps_); }, std::move(written), {}, a.schedule.local_size);
    std::vector<DeviceMemory*> bound;
    for (int32_t b : {a.q.buffer, a.k.buffer, a.v.buffer, a.bias.buffer, a.out})
      if (b >= 0) bound.push_back(buffers[static_cast<size_t>(b)]);
    dispatch(*k, bound, {}, groups);
    return true;
  }
  bool gemm_with_epilogue(const LaunchPlan::Gemm& g, std::span<DeviceMemory* const> buffers,
                          const GemmEpilogue& epilogue) override {
    if (!epilogue.ir || !kir::gemm_epilogue_fits(g, {*epilogue.ir, epilogue.product_param}, caps_)) return false;
    run_gemm(g, buffers, &epilogue);
    return true;
  }

 private:
  void make_device(uint32_t family) {
    auto have = vk_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    auto have12 = vk_struct<VkPhysicalDeviceVulkan12Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
    auto have11 = vk_struct<VkPhysicalDeviceVulkan11Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
    have.pNext = &have12;
    have12.pNext = &have11;
    vkGetPhysicalDeviceFeatures2(physical_, &have);
    // What the GLSL dialect's shaders use: 8-bit storage and arithmetic for bool buffers,
    // 64-bit types where the device has them.
    if (!have12.storageBuffer8BitAccess || !have12.shaderInt8)
      throw Error(fmt::format("vulkan:{} ({}) lacks 8-bit storage buffers (storageBuffer8BitAccess, shaderInt8), which "
                              "kiln's shaders use for bool tensors",
                              index_, info_.name));
    auto want12 = vk_struct<VkPhysicalDeviceVulkan12Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
    want12.storageBuffer8BitAccess = VK_TRUE;
    want12.shaderInt8 = VK_TRUE;
    // 16-bit storage and arithmetic for i16, u16, f16 and bf16 buffers, where the device has
    // them (check_dtypes refuses those buffers elsewhere).
    auto want11 = vk_struct<VkPhysicalDeviceVulkan11Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
    caps_.storage16 = have11.storageBuffer16BitAccess && have.features.shaderInt16;
    want11.storageBuffer16BitAccess = caps_.storage16 ? VK_TRUE : VK_FALSE;
    want12.pNext = &want11;
    auto want = vk_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    want.pNext = &want12;
    want.features.shaderInt16 = caps_.storage16 ? VK_TRUE : VK_FALSE;
    want.features.shaderFloat64 = have.features.shaderFloat64;
    want.features.shaderInt64 = have.features.shaderInt64;
    const float priority = 1.0f;
    auto queue = vk_struct<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
    queue.queueFamilyIndex = family;
    queue.queueCount = 1;
    queue.pQueuePriorities = &priority;
    auto info = vk_struct<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
    info.pNext = &want;
    info.queueCreateInfoCount = 1;
    info.pQueueCreateInfos = &queue;
    check(vkCreateDevice(physical_, &info, nullptr, &device_), fmt::format("creating vulkan:{} ({})", index_, info_.name));
    vkGetDeviceQueue(device_, family, 0, &queue_);

    auto pool = vk_struct<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pool.queueFamilyIndex = family;
    check(vkCreateCommandPool(device_, &pool, nullptr, &command_pool_), "creating a command pool");
    auto cb = vk_struct<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    cb.commandPool = command_pool_;
    cb.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cb.commandBufferCount = 1;
    check(vkAllocateCommandBuffers(device_, &cb, &cmd_), "allocating a command buffer");
    auto fence = vk_struct<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
    check(vkCreateFence(device_, &fence, nullptr, &fence_), "creating a fence");

    // Tensors in device-local memory; staging in host-visible, coherent memory (on lavapipe
    // and integrated GPUs these are the same memory).
    constexpr VkBufferUsageFlags kUsage =
        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    VkPhysicalDeviceProperties props{};
    vkGetPhysicalDeviceProperties(physical_, &props);
    const VkDeviceSize alignment = std::max<VkDeviceSize>(256, props.limits.minStorageBufferOffsetAlignment);
    const uint32_t bits = buffer_memory_bits(kUsage);
    int device_type = find_memory_type(physical_, bits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (device_type < 0) device_type = find_memory_type(physical_, bits, 0);
    const int staging_type =
        find_memory_type(physical_, bits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    if (device_type < 0 || staging_type < 0)
      throw Error(fmt::format("vulkan:{} ({}) has no memory type for storage buffers and host-visible staging", index_,
                              info_.name));
    memory_ = std::make_unique<BlockAllocator>(
        device_, BlockAllocator::Options{static_cast<uint32_t>(device_type), kUsage, VkDeviceSize{64} << 20, alignment,
                                         false});
    staging_ = std::make_unique<BlockAllocator>(
        device_, BlockAllocator::Options{static_cast<uint32_t>(staging_type), kUsage, VkDeviceSize{16} << 20, alignment,
                                         true});
  }

  uint32_t buffer_memory_bits(VkBufferUsageFlags usage) const {
    auto info = vk_struct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
    info.size = 256;
    info.usage = usage;
    VkBuffer probe = VK_NULL_HANDLE;
    check(vkCreateBuffer(device_, &info, nullptr, &probe), "creating a buffer");
    VkMemoryRequirements req{};
    vkGetBufferMemoryRequirements(device_, probe, &req);
    vkDestroyBuffer(device_, probe, nullptr);
    return req.memoryTypeBits;
  }

  // ---- pipelines ----

  // The pipeline for the shader `source()` makes, from the kernel store or built now.
  // `canonical` is everything the shader depends on.
  template <class Source>
  std::shared_ptr<const VkKernel> pipeline(const std::string& canonical, const std::string& name, Source&& source,
                                           std::vector<bool> written, const std::vector<DType>& scalars,
                                           int64_t local_size) {
    check_push_constants(scalars, name);
    KernelStore::Toolchain calls;
    calls.build = [&](std::span<const size_t>, std::string_view) { return built_spirv(source(), name); };
    calls.load = [](std::string_view bytes, std::string_view) { return spirv_of(bytes); };
    calls.member = [&](const KernelStore::Object& spirv, size_t position, size_t) -> KernelStore::Object {
      return pipeline_of(spirv, position, name, written, scalars, local_size);
    };
    return store().get_one<VkKernel>({canonical, "kernel " + name}, calls);
  }

  void check_push_constants(const std::vector<DType>& scalars, const std::string& name) const {
    const PushLayout push = push_layout(scalars);
    if (push.bytes > static_cast<uint32_t>(info_.max_push_constants))
      throw Error(fmt::format("kernel {}: {} bytes of scalar arguments exceed the {} bytes of push constants vulkan:{} ({}) "
                              "offers",
                              name, push.bytes, info_.max_push_constants, index_, info_.name));
  }

  // A shader compiled and validated: its SPIR-V is both the disk's bytes and the group.
  KernelStore::Built built_spirv(const std::string& glsl, const std::string& name) {
    auto spirv = std::make_shared<const std::vector<uint32_t>>(to_spirv(glsl, name));
    if (validation_enabled())
      if (std::string bad = validate_spirv(*spirv); !bad.empty())
        throw Error(fmt::format("vulkan: the SPIR-V of kernel {} is invalid:\n{}", name, bad));
    KernelStore::Built b;
    b.bytes.assign(reinterpret_cast<const char*>(spirv->data()), spirv->size() * sizeof(uint32_t));
    b.group = std::move(spirv);
    return b;
  }

  // The SPIR-V of a disk entry; throws kiln::Error when it is none.
  static KernelStore::Object spirv_of(std::string_view bytes) {
    constexpr uint32_t kMagic = 0x07230203;
    std::vector<uint32_t> words(bytes.size() / sizeof(uint32_t));
    if (!words.empty()) std::memcpy(words.data(), bytes.data(), words.size() * sizeof(uint32_t));
    if (bytes.size() % sizeof(uint32_t) != 0 || words.size() < 5 || words[0] != kMagic) throw Error("not SPIR-V");
    return std::make_shared<const std::vector<uint32_t>>(std::move(words));
  }

  std::shared_ptr<const VkKernel> pipeline_of(const KernelStore::Object& spirv, size_t position, const std::string& name,
                                              const std::vector<bool>& written, const std::vector<DType>& scalars,
                                              int64_t local_size) {
    if (position != 0) throw Error("a SPIR-V module holds one kernel");
    return create_pipeline(*std::static_pointer_cast<const std::vector<uint32_t>>(spirv), name, written, scalars,
                           push_layout(scalars), local_size);
  }

  std::shared_ptr<const VkKernel> create_pipeline(const std::vector<uint32_t>& spirv, const std::string& name,
                                                  const std::vector<bool>& written, const std::vector<DType>& scalars,
                                                  const PushLayout& push, int64_t local_size) {
    const auto buffers = static_cast<uint32_t>(written.size());
    VkDescriptorSetLayout set_layout = descriptor_set_layout(buffers);
    VkPipelineLayout layout = pipeline_layout(buffers, push.bytes);

    auto module_info = vk_struct<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
    module_info.codeSize = spirv.size() * sizeof(uint32_t);
    module_info.pCode = spirv.data();
    VkShaderModule module = VK_NULL_HANDLE;
    check(vkCreateShaderModule(device_, &module_info, nullptr, &module), fmt::format("creating the shader of kernel {}", name));
    // Specialization constant 0: the work-group size (local_size_x_id = 0).
    const auto local = static_cast<uint32_t>(local_size);
    const VkSpecializationMapEntry entry{0, 0, sizeof local};
    const VkSpecializationInfo spec{1, &entry, sizeof local, &local};
    auto info = vk_struct<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
    info.stage = vk_struct<VkPipelineShaderStageCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO);
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = module;
    info.stage.pName = "main";
    info.stage.pSpecializationInfo = &spec;
    info.layout = layout;
    VkPipeline pipe = VK_NULL_HANDLE;
    if (VkResult r = vkCreateComputePipelines(device_, pipeline_cache_, 1, &info, nullptr, &pipe); r != VK_SUCCESS) {
      vkDestroyShaderModule(device_, module, nullptr);
      check(r, fmt::format("creating the pipeline of kernel {} on vulkan:{} ({})", name, index_, info_.name));
    }
    pipeline_cache_dirty_ = true;
    return std::make_shared<const VkKernel>(graveyard_, module, pipe, layout, set_layout, written, scalars, name);
  }

  // The module this device runs for `glsl`: signed zeros, infinities, NaN and subnormals
  // kept where the device can (lavapipe otherwise gave 0.0 for 0.0 * -0.0; NVIDIA's driver
  // flushes f32 subnormals). A module that keeps signed zeros is not run through spirv-opt,
  // whose folding ignores that (x + 0.0 -> x); the driver optimizes it.
  std::vector<uint32_t> to_spirv(const std::string& glsl, const std::string& name) const {
    const FloatControls controls{.signed_zero_inf_nan = info_.signed_zero_inf_nan,
                                 .f32_subnormals = info_.f32_subnormals,
                                 .f64_subnormals = info_.f64_subnormals};
    return with_float_controls(compile_glsl(glsl, name, /*optimize=*/!controls.signed_zero_inf_nan), controls);
  }

  VkDescriptorSetLayout descriptor_set_layout(uint32_t buffers) {
    std::lock_guard lock(layout_mutex_);
    VkDescriptorSetLayout& l = set_layouts_[buffers];
    if (l) return l;
    std::vector<VkDescriptorSetLayoutBinding> bindings(buffers);
    for (uint32_t b = 0; b < buffers; ++b)
      bindings[b] = {b, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    auto info = vk_struct<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
    info.bindingCount = buffers;
    info.pBindings = bindings.data();
    check(vkCreateDescriptorSetLayout(device_, &info, nullptr, &l), "creating a descriptor set layout");
    return l;
  }

  VkPipelineLayout pipeline_layout(uint32_t buffers, uint32_t push_bytes) {
    VkDescriptorSetLayout set = descriptor_set_layout(buffers);
    std::lock_guard lock(layout_mutex_);
    VkPipelineLayout& l = pipeline_layouts_[{buffers, push_bytes}];
    if (l) return l;
    const VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
    auto info = vk_struct<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
    info.setLayoutCount = 1;
    info.pSetLayouts = &set;
    info.pushConstantRangeCount = push_bytes > 0 ? 1 : 0;
    info.pPushConstantRanges = &range;
    check(vkCreatePipelineLayout(device_, &info, nullptr, &l), "creating a pipeline layout");
    return l;
  }

  // The driver's pipeline cache, from the disk cache when an entry for this device and
  // driver exists (a driver checks the header it wrote and ignores data it does not own).
  void load_pipeline_cache() {
    pipeline_cache_key_ = hex_key("pipeline cache|" + fingerprint_);
    std::optional<std::string> data = store().disk().load(pipeline_cache_key_, fingerprint_);
    auto info = vk_struct<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
    if (data) {
      info.initialDataSize = data->size();
      info.pInitialData = data->data();
    }
    if (vkCreatePipelineCache(device_, &info, nullptr, &pipeline_cache_) != VK_SUCCESS) {
      info.initialDataSize = 0;
      info.pInitialData = nullptr;
      check(vkCreatePipelineCache(device_, &info, nullptr, &pipeline_cache_), "creating a pipeline cache");
    }
  }

  // Writes the pipeline cache back when pipelines were added, at most once a second.
  void save_pipeline_cache() {
    const auto now = std::chrono::steady_clock::now();
    if (!pipeline_cache_dirty_ || !store().disk().enabled() || now - last_cache_save_ < std::chrono::seconds(1)) return;
    size_t size = 0;
    if (vkGetPipelineCacheData(device_, pipeline_cache_, &size, nullptr) != VK_SUCCESS || size == 0) return;
    std::string data(size, '\0');
    if (vkGetPipelineCacheData(device_, pipeline_cache_, &size, data.data()) != VK_SUCCESS) return;
    data.resize(size);
    store().disk().store(pipeline_cache_key_, fingerprint_, data);
    pipeline_cache_dirty_ = false;
    last_cache_save_ = now;
  }

  // ---- recording ----

  void begin_if_idle() {
    if (recording_) return;
    auto begin = vk_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(cmd_, &begin), "beginning a command buffer");
    recording_ = true;
  }

  // A barrier before the next command when it touches what recorded ones write (or writes
  // what they read): compute and transfer writes made visible to compute and transfer.
  void order(std::span<const HazardTracker::Access> next) {
    begin_if_idle();
    if (hazards_.needs_barrier(next)) {
      auto b = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
      b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
      b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                        VK_ACCESS_TRANSFER_WRITE_BIT;
      constexpr VkPipelineStageFlags kStages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
      vkCmdPipelineBarrier(cmd_, kStages, kStages, 0, 1, &b, 0, nullptr, 0, nullptr);
      hazards_.clear();
    }
    hazards_.record(next);
    commands_++;
  }

  void record_copy(const Region& src, const Region& dst, int64_t bytes) {
    const auto n = static_cast<VkDeviceSize>(bytes);
    const HazardTracker::Access a[] = {access(src, n, false), access(dst, n, true)};
    order(a);
    const VkBufferCopy c{src.offset, dst.offset, n};
    vkCmdCopyBuffer(cmd_, src.buffer, dst.buffer, 1, &c);
    after_command();
  }

  Region take_staging(int64_t bytes) {
    std::optional<Region> r = staging_->allocate(static_cast<VkDeviceSize>(bytes));
    if (!r) throw Error(fmt::format("vulkan:{}: out of host-visible memory for a {}-byte transfer", index_, bytes));
    staging_in_flight_.push_back(*r);
    return *r;
  }

  VkDescriptorSet descriptor_set(VkDescriptorSetLayout layout) {
    auto info = vk_struct<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
    info.descriptorSetCount = 1;
    info.pSetLayouts = &layout;
    for (;; ++pool_in_use_) {
      if (pool_in_use_ == pools_.size()) {
        const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kDescriptorsPerSet};
        auto p = vk_struct<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
        p.maxSets = kSetsPerPool;
        p.poolSizeCount = 1;
        p.pPoolSizes = &size;
        VkDescriptorPool pool = VK_NULL_HANDLE;
        check(vkCreateDescriptorPool(device_, &p, nullptr, &pool), "creating a descriptor pool");
        pools_.push_back(pool);
      }
      info.descriptorPool = pools_[pool_in_use_];
      VkDescriptorSet set = VK_NULL_HANDLE;
      const VkResult r = vkAllocateDescriptorSets(device_, &info, &set);
      if (r == VK_SUCCESS) return set;
      if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) check(r, "allocating a descriptor set");
    }
  }

  void dispatch(const VkKernel& k, std::span<DeviceMemory* const> buffers, std::span<const Scalar> scalars, int64_t groups) {
    if (groups > info_.max_work_group_count)
      throw Error(fmt::format("kernel {}: {} work-groups exceed the {} per dispatch of vulkan:{} ({})", k.name(), groups,
                              info_.max_work_group_count, index_, info_.name));
    KILN_ASSERT(buffers.size() == k.written().size(), "a buffer per binding");
    std::lock_guard lock(mutex_);
    std::vector<HazardTracker::Access> accesses;
    std::vector<VkDescriptorBufferInfo> infos;
    for (size_t b = 0; b < buffers.size(); ++b) {
      const Region& r = region_of(*buffers[b]);
      accesses.push_back(access(r, r.size, k.written()[b]));
      infos.push_back({r.buffer, r.offset, r.size});
    }
    order(accesses);
    const VkDescriptorSet set = buffers.empty() ? VK_NULL_HANDLE : descriptor_set(k.set_layout());
    std::vector<VkWriteDescriptorSet> writes(buffers.size());
    for (size_t b = 0; b < buffers.size(); ++b) {
      writes[b] = vk_struct<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
      writes[b].dstSet = set;
      writes[b].dstBinding = static_cast<uint32_t>(b);
      writes[b].descriptorCount = 1;
      writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[b].pBufferInfo = &infos[b];
    }
    vkUpdateDescriptorSets(device_, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
    vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline());
    if (!buffers.empty())
      vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout(), 0, 1, &set, 0, nullptr);
    if (k.push().bytes > 0) {
      std::vector<std::byte> block(k.push().bytes);
      for (size_t i = 0; i < scalars.size(); ++i)
        write_scalar(scalars[i], k.scalar_types()[i], kScalarAbi, block.data() + k.push().offsets[i]);
      vkCmdPushConstants(cmd_, k.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, k.push().bytes, block.data());
    }
    vkCmdDispatch(cmd_, static_cast<uint32_t>(groups), 1, 1);
    after_command();
  }

  void after_command() {
    if (commands_ >= kMaxBatchCommands) submit_and_wait();
  }

  // Submits what is recorded and waits for it; then everything the batch held (staging,
  // descriptor sets, freed memory blocks) is reused or released.
  void submit_and_wait() {
    if (recording_) {
      check(vkEndCommandBuffer(cmd_), "ending a command buffer");
      recording_ = false;
      auto submit = vk_struct<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
      submit.commandBufferCount = 1;
      submit.pCommandBuffers = &cmd_;
      check(vkQueueSubmit(queue_, 1, &submit, fence_), fmt::format("submitting to vulkan:{}", index_));
      const VkResult waited = wait_for_fence();
      check(waited, fmt::format("waiting for vulkan:{} ({})", index_, info_.name));
      check(vkResetFences(device_, 1, &fence_), "resetting a fence");
      check(vkResetCommandBuffer(cmd_, 0), "resetting a command buffer");
      for (VkDescriptorPool p : pools_) vkResetDescriptorPool(device_, p, 0);
      pool_in_use_ = 0;
      for (const Region& r : staging_in_flight_) staging_->free(r);
      staging_in_flight_.clear();
      hazards_.clear();
      commands_ = 0;
      graveyard_.destroy_all(device_);
      memory_->trim();
      staging_->trim();
      save_pipeline_cache();
    }
    if (validation_enabled())
      if (std::vector<std::string> messages = take_validation_messages(); !messages.empty()) {
        std::string text;
        for (const std::string& m : messages) text += "\n  " + m;
        throw Error(fmt::format("vulkan:{}: the validation layer reported {} message{}:{}", index_, messages.size(),
                                messages.size() == 1 ? "" : "s", text));
      }
  }

  // A GPU's fence is polled for a while before the thread sleeps on it: NVIDIA's driver wakes
  // a sleeping waiter tens of microseconds after the work ends, which doubled the time of a
  // 64 MiB elementwise call on an H100 (benchmarks/RESULTS.md). Where work-groups run on the
  // host's threads (lavapipe), polling would take a core from the work it waits for.
  VkResult wait_for_fence() {
    if (!caps_.emulated_work_groups) {
      const auto until = std::chrono::steady_clock::now() + kPollBeforeSleeping;
      for (;;) {
        const VkResult r = vkGetFenceStatus(device_, fence_);
        if (r != VK_NOT_READY) return r;
        if (std::chrono::steady_clock::now() >= until) break;
        std::this_thread::yield();
      }
    }
    return vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX);
  }

  // ---- GEMM ----

  void run_gemm(const LaunchPlan::Gemm& g, std::span<DeviceMemory* const> buffers, const GemmEpilogue* epilogue) {
    const int64_t groups = kir::gemm_work_groups(g);
    if (groups == 0) return;  // an empty product: nothing to compute or store
    const bool store_product = !epilogue || epilogue->product_read_later;
    std::optional<kir::GemmEpilogueSource> fused;
    if (epilogue) fused.emplace(kir::GemmEpilogueSource{*epilogue->ir, epilogue->product_param});
    const std::shared_ptr<const VkKernel> k = gemm_kernel(g, fused ? &*fused : nullptr, store_product);
    std::vector<DeviceMemory*> bound;
    for (int32_t b : {g.a, g.b, g.c}) bound.push_back(buffers[static_cast<size_t>(b)]);
    std::span<const Scalar> scalars;
    if (epilogue) {
      bound.insert(bound.end(), epilogue->buffers.begin(), epilogue->buffers.end());
      scalars = epilogue->scalars.first(epilogue->ir->scalars.size());  // without the rows (opencl_backend.cpp)
    }
    dispatch(*k, bound, scalars, groups);
  }

  std::shared_ptr<const VkKernel> gemm_kernel(const LaunchPlan::Gemm& g, const kir::GemmEpilogueSource* epilogue,
                                              bool store_product) {
    kir::check_matmul_dtype(g.dtype, caps_, names_);  // (the epilogue was checked with its plan)
    const std::string name = epilogue ? fmt::format("gemm+@{}", epilogue->kernel.name) : std::string("gemm");
    // A, B and C (written when stored), then the epilogue's buffers.
    std::vector<bool> written = {false, false, store_product};
    std::vector<DType> scalars;
    if (epilogue) {
      for (const kir::BufferParam& b : epilogue->kernel.buffers) written.push_back(b.written);
      scalars = epilogue->kernel.scalars;
    }
    return pipeline(
        kir::gemm_canonical(g, epilogue, store_product, fingerprint_), name,
        [&] { return kir::glsl_gemm_source(g, epilogue, store_product, caps_); }, std::move(written), scalars,
        g.schedule.local_size());
  }

  int index_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VulkanDeviceInfo info_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  Capabilities caps_;
  std::string fingerprint_;
  kir::DeviceNames names_;  // for errors about dtypes the device lacks

  // Compiled kernels' layouts.
  std::mutex layout_mutex_;
  std::map<uint32_t, VkDescriptorSetLayout> set_layouts_;
  std::map<std::pair<uint32_t, uint32_t>, VkPipelineLayout> pipeline_layouts_;
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  std::string pipeline_cache_key_;
  std::atomic<bool> pipeline_cache_dirty_ = false;
  std::chrono::steady_clock::time_point last_cache_save_{};

  // Memory.
  std::unique_ptr<BlockAllocator> memory_, staging_;

  // The batch being recorded; everything below is under mutex_.
  std::mutex mutex_;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  bool recording_ = false;
  size_t commands_ = 0;
  HazardTracker hazards_;
  std::vector<VkDescriptorPool> pools_;
  size_t pool_in_use_ = 0;
  std::vector<Region> staging_in_flight_;
  Graveyard graveyard_;
};

}  // namespace
}  // namespace kiln::vulkan

namespace kiln {

Backend& vulkan_backend(int index) {
  return indexed_backend<vulkan::VulkanBackend>("vulkan", index, vulkan_devices(),
                                                "no Vulkan driver is installed; Debian's mesa-vulkan-drivers provides lavapipe");
}

}  // namespace kiln
