// The online policy's state and the operations on it. Every member function expects the
// caller to hold `mutex`; the public methods of OnlinePolicy take it.
#pragma once

#include "executor/event_pool.hpp"
#include "executor/online/host_slots.hpp"
#include "executor/online/online_policy.hpp"

#include <delta/sim_device.hpp>

#include <deque>
#include <map>
#include <memory_resource>
#include <mutex>
#include <thread>

namespace delta::executor {

enum class Place : std::uint8_t {
  resident,  // mapped, current on the device
  leaving,   // mapped; its pages go once `out_done` and `uses_done` complete
  away,      // unmapped; current in its host slot
  arriving,  // mapped; its copy back is queued (`arrived`)
};
const char* to_string(Place);

struct OnlineBlock {
  DevicePtr ptr = 0;
  std::uint64_t size = 0;         // as requested
  std::uint64_t mapped = 0;       // as placed: whole pages when own_pages
  StreamHandle stream = 0;        // its allocation stream
  bool own_pages = false;         // only these can leave
  Place where = Place::resident;
  std::uint64_t last_use = 0;     // the launch clock at its last use (or its allocation)
  std::uint64_t serial = 0;       // tells it from a later block at the same address
  std::uint32_t pins = 0;         // threads whose last launch touches it: it must stay
  bool pinned_for_good = false;   // a captured graph uses it, or another process maps it (pin())
  bool host_current = false;      // its host slot holds its present data
  bool copy_pending = false;      // a copy out is in flight (out_done not yet seen complete)
  void* host = nullptr;           // its host slot, once it has left
  EventHandle out_done = 0, arrived = 0;
  std::uint64_t left_seq = 0;     // when it went away (its entry in `away_stack`)
  std::vector<EventHandle> uses_done;     // every stream that used it, at its eviction
  std::vector<StreamHandle> use_streams;  // streams that used it since its last eviction
};

struct OnlinePolicy::State {
  State(CachingAllocator& allocator, OnlineOptions options);
  ~State();

  CachingAllocator& allocator;
  // The allocator's own lock, as the plan's executor takes it (executor_state.hpp).
  ReentrantLock& mutex;
  Device& device;
  SimDevice* sim = nullptr;  // for stall accounting on the sim clock
  OnlineOptions options;
  std::size_t page_size = 0;
  StreamHandle copy_out_stream = 0, copy_in_stream = 0;
  HostSlots host;
  // Every live block, by address; every allocation inserts one and its free erases it, so the
  // nodes come from a pool of their own rather than a heap round trip each.
  std::pmr::unsynchronized_pool_resource block_nodes;
  std::pmr::map<DevicePtr, OnlineBlock> blocks{&block_nodes};
  std::deque<DevicePtr> leaving;            // in the order they left
  std::uint64_t leaving_bytes = 0;
  // Blocks that went away, last first (stale entries are skipped): what comes back first when
  // there is room, since a backward pass reads the activations in the reverse order of the
  // forward pass that made them, which is the order they left in.
  std::vector<std::pair<DevicePtr, std::uint64_t>> away_stack;
  std::uint64_t away_seq = 0;
  std::uint64_t clock = 0;                  // launches seen
  std::uint64_t serials = 0;
  // Per thread, the blocks its last launch touches (address, serial): pinned until that
  // thread's next entry point, by which time the launch is issued.
  std::map<std::thread::id, std::vector<std::pair<DevicePtr, std::uint64_t>>> pinned;
  bool budget_lifted = false;
  bool bringing_back = false;               // every block comes back: none is evicted for another
  // Graph captures in progress (before_graph_capture): while > 0 nothing moves, so that no call
  // a capture forbids is made; what does not fit is served above the budget and counted.
  int capturing = 0;
  std::map<DevicePtr, DevicePtr> pinned_ranges;  // pin()'s ranges, merged, start -> end: blocks allocated there later stay too
  bool in_pinned_range(DevicePtr ptr, std::uint64_t bytes) const;
  EventPool events{device};
  OnlineStats stats;

  // online_policy.cpp: the entry points' parts
  OnlineBlock* block_at(DevicePtr ptr);
  void pin(OnlineBlock& block);
  void unpin_this_thread();
  void make_resident(OnlineBlock& block, StreamHandle stream, bool writes);
  void settle_for_free(OnlineBlock& block);
  void all_back();

  // online_moves.cpp: choosing, evicting, waiting, mapping back
  double score(const OnlineBlock& block) const;
  OnlineBlock* best_candidate(const std::vector<DevicePtr>& skip);
  bool evict(OnlineBlock& block);  // false: no host slot for it
  bool try_finish(OnlineBlock& block, bool wait);
  void cancel_leaving(OnlineBlock& block);
  bool make_room(std::uint64_t needed);  // false: nothing left to evict or wait for
  void keep_headroom();                  // starts evictions, never waits
  std::uint64_t free_room() const;       // budget less what is held, plus what is leaving
  void prefetch_while_room();            // brings back the last to leave while room stays above the headroom
  void* allocate_within_budget(std::size_t size, StreamHandle stream, Placement placement);
  void map_back(OnlineBlock& block);
  void lift_budget(std::uint64_t bytes);
  void restore_budget();
  void wait_on(StreamHandle stream, EventHandle event);

  void check() const;
};

}  // namespace delta::executor
