// The online policy's moves: which block leaves (DTR's score with a swap's cost), its copy to
// host and the unmapping of its pages once the copy and its last uses complete, waiting for
// room, and mapping a block back.
//
// Ordering, as on a GPU: a copy out waits on events recorded on every stream that used the
// block; its pages are unmapped only once that copy and those uses have completed (cuMemUnmap
// does not wait for kernels in flight); the first launch that needs it back waits on its copy
// back's event, only while it is pending.
#include "executor/online/online_state.hpp"

#include "logging/log.hpp"

#include <algorithm>
#include <limits>

namespace delta::executor {

void OnlinePolicy::State::wait_on(StreamHandle stream, EventHandle event) {
  if (event == 0 || device.query_event(event)) return;
  device.stream_wait_event(stream, event);
}

// DTR's h(b) = cost / (size × staleness), cost being what bringing the block back takes.
// Higher is worse to evict; the candidate is the lowest. Staleness counts launches since the
// block was last used, plus one so that a block used by the launch before still scores.
double OnlinePolicy::State::score(const OnlineBlock& block) const {
  const double cost = double(options.copy_latency_ns) + double(block.size) / options.copy_bytes_per_ns;
  const double staleness = double(clock - std::min(clock, block.last_use)) + 1.0;
  return cost / (double(block.size) * staleness);
}

OnlineBlock* OnlinePolicy::State::best_candidate(const std::vector<DevicePtr>& skip) {
  if (bringing_back || capturing > 0) return nullptr;
  OnlineBlock* best = nullptr;
  double best_score = std::numeric_limits<double>::infinity();
  for (auto& [ptr, block] : blocks) {
    if (!block.own_pages || (block.where != Place::resident && block.where != Place::arriving)) continue;
    if (block.pins != 0 || block.pinned_for_good || std::find(skip.begin(), skip.end(), ptr) != skip.end()) continue;
    const double h = score(block);
    if (h < best_score) {
      best_score = h;
      best = &block;
    }
  }
  return best;
}

// The block leaves: a copy out unless its host copy is still current, then its pages go once
// that copy and every use so far have completed (try_finish). False: no host slot within the
// host limit; nothing has changed.
bool OnlinePolicy::State::evict(OnlineBlock& block) {
  if (block.use_streams.empty()) block.use_streams.push_back(block.stream);
  if (!block.host_current) {
    if (!block.host) block.host = host.take(block.mapped);
    stats.host_pinned_peak = std::max(stats.host_pinned_peak, host.pinned_bytes());
    if (!block.host) {
      stats.host_refusals++;
      return false;
    }
    for (StreamHandle used : block.use_streams) {
      EventHandle e = events.take();
      device.record_event(e, used);
      device.stream_wait_event(copy_out_stream, e);
      events.retire(e);
    }
    device.copy_d2h_async(block.host, block.ptr, block.size, copy_out_stream);
    events.retire(block.out_done);
    block.out_done = events.take();
    device.record_event(block.out_done, copy_out_stream);
    block.copy_pending = true;
    block.host_current = true;
    stats.bytes_d2h += block.size;
  } else {
    stats.copies_spared++;
  }
  for (StreamHandle used : block.use_streams) {
    const EventHandle e = events.take();
    device.record_event(e, used);
    block.uses_done.push_back(e);
  }
  block.use_streams.clear();
  block.where = Place::leaving;
  leaving.push_back(block.ptr);
  leaving_bytes += block.mapped;
  stats.evictions++;
  return true;
}

bool OnlinePolicy::State::try_finish(OnlineBlock& block, bool wait) {
  auto done = [&](EventHandle e) {
    if (e == 0) return true;
    if (wait) device.synchronize_event(e);
    return device.query_event(e);
  };
  if (!done(block.out_done) || !done(block.arrived)) return false;  // arrived: brought back early, unused since
  for (EventHandle e : block.uses_done)
    if (!done(e)) return false;
  events.retire(block.arrived);
  if (block.copy_pending) {
    block.copy_pending = false;
    events.retire(block.out_done);
  }
  for (EventHandle& e : block.uses_done) events.retire(e);
  block.uses_done.clear();
  if (block.where == Place::leaving) {
    allocator.unmap_pages(reinterpret_cast<void*>(block.ptr), 0, block.mapped);
    block.where = Place::away;
    block.left_seq = ++away_seq;
    away_stack.emplace_back(block.ptr, block.left_seq);
    leaving.erase(std::find(leaving.begin(), leaving.end(), block.ptr));
    leaving_bytes -= block.mapped;
  }
  return true;
}

void OnlinePolicy::State::cancel_leaving(OnlineBlock& block) {
  for (EventHandle& e : block.uses_done) events.retire(e);
  block.uses_done.clear();
  leaving.erase(std::find(leaving.begin(), leaving.end(), block.ptr));
  leaving_bytes -= block.mapped;
  block.where = Place::resident;
}

// One step towards `needed` bytes of room: evictions completed by now, in any order; else,
// while what is leaving is short of `needed`, more blocks leave; then a wait for one of them
// (a block with no copy in flight first: its last uses complete in the compute stream's
// order; else the first to leave, whose copy is first on the copy stream). False when there
// is nothing left to evict or wait for.
bool OnlinePolicy::State::make_room(std::uint64_t needed) {
  const std::size_t count = leaving.size();
  for (std::size_t i = 0; i < leaving.size();)
    if (!try_finish(blocks.at(leaving[i]), false)) ++i;
  if (leaving.size() < count) return true;
  std::vector<DevicePtr> refused;  // no host slot for them: not chosen again in this call
  while (leaving_bytes < needed) {
    OnlineBlock* candidate = best_candidate(refused);
    if (!candidate) break;
    if (!evict(*candidate)) refused.push_back(candidate->ptr);
  }
  if (leaving.empty()) return false;
  stats.pressure_waits++;
  auto uncopied = std::find_if(leaving.begin(), leaving.end(), [&](DevicePtr p) { return !blocks.at(p).copy_pending; });
  const DevicePtr chosen = uncopied != leaving.end() ? *uncopied : leaving.front();
  const std::uint64_t before = sim ? sim->now_ns() : 0;
  try_finish(blocks.at(chosen), true);
  if (sim) stats.host_wait_ns += sim->now_ns() - before;
  return true;
}

// Free room counts the allocator's idle cache (it serves allocations first) and what is
// leaving; below the headroom, the best candidates start leaving now. Blocks away on the host
// count as held, up to what is reserved: they come back before their next launch, and room
// kept for them is room the next allocation does not wait for. (Counting only mapped bytes
// took unet's online overhead at 0.5 from 2.479 to 2.935; counting all reserved bytes, at 0.8
// from 1.265 to 1.853.)
std::uint64_t OnlinePolicy::State::free_room() const {
  const AllocatorStats now = allocator.stats();
  const std::uint64_t held = std::min(now.reserved_bytes, now.active_bytes);
  return options.budget_bytes - std::min(options.budget_bytes, held) + leaving_bytes;
}

void OnlinePolicy::State::keep_headroom() {
  if (options.headroom <= 0 || budget_lifted || bringing_back) return;
  const std::uint64_t target = static_cast<std::uint64_t>(options.headroom * double(options.budget_bytes));
  std::uint64_t room = free_room();
  std::vector<DevicePtr> refused;
  while (room < target) {
    OnlineBlock* candidate = best_candidate(refused);
    // Blocks the last launch touched, or allocated since, are about to be used: never ahead.
    if (!candidate || candidate->last_use >= clock) return;
    if (!evict(*candidate)) {
      refused.push_back(candidate->ptr);
      continue;
    }
    room += candidate->mapped;
  }
}

// A block back early is marked used now, so that the next eviction does not pick it first.
void OnlinePolicy::State::prefetch_while_room() {
  if (options.headroom <= 0 || budget_lifted || bringing_back || capturing > 0) return;
  const std::uint64_t target = static_cast<std::uint64_t>(options.headroom * double(options.budget_bytes));
  std::uint64_t room = free_room() - std::min(free_room(), leaving_bytes);  // what is free now
  while (!away_stack.empty()) {
    const auto [ptr, seq] = away_stack.back();
    auto it = blocks.find(ptr);
    if (it == blocks.end() || it->second.where != Place::away || it->second.left_seq != seq) {
      away_stack.pop_back();
      continue;
    }
    OnlineBlock& block = it->second;
    if (room < target + block.mapped) return;
    try {
      allocator.map_pages(reinterpret_cast<void*>(block.ptr), 0, block.mapped);
    } catch (const OutOfMemoryError&) {
      return;
    }
    away_stack.pop_back();
    device.copy_h2d_async(block.ptr, block.host, block.size, copy_in_stream);
    events.retire(block.arrived);
    block.arrived = events.take();
    device.record_event(block.arrived, copy_in_stream);
    block.where = Place::arriving;
    block.last_use = clock;
    room -= block.mapped;
    stats.prefetches++;
    stats.bytes_h2d += block.size;
  }
}

void* OnlinePolicy::State::allocate_within_budget(std::size_t size, StreamHandle stream, Placement placement) {
  const std::uint64_t needed = (size + page_size - 1) / page_size * page_size;
  for (;;) {
    try {
      return allocator.allocate(size, stream, placement, CachingAllocator::LockHeld{});
    } catch (const OutOfMemoryError&) {
    }
    if (!make_room(needed)) break;
  }
  // Nothing left to evict: what the launches in flight hold, or blocks too small to leave.
  // The program's allocation comes first; the budget is exceeded, and counted.
  const AllocatorStats now = allocator.stats();
  log::warn("DELTA online policy: an allocation of {} bytes does not fit the budget ({} bytes allocated, {} reserved) "
            "and nothing is left to evict; served above it",
            size, now.allocated_bytes, now.reserved_bytes);
  lift_budget(size);
  return allocator.allocate(size, stream, placement, CachingAllocator::LockHeld{});
}

void OnlinePolicy::State::map_back(OnlineBlock& block) {
  for (;;) {
    try {
      allocator.map_pages(reinterpret_cast<void*>(block.ptr), 0, block.mapped);
      return;
    } catch (const OutOfMemoryError&) {
    }
    if (!make_room(block.mapped)) break;
  }
  log::warn("DELTA online policy: no room within the budget to bring a block of {} bytes back; mapped above it", block.size);
  lift_budget(block.mapped);
  allocator.map_pages(reinterpret_cast<void*>(block.ptr), 0, block.mapped);
}

// Lets the allocator past the budget by `bytes` until the step ends (see Executor's).
void OnlinePolicy::State::lift_budget(std::uint64_t bytes) {
  stats.budget_exceeded++;
  budget_lifted = true;
  const double total = double(device.mem_info().total_bytes);
  const std::uint64_t wanted = allocator.stats().reserved_bytes + bytes + 2 * page_size;
  allocator.set_memory_fraction(std::min(1.0, std::max(double(wanted), double(allocator.limit_bytes())) / total));
}

void OnlinePolicy::State::restore_budget() {
  if (!budget_lifted) return;
  budget_lifted = false;
  allocator.set_memory_fraction(double(options.budget_bytes) / double(device.mem_info().total_bytes));
}

}  // namespace delta::executor
