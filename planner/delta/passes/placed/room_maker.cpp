#include "delta/passes/placed/room_maker.hpp"

#include "common/plan_edits.hpp"

namespace delta::planner::lane_room {

std::optional<Rebuild> RebuildCache::make(const TraceIndex::IdleAcross& idle) const {
  if (!index_.regenerable(idle.block, idle.before)) return std::nullopt;
  const plan::Interval interval = regeneration_interval(index_, idle.block, idle.after, idle.before);
  if (interval.replay.empty() || interval.replay.size() > max_chain_) return std::nullopt;
  std::vector<std::uint32_t> inputs;
  inputs.reserve(interval.inputs.size());
  for (std::uint64_t id : interval.inputs) inputs.push_back(index_.block_index(id));
  return Rebuild{idle.block, idle.after, idle.before, static_cast<std::int64_t>(replay_compute_ns(index_, interval)),
                 std::move(inputs)};
}

RoomMaker::RoomMaker(const PlanRequest& request, const plan::Plan& plan, const SimulationResult& seen, RebuildCache& rebuilds,
                     bool idle_pages_are_room)
    : request_(request), index_(*request.index), seen_(seen), rebuilds_(rebuilds), idle_pages_are_room_(idle_pages_are_room),
      change_(index_.op_count()) {
  const std::size_t blocks = index_.blocks().size();
  moved_.assign(blocks, nullptr);
  read_by_rebuilds_.assign(blocks, 0);
  rebuilt_.assign(blocks, 0);
  for (const plan::BlockDecision& d : plan.decisions) {
    if (index_.has_block(d.block)) moved_[index_.block_index(d.block)] = &d.intervals;
    for (const plan::Interval& x : d.intervals)
      for (std::uint64_t id : x.inputs)
        if (index_.has_block(id)) ++read_by_rebuilds_[index_.block_index(id)];
  }
}

std::optional<std::uint32_t> RoomMaker::make_room(std::uint32_t from, std::uint32_t to, std::uint64_t bytes, std::int64_t replay_budget_ns) {
  const std::size_t chosen_before = chosen_.size();
  const std::int64_t need = static_cast<std::int64_t>(footprint(bytes));
  std::int64_t changed = from < to ? change_.at(from) : 0;  // what the moves so far add at op k
  for (std::uint32_t k = from; k < to; ++k) {
    if (k > from) changed += change_.step(k);
    while (held(k) + changed + need > static_cast<std::int64_t>(request_.budget_bytes)) {
      const Rebuild* r = cheapest_across(k, from, to);
      if (!r || spent_ns_ + r->cost_ns > replay_budget_ns) {
        while (chosen_.size() > chosen_before) unchoose();
        return k;
      }
      choose(*r);
      changed = change_.at(k);
    }
  }
  change_.add(from, to, need);
  return std::nullopt;
}

void RoomMaker::write(plan::Plan& plan) const {
  for (const Rebuild& r : chosen_) add_interval(plan, index_, r.block, regeneration_interval(index_, r.block, r.after, r.before));
}

const Rebuild* RoomMaker::cheapest_across(std::uint32_t k, std::uint32_t from, std::uint32_t to) {
  const Rebuild* best = nullptr;
  double best_score = 0;
  for (const TraceIndex::IdleAcross& idle : index_.idle_across(k)) {
    if (idle.before >= index_.op_count()) continue;
    const BlockInfo& info = index_.block(idle.block);
    if (info.from_start || info.size == 0 || rebuilt_[idle.block] || read_by_rebuilds_[idle.block] ||
        away_within(idle.block, idle.after, idle.before) || !may_move(request_, info))
      continue;
    const std::optional<Rebuild>& r = rebuilds_.of(idle);
    if (!r) continue;
    if (std::any_of(r->inputs.begin(), r->inputs.end(),
                    [&](std::uint32_t b) { return rebuilt_[b] || away_within(b, idle.before, idle.before); }))
      continue;
    const std::uint32_t lo = std::max(idle.after + 1, from), hi = std::min(idle.before, to);
    const double covered = hi > lo ? double(hi - lo) : 1.0;
    const double score = double(r->cost_ns) / (double(info.size) * covered);
    if (!best || score < best_score) {
      best = &*r;
      best_score = score;
    }
  }
  return best;
}

bool RoomMaker::away_within(std::uint32_t b, std::uint64_t from, std::uint64_t to) const {
  if (!moved_[b]) return false;
  for (const plan::Interval& x : *moved_[b]) {
    const std::uint64_t back = x.action == plan::Action::discard ? index_.op_count() : std::max(x.needed_by, x.until);
    if (x.release_after < to && back > from) return true;
  }
  return false;
}

void RoomMaker::choose(const Rebuild& r) {
  count(r, 1);
  chosen_.push_back(r);
}

void RoomMaker::unchoose() {
  count(chosen_.back(), -1);
  chosen_.pop_back();
}

void RoomMaker::count(const Rebuild& r, int sign) {
  change_.add(r.after + 1, r.before, -sign * static_cast<std::int64_t>(index_.size(r.block)));
  rebuilt_[r.block] = sign > 0;
  for (std::uint32_t b : r.inputs) read_by_rebuilds_[b] += sign;
  spent_ns_ += sign * r.cost_ns;
}

}  // namespace delta::planner::lane_room
