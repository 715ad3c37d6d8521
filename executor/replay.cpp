// Regeneration and revival: a dropped block is rebuilt by replaying, on the compute stream,
// the launches that produced it in this step, with copies of their parameters. Every pointer
// is patched: the block's own ranges point to its (remapped) pages, inputs to where they live
// now, and every other output to scratch memory of the executor's own — never to memory that
// may by now belong to another block.
#include "executor/executor_state.hpp"

#include "logging/log.hpp"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

namespace delta::executor {

// Whether every launch of the interval's replay was captured in this step: without a copy of
// its parameters, the block's data would be lost if dropped.
bool Executor::State::can_replay(const plan::Interval& interval) const {
  for (std::uint64_t op : interval.replay)
    if (op >= captured.size() || !captured[op]) return false;
  return true;
}

void Executor::State::rebuild(std::uint32_t b, StreamHandle stream, int depth) {
  BlockState& block = blocks[b];
  if (block.where != Residency::dropped) return;
  if (depth > 64) throw std::runtime_error("DELTA executor: regenerations nested more than 64 deep");
  if (block.interval->action == plan::Action::discard) {
    // DELTA_DISCARD=drop, and the program reads a block its plan said nothing reads again:
    // its bytes are gone. Reported, never hidden; the block gets pages so the launch can run.
    stats.faults++;
    log::error("DELTA executor: block {} was discarded without a copy (DELTA_DISCARD=drop) and is read again; its "
               "data are lost",
               program.blocks[b].id);
    map_target(b);
    return;
  }
  replay({{b, block.interval}}, stream, depth);
}

void Executor::State::map_target(std::uint32_t b) {
  BlockState& block = blocks[b];
  if (block.where != Residency::dropped) return;
  if (!map_back(b)) {
    log::warn("DELTA executor: no room within the budget to rebuild block {}; mapping it above the budget",
              program.blocks[b].id);
    map_over_budget(b);
  }
  block.where = Residency::resident;
}

// Memory for a revival, allocated before its replay; false when it cannot be revived.
bool Executor::State::prepare_revival(std::uint32_t b, const plan::Interval& interval) {
  BlockState& block = blocks[b];
  if (block.where != Residency::absent) return false;  // still held (retained): nothing to rebuild
  if (!can_replay(interval)) {
    stats.faults++;
    log::warn("DELTA executor: cannot revive block {}: a launch of its replay was not captured", program.blocks[b].id);
    return false;  // the regenerations that read it fall back to what they can do
  }
  const StreamHandle stream = captured[interval.replay.front()]->stream;
  void* ptr = allocate_within_budget(program.blocks[b].size, stream, Placement{});
  block = BlockState{};
  block.where = Residency::resident;
  block.ptr = reinterpret_cast<DevicePtr>(ptr);
  block.mapped_size = allocator.block_size(ptr).value_or(program.blocks[b].size);
  block.stream = stream;
  block.revived = true;
  block.interval = &interval;
  by_address[block.ptr] = b;
  return true;
}

// The launches several rebuilds due together replay, each once, in an order that respects
// them all: rebuilds by their last replayed launch, each one's launches in its own order.
static std::vector<std::uint64_t> replay_sequence(const std::vector<std::pair<std::uint32_t, const plan::Interval*>>& group) {
  std::vector<const plan::Interval*> order;
  for (const auto& entry : group) order.push_back(entry.second);
  auto last = [](const plan::Interval* x) { return x->replay.empty() ? std::uint64_t{0} : *std::max_element(x->replay.begin(), x->replay.end()); };
  std::stable_sort(order.begin(), order.end(), [&](const plan::Interval* a, const plan::Interval* b) { return last(a) < last(b); });
  std::vector<std::uint64_t> sequence;
  for (const plan::Interval* x : order)
    for (std::uint64_t op : x->replay)
      if (std::find(sequence.begin(), sequence.end(), op) == sequence.end()) sequence.push_back(op);
  return sequence;
}

void Executor::State::replay(const std::vector<std::pair<std::uint32_t, const plan::Interval*>>& group, StreamHandle stream,
                             int depth) {
  auto is_target = [&](std::int64_t b) {
    return std::any_of(group.begin(), group.end(), [&](const auto& entry) { return entry.first == b; });
  };
  // Inputs first: each must be resident (prefetched, or rebuilt itself) before the replay.
  for (const auto& [target, interval] : group)
    for (std::uint64_t id : interval->inputs) {
      const std::uint32_t input = program.block_index(id);
      if (!is_target(input)) make_resident(input, stream, false, depth + 1);
    }
  const std::vector<std::uint64_t> sequence = replay_sequence(group);
  std::unordered_map<std::int64_t, DevicePtr> scratch;  // outputs of the replay other than the target
  std::vector<void*> scratch_memory;
  std::vector<std::int64_t> scratch_blocks;  // per scratch memory, the block it stands for, or -1
  auto take_scratch = [&](std::int64_t b, const LaunchRange& range) {
    const std::size_t bytes = b >= 0 ? program.blocks[b].size : range.bytes;
    void* memory = allocate_within_budget(bytes, stream, Placement{});
    scratch_memory.push_back(memory);
    scratch_blocks.push_back(b);
    return reinterpret_cast<DevicePtr>(memory);
  };
  // Each scratch block is freed after the last replayed launch that uses it, as the planner's
  // simulator counts a replay's temporaries.
  std::unordered_map<std::int64_t, std::size_t> last_use;
  for (std::size_t step = 0; step < sequence.size(); ++step)
    for (std::int64_t b : captured[sequence[step]]->blocks) last_use[b] = step;
  for (std::size_t step = 0; step < sequence.size(); ++step) {
    const std::uint64_t op = sequence[step];
    const Captured& launch = *captured[op];
    std::vector<DevicePtr> ptrs;
    ptrs.reserve(launch.ranges.size());
    for (std::size_t i = 0; i < launch.ranges.size(); ++i) {
      const LaunchRange& range = launch.ranges[i];
      const std::int64_t b = launch.blocks[i];
      const DevicePtr offset = b >= 0 ? range.ptr - launch.bases[i] : 0;
      if (is_target(b)) {
        map_target(static_cast<std::uint32_t>(b));
        ptrs.push_back(blocks[b].ptr + offset);
      } else if (auto made = scratch.find(b); b >= 0 && made != scratch.end()) {
        ptrs.push_back(made->second + offset);  // written earlier in this replay: read that version
      } else if (range.write) {
        const DevicePtr memory = take_scratch(b, range);
        if (b >= 0) {
          scratch[b] = memory;
          // Updated in place: the replay starts from the block's present bytes, in scratch.
          if (range.read && blocks[b].where != Residency::absent) {
            make_resident(static_cast<std::uint32_t>(b), stream, false, depth + 1);
            device.copy_d2d_async(memory, blocks[b].ptr, program.blocks[b].size, stream);
          }
        }
        ptrs.push_back(memory + offset);
      } else if (b >= 0) {
        if (blocks[b].where == Residency::absent)
          throw std::runtime_error("DELTA executor: the replay of op " + std::to_string(op) + " for block " +
                                   std::to_string(program.blocks[group.front().first].id) + " reads block " +
                                   std::to_string(program.blocks[b].id) + ", which no longer exists");
        make_resident(static_cast<std::uint32_t>(b), stream, false, depth + 1);
        ptrs.push_back(blocks[b].ptr + offset);
      } else {
        ptrs.push_back(range.ptr);  // memory the plan does not manage, read as it is
      }
    }
    try {
      launch.relaunch(ptrs, stream);
    } catch (const std::exception& e) {
      // A launch that ran once and fails again (its module unloaded without the route seeing
      // it, a sticky device error): the block's bytes are gone, and saying so is all that is
      // left. Routes prevent the avoidable case (before_module_unload).
      for (void* memory : scratch_memory) allocator.deallocate(memory);
      stats.faults++;
      throw std::runtime_error("DELTA executor: replaying op " + std::to_string(op) + " ('" +
                               program.ops[op].name + "') to rebuild block " +
                               std::to_string(program.blocks[group.front().first].id) + " failed: " + e.what() +
                               "; the block's data are lost");
    }
    stats.replayed_launches++;
    // Scratch goes back in stream order: the allocator reuses it on this stream only after the
    // launches queued before. Outputs of no block (-1) go after this launch; a block's after
    // the last launch of the replay that uses it.
    for (std::size_t i = 0; i < scratch_memory.size();) {
      const std::int64_t b = scratch_blocks[i];
      if (b < 0 || last_use[b] <= step) {
        allocator.deallocate(scratch_memory[i]);
        if (b >= 0) scratch.erase(b);
        scratch_memory.erase(scratch_memory.begin() + static_cast<std::ptrdiff_t>(i));
        scratch_blocks.erase(scratch_blocks.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  for (void* memory : scratch_memory) allocator.deallocate(memory);
  for (const auto& [target, interval] : group) {
    if (interval->action == plan::Action::revive) {
      stats.revivals++;
    } else {
      map_target(target);  // a replay that never writes its target still leaves it mapped
      stats.regenerations++;
    }
  }
}

// A block about to be freed may be an input of a pending regeneration. Unless the plan
// revives it in time, that regeneration is done now, while the input still holds the version it
// needs (or, its pages not gone yet, the block simply stays).
void Executor::State::rebuild_readers_of(std::uint32_t b) {
  const std::uint64_t id = program.blocks[b].id;
  for (std::uint32_t d : regenerated) {
    const BlockState& pending = blocks[d];
    const bool will_drop = pending.where == Residency::leaving && pending.leaving_to == Residency::dropped;
    if ((pending.where != Residency::dropped && !will_drop) || !pending.interval) continue;
    const std::vector<std::uint64_t>& inputs = pending.interval->inputs;
    if (std::find(inputs.begin(), inputs.end(), id) == inputs.end()) continue;
    if (revived_by(b, pending.interval->needed_by)) continue;
    if (will_drop) cancel_leaving(d);
    else rebuild(d, pending.stream, 0);
  }
}

// Whether the plan revives block b between now and op `by`.
bool Executor::State::revived_by(std::uint32_t b, std::uint64_t by) const {
  for (std::size_t op = next_op; op <= by && op < schedule.ops.size(); ++op)
    for (const Action& a : schedule.ops[op].rebuild_before)
      if (a.block == b && a.interval->action == plan::Action::revive) return true;
  return false;
}

}  // namespace delta::executor
