// backends/vulkan/vk_memory.cpp - see vk_memory.h.
#include "vk_memory.h"

#include <algorithm>

#include "kiln/support/error.h"
#include "vk_api.h"

namespace kiln::vulkan {

BlockAllocator::BlockAllocator(VkDevice device, Options options) : device_(device), options_(std::move(options)) {}

BlockAllocator::~BlockAllocator() {
  for (auto& b : blocks_)
    if (b) release(*b);
}

void BlockAllocator::release(Block& b) {
  if (b.mapped) vkUnmapMemory(device_, b.memory);
  if (b.buffer) vkDestroyBuffer(device_, b.buffer, nullptr);
  if (b.memory) vkFreeMemory(device_, b.memory, nullptr);
  b = Block{};
}

bool BlockAllocator::add_block(VkDeviceSize bytes) {
  auto b = std::make_unique<Block>();
  auto info = vk_struct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  info.size = bytes;
  info.usage = options_.usage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  if (vkCreateBuffer(device_, &info, nullptr, &b->buffer) != VK_SUCCESS) return false;
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(device_, b->buffer, &req);
  auto alloc = vk_struct<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = options_.memory_type;
  if (!(req.memoryTypeBits & (1u << options_.memory_type)) ||
      vkAllocateMemory(device_, &alloc, nullptr, &b->memory) != VK_SUCCESS) {
    release(*b);
    return false;
  }
  check(vkBindBufferMemory(device_, b->buffer, b->memory, 0), "binding a memory block");
  if (options_.map) {
    void* p = nullptr;
    check(vkMapMemory(device_, b->memory, 0, VK_WHOLE_SIZE, 0, &p), "mapping a memory block");
    b->mapped = static_cast<std::byte*>(p);
  }
  b->size = bytes;
  b->free.emplace(0, bytes);
  // Reuse an empty slot so block indices held by live regions stay valid.
  for (auto& slot : blocks_)
    if (!slot) {
      slot = std::move(b);
      return true;
    }
  blocks_.push_back(std::move(b));
  return true;
}

std::optional<Region> BlockAllocator::take(size_t index, VkDeviceSize bytes) {
  Block& b = *blocks_[index];
  for (auto it = b.free.begin(); it != b.free.end(); ++it) {
    if (it->second < bytes) continue;
    const VkDeviceSize offset = it->first, left = it->second - bytes;
    b.free.erase(it);
    if (left > 0) b.free.emplace(offset + bytes, left);
    b.used += bytes;
    return Region{b.buffer, offset, bytes, b.mapped ? b.mapped + offset : nullptr, index};
  }
  return std::nullopt;
}

std::optional<Region> BlockAllocator::allocate(VkDeviceSize bytes) {
  const VkDeviceSize a = options_.alignment;
  bytes = std::max<VkDeviceSize>(a, (bytes + a - 1) / a * a);
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < blocks_.size(); ++i)
    if (blocks_[i] && blocks_[i]->size - blocks_[i]->used >= bytes)
      if (std::optional<Region> r = take(i, bytes)) return r;
  if (!add_block(std::max(bytes, options_.block_bytes))) return std::nullopt;
  for (size_t i = blocks_.size(); i-- > 0;)  // the new block: the first fit that is empty
    if (blocks_[i] && blocks_[i]->used == 0 && blocks_[i]->size >= bytes)
      if (std::optional<Region> r = take(i, bytes)) return r;
  return std::nullopt;
}

void BlockAllocator::free(const Region& r) {
  std::lock_guard lock(mutex_);
  KILN_ASSERT(r.block < blocks_.size() && blocks_[r.block] && blocks_[r.block]->buffer == r.buffer,
              "a region is freed into the block it came from");
  Block& b = *blocks_[r.block];
  b.used -= r.size;
  auto [it, inserted] = b.free.emplace(r.offset, r.size);
  KILN_ASSERT(inserted, "a region is freed once");
  if (auto next = std::next(it); next != b.free.end() && it->first + it->second == next->first) {
    it->second += next->second;
    b.free.erase(next);
  }
  if (it != b.free.begin())
    if (auto prev = std::prev(it); prev->first + prev->second == it->first) {
      prev->second += it->second;
      b.free.erase(it);
    }
}

void BlockAllocator::trim() {
  std::lock_guard lock(mutex_);
  bool kept = false;
  for (auto& b : blocks_) {
    if (!b || b->used > 0) continue;
    if (!kept && b->size == options_.block_bytes) {
      kept = true;
      continue;
    }
    release(*b);
    b.reset();
  }
}

int find_memory_type(VkPhysicalDevice physical, uint32_t bits, VkMemoryPropertyFlags want) {
  VkPhysicalDeviceMemoryProperties p{};
  vkGetPhysicalDeviceMemoryProperties(physical, &p);
  for (uint32_t t = 0; t < p.memoryTypeCount; ++t)
    if ((bits & (1u << t)) && (p.memoryTypes[t].propertyFlags & want) == want) return static_cast<int>(t);
  return -1;
}

}  // namespace kiln::vulkan
