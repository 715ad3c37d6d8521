// The invariant checker: recomputes everything the allocator keeps incrementally and compares.
// Tests call it after every step; it is linear in blocks and touched pages.
#include "allocator/allocator_impl.hpp"

#include "allocator/reports/format.hpp"

#include <algorithm>
#include <unordered_set>

namespace delta {

using detail::Arena;
using detail::Block;
using detail::Page;

namespace {
[[noreturn]] void broken(const std::string& rule) { throw InvariantError("allocator invariant broken: " + rule); }
}  // namespace

void CachingAllocator::Impl::check() const {
  std::size_t allocated = 0, requested = 0, active = 0, binned = 0, pending_blocks = 0;
  std::size_t mapped = 0, live_seen = 0, live_holes = 0, packed_holes = 0;
  // Every physical handle the allocator holds is mapped under exactly one page or is a spare.
  std::unordered_set<PhysHandle> handles;
  for (PhysHandle h : spare_handles)
    if (h == 0 || !handles.insert(h).second) broken("spare pool holds a null or duplicate handle");
  std::unordered_set<const Block*> pending_set;
  for (const PendingEvent& p : pending) pending_set.insert(p.block);
  std::unordered_set<const Page*> idle_set;
  for (const Page* p = idle_head; p; p = p->idle_next) {
    if (!idle_set.insert(p).second) broken("idle list has a cycle or a duplicate page");
    if (!p->idle || p->users != 0 || !p->handle) broken("idle list holds a page that is not idle, unused and mapped");
    if (p->idle_fence != detail::IdleFences::kNone && !idle_fences.on()) broken("an idle page has a fence while idle fences are off");
  }
  idle_fences.check();
  if (idle_set.size() != idle_count) broken("idle count " + std::to_string(idle_count) + " != list length " + std::to_string(idle_set.size()));

  for (const auto& [stream, pools] : streams) {
    if (pools->stream != stream) broken("stream pools keyed by the wrong stream");
    std::size_t free_in_index[kPoolKinds] = {};
    for (int pool = 0; pool < kPoolKinds; ++pool) {
      for (const Block* b : pools->free[pool]) {
        if (b->state != Block::State::free) broken("best-fit index holds a non-free block at " + format_hex(b->ptr));
        if (b->arena->pools != pools.get() || static_cast<int>(b->arena->pool) != pool) broken("free block indexed in the wrong pool");
      }
      for (const auto& arena_ptr : pools->arenas[pool]) {
        const Arena& arena = *arena_ptr;
        if (arena.pools != pools.get() || arena.stream != stream) broken("arena owned by the wrong stream");
        // Placement groups part packed arenas only (Placement::group).
        if (arena.group != 0 && arena.pool != PoolKind::packed) broken("an arena other than a packed one has a placement group");
        std::vector<std::uint32_t> users(arena.pages.size(), 0);
        std::vector<std::uint32_t> away(arena.pool == PoolKind::packed ? arena.pages.size() : 0, 0);
        DevicePtr expect = arena.base;
        const Block* prev = nullptr;
        for (const Block* b = arena.first; b; prev = b, b = b->next) {
          if (b->arena != &arena) broken("block " + format_hex(b->ptr) + " points at another arena");
          if (b->prev != prev) broken("block list back link broken at " + format_hex(b->ptr));
          if (b->ptr != expect) broken("blocks do not tile the arena at " + format_hex(expect));
          if (b->size == 0 || b->size % kMinBlockSize) broken("block size " + std::to_string(b->size) + " not a positive multiple of 512");
          // Own-pages arenas hold whole pages only, free space included: then no block can
          // ever share a page with another there.
          if (arena.pool == PoolKind::pages && ((b->ptr - arena.base) % page_size || b->size % page_size))
            broken("block " + format_hex(b->ptr) + " of an own-pages arena is not whole pages");
          expect = b->end();
          if (b->away_bytes > b->size || (b->away_bytes && (arena.pool != PoolKind::packed || b->state == Block::State::free)))
            broken("block " + format_hex(b->ptr) + " has " + std::to_string(b->away_bytes) + " bytes away but is not a live packed block of that size");
          if (arena.pool == PoolKind::packed && b->state != Block::State::free && b->away_bytes) {
            const auto away_run = away_pages(b, b->size - b->away_bytes);
            for (std::size_t i = away_run.first; i <= away_run.second; ++i) ++away[i];
          }
          std::uint32_t holes = 0;
          for (std::size_t i = arena.first_page(b), last = arena.last_page(b); i <= last && i < arena.touched_pages; ++i)
            holes += arena.pages[i].hole;
          if (arena.pool != PoolKind::packed && holes != b->unmapped_pages)
            broken("block " + format_hex(b->ptr) + " counts " + std::to_string(b->unmapped_pages) + " unmapped pages, its pages say " + std::to_string(holes));
          if (b->state == Block::State::free) {
            if (holes && arena.pool != PoolKind::packed) broken("free block " + format_hex(b->ptr) + " holds pages unmapped by unmap_pages");
            if (prev && prev->state == Block::State::free) broken("two adjacent free blocks at " + format_hex(b->ptr));
            if (!pools->free[pool].count(const_cast<Block*>(b))) broken("free block " + format_hex(b->ptr) + " missing from the index");
            ++free_in_index[pool];
            continue;
          }
          for (std::size_t i = arena.first_page(b), last = arena.last_page(b); i <= last; ++i) ++users[i];
          switch (b->state) {
            case Block::State::allocated: {
              detail::Block* const* found = live.find(b->ptr);
              if (!found || *found != b) broken("allocated block " + format_hex(b->ptr) + " missing from the live map");
              allocated += b->size;
              live_holes += b->unmapped_pages;
              requested += b->requested;
              active += b->size;
              ++live_seen;
              if (b->requested > b->size) broken("block smaller than its request");
              break;
            }
            case Block::State::binned: {
              binned += b->size;
              if (arena.pool != PoolKind::small) broken("a large block is binned");
              const auto& bin = pools->bins.by_class.at(b->size / kMinBlockSize - 1);
              if (std::find(bin.begin(), bin.end(), b) == bin.end()) broken("binned block not in its bin");
              break;
            }
            case Block::State::pending:
              ++pending_blocks;
              active += b->size;
              if (!pending_set.count(b) || b->pending_events == 0) broken("pending block without events");
              break;
            default: break;
          }
        }
        if (expect != arena.base + arena.va_size) broken("blocks do not cover the whole arena");
        for (std::size_t i = 0; i < arena.pages.size(); ++i) {
          const Page& page = arena.pages[i];
          if (i >= arena.touched_pages) {
            if (page.handle || page.users) broken("page beyond the touched mark is in use");
            if (users[i]) broken("block on an untouched page");
            break;  // nothing beyond the mark has ever been used
          }
          if (page.users != users[i])
            broken("page " + std::to_string(i) + " of arena " + format_hex(arena.base) + " counts " +
                   std::to_string(page.users) + " users, blocks say " + std::to_string(users[i]));
          if (arena.pool == PoolKind::packed) {
            // Unmapped exactly where every user is away; mapped where one is present. A page
            // whose users are all away may stay mapped (a freed neighbour, a failed unmap).
            if (page.away != away[i])
              broken("packed page " + std::to_string(i) + " counts " + std::to_string(page.away) + " users away, blocks say " +
                     std::to_string(away[i]));
            if (page.hole && (page.handle || page.users == 0 || page.away != page.users || page.idle))
              broken("packed page " + format_hex(arena.page_address(i)) + " is a hole but is mapped, unused or has a user present");
            if (page.hole) ++packed_holes;
            if (page.users > page.away && !page.handle)
              broken("packed page " + format_hex(arena.page_address(i)) + " is unmapped under a block present on it");
            if ((page.fence || page.fence_by_stream) && (!page.handle || page.users == 0))
              broken("packed page " + format_hex(arena.page_address(i)) + " keeps a fence but is unmapped or unused");
          } else if (page.away || page.fence || page.fence_by_stream) {
            broken("page " + format_hex(arena.page_address(i)) + " outside a packed arena counts users away or a fence");
          }
          if (page.hole && arena.pool != PoolKind::packed) {
            // Taken away by unmap_pages from the one own-pages block over it, which is still
            // allocated or pending.
            if (page.handle || page.users != 1 || page.idle || arena.pool != PoolKind::pages)
              broken("unmapped page of a live block at " + format_hex(arena.page_address(i)) +
                     " is mapped, idle, shared or outside an own-pages arena");
          } else if (!page.hole && page.users && !page.handle) {
            broken("a used page is unmapped at " + format_hex(arena.page_address(i)));
          }
          if (page.handle) {
            ++mapped;
            if (!handles.insert(page.handle).second) broken("a physical handle is mapped twice or also spare, at " + format_hex(arena.page_address(i)));
          }
          bool should_idle = page.handle && page.users == 0;
          if (should_idle != page.idle || should_idle != (idle_set.count(&page) != 0))
            broken("idle state of page " + format_hex(arena.page_address(i)) + " is wrong");
        }
      }
    }
    for (int pool = 0; pool < kPoolKinds; ++pool)
      if (free_in_index[pool] != pools->free[pool].size()) broken("best-fit index holds blocks that are not in any arena");
    for (std::size_t c = 0; c < pools->bins.by_class.size(); ++c)
      for (const Block* b : pools->bins.by_class[c])
        if (b->state != Block::State::binned || b->size != (c + 1) * kMinBlockSize) broken("bin holds a wrong block");
  }
  if (live_seen != live.size()) broken("live map holds " + std::to_string(live.size()) + " blocks, arenas " + std::to_string(live_seen));
  if (allocated != stats.allocated_bytes) broken("allocated bytes " + std::to_string(stats.allocated_bytes) + " != sum of blocks " + std::to_string(allocated));
  if (requested != stats.requested_bytes) broken("requested bytes do not add up");
  if (active != stats.active_bytes) broken("active bytes " + std::to_string(stats.active_bytes) + " != " + std::to_string(active));
  if (binned != binned_bytes) broken("binned bytes do not add up");
  if (packed_holes != packed_hole_pages)
    broken("packed hole pages " + std::to_string(packed_hole_pages) + " != " + std::to_string(packed_holes) + " counted");
  if ((live_holes + packed_holes) * page_size != stats.unmapped_bytes)
    broken("unmapped bytes " + std::to_string(stats.unmapped_bytes) + " != live blocks' unmapped pages " +
           std::to_string((live_holes + packed_holes) * page_size));
  if (mapped != mapped_pages) broken("mapped page count " + std::to_string(mapped_pages) + " != " + std::to_string(mapped));
  if ((mapped + spare_handles.size()) * page_size != stats.reserved_bytes)
    broken("reserved bytes " + std::to_string(stats.reserved_bytes) + " != held pages");
  if (stats.reserved_bytes > stats.reserved_peak || stats.allocated_bytes > stats.allocated_peak) broken("a peak is below its current value");
  if (pending_blocks > pending.size()) broken("more pending blocks than events");
}

}  // namespace delta
