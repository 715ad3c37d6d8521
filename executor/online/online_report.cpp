// The online policy's figures and its invariant checker.
#include "executor/online/online_state.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

namespace delta::executor {

const char* to_string(Place where) {
  switch (where) {
    case Place::resident: return "resident";
    case Place::leaving: return "leaving";
    case Place::away: return "away";
    case Place::arriving: return "arriving";
  }
  return "?";
}

std::string to_json(const OnlineStats& s) {
  return nlohmann::json{{"steps", s.steps},
                        {"launches", s.launches},
                        {"evictions", s.evictions},
                        {"copies_spared", s.copies_spared},
                        {"fetches", s.fetches},
                        {"prefetches", s.prefetches},
                        {"bytes_d2h", s.bytes_d2h},
                        {"bytes_h2d", s.bytes_h2d},
                        {"stall_ns", s.stall_ns},
                        {"pressure_waits", s.pressure_waits},
                        {"host_wait_ns", s.host_wait_ns},
                        {"budget_exceeded", s.budget_exceeded},
                        {"host_refusals", s.host_refusals},
                        {"host_pinned_peak", s.host_pinned_peak}}
      .dump();
}

void OnlinePolicy::State::check() const {
  auto fail = [](const OnlineBlock& block, const std::string& rule) {
    throw InvariantError("online policy: block at " + std::to_string(block.ptr) + " (" + to_string(block.where) + "): " + rule);
  };
  std::uint64_t in_flight = 0;
  DevicePtr end = 0;
  for (const auto& [ptr, block] : blocks) {
    if (ptr != block.ptr) fail(block, "indexed by its address");
    if (ptr < end) fail(block, "overlaps the block before it");
    end = ptr + block.mapped;
    const bool listed = std::find(leaving.begin(), leaving.end(), ptr) != leaving.end();
    if (listed != (block.where == Place::leaving)) fail(block, "listed as leaving exactly while it leaves");
    if (block.where == Place::leaving) in_flight += block.mapped;
    if (block.where != Place::resident && !block.own_pages) fail(block, "only blocks on pages of their own leave");
    if (block.own_pages && allocator.pages_mapped(reinterpret_cast<const void*>(ptr), 0, block.mapped) == (block.where == Place::away))
      fail(block, block.where == Place::away ? "a block away has its pages unmapped" : "its pages are mapped");
    if (block.where == Place::away && (!block.host_current || !block.host)) fail(block, "a block away has its data in its host slot");
    if (block.where == Place::arriving && block.arrived == 0) fail(block, "a block arriving has its copy's event");
    if (block.copy_pending && block.out_done == 0) fail(block, "a copy in flight has its event");
    std::uint32_t pins = 0;
    for (const auto& [thread, mine] : pinned)
      pins += static_cast<std::uint32_t>(std::count(mine.begin(), mine.end(), std::make_pair(ptr, block.serial)));
    if (pins != block.pins) fail(block, "pinned by as many threads' last launches as count it");
    if (block.pins != 0 && block.where != Place::resident && block.where != Place::arriving && block.where != Place::leaving)
      fail(block, "a block pinned by a launch is on the device");
    if (block.pinned_for_good != in_pinned_range(ptr, block.mapped))
      fail(block, "pinned for good exactly while it overlaps a range pin() was given");
    if (block.pinned_for_good && block.where != Place::resident && block.where != Place::arriving)
      fail(block, "a block pinned for good (pin) stays on the device");
    if (capturing > 0 && block.where != Place::resident)
      fail(block, "nothing moves while a graph is captured");
  }
  if (capturing < 0) throw InvariantError("online policy: more graph captures ended than began");
  DevicePtr pinned_end = 0;
  for (const auto& [from, to] : pinned_ranges) {
    if (to <= from || (pinned_end != 0 && from <= pinned_end))
      throw InvariantError("online policy: the pinned range at " + std::to_string(from) +
                           " is empty or overlaps or touches the one before it (pin() merges them)");
    pinned_end = to;
  }
  if (in_flight != leaving_bytes)
    throw InvariantError("online policy: " + std::to_string(leaving_bytes) + " bytes counted as leaving, " +
                         std::to_string(in_flight) + " in the blocks that leave");
  host.check();
  if (!budget_lifted && allocator.stats().reserved_bytes > options.budget_bytes)
    throw InvariantError("online policy: " + std::to_string(allocator.stats().reserved_bytes) +
                         " bytes reserved, past the budget of " + std::to_string(options.budget_bytes));
}

}  // namespace delta::executor
