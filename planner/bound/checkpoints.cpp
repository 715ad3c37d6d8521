// The ops the bound follows block by block, and their rows (relaxation.hpp).
#include "bound/relaxation.hpp"

#include <algorithm>
#include <map>

namespace delta::planner::relaxation {

std::vector<Checkpoint> pick_checkpoints(const std::vector<Gap>& gaps, const std::vector<Columns>& columns,
                                         const std::vector<double>& excess, const TraceIndex& index, std::size_t& count,
                                         LateNeeds& late) {
  // At the op in most excess at most kSharedAtPeak (GPT2-XL has a few thousand blocks over it), so
  // that a trace with far more still gives a bound in reasonable time.
  constexpr std::size_t kSpread = 32, kShared = 256, kSharedAtPeak = 16'384;
  // Short traces afford more: every op in most excess also follows its delay.
  const std::size_t kMost = index.op_count() <= 1'000 ? 48 : 16;
  constexpr double kSharedBytes = 0.999;
  std::vector<std::uint32_t> over;
  for (std::uint32_t i = 0; i < excess.size(); ++i)
    if (excess[i] > 0) over.push_back(i);
  std::vector<std::uint32_t> picks = spread(over, kSpread);
  std::vector<std::uint32_t> by_excess(over);
  const std::size_t most = std::min(kMost, by_excess.size());
  std::partial_sort(by_excess.begin(), by_excess.begin() + most, by_excess.end(), [&](std::uint32_t a, std::uint32_t b) {
    return excess[a] != excess[b] ? excess[a] > excess[b] : a < b;
  });
  picks.insert(picks.end(), by_excess.begin(), by_excess.begin() + most);
  // And the ops over the budget that need the most bytes resident (an optimizer's `_foreach_*`
  // ops, each touching a whole list of state): what is away at each of them is idle there
  // alone, so the link carries a different set for each, in turn (the delay chain below).
  constexpr std::size_t kHeaviest = 16, kListUses = 256;
  std::vector<std::pair<double, std::uint32_t>> heavy;
  for (std::uint32_t op : over) {
    double touched = 0;
    for (const OpUse& u : index.uses(op)) touched += double(index.block(u.block).size);
    heavy.push_back({-touched, op});
  }
  const std::size_t heaviest = std::min(kHeaviest, heavy.size());
  std::partial_sort(heavy.begin(), heavy.begin() + heaviest, heavy.end());
  std::vector<std::uint32_t> lists;  // heaviest ops that touch whole lists: every block followed
  std::vector<std::uint32_t> heavy_ops;
  for (std::size_t k = 0; k < heaviest; ++k) {
    picks.push_back(heavy[k].second);
    heavy_ops.push_back(heavy[k].second);
    if (index.uses(heavy[k].second).size() >= kListUses) lists.push_back(heavy[k].second);
  }
  std::sort(lists.begin(), lists.end());
  std::sort(heavy_ops.begin(), heavy_ops.end());
  picks = spread(picks, picks.size());  // sorted, each once
  const std::vector<std::uint32_t> top = spread(std::vector<std::uint32_t>(by_excess.begin(), by_excess.begin() + most), most);
  std::vector<Checkpoint> out;
  auto size = [&](std::size_t g) { return index.block(gaps[g].block).size; };
  for (std::uint32_t op : picks) {
    Checkpoint c;
    c.op = op;
    const bool follow_delay = std::binary_search(top.begin(), top.end(), op);
    const bool whole_list = std::binary_search(lists.begin(), lists.end(), op);
    const bool every_block = (!by_excess.empty() && op == by_excess.front()) || whole_list;
    const bool heavy_op = std::binary_search(heavy_ops.begin(), heavy_ops.end(), op);
    std::vector<std::size_t> over_op;
    double bytes = 0;
    for (std::size_t g = 0; g < gaps.size(); ++g)
      if (gaps[g].after < op && op < gaps[g].before) {
        over_op.push_back(g);
        bytes += double(size(g));
      }
    std::stable_sort(over_op.begin(), over_op.end(), [&](std::size_t a, std::size_t b) { return size(a) > size(b); });
    double shared = 0;
    // At the heaviest ops, blocks no regeneration can rebuild, alike in their last write and
    // next use, meet the same rows: one share serves them all, so that the kShared shares
    // reach further down the sizes (BERT-Large at 0.693 of its peak, where a thousand 4 MB
    // parameters and AdamW state are idle over the embedding's last gradient: 1.0212 to
    // 1.0285, and with the delays below 1.0375; GPT2-XL bfloat16 at 0.7, 1.0786 to 1.0938).
    // Not where every block is followed anyway (no tighter, and solved three times slower on
    // GPT2-XL bfloat16), nor at the other checkpoints (no tighter on the captures tried, and
    // the dual simplex ran past ten minutes there).
    std::map<std::pair<std::int64_t, std::uint32_t>, std::size_t> alike;
    for (std::size_t g : over_op) {
      const bool small = every_block ? c.shares.size() >= kSharedAtPeak
                                     : c.shares.size() >= kShared || shared >= kSharedBytes * bytes;
      const bool groups = heavy_op && !every_block && !small && !columns[g].regen;
      if (groups) {
        if (auto at = alike.find({gaps[g].written, gaps[g].before}); at != alike.end()) {
          shared += double(size(g));
          c.shares[at->second].alike.push_back(g);
          c.shares[at->second].bytes += size(g);
          continue;
        }
      }
      if (small) {
        c.whole.push_back(g);
        continue;
      }
      shared += double(size(g));
      if (groups) alike.emplace(std::pair(gaps[g].written, gaps[g].before), c.shares.size());
      Checkpoint::Share share{g, count++, 0, {}, size(g)};
      if (columns[g].regen) {
        std::vector<FreedInput> freed;
        const std::vector<std::uint32_t> chain = forced_chain(index, gaps[g].block, op, gaps[g].before, &freed);
        if (!chain.empty()) share.regen = count++;  // else no regeneration after op can rebuild it
        for (std::uint32_t replayed : chain) {
          if (follow_delay) c.later_needs[{replayed, gaps[g].block}].push_back(share.regen);
          if (std::binary_search(gaps[g].chain.begin(), gaps[g].chain.end(), replayed)) continue;
          late[{replayed, g}].regen_shares.push_back({share.regen, {}});
        }
        // A freed input is revived (its writes replayed) unless retained across op, or unless
        // one whose revival needs it is.
        if (share.regen)
          for (const FreedInput& f : freed) {
            auto held_at_op = [&](std::uint32_t b) { return index.block(b).last >= op; };
            // Still held at op: retaining it costs nothing there (nor reviving what it needs).
            if (held_at_op(f.block) || std::any_of(f.needed_for.begin(), f.needed_for.end(), held_at_op)) continue;
            std::vector<std::size_t> retentions;
            for (std::uint32_t b : f.needed_for) retentions.push_back(c.retained.at(b));
            auto [at, added] = c.retained.emplace(f.block, 0);
            if (added) at->second = count++;
            retentions.push_back(at->second);
            if (!f.revivable) c.retention_only.push_back({share.regen, retentions});
            for (std::uint32_t replayed : f.ops) {
              if (std::binary_search(chain.begin(), chain.end(), replayed) ||
                  std::binary_search(gaps[g].chain.begin(), gaps[g].chain.end(), replayed))
                continue;
              late[{replayed, g}].regen_shares.push_back({share.regen, retentions});
              if (follow_delay) {
                c.spared.push_back({count++, share.regen, retentions});
                c.later_needs[{replayed, gaps[g].block}].push_back(c.spared.back().column);
              }
            }
          }
      }
      c.shares.push_back(share);
    }
    // Every checkpoint splits the added time into the delay before it (its copies out) and
    // after it (its copies back): a plan's delays only accrue, so the op starts at most E late,
    // and what it is late by is gone from the time after it. Without the split, a block away
    // only over the optimizer's last ops counted E for its copy out and E again for its copy
    // back.
    c.delay = count++;
    // And the delay before the op is at least the replays that surely run before it, at every
    // checkpoint (it was at the list ops alone): a stall after the op, waiting for copies back
    // that could not start before it, adds to them (BERT-Large at 0.693: the embedding's
    // `exp_avg_sq` comes back after its last gradient, behind 1 ms of replays in the backward).
    for (std::size_t g = 0; g < gaps.size(); ++g)
      if (gaps[g].before <= op && columns[g].regen)
        for (std::uint32_t replayed : gaps[g].chain) c.earlier_needs[{replayed, gaps[g].block}].push_back(columns[g].regen);
    for (const auto& [key, columns_needed] : c.earlier_needs) c.earlier_replays.emplace(key.first, 0);
    for (auto& [replayed, column] : c.earlier_replays) column = count++;
    if (follow_delay) {
      for (std::size_t g = 0; g < gaps.size(); ++g)
        if (gaps[g].after >= op && columns[g].regen)
          for (std::uint32_t replayed : gaps[g].chain) c.later_needs[{replayed, gaps[g].block}].push_back(columns[g].regen);
      for (const auto& [key, columns_needed] : c.later_needs) c.later_replays.emplace(key.first, 0);
      for (auto& [replayed, column] : c.later_replays) column = count++;
    }
    out.push_back(std::move(c));
  }
  return out;
}

void write_replay_counts(std::ostream& out, const std::string& name, const std::map<std::uint32_t, std::size_t>& replays,
                         const ReplayNeeds& needs) {
  std::size_t row = 0;
  for (const auto& [key, columns] : needs) {
    out << name << row++ << ": x" << replays.at(key.first);
    for (std::size_t column : columns) out << " - x" << column;
    out << " >= 0\n";
  }
}

std::pair<std::vector<std::int64_t>, std::vector<std::uint32_t>> window_points(const Checkpoint& c,
                                                                               const std::vector<Gap>& gaps,
                                                                               std::size_t windows) {
  std::vector<std::int64_t> starts;
  std::vector<std::uint32_t> ends;
  for (const Checkpoint::Share& s : c.shares) {
    starts.push_back(gaps[s.gap].written);
    ends.push_back(gaps[s.gap].before);
  }
  return {spread(starts, windows), spread(ends, windows)};
}

void write_checkpoint(std::ostream& out, const Checkpoint& c, const std::vector<Gap>& gaps,
                      const std::vector<Columns>& columns, const TraceIndex& index, double excess, LaneRates lanes,
                      std::size_t windows, const DelayChain& delays) {
  auto whole_mib = [&](std::size_t g) { return double(index.block(gaps[g].block).size) / double(1 << 20); };
  constexpr double kMs = 1e6, kMiB = double(1 << 20);
  const std::string name = " c" + std::to_string(c.op);
  auto mib = [&](const Checkpoint::Share& s) { return double(s.bytes) / kMiB; };
  out << name << "cover:";
  for (const Checkpoint::Share& s : c.shares) {
    out << " + " << mib(s) << " x" << s.swap;
    if (s.regen) out << " + " << mib(s) << " x" << s.regen;
  }
  for (std::size_t g : c.whole) out << " + " << whole_mib(g) << " x" << columns[g].away;
  for (const auto& [block, column] : c.retained) out << " - " << double(index.block(block).size) / kMiB << " x" << column;
  if (c.shares.empty() && c.whole.empty() && c.retained.empty()) out << " 0 x0";
  out << " >= " << excess / kMiB << "\n";
  if (c.delay) {
    out << name << "delay: x0 - x" << c.delay;
    for (const auto& [replayed, column] : c.later_replays) out << " - " << double(index.duration(replayed)) / kMs << " x" << column;
    out << " >= 0\n";
    write_replay_counts(out, name + "later", c.later_replays, c.later_needs);
    if (!c.earlier_replays.empty()) {
      out << name << "lateness: x" << c.delay;
      for (const auto& [replayed, column] : c.earlier_replays) out << " - " << double(index.duration(replayed)) / kMs << " x" << column;
      out << " >= 0\n";
      write_replay_counts(out, name + "earlier", c.earlier_replays, c.earlier_needs);
    }
    for (std::size_t k = 0; k < c.spared.size(); ++k) {
      out << name << "spared" << k << ": x" << c.spared[k].column << " - x" << c.spared[k].regen;
      for (std::size_t retention : c.spared[k].retentions) out << " + x" << retention;
      out << " >= 0\n";
    }
  }
  for (std::size_t k = 0; k < c.retention_only.size(); ++k) {
    out << name << "kept" << k << ": x" << c.retention_only[k].first;
    for (std::size_t retention : c.retention_only[k].second) out << " - x" << retention;
    out << " <= 0\n";
  }
  for (std::size_t k = 0; k < c.shares.size(); ++k) {
    const Checkpoint::Share& s = c.shares[k];
    if (!s.regen) continue;
    out << name << "s" << k << ": x" << s.swap << " + x" << s.regen << " <= 1\n";
    out << name << "r" << k << ": x" << s.regen << " - x" << columns[s.gap].regen << " <= 0\n";
  }
  const auto [starts, ends] = window_points(c, gaps, windows);
  std::size_t row = 0;
  for (std::int64_t from : starts) {
    out << name << "d" << row++ << ":";
    for (const Checkpoint::Share& s : c.shares)
      if (gaps[s.gap].written >= from) out << " + " << mib(s) * lanes.d2h_ms_per_mib << " x" << s.swap;
    // The window opens when the last write `from` ends: the delay before it is spent.
    if (from >= 0) out << " + x" << delays.at(static_cast<std::uint32_t>(from));
    out << " - x" << c.delay << " <= " << double(index.compute_between(static_cast<std::size_t>(from + 1), c.op)) / kMs << "\n";
  }
  row = 0;
  for (std::uint32_t to : ends) {
    out << name << "h" << row++ << ":";
    for (const Checkpoint::Share& s : c.shares)
      if (gaps[s.gap].before <= to) out << " + " << mib(s) * lanes.h2d_ms_per_mib << " x" << s.swap;
    // The window closes when op `to` starts (the end of the step when `to` is op_count()).
    out << " - x" << (to < index.op_count() ? delays.at(to) : 0) << " + x" << c.delay;
    out << " <= " << double(index.compute_between(c.op, std::min<std::size_t>(to, index.op_count()))) / kMs << "\n";
  }
}

}  // namespace delta::planner::relaxation
