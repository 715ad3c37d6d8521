// Entry points, the step's clock and matching the live program against the plan's step.
#include "executor/executor_state.hpp"

#include "logging/log.hpp"

#include <algorithm>
#include <stdexcept>

namespace delta::executor {

const char* to_string(Residency where) {
  switch (where) {
    case Residency::absent: return "absent";
    case Residency::resident: return "resident";
    case Residency::leaving: return "leaving";
    case Residency::away: return "away";
    case Residency::arriving: return "arriving";
    case Residency::dropped: return "dropped";
  }
  return "?";
}

// A kernel matches the plan's op by name; a copy or memset by kind (see LaunchKind).
static bool s_matches(const Launch& launch, const StepOp& op) {
  switch (launch.kind) {
    case LaunchKind::kernel: return launch.name == op.name;
    case LaunchKind::copy:
      return op.kind == trace::OpKind::copy_h2d || op.kind == trace::OpKind::copy_d2h || op.kind == trace::OpKind::copy_d2d;
    case LaunchKind::memset: return op.kind == trace::OpKind::memset;
  }
  return false;
}

// A block discarded without a copy has nothing to come back as: only a read makes it a fault.
static bool s_dropped_discard(const BlockState& block) {
  return block.where == Residency::dropped && block.interval && block.interval->action == plan::Action::discard;
}

Executor::State::State(CachingAllocator& allocator_, StepProgram program_, ActionSchedule schedule_, ExecutorOptions options_)
    : allocator(allocator_),
      mutex(allocator_.lock()),
      device(allocator_.device()),
      sim(as_sim(&allocator_.device())),
      program(std::move(program_)),
      schedule(std::move(schedule_)),
      options(options_) {
  log::configure_from_environment();  // messages to stderr, at DELTA_LOG_LEVEL, never the job's stdout
  if (options.budget_bytes == 0) options.budget_bytes = schedule.plan.budget_bytes;
  page_size = device.granularity();
  blocks.resize(program.blocks.size());
  captured.resize(program.ops.size());
  capture_needed.assign(program.ops.size(), false);
  tracked.assign(program.blocks.size(), false);
  for (std::uint32_t b : program.persistent) tracked[b] = true;
  for (const plan::BlockDecision& decision : schedule.plan.decisions) {
    if (!decision.intervals.empty()) tracked[program.block_index(decision.block)] = true;
    for (const plan::Interval& interval : decision.intervals) {
      for (std::uint64_t id : interval.inputs) tracked[program.block_index(id)] = true;
      for (std::uint64_t op : interval.replay)
        if (op < program.ops.size())
          for (const StepUse& use : program.ops[op].uses) tracked[use.block] = true;
      for (std::uint64_t op : interval.replay) capture_needed[op] = true;
      if (interval.action == plan::Action::regenerate) regenerated.push_back(program.block_index(decision.block));
    }
  }
  // Resources up front: copy streams, the pinned pool, and the budget as the allocator's cap.
  // Host memory is limited by default on a real device only: the sim's pinned memory costs no
  // host RAM in digest mode, and what-if runs of large jobs are what it is for.
  const std::uint64_t host_limit =
      options.host_limit_bytes != 0 ? options.host_limit_bytes : (device.kind() == "cuda" ? default_host_limit() : 0);
  try {
    host = HostPool(device, schedule.host_slot_bytes, host_limit);
  } catch (const DeviceError& e) {
    throw std::runtime_error("DELTA executor: cannot pin the " + std::to_string(HostPool::bytes_needed(schedule.host_slot_bytes)) +
                             " bytes of host memory the plan's copies need (" + e.what() +
                             "); run mode refuses to start: plan with a larger budget, or free host memory");
  }
  // The budget is checked before the streams exist: a refusal leaves nothing behind.
  const MemInfo info = device.mem_info();
  if (options.budget_bytes > info.total_bytes)
    throw std::runtime_error("the budget of " + std::to_string(options.budget_bytes) + " bytes is more than the device's " +
                             std::to_string(info.total_bytes));
  if (options.budget_bytes < device.granularity())
    throw std::runtime_error("the budget of " + std::to_string(options.budget_bytes) + " bytes is under one page (" +
                             std::to_string(device.granularity()) + " bytes) of the device: no allocation could be served");
  allocator.set_memory_fraction(double(options.budget_bytes) / double(info.total_bytes));
  copy_out_stream = device.create_stream();
  copy_in_stream = device.create_stream();
  start_step();
}

Executor::State::~State() {
  try {
    device.synchronize();
    device.destroy_stream(copy_out_stream);
    device.destroy_stream(copy_in_stream);
  } catch (...) {
  }
}

Executor::Executor(CachingAllocator& allocator, StepProgram program, ActionSchedule schedule, ExecutorOptions options)
    : state_(std::make_unique<State>(allocator, std::move(program), std::move(schedule), options)) {}

Executor::~Executor() = default;

std::int64_t Executor::State::block_at(DevicePtr ptr) const {
  auto it = by_address.upper_bound(ptr);
  if (it == by_address.begin()) return -1;
  --it;
  const BlockState& block = blocks[it->second];
  return ptr < block.ptr + std::max<std::uint64_t>(block.mapped_size, 1) ? static_cast<std::int64_t>(it->second) : -1;
}

// Persistent blocks that do not exist at the step's start are (re)made before its first op
// (a program's state, or a step's inputs); then each op's allocations in order.
void Executor::State::start_step() {
  next_op = 0;
  skipped_before_step = stats.pinned_skips + stats.faults;
  let_go_due.clear();
  after_done = -1;
  off_plan = capturing > 0;  // a graph capture still in progress keeps the step in cache mode
  next_allocation = 0;
  entered = -1;
  expected_allocations.clear();
  const auto expect = [&](std::uint32_t b, std::int32_t op) {
    expected_allocations.push_back(ExpectedAllocation{
        .size = program.blocks[b].size,
        .block = b,
        .op = op,
        .own_pages = schedule.own_pages[b],
        .tracked = tracked[b],
        .packed_group = schedule.packed_group[b],
        .op_has_entry_actions = op >= 0 && static_cast<std::size_t>(op) < schedule.ops.size() &&
                                !(schedule.ops[op].prefetch_at.empty() && schedule.ops[op].rebuild_before.empty())});
  };
  for (std::uint32_t b : program.persistent)
    if (blocks[b].where == Residency::absent) expect(b, -1);
  for (std::size_t k = 0; k < program.ops.size(); ++k)
    for (std::uint32_t b : program.ops[k].allocate_before) expect(b, static_cast<std::int32_t>(k));
  for (auto& c : captured) c.reset();
}

void* Executor::allocate(std::size_t size, StreamHandle stream) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.catch_up_and_let_go();
  s.finish_leaving(false);
  // A copy (16 bytes): what runs below may start another step's list.
  std::optional<State::ExpectedAllocation> expected;
  if (!s.off_plan) {
    if (s.next_allocation < s.expected_allocations.size() && s.expected_allocations[s.next_allocation].size == size) {
      expected = s.expected_allocations[s.next_allocation++];
      if (expected->op >= 0) s.enter_op(*expected, stream);
    } else {
      s.diverge(s.next_allocation < s.expected_allocations.size()
                    ? "an allocation of " + std::to_string(size) + " bytes where the plan's step allocates block " +
                          std::to_string(s.program.blocks[s.expected_allocations[s.next_allocation].block].id) + " of " +
                          std::to_string(s.expected_allocations[s.next_allocation].size)
                    : "an allocation of " + std::to_string(size) + " bytes after every allocation of the plan's step");
    }
  }
  Placement placement;
  placement.own_pages = expected && expected->own_pages;
  placement.packed = placement.own_pages && s.schedule.plan.predicted.packed_moves;  // as the plan was fitted
  if (placement.packed) placement.group = expected->packed_group;
  void* ptr = s.allocate_within_budget(size, stream, placement);
  if (expected && ptr && expected->tracked) {
    BlockState& block = s.blocks[expected->block];
    block = BlockState{};
    block.where = Residency::resident;
    block.ptr = reinterpret_cast<DevicePtr>(ptr);
    // A moved block's size as the allocator placed it (packed: rounded to its 512 bytes); other
    // blocks never move, and their requested size is all the address lookup needs.
    block.mapped_size = placement.own_pages ? s.allocator.block_size(ptr).value_or(size) : size;
    block.own_pages = placement.own_pages;
    block.stream = stream;
    s.by_address[block.ptr] = expected->block;
  }
  return ptr;
}

void Executor::deallocate(void* ptr) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.catch_up();
  const auto address = reinterpret_cast<DevicePtr>(ptr);
  auto it = s.by_address.find(address);
  if (it == s.by_address.end()) {
    s.allocator.deallocate(ptr, CachingAllocator::LockHeld{});  // not a block of the step (or off plan): the allocator decides
    return;
  }
  const std::uint32_t b = it->second;
  BlockState& block = s.blocks[b];
  if (block.hold_free && !s.off_plan) {  // retained: its memory stays until the plan lets go
    block.freed_by_program = true;
    return;
  }
  s.rebuild_readers_of(b);
  // The program frees it: whatever is in flight for it must end first (a copy out reads it).
  s.settle_for_free(b);
  s.by_address.erase(it);
  block.where = Residency::absent;
  s.allocator.deallocate(ptr, CachingAllocator::LockHeld{});
  block.ptr = 0;
}

void Executor::before_launch(const Launch& launch) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.stats.launches++;
  s.catch_up_and_let_go();
  s.finish_leaving(false);
  const std::size_t k = s.next_op;
  if (!s.off_plan) {
    if (k >= s.program.ops.size())
      s.diverge("launch of '" + std::string(launch.name) + "' after the last op of the plan's step");
    else if (!s_matches(launch, s.program.ops[k]))
      s.diverge("launch of '" + std::string(launch.name) + "' where the plan's step runs op " + std::to_string(k) + " '" +
                s.program.ops[k].name + "'");
  }
  if (!s.off_plan) s.enter_op(k, launch.stream);
  // The guard: whatever the plan says, every block this launch touches is resident.
  s.launch_blocks.clear();
  for (const LaunchRange& range : launch.ranges)
    if (const std::int64_t b = s.block_at(range.ptr); b >= 0) s.launch_blocks.push_back(static_cast<std::uint32_t>(b));
  for (const LaunchRange& range : launch.ranges) {
    const std::int64_t b = s.block_at(range.ptr);
    if (b < 0) continue;
    s.make_resident(static_cast<std::uint32_t>(b), launch.stream, range.write);
    BlockState& block = s.blocks[b];
    block.last_use = s.stats.launches;
    if (std::find(block.use_streams.begin(), block.use_streams.end(), launch.stream) == block.use_streams.end())
      block.use_streams.push_back(launch.stream);
    if (range.write) block.host_current = false;
  }
  // And every block the plan's op uses, seen in the launch or not: a route may miss a pointer
  // the recording attributed (a layout it could not read, a pointer held in device memory).
  if (!s.off_plan)
    for (const StepUse& use : s.program.ops[k].uses)
      if (s.tracked[use.block] && s.blocks[use.block].where != Residency::absent &&
          s.blocks[use.block].where != Residency::resident && !s_dropped_discard(s.blocks[use.block])) {
        s.launch_blocks.push_back(use.block);  // stays while the others come
        s.make_resident(use.block, launch.stream, use.write);
      }
  s.launch_blocks.clear();
  if (!s.off_plan) {
    if (s.capture_needed[k] && launch.capture) {
      Captured c;
      c.relaunch = launch.capture();
      c.ranges.assign(launch.ranges.begin(), launch.ranges.end());
      for (const LaunchRange& range : launch.ranges) {
        const std::int64_t b = s.block_at(range.ptr);
        c.blocks.push_back(b);
        c.bases.push_back(b >= 0 ? s.blocks[b].ptr : 0);
      }
      c.stream = launch.stream;
      c.module = launch.module;
      s.captured[k] = std::move(c);
    }
    s.next_op = k + 1;
  }
}

// Before-actions of op k run at the first entry point that belongs to it: its first allocation,
// or its launch. In the planner's order: prefetches, then rebuilds, then the op's allocations.
void Executor::State::enter_new_op(std::size_t k, StreamHandle stream) {
  if (k >= schedule.ops.size()) return;
  entered = static_cast<std::int64_t>(k);
  const OpActions& due = schedule.ops[k];
  if (due.prefetch_at.empty() && due.rebuild_before.empty()) return;
  for (const Action& a : due.prefetch_at) prefetch(a.block);
  // Rebuilds due together replay together, each launch once, as the planner counts them.
  std::vector<std::pair<std::uint32_t, const plan::Interval*>> group;
  for (const Action& a : due.rebuild_before) {
    const bool due_now = a.interval->action == plan::Action::revive ? prepare_revival(a.block, *a.interval)
                                                                     : blocks[a.block].where == Residency::dropped;
    if (due_now) group.emplace_back(a.block, a.interval);
  }
  if (!group.empty()) replay(group, stream, 0);
}

// After-actions of op k run at the first entry point after its launch: by then the op is
// issued, so events recorded on its stream come after it.
// Every block the program holds made resident (a block discarded without a copy has nothing to
// come back as); none of them may be chosen to make room for another meanwhile.
void Executor::State::bring_all_back() {
  bringing_back = true;
  for (std::uint32_t b = 0; b < blocks.size(); ++b)
    if (blocks[b].where != Residency::absent && !s_dropped_discard(blocks[b])) make_resident(b, blocks[b].stream, false);
  bringing_back = false;
}

void Executor::State::run_afters() {
  while (after_done + 1 < static_cast<std::int64_t>(next_op)) run_after(static_cast<std::size_t>(++after_done));
}

void Executor::State::run_after(std::size_t op) {
  const OpActions& due = schedule.ops[op];
  for (const Action& a : due.copy_out_after) {
    BlockState& block = blocks[a.block];
    if (block.where != Residency::resident || is_pinned(a.block)) continue;  // pinned: counted at its release
    block.interval = a.interval;
    const std::uint64_t bytes = plan::swapped_bytes(*a.interval, program.blocks[a.block].size);
    const std::uint64_t rounded = (bytes + page_size - 1) / page_size * page_size;
    block.moved_offset = bytes < program.blocks[a.block].size && rounded <= block.mapped_size ? block.mapped_size - rounded : 0;
    if (block.moved_offset != 0) {
      // From a page boundary: a packed block need not start on one, and a part that starts
      // inside a page shared with the block's own present part frees nothing there.
      const DevicePtr start = (block.ptr + block.moved_offset + page_size - 1) / page_size * page_size;
      block.moved_offset = std::min<std::uint64_t>(block.mapped_size, start - block.ptr);
    }
    copy_out(a.block);
  }
  for (const Action& a : due.release_after) {
    BlockState& block = blocks[a.block];
    if (block.where != Residency::resident) continue;
    if (is_pinned(a.block)) {
      stats.pinned_skips++;
      continue;
    }
    block.interval = a.interval;
    switch (a.interval->action) {
      // A copy the device refuses leaves the block where it is, resident: it costs memory,
      // never data.
      case plan::Action::swap:
        if (!block.copy_pending && !block.host_current && !copy_out(a.block)) break;
        stats.swaps++;
        if (block.moved_offset != 0) stats.partial_swaps++;
        release(a.block, false);
        break;
      case plan::Action::discard:
        block.moved_offset = 0;
        // A copy keeps it recoverable should the program stray and read it; without one the
        // plan's word that nothing reads it again is all there is (ExecutorOptions).
        if (!block.host_current && options.copy_discards && !copy_out(a.block)) break;
        stats.discards++;
        // Dropped without a copy, it is "dropped" with nothing to replay: see rebuild().
        release(a.block, !block.host_current && !block.copy_pending);
        break;
      case plan::Action::regenerate:
        block.moved_offset = 0;
        if (can_replay(*a.interval)) {
          release(a.block, true);
        } else {  // no copy of a replayed launch's parameters: keep the data by swapping it
          stats.regenerations_swapped++;
          if (!block.host_current && !copy_out(a.block)) break;
          release(a.block, false);
        }
        break;
      default: break;
    }
  }
  for (const Action& a : due.hold_after) {
    blocks[a.block].hold_free = true;
    stats.retentions++;
  }
  if (!due.let_go_after.empty()) let_go_due.push_back(op);
}

void Executor::State::let_go_held() {
  for (std::size_t op : let_go_due)
    for (const Action& a : schedule.ops[op].let_go_after) {
      BlockState& block = blocks[a.block];
      block.hold_free = false;
      if (block.where != Residency::absent && (block.freed_by_program || block.revived)) {
        settle_for_free(a.block);
        by_address.erase(block.ptr);
        allocator.deallocate(reinterpret_cast<void*>(block.ptr));
        block = BlockState{};
      }
    }
  let_go_due.clear();
}

void Executor::end_step() {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.catch_up_and_let_go();
  if (!s.off_plan) {
    if (s.next_op != s.program.ops.size()) {
      s.diverge("the step ended after " + std::to_string(s.next_op) + " of the plan's " +
                std::to_string(s.program.ops.size()) + " ops");
    } else {
      const OpActions& due = s.schedule.ops[s.program.ops.size()];
      for (const Action& a : due.prefetch_at) s.prefetch(a.block);
      for (const Action& a : due.rebuild_before)
        if (a.interval->action == plan::Action::regenerate && s.blocks[a.block].where == Residency::dropped)
          s.rebuild(a.block, s.blocks[a.block].stream, 0);
    }
  }
  // Nothing may stay away across the boundary: the next step starts from the plan's state.
  s.bring_all_back();
  for (BlockState& block : s.blocks) {
    if (!s_dropped_discard(block)) block.interval = nullptr;
    block.use_streams.clear();
  }
  s.restore_budget();
  s.stats.steps++;
  log::info("DELTA executor: step {} done: {} swaps, {} prefetches ({} late), {} regenerations, {} divergences",
            s.stats.steps, s.stats.swaps, s.stats.prefetches, s.stats.late_fetches, s.stats.regenerations,
            s.stats.divergences);
  s.start_step();
}

void Executor::adopt(const std::vector<AdoptedBlock>& held) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  if (s.next_op != 0 || s.next_allocation != 0)
    throw std::logic_error("Executor::adopt: only before the first entry point of a step");
  for (const AdoptedBlock& a : held) {
    if (a.block >= s.program.blocks.size() || !s.program.blocks[a.block].persistent)
      throw std::runtime_error("a block held at the switch (at " + std::to_string(a.ptr) + ") is not one of the step's persistent blocks");
    if (s.schedule.own_pages[a.block] && !a.own_pages)
      throw std::runtime_error("the plan moves block " + std::to_string(s.program.blocks[a.block].id) +
                               ", which the program holds already on pages it shares with other blocks");
  }
  for (const AdoptedBlock& a : held) {
    BlockState& block = s.blocks[a.block];
    block = BlockState{};
    block.where = Residency::resident;
    block.ptr = a.ptr;
    block.own_pages = a.own_pages;
    const std::uint64_t size = s.program.blocks[a.block].size;
    block.mapped_size = a.own_pages ? s.allocator.block_size(reinterpret_cast<void*>(a.ptr)).value_or(size) : size;
    block.stream = a.stream;
    s.by_address[a.ptr] = a.block;
  }
  s.start_step();  // the blocks adopted are no longer expected as allocations
}

void Executor::before_module_unload(std::uintptr_t module) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.catch_up_and_let_go();
  bool uses_module = false;
  for (const auto& c : s.captured) uses_module = uses_module || (c && c->module == module);
  if (!uses_module) return;
  // Every pending rebuild, not only those through this module: a rebuild may read a block
  // whose own revival goes through it. Unloads are rare (a job's end, a JIT cache evicting).
  for (std::uint32_t d : s.regenerated) {
    BlockState& block = s.blocks[d];
    if (block.where == Residency::leaving && block.leaving_to == Residency::dropped) {
      s.cancel_leaving(d);
      s.stats.unload_rebuilds++;
    } else if (block.where == Residency::dropped && block.interval &&
               block.interval->action == plan::Action::regenerate) {
      s.rebuild(d, block.stream, 0);
      s.stats.unload_rebuilds++;
    }
  }
  // Later in this step, a regeneration through this module is swapped instead (can_replay).
  for (auto& c : s.captured)
    if (c && c->module == module) c.reset();
  log::info("DELTA executor: a module the plan replays from is unloading; {} block(s) rebuilt before it goes",
            s.stats.unload_rebuilds);
}

void Executor::State::diverge(const std::string& what) {
  if (off_plan) return;
  let_go_held();
  stats.divergences++;
  stats.last_divergence = what;
  log::warn("DELTA executor: the program strays from the plan's step ({}); every block comes back and the rest of "
            "the step runs under the online policy's rule",
            what);
  // Everything away comes back now, before the unplanned launch can read a block or overwrite
  // the inputs of a pending regeneration.
  for (std::uint32_t b = 0; b < blocks.size(); ++b)
    if (blocks[b].where != Residency::absent && !s_dropped_discard(blocks[b])) make_resident(b, blocks[b].stream, false);
  for (std::uint32_t b = 0; b < blocks.size(); ++b) {
    BlockState& block = blocks[b];
    if (block.freed_by_program) {  // held back for a replay that will not come
      by_address.erase(block.ptr);
      allocator.deallocate(reinterpret_cast<void*>(block.ptr));
      block = BlockState{};
    }
    block.hold_free = false;
  }
  off_plan = true;
}

void Executor::finish() {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.catch_up_and_let_go();
  s.bring_all_back();
  s.finish_leaving(true);
  s.device.synchronize();
}

std::vector<AdoptedBlock> Executor::hand_over() {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.catch_up_and_let_go();
  s.off_plan = true;  // nothing planned runs from here
  s.bring_all_back();
  s.finish_leaving(true);
  s.device.synchronize();
  std::vector<AdoptedBlock> held;
  for (std::uint32_t b = 0; b < s.blocks.size(); ++b) {
    BlockState& block = s.blocks[b];
    if (block.where == Residency::absent) continue;
    if (block.freed_by_program) {  // held back for a replay that will not come
      s.by_address.erase(block.ptr);
      s.allocator.deallocate(reinterpret_cast<void*>(block.ptr));
      block = BlockState{};
      continue;
    }
    block.hold_free = false;
    // Discarded without a copy (DELTA_DISCARD=drop): pages again, no data, on the plan's word
    // that nothing reads it; whoever holds it next sees a block mapped as every other.
    if (s_dropped_discard(block)) s.map_target(b);
    if (block.where == Residency::resident) held.push_back({b, block.ptr, block.stream, block.own_pages});
  }
  s.restore_budget();
  return held;
}

bool Executor::on_plan() const {
  std::lock_guard lock(state_->mutex);
  return !state_->off_plan;
}

ExecutorStats Executor::stats() const {
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

void Executor::check_invariants() const {
  std::lock_guard lock(state_->mutex);
  state_->check();
}

}  // namespace delta::executor
