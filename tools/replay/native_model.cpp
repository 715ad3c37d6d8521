#include "replay/native_model.hpp"

#include <algorithm>
#include <string>
#include <tuple>

namespace delta::replay {

struct NativeCachingModel::Block {
  std::uintptr_t address;
  std::size_t size;
  std::size_t requested = 0;
  std::uint64_t stream;
  bool small;
  bool allocated = false;
  Block* prev = nullptr;  // neighbours inside the same segment
  Block* next = nullptr;
  bool is_split() const { return prev != nullptr || next != nullptr; }
};

// The native pools order free blocks by (stream, size, address): a lower_bound on
// (stream, size, 0) finds the smallest block that fits, lowest address first.
bool NativeCachingModel::BySizeThenAddress::operator()(const Block* a, const Block* b) const {
  return std::tie(a->stream, a->size, a->address) < std::tie(b->stream, b->size, b->address);
}

namespace {
std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}
// cudaMalloc addresses in this model: never reused, aligned like real large allocations. Only
// their order matters (it breaks best-fit ties), and fresh segments come after older ones.
constexpr std::uintptr_t kFirstSegmentAddress = std::uintptr_t{0x7f0000000000};
}  // namespace

NativeCachingModel::NativeCachingModel(NativeModelConfig config)
    : config_(config), next_segment_address_(kFirstSegmentAddress) {
  if (config_.capacity_bytes == 0) throw std::invalid_argument("native model: capacity must be positive");
}

NativeCachingModel::~NativeCachingModel() {
  for (auto& [address, segment] : segments_) {
    for (Block* b = segment.head; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
  }
}

std::size_t NativeCachingModel::round_size(std::size_t size) {
  return size < kMinBlockSize ? kMinBlockSize : round_up(size, kMinBlockSize);
}

std::size_t NativeCachingModel::allocation_size(std::size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return round_up(rounded, kRoundLarge);
}

std::optional<std::uintptr_t> NativeCachingModel::allocate(std::size_t requested, std::uint64_t stream) {
  if (requested == 0) return std::uintptr_t{0};
  const std::size_t size = round_size(requested);
  const bool small = size <= kSmallSize;
  Pool& pool = pool_for(small);
  const std::size_t alloc_size = allocation_size(size);

  Block* block = take_free_block(pool, stream, size);
  if (block != nullptr) {
    ++stats_.cache_hits;
  } else {
    ++stats_.cache_misses;
    // The native order of recovery: a new segment; else free oversize cached blocks (only
    // with max_split_size set) and retry; else free every unsplit cached segment and retry.
    block = device_malloc(alloc_size, small, stream);
    if (block == nullptr && release_available_cached_blocks(pool, stream, size)) {
      block = device_malloc(alloc_size, small, stream);
    }
    if (block == nullptr) {
      release_cached_blocks();
      ++stats_.retries;
      block = device_malloc(alloc_size, small, stream);
    }
    if (block == nullptr) {
      ++stats_.ooms;
      return std::nullopt;
    }
  }

  if (should_split(block, size)) {
    // The allocation keeps the front of the block; the remainder goes back to the pool.
    auto* remaining = new Block{block->address + size, block->size - size, 0, stream, small};
    remaining->prev = block;
    remaining->next = block->next;
    if (remaining->next != nullptr) remaining->next->prev = remaining;
    block->next = remaining;
    block->size = size;
    pool.insert(remaining);
  }
  block->allocated = true;
  block->requested = requested;
  live_.emplace(block->address, block);
  stats_.allocated_bytes += block->size;
  stats_.allocated_peak = std::max(stats_.allocated_peak, stats_.allocated_bytes);
  stats_.requested_bytes += requested;
  return block->address;
}

NativeCachingModel::Block* NativeCachingModel::take_free_block(Pool& pool, std::uint64_t stream,
                                                               std::size_t size) {
  Block key{0, size, 0, stream, false};
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  // With max_split_size set, an oversize cached block serves only requests close to its size.
  if (size < config_.max_split_size && (*it)->size >= config_.max_split_size) return nullptr;
  if (size >= config_.max_split_size && (*it)->size >= size + kLargeBuffer) return nullptr;
  Block* block = *it;
  pool.erase(it);
  return block;
}

NativeCachingModel::Block* NativeCachingModel::device_malloc(std::size_t alloc_size, bool small,
                                                             std::uint64_t stream) {
  if (stats_.reserved_bytes + alloc_size > config_.capacity_bytes) return nullptr;
  const std::uintptr_t address = next_segment_address_;
  next_segment_address_ += round_up(alloc_size, kRoundLarge);
  auto* block = new Block{address, alloc_size, 0, stream, small};
  segments_.emplace(address, Segment{block, alloc_size, small, stream});
  stats_.reserved_bytes += alloc_size;
  stats_.reserved_peak = std::max(stats_.reserved_peak, stats_.reserved_bytes);
  ++stats_.segments;
  ++stats_.device_mallocs;
  return block;
}

bool NativeCachingModel::should_split(const Block* block, std::size_t size) const {
  const std::size_t remaining = block->size - size;
  if (block->small) return remaining >= kMinBlockSize;
  return size < config_.max_split_size && remaining > kSmallSize;
}

bool NativeCachingModel::release_available_cached_blocks(Pool& pool, std::uint64_t stream,
                                                         std::size_t size) {
  if (config_.max_split_size == SIZE_MAX) return false;
  // Free one oversize block that covers the request, or else the largest ones until enough
  // bytes are released. Like the native code, this looks only at whole unsplit blocks of
  // max_split_size or more, which are never split and so are whole segments.
  const std::size_t target = std::max(size, config_.max_split_size);
  Block key{0, target, 0, stream, false};
  auto it = pool.lower_bound(&key);
  if (it != pool.end() && (*it)->stream == stream && !(*it)->is_split()) {
    release_segment(*it);
    return true;
  }
  std::size_t released = 0;
  while (it != pool.begin() && released < target) {
    --it;
    Block* candidate = *it;
    if (candidate->stream != stream || candidate->size < config_.max_split_size) break;
    if (candidate->is_split()) continue;  // part of a segment in use: cannot be cudaFree'd
    released += candidate->size;
    auto before = it;
    bool at_begin = before == pool.begin();
    if (!at_begin) --before;
    release_segment(candidate);
    if (at_begin) break;
    it = std::next(before);
  }
  return released >= target;
}

void NativeCachingModel::release_cached_blocks() {
  for (Pool* pool : {&large_free_, &small_free_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* block = *it++;
      if (!block->is_split()) release_segment(block);
    }
  }
}

void NativeCachingModel::release_segment(Block* block) {
  pool_for(block->small).erase(block);
  segments_.erase(block->address);
  stats_.reserved_bytes -= block->size;
  --stats_.segments;
  ++stats_.device_frees;
  delete block;
}

void NativeCachingModel::empty_cache() { release_cached_blocks(); }

void NativeCachingModel::free(std::uintptr_t address) {
  auto it = live_.find(address);
  if (it == live_.end()) {
    throw std::invalid_argument("native model: free of address " + std::to_string(address) +
                                ", which is not a live block");
  }
  Block* block = it->second;
  live_.erase(it);
  stats_.allocated_bytes -= block->size;
  stats_.requested_bytes -= block->requested;
  block->allocated = false;
  block->requested = 0;
  Pool& pool = pool_for(block->small);
  merge_into(block, block->prev, pool);
  merge_into(block, block->next, pool);
  pool.insert(block);
}

void NativeCachingModel::merge_into(Block* block, Block* neighbour, Pool& pool) {
  if (neighbour == nullptr || neighbour->allocated) return;
  pool.erase(neighbour);
  if (neighbour == block->prev) {
    block->address = neighbour->address;
    block->prev = neighbour->prev;
    if (block->prev != nullptr) {
      block->prev->next = block;
    } else {
      segments_.at(block->address).head = block;
    }
  } else {
    block->next = neighbour->next;
    if (block->next != nullptr) block->next->prev = block;
  }
  block->size += neighbour->size;
  delete neighbour;
}

std::optional<std::size_t> NativeCachingModel::block_size(std::uintptr_t address) const {
  auto it = live_.find(address);
  if (it == live_.end()) return std::nullopt;
  return it->second->size;
}

std::vector<NativeSegmentView> NativeCachingModel::segments() const {
  std::vector<NativeSegmentView> views;
  views.reserve(segments_.size());
  for (const auto& [address, segment] : segments_) {
    NativeSegmentView view{address, segment.size, segment.small, segment.stream, {}};
    for (const Block* b = segment.head; b != nullptr; b = b->next) {
      view.blocks.push_back({b->address, b->size, b->allocated});
    }
    views.push_back(std::move(view));
  }
  return views;
}

void NativeCachingModel::check_invariants() const {
  auto fail = [](const std::string& what) { throw std::logic_error("native model invariant: " + what); };
  std::size_t reserved = 0, allocated = 0, free_blocks = 0, live_blocks = 0;
  for (const auto& [address, segment] : segments_) {
    const std::string name = "segment " + std::to_string(address);
    if (segment.head == nullptr || segment.head->address != address || segment.head->prev != nullptr) {
      fail(name + ": head block does not start the segment");
    }
    if (segment.small && segment.size != kSmallBuffer) fail(name + ": small pool segment is not 2 MiB");
    std::uintptr_t expected = address;
    for (const Block* b = segment.head; b != nullptr; b = b->next) {
      if (b->address != expected) fail(name + ": blocks do not tile the segment");
      if (b->size == 0 || b->size % kMinBlockSize != 0) fail(name + ": block size not a multiple of 512");
      if (b->small != segment.small || b->stream != segment.stream) fail(name + ": block pool or stream differs");
      if (b->next != nullptr && b->next->prev != b) fail(name + ": broken prev/next links");
      const Pool& pool = b->small ? small_free_ : large_free_;
      if (b->allocated) {
        ++live_blocks;
        allocated += b->size;
        auto it = live_.find(b->address);
        if (it == live_.end() || it->second != b) fail(name + ": allocated block missing from the live map");
        if (pool.count(const_cast<Block*>(b))) fail(name + ": allocated block is in a free pool");
      } else {
        ++free_blocks;
        if (!pool.count(const_cast<Block*>(b))) fail(name + ": free block missing from its pool");
        if (b->next != nullptr && !b->next->allocated) fail(name + ": two adjacent free blocks were not merged");
      }
      expected += b->size;
    }
    if (expected != address + segment.size) fail(name + ": blocks do not add up to the segment size");
    reserved += segment.size;
  }
  if (free_blocks != small_free_.size() + large_free_.size()) fail("a pool holds blocks of no segment");
  if (live_blocks != live_.size()) fail("the live map holds blocks of no segment");
  if (reserved != stats_.reserved_bytes) fail("reserved bytes differ from the sum of segments");
  if (allocated != stats_.allocated_bytes) fail("allocated bytes differ from the sum of live blocks");
  if (reserved > config_.capacity_bytes) fail("reserved bytes exceed the capacity");
  if (segments_.size() != stats_.segments) fail("segment count differs");
}

}  // namespace delta::replay
