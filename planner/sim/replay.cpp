// The replay op by op (replay.hpp): the blocks live before the step, then at every op the
// copies out that completed, the prefetches due, the replays due, the op's allocations, the op
// itself, the program's frees and the plan's releases; memory accounted at every allocation.
#include "sim/replay.hpp"

#include <algorithm>

namespace delta::planner::simulation {

SimulationResult Replay::run() {
  SimulationResult result;
  result.native_step_time_ns = planner::native_step_ns(index_, options_);
  try {
    for (std::uint32_t b : index_.live_at_start()) {
      state_[b].resident = true;
      hold(b, 0);
    }
    if (options_.budget_bytes > 0 && held_ > options_.budget_bytes)
      throw Infeasible(0, "start of step: the blocks live before the step (" + std::to_string(held_) +
                              " bytes) exceed the budget " + std::to_string(options_.budget_bytes));
    const std::size_t n = index_.op_count();
    if (options_.record_timeline) result.timeline.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t extra_before = extra_, stall_before = stall_;
      moment_peak_ = held_;
      reclaim();
      issue_prefetches(i);
      run_regenerations(i);
      for (std::uint32_t b : index_.allocated_at(i)) {
        make_room(index_.size(b), i);
        hold(b, i);
        state_[b].resident = true;
        state_[b].ready_ns = now_;
        state_[b].host_valid = false;
      }
      run_op(i);
      if (options_.record_timeline)
        result.timeline.push_back({now_ - index_.duration(i), now_, held_, moment_peak_, ledger_ ? ledger_->reserved() : 0,
                                   ledger_ ? ledger_->unused() : 0, extra_ - extra_before, stall_ - stall_before});
      for (std::uint32_t b : index_.freed_after(i)) {
        if (retained_[b]) continue;  // kept, data and all, until its expiry
        // A copy out still reading the block: the memory goes back now, but the stream that
        // will reuse it waits for the copy (the executor's wait before a free).
        if (state_[b].evicting && state_[b].copied_ns > now_) {
          stall_ += state_[b].copied_ns - now_;
          now_ = state_[b].copied_ns;
        }
        forget(b);
        state_[b].resident = false;
      }
      for (const Scheduled& e : expiries_.at(i)) {  // revived or retained blocks no replay reads again
        forget(e.block);
        state_[e.block].resident = false;
      }
      start_early_copies(i);
      release_after(i);
    }
    reclaim();
    issue_prefetches(n);
    run_regenerations(n);
    std::int64_t end = now_;
    for (std::uint32_t b : index_.live_at_end()) {
      const BlockInfo& info = index_.block(b);
      if (!state_[b].resident)
        throw Infeasible(static_cast<std::int64_t>(n), "end of step: block " + std::to_string(info.id) +
                                                           " is not resident (released after op " +
                                                           std::to_string(state_[b].released_after) + " and never brought back)");
      end = std::max(end, state_[b].ready_ns);
    }
    stall_ += end - now_;
    now_ = end;
  } catch (const Infeasible& e) {
    result.feasible = false;
    result.error = e.what();
    result.first_bad_op = e.op;
    result.shortfall_bytes = e.shortfall;
  }
  result.peak_bytes = peak_;
  result.step_time_ns = now_;
  result.stall_ns = stall_;
  result.extra_compute_ns = extra_;
  result.bytes_h2d = h2d_bytes_;
  result.bytes_d2h = d2h_bytes_;
  result.swaps = swaps_;
  result.partial_swaps = partial_swaps_;
  result.regenerations = regenerations_count_;
  result.revivals = revivals_;
  result.discards = discards_;
  if (ledger_) result.allocator_reserved_peak = ledger_->reserved_peak();
  result.copies = std::move(copies_made_);
  return result;
}

std::string Replay::op_name(std::size_t i) const {
  if (i >= index_.op_count()) return "end of step";
  return "op " + std::to_string(i) + " (" + index_.trace().ops[i].name + ")";
}

void Replay::hold(std::uint32_t b, std::size_t op) {
  const std::uint64_t size = index_.size(b);
  BlockState& s = state_[b];
  const std::uint64_t adding = missing(b);
  // The allocator sees the block whole again; under executor placement its pages come back
  // at its address instead.
  if (s.held && ledger_ && !options_.executor_placement) ledger_->release(b);
  place(b, size, op, [&] { return "block " + std::to_string(index_.block(b).id); });
  if (!away_.empty()) away_[b] = 0;
  s.held = true;
  held_ += adding;
  peak_ = std::max(peak_, held_);
  moment_peak_ = std::max(moment_peak_, held_);
}

void Replay::unhold_part(std::uint32_t b, std::uint64_t bytes) {
  BlockState& s = state_[b];
  s.evicting = false;
  held_ -= bytes;
  away_[b] = bytes;
  if (!ledger_) return;
  if (options_.executor_placement && ledger_->evict(b, bytes)) return;  // its last pages unmapped
  ledger_->release(b);
  try {
    ledger_->allocate(b, index_.size(b) - bytes);
  } catch (const std::runtime_error& e) {
    throw Infeasible(s.released_after, "block " + std::to_string(index_.block(b).id) + ": what a partial swap leaves could not be placed: " + e.what());
  }
}

void Replay::free_evicted(std::uint32_t b, std::uint64_t bytes) {
  if (bytes < index_.size(b))
    unhold_part(b, bytes);
  else
    evict(b);
}

void Replay::reclaim() {
  while (!pending_.empty() && pending_.top().done_ns <= now_) {
    PendingEviction e = pending_.top();
    pending_.pop();
    BlockState& s = state_[e.block];
    if (s.evicting && s.evict_seq == e.seq) free_evicted(e.block, e.bytes);
  }
}

void Replay::drop_stale_evictions() {
  while (!pending_.empty()) {
    const PendingEviction& e = pending_.top();
    const BlockState& s = state_[e.block];
    if (s.evicting && s.evict_seq == e.seq) return;
    pending_.pop();
  }
}

void Replay::make_room(std::uint64_t bytes, std::size_t op) {
  if (options_.budget_bytes == 0) return;
  reclaim();
  for (drop_stale_evictions(); held_ + bytes > options_.budget_bytes && !pending_.empty(); drop_stale_evictions()) {
    const std::int64_t done = pending_.top().done_ns;
    if (done > now_) {
      stall_ += done - now_;
      now_ = done;
    }
    host_waits_until(now_);
    reclaim();
  }
  if (held_ + bytes > options_.budget_bytes)
    throw Infeasible(static_cast<std::int64_t>(op),
                     op_name(op) + ": budget exceeded: " + std::to_string(held_) + " bytes held + " +
                         std::to_string(bytes) + " needed > budget " + std::to_string(options_.budget_bytes),
                     held_ + bytes - options_.budget_bytes);
}

void Replay::issue_prefetches(std::size_t i) {
  for (const Scheduled& p : prefetches_.at(i)) {
    BlockState& s = state_[p.block];
    const BlockInfo& info = index_.block(p.block);
    if (s.resident) throw Infeasible(static_cast<std::int64_t>(i), op_name(i) + ": prefetch of block " + std::to_string(info.id) + ", which is already resident");
    if (s.evicting) {  // the copy out has not finished: the data never left
      s.evicting = false;
      s.resident = true;
      s.ready_ns = now_;
      continue;
    }
    const std::uint64_t bytes = missing(p.block);  // all of it, or what a partial swap took
    if (!s.held && !host_covers(p.block, bytes))
      throw Infeasible(static_cast<std::int64_t>(i), op_name(i) + ": prefetch of block " + std::to_string(info.id) +
                                                         ", of which the host holds only part");
    make_room(bytes, i);
    hold(p.block, i);
    const std::int64_t start = std::max({now_, h2d_free_, s.ready_ns});
    const std::int64_t end = start + transfer_ns(bytes, options_.gpu.h2d_bytes_per_s, options_.gpu.launch_latency_ns);
    h2d_free_ = end;
    h2d_bytes_ += bytes;
    if (options_.record_timeline) copies_made_.push_back({false, start, end, info.id, bytes});
    s.resident = true;
    s.ready_ns = end;
  }
}

void Replay::run_op(std::size_t i) {
  std::int64_t ready = now_;
  for (const OpUse& u : index_.uses(i)) {
    const BlockState& s = state_[u.block];
    if (!s.resident) {
      std::string why = s.released_after >= 0 ? "released after op " + std::to_string(s.released_after) + " and not brought back in time"
                                              : "never allocated";
      throw Infeasible(static_cast<std::int64_t>(i), op_name(i) + ": uses block " + std::to_string(index_.block(u.block).id) + ", which is not resident (" + why + ")");
    }
    ready = std::max(ready, s.ready_ns);
  }
  start_op(ready, index_.duration(i));
  for (const OpUse& u : index_.uses(i))
    if (u.write) {
      state_[u.block].host_valid = false;
      state_[u.block].ready_ns = now_;
    }
}

void Replay::release_after(std::size_t i) {
  for (const Scheduled& r : releases_.at(i)) {
    BlockState& s = state_[r.block];
    const BlockInfo& info = index_.block(r.block);
    if (!s.resident)
      throw Infeasible(static_cast<std::int64_t>(i), op_name(i) + ": the plan releases block " + std::to_string(info.id) + ", which is not resident");
    s.resident = false;
    s.released_after = static_cast<std::int32_t>(i);
    if (r.interval->action == plan::Action::discard) {
      ++discards_;
      if (!s.held) continue;
      if (options_.discard_copies)
        discard_with_copy(r.block);
      else
        evict(r.block);
      continue;
    }
    if (r.interval->action == plan::Action::regenerate) {
      evict(r.block);
      continue;
    }
    ++swaps_;
    const std::uint64_t bytes = plan::swapped_bytes(*r.interval, info.size);
    if (bytes < info.size) ++partial_swaps_;
    const bool copied = host_covers(r.block, bytes);
    if (copied && s.copied_ns <= now_) {
      free_evicted(r.block, bytes);
      continue;
    }
    if (!copied) copy_to_host(r.block, bytes);
    // The bytes are freed when the copy completes; a prefetch cannot start before then.
    s.evicting = true;
    s.ready_ns = std::max(s.ready_ns, s.copied_ns);
    pending_.push({s.copied_ns, r.block, ++s.evict_seq, bytes});
  }
}

void Replay::discard_with_copy(std::uint32_t b) {
  BlockState& s = state_[b];
  const std::uint64_t size = index_.size(b);
  // As the executor asks: is the host's copy current (a partial one counts, as its flag
  // does), not how much of the block it holds.
  if (!s.host_valid) copy_to_host(b, size);
  if (s.copied_ns <= now_) return evict(b);
  s.evicting = true;
  s.ready_ns = std::max(s.ready_ns, s.copied_ns);
  pending_.push({s.copied_ns, b, ++s.evict_seq, size});
}

bool Replay::host_covers(std::uint32_t b, std::uint64_t bytes) const {
  return state_[b].host_valid && (host_bytes_.empty() || host_bytes_[b] >= bytes);
}

void Replay::copy_to_host(std::uint32_t b, std::uint64_t size) {
  BlockState& s = state_[b];
  if (!host_bytes_.empty()) host_bytes_[b] = size;
  const std::int64_t start = std::max({now_, d2h_free_, s.ready_ns});
  d2h_free_ = start + transfer_ns(size, options_.gpu.d2h_bytes_per_s, options_.gpu.launch_latency_ns);
  d2h_bytes_ += size;
  if (options_.record_timeline) copies_made_.push_back({true, start, d2h_free_, index_.block(b).id, size});
  s.host_valid = true;
  s.copied_ns = d2h_free_;
}

void Replay::start_early_copies(std::size_t i) {
  for (const Scheduled& c : copies_.at(i)) {
    BlockState& s = state_[c.block];
    if (!s.resident)
      throw Infeasible(static_cast<std::int64_t>(i), op_name(i) + ": the plan copies block " + std::to_string(index_.block(c.block).id) +
                                                         " to host, but it is not on the device");
    const std::uint64_t bytes = plan::swapped_bytes(*c.interval, index_.size(c.block));
    if (!host_covers(c.block, bytes)) copy_to_host(c.block, bytes);
  }
}

}  // namespace delta::planner::simulation
