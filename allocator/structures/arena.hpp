// An arena: one stream's pool (small or large) over one virtual address reservation. Blocks
// are carved from it by best fit; physical pages are mapped under a block when it is handed
// out and stay mapped (cached) after it is freed, until the allocator reclaims them.
#pragma once

#include "allocator/structures/block.hpp"
#include "allocator/structures/page_table.hpp"

#include <cstddef>

namespace delta::detail {

struct StreamPools;

struct Arena {
  StreamHandle stream = 0;
  StreamPools* pools = nullptr;  // the stream's pools this arena belongs to
  PoolKind pool = PoolKind::small;
  std::uint8_t group = 0;        // packed arenas: the placement group its blocks belong to
  DevicePtr base = 0;
  std::size_t va_size = 0;
  std::size_t page_size = 0;
  PageTable pages;              // va_size / page_size entries
  std::size_t touched_pages = 0; // pages at or beyond this index were never mapped
  Block* first = nullptr;        // lowest-address block

  std::size_t page_of(DevicePtr p) const { return (p - base) / page_size; }
  DevicePtr page_address(std::size_t index) const { return base + index * page_size; }
  std::size_t index_of(const Page* page) const { return static_cast<std::size_t>(page - pages.data()); }
  // Pages overlapping [ptr, ptr + size).
  std::size_t first_page(const Block* b) const { return page_of(b->ptr); }
  std::size_t last_page(const Block* b) const { return page_of(b->end() - 1); }
};

}  // namespace delta::detail
