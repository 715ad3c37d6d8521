#include "trace/trace_index.hpp"

#include <delta/plan.hpp>

#include <algorithm>
#include <stdexcept>

namespace delta::planner {

TraceIndex::TraceIndex(const trace::Trace& trace) : trace_(&trace) {
  const std::size_t n = trace.ops.size();
  durations_.resize(n);
  starts_.resize(n);
  op_uses_.resize(n);
  allocated_at_.resize(n);
  freed_after_.resize(n);
  std::vector<std::int64_t> recorded_starts(n);
  for (std::size_t i = 0; i < n; ++i) {
    durations_[i] = std::max<std::int64_t>(0, trace.ops[i].duration_ns);
    starts_[i] = total_ns_;
    total_ns_ += durations_[i];
    recorded_starts[i] = trace.ops[i].start_ns;
  }
  blocks_.reserve(trace.blocks.size());
  std::uint64_t highest_id = 0;
  for (const trace::Block& block : trace.blocks) highest_id = std::max(highest_id, block.id);
  const bool dense = trace.blocks.empty() || highest_id < 4 * std::uint64_t(trace.blocks.size()) + 1024;
  if (dense) dense_by_id_.assign(trace.blocks.empty() ? 0 : highest_id + 1, kNoBlock);
  for (const trace::Block& block : trace.blocks) {
    BlockInfo info;
    info.id = block.id;
    info.size = block.size;
    info.category = block.category;
    const auto index = static_cast<std::uint32_t>(blocks_.size());
    if (dense) {
      if (dense_by_id_[block.id] == kNoBlock) dense_by_id_[block.id] = index;  // the first, as emplace keeps it
    } else {
      by_id_.emplace(block.id, index);
    }
    blocks_.push_back(info);
  }
  for (std::size_t i = 0; i < n; ++i) {
    for (const trace::BlockUse& use : trace.ops[i].blocks) {
      const std::uint32_t b = find_block(use.block);
      if (b == kNoBlock)
        throw trace::TraceError("ops[" + std::to_string(i) + "]: unknown block " + std::to_string(use.block));
      std::vector<OpUse>& uses = op_uses_[i];
      auto same = std::find_if(uses.begin(), uses.end(), [&](const OpUse& u) { return u.block == b; });
      if (same == uses.end()) same = uses.insert(uses.end(), OpUse{b, false, false});
      if (use.access != trace::Access::write) same->read = true;   // touch counts as both
      if (use.access != trace::Access::read) same->write = true;
      BlockInfo& info = blocks_[b];
      if (info.uses.empty() || info.uses.back() != i) info.uses.push_back(static_cast<std::uint32_t>(i));
      if (use.access != trace::Access::read && (info.writes.empty() || info.writes.back() != i))
        info.writes.push_back(static_cast<std::uint32_t>(i));
    }
    // Every write of an earlier op is recorded by now; this op's own come after its version.
    for (OpUse& u : op_uses_[i]) {
      const std::vector<std::uint32_t>& writes = blocks_[u.block].writes;
      u.version = static_cast<std::uint32_t>(writes.size() - (!writes.empty() && writes.back() == i ? 1 : 0));
    }
  }
  // Live ranges: from the op at whose start the block exists to the last op starting before
  // it is freed, widened to cover every use.
  std::vector<std::int64_t> diff(n + 1, 0);
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    BlockInfo& info = blocks_[b];
    const trace::Block& block = trace.blocks[b];
    if (n == 0) break;
    std::size_t first, last;
    info.from_start = block.alloc_ns == trace::kNever;
    info.to_end = block.free_ns == trace::kNever;
    if (info.from_start) {
      first = 0;
    } else {
      first = std::lower_bound(recorded_starts.begin(), recorded_starts.end(), block.alloc_ns) - recorded_starts.begin();
    }
    if (info.to_end) {
      last = n - 1;
    } else {
      auto it = std::lower_bound(recorded_starts.begin(), recorded_starts.end(), block.free_ns);
      last = it == recorded_starts.begin() ? 0 : (it - recorded_starts.begin()) - 1;
    }
    if (!info.uses.empty()) {
      first = std::min<std::size_t>(first, info.uses.front());
      last = std::max<std::size_t>(last, info.uses.back());
    }
    if (first >= n) continue;  // allocated after the last op: never live during an op
    if (last < first) last = first;
    info.first = static_cast<std::uint32_t>(first);
    info.last = static_cast<std::uint32_t>(last);
    if (info.first == 0 && info.from_start) at_start_ += info.size;
    if (!info.writes.empty() && info.writes.front() == info.first && !info.from_start) {
      const std::uint32_t p = info.writes.front();
      bool reads_itself = false;
      for (const OpUse& u : op_uses_[p]) reads_itself |= (u.block == b && u.read);
      if (!reads_itself) info.producer = p;
    }
    if (!info.from_start) allocated_at_[first].push_back(static_cast<std::uint32_t>(b));
    if (!info.to_end) freed_after_[last].push_back(static_cast<std::uint32_t>(b));
    diff[first] += static_cast<std::int64_t>(info.size);
    diff[last + 1] -= static_cast<std::int64_t>(info.size);
  }
  sizes_.reserve(blocks_.size());
  for (const BlockInfo& info : blocks_) sizes_.push_back(info.size);
  use_spans_.resize(blocks_.size());
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    const BlockInfo& info = blocks_[b];
    if (info.from_start) live_at_start_.push_back(static_cast<std::uint32_t>(b));
    if (info.to_end) live_at_end_.push_back(static_cast<std::uint32_t>(b));
    UseSpan& span = use_spans_[b];
    span.to_end = info.to_end;
    if (info.uses.empty()) continue;
    span = {info.uses.front(), info.uses.back(), true, info.to_end};
  }
  idle_once_ = std::vector<std::once_flag>(n);
  idle_across_.resize(n);
  live_.resize(n);
  std::int64_t running = 0;
  for (std::size_t i = 0; i < n; ++i) {
    running += diff[i];
    live_[i] = static_cast<std::uint64_t>(running);
    peak_ = std::max(peak_, live_[i]);
  }
}

const std::string& TraceIndex::fingerprint() const {
  std::call_once(fingerprint_once_, [this] { fingerprint_ = plan::trace_fingerprint(*trace_); });
  return fingerprint_;
}

std::uint32_t TraceIndex::find_block(std::uint64_t id) const {
  if (!dense_by_id_.empty() || by_id_.empty()) return id < dense_by_id_.size() ? dense_by_id_[id] : kNoBlock;
  auto it = by_id_.find(id);
  return it == by_id_.end() ? kNoBlock : it->second;
}

std::uint32_t TraceIndex::block_index(std::uint64_t id) const {
  const std::uint32_t b = find_block(id);
  if (b == kNoBlock) throw std::out_of_range("unknown block " + std::to_string(id));
  return b;
}

const std::vector<TraceIndex::IdleAcross>& TraceIndex::idle_across(std::uint32_t op) const {
  std::call_once(idle_once_.at(op), [&] {
    std::vector<IdleAcross>& idle = idle_across_[op];
    const auto n = static_cast<std::uint32_t>(op_count());
    for (std::uint32_t b = 0; b < blocks_.size(); ++b) {
      const UseSpan span = use_spans_[b];
      if (!span.used || span.first >= op || (span.last <= op && !span.to_end)) continue;
      const std::vector<std::uint32_t>& uses = blocks_[b].uses;
      auto next = std::upper_bound(uses.begin(), uses.end(), op);
      const std::uint32_t after = *(next - 1);
      if (after == op) continue;
      idle.push_back({b, after, next == uses.end() ? n : *next});
    }
    idle.shrink_to_fit();
  });
  return idle_across_[op];
}

std::int64_t TraceIndex::compute_between(std::size_t from, std::size_t to) const {
  if (to <= from) return 0;
  const std::int64_t end = to >= starts_.size() ? total_ns_ : starts_[to];
  return end - starts_[from];
}

std::size_t TraceIndex::op_at_time(std::int64_t t) const {
  auto it = std::upper_bound(starts_.begin(), starts_.end(), t);
  return it == starts_.begin() ? 0 : (it - starts_.begin()) - 1;
}

std::uint32_t TraceIndex::version_at(std::uint32_t block, std::uint32_t op) const {
  const std::vector<std::uint32_t>& writes = blocks_[block].writes;
  return static_cast<std::uint32_t>(std::lower_bound(writes.begin(), writes.end(), op) - writes.begin());
}

bool TraceIndex::unchanged_between(std::uint32_t block, std::uint32_t from, std::uint32_t to) const {
  if (to <= from) return true;
  return version_at(block, from) == version_at(block, to);
}

const OpUse* TraceIndex::use_at(std::size_t op, std::uint32_t block) const {
  for (const OpUse& u : op_uses_[op])
    if (u.block == block) return &u;
  return nullptr;
}

std::vector<std::uint32_t> TraceIndex::overwrite_chain(std::uint32_t block, std::uint32_t until_op) const {
  const BlockInfo& info = blocks_[block];
  const std::uint32_t version = version_at(block, until_op);
  std::uint32_t base = version;
  while (base > 0 && use_at(info.writes[base - 1], block)->read) --base;
  if (base == 0) return {};
  return {info.writes.begin() + (base - 1), info.writes.begin() + version};
}

std::vector<std::uint32_t> TraceIndex::version_chain(std::uint32_t block, std::uint32_t until_op) const {
  const BlockInfo& info = blocks_[block];
  if (info.producer < 0 || info.from_start) return {};
  if (info.category == trace::Category::parameter || info.category == trace::Category::input) return {};
  return overwrite_chain(block, until_op);
}

bool TraceIndex::regenerable(std::uint32_t block, std::uint32_t until_op) const {
  return chain_replays(block, until_op, true);
}

bool TraceIndex::replayable(std::uint32_t block, std::uint32_t until_op) const {
  return chain_replays(block, until_op, false);
}

bool TraceIndex::chain_replays(std::uint32_t block, std::uint32_t until_op, bool inputs_allocated) const {
  const std::vector<std::uint32_t> chain = version_chain(block, until_op);
  if (chain.empty()) return false;
  // The other blocks the chain reads must still hold the values it read (and, for a replay
  // on its own, still be allocated at the replay point).
  for (std::uint32_t op : chain)
    for (const OpUse& u : op_uses_[op]) {
      if (!u.read || u.block == block) continue;
      if (!unchanged_between(u.block, op, until_op)) return false;
      if (inputs_allocated && blocks_[u.block].last < until_op) return false;
    }
  return true;
}

}  // namespace delta::planner
