// A device that only keeps the books: what the caching allocator asks of memory (address
// reservations, physical handles counted against a capacity, maps and unmaps), nothing else.
// The planner's allocator ledger (allocator_ledger.hpp) replays thousands of plans a second
// through the real allocator; on the sim device its page-by-page maps, each checked against
// hazards and kept in ordered tables, were most of the ledger's time. Here each costs a hash
// lookup. It still refuses what a driver would (a map over a mapping, an unmap of nothing, a
// handle released twice, memory past the capacity), so an allocator bug fails here too.
// Streams and events exist only as names: nothing runs on this device, so every event has
// completed. Copies, memsets and pinned memory are refused.
#pragma once

#include <delta/device.hpp>

#include <memory>
#include <string>

namespace delta::planner {

std::shared_ptr<Device> make_ledger_device(const std::string& gpu_profile);

}  // namespace delta::planner
