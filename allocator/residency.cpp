// The residency hooks: the pages of a live own-pages block taken away (unmap_pages) and given
// back at the same addresses (map_pages), and the spare pool that makes giving back cheap.
//
// An own-pages block is alone on its pages (PoolKind::pages), so unmapping one of them
// affects no other block. Such a page keeps its block as its one user but has no handle: a
// "hole". Holes are never idle, so nothing that reclaims cached memory (the OOM path, garbage
// collection, empty_cache) ever looks at them. When the block is freed, its holes become
// ordinary unmapped pages of free space, which the allocation path already maps on reuse.
//
// Packed blocks (PoolKind::packed) share the pages between them. A page there counts its users
// away (Page::away); it is unmapped when the last user present on it leaves, and mapped when
// one comes back. A block is away from its end (Block::away_bytes), so the pages it is away
// on are a run at its end: away_pages().
#include "allocator/allocator_impl.hpp"

#include "allocator/reports/format.hpp"

#include <algorithm>
#include <functional>

namespace delta {

using detail::Arena;
using detail::Block;
using detail::Page;

namespace {

// "map_pages(0x..., offset 0, 2097152 bytes)"; describe() is the same for an error message.
std::string call_text(const char* call, DevicePtr ptr, std::size_t offset, std::size_t bytes) {
  return std::string(call) + "(" + format_hex(ptr) + ", offset " + std::to_string(offset) + ", " +
         std::to_string(bytes) + " bytes)";
}

std::string describe(const char* call, DevicePtr ptr, std::size_t offset, std::size_t bytes) {
  return "DELTA: " + call_text(call, ptr, offset, bytes);
}

}  // namespace

CachingAllocator::Impl::PageRange CachingAllocator::Impl::own_pages_range(const char* call, DevicePtr ptr,
                                                                          std::size_t offset,
                                                                          std::size_t bytes) const {
  Block* const* found = live.find(ptr);
  if (!found) {
    throw std::invalid_argument(describe(call, ptr, offset, bytes) + ": " + format_hex(ptr) +
                                " is not a live DELTA allocation (never allocated, already freed, or an "
                                "interior pointer); nothing was changed");
  }
  Block* b = *found;
  if (b->arena->pool != PoolKind::pages && b->arena->pool != PoolKind::packed) {
    throw std::invalid_argument(describe(call, ptr, offset, bytes) + ": the block at " + format_hex(ptr) +
                                " was not allocated with Placement::own_pages, so it shares pages with "
                                "other blocks; nothing was changed");
  }
  if (b->arena->pool == PoolKind::packed) {  // byte ranges: the packed paths check the rest
    if (offset > b->size || bytes > b->size - offset) {
      throw std::invalid_argument(describe(call, ptr, offset, bytes) + ": the range ends past the end of the block at " +
                                  format_hex(ptr) + ", which is " + format_bytes(b->size) + "; nothing was changed");
    }
    return PageRange{b, 0, 0};
  }
  if (offset % page_size != 0 || bytes % page_size != 0) {
    throw std::invalid_argument(describe(call, ptr, offset, bytes) + ": offset and bytes must be multiples of the " +
                                format_bytes(page_size) + " page size; nothing was changed");
  }
  if (offset > b->size || bytes > b->size - offset) {
    throw std::invalid_argument(describe(call, ptr, offset, bytes) + ": the range ends past the end of the block at " +
                                format_hex(ptr) + ", which is " + format_bytes(b->size) + "; nothing was changed");
  }
  return PageRange{b, b->arena->page_of(b->ptr + offset), bytes / page_size};
}

std::size_t CachingAllocator::Impl::unmap_pages(DevicePtr ptr, std::size_t offset, std::size_t bytes) {
  PageRange r = own_pages_range("unmap_pages", ptr, offset, bytes);
  if (r.block->arena->pool == PoolKind::packed) return unmap_packed(r.block, ptr, offset, bytes);
  Arena& arena = *r.block->arena;
  // Check the whole range before unmapping anything, so that a refused call changes nothing.
  for (std::size_t i = r.first; i < r.first + r.count; ++i) {
    if (!arena.pages[i].handle) {
      throw std::invalid_argument(describe("unmap_pages", ptr, offset, bytes) + ": the page at " +
                                  format_hex(arena.page_address(i)) + " (block offset " +
                                  std::to_string(arena.page_address(i) - ptr) +
                                  ") is already unmapped; nothing was changed");
    }
  }
  // No synchronization: by the method's contract no device work uses these pages any more.
  // Each page is fully accounted before the next, so a device failure part way leaves the
  // pages before it unmapped and the state consistent.
  for (std::size_t i = r.first; i < r.first + r.count; ++i) {
    Page& page = arena.pages[i];
    DevicePtr va = arena.page_address(i);
    device->unmap(va, page_size);
    PhysHandle handle = page.handle;
    page.handle = 0;
    page.hole = true;
    ++r.block->unmapped_pages;
    stats.unmapped_bytes += page_size;
    --mapped_pages;
    ++stats.segment_unmaps;
    log.record(AllocatorEvent::Kind::unmap, va, page_size, arena.stream);
    give_back_handle(handle);
  }
  return bytes;
}

void CachingAllocator::Impl::map_pages(DevicePtr ptr, std::size_t offset, std::size_t bytes, WhenShort when_short) {
  PageRange r = own_pages_range("map_pages", ptr, offset, bytes);
  if (r.block->arena->pool == PoolKind::packed) return map_packed(r.block, ptr, offset, bytes, when_short);
  Arena& arena = *r.block->arena;
  for (std::size_t i = r.first; i < r.first + r.count; ++i) {
    if (arena.pages[i].handle) {
      throw std::invalid_argument(describe("map_pages", ptr, offset, bytes) + ": the page at " +
                                  format_hex(arena.page_address(i)) + " (block offset " +
                                  std::to_string(arena.page_address(i) - ptr) +
                                  ") is mapped; only pages unmap_pages took away can be mapped; nothing was changed");
    }
  }
  std::vector<std::size_t> holes(r.count);
  for (std::size_t k = 0; k < r.count; ++k) holes[k] = r.first + k;
  Block* b = r.block;
  map_holes(arena, holes, call_text("map_pages", ptr, offset, bytes), bytes, when_short,
            [b](int change) { b->unmapped_pages += change; });
}

// Maps the holes `pages` of `arena` again (each unmapped under a live block), counting each
// with count_holes(-1). As allocate's OOM path: when the pages cannot all be found, complete
// pending frees and flush the bins (their pages become idle, hence reclaimable), then look once
// more (not with WhenShort::fail). Every handle is taken before any page is mapped, and a
// failure part way unmaps what this call mapped, so the holes are left as they were and no new
// memory behind. `call` names the caller's call in the OOM message; `bytes` is what it asked.
void CachingAllocator::Impl::map_holes(Arena& arena, const std::vector<std::size_t>& pages, const std::string& call,
                                       std::size_t bytes, WhenShort when_short,
                                       const std::function<void(int)>& count_holes) {
  if (pages.empty()) return;
  const StreamHandle stream = arena.stream;
  auto out_of_memory = [&] {
    throw_out_of_memory(call + " needs " + std::to_string(pages.size()) + " page(s), " +
                            format_bytes(pages.size() * page_size),
                        bytes, stream);
  };
  if (!pages_obtainable(pages.size())) {
    if (when_short == WhenShort::fail) out_of_memory();
    process_events(true);
    flush_bins();
    if (!pages_obtainable(pages.size())) out_of_memory();
  }
  std::vector<PhysHandle> handles;
  handles.reserve(pages.size());
  auto park = [&](std::size_t from) {
    for (std::size_t k = from; k < handles.size(); ++k) {
      try {
        give_back_handle(handles[k]);
      } catch (...) {
        // give_back_handle kept it as a spare: still accounted, nothing leaks.
      }
    }
  };
  try {
    while (handles.size() < pages.size()) {
      PhysHandle h = obtain_handle(stream);
      if (!h) break;
      handles.push_back(h);
    }
  } catch (...) {
    park(0);
    throw;
  }
  if (handles.size() < pages.size()) {  // the device had less room than the limit promised
    park(0);
    out_of_memory();
  }
  std::size_t done = 0;
  try {
    for (; done < pages.size(); ++done) {
      const DevicePtr va = arena.page_address(pages[done]);
      device->map(va, page_size, handles[done]);
      Page& page = arena.pages[pages[done]];
      page.handle = handles[done];
      page.hole = false;
      count_holes(-1);
      stats.unmapped_bytes -= page_size;
      ++mapped_pages;
      ++stats.segment_maps;
      log.record(AllocatorEvent::Kind::map, va, page_size, stream);
    }
  } catch (...) {
    // A page the device refuses to unmap again stays mapped, and accounted as such.
    for (std::size_t k = 0; k < done; ++k) {
      const DevicePtr va = arena.page_address(pages[k]);
      try {
        device->unmap(va, page_size);
      } catch (...) {
        continue;
      }
      Page& page = arena.pages[pages[k]];
      page.handle = 0;
      page.hole = true;
      count_holes(+1);
      stats.unmapped_bytes += page_size;
      --mapped_pages;
      ++stats.segment_unmaps;
      log.record(AllocatorEvent::Kind::unmap, va, page_size, stream);
      try {
        give_back_handle(handles[k]);
      } catch (...) {
      }
    }
    park(done);
    throw;
  }
}

bool CachingAllocator::Impl::pages_mapped(DevicePtr ptr, std::size_t offset, std::size_t bytes) const {
  PageRange r = own_pages_range("pages_mapped", ptr, offset, bytes);
  const Arena& arena = *r.block->arena;
  if (arena.pool == PoolKind::packed) {
    if (bytes == 0) return true;
    for (std::size_t i = arena.page_of(ptr + offset), last = arena.page_of(ptr + offset + bytes - 1); i <= last; ++i)
      if (!arena.pages[i].handle) return false;
    return true;
  }
  for (std::size_t i = r.first; i < r.first + r.count; ++i)
    if (!arena.pages[i].handle) return false;
  return true;
}

void CachingAllocator::Impl::reserve_spare_pages(std::size_t bytes) {
  std::size_t target = bytes / page_size + (bytes % page_size != 0);
  if (target <= spare_handles.size()) {
    spare_target = target;
    trim_spares(target);
    return;
  }
  std::size_t need = target - spare_handles.size();
  auto out_of_memory = [&] {
    throw_out_of_memory("reserve_spare_pages(" + std::to_string(bytes) + " bytes) needs " + std::to_string(need) +
                            " more page(s), " + format_bytes(need * page_size),
                        need * page_size, 0);
  };
  // Room under the limit and idle cached pages only: the spares held already are what the
  // new ones are added to.
  auto fits = [&] { return pages_obtainable(need + spare_handles.size()); };
  if (!fits()) {
    process_events(true);
    flush_bins();
    if (!fits()) out_of_memory();
  }
  std::vector<PhysHandle> made;
  made.reserve(need);
  auto undo = [&] {
    for (PhysHandle h : made) {
      try {
        release_handle(h);
      } catch (...) {
        spare_handles.push_back(h);  // still held: keep it accounted
      }
    }
  };
  try {
    while (made.size() < need) {
      PhysHandle h = fresh_handle(0);
      if (!h) break;
      made.push_back(h);
    }
  } catch (...) {
    undo();
    throw;
  }
  if (made.size() < need) {
    undo();
    out_of_memory();
  }
  spare_handles.insert(spare_handles.end(), made.begin(), made.end());
  spare_target = target;
}

// A handle no mapping uses any more: kept as a spare while the pool is below its target,
// otherwise returned to the device. If the device refuses it, it is kept as a spare (so it
// stays accounted in reserved bytes) and the error is rethrown.
void CachingAllocator::Impl::give_back_handle(PhysHandle handle) {
  if (spare_handles.size() < spare_target) {
    spare_handles.push_back(handle);
    return;
  }
  try {
    release_handle(handle);
  } catch (...) {
    spare_handles.push_back(handle);
    throw;
  }
}

// Releases spares until at most `keep` are left.
void CachingAllocator::Impl::trim_spares(std::size_t keep) {
  while (spare_handles.size() > keep) {
    release_handle(spare_handles.back());  // a refused handle stays in the pool
    spare_handles.pop_back();
  }
}

// The block's pages are being released: its holes become plain unmapped pages. A block freed
// at once is still `allocated` here, and its holes still count as live unmapped bytes; a
// deferred free stopped counting them when it was deferred.
void CachingAllocator::Impl::forget_holes(Block* b) {
  if (b->state == Block::State::allocated) stats.unmapped_bytes -= b->unmapped_pages * page_size;
  Arena& arena = *b->arena;
  for (std::size_t i = arena.first_page(b), last = arena.last_page(b); i <= last; ++i) arena.pages[i].hole = false;
  b->unmapped_pages = 0;
}

std::pair<std::size_t, std::size_t> CachingAllocator::Impl::away_pages(const Block* b, std::size_t present) const {
  const Arena& arena = *b->arena;
  const std::size_t first = present == 0 ? arena.first_page(b) : arena.page_of(b->ptr + present - 1) + 1;
  return {first, arena.last_page(b)};
}

std::size_t CachingAllocator::Impl::unmap_packed(Block* b, DevicePtr ptr, std::size_t offset, std::size_t bytes) {
  const std::size_t present = b->size - b->away_bytes;
  if (offset + bytes != present) {
    throw std::invalid_argument(describe("unmap_pages", ptr, offset, bytes) +
                                ": a packed block leaves from its end: the range must end where its present part ends, "
                                "at offset " + std::to_string(present) + "; nothing was changed");
  }
  if (bytes == 0) return 0;
  Arena& arena = *b->arena;
  // The pages the block leaves now: away from the new present end, and not away before.
  const std::size_t first = away_pages(b, offset).first;
  const std::size_t before = std::min(away_pages(b, present).first, arena.last_page(b) + 1);
  // Counted first, then unmapped: a device failure part way leaves pages mapped with every
  // user away, a state the allocator allows (a freed neighbour leaves such pages too).
  b->away_bytes += bytes;
  std::vector<std::size_t> leaving;
  for (std::size_t i = first; i < before; ++i) {
    Page& page = arena.pages[i];
    if (++page.away == page.users && page.handle) leaving.push_back(i);
  }
  std::size_t unmapped = 0;
  for (std::size_t i : leaving) {
    Page& page = arena.pages[i];
    if (page.fence) {  // bytes freed on this page may still be used by queued work
      device->synchronize_event(page.fence);
      event_pool.push_back(page.fence);
      page.fence = 0;
    }
    if (page.fence_by_stream) {
      device->synchronize_stream(arena.stream);
      page.fence_by_stream = false;
    }
    const DevicePtr va = arena.page_address(i);
    device->unmap(va, page_size);
    const PhysHandle handle = page.handle;
    page.handle = 0;
    page.hole = true;
    ++packed_hole_pages;
    stats.unmapped_bytes += page_size;
    --mapped_pages;
    ++stats.segment_unmaps;
    log.record(AllocatorEvent::Kind::unmap, va, page_size, arena.stream);
    unmapped += page_size;
    give_back_handle(handle);
  }
  return unmapped;
}

void CachingAllocator::Impl::map_packed(Block* b, DevicePtr ptr, std::size_t offset, std::size_t bytes,
                                        WhenShort when_short) {
  const std::size_t present = b->size - b->away_bytes;
  if (offset != present || bytes > b->away_bytes) {
    throw std::invalid_argument(describe("map_pages", ptr, offset, bytes) +
                                ": a packed block comes back from where its present part ends, at offset " +
                                std::to_string(present) + ", for at most the " + std::to_string(b->away_bytes) +
                                " bytes away; nothing was changed");
  }
  if (bytes == 0) return;
  Arena& arena = *b->arena;
  const std::size_t first = away_pages(b, present).first;
  const std::size_t after = std::min(away_pages(b, present + bytes).first, arena.last_page(b) + 1);
  std::vector<std::size_t> missing;
  for (std::size_t i = first; i < after; ++i)
    if (!arena.pages[i].handle) missing.push_back(i);
  map_holes(arena, missing, call_text("map_pages", ptr, offset, bytes), bytes, when_short,
            [this](int change) { packed_hole_pages += change; });
  for (std::size_t i = first; i < after; ++i) --arena.pages[i].away;
  b->away_bytes -= bytes;
}

void CachingAllocator::Impl::release_packed(Block* b) {
  Arena& arena = *b->arena;
  if (b->away_bytes) {
    const std::size_t first = away_pages(b, b->size - b->away_bytes).first;
    for (std::size_t i = first, last = arena.last_page(b); i <= last; ++i) {
      Page& page = arena.pages[i];
      --page.away;
      if (page.hole && page.users == 1) {  // its last user: plain unmapped free space now
        page.hole = false;
        --packed_hole_pages;
        stats.unmapped_bytes -= page_size;
      }
    }
    b->away_bytes = 0;
  }
  // The pages at the block's ends that others still use: work queued on the freed bytes must
  // finish before such a page is unmapped (unmap_packed waits for the fence). A page whose last
  // user this is becomes idle, and reclaiming idle pages waits for the stream.
  const std::size_t ends[2] = {arena.first_page(b), arena.last_page(b)};
  for (std::size_t k = 0; k < 2; ++k) {
    if (k == 1 && ends[1] == ends[0]) break;
    Page& page = arena.pages[ends[k]];
    if (!page.handle) continue;
    if (page.users > 1) {
      // The block is no longer live here: a device refusing the event must not leave it half
      // released, so the page falls back to waiting for its whole stream before an unmap.
      try {
        if (!page.fence) page.fence = take_event();
        device->record_event(page.fence, arena.stream);
      } catch (...) {
        if (page.fence) event_pool.push_back(page.fence);
        page.fence = 0;
        page.fence_by_stream = true;
      }
    } else {
      if (page.fence) event_pool.push_back(page.fence);
      page.fence = 0;
      page.fence_by_stream = false;
    }
  }
}

}  // namespace delta
