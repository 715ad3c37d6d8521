// CachingAllocator's state and the operations on it. Every member function here expects the
// caller to hold `mutex`; the public methods in caching_allocator.cpp take it.
#pragma once

#include "allocator/structures/arena.hpp"
#include "allocator/structures/idle_fences.hpp"
#include "allocator/reports/event_log.hpp"
#include "allocator/structures/pointer_map.hpp"

#include <delta/allocator.hpp>

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <unordered_map>
#include <vector>

namespace delta {

namespace detail {

// Exact-size free lists for small blocks: the fast path serves a repeated size without
// touching the best-fit index. Bounded, and flushed into the index before any page is mapped
// or reclaimed, so they never cost memory that a request needs.
struct SmallBins {
  static constexpr std::size_t kClasses = kSmallSize / kMinBlockSize;  // 512 B steps up to 1 MiB
  static constexpr std::size_t kMaxPerClass = 64;
  std::vector<std::vector<Block*>> by_class;  // index: size / 512 - 1; allocated on first use
};

// Everything one stream owns: an arena list and a best-fit index per pool, and its bins.
// The own-pages pool's arena is created on its first use only.
struct StreamPools {
  StreamHandle stream = 0;
  std::vector<std::unique_ptr<Arena>> arenas[kPoolKinds];
  std::set<Block*, BySizeThenAddress> free[kPoolKinds];
  SmallBins bins;
};

// Reserved and idle: what is mapped and neither live nor waiting on a deferred free. A live
// block's unmapped pages hold no memory, so they are taken from the active bytes first (without
// that, an executor's evictions hid the idle pieces: cached read 0 while hundreds of MB sat idle).
inline std::size_t cached_bytes_of(const AllocatorStats& s) {
  const std::size_t mapped_active = s.active_bytes - std::min(s.active_bytes, s.unmapped_bytes);
  return s.reserved_bytes - std::min(s.reserved_bytes, mapped_active);
}

}  // namespace detail

struct CachingAllocator::Impl {
  Impl(std::shared_ptr<Device> device, AllocatorConfig config);
  ~Impl();

  // Re-entrant: an adaptor holding it (CachingAllocator::lock) calls the public methods, which
  // take it again without a second atomic operation.
  mutable ReentrantLock mutex;
  std::shared_ptr<Device> device;
  AllocatorConfig config;
  std::size_t page_size;
  std::size_t device_total;
  std::size_t limit;

  std::unordered_map<StreamHandle, std::unique_ptr<detail::StreamPools>> streams;
  detail::StreamPools* last_pools = nullptr;  // one-entry cache: most jobs use one stream
  detail::PointerMap<detail::Block*> live;
  detail::BlockRecycler blocks;
  std::size_t binned_bytes = 0;
  static constexpr std::size_t kMaxBinnedBytes = 64u << 20;

  // Mapped pages that no block uses, least recently idle first: what gets reclaimed.
  detail::Page* idle_head = nullptr;
  detail::Page* idle_tail = nullptr;
  std::size_t idle_count = 0;
  detail::IdleFences idle_fences;  // what a reclaim of an idle page waits for
  std::vector<PhysHandle> spare_handles;  // physical pages held but not mapped anywhere
  std::size_t spare_target = 0;           // pages the spare pool is kept up to (reserve_spare_pages)
  std::size_t mapped_pages = 0;
  std::size_t packed_hole_pages = 0;  // pages of packed arenas unmapped under away blocks

  struct PendingEvent {
    EventHandle event;
    detail::Block* block;
  };
  std::vector<PendingEvent> pending;
  std::vector<EventHandle> event_pool;

  AllocatorStats stats;
  detail::EventLog log;

  // allocate.cpp
  void* allocate(std::size_t size, StreamHandle stream, WhenShort when_short = WhenShort::flush_then_fail);
  void* allocate_own_pages(std::size_t size, StreamHandle stream, WhenShort when_short, bool packed,
                           std::uint8_t group);
  detail::Block* take_block(detail::StreamPools& pools, PoolKind pool, std::size_t size, std::size_t rounded,
                            StreamHandle stream, bool& hit, WhenShort when_short, std::uint8_t group = 0);
  // The last step of every allocation: the block goes live and is counted. Defined here so
  // that it is inlined into the fast path, as it was before it was shared.
  void* hand_out(detail::Block* b, std::size_t size, bool hit, StreamHandle stream) {
    b->requested = size;
    live.insert(b->ptr, b);
    ++stats.alloc_count;
    ++(hit ? stats.cache_hits : stats.cache_misses);
    stats.allocated_bytes += b->size;
    stats.allocated_peak = std::max(stats.allocated_peak, stats.allocated_bytes);
    stats.requested_bytes += size;
    stats.requested_peak = std::max(stats.requested_peak, stats.requested_bytes);
    stats.active_bytes += b->size;
    stats.active_peak = std::max(stats.active_peak, stats.active_bytes);
    log.record(AllocatorEvent::Kind::alloc, b->ptr, b->size, stream);
    return reinterpret_cast<void*>(b->ptr);
  }
  detail::StreamPools& pools_for(StreamHandle stream);
  detail::Block* pop_bin(detail::StreamPools& pools, std::size_t rounded);
  detail::Block* find_free(detail::StreamPools& pools, PoolKind pool, std::size_t rounded);
  detail::Block* find_free_packed(detail::StreamPools& pools, std::size_t rounded, std::uint8_t group);
  detail::Arena& add_arena(detail::StreamPools& pools, PoolKind pool, std::size_t min_size, std::uint8_t group = 0);
  void carve(detail::StreamPools& pools, detail::Block* block, std::size_t rounded);
  detail::Block* split_off(detail::Block* block, std::size_t offset);
  bool back_with_pages(detail::Block* block, StreamHandle stream, std::size_t& new_pages);
  // Whether `count` physical pages can be found for new mappings without passing the limit:
  // spares, room under the limit, and idle cached pages that can be reclaimed.
  bool pages_obtainable(std::size_t count) const {
    std::size_t headroom = limit > stats.reserved_bytes ? (limit - stats.reserved_bytes) / page_size : 0;
    return count <= spare_handles.size() + headroom + idle_count;
  }
  PhysHandle obtain_handle(StreamHandle stream);
  PhysHandle fresh_handle(StreamHandle stream);
  [[noreturn]] void fail_out_of_memory(std::size_t size, std::size_t rounded, StreamHandle stream);
  [[noreturn]] void throw_out_of_memory(const std::string& attempt, std::size_t size, StreamHandle stream);

  // residency.cpp
  struct PageRange {
    detail::Block* block;
    std::size_t first;  // index of the range's first page in the block's arena
    std::size_t count;
  };
  PageRange own_pages_range(const char* call, DevicePtr ptr, std::size_t offset, std::size_t bytes) const;
  std::size_t unmap_pages(DevicePtr ptr, std::size_t offset, std::size_t bytes);
  void map_pages(DevicePtr ptr, std::size_t offset, std::size_t bytes, WhenShort when_short);
  bool pages_mapped(DevicePtr ptr, std::size_t offset, std::size_t bytes) const;
  void reserve_spare_pages(std::size_t bytes);
  void give_back_handle(PhysHandle handle);
  void trim_spares(std::size_t keep);
  // Off the free path's hot code: only own-pages blocks with unmapped pages get here.
  [[gnu::cold]] void forget_holes(detail::Block* block);
  // Packed blocks: the page range [first, last] on which `b` has no present byte when its
  // first `present` bytes are present (empty: first > last).
  std::pair<std::size_t, std::size_t> away_pages(const detail::Block* b, std::size_t present) const;
  std::size_t unmap_packed(detail::Block* b, DevicePtr ptr, std::size_t offset, std::size_t bytes);
  void map_packed(detail::Block* b, DevicePtr ptr, std::size_t offset, std::size_t bytes, WhenShort when_short);
  // Maps holes again, each handle taken first, undone on a failure (both pools' map_pages).
  void map_holes(detail::Arena& arena, const std::vector<std::size_t>& pages, const std::string& call,
                 std::size_t bytes, WhenShort when_short, const std::function<void(int)>& count_holes);
  // A packed block's pages are being released: its away pages stop counting it, and a page
  // others still use gets a fence for the work queued on the freed bytes.
  [[gnu::cold]] void release_packed(detail::Block* block);

  // release.cpp
  void deallocate(DevicePtr ptr);
  void release_block(detail::Block* block);
  void free_and_merge(detail::Block* block);
  void process_events(bool wait);
  void flush_bins();
  bool reclaim_idle_page(StreamHandle stream, PhysHandle& handle);
  void fence_idle_pages(detail::Arena& arena, std::size_t first, std::size_t last, std::uint64_t& fence);
  void release_all_idle_pages();
  // Page use counts and the idle list: a few stores each, on every path that maps or frees a
  // block, so they are defined here to be inlined wherever they are used.
  void page_used(detail::Arena& arena, std::size_t index) {
    detail::Page& page = arena.pages[index];
    page.owner = &arena;
    if (page.users++ == 0 && page.idle) idle_remove(&page);
  }
  void page_unused(detail::Arena& arena, std::size_t index) {
    detail::Page& page = arena.pages[index];
    if (--page.users == 0 && page.handle) idle_push(&page);
  }
  void idle_push(detail::Page* page) {
    page->idle = true;
    page->idle_fence = detail::IdleFences::kNone;
    page->idle_next = nullptr;
    page->idle_prev = idle_tail;
    (idle_tail ? idle_tail->idle_next : idle_head) = page;
    idle_tail = page;
    ++idle_count;
  }
  void idle_remove(detail::Page* page) {
    (page->idle_prev ? page->idle_prev->idle_next : idle_head) = page->idle_next;
    (page->idle_next ? page->idle_next->idle_prev : idle_tail) = page->idle_prev;
    page->idle_prev = page->idle_next = nullptr;
    page->idle = false;
    --idle_count;
  }
  void unmap_page(detail::Page* page);
  void release_handle(PhysHandle handle);
  std::size_t compute_limit(double memory_fraction) const;
  EventHandle take_event();

  // invariants.cpp
  void check() const;
  // dump.cpp
  std::string to_json() const;
};

}  // namespace delta
