// Blocks and the pages under them: the allocator's two building blocks.
#pragma once

#include "allocator/structures/size_classes.hpp"

#include <delta/device.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace delta::detail {

struct Arena;

// A contiguous range of an arena's virtual addresses. The blocks of an arena tile its whole
// reservation in address order; free neighbours are always merged, so every free block sits
// between non-free ones (or the arena's ends).
struct Block {
  enum class State : std::uint8_t {
    free,       // in its pool's best-fit index
    allocated,  // handed out to a caller
    binned,     // freed, parked in an exact-size bin for the fast path (not merged yet)
    pending,    // freed by the caller, waiting for other streams' events before reuse
  };
  DevicePtr ptr = 0;
  std::size_t size = 0;
  std::size_t requested = 0;  // what the caller asked for (allocated blocks only)
  Block* prev = nullptr;      // address neighbours within the arena
  Block* next = nullptr;
  Arena* arena = nullptr;
  State state = State::free;
  std::uint32_t pending_events = 0;
  // Pages under this block that unmap_pages took away (own-pages blocks only, allocated or
  // pending). Kept on the block so that the free path tests one word, not every page.
  std::uint32_t unmapped_pages = 0;
  // Packed blocks only: the bytes at the block's end that are away (unmap_pages took them and
  // map_pages has not given them back). The block is present on a page while any byte of it
  // before those lies on the page.
  std::size_t away_bytes = 0;
  std::vector<StreamHandle> uses;  // other streams recorded by record_stream

  DevicePtr end() const { return ptr + size; }
};

// Best-fit order: smallest first, then lowest address (deterministic, packs low addresses).
struct BySizeThenAddress {
  bool operator()(const Block* a, const Block* b) const {
    return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
  }
};

// Recycles Block objects so that splitting and merging never call the heap on the fast path.
class BlockRecycler {
 public:
  Block* make() {
    if (spare_.empty()) return &storage_.emplace_back();
    Block* b = spare_.back();
    spare_.pop_back();
    return b;
  }
  void recycle(Block* b) {
    *b = Block{};
    spare_.push_back(b);
  }

 private:
  std::deque<Block> storage_;  // stable addresses
  std::vector<Block*> spare_;
};

// One granularity-sized page of an arena. A page is mapped with its own physical handle, so
// any page can be unmapped and its handle mapped elsewhere without moving any live block.
struct Page {
  PhysHandle handle = 0;       // 0: unmapped
  std::uint32_t users = 0;     // non-free blocks (allocated, binned, pending) overlapping it
  Page* idle_prev = nullptr;   // links in the allocator's idle list (mapped, users == 0)
  Page* idle_next = nullptr;
  Arena* owner = nullptr;      // set when the page is first used
  bool idle = false;
  // Unmapped on purpose under its (own-pages) block by unmap_pages: the one case of a used
  // page without a handle. Cleared by map_pages, or when the block's pages are released.
  bool hole = false;
  // Packed arenas: the non-free blocks over this page with none of their present bytes on it.
  // The page is unmapped (a hole) when every user is away, and mapped while any is present.
  std::uint32_t away = 0;
  // Packed arenas: an event recorded on the arena's stream when a block over this page was
  // freed while others still use the page: the freed bytes' work may be in flight, so the page
  // is unmapped only once the event has completed. 0: none.
  EventHandle fence = 0;
  // The fence could not be recorded (the device refused an event): the page is unmapped only
  // after the arena's stream has finished all its work instead.
  bool fence_by_stream = false;
  // Idle pages: the idle fence (structures/idle_fences.hpp) recorded after the work on its
  // bytes, which a reclaim waits for; IdleFences::kNone: the reclaim waits for the stream.
  std::uint64_t idle_fence = 0;
};

}  // namespace delta::detail
