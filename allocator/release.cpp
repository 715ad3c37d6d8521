// The free path (bins, deferred frees completed by events, merging) and the reclaiming of
// cached pages (idle-page reuse, garbage collection, empty_cache). Reclaiming takes idle pages
// only (mapped, no users), so it never touches a live block's pages, mapped or not.
#include "allocator/allocator_impl.hpp"

#include "allocator/reports/format.hpp"

#include <set>

namespace delta {

using detail::Arena;
using detail::Block;
using detail::Page;

void CachingAllocator::Impl::deallocate(DevicePtr ptr) {
  Block** found = live.find(ptr);
  if (!found) {
    throw InvalidFreeError("DELTA: free of " + format_hex(ptr) +
                           ", which is not a live DELTA allocation (never allocated by DELTA, "
                           "already freed, or an interior pointer); nothing was changed");
  }
  Block* b = *found;
  // Record the events first: if the device fails otherwise (a wait refused, no event to be
  // had), the block stays live and nothing has changed.
  std::vector<EventHandle> events;
  bool device_idle = false;  // waited for the whole device: no stream can still use the block
  try {
    for (StreamHandle s : b->uses) {
      EventHandle e = take_event();
      try {
        device->record_event(e, s);
      } catch (const DeviceError& err) {
        event_pool.push_back(e);
        if (err.code() != DeviceErrc::invalid_handle) throw;  // a failing device: the block stays live
        // A stream recorded by record_stream that its owner destroyed since (or never a
        // stream): its work ends within a device-wide wait, after which nothing uses the block.
        device->synchronize();
        device_idle = true;
        break;
      }
      events.push_back(e);
    }
  } catch (...) {
    for (EventHandle e : events) event_pool.push_back(e);
    throw;
  }
  if (device_idle) {  // the events recorded before the wait are complete: not needed
    for (EventHandle e : events) event_pool.push_back(e);
    events.clear();
  }
  live.erase(ptr);
  ++stats.free_count;
  stats.allocated_bytes -= b->size;
  stats.requested_bytes -= b->requested;
  b->requested = 0;
  b->uses.clear();
  if (!events.empty()) {
    // Holes of a block freed with holes stop counting as live unmapped bytes now; they become
    // plain unmapped pages when its pages are released (forget_holes). A free that completes
    // at once does both in release_block, so the common free path tests nothing here.
    stats.unmapped_bytes -= b->unmapped_pages * page_size;
    b->state = Block::State::pending;
    b->pending_events = static_cast<std::uint32_t>(events.size());
    for (EventHandle e : events) pending.push_back({e, b});
    log.record(AllocatorEvent::Kind::free_deferred, b->ptr, b->size, b->arena->stream);
    return;
  }
  log.record(AllocatorEvent::Kind::free, b->ptr, b->size, b->arena->stream);
  stats.active_bytes -= b->size;
  release_block(b);
}

void CachingAllocator::Impl::release_block(Block* b) {
  if (b->arena->pool == PoolKind::small && binned_bytes + b->size <= kMaxBinnedBytes) {
    auto& classes = b->arena->pools->bins.by_class;
    if (classes.empty()) classes.resize(detail::SmallBins::kClasses);
    auto& bin = classes[b->size / kMinBlockSize - 1];
    if (bin.size() < detail::SmallBins::kMaxPerClass) {
      b->state = Block::State::binned;
      bin.push_back(b);
      binned_bytes += b->size;
      return;
    }
  }
  Arena& arena = *b->arena;
  if (b->unmapped_pages) [[unlikely]] forget_holes(b);
  if (arena.pool == PoolKind::packed) [[unlikely]] release_packed(b);
  const std::size_t first = arena.first_page(b), last = arena.last_page(b);
  for (std::size_t i = first; i <= last; ++i) page_unused(arena, i);
  if (idle_fences.on()) {
    std::uint64_t fence = detail::IdleFences::kNone;  // shared by the pages this block leaves idle
    fence_idle_pages(arena, first, last, fence);
  }
  free_and_merge(b);
}

// The pages of [first, last] that are idle now get `fence`, recorded on the arena's stream
// after the work queued on their bytes if it is not yet (kNone).
void CachingAllocator::Impl::fence_idle_pages(Arena& arena, std::size_t first, std::size_t last, std::uint64_t& fence) {
  for (std::size_t i = first; i <= last; ++i) {
    Page& page = arena.pages[i];
    if (!page.idle) continue;
    if (fence == detail::IdleFences::kNone) fence = idle_fences.record(*device, arena.stream);
    page.idle_fence = fence;
  }
}

// Puts a block whose pages are already released back into the best-fit index, merged with
// free neighbours.
void CachingAllocator::Impl::free_and_merge(Block* b) {
  auto& index = b->arena->pools->free[static_cast<int>(b->arena->pool)];
  b->state = Block::State::free;
  if (Block* n = b->next; n && n->state == Block::State::free) {
    index.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    blocks.recycle(n);
  }
  if (Block* p = b->prev; p && p->state == Block::State::free) {
    index.erase(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    blocks.recycle(b);
    b = p;
  }
  index.insert(b);
}

void CachingAllocator::Impl::process_events(bool wait) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < pending.size(); ++i) {
    PendingEvent entry = pending[i];
    bool done = false;
    if (wait) {
      device->synchronize_event(entry.event);
      done = true;
    } else {
      done = device->query_event(entry.event);
    }
    if (!done) {
      pending[kept++] = entry;
      continue;
    }
    event_pool.push_back(entry.event);
    if (--entry.block->pending_events == 0) {
      Block* b = entry.block;
      log.record(AllocatorEvent::Kind::free_completed, b->ptr, b->size, b->arena->stream);
      stats.active_bytes -= b->size;
      release_block(b);
    }
  }
  pending.resize(kept);
}

void CachingAllocator::Impl::flush_bins() {
  for (auto& [stream, pools] : streams) {
    std::uint64_t fence = detail::IdleFences::kNone;
    for (auto& bin : pools->bins.by_class) {
      for (Block* b : bin) {
        binned_bytes -= b->size;
        Arena& arena = *b->arena;
        const std::size_t first = arena.first_page(b), last = arena.last_page(b);
        for (std::size_t i = first; i <= last; ++i) page_unused(arena, i);
        // One fence per stream's flush: its binned blocks' work was all queued before it.
        if (idle_fences.on()) fence_idle_pages(arena, first, last, fence);
        free_and_merge(b);
      }
      bin.clear();
    }
  }
}

// Unmaps an idle page after the work its stream queued so far has finished: unmapping does
// not wait for kernels that may still read the freed bytes.
void CachingAllocator::Impl::unmap_page(Page* page) {
  Arena& arena = *page->owner;
  DevicePtr va = arena.page_address(arena.index_of(page));
  idle_remove(page);
  device->unmap(va, page_size);
  --mapped_pages;
  ++stats.segment_unmaps;
  log.record(AllocatorEvent::Kind::unmap, va, page_size, arena.stream);
}

void CachingAllocator::Impl::release_handle(PhysHandle handle) {
  device->release_physical(handle);
  stats.reserved_bytes -= page_size;
}

// Takes the least recently idle cached page for a new mapping.
bool CachingAllocator::Impl::reclaim_idle_page(StreamHandle, PhysHandle& handle) {
  if (!idle_head) return false;
  Page* page = idle_head;
  idle_fences.wait(*device, page->owner->stream, page->idle_fence);
  idle_fences.turn_on();  // reclaims happen here: later idle pages get fences
  handle = page->handle;
  unmap_page(page);
  page->handle = 0;
  return true;
}

void CachingAllocator::Impl::release_all_idle_pages() {
  process_events(false);
  flush_bins();
  std::set<StreamHandle> synced;
  for (Page* p = idle_head; p; p = p->idle_next)
    if (synced.insert(p->owner->stream).second) detail::synchronize_stream_or_device(*device, p->owner->stream);
  while (idle_head) {
    Page* page = idle_head;
    PhysHandle handle = page->handle;
    unmap_page(page);
    page->handle = 0;
    give_back_handle(handle);
  }
  trim_spares(spare_target);
  log.record(AllocatorEvent::Kind::empty_cache, 0, stats.reserved_bytes, 0);
}

EventHandle CachingAllocator::Impl::take_event() {
  if (event_pool.empty()) return device->create_event();
  EventHandle e = event_pool.back();
  event_pool.pop_back();
  return e;
}

}  // namespace delta
