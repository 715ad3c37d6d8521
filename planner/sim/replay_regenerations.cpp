// The replays that rebuild blocks before an op, as the simulator runs them (replay.hpp).
#include "sim/replay.hpp"

#include <algorithm>
#include <span>
#include <string>
#include <vector>

namespace delta::planner::simulation {

void Replay::run_regenerations(std::size_t i) {
  if (regenerations_.at(i).empty()) return;
  const std::uint32_t at = static_cast<std::uint32_t>(i);
  // Buffers kept across calls (members): a simulation runs this at every op with replays.
  std::vector<const plan::Interval*>& intervals = regen_intervals_;
  std::vector<std::uint32_t>& targets = regen_targets_;
  intervals.clear();
  targets.clear();
  for (const Scheduled& r : regenerations_.at(i)) {
    if (r.interval->action == plan::Action::revive && (state_[r.block].resident || state_[r.block].held))
      throw Infeasible(static_cast<std::int64_t>(i), op_name(i) + ": the plan revives block " +
                                                         std::to_string(index_.block(r.block).id) + ", which is still on the device");
    intervals.push_back(r.interval);
    targets.push_back(r.block);
  }
  replay_order_.compute(intervals);
  const std::span<const std::uint64_t> sequence = replay_order_.sequence();
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
  std::vector<std::pair<std::uint32_t, std::uint64_t>>& scratch = regen_scratch_;  // resident block -> scratch bytes held
  scratch.clear();
  auto has_scratch = [&](std::uint32_t b) { return seq_[b].scratch_round == round; };
  std::vector<std::uint32_t>& temporaries = regen_temporaries_;
  temporaries.clear();
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
    start_op(inputs_ready, index_.duration(op));
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
        if (state_[*it].held) evict(*it);
        state_[*it].resident = false;
        seq_[*it].rebuilt_round = 0;
        it = temporaries.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const Scheduled& r : regenerations_.at(i)) {
    const std::uint32_t* copy = rebuilt(r.block);
    const std::uint32_t needed = index_.version_at(r.block, at);
    if (!copy || !state_[r.block].resident)
      throw Infeasible(static_cast<std::int64_t>(i), op_name(i) + ": the replay ops of " + block_name(r.block) + " do not write it");
    if (*copy != needed)
      throw Infeasible(static_cast<std::int64_t>(i),
                       op_name(i) + ": the replay ops of " + block_name(r.block) + " leave it after " + std::to_string(*copy) +
                           " writes, but it must be as after " + std::to_string(needed) +
                           " (replay its producer and every in-place update since)");
    state_[r.block].host_valid = false;
    ++(r.interval->action == plan::Action::revive ? revivals_ : regenerations_count_);
  }
}

}  // namespace delta::planner::simulation
