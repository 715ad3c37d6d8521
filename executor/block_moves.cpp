// Moving a block's bytes: copies out and back on the executor's copy streams, its pages
// unmapped and mapped again at the same address, and the waits that order them.
//
// Ordering, as a real GPU needs it: a copy out waits on events recorded on every stream that
// used the block; its pages are unmapped only once that copy and the block's last uses have
// completed (the host checks its events: cuMemUnmap does not wait for kernels in flight); a
// copy back waits for the copy out; the first launch that needs the block waits on the copy
// back's event, only while it is pending.
#include "executor/executor_state.hpp"

#include "logging/log.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace delta::executor {

void Executor::State::wait_on(StreamHandle stream, EventHandle event) {
  if (event == 0 || device.query_event(event)) return;
  const std::uint64_t before = sim ? sim->stream_ready_ns(stream) : 0;
  device.stream_wait_event(stream, event);
  if (sim) stats.stall_ns += sim->stream_ready_ns(stream) - before;
}

// Starts the copy of the block's moving part to its host slot, after its uses so far. When the
// device refuses it, nothing has changed: the block keeps its pages and its data (false).
bool Executor::State::copy_out(std::uint32_t b) {
  BlockState& block = blocks[b];
  const std::uint64_t size = program.blocks[b].size;
  if (block.moved_offset >= size) return true;
  if (block.use_streams.empty()) block.use_streams.push_back(block.stream);
  for (StreamHandle used : block.use_streams) {
    EventHandle e = events.take();
    device.record_event(e, used);
    device.stream_wait_event(copy_out_stream, e);
    events.retire(e);
  }
  const std::uint64_t bytes = size - block.moved_offset;
  auto* slot = static_cast<std::uint8_t*>(host.slot(b)) + block.moved_offset;
  try {
    device.copy_d2h_async(slot, block.ptr + block.moved_offset, bytes, copy_out_stream);
  } catch (const DeviceError& e) {
    stats.faults++;
    stats.copy_failures++;
    log::warn("DELTA executor: the copy of block {} to host memory failed ({}); it stays on the device",
              program.blocks[b].id, e.what());
    return false;
  }
  events.retire(block.out_done);
  block.out_done = events.take();
  device.record_event(block.out_done, copy_out_stream);
  block.copy_pending = true;
  block.copy_order = ++copies_out_issued;
  block.host_current = true;  // read only through copies that wait on out_done
  stats.bytes_d2h += bytes;
  return true;
}

// The block leaves: its pages go once its copy (if any) and every use so far have completed.
void Executor::State::release(std::uint32_t b, bool drop) {
  BlockState& block = blocks[b];
  if (block.use_streams.empty()) block.use_streams.push_back(block.stream);
  for (StreamHandle used : block.use_streams) {
    const EventHandle e = events.take();
    device.record_event(e, used);
    block.uses_done.push_back(e);
  }
  block.use_streams.clear();
  block.where = Residency::leaving;
  block.leaving_to = drop ? Residency::dropped : Residency::away;
  leaving.push_back(b);
}

// Completes what is in flight for a block: with `wait`, waits for it; else only if done.
bool Executor::State::try_finish(std::uint32_t b, bool wait) {
  BlockState& block = blocks[b];
  auto done = [&](EventHandle e) {
    if (e == 0) return true;
    if (wait) device.synchronize_event(e);
    return device.query_event(e);
  };
  if (!done(block.out_done)) return false;
  for (EventHandle e : block.uses_done)
    if (!done(e)) return false;
  if (block.copy_pending) {
    block.copy_pending = false;
    events.retire(block.out_done);
  }
  for (EventHandle& e : block.uses_done) events.retire(e);
  block.uses_done.clear();
  if (block.where == Residency::leaving) {
    unmap_moving_part(b);
    block.where = block.leaving_to;
    leaving.erase(std::find(leaving.begin(), leaving.end(), b));
  }
  return true;
}

void Executor::State::finish_leaving_in_order(bool wait_all) {
  // In order: evictions complete roughly in the order they were issued.
  for (std::size_t i = 0; i < leaving.size();) {
    const std::uint32_t b = leaving[i];
    if (try_finish(b, wait_all)) continue;  // erased from `leaving`
    if (!wait_all) break;
    ++i;
  }
}

// Before a block's memory goes back to the allocator: a copy out still reading it holds the
// memory until the copy stream has passed it (the allocator's deferred free, as record_stream
// makes it), so that nothing reuses it before; the block's stream does not wait for the copy,
// which may sit far back in a full device-to-host queue (gpt2-large bfloat16 at half its peak:
// a softmax output copied out early, needed back before its copy started and freed after,
// held the step 23 ms). Pages still waiting to be unmapped simply go back with the block.
void Executor::State::settle_for_free(std::uint32_t b) {
  BlockState& block = blocks[b];
  if (block.copy_pending) {
    if (!device.query_event(block.out_done)) allocator.record_stream(reinterpret_cast<void*>(block.ptr), copy_out_stream);
    block.copy_pending = false;
    events.retire(block.out_done);
  }
  if (block.where == Residency::leaving) cancel_leaving(b);
  // A copy back still in flight writes the block's memory: the stream that reuses it waits.
  if (block.arrived) wait_on(block.stream, block.arrived);
  events.retire(block.arrived);
}

void Executor::State::cancel_leaving(std::uint32_t b) {
  BlockState& block = blocks[b];
  for (EventHandle& e : block.uses_done) events.retire(e);
  block.uses_done.clear();
  leaving.erase(std::find(leaving.begin(), leaving.end(), b));
  block.where = Residency::resident;
}

// Maps the block's moving part again. Under the budget, a map may have to wait for evictions
// in flight to finish; with none left, it fails (false).
bool Executor::State::map_back(std::uint32_t b) {
  BlockState& block = blocks[b];
  void* ptr = reinterpret_cast<void*>(block.ptr);
  const std::uint64_t bytes = block.mapped_size - block.moved_offset;
  const auto keeping_cache = [&] {
    try {
      allocator.map_pages(ptr, block.moved_offset, bytes, WhenShort::fail);
      return true;
    } catch (const OutOfMemoryError&) {
      return false;
    }
  };
  if (!off_plan && fit_keeping_cache(keeping_cache)) return true;
  for (;;) {
    try {
      allocator.map_pages(ptr, block.moved_offset, bytes);
      return true;
    } catch (const OutOfMemoryError&) {
    }
    if (!make_room_from_evictions() && !(off_plan && evict_off_plan())) return false;
  }
}

// Short of pages on plan, the allocator may flush its cache (its OOM path: the small blocks'
// exact-size bins merged into its free lists, which moves where later small blocks go) only
// once no eviction is in flight: the planner's ledger flushes there and nowhere else
// (AllocatorLedger::allocate, keep_cache), and the host, running ahead, cannot tell which
// evictions the device has completed by a given op but can wait for them all. Until then each
// try asks the allocator to refuse (WhenShort::fail), and evictions are finished, or waited
// for, one at a time. True: placed by `attempt`.
bool Executor::State::fit_keeping_cache(const std::function<bool()>& attempt) {
  do {
    if (attempt()) return true;
  } while (make_room_from_evictions());
  return false;
}

// Makes room from the evictions in flight: first whatever has completed by now, in any
// order (release order is not completion order: a block dropped after its last use is done
// long before the copy out of a large block released earlier); else it waits for one, a block
// with no copy in flight first (its last uses complete in the compute stream's order), else the
// one whose copy out was issued first (the copies complete in that order). Waiting for more
// than needed would let the device run dry while the host waits: the oldest release, whose
// copy an early copy may have put behind many others, kept gpt2-large at 0.6 waiting 16 ms at
// one op where the planner's ledger had the room from the copies completed by then.
bool Executor::State::make_room_from_evictions() {
  if (leaving.empty()) return false;
  const std::size_t count = leaving.size();
  for (std::size_t i = 0; i < leaving.size();)
    if (!try_finish(leaving[i], false)) ++i;  // a finished block leaves the list
  if (leaving.size() < count) return true;
  stats.pressure_waits++;
  const auto uncopied = std::find_if(leaving.begin(), leaving.end(), [&](std::uint32_t b) { return !blocks[b].copy_pending; });
  const std::uint32_t chosen =
      uncopied != leaving.end() ? *uncopied
                                : *std::min_element(leaving.begin(), leaving.end(), [&](std::uint32_t a, std::uint32_t b) {
                                    return blocks[a].copy_order < blocks[b].copy_order;
                                  });
  const std::uint64_t before = sim ? sim->now_ns() : 0;
  try_finish(chosen, true);
  if (sim) stats.host_wait_ns += sim->now_ns() - before;
  return true;
}

// Maps the block above the budget: only to keep data safe when the plan's room is not there.
void Executor::State::map_over_budget(std::uint32_t b) {
  BlockState& block = blocks[b];
  lift_budget(block.mapped_size - block.moved_offset);
  allocator.map_pages(reinterpret_cast<void*>(block.ptr), block.moved_offset, block.mapped_size - block.moved_offset);
}

// Lets the allocator past the budget by `bytes` (and what it holds now), until the step ends:
// lowering its limit again unmaps every cached page (and waits for the streams that used
// them), so the cap goes back once a step, at its boundary; raising it only as far as needed
// keeps what DELTA holds above the budget to what the program asked for.
void Executor::State::lift_budget(std::uint64_t bytes) {
  stats.budget_exceeded++;
  budget_lifted = true;
  const double total = double(device.mem_info().total_bytes);
  const std::uint64_t wanted = allocator.stats().reserved_bytes + bytes + 2 * page_size;
  allocator.set_memory_fraction(std::min(1.0, std::max(double(wanted), double(allocator.limit_bytes())) / total));
}

void Executor::State::restore_budget() {
  if (!budget_lifted) return;
  budget_lifted = false;
  allocator.set_memory_fraction(double(options.budget_bytes) / double(device.mem_info().total_bytes));
}

// The copy back of a block that is away (its pages mapped), issued now on `stream`. When the
// device refuses it, nothing has changed (false): the data are still in the host slot.
bool Executor::State::copy_in(std::uint32_t b, StreamHandle stream) {
  BlockState& block = blocks[b];
  const std::uint64_t bytes = program.blocks[b].size - std::min(block.moved_offset, program.blocks[b].size);
  const auto* slot = static_cast<const std::uint8_t*>(host.slot(b)) + block.moved_offset;
  if (bytes) {
    try {
      device.copy_h2d_async(block.ptr + block.moved_offset, slot, bytes, stream);
    } catch (const DeviceError& e) {
      stats.faults++;
      stats.copy_failures++;
      log::warn("DELTA executor: the copy of block {} back to the device failed ({})", program.blocks[b].id, e.what());
      return false;
    }
  }
  events.retire(block.arrived);
  block.arrived = events.take();
  device.record_event(block.arrived, stream);
  block.where = Residency::arriving;
  stats.bytes_h2d += bytes;
  return true;
}

// The pages of the block's moving part go (it leaves, or its copy back failed).
void Executor::State::unmap_moving_part(std::uint32_t b) {
  BlockState& block = blocks[b];
  allocator.unmap_pages(reinterpret_cast<void*>(block.ptr), block.moved_offset, block.mapped_size - block.moved_offset);
}

void Executor::State::prefetch(std::uint32_t b) {
  BlockState& block = blocks[b];
  if (block.where == Residency::leaving) {  // its pages never went: nothing to copy back
    cancel_leaving(b);
    stats.prefetches++;
    return;
  }
  if (block.where != Residency::away) return;
  if (!map_back(b)) return;  // no room yet: the guard fetches it when a launch needs it
  if (!copy_in(b, copy_in_stream)) {
    unmap_moving_part(b);  // the guard tries again when a launch needs it
    return;
  }
  stats.prefetches++;
}

void Executor::State::make_resident(std::uint32_t b, StreamHandle stream, bool writes, int depth) {
  BlockState& block = blocks[b];
  switch (block.where) {
    case Residency::absent: return;
    case Residency::leaving: cancel_leaving(b); break;
    case Residency::away:
      if (!map_back(b)) {
        // Off plan, or a prefetch that found no room: the data comes first, the budget second.
        log::warn("DELTA executor: no room within the budget to bring block {} back; mapping it above the budget",
                  program.blocks[b].id);
        map_over_budget(b);
      }
      // A refused copy is tried once more on the consumer's own stream (the copy stream may be
      // what failed); after that the launch cannot run, but the data are still safe on the host.
      if (!copy_in(b, copy_in_stream) && !copy_in(b, stream)) {
        unmap_moving_part(b);
        throw std::runtime_error("DELTA executor: block " + std::to_string(program.blocks[b].id) +
                                 " cannot be copied back to the device (the device refused the copy twice); its data "
                                 "are safe in host memory, but the launch that needs it cannot run");
      }
      stats.late_fetches++;
      break;
    case Residency::dropped: rebuild(b, stream, depth); break;
    case Residency::arriving:
    case Residency::resident: break;
  }
  if (block.where == Residency::arriving) block.where = Residency::resident;
  if (block.arrived != 0) {
    if (device.query_event(block.arrived)) events.retire(block.arrived);
    else wait_on(stream, block.arrived);
  }
  // A write must not overtake the copy out still reading the block.
  if (writes && block.copy_pending) wait_on(stream, block.out_done);
}

// The allocator said no (allocate_within_budget): evict what is leaving, or off plan what
// scores best, and try again while that frees anything.
void* Executor::State::allocate_making_room(std::size_t size, StreamHandle stream, Placement placement) {
  if (!off_plan) {
    // As the ledger: every eviction in flight first, then the allocator's own cache.
    Placement keeping_cache = placement;
    keeping_cache.when_short = WhenShort::fail;
    void* ptr = nullptr;
    const auto attempt = [&](Placement how) {
      try {
        ptr = allocator.allocate(size, stream, how);
        return true;
      } catch (const OutOfMemoryError&) {
        return false;
      }
    };
    if (fit_keeping_cache([&] { return attempt(keeping_cache); }) || attempt(placement)) return ptr;
  }
  while (make_room_from_evictions() || (off_plan && evict_off_plan())) {
    try {
      return allocator.allocate(size, stream, placement);
    } catch (const OutOfMemoryError&) {
    }
  }
  // No room within the budget: off plan, or a plan the allocator cannot place as planned
  // (fragmentation). The program's allocation comes first; the budget is exceeded, and counted.
  if (!off_plan) {
    const AllocatorStats now = allocator.stats();
    // An allocation on plan (the program's, or a planned replay's scratch), every planned action
    // of the step done: the plan's room was not there. (A block mapped back above the budget,
    // or an allocation after an eviction a pin or a fault kept from running this step, is that
    // cause's cost, counted in budget_exceeded alone.)
    const bool all_done = stats.pinned_skips + stats.faults == skipped_before_step;
    if (all_done && now.reserved_bytes + size > options.budget_bytes)
      stats.over_budget_on_plan_bytes = std::max<std::uint64_t>(stats.over_budget_on_plan_bytes,
                                                                now.reserved_bytes + size - options.budget_bytes);
    log::warn("DELTA executor: an allocation of {} bytes at op {} does not fit the budget ({} bytes allocated, {} "
              "reserved, {} unmapped, {} cached, {} spare, {} frees pending); served above it",
              size, next_op, now.allocated_bytes, now.reserved_bytes, now.unmapped_bytes, now.cached_bytes,
              now.spare_bytes, now.pending_frees);
  }
  lift_budget(size);
  void* ptr = allocator.allocate(size, stream, placement);
  return ptr;
}

}  // namespace delta::executor
