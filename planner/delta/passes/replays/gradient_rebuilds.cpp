#include "delta/passes/replays/gradient_rebuilds.hpp"

#include "common/plan_edits.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <unordered_map>

namespace delta::planner {
namespace {

// True when the plan has the block on the device from `from` to `to`: no interval of its
// decision reaches into that range (discards after it are fine).
bool kept_between(const plan::BlockDecision* d, std::uint64_t from, std::uint64_t to) {
  if (!d) return true;
  for (const plan::Interval& x : d->intervals) {
    if (x.action == plan::Action::discard) {
      if (x.release_after < to) return false;
      continue;
    }
    const std::uint64_t end = x.action == plan::Action::retain ? x.until : x.needed_by;
    if (x.release_after < to && end > from) return false;
  }
  return true;
}

// An input to hold past its free: its swaps and rebuilds must end before the free, and a
// discard after its last read (which the hold replaces) may follow; a retention or revival
// would hold it twice.
bool holdable(const plan::BlockDecision* d, std::uint32_t last) {
  if (!d) return true;
  for (const plan::Interval& x : d->intervals) {
    if (x.action == plan::Action::discard) continue;
    if (x.action != plan::Action::swap && x.action != plan::Action::regenerate) return false;
    if (x.needed_by > last) return false;
  }
  return true;
}

}  // namespace

std::vector<GradientRebuild> gradient_rebuilds(const TraceIndex& index, const plan::Plan& plan) {
  std::unordered_map<std::uint64_t, const plan::BlockDecision*> decisions;  // by block id
  for (const plan::BlockDecision& d : plan.decisions) decisions.emplace(d.block, &d);
  const auto decision_of = [&](std::uint64_t id) -> const plan::BlockDecision* {
    const auto found = decisions.find(id);
    return found == decisions.end() ? nullptr : found->second;
  };
  std::vector<GradientRebuild> out;
  for (std::uint32_t b = 0; b < index.blocks().size(); ++b) {
    const BlockInfo& info = index.block(b);
    if (info.category != trace::Category::gradient || info.producer < 0 || info.writes.size() != 1) continue;
    const auto producer = static_cast<std::uint32_t>(info.producer);
    const auto next = std::upper_bound(info.uses.begin(), info.uses.end(), producer);
    if (next == info.uses.end() || *next <= producer + 1) continue;
    const std::uint32_t first_read = *next;
    if (!kept_between(decision_of(info.id), producer, first_read)) continue;
    if (index.version_chain(b, first_read) != std::vector<std::uint32_t>{producer}) continue;
    GradientRebuild r{b, producer, first_read, {}, static_cast<std::int64_t>(info.size)};
    bool ok = true;
    for (const OpUse& u : index.uses(producer)) {
      if (u.block == b) continue;
      if (!u.read || u.write || !index.unchanged_between(u.block, producer + 1, first_read)) {
        ok = false;
        break;
      }
      const BlockInfo& in = index.block(u.block);
      const plan::BlockDecision* d = decision_of(in.id);
      if (in.last >= first_read) {
        if (!kept_between(d, producer, first_read)) ok = false;
      } else if (!holdable(d, in.last) || in.from_start) {
        ok = false;
      } else {
        r.held.push_back(u.block);
        r.freed_bytes -= static_cast<std::int64_t>(in.size);
      }
      if (!ok) break;
    }
    if (ok && r.freed_bytes > 0) out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(), [](const GradientRebuild& a, const GradientRebuild& c) { return a.freed_bytes > c.freed_bytes; });
  return out;
}

plan::Plan with_gradient_rebuilds(const TraceIndex& index, plan::Plan plan, const std::vector<GradientRebuild>& rebuilds) {
  std::map<std::uint32_t, std::uint32_t> held_until;  // input -> the latest rebuild reading it
  for (const GradientRebuild& r : rebuilds) {
    const BlockInfo& info = index.block(r.block);
    plan::Interval rebuild;
    rebuild.action = plan::Action::regenerate;
    rebuild.release_after = r.producer;
    rebuild.needed_by = r.first_read;
    rebuild.replay = {r.producer};
    for (const OpUse& u : index.uses(r.producer))
      if (u.block != r.block) rebuild.inputs.push_back(index.block(u.block).id);
    // Every interval the plan has for the gradient comes after its first read (gradient_rebuilds).
    auto d = find_decision(plan, info.id);
    if (d == plan.decisions.end()) plan.decisions.push_back({info.id, {rebuild}});
    else d->intervals.insert(d->intervals.begin(), rebuild);
    for (std::uint32_t in : r.held) held_until[in] = std::max(held_until[in], r.first_read);
  }
  for (const auto& [in, until] : held_until) {
    const BlockInfo& info = index.block(in);
    plan::Interval hold;
    hold.action = plan::Action::retain;
    hold.release_after = info.last;
    hold.until = until;
    auto d = find_decision(plan, info.id);
    if (d == plan.decisions.end()) {
      plan.decisions.push_back({info.id, {hold}});
      continue;
    }
    std::erase_if(d->intervals, [](const plan::Interval& x) { return x.action == plan::Action::discard; });
    d->intervals.push_back(hold);
  }
  return plan;
}

bool gradients_worth_rebuilding(const TraceIndex& index, std::uint64_t budget_bytes) {
  std::int64_t freed = 0;
  for (const GradientRebuild& r : gradient_rebuilds(index, plan::Plan{})) freed += r.freed_bytes;
  return freed > 0 && static_cast<std::uint64_t>(freed) * 100 >= budget_bytes;
}

bool rebuild_gradients(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, double share) {
  std::vector<GradientRebuild> rebuilds = gradient_rebuilds(*request.index, plan);
  const auto count = static_cast<std::size_t>(std::lround(share * double(rebuilds.size())));
  if (count == 0) return false;
  rebuilds.resize(std::min(count, rebuilds.size()));
  plan::Plan tried = with_gradient_rebuilds(*request.index, plan, rebuilds);
  SimulationResult verdict = judge(request, tried);
  if (!verdict.feasible) return false;
  plan = std::move(tried);
  judged = std::move(verdict);
  return true;
}

double choose_rebuild_share(const PlanRequest& request, const plan::Plan& plan, const Finisher& finish) {
  // GPT2-XL at 0.7 of its peak, in live bytes, the best of 145 candidates rebuilt: bfloat16
  // 1.2840 with none, 1.2299 with 32, 1.2209 with 64, 1.2448 with all; float32 1.2924 with
  // none, 1.2668 with 48, no gain from 96 on. Past half, the replays in the optimizer cost more
  // than the copies they spare.
  plan::Plan unchanged = plan;  // judge() records its verdict in the plan
  const SimulationResult base = judge(request, unchanged);
  if (!base.feasible) return 0;
  double best_share = 0;
  std::optional<std::int64_t> best_time;
  for (const double share : {0.0, 0.25, 0.5}) {
    plan::Plan tried = plan;
    SimulationResult judged = base;
    rebuild_gradients(request, tried, judged, share);
    finish(request, tried, judged);
    if (judged.feasible && (!best_time || judged.step_time_ns < *best_time)) {
      best_time = judged.step_time_ns;
      best_share = share;
    }
  }
  return best_share;
}

}  // namespace delta::planner
