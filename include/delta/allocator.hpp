// DELTA's caching allocator: the C++ API. The C ABI (delta.h) and the LD_PRELOAD shim are thin
// layers over one process-wide instance of this class.
#pragma once

#include <delta/device.hpp>
#include <delta/reentrant_lock.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace delta {

// Options. Parsed from PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF and DELTA_* by
// parse_alloc_conf() / config_from_env() (allocator/config.hpp); defaults match PyTorch.
struct AllocatorConfig {
  std::size_t max_split_size = SIZE_MAX;       // max_split_size_mb: blocks above are never split
  // roundup_power2_divisions: index i covers sizes in [2^i MiB... ); 0 = no rounding.
  std::vector<std::size_t> roundup_power2_divisions = std::vector<std::size_t>(64, 0);
  double garbage_collection_threshold = 0.0;   // 0 = off; else fraction of the limit
  double memory_fraction = 1.0;                // fraction of device memory DELTA may reserve
  std::size_t hard_limit_bytes = 0;            // DELTA_MEMORY_LIMIT; 0 = none
  bool release_free_pages_before_oom = true;   // unmap pages of cached free blocks before failing
  // DELTA_EVENT_LOG: events kept for dumps (a ring). Off by default, like PyTorch's memory
  // history: a timestamp per call costs more than the rest of the fast path on some VMs.
  std::size_t event_log_capacity = 0;
  std::string oom_dump_path;                   // DELTA_OOM_DUMP: where to write a dump on OOM
};

struct AllocatorStats {
  std::size_t allocated_bytes = 0, allocated_peak = 0;  // bytes of live blocks (rounded)
  std::size_t requested_bytes = 0, requested_peak = 0;  // bytes asked for by callers
  std::size_t reserved_bytes = 0, reserved_peak = 0;    // physical bytes mapped
  std::size_t active_bytes = 0, active_peak = 0;        // live + pending deferred frees
  std::size_t cached_bytes = 0;                         // reserved but not active (reusable)
  std::uint64_t alloc_count = 0, free_count = 0;
  std::uint64_t cache_hits = 0, cache_misses = 0;       // hit: served without mapping pages
  std::uint64_t segment_maps = 0, segment_unmaps = 0;   // physical pages mapped / unmapped
  std::uint64_t retries = 0, ooms = 0;                  // OOM path: retries after freeing cache
  std::uint64_t gc_runs = 0;
  std::size_t live_blocks = 0, free_blocks = 0, pending_frees = 0;
  std::size_t limit_bytes = 0;                          // effective reservation limit
  // Residency hooks: bytes of live blocks' pages that unmap_pages took away (not reserved),
  // and physical pages held unmapped in the spare pool (reserved; see reserve_spare_pages).
  std::size_t unmapped_bytes = 0;
  std::size_t spare_bytes = 0;
  // 1 - allocated/reserved at this moment (0 when nothing is reserved). Unmapped pages of
  // live blocks hold no memory, so they do not count as allocated here.
  double fragmentation() const {
    return reserved_bytes ? 1.0 - double(allocated_bytes - unmapped_bytes) / double(reserved_bytes) : 0.0;
  }
};

// The OOM error. what() says requested, allocated, reserved, limit and free device memory.
class OutOfMemoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// A free of a pointer DELTA does not own or already freed. State is left untouched.
class InvalidFreeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};
// An invariant checker failure: names the structure and the broken rule.
class InvariantError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// One entry of the event history that dumps write.
struct AllocatorEvent {
  enum class Kind : std::uint8_t { alloc, free, free_deferred, free_completed, map, unmap, oom, empty_cache };
  Kind kind;
  std::uint64_t time_ns;  // steady clock since the allocator was created
  DevicePtr ptr;
  std::size_t size;       // block size (alloc/free), mapping size (map/unmap), request (oom)
  StreamHandle stream;
};
const char* to_string(AllocatorEvent::Kind kind);

// What an allocation or map_pages does when the limit leaves it short of pages (after taking
// spare pages, new ones under the limit and idle cached pages). flush_then_fail: allocate's
// OOM path, as PyTorch's: complete the deferred frees, flush the exact-size bins into the
// free lists and try once more, then throw. fail: throw at once and leave the cache as it is.
// Flushing the bins changes where later small blocks go, so a caller that has memory of its
// own to free first (run mode's evictions in flight) asks to fail, frees, and flushes only
// when it has nothing left to free: the bins are then flushed at the point a model of the
// same calls (the planner's ledger) flushes them, whenever the evictions complete.
enum class WhenShort : std::uint8_t { flush_then_fail, fail };

// Where a block is placed. own_pages: the block starts on a page boundary (the device's
// granularity, 2 MiB), its size is rounded up to whole pages, and no other block shares any
// of its pages while it is live, so that its pages can be unmapped and mapped again
// (unmap_pages / map_pages) without touching anything else.
//
// packed (with own_pages): the block is not rounded to whole pages but packed beside other
// packed blocks, in a pool no ordinary block uses: two packed blocks may share the page
// between them, which stays mapped while either one is present there. unmap_pages and
// map_pages then take away and give back the end of the block (any byte offset): a page goes
// when no block over it has a present byte on it, and comes back when one has again. The
// bytes of an away part that lie on a page still mapped stay as they were (nothing else is
// placed there), but are not the allocator's to keep: only present bytes are. Rounding every
// moved block up to whole pages wasted 0.65 GB of a 5.9 GB budget on gpt2-large at 0.6.
struct Placement {
  bool own_pages = false;
  bool packed = false;
  // packed: blocks of different groups never share a page (each group packs in arenas of its
  // own). A caller that knows which blocks leave and come back together groups them so, and a
  // page is then seldom kept mapped by one block for a neighbour that is away.
  std::uint8_t group = 0;
  WhenShort when_short = WhenShort::flush_then_fail;
};

class CachingAllocator {
 public:
  CachingAllocator(std::shared_ptr<Device> device, AllocatorConfig config);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Blocks are reused per stream. size 0 returns nullptr. Throws OutOfMemoryError.
  void* allocate(std::size_t size, StreamHandle stream);
  // As above, placed as `placement` says. Default placement is the two-argument call.
  // Own-pages blocks come from a pool of their own per stream (never the exact-size bins);
  // stream order, record_stream, deferred frees and statistics are as for any block, and
  // block_size() reports the size rounded up to whole pages (packed: to 512 bytes).
  void* allocate(std::size_t size, StreamHandle stream, Placement placement);
  // Throws InvalidFreeError for a pointer not returned by allocate or already freed.
  void deallocate(void* ptr);
  // The block is also used on `stream`: its free is deferred until that stream's work so far
  // completes (PyTorch's record_stream).
  void record_stream(void* ptr, StreamHandle stream);

  // The allocator's lock. Every method takes it; it is re-entrant, so that an adaptor which keeps
  // state beside the allocator's (run mode's block table) can make it its own lock: one lock per
  // entry point covers both, and the allocator's methods it calls re-enter it cheaply.
  ReentrantLock& lock() const;
  // For a caller that holds lock() already: allocate and deallocate without taking it again, the
  // fast path of such an adaptor (re-entry costs a few nanoseconds a call, which an allocation
  // of a few tens cannot spare). Throws std::logic_error where the calling thread does not hold it.
  struct LockHeld {
    explicit LockHeld() = default;
  };
  void* allocate(std::size_t size, StreamHandle stream, Placement placement, LockHeld);
  void deallocate(void* ptr, LockHeld);

  bool owns(const void* ptr) const;
  // Size of the live block that starts at ptr, or nullopt.
  std::optional<std::size_t> block_size(const void* ptr) const;

  // --- residency hooks: take a live own-pages block's pages away and give them back ---
  // A range is [offset, offset + bytes) of the block at `ptr` (the pointer allocate returned);
  // offset and bytes are multiples of the page size and the range lies inside the block's
  // rounded size. bytes 0 is an empty range. Misuse throws std::invalid_argument naming the
  // call and the pointer, and changes nothing: a pointer that is not a live own-pages block, a
  // misaligned or out-of-range range, or pages not in the state the call expects.
  //
  // Packed blocks (Placement::packed): a range is any byte range at the block's end: unmap_pages
  // takes the last `bytes` of the block's present part ([offset, offset + bytes) must end where
  // it ends) and returns the bytes of pages it unmapped (those no block is present on any
  // more; often fewer than `bytes`); map_pages gives back the first `bytes` of the away part
  // (offset is where the present part ends), mapping the pages that were unmapped; pages_mapped
  // says whether every page the range overlaps is mapped. Before unmapping a page that a block
  // freed meanwhile also covered, the allocator waits for the work its stream had queued then.
  //
  // Unmaps the block's pages over the range; returns the bytes unmapped. Their contents are
  // lost, but the addresses stay the block's: map_pages brings pages back at the same
  // addresses, so pointers into the block stay valid. The physical pages go to the spare pool
  // while it is below its target (reserve_spare_pages), else back to the device, so reserved
  // memory drops. Contract: the caller unmaps only pages that no queued or running device work
  // uses any more (on a GPU, cuMemUnmap does not wait for kernels in flight); the allocator does
  // not synchronize. Every page of the range must be mapped.
  std::size_t unmap_pages(void* ptr, std::size_t offset, std::size_t bytes);
  // Maps pages again under the range (every page of which must be unmapped): spare pages
  // first, then new physical memory within the limit, then idle cached pages, as allocate does.
  // Contents are undefined. Throws OutOfMemoryError when the pages cannot be found, after
  // waiting for pending frees and flushing the bins as allocate's OOM path does (at once with
  // WhenShort::fail); then nothing of the range is mapped and no memory was added (cached idle
  // pages may have been reclaimed).
  void map_pages(void* ptr, std::size_t offset, std::size_t bytes, WhenShort when_short = WhenShort::flush_then_fail);
  // Whether every page of the range is mapped (true for an empty range).
  bool pages_mapped(const void* ptr, std::size_t offset, std::size_t bytes) const;
  // Makes the spare pool hold at least `bytes` (rounded up to pages) of physical pages now,
  // new ones counted against the limit (or idle cached pages when the limit is reached), and
  // makes that its target: unmap_pages and empty_cache keep up to the target's worth of spares
  // instead of giving them back, and map_pages and allocations take spares first, so that they
  // need not create memory on a latency-sensitive path. A smaller value lowers the target and
  // releases the spares above it. Throws OutOfMemoryError, leaving the pool and target as they
  // were, when the pages do not fit.
  void reserve_spare_pages(std::size_t bytes);

  // Unmaps every page no live block touches and releases it, keeping the spare pool's target.
  void empty_cache();
  void set_memory_fraction(double fraction);
  std::size_t limit_bytes() const;         // what mem_info reports as total to LD_PRELOAD users
  // Bytes of pages held that no block uses (idle cached pages and spares): counted as reserved,
  // yet the next mapping takes them before any new page, even at the limit.
  std::size_t unused_page_bytes() const;

  AllocatorStats stats() const;
  void reset_peak_stats();
  void check_invariants() const;           // throws InvariantError

  std::vector<AllocatorEvent> events() const;  // oldest first
  // JSON dump: settings, stats, segments and the event history. Written atomically.
  void dump(const std::string& path) const;
  std::string dump_json() const;

  Device& device() const;
  const AllocatorConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace delta
