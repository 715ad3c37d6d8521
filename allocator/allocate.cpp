// The allocation path: exact-size bins first, then best fit in the stream's pool, then new
// pages — from the spare handles, the device, or by reclaiming idle cached pages — and the
// out-of-memory error when none of that is possible.
#include "allocator/allocator_impl.hpp"

#include "allocator/reports/format.hpp"

#include <algorithm>

namespace delta {

using detail::Arena;
using detail::Block;

using detail::StreamPools;

detail::StreamPools& CachingAllocator::Impl::pools_for(StreamHandle stream) {
  if (last_pools && last_pools->stream == stream) return *last_pools;
  auto& slot = streams[stream];
  if (!slot) {
    slot = std::make_unique<StreamPools>();
    slot->stream = stream;
  }
  last_pools = slot.get();
  return *slot;
}

// Forced inline (here and in take_block): the fast path must compile to what it was before
// allocate() gained a second caller of these helpers.
[[gnu::always_inline]] inline Block* CachingAllocator::Impl::pop_bin(StreamPools& pools, std::size_t rounded) {
  auto& classes = pools.bins.by_class;
  std::size_t index = rounded / kMinBlockSize - 1;
  if (classes.empty() || classes[index].empty()) return nullptr;
  Block* b = classes[index].back();
  classes[index].pop_back();
  binned_bytes -= b->size;
  return b;
}

// Best fit among free blocks of the pool. With max_split_size set, cached blocks at or above
// it are not carved into smaller requests (PyTorch's rule), except an arena's last block,
// whose unmapped tail costs nothing to split.
// The rule is not applied to the own-pages pools: their blocks are moved by the executor, and
// unmapped pages there cost nothing.
Block* CachingAllocator::Impl::find_free(StreamPools& pools, PoolKind pool, std::size_t rounded) {
  auto& index = pools.free[static_cast<int>(pool)];
  Block probe;
  probe.size = rounded;
  auto it = index.lower_bound(&probe);
  if (config.max_split_size == SIZE_MAX || pool == PoolKind::pages || pool == PoolKind::packed) return it == index.end() ? nullptr : *it;
  for (; it != index.end(); ++it) {
    Block* b = *it;
    bool oversize = b->size >= config.max_split_size;
    bool tail = b->next == nullptr;
    if (!oversize || tail) return b;
    if (rounded >= config.max_split_size && b->size - rounded < kLargeBuffer) return b;
  }
  return nullptr;
}

// The packed pool's fit: the free block, and the end of it, where the new block covers the
// fewest pages no other block uses. A hole between packed blocks keeps the pages at its ends
// mapped for its neighbours; best fit by size left those bytes unused, and on gpt2-large
// bfloat16 at half its peak they grew to 98 MB of a 4.9 GB budget where the plan needed one
// page more. Ties: best fit by size, then the block's start. The block returned is carved from
// its start: a place at its end is split off first.
Block* CachingAllocator::Impl::find_free_packed(StreamPools& pools, std::size_t rounded, std::uint8_t group) {
  auto& index = pools.free[static_cast<int>(PoolKind::packed)];
  Block probe;
  probe.size = rounded;
  Block* best = nullptr;
  DevicePtr best_at = 0;
  std::size_t best_cost = SIZE_MAX;
  const auto unshared_pages = [&](const Arena& arena, DevicePtr from) {
    std::size_t count = 0;
    for (std::size_t i = arena.page_of(from), last = arena.page_of(from + rounded - 1); i <= last; ++i)
      count += arena.pages[i].users == 0;
    return count;
  };
  for (auto it = index.lower_bound(&probe); it != index.end() && best_cost > 0; ++it) {
    Block* b = *it;
    if (b->arena->group != group) continue;
    const std::size_t at_start = unshared_pages(*b->arena, b->ptr);
    if (at_start < best_cost) best = b, best_at = b->ptr, best_cost = at_start;
    // An arena's last block is the untouched rest of its reservation: its end is no place.
    if (b->size == rounded || !b->next) continue;
    const std::size_t at_end = unshared_pages(*b->arena, b->end() - rounded);
    if (at_end < best_cost) best = b, best_at = b->end() - rounded, best_cost = at_end;
  }
  if (!best || best_at == best->ptr) return best;
  // The front stays free (in the index); the rest, exactly the new block, is carved.
  index.erase(best);
  Block* rest = split_off(best, best_at - best->ptr);
  index.insert(best);
  index.insert(rest);
  return rest;
}

Arena& CachingAllocator::Impl::add_arena(StreamPools& pools, PoolKind pool, std::size_t min_size, std::uint8_t group) {
  // Address space is cheap: each arena spans the whole device so that one arena normally
  // serves a stream's pool for the life of the process.
  std::size_t va = std::max(device_total, min_size);
  va = (va + page_size - 1) / page_size * page_size;
  auto arena = std::make_unique<Arena>();
  arena->stream = pools.stream;
  arena->pools = &pools;
  arena->pool = pool;
  arena->group = group;
  arena->page_size = page_size;
  arena->base = device->reserve(va);
  arena->va_size = va;
  arena->pages = detail::PageTable(va / page_size);
  Block* whole = blocks.make();
  whole->ptr = arena->base;
  whole->size = va;
  whole->arena = arena.get();
  arena->first = whole;
  pools.free[static_cast<int>(pool)].insert(whole);
  Arena& ref = *arena;
  pools.arenas[static_cast<int>(pool)].push_back(std::move(arena));
  return ref;
}

// Turns the free block `b` into an allocated block of `rounded` bytes at its start; the rest
// stays free in the index.
void CachingAllocator::Impl::carve(StreamPools& pools, Block* b, std::size_t rounded) {
  auto& index = pools.free[static_cast<int>(b->arena->pool)];
  index.erase(b);
  if (b->size > rounded) index.insert(split_off(b, rounded));
  b->state = Block::State::allocated;
}

// Splits `b` at `offset` (inside it): `b` keeps the front, the block returned (free) the rest.
// Neither is indexed here: a block's place in the free index depends on its size.
Block* CachingAllocator::Impl::split_off(Block* b, std::size_t offset) {
  Block* rest = blocks.make();
  rest->ptr = b->ptr + offset;
  rest->size = b->size - offset;
  rest->arena = b->arena;
  rest->prev = b;
  rest->next = b->next;
  if (b->next) b->next->prev = rest;
  b->next = rest;
  b->size = offset;
  return rest;
}

// Marks the block's pages used and maps those that are not. On failure every page taken for
// this block is left used-by-nobody again (idle or unmapped), so the caller can undo.
bool CachingAllocator::Impl::back_with_pages(Block* b, StreamHandle stream, std::size_t& new_pages) {
  Arena& arena = *b->arena;
  std::size_t first = arena.first_page(b), last = arena.last_page(b);
  for (std::size_t i = first; i <= last; ++i) page_used(arena, i);
  // Fail before mapping anything when the pages cannot all be found, so that a failed
  // request leaves no new pages behind.
  std::size_t missing = 0;
  for (std::size_t i = first; i <= last; ++i) missing += arena.pages[i].handle == 0;
  if (!pages_obtainable(missing)) {
    for (std::size_t i = first; i <= last; ++i) page_unused(arena, i);
    return false;
  }
  for (std::size_t i = first; i <= last; ++i) {
    detail::Page& page = arena.pages[i];
    if (page.handle) continue;
    PhysHandle handle = 0;
    try {
      handle = obtain_handle(stream);  // a reclaim may wait on the device, which may refuse
    } catch (...) {
      for (std::size_t j = first; j <= last; ++j) page_unused(arena, j);
      throw;
    }
    if (!handle) {
      for (std::size_t j = first; j <= last; ++j) page_unused(arena, j);
      return false;
    }
    try {
      device->map(arena.page_address(i), page_size, handle);
    } catch (...) {
      spare_handles.push_back(handle);
      for (std::size_t j = first; j <= last; ++j) page_unused(arena, j);
      throw;
    }
    page.handle = handle;
    if (page.hole) [[unlikely]] {  // a packed page whose blocks are all away: present again
      page.hole = false;
      --packed_hole_pages;
      stats.unmapped_bytes -= page_size;
    }
    ++mapped_pages;
    arena.touched_pages = std::max(arena.touched_pages, i + 1);
    ++new_pages;
    ++stats.segment_maps;
    log.record(AllocatorEvent::Kind::map, arena.page_address(i), page_size, arena.stream);
  }
  return true;
}

// A physical page for a new mapping: a spare one, else a fresh one (below). 0: none.
PhysHandle CachingAllocator::Impl::obtain_handle(StreamHandle stream) {
  if (!spare_handles.empty()) {
    PhysHandle h = spare_handles.back();
    spare_handles.pop_back();
    return h;
  }
  return fresh_handle(stream);
}

// A physical page that is not a spare: a new one while under the limit (and under the
// garbage-collection threshold when one is set), else a reclaimed idle page. 0: none.
PhysHandle CachingAllocator::Impl::fresh_handle(StreamHandle stream) {
  std::size_t held = stats.reserved_bytes;
  bool under_limit = held + page_size <= limit;
  bool over_gc = config.garbage_collection_threshold > 0 &&
                 double(held + page_size) > config.garbage_collection_threshold * double(limit);
  PhysHandle h = 0;
  if (over_gc && idle_count > 0 && reclaim_idle_page(stream, h)) {
    ++stats.gc_runs;
    return h;
  }
  if (under_limit) {
    try {
      h = device->create_physical(page_size);
      stats.reserved_bytes += page_size;
      stats.reserved_peak = std::max(stats.reserved_peak, stats.reserved_bytes);
      return h;
    } catch (const DeviceError& e) {
      if (e.code() != DeviceErrc::out_of_memory) throw;
    }
  }
  if (reclaim_idle_page(stream, h)) return h;
  return 0;
}

void* CachingAllocator::Impl::allocate(std::size_t size, StreamHandle stream, WhenShort when_short) {
  if (size == 0) return nullptr;
  if (!pending.empty()) process_events(false);
  std::size_t rounded = round_size(size, config.roundup_power2_divisions);
  if (rounded < size) fail_out_of_memory(size, rounded, stream);  // overflowed
  PoolKind pool = pool_for(rounded);
  StreamPools& pools = pools_for(stream);

  Block* b = pool == PoolKind::small ? pop_bin(pools, rounded) : nullptr;
  bool hit = b != nullptr;
  if (b) {
    b->state = Block::State::allocated;
  } else {
    b = take_block(pools, pool, size, rounded, stream, hit, when_short);
  }
  return hand_out(b, size, hit, stream);
}

// Placement::own_pages: whole pages from the stream's own-pages pool, or with `packed` side
// by side in its packed pool. A separate entry point rather than a flag on allocate(), so that
// ordinary allocations pay nothing for it.
void* CachingAllocator::Impl::allocate_own_pages(std::size_t size, StreamHandle stream, WhenShort when_short,
                                                 bool packed, std::uint8_t group) {
  if (size == 0) return nullptr;
  if (!pending.empty()) process_events(false);
  const std::size_t unit = packed ? kMinBlockSize : page_size;
  std::size_t rounded = (size + unit - 1) / unit * unit;
  if (rounded < size) fail_out_of_memory(size, rounded, stream);  // overflowed
  StreamPools& pools = pools_for(stream);
  bool hit = false;
  Block* b = take_block(pools, packed ? PoolKind::packed : PoolKind::pages, size, rounded, stream, hit, when_short,
                        packed ? group : 0);
  return hand_out(b, size, hit, stream);
}

// Best fit in the pool, backed with pages; on running out of pages, completes pending frees,
// flushes the bins and tries once more (WhenShort::fail: not), then throws. `hit`: no page had
// to be mapped.
[[gnu::always_inline]] inline Block* CachingAllocator::Impl::take_block(StreamPools& pools, PoolKind pool,
                                                                        std::size_t size, std::size_t rounded,
                                                                        StreamHandle stream, bool& hit,
                                                                        WhenShort when_short, std::uint8_t group) {
  for (int attempt = 0;; ++attempt) {
    Block* b = pool == PoolKind::packed ? find_free_packed(pools, rounded, group) : find_free(pools, pool, rounded);
    if (!b) {
      try {
        add_arena(pools, pool, rounded, group);
      } catch (const DeviceError&) {
        fail_out_of_memory(size, rounded, stream);  // no address space left for this size
      }
      b = pool == PoolKind::packed ? find_free_packed(pools, rounded, group) : find_free(pools, pool, rounded);
    }
    carve(pools, b, rounded);
    std::size_t new_pages = 0;
    bool backed = false;
    try {
      backed = back_with_pages(b, stream, new_pages);
    } catch (...) {  // the device refused a map or a wait: the block goes back, nothing else changed
      free_and_merge(b);
      throw;
    }
    if (backed) {
      hit = new_pages == 0;
      if (attempt > 0) ++stats.retries;
      return b;
    }
    free_and_merge(b);
    // Out of pages: give back what the fast path and other streams hold, then try once more.
    if (attempt > 0 || when_short == WhenShort::fail) fail_out_of_memory(size, rounded, stream);
    process_events(true);
    flush_bins();
  }
}

void CachingAllocator::Impl::fail_out_of_memory(std::size_t size, std::size_t rounded, StreamHandle stream) {
  throw_out_of_memory("tried to allocate " + format_bytes(size) +
                          (rounded != size ? " (" + format_bytes(rounded) + " rounded)" : ""),
                      size, stream);
}

// `attempt` says what failed ("tried to allocate ...", "map_pages(...) needs ..."); `size` is
// what the oom event records.
void CachingAllocator::Impl::throw_out_of_memory(const std::string& attempt, std::size_t size, StreamHandle stream) {
  ++stats.ooms;
  log.record(AllocatorEvent::Kind::oom, 0, size, stream);
  MemInfo info{};
  try {
    info = device->mem_info();
  } catch (...) {
  }
  std::string message = "DELTA out of memory: " + attempt + " on stream " + format_hex(stream) + "; allocated " +
                        format_bytes(stats.allocated_bytes) + ", reserved " +
                        format_bytes(stats.reserved_bytes) + ", limit " + format_bytes(limit) +
                        ", device free " + format_bytes(info.free_bytes) + " of " +
                        format_bytes(info.total_bytes) + ".";
  if (!config.oom_dump_path.empty()) {
    try {
      write_file_atomically(config.oom_dump_path, to_json());
      message += " State dumped to " + config.oom_dump_path + ".";
    } catch (const std::exception& e) {
      message += std::string(" (OOM dump failed: ") + e.what() + ")";
    }
  }
  throw OutOfMemoryError(message);
}

}  // namespace delta
