// What a launch route on a GPU asks of the executor beyond launches: the address lookup that
// turns parameter words into blocks, graph captures, and pins. A CUDA graph replays pointers
// it captured, at times the executor never sees; memory another process mapped (IPC) or a
// communication library registered is read through other mappings of the same pages. Such
// memory may never leave, so its ranges are pinned for good.
#include "executor/executor_state.hpp"

#include "logging/log.hpp"

namespace delta::executor {

bool Executor::State::is_pinned(std::uint32_t b) const {
  if (pinned.empty()) return false;
  const BlockState& block = blocks[b];
  const DevicePtr end = block.ptr + std::max<std::uint64_t>(block.mapped_size, 1);
  auto it = pinned.lower_bound(end);  // the first range starting at or after the block's end
  if (it == pinned.begin()) return false;
  --it;
  return it->second > block.ptr;
}

std::optional<std::pair<DevicePtr, std::size_t>> Executor::block_containing(DevicePtr ptr) const {
  const State& s = *state_;
  std::lock_guard lock(s.mutex);
  const std::int64_t b = s.block_at(ptr);
  if (b < 0) return std::nullopt;
  const BlockState& block = s.blocks[b];
  return std::make_pair(block.ptr, static_cast<std::size_t>(std::max<std::uint64_t>(block.mapped_size, 1)));
}

void Executor::before_graph_capture() {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.stats.graph_captures++;
  if (s.capturing++ > 0) return;  // already quiet since the first capture began
  s.catch_up_and_let_go();
  // Off plan: every block comes back (the graph may read any of them), held frees go.
  s.diverge("a stream begins capturing a CUDA graph");
  s.off_plan = true;  // also when the step had strayed before: diverge() then did nothing
  for (std::uint32_t b = 0; b < s.blocks.size(); ++b)
    if (s.blocks[b].where != Residency::absent &&
        !(s.blocks[b].where == Residency::dropped && s.blocks[b].interval &&
          s.blocks[b].interval->action == plan::Action::discard))
      s.make_resident(b, s.blocks[b].stream, false);
  // Everything in flight completes now, while waiting is still legal: no unmap, copy or event
  // of the executor's is left to deal with during the capture.
  s.finish_leaving(true);
  s.device.synchronize();
  // Everything has completed: forget the events, so that nothing queries one during the capture.
  for (BlockState& block : s.blocks) {
    if (block.copy_pending) {
      block.copy_pending = false;
      s.events.retire(block.out_done);
    }
    s.events.retire(block.arrived);
  }
  s.events.all_completed();
  log::info("DELTA executor: a graph capture begins; the step runs as cache mode until it ends, and every block "
            "the graph uses is pinned");
}

void Executor::after_graph_capture() {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  if (s.capturing > 0) s.capturing--;
  // Matching the plan starts again at the next step marker (start_step).
}

void Executor::pin(DevicePtr ptr, std::size_t bytes) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  const DevicePtr end = ptr + std::max<std::size_t>(bytes, 1);
  auto [it, inserted] = s.pinned.emplace(ptr, end);
  if (!inserted) {
    if (it->second >= end) return;  // already pinned
    it->second = end;
  } else {
    s.stats.pinned_ranges++;
  }
  if (s.capturing > 0) return;  // everything is resident since the capture began
  for (std::uint32_t b = 0; b < s.blocks.size(); ++b) {
    const BlockState& block = s.blocks[b];
    if (block.where == Residency::absent || block.where == Residency::resident || !s.is_pinned(b)) continue;
    if (block.where == Residency::dropped && block.interval && block.interval->action == plan::Action::discard)
      continue;  // nothing to bring back: the plan says no op reads it again
    s.make_resident(b, block.stream, false);
  }
}

}  // namespace delta::executor
