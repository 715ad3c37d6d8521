// The executor's state and the operations on it. Every member function expects the caller to
// hold `mutex`; the public methods of Executor take it.
#pragma once

#include "executor/event_pool.hpp"
#include "executor/executor.hpp"
#include "executor/host_pool.hpp"

#include <delta/sim_device.hpp>

#include <deque>
#include <functional>
#include <map>
#include <memory_resource>
#include <optional>
#include <unordered_map>

namespace delta::executor {

// Where a block's data is.
enum class Residency : std::uint8_t {
  absent,       // not allocated now (before its allocation, after its free)
  resident,     // mapped, current on the device
  leaving,      // mapped; its pages go once `done` completes (copy out and last uses)
  away,         // unmapped; current on the host
  arriving,     // mapped; its copy in is queued (`arrived` tells when it lands)
  dropped,      // unmapped; to be rebuilt by replaying `rebuild`
};
const char* to_string(Residency);

struct BlockState {
  Residency where = Residency::absent;
  DevicePtr ptr = 0;
  std::uint64_t mapped_size = 0;     // the block's size as placed (whole pages when own_pages)
  std::uint64_t moved_offset = 0;    // the part that leaves: [moved_offset, mapped_size)
  StreamHandle stream = 0;           // its allocation stream
  bool own_pages = false;
  bool host_current = false;         // the host slot holds the block's present data
  bool copy_pending = false;         // a copy out is in flight (out_done not yet seen complete)
  std::uint64_t copy_order = 0;      // the copies out issued before and with its last one
  bool hold_free = false;            // the program's free is held back (retain, revive)
  bool freed_by_program = false;     // ... and the program has freed it
  bool revived = false;              // memory of the executor's own, for a revival
  Residency leaving_to = Residency::away;  // away (a copy is kept) or dropped (to be rebuilt)
  EventHandle out_done = 0;          // the copy to host completed
  EventHandle arrived = 0;           // the copy back completed
  std::vector<EventHandle> uses_done;  // every stream that used it, at its release
  std::vector<StreamHandle> use_streams;  // streams that used it since its last copy out
  const plan::Interval* interval = nullptr;  // the interval in progress, if any
  std::uint64_t last_use = 0;        // launches seen at its last use (off plan: its staleness)
};

struct Captured {
  Relaunch relaunch;
  std::vector<LaunchRange> ranges;
  std::vector<std::int64_t> blocks;  // per range, the block it pointed to, or -1
  std::vector<DevicePtr> bases;      // per range, that block's address then (ranges may point inside)
  StreamHandle stream = 0;
  std::uintptr_t module = 0;
};

struct Executor::State {
  State(CachingAllocator& allocator, StepProgram program, ActionSchedule schedule, ExecutorOptions options);
  ~State();

  CachingAllocator& allocator;
  // The allocator's own lock (CachingAllocator::lock), not one of the executor's: an entry point
  // takes one lock, and the allocator calls it makes inside re-enter it cheaply.
  ReentrantLock& mutex;
  Device& device;
  SimDevice* sim = nullptr;          // for stall accounting on the sim clock
  StepProgram program;
  ActionSchedule schedule;
  ExecutorOptions options;
  std::size_t page_size = 0;
  StreamHandle copy_out_stream = 0, copy_in_stream = 0;
  HostPool host;

  std::vector<BlockState> blocks;
  // Live blocks of the step by their address. Its nodes come from a pool of their own, not the
  // heap: every tracked allocation inserts one and its free erases it, and a heap round trip
  // there was a fifth of run mode's extra cost per allocate+free pair.
  std::pmr::unsynchronized_pool_resource address_nodes;
  std::pmr::map<DevicePtr, std::uint32_t> by_address{&address_nodes};
  std::vector<std::optional<Captured>> captured;  // per op, when a replay may need it
  std::vector<bool> capture_needed;
  std::vector<std::uint32_t> regenerated;  // blocks the plan regenerates at least once
  // Blocks the executor keeps state for: those the plan moves, holds or replays from, and the
  // program's persistent ones. The others are the allocator's alone: their calls cost a match.
  std::vector<bool> tracked;
  EventPool events{device};

  // The step's clock: the next op expected, and how far after-actions have run.
  std::size_t next_op = 0;
  std::int64_t after_done = -1;
  // This step's allocations, in order, each with all its allocation call reads: one record, so
  // that a call touches one cache line of the executor's tables, not five.
  struct ExpectedAllocation {
    std::uint64_t size = 0;
    std::uint32_t block = 0;
    std::int32_t op = -1;  // the op it comes before (-1: before the step's first op)
    bool own_pages = false;
    bool tracked = false;
    std::uint8_t packed_group = 0;  // Placement::group of a packed plan's moved block
    bool op_has_entry_actions = false;  // op has prefetches or rebuilds due as it is entered
  };
  std::vector<ExpectedAllocation> expected_allocations;
  std::int64_t entered = -1;                        // the last op whose before-actions ran
  std::vector<std::size_t> let_go_due;              // ops whose let-go actions are due (catch_up_and_let_go)
  std::size_t next_allocation = 0;
  // Planned actions a pin or a fault kept from running, counted when the step began: an
  // allocation over the budget after one in the same step is that cause's cost, not the plan's
  // (ExecutorStats::over_budget_on_plan_bytes).
  std::uint64_t skipped_before_step = 0;
  bool off_plan = false;            // strayed this step: cache mode until the next step
  bool budget_lifted = false;       // the allocator may exceed the budget until the step ends
  std::deque<std::uint32_t> leaving; // blocks whose pages go once their events complete
  std::uint64_t copies_out_issued = 0;  // copies out issued so far (BlockState::copy_order)
  std::vector<std::uint32_t> launch_blocks;  // the blocks of the launch being guarded: they stay
  bool bringing_back = false;       // every block comes back (a step's end): none leaves for another
  // executor_pins.cpp: graph captures in progress (the step runs as cache mode while > 0), and
  // ranges that may never leave, start -> end.
  int capturing = 0;
  std::map<DevicePtr, DevicePtr> pinned;
  bool is_pinned(std::uint32_t b) const;
  ExecutorStats stats;

  // executor.cpp: matching the program, steps, divergence
  void start_step();
  void diverge(const std::string& what);
  // These three run at every entry point and almost always have nothing to do: the checks are
  // inline, the work is not (the allocation fast path, docs/executor.md "Host overhead").
  void catch_up() {
    if (!off_plan && after_done + 1 < static_cast<std::int64_t>(next_op)) run_afters();
  }
  // Every entry point but the program's frees: the held frees due go too. The planner's ledger
  // frees them after the program's own frees of the op (its idle pages queue in that order,
  // and the allocator reclaims the least recently idle first), so they wait for the next
  // entry point that is not a free.
  void catch_up_and_let_go() {
    catch_up();
    if (!let_go_due.empty()) let_go_held();
  }
  void let_go_held();
  void enter_op(std::size_t k, StreamHandle stream) {
    if (entered != static_cast<std::int64_t>(k)) enter_new_op(k, stream);
  }
  // The allocation path's: its record says whether op k has anything due as it is entered,
  // so an op with nothing due costs a store, not a call.
  void enter_op(const ExpectedAllocation& expected, StreamHandle stream) {
    const auto k = static_cast<std::int64_t>(expected.op);
    if (entered == k) return;
    if (expected.op_has_entry_actions)
      enter_new_op(static_cast<std::size_t>(k), stream);
    else
      entered = k;
  }
  void run_afters();
  void bring_all_back();
  void enter_new_op(std::size_t k, StreamHandle stream);
  void run_after(std::size_t op);
  std::int64_t block_at(DevicePtr ptr) const;

  // block_moves.cpp: copies, pages, waits
  bool copy_out(std::uint32_t b);  // false: the device refused the copy, the block stays
  void release(std::uint32_t b, bool drop);
  void finish_leaving(bool wait_all) {
    if (!leaving.empty()) finish_leaving_in_order(wait_all);
  }
  void finish_leaving_in_order(bool wait_all);
  bool try_finish(std::uint32_t b, bool wait);
  bool map_back(std::uint32_t b);
  bool make_room_from_evictions();
  void map_over_budget(std::uint32_t b);
  void lift_budget(std::uint64_t bytes);
  void restore_budget();
  bool copy_in(std::uint32_t b, StreamHandle stream);  // false: the device refused the copy
  void unmap_moving_part(std::uint32_t b);
  void prefetch(std::uint32_t b);
  void make_resident(std::uint32_t b, StreamHandle stream, bool writes, int depth = 0);
  void wait_on(StreamHandle stream, EventHandle event);
  void cancel_leaving(std::uint32_t b);
  void settle_for_free(std::uint32_t b);
  void rebuild_readers_of(std::uint32_t b);
  bool revived_by(std::uint32_t b, std::uint64_t by) const;
  // Inline: the first try almost always succeeds, and it is every allocation's path. On plan,
  // short of pages, the allocator must not flush its cache while evictions are in flight
  // (fit_keeping_cache).
  void* allocate_within_budget(std::size_t size, StreamHandle stream, Placement placement) {
    Placement first = placement;
    if (!off_plan) first.when_short = WhenShort::fail;
    try {
      return allocator.allocate(size, stream, first, CachingAllocator::LockHeld{});
    } catch (const OutOfMemoryError&) {
    }
    return allocate_making_room(size, stream, placement);
  }
  void* allocate_making_room(std::size_t size, StreamHandle stream, Placement placement);
  // Short of pages on plan: tries `attempt` (true: placed) after each eviction finished, until
  // none is in flight. False: still short, the allocator's cache untouched.
  bool fit_keeping_cache(const std::function<bool()>& attempt);

  // off_plan.cpp: the budget off plan, as the online policy keeps it
  bool evict_off_plan();  // false: no block can leave

  // replay.cpp: regeneration and revival
  bool can_replay(const plan::Interval& interval) const;
  void rebuild(std::uint32_t b, StreamHandle stream, int depth);
  void map_target(std::uint32_t b);
  bool prepare_revival(std::uint32_t b, const plan::Interval& interval);
  // Replays the launches that rebuild every block of `group` (block, its interval), due together.
  void replay(const std::vector<std::pair<std::uint32_t, const plan::Interval*>>& group, StreamHandle stream, int depth);

  void check() const;
};

}  // namespace delta::executor
