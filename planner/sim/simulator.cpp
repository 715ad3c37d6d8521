#include "sim/simulator.hpp"

#include "sim/allocator_ledger.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <span>
#include <stdexcept>

namespace delta::planner {

std::int64_t transfer_ns(std::uint64_t bytes, double bytes_per_s, double latency_ns) {
  return static_cast<std::int64_t>(std::ceil(latency_ns + double(bytes) / bytes_per_s * 1e9));
}

std::vector<std::uint64_t> replay_order(std::vector<const plan::Interval*> intervals) {
  auto last_replayed = [](const plan::Interval* x) {
    return x->replay.empty() ? 0 : *std::max_element(x->replay.begin(), x->replay.end());
  };
  std::vector<std::pair<std::uint64_t, const plan::Interval*>> keyed;
  keyed.reserve(intervals.size());
  std::uint64_t highest = 0;
  for (const plan::Interval* x : intervals) {
    keyed.emplace_back(last_replayed(x), x);
    highest = std::max(highest, keyed.back().first);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::uint64_t> sequence;
  std::vector<bool> seen(highest + 1, false);  // ops are trace positions: a bitmap beats hashing
  for (const auto& [last, x] : keyed)
    for (std::uint64_t op : x->replay)
      if (!seen[op]) {
        seen[op] = true;
        sequence.push_back(op);
      }
  return sequence;
}

namespace {

// 32 bytes, two to a cache line: every op reads the state of each block it uses, scattered
// over all blocks, and on large traces those reads miss the cache more than anything else.
struct BlockState {
  bool resident = false;     // the data is (or is being made) available on the device
  bool held = false;         // its bytes are allocated
  bool host_valid = false;   // a host copy equal to the device data exists
  bool evicting = false;     // a D2H copy is in flight; bytes held until it completes
  std::uint32_t evict_seq = 0;
  std::int64_t ready_ns = 0;
  std::int64_t copied_ns = 0;  // host_valid: when the copy to host completes (or completed)
  std::int32_t released_after = -1;  // for messages
};
static_assert(sizeof(BlockState) == 32);

struct PendingEviction {
  std::int64_t done_ns;
  std::uint32_t block;
  std::uint32_t seq;
  std::uint64_t bytes;  // what the copy frees: the block's size, or less for a partial swap
  bool operator>(const PendingEviction& other) const { return done_ns > other.done_ns; }
};

struct Scheduled {
  std::uint32_t block;
  const plan::Interval* interval;
};

// What the plan schedules at each op, in plan order, packed in one array (one simulation per
// candidate plan: a vector per op would cost an allocation each).
class OpSchedule {
 public:
  explicit OpSchedule(std::size_t slots) : slots_(slots) {}
  void add(std::size_t op, Scheduled item) { pending_.push_back({static_cast<std::uint32_t>(op), item}); }
  void pack() {
    start_.assign(slots_ + 1, 0);
    for (const auto& [op, item] : pending_) ++start_[op + 1];
    for (std::size_t i = 0; i < slots_; ++i) start_[i + 1] += start_[i];
    items_.resize(pending_.size());
    std::vector<std::uint32_t> next(start_.begin(), start_.end() - 1);
    for (const auto& [op, item] : pending_) items_[next[op]++] = item;
    pending_.clear();
    pending_.shrink_to_fit();
  }
  std::span<const Scheduled> at(std::size_t op) const { return {items_.data() + start_[op], items_.data() + start_[op + 1]}; }

 private:
  std::size_t slots_;
  std::vector<std::pair<std::uint32_t, Scheduled>> pending_;
  std::vector<std::uint32_t> start_;
  std::vector<Scheduled> items_;
};

class Infeasible : public std::runtime_error {
 public:
  Infeasible(std::int64_t op, const std::string& what, std::uint64_t shortfall = 0)
      : std::runtime_error(what), op(op), shortfall(shortfall) {}
  std::int64_t op;
  std::uint64_t shortfall;
};

// Long: one class as it was before the planner moved into rooms; cut along its seams next.
class Replay {
 public:
  Replay(const TraceIndex& index, const plan::Plan& plan, const SimulationOptions& options)
      : index_(index), options_(options), state_(index.blocks().size()), retained_(index.blocks().size(), 0), releases_(index.op_count()), copies_(index.op_count()), expiries_(index.op_count()),
        prefetches_(index.op_count() + 1), regenerations_(index.op_count() + 1) {
    const std::size_t n = index.op_count();
    for (const plan::BlockDecision& decision : plan.decisions) {
      const std::uint32_t b = index.block_index(decision.block);
      const BlockInfo& info = index.block(b);
      // Named only for a message: built per decision, per simulation, it would cost more
      // than the checks.
      const auto name_of = [&info] { return "block " + std::to_string(info.id); };
      for (const plan::Interval& interval : decision.intervals) {
        if (interval.action == plan::Action::retain) {
          if (info.to_end || interval.release_after != info.last)
            throw Infeasible(static_cast<std::int64_t>(interval.release_after),
                             "op " + std::to_string(interval.release_after) + ": the plan retains " + name_of() +
                                 " after that op, but the program " +
                                 (info.to_end ? std::string("holds it to the end of the step")
                                              : "frees it after op " + std::to_string(info.last)));
          if (interval.until <= interval.release_after || interval.until >= n)
            throw Infeasible(static_cast<std::int64_t>(interval.release_after),
                             "op " + std::to_string(interval.release_after) + ": the plan retains " + name_of() + " until op " +
                                 std::to_string(interval.until) + ", outside (" + std::to_string(interval.release_after) +
                                 ", " + std::to_string(n - 1) + "]");
          retained_[b] = 1;
          expiries_.add(interval.until, {b, &interval});
          continue;
        }
        if (interval.action == plan::Action::revive) {
          check_revival(b, interval);
          regenerations_.add(interval.needed_by, {b, &interval});
          expiries_.add(interval.until, {b, &interval});
          continue;
        }
        if (interval.release_after < info.first || interval.release_after > info.last)
          throw Infeasible(static_cast<std::int64_t>(interval.release_after),
                           "op " + std::to_string(interval.release_after) + ": the plan releases " + name_of() +
                               ", which is not live then (live over ops " + std::to_string(info.first) + ".." +
                               std::to_string(info.last) + ")");
        if (interval.action == plan::Action::discard) {
          if (info.to_end)
            throw Infeasible(static_cast<std::int64_t>(interval.release_after),
                             "op " + std::to_string(interval.release_after) + ": the plan discards " + name_of() +
                                 ", which must still be resident at the end of the step");
          auto later = std::upper_bound(info.uses.begin(), info.uses.end(), static_cast<std::uint32_t>(interval.release_after));
          if (later != info.uses.end())
            throw Infeasible(static_cast<std::int64_t>(*later),
                             op_name(*later) + ": uses " + name_of() + ", which the plan discarded after op " +
                                 std::to_string(interval.release_after));
          releases_.add(interval.release_after, {b, &interval});
          continue;
        }
        if (interval.needed_by > n)
          throw Infeasible(static_cast<std::int64_t>(n), "end of step: the plan brings back " + name_of() + " at op " +
                                                             std::to_string(interval.needed_by) + ", past the last op");
        if (!info.to_end && interval.needed_by > info.last)
          throw Infeasible(static_cast<std::int64_t>(interval.needed_by),
                           "op " + std::to_string(interval.needed_by) + ": the plan brings back " + name_of() +
                               " after it is freed (op " + std::to_string(info.last) + ")");
        if (interval.action == plan::Action::regenerate) {
          if (info.category == trace::Category::parameter || info.category == trace::Category::input || info.from_start)
            throw Infeasible(static_cast<std::int64_t>(interval.needed_by),
                             "op " + std::to_string(interval.needed_by) + ": " + name_of() + " is a " +
                                 (info.from_start ? std::string("block live before the step") : trace::to_string(info.category)) +
                                 " and cannot be regenerated");
          if (interval.replay.empty())
            throw Infeasible(static_cast<std::int64_t>(interval.needed_by),
                             "op " + std::to_string(interval.needed_by) + ": the regeneration of " + name_of() + " replays no op");
          for (std::uint64_t op : interval.replay)
            if (op >= interval.needed_by)
              throw Infeasible(static_cast<std::int64_t>(interval.needed_by),
                               "op " + std::to_string(interval.needed_by) + ": the regeneration of " + name_of() + " replays op " +
                                   std::to_string(op) + ", which has not run yet then");
        }
        if (interval.action == plan::Action::swap &&
            (interval.prefetch_at <= interval.release_after || interval.prefetch_at > interval.needed_by))
          throw Infeasible(static_cast<std::int64_t>(interval.needed_by),
                           "op " + std::to_string(interval.needed_by) + ": the plan prefetches " + name_of() + " at op " +
                               std::to_string(interval.prefetch_at) + ", outside its release (after op " +
                               std::to_string(interval.release_after) + ") and need");
        if (interval.action == plan::Action::swap && interval.bytes) {
          if (*interval.bytes == 0 || *interval.bytes >= info.size || *interval.bytes % plan::kSwapGranularity != 0)
            throw Infeasible(static_cast<std::int64_t>(interval.release_after),
                             "op " + std::to_string(interval.release_after) + ": the plan swaps " + std::to_string(*interval.bytes) +
                                 " bytes of " + name_of() + ", which has " + std::to_string(info.size) +
                                 " (a part must be whole pages of " + std::to_string(plan::kSwapGranularity) + " bytes, less than the block)");
          has_partial_swaps_ = true;
        }
        if (interval.action == plan::Action::swap && plan::copy_out_after(interval) != interval.release_after)
          schedule_early_copy(b, interval);
        releases_.add(interval.release_after, {b, &interval});
        if (interval.action == plan::Action::swap)
          prefetches_.add(interval.prefetch_at, {b, &interval});
        else
          regenerations_.add(interval.needed_by, {b, &interval});
      }
    }
    releases_.pack();
    copies_.pack();
    expiries_.pack();
    prefetches_.pack();
    regenerations_.pack();
    if (has_partial_swaps_) {
      away_.assign(state_.size(), 0);
      host_bytes_.assign(state_.size(), 0);
    }
    if (options.through_allocator) {
      ledger_ = make_allocator_ledger(options.gpu.name, options.budget_bytes);
      if (!ledger_) throw std::runtime_error("this build has no caching allocator to simulate through");
    }
  }

  SimulationResult run() {
    SimulationResult result;
    result.native_step_time_ns = index_.native_step_ns();
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
                                     extra_ - extra_before, stall_ - stall_before});
        for (std::uint32_t b : index_.freed_after(i)) {
          if (retained_[b]) continue;  // kept, data and all, until its expiry
          if (state_[b].held) unhold(b);
          state_[b].resident = false;
        }
        for (const Scheduled& e : expiries_.at(i)) {  // revived or retained blocks no replay reads again
          if (state_[e.block].held) unhold(e.block);
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

 private:
  // A revival rebuilds a block the program has freed, for replays only: it must come after
  // that free, hold until an op of the step, and replay ops that have run by then.
  void check_revival(std::uint32_t b, const plan::Interval& interval) const {
    const BlockInfo& info = index_.block(b);
    const auto at = static_cast<std::int64_t>(interval.needed_by);
    const auto where = [&] { return "op " + std::to_string(interval.needed_by) + ": the plan revives block " + std::to_string(info.id); };
    if (info.to_end) throw Infeasible(at, where() + ", which the program holds to the end of the step");
    if (interval.needed_by <= info.last)
      throw Infeasible(at, where() + " before the program frees it (after op " + std::to_string(info.last) + ")");
    if (interval.until < interval.needed_by || interval.until >= index_.op_count())
      throw Infeasible(at, where() + " until op " + std::to_string(interval.until) + ", outside [" + std::to_string(interval.needed_by) +
                               ", " + std::to_string(index_.op_count() - 1) + "]");
    if (info.category == trace::Category::parameter || info.category == trace::Category::input)
      throw Infeasible(at, where() + ", a " + trace::to_string(info.category) + ", which cannot be regenerated");
    if (interval.replay.empty()) throw Infeasible(at, where() + " by replaying no op");
    for (std::uint64_t op : interval.replay)
      if (op >= interval.needed_by) throw Infeasible(at, where() + " by replaying op " + std::to_string(op) + ", which has not run yet then");
  }

  std::string op_name(std::size_t i) const {
    if (i >= index_.op_count()) return "end of step";
    return "op " + std::to_string(i) + " (" + index_.trace().ops[i].name + ")";
  }

  // The bytes block b lacks on the device: all of it, or what a partial swap took away.
  std::uint64_t missing(std::uint32_t b) const { return state_[b].held ? away(b) : index_.size(b); }
  std::uint64_t away(std::uint32_t b) const { return away_.empty() ? 0 : away_[b]; }

  // Makes all of block b held: allocates it, or the part a partial swap freed.
  void hold(std::uint32_t b, std::size_t op) {
    const std::uint64_t size = index_.size(b);
    BlockState& s = state_[b];
    const std::uint64_t adding = missing(b);
    if (s.held && ledger_) ledger_->release(b);  // the allocator sees the block whole again
    place(b, size, op, [&] { return "block " + std::to_string(index_.block(b).id); });
    if (!away_.empty()) away_[b] = 0;
    s.held = true;
    held_ += adding;
    peak_ = std::max(peak_, held_);
    moment_peak_ = std::max(moment_peak_, held_);
  }

  // Places an allocation through the caching allocator, when simulating through it. As a
  // runtime meeting an out-of-memory with copies out still in flight would, it waits for the
  // next eviction to complete (which frees its block) and tries again: the live budget can be
  // filled by blocks still being copied out, and their memory is only briefly unusable. The
  // allocation is refused only when nothing pending can make room.
  template <typename Name>
  void place(std::uint64_t key, std::uint64_t bytes, std::size_t op, Name&& name) {
    if (!ledger_) return;
    allocate_making_room(*ledger_, key, bytes, [&](const std::string& refused) {
      drop_stale_evictions();
      if (pending_.empty()) throw Infeasible(static_cast<std::int64_t>(op), op_name(op) + ": " + name() + ": " + refused, bytes);
      const std::int64_t done = pending_.top().done_ns;
      if (done > now_) {
        stall_ += done - now_;
        now_ = done;
      }
      reclaim();
    });
  }

  void unhold(std::uint32_t b) {
    BlockState& s = state_[b];
    s.held = false;
    s.evicting = false;
    held_ -= index_.size(b) - away(b);
    if (!away_.empty()) away_[b] = 0;
    if (ledger_) ledger_->release(b);
  }

  // A partial swap's copy is done: its pages are freed, the rest of the block stays. Through
  // the allocator, the block is placed again at its remaining size: the freed space always
  // holds it.
  void unhold_part(std::uint32_t b, std::uint64_t bytes) {
    BlockState& s = state_[b];
    s.evicting = false;
    held_ -= bytes;
    away_[b] = bytes;
    if (!ledger_) return;
    ledger_->release(b);
    try {
      ledger_->allocate(b, index_.size(b) - bytes);
    } catch (const std::runtime_error& e) {
      throw Infeasible(s.released_after, "block " + std::to_string(index_.block(b).id) + ": what a partial swap leaves could not be placed: " + e.what());
    }
  }

  void free_evicted(std::uint32_t b, std::uint64_t bytes) {
    if (bytes < index_.size(b))
      unhold_part(b, bytes);
    else
      unhold(b);
  }

  void reclaim() {
    while (!pending_.empty() && pending_.top().done_ns <= now_) {
      PendingEviction e = pending_.top();
      pending_.pop();
      BlockState& s = state_[e.block];
      if (s.evicting && s.evict_seq == e.seq) free_evicted(e.block, e.bytes);
    }
  }

  // Forgets pending evictions whose block came back before its copy out finished (a prefetch
  // cancelled them): waiting for one frees nothing.
  void drop_stale_evictions() {
    while (!pending_.empty()) {
      const PendingEviction& e = pending_.top();
      const BlockState& s = state_[e.block];
      if (s.evicting && s.evict_seq == e.seq) return;
      pending_.pop();
    }
  }

  // Waits for pending evictions until `bytes` more fit in the budget.
  void make_room(std::uint64_t bytes, std::size_t op) {
    if (options_.budget_bytes == 0) return;
    reclaim();
    for (drop_stale_evictions(); held_ + bytes > options_.budget_bytes && !pending_.empty(); drop_stale_evictions()) {
      const std::int64_t done = pending_.top().done_ns;
      if (done > now_) {
        stall_ += done - now_;
        now_ = done;
      }
      reclaim();
    }
    if (held_ + bytes > options_.budget_bytes)
      throw Infeasible(static_cast<std::int64_t>(op),
                       op_name(op) + ": budget exceeded: " + std::to_string(held_) + " bytes held + " +
                           std::to_string(bytes) + " needed > budget " + std::to_string(options_.budget_bytes),
                       held_ + bytes - options_.budget_bytes);
  }

  void issue_prefetches(std::size_t i) {
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

  // Runs the replays due before op i on the compute stream, in replay_order(). Data are
  // versioned: a replayed op must read every block as it was when the op first ran (the
  // number of writes before it), and a rebuilt block must end as it is now. Blocks a replay
  // writes that are not resident are allocated; the targets stay, the others are freed after
  // their last read in the sequence. Outputs that would overwrite resident data go to scratch
  // memory, held until their last read.
  void run_regenerations(std::size_t i) {
    if (regenerations_.at(i).empty()) return;
    const std::uint32_t at = static_cast<std::uint32_t>(i);
    std::vector<const plan::Interval*> intervals;
    std::vector<std::uint32_t> targets;
    for (const Scheduled& r : regenerations_.at(i)) {
      if (r.interval->action == plan::Action::revive && (state_[r.block].resident || state_[r.block].held))
        throw Infeasible(static_cast<std::int64_t>(i), op_name(i) + ": the plan revives block " +
                                                           std::to_string(index_.block(r.block).id) + ", which is still on the device");
      intervals.push_back(r.interval);
      targets.push_back(r.block);
    }
    const std::vector<std::uint64_t> sequence = replay_order(intervals);
    // Per-block scratch, stamped with this call: the position in the sequence of the block's
    // last read there, and the version its copy in the replays has reached.
    const std::uint64_t round = ++round_;
    if (seq_.size() != state_.size()) seq_.assign(state_.size(), SequenceSlot{});
    auto read_later = [&](std::uint32_t b, std::size_t k) { return seq_[b].read_round == round && seq_[b].last_read > k; };
    auto rebuilt = [&](std::uint32_t b) -> std::uint32_t* { return seq_[b].rebuilt_round == round ? &seq_[b].version : nullptr; };
    auto set_rebuilt = [&](std::uint32_t b, std::uint32_t version) {
      seq_[b].rebuilt_round = round;
      seq_[b].version = version;
    };
    for (std::size_t k = 0; k < sequence.size(); ++k)
      for (const OpUse& u : index_.uses(sequence[k]))
        if (u.read) {
          seq_[u.block].read_round = round;
          seq_[u.block].last_read = k;
        }
    auto is_target = [&](std::uint32_t b) { return std::find(targets.begin(), targets.end(), b) != targets.end(); };
    auto block_name = [&](std::uint32_t b) { return "block " + std::to_string(index_.block(b).id); };
    auto target_of = [&](std::uint64_t op) {  // for messages: the first regeneration replaying op
      for (const Scheduled& r : regenerations_.at(i))
        if (std::find(r.interval->replay.begin(), r.interval->replay.end(), op) != r.interval->replay.end()) return block_name(r.block);
      return std::string("?");
    };
    std::vector<std::pair<std::uint32_t, std::uint64_t>> scratch;  // resident block -> scratch bytes held
    auto has_scratch = [&](std::uint32_t b) { return seq_[b].scratch_round == round; };
    std::vector<std::uint32_t> temporaries;
    for (std::size_t k = 0; k < sequence.size(); ++k) {
      const std::uint32_t op = static_cast<std::uint32_t>(sequence[k]);
      std::int64_t inputs_ready = now_;
      for (const OpUse& u : index_.uses(op)) {
        if (!u.read) continue;
        const std::uint32_t wanted = u.version;
        std::uint32_t have;
        if (const std::uint32_t* copy = rebuilt(u.block)) {
          have = *copy;
        } else {
          if (!state_[u.block].resident)
            throw Infeasible(static_cast<std::int64_t>(i),
                             op_name(i) + ": regenerating " + target_of(op) + " replays op " + std::to_string(op) +
                                 ", which reads " + block_name(u.block) + " that is not resident");
          have = index_.version_at(u.block, at);
          inputs_ready = std::max(inputs_ready, state_[u.block].ready_ns);
        }
        if (have != wanted)
          throw Infeasible(static_cast<std::int64_t>(i),
                           op_name(i) + ": regenerating " + target_of(op) + " replays op " + std::to_string(op) + ", which read " +
                               block_name(u.block) + " as it was after " + std::to_string(wanted) +
                               " writes, but it is then after " + std::to_string(have) +
                               " (updated in place since, or not rebuilt first)");
      }
      for (const OpUse& u : index_.uses(op)) {
        if (!u.write) continue;
        const std::uint32_t version = u.version + 1;
        if (std::uint32_t* copy = rebuilt(u.block)) {
          *copy = version;
          continue;
        }
        set_rebuilt(u.block, version);
        BlockState& s = state_[u.block];
        const std::uint64_t size = index_.block(u.block).size;
        // A block whose data must survive (resident, being copied out, or partly on the
        // device after a partial swap) gets the output elsewhere.
        const bool keeps_data = s.resident || s.evicting || s.held;
        make_room(keeps_data ? size : missing(u.block), i);
        if (keeps_data) {
          place(scratch_key(u.block), size, i, [&] { return "scratch for " + block_name(u.block); });
          scratch.emplace_back(u.block, size);
          seq_[u.block].scratch_round = round;
          held_ += size;
          peak_ = std::max(peak_, held_);
    moment_peak_ = std::max(moment_peak_, held_);
          continue;
        }
        hold(u.block, i);
        s.resident = true;
        if (!is_target(u.block)) temporaries.push_back(u.block);
      }
      stall_ += std::max<std::int64_t>(0, inputs_ready - now_);
      now_ = std::max(now_, inputs_ready) + index_.duration(op);
      extra_ += index_.duration(op);
      for (const OpUse& u : index_.uses(op))
        if (u.write && !has_scratch(u.block)) state_[u.block].ready_ns = now_;
      // Free what no later replay reads.
      for (auto it = scratch.begin(); it != scratch.end();) {
        if (!read_later(it->first, k)) {
          held_ -= it->second;
          if (ledger_) ledger_->release(scratch_key(it->first));
          seq_[it->first].rebuilt_round = seq_[it->first].scratch_round = 0;
          it = scratch.erase(it);
        } else {
          ++it;
        }
      }
      for (auto it = temporaries.begin(); it != temporaries.end();) {
        if (!read_later(*it, k)) {
          if (state_[*it].held) unhold(*it);
          state_[*it].resident = false;
          seq_[*it].rebuilt_round = 0;
          it = temporaries.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (const Scheduled& r : regenerations_.at(i)) {
      const std::string target = block_name(r.block);
      const std::uint32_t* copy = rebuilt(r.block);
      const std::uint32_t needed = index_.version_at(r.block, at);
      if (!copy || !state_[r.block].resident)
        throw Infeasible(static_cast<std::int64_t>(i), op_name(i) + ": the replay ops of " + target + " do not write it");
      if (*copy != needed)
        throw Infeasible(static_cast<std::int64_t>(i),
                         op_name(i) + ": the replay ops of " + target + " leave it after " + std::to_string(*copy) +
                             " writes, but it must be as after " + std::to_string(needed) +
                             " (replay its producer and every in-place update since)");
      state_[r.block].host_valid = false;
      ++(r.interval->action == plan::Action::revive ? revivals_ : regenerations_count_);
    }
  }

  void run_op(std::size_t i) {
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
    stall_ += ready - now_;
    now_ = ready + index_.duration(i);
    for (const OpUse& u : index_.uses(i))
      if (u.write) {
        state_[u.block].host_valid = false;
        state_[u.block].ready_ns = now_;
      }
  }

  void release_after(std::size_t i) {
    for (const Scheduled& r : releases_.at(i)) {
      BlockState& s = state_[r.block];
      const BlockInfo& info = index_.block(r.block);
      if (!s.resident)
        throw Infeasible(static_cast<std::int64_t>(i), op_name(i) + ": the plan releases block " + std::to_string(info.id) + ", which is not resident");
      s.resident = false;
      s.released_after = static_cast<std::int32_t>(i);
      if (r.interval->action == plan::Action::discard) {
        if (s.held) unhold(r.block);
        ++discards_;
        continue;
      }
      if (r.interval->action == plan::Action::regenerate) {
        unhold(r.block);
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

  // Whether the host holds an up-to-date copy of at least `bytes` of block b.
  bool host_covers(std::uint32_t b, std::uint64_t bytes) const {
    return state_[b].host_valid && (host_bytes_.empty() || host_bytes_[b] >= bytes);
  }

  // Queues the copy of `size` bytes of block b to host on the D2H lane, behind what is queued there.
  void copy_to_host(std::uint32_t b, std::uint64_t size) {
    BlockState& s = state_[b];
    if (!host_bytes_.empty()) host_bytes_[b] = size;
    const std::int64_t start = std::max({now_, d2h_free_, s.ready_ns});
    d2h_free_ = start + transfer_ns(size, options_.gpu.d2h_bytes_per_s, options_.gpu.launch_latency_ns);
    d2h_bytes_ += size;
    if (options_.record_timeline) copies_made_.push_back({true, start, d2h_free_, index_.block(b).id, size});
    s.host_valid = true;
    s.copied_ns = d2h_free_;
  }

  // A swap whose copy starts before its release: the data must be final by then (no write
  // in between) and the block on the device.
  void schedule_early_copy(std::uint32_t b, const plan::Interval& interval) {
    const BlockInfo& info = index_.block(b);
    const std::uint64_t from = plan::copy_out_after(interval);
    const auto where = [&] {
      return "op " + std::to_string(from) + ": the plan copies block " + std::to_string(info.id) + " to host";
    };
    if (from > interval.release_after) throw Infeasible(static_cast<std::int64_t>(from), where() + " after releasing it (op " + std::to_string(interval.release_after) + ")");
    if (from < info.first) throw Infeasible(static_cast<std::int64_t>(from), where() + " before it exists (op " + std::to_string(info.first) + ")");
    auto write = std::upper_bound(info.writes.begin(), info.writes.end(), static_cast<std::uint32_t>(from));
    if (write != info.writes.end() && *write <= interval.release_after)
      throw Infeasible(static_cast<std::int64_t>(*write), op_name(*write) + ": writes block " + std::to_string(info.id) +
                                                              ", whose copy to host started after op " + std::to_string(from) +
                                                              ": the copy would be stale");
    copies_.add(from, {b, &interval});
  }

  void start_early_copies(std::size_t i) {
    for (const Scheduled& c : copies_.at(i)) {
      BlockState& s = state_[c.block];
      if (!s.resident)
        throw Infeasible(static_cast<std::int64_t>(i), op_name(i) + ": the plan copies block " + std::to_string(index_.block(c.block).id) +
                                                           " to host, but it is not on the device");
      const std::uint64_t bytes = plan::swapped_bytes(*c.interval, index_.size(c.block));
      if (!host_covers(c.block, bytes)) copy_to_host(c.block, bytes);
    }
  }

  const TraceIndex& index_;
  const SimulationOptions& options_;
  std::vector<BlockState> state_;
  std::vector<std::uint8_t> retained_;  // per block: the plan keeps it past the program's free
  // Only for plans with partial swaps (else empty), per block: the bytes a partial swap has
  // freed while the rest stays held, and the bytes the host copy holds.
  bool has_partial_swaps_ = false;
  std::vector<std::uint64_t> away_, host_bytes_;
  std::vector<CopyMoment> copies_made_;  // record_timeline only
  OpSchedule releases_, copies_, expiries_, prefetches_, regenerations_;
  std::priority_queue<PendingEviction, std::vector<PendingEviction>, std::greater<>> pending_;
  std::unique_ptr<AllocatorLedger> ledger_;
  struct SequenceSlot {  // per block, for the replays before one op (stamped with round_)
    std::uint64_t read_round = 0, rebuilt_round = 0, scratch_round = 0;
    std::size_t last_read = 0;
    std::uint32_t version = 0;
  };
  std::vector<SequenceSlot> seq_;
  std::uint64_t round_ = 0;
  std::int64_t now_ = 0, h2d_free_ = 0, d2h_free_ = 0, stall_ = 0, extra_ = 0;
  std::uint64_t partial_swaps_ = 0;  // run so far
  std::uint64_t held_ = 0, peak_ = 0, moment_peak_ = 0, h2d_bytes_ = 0, d2h_bytes_ = 0, swaps_ = 0, regenerations_count_ = 0, revivals_ = 0, discards_ = 0;
};

}  // namespace

SimulationResult simulate(const TraceIndex& index, const plan::Plan& plan, const SimulationOptions& options) {
  try {
    Replay replay(index, plan, options);
    return replay.run();
  } catch (const Infeasible& e) {
    SimulationResult result;
    result.feasible = false;
    result.error = e.what();
    result.first_bad_op = e.op;
    result.native_step_time_ns = index.native_step_ns();
    return result;
  }
}

}  // namespace delta::planner
