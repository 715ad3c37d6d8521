// The trace seen in op positions: for every block the ops during which it is live, the ops
// that use it and the op that produced it; per op its uses and native timing; the native
// live-memory curve. Everything the simulator, the planner and the baselines share.
#pragma once

#include <delta/trace.hpp>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace delta::planner {

struct BlockInfo {
  std::uint64_t id = 0;
  std::uint64_t size = 0;
  trace::Category category = trace::Category::unknown;
  std::uint32_t first = 0;          // first op during which the block is live
  std::uint32_t last = 0;           // last op during which it is live (inclusive)
  bool from_start = false;          // live before the step (parameter, input)
  bool to_end = false;              // still live when the step ends
  std::vector<std::uint32_t> uses;  // ops that read, write or touch it; sorted, unique
  std::vector<std::uint32_t> writes;
  std::int64_t producer = -1;       // the op that first writes it when that op allocates it
};

struct OpUse {
  std::uint32_t block = 0;  // index into TraceIndex::blocks
  bool read = false;
  bool write = false;
  std::uint32_t version = 0;  // writes of the block before this op: the data the op reads
};

class TraceIndex {
 public:
  explicit TraceIndex(const trace::Trace& trace);

  const trace::Trace& trace() const { return *trace_; }
  // plan::trace_fingerprint of the trace, computed once: every plan made for it records it.
  const std::string& fingerprint() const;
  std::size_t op_count() const { return durations_.size(); }
  const std::vector<BlockInfo>& blocks() const { return blocks_; }
  const BlockInfo& block(std::uint32_t index) const { return blocks_[index]; }
  // block(index).size, from a dense array: the simulator reads sizes at every allocation and
  // free, and a BlockInfo is two cache lines.
  std::uint64_t size(std::uint32_t index) const { return sizes_[index]; }
  std::uint32_t block_index(std::uint64_t id) const;  // throws std::out_of_range naming the id
  bool has_block(std::uint64_t id) const { return find_block(id) != kNoBlock; }
  // Blocks live before the step, and blocks still live when it ends, by index.
  const std::vector<std::uint32_t>& live_at_start() const { return live_at_start_; }
  const std::vector<std::uint32_t>& live_at_end() const { return live_at_end_; }
  // The blocks used both before and after `op` but not by it, by index, with their last use
  // before it and their next use after it (the op count for a block the step ends with and no
  // op uses again; a block dead after its last use is not listed). Computed on first request and kept: the eviction searches ask about the
  // same few ops over and over, and the search of every block's uses was most of their cost.
  struct IdleAcross {
    std::uint32_t block, after, before;
  };
  const std::vector<IdleAcross>& idle_across(std::uint32_t op) const;
  const std::vector<OpUse>& uses(std::size_t op) const { return op_uses_[op]; }
  const std::vector<std::uint32_t>& allocated_at(std::size_t op) const { return allocated_at_[op]; }
  const std::vector<std::uint32_t>& freed_after(std::size_t op) const { return freed_after_[op]; }
  std::int64_t duration(std::size_t op) const { return durations_[op]; }
  std::int64_t native_start(std::size_t op) const { return starts_[op]; }  // back-to-back
  std::int64_t native_end(std::size_t op) const { return starts_[op] + durations_[op]; }
  std::int64_t native_step_ns() const { return total_ns_; }
  // Sum of durations of ops [from, to) in the native schedule.
  std::int64_t compute_between(std::size_t from, std::size_t to) const;
  const std::vector<std::uint64_t>& native_live_bytes() const { return live_; }  // per op
  std::uint64_t native_peak() const { return peak_; }
  std::uint64_t resident_at_start() const { return at_start_; }
  // Op index whose native execution contains time t (the last op starting at or before t).
  std::size_t op_at_time(std::int64_t t) const;
  // How many ops before `op` write the block: the version of its data that `op` sees.
  std::uint32_t version_at(std::uint32_t block, std::uint32_t op) const;
  // True when no op in [from, to) writes the block.
  bool unchanged_between(std::uint32_t block, std::uint32_t from, std::uint32_t to) const;
  // The op's use of the block (reads and writes merged), or nullptr when it does not touch it.
  const OpUse* use_at(std::size_t op, std::uint32_t block) const;
  // The writes that leave the block's data as it is just before `until_op`, in trace order:
  // the last write before then that does not read the block and every in-place update after
  // it. Empty when every write before then reads the block (or there is none).
  std::vector<std::uint32_t> overwrite_chain(std::uint32_t block, std::uint32_t until_op) const;
  // The ops that rebuild the block's data as it is just before `until_op`: its overwrite chain,
  // for blocks the program produces. Empty for parameters and inputs, blocks live before the
  // step or not allocated by their first write, and blocks whose every write reads them.
  std::vector<std::uint32_t> version_chain(std::uint32_t block, std::uint32_t until_op) const;
  // True when the block can be rebuilt just before `until_op` by replaying its version chain
  // alone: the other blocks those ops read unchanged since, and still allocated then.
  bool regenerable(std::uint32_t block, std::uint32_t until_op) const;
  // Like regenerable, without requiring the chain's inputs to be still allocated (a
  // regeneration may rebuild them first).
  bool replayable(std::uint32_t block, std::uint32_t until_op) const;

 private:
  static constexpr std::uint32_t kNoBlock = ~std::uint32_t{0};
  // The first and last op that use a block: idle_across skips blocks not used on both sides
  // of the op without searching their use lists.
  struct UseSpan {
    std::uint32_t first = 0, last = 0;
    bool used = false, to_end = false;
  };
  std::uint32_t find_block(std::uint64_t id) const;
  bool chain_replays(std::uint32_t block, std::uint32_t until_op, bool inputs_allocated) const;

  const trace::Trace* trace_;
  std::vector<BlockInfo> blocks_;
  std::vector<std::uint64_t> sizes_;
  // Block ids to indices. Ids are usually small and dense (importers number blocks in
  // order), and plans are checked and simulated by id many times per planning run: a table
  // indexed by id then, a hash map only for sparse ids.
  std::vector<std::uint32_t> dense_by_id_;
  std::unordered_map<std::uint64_t, std::uint32_t> by_id_;
  std::vector<std::uint32_t> live_at_start_, live_at_end_;
  std::vector<UseSpan> use_spans_;
  mutable std::vector<std::once_flag> idle_once_;  // per op
  mutable std::vector<std::vector<IdleAcross>> idle_across_;
  std::vector<std::vector<OpUse>> op_uses_;
  std::vector<std::vector<std::uint32_t>> allocated_at_, freed_after_;
  std::vector<std::int64_t> durations_, starts_;
  std::int64_t total_ns_ = 0;
  std::vector<std::uint64_t> live_;
  std::uint64_t peak_ = 0;
  std::uint64_t at_start_ = 0;
  mutable std::once_flag fingerprint_once_;
  mutable std::string fingerprint_;
};

}  // namespace delta::planner
