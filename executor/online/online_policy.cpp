// The online policy's entry points: placing blocks, the guard before each launch, frees, and
// handing the program over to a plan.
#include "executor/online/online_state.hpp"

#include "executor/host_pool.hpp"
#include "logging/log.hpp"

#include <algorithm>
#include <stdexcept>
#include <thread>

namespace delta::executor {

// Host memory is limited by default on a real device only, as for run mode: the sim's pinned
// memory costs no host RAM in digest mode.
static std::uint64_t s_host_limit(Device& device, const OnlineOptions& options) {
  if (options.host_limit_bytes != 0) return options.host_limit_bytes;
  return device.kind() == "cuda" ? default_host_limit() : 0;
}

OnlinePolicy::State::State(CachingAllocator& allocator_, OnlineOptions options_)
    : allocator(allocator_),
      mutex(allocator_.lock()),
      device(allocator_.device()),
      sim(as_sim(&allocator_.device())),
      options(options_),
      page_size(device.granularity()),
      host(device, s_host_limit(device, options_)) {
  log::configure_from_environment();
  const std::uint64_t total = device.mem_info().total_bytes;
  if (options.budget_bytes == 0) throw std::runtime_error("the online policy needs a budget (DELTA_BUDGET)");
  if (options.budget_bytes > total)
    throw std::runtime_error("the budget of " + std::to_string(options.budget_bytes) + " bytes is more than the device's " +
                             std::to_string(total));
  copy_out_stream = device.create_stream();
  copy_in_stream = device.create_stream();
  allocator.set_memory_fraction(double(options.budget_bytes) / double(total));
}

OnlinePolicy::State::~State() {
  try {
    device.synchronize();
    device.destroy_stream(copy_out_stream);
    device.destroy_stream(copy_in_stream);
  } catch (...) {
  }
}

OnlinePolicy::OnlinePolicy(CachingAllocator& allocator, OnlineOptions options)
    : state_(std::make_unique<State>(allocator, options)) {}

OnlinePolicy::~OnlinePolicy() = default;

OnlineBlock* OnlinePolicy::State::block_at(DevicePtr ptr) {
  auto it = blocks.upper_bound(ptr);
  if (it == blocks.begin()) return nullptr;
  --it;
  return ptr < it->first + std::max<std::uint64_t>(it->second.mapped, 1) ? &it->second : nullptr;
}

void* OnlinePolicy::allocate(std::size_t size, StreamHandle stream) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.unpin_this_thread();
  Placement placement;
  placement.own_pages = size >= s.page_size;  // whole pages of its own: blocks of a page or more
  void* ptr = s.allocate_within_budget(size, stream, placement);
  if (!ptr) return ptr;
  OnlineBlock block;
  block.ptr = reinterpret_cast<DevicePtr>(ptr);
  block.size = size;
  block.mapped = placement.own_pages ? s.allocator.block_size(ptr).value_or(size) : size;
  block.stream = stream;
  block.own_pages = placement.own_pages;
  block.last_use = s.clock;
  block.serial = ++s.serials;
  block.pinned_for_good = s.in_pinned_range(block.ptr, block.mapped);
  s.blocks[block.ptr] = block;
  s.keep_headroom();
  return ptr;
}

void OnlinePolicy::deallocate(void* ptr) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.unpin_this_thread();
  auto it = s.blocks.find(reinterpret_cast<DevicePtr>(ptr));
  if (it == s.blocks.end()) {
    s.allocator.deallocate(ptr, CachingAllocator::LockHeld{});  // not ours: the allocator says what is wrong with it
    return;
  }
  s.settle_for_free(it->second);
  if (it->second.host) s.host.give_back(it->second.host, it->second.mapped);
  s.blocks.erase(it);
  s.allocator.deallocate(ptr, CachingAllocator::LockHeld{});
  s.prefetch_while_room();
}

// Whatever is in flight for a block must end, in the order of its stream, before the
// allocator may give its memory to another: a copy out reads it, a copy back writes it.
// Pages waiting to be unmapped simply go back with the block.
void OnlinePolicy::State::settle_for_free(OnlineBlock& block) {
  if (block.copy_pending) {
    wait_on(block.stream, block.out_done);
    block.copy_pending = false;
    events.retire(block.out_done);
  }
  if (block.where == Place::leaving) cancel_leaving(block);
  if (block.arrived != 0) wait_on(block.stream, block.arrived);
  events.retire(block.arrived);
}

void OnlinePolicy::before_launch(const Launch& launch) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.unpin_this_thread();
  const std::uint64_t tick = ++s.clock;
  s.stats.launches++;
  // Everything this launch touches stays while room is made for any of it, and until this
  // thread's next entry point: the launch is issued after this returns, and another thread
  // must not evict what it reads in between.
  std::vector<std::pair<OnlineBlock*, bool>> touched;
  for (const LaunchRange& range : launch.ranges) {
    OnlineBlock* block = s.block_at(range.ptr);
    if (!block) continue;
    s.pin(*block);
    touched.emplace_back(block, range.write);
  }
  for (auto [block, writes] : touched) {
    s.make_resident(*block, launch.stream, writes);
    block->last_use = tick;
    if (std::find(block->use_streams.begin(), block->use_streams.end(), launch.stream) == block->use_streams.end())
      block->use_streams.push_back(launch.stream);
    if (writes) block->host_current = false;
  }
  s.keep_headroom();
  s.prefetch_while_room();
}

void OnlinePolicy::State::pin(OnlineBlock& block) {
  auto& mine = pinned[std::this_thread::get_id()];
  if (std::find(mine.begin(), mine.end(), std::make_pair(block.ptr, block.serial)) != mine.end()) return;
  mine.emplace_back(block.ptr, block.serial);
  block.pins++;
}

void OnlinePolicy::State::unpin_this_thread() {
  auto it = pinned.find(std::this_thread::get_id());
  if (it == pinned.end()) return;
  for (auto [ptr, serial] : it->second) {
    auto b = blocks.find(ptr);
    if (b != blocks.end() && b->second.serial == serial) b->second.pins--;
  }
  pinned.erase(it);
}

// The guard: the block is on the device before the launch on `stream` runs.
void OnlinePolicy::State::make_resident(OnlineBlock& block, StreamHandle stream, bool writes) {
  switch (block.where) {
    case Place::leaving: cancel_leaving(block); break;
    case Place::away: {
      map_back(block);
      device.copy_h2d_async(block.ptr, block.host, block.size, copy_in_stream);
      events.retire(block.arrived);
      block.arrived = events.take();
      device.record_event(block.arrived, copy_in_stream);
      block.where = Place::arriving;
      stats.fetches++;
      stats.bytes_h2d += block.size;
      break;
    }
    case Place::arriving:
    case Place::resident: break;
  }
  if (block.where == Place::arriving) block.where = Place::resident;
  if (block.arrived != 0) {
    if (device.query_event(block.arrived)) {
      events.retire(block.arrived);
    } else {
      const std::uint64_t before = sim ? sim->stream_ready_ns(stream) : 0;
      wait_on(stream, block.arrived);
      if (sim) stats.stall_ns += sim->stream_ready_ns(stream) - before;
    }
  }
  // A write must not overtake the copy out still reading the block.
  if (writes && block.copy_pending) wait_on(stream, block.out_done);
}

void OnlinePolicy::end_step() {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.unpin_this_thread();
  s.stats.steps++;
  if (s.capturing > 0) return;  // lowering the limit unmaps pages: not while a capture is active
  // Lowering the allocator's limit again unmaps its idle cached pages: once a step, here. What
  // was mapped above the budget leaves now, so that the next step starts within it.
  if (!s.budget_lifted) return;
  s.restore_budget();
  for (;;) {
    const std::uint64_t reserved = s.allocator.stats().reserved_bytes;
    if (reserved <= s.options.budget_bytes) break;
    if (!s.make_room(reserved - s.options.budget_bytes)) {
      s.lift_budget(0);
      break;
    }
  }
}

// Every block back, every copy complete: room is made only from what is leaving; past that,
// the data come first and the budget second (counted).
void OnlinePolicy::State::all_back() {
  bringing_back = true;  // none of them may be chosen to make room for another
  for (auto& [ptr, block] : blocks) make_resident(block, block.stream, false);
  bringing_back = false;
  device.synchronize();
  for (auto& [ptr, block] : blocks) {
    if (block.copy_pending) {
      block.copy_pending = false;
      events.retire(block.out_done);
    }
    events.retire(block.arrived);
  }
}

void OnlinePolicy::finish() {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.all_back();
}

std::vector<HeldBlock> OnlinePolicy::hand_over() {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.all_back();
  s.restore_budget();
  std::vector<HeldBlock> held;
  for (auto& [ptr, block] : s.blocks) {
    if (block.host) s.host.give_back(block.host, block.mapped);
    block.host = nullptr;
    block.host_current = false;
    block.use_streams.clear();
    held.push_back({block.ptr, block.size, block.stream, block.own_pages});
  }
  s.host.release_idle();
  return held;
}

void OnlinePolicy::adopt(const std::vector<HeldBlock>& held) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  for (const auto& [ptr, block] : s.blocks)
    if (block.where != Place::resident || block.copy_pending || block.host)
      throw std::logic_error("OnlinePolicy::adopt: a block it holds is still moving (hand_over() first)");
  s.blocks.clear();
  s.leaving.clear();
  s.leaving_bytes = 0;
  s.away_stack.clear();
  s.pinned.clear();
  for (const HeldBlock& h : held) {
    OnlineBlock block;
    block.ptr = h.ptr;
    block.size = h.size;
    block.mapped = h.own_pages ? s.allocator.block_size(reinterpret_cast<void*>(h.ptr)).value_or(h.size) : h.size;
    block.stream = h.stream;
    block.own_pages = h.own_pages;
    block.last_use = s.clock;
    block.serial = ++s.serials;
    // Pins outlive hand-overs: the blocks above the budget leave just below, and a pinned
    // one must not be among them.
    block.pinned_for_good = s.in_pinned_range(block.ptr, block.mapped);
    s.blocks[block.ptr] = block;
  }
  // The executor kept the allocator at the budget too; its cap, restored, is the policy's.
  s.allocator.set_memory_fraction(double(s.options.budget_bytes) / double(s.device.mem_info().total_bytes));
  s.budget_lifted = false;
  // Every block came back to be handed over, above the budget if it must: what is above
  // leaves now, so that the rest of the step starts within it.
  for (;;) {
    const std::uint64_t reserved = s.allocator.stats().reserved_bytes;
    if (reserved <= s.options.budget_bytes || !s.make_room(reserved - s.options.budget_bytes)) break;
  }
}

OnlineStats OnlinePolicy::stats() const {
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

void OnlinePolicy::check_invariants() const {
  std::lock_guard lock(state_->mutex);
  state_->check();
}

}  // namespace delta::executor
