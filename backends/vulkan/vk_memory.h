// backends/vulkan/vk_memory.h - device memory sub-allocated from large blocks.
//
// A VkDeviceMemory per tensor would hit the driver's allocation limit (4096 on many) and
// cost a kernel call per allocation: each block here is one VkDeviceMemory with one VkBuffer
// over all of it, and a tensor is a range of that buffer (a descriptor binds buffer, offset
// and range). Ranges come from a first-fit free list per block, merged with their neighbours
// when freed. Empty blocks are only released by trim(), which the backend calls when no
// recorded command can still refer to them.
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace kiln::vulkan {

/// A range of a block: what a descriptor or a copy names.
struct Region {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceSize size = 0;         // as allocated: the request rounded up to the alignment
  std::byte* mapped = nullptr;   // host address of offset, for host-visible memory
  size_t block = 0;              // which block, for free()
};

class BlockAllocator {
 public:
  struct Options {
    uint32_t memory_type = 0;
    VkBufferUsageFlags usage = 0;
    VkDeviceSize block_bytes = VkDeviceSize{64} << 20;  // requests above get a block of their own
    VkDeviceSize alignment = 256;
    bool map = false;  // keep each block mapped (host-visible memory types)
  };
  BlockAllocator(VkDevice device, Options options);
  ~BlockAllocator();
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;

  /// A region of at least `bytes` (at least one alignment unit), or nullopt when the device
  /// has no memory left for a new block.
  std::optional<Region> allocate(VkDeviceSize bytes);
  void free(const Region& r);
  /// Releases the empty blocks beyond one kept for the next allocation. Call only when no
  /// pending command uses memory of this allocator that was freed.
  void trim();

 private:
  struct Block {
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceSize size = 0, used = 0;
    std::byte* mapped = nullptr;
    std::map<VkDeviceSize, VkDeviceSize> free;  // offset -> size, disjoint, merged
  };
  std::optional<Region> take(size_t index, VkDeviceSize bytes);
  bool add_block(VkDeviceSize bytes);
  void release(Block& b);

  VkDevice device_;
  Options options_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Block>> blocks_;  // released blocks stay as empty slots
};

/// The first memory type of `bits` with all of `want`, or -1.
int find_memory_type(VkPhysicalDevice physical, uint32_t bits, VkMemoryPropertyFlags want);

}  // namespace kiln::vulkan
