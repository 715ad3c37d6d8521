// CachingAllocator's state and the operations on it. Every member function here expects the
// caller to hold `mutex`; the public methods in caching_allocator.cpp take it.
#pragma once

#include "allocator/arena.hpp"
#include "allocator/event_log.hpp"
#include "allocator/pointer_map.hpp"

#include <delta/allocator.hpp>

#include <memory>
#include <mutex>
#include <set>
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
struct StreamPools {
  StreamHandle stream = 0;
  std::vector<std::unique_ptr<Arena>> arenas[2];
  std::set<Block*, BySizeThenAddress> free[2];
  SmallBins bins;
};

}  // namespace detail

struct CachingAllocator::Impl {
  Impl(std::shared_ptr<Device> device, AllocatorConfig config);
  ~Impl();

  mutable std::mutex mutex;
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
  std::vector<PhysHandle> spare_handles;  // physical pages held but not mapped anywhere
  std::size_t mapped_pages = 0;

  struct PendingEvent {
    EventHandle event;
    detail::Block* block;
  };
  std::vector<PendingEvent> pending;
  std::vector<EventHandle> event_pool;

  AllocatorStats stats;
  detail::EventLog log;

  // allocate.cpp
  void* allocate(std::size_t size, StreamHandle stream);
  detail::StreamPools& pools_for(StreamHandle stream);
  detail::Block* pop_bin(detail::StreamPools& pools, std::size_t rounded);
  detail::Block* find_free(detail::StreamPools& pools, PoolKind pool, std::size_t rounded);
  detail::Arena& add_arena(detail::StreamPools& pools, PoolKind pool, std::size_t min_size);
  void carve(detail::StreamPools& pools, detail::Block* block, std::size_t rounded);
  bool back_with_pages(detail::Block* block, StreamHandle stream, std::size_t& new_pages);
  PhysHandle obtain_handle(StreamHandle stream);
  [[noreturn]] void fail_out_of_memory(std::size_t size, std::size_t rounded, StreamHandle stream);

  // release.cpp
  void deallocate(DevicePtr ptr);
  void release_block(detail::Block* block);
  void free_and_merge(detail::Block* block);
  void process_events(bool wait);
  void flush_bins();
  bool reclaim_idle_page(StreamHandle stream, PhysHandle& handle);
  void release_all_idle_pages();
  void page_used(detail::Arena& arena, std::size_t index);
  void page_unused(detail::Arena& arena, std::size_t index);
  void idle_push(detail::Page* page);
  void idle_remove(detail::Page* page);
  void unmap_page(detail::Page* page);
  void release_handle(PhysHandle handle);
  std::size_t compute_limit() const;
  EventHandle take_event();

  // invariants.cpp
  void check() const;
  // dump.cpp
  std::string to_json() const;
};

}  // namespace delta
