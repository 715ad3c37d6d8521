// The executor's figures and state as JSON, and its invariant checker.
#include "executor/executor_state.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace delta::executor {

std::string to_json(const ExecutorStats& s) {
  nlohmann::json j = {{"steps", s.steps},
                      {"launches", s.launches},
                      {"swaps", s.swaps},
                      {"partial_swaps", s.partial_swaps},
                      {"prefetches", s.prefetches},
                      {"late_fetches", s.late_fetches},
                      {"regenerations", s.regenerations},
                      {"revivals", s.revivals},
                      {"discards", s.discards},
                      {"retentions", s.retentions},
                      {"replayed_launches", s.replayed_launches},
                      {"regenerations_swapped", s.regenerations_swapped},
                      {"bytes_d2h", s.bytes_d2h},
                      {"bytes_h2d", s.bytes_h2d},
                      {"stall_ns", s.stall_ns},
                      {"pressure_waits", s.pressure_waits},
                      {"host_wait_ns", s.host_wait_ns},
                      {"divergences", s.divergences},
                      {"budget_exceeded", s.budget_exceeded},
                      {"over_budget_on_plan_bytes", s.over_budget_on_plan_bytes},
                      {"off_plan_evictions", s.off_plan_evictions},
                      {"faults", s.faults},
                      {"copy_failures", s.copy_failures},
                      {"unload_rebuilds", s.unload_rebuilds},
                      {"graph_captures", s.graph_captures},
                      {"pinned_ranges", s.pinned_ranges},
                      {"pinned_skips", s.pinned_skips},
                      {"last_divergence", s.last_divergence}};
  return j.dump();
}

std::string Executor::state_json() const {
  std::lock_guard lock(state_->mutex);
  const State& s = *state_;
  nlohmann::json away = nlohmann::json::array();
  for (std::uint32_t b = 0; b < s.blocks.size(); ++b) {
    const BlockState& block = s.blocks[b];
    if (block.where == Residency::absent || block.where == Residency::resident) continue;
    away.push_back({{"block", s.program.blocks[b].id}, {"where", to_string(block.where)}, {"ptr", block.ptr}});
  }
  nlohmann::json j = {{"next_op", s.next_op},
                      {"ops", s.program.ops.size()},
                      {"off_plan", s.off_plan},
                      {"budget_bytes", s.options.budget_bytes},
                      {"host_pool_bytes", s.host.bytes()},
                      {"not_resident", away},
                      {"stats", nlohmann::json::parse(to_json(s.stats))}};
  return j.dump();
}

// Every block's residency agrees with the allocator's pages, the address index and the
// eviction queue.
void Executor::State::check() const {
  auto fail = [&](std::uint32_t b, const std::string& rule) {
    throw InvariantError("executor: block " + std::to_string(program.blocks[b].id) + " (" +
                         to_string(blocks[b].where) + "): " + rule);
  };
  std::size_t indexed = 0;
  for (std::uint32_t b = 0; b < blocks.size(); ++b) {
    const BlockState& block = blocks[b];
    const bool leaving_listed = std::find(leaving.begin(), leaving.end(), b) != leaving.end();
    if (leaving_listed != (block.where == Residency::leaving)) fail(b, "listed as leaving exactly while it leaves");
    if (block.where == Residency::absent) {
      if (block.ptr != 0) fail(b, "an absent block has no address");
      continue;
    }
    ++indexed;
    auto it = by_address.find(block.ptr);
    if (it == by_address.end() || it->second != b) fail(b, "indexed by its address");
    void* ptr = reinterpret_cast<void*>(block.ptr);
    const std::uint64_t moving = block.mapped_size - block.moved_offset;
    const bool gone = block.where == Residency::away || block.where == Residency::dropped;
    if (gone && !block.own_pages) fail(b, "only blocks on pages of their own leave");
    // Present, its pages are mapped. Gone, on whole pages of its own they are unmapped; packed,
    // a page it shares with a moved block present stays mapped (the allocator's invariants
    // hold the pages' counts).
    const bool packed = schedule.plan.predicted.packed_moves;
    if (block.own_pages && moving > 0 && (gone ? !packed && allocator.pages_mapped(ptr, block.moved_offset, moving)
                                               : !allocator.pages_mapped(ptr, block.moved_offset, moving)))
      fail(b, gone ? "its moving pages are unmapped" : "its pages are mapped");
    if (block.where == Residency::away && !block.host_current) fail(b, "a block away has its data on the host");
    if (block.where == Residency::arriving && block.arrived == 0) fail(b, "a block arriving has its copy's event");
    if (block.copy_pending && block.out_done == 0) fail(b, "a copy in flight has its event");
    const bool discarded = block.where == Residency::dropped && block.interval && block.interval->action == plan::Action::discard;
    if (is_pinned(b) && (gone || block.where == Residency::leaving) && !discarded)
      fail(b, "a pinned block stays on the device");
  }
  if (indexed != by_address.size()) throw InvariantError("executor: the address index holds blocks that are absent");
}

}  // namespace delta::executor
