// The sweep's planner, private to delta/sweep/: the live-memory curve it walks, the candidates
// (idle gaps of blocks) and the class behind plan_with_sweep (sweep.hpp), whose parts the
// files of this folder define.
#pragma once

#include "common/early_copies.hpp"
#include "common/plan_edits.hpp"
#include "delta/sweep/sweep.hpp"
#include "sim/copy_lanes.hpp"
#include "sim/simulator.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <utility>
#include <vector>

namespace delta::planner::sweep {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Range add, point query over the live-memory curve.
class Fenwick {
 public:
  explicit Fenwick(std::size_t n) : tree_(n + 2, 0) {}
  void add(std::size_t from, std::size_t to_inclusive, std::int64_t delta) {
    add_at(from, delta);
    add_at(to_inclusive + 1, -delta);
  }
  std::int64_t at(std::size_t i) const {
    std::int64_t sum = 0;
    for (std::size_t k = i + 1; k > 0; k -= k & (~k + 1)) sum += tree_[k];
    return sum;
  }

 private:
  void add_at(std::size_t i, std::int64_t delta) {
    for (std::size_t k = i + 1; k < tree_.size(); k += k & (~k + 1)) tree_[k] += delta;
  }
  std::vector<std::int64_t> tree_;
};

struct Candidate {
  std::uint32_t block;
  std::uint32_t after;   // last use before the gap
  std::uint32_t before;  // next use (op count: end of step)
  bool taken = false;
  bool before_first_use = false;  // a state's gap from the step's start to its first use
};

struct Option {
  double cost = kInfinity;
  plan::Interval interval;
  std::uint32_t freed_first = 0, freed_last = 0;  // ops during which the bytes are free
  std::int64_t d2h_start = -1, d2h_length = 0, h2d_start = -1, h2d_length = 0;
  std::uint64_t temporary_bytes = 0;              // regeneration: siblings briefly allocated
  std::vector<std::uint32_t> pinned_inputs;       // regeneration: must be resident at the replay
  // A state swap refused because its copy out would still be running (StateSwaps::within_link):
  // the first op by which it would be done (0: not refused so).
  std::uint32_t ready_op = 0;
};

// The sweep (plan_with_sweep, sweep.hpp): walks the ops in order and, wherever the live bytes
// exceed the budget, frees the candidate with the least cost per byte and over-budget op
// covered. Its parts:
//   sweep.cpp             the walk, the candidates and their scores, and applying a choice;
//   sweep_evaluation.cpp  what freeing one candidate costs now, as a swap booked on the copy
//                         lanes or as a regeneration by a chain of replays, and which the
//                         policy takes.
// Members declared inline are on the hot path: each is defined, and called, in its one file
// alone, so that the compiler inlines it there.
class SweepPlanner {
 public:
  SweepPlanner(const PlanRequest& request, const DeltaOptions& options);
  plan::Plan run();

 private:
  // --- sweep.cpp ---
  bool take_seed(const plan::Plan& seed, std::vector<std::int64_t>& live);
  bool seeded(std::uint32_t block) const { return !seeded_.empty() && seeded_[block]; }
  void build_candidates();
  // Offers the held-back candidates whose gaps cover op i; false when there are none.
  template <typename Heap>
  bool release_held_back(std::size_t i, Heap& heap);
  inline double static_key(const Candidate& c) const;
  inline double score(const Candidate& c, const Option& option, std::size_t i) const;
  inline void apply(plan::Plan& plan, std::uint32_t c, const Option& option);

  // --- sweep_evaluation.cpp ---
  // The candidate's cheaper way to free it now, by the policy's rule (delta's: the cheaper).
  Option evaluate(const Candidate& c, std::size_t i) const;
  inline Option evaluate_swap(const Candidate& c, std::size_t i) const;
  // Rebuilds `block` before op `at`: its version chain (producer and in-place updates since),
  // preceded by the chains of whatever those ops read that is not resident then (up to
  // options_.max_chain ops in all). Appends to `chain` and collects the resident inputs that
  // must stay (`inputs`) and the blocks the replays write (`rebuilt`).
  bool build_chain(std::uint32_t block, std::uint32_t at, std::vector<std::uint64_t>& chain,
                   std::vector<std::uint32_t>& inputs, std::vector<std::uint32_t>& rebuilt) const;
  inline Option evaluate_regeneration(const Candidate& c, std::size_t) const;

  // --- shared by the parts ---
  std::int64_t start_of(std::size_t op) const { return op >= n_ ? index_.native_step_ns() : index_.native_start(op); }
  std::int64_t d2h_time(std::uint64_t bytes) const {
    return transfer_ns(bytes, request_.gpu.d2h_bytes_per_s, request_.gpu.launch_latency_ns);
  }
  std::int64_t h2d_time(std::uint64_t bytes) const {
    return transfer_ns(bytes, request_.gpu.h2d_bytes_per_s, request_.gpu.launch_latency_ns);
  }
  bool pinned_within(std::uint32_t block, std::uint32_t first, std::uint32_t last) const {
    const std::set<std::uint32_t>& pins = pins_[block];
    auto it = pins.lower_bound(first);
    return it != pins.end() && *it <= last;
  }
  bool freed_at(std::uint32_t block, std::uint32_t op) const {
    for (const auto& [first, last] : freed_[block])
      if (first <= op && op <= last) return true;
    return false;
  }

  const PlanRequest& request_;
  const DeltaOptions& options_;
  const TraceIndex& index_;
  const std::size_t n_;
  Fenwick memory_;
  std::vector<std::int64_t> over_prefix_;
  std::vector<Candidate> candidates_;
  std::vector<std::uint32_t> order_;
  // Candidates offered only where nothing else frees an op (release_held_back), by index;
  // kReleased once offered.
  static constexpr std::uint32_t kReleased = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> held_back_;
  std::vector<std::set<std::uint32_t>> pins_;
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> freed_;
  std::vector<std::int64_t> host_copy_until_;
  std::vector<std::uint32_t> discards_;
  std::vector<bool> seeded_;  // blocks the seed plan decides (DeltaOptions::seed); empty: none
  bool seed_runs_ = false;    // the seed runs in the simulator with no limit (take_seed)
  CopyLane d2h_, h2d_;
  std::vector<std::int64_t> starts_;
  // Within the link: state swaps whose copy back is late are offered at the op being fixed,
  // since nothing else could free it.
  bool late_state_swaps_ = false;
};

}  // namespace delta::planner::sweep
