#include "baselines/baselines.hpp"
#include "common/plan_edits.hpp"
#include "common/rebuild_inputs.hpp"
#include "delta/passes/evictions/eviction_exchange.hpp"
#include "delta/passes/evictions/interval_pruning.hpp"
#include "delta/passes/replays/replay_sharing.hpp"
#include "delta/passes/replays/revival_retention.hpp"
#include "delta/passes/replays/revival_trim.hpp"
#include "delta/passes/evictions/swap_refinement.hpp"
#include "delta/pipeline.hpp"
#include "delta/sweep/sweep.hpp"
#include "planner_fixtures.hpp"
#include "sim/simulator.hpp"
#include "hand_plans.hpp"
#include "tiny_traces.hpp"

#include <catch2/catch.hpp>

using namespace delta;
using namespace delta::planner;
using namespace delta::planner::testing;

namespace {

SimulationResult run(const trace::Trace& t, const plan::Plan& p, std::uint64_t budget) {
  TraceIndex index(t);
  SimulationOptions options;
  options.gpu = gpu_profile("titanv");
  options.budget_bytes = budget;
  return simulate(index, p, options);
}

// 1.2 GB at 12 GB/s plus the profile's 5 us launch latency.
constexpr std::int64_t kTransfer = 100 * kMs + 5'000;

}  // namespace

TEST_CASE("native replay: step time is the sum of op times, peak is X + Y") {
  trace::Trace t = swap_trace();
  SimulationResult r = run(t, plan_for(t, 0), 0);
  REQUIRE(r.feasible);
  CHECK(r.step_time_ns == 420 * kMs);
  CHECK(r.peak_bytes == kX + kY);
  CHECK(r.stall_ns == 0);
  CHECK(r.overhead() == Approx(1.0));
}

TEST_CASE("native replay over budget names the first op that does not fit") {
  trace::Trace t = swap_trace();
  SimulationResult r = run(t, plan_for(t, kX + kY / 2), kX + kY / 2);
  REQUIRE_FALSE(r.feasible);
  CHECK(r.first_bad_op == 2);
  CHECK_THAT(r.error, Catch::Contains("op 2 (produce_y)") && Catch::Contains("budget exceeded"));
}

TEST_CASE("a swap whose transfers fit in the gap is fully hidden and lowers the peak") {
  trace::Trace t = swap_trace();
  plan::Plan p = plan_for(t, kX + kY / 2);
  p.decisions.push_back({1, {swap(0, 3, 4)}});
  SimulationResult r = run(t, p, kX + kY / 2);
  REQUIRE(r.feasible);
  // The copy out ends at 110 ms, before op 2 (160 ms) allocates Y; the copy in runs from
  // 260 ms (op 3) to 360 ms, before op 4 starts at 410 ms.
  CHECK(r.step_time_ns == 420 * kMs);
  CHECK(r.stall_ns == 0);
  CHECK(r.peak_bytes == kX);
  CHECK(r.bytes_d2h == kX);
  CHECK(r.bytes_h2d == kX);
  CHECK(r.swaps == 1);
}

TEST_CASE("the timeline lists every copy on its lane, with its times") {
  trace::Trace t = swap_trace();
  TraceIndex index(t);
  plan::Plan p = plan_for(t, kX + kY / 2);
  p.decisions.push_back({1, {swap(0, 3, 4)}});
  SimulationOptions options;
  options.gpu = gpu_profile("titanv");
  options.budget_bytes = kX + kY / 2;
  SimulationResult quiet = simulate(index, p, options);
  CHECK(quiet.copies.empty());  // only when asked
  options.record_timeline = true;
  SimulationResult r = simulate(index, p, options);
  REQUIRE(r.feasible);
  REQUIRE(r.copies.size() == 2);
  CHECK(r.copies[0].to_host);
  CHECK(r.copies[0].start_ns == 10 * kMs);  // after op 0
  CHECK(r.copies[0].end_ns == 10 * kMs + kTransfer);
  CHECK(r.copies[0].block == 1);
  CHECK(r.copies[0].bytes == kX);
  CHECK_FALSE(r.copies[1].to_host);
  CHECK(r.copies[1].start_ns == 260 * kMs);  // issued at op 3
  CHECK(r.copies[1].end_ns == 260 * kMs + kTransfer);
}

TEST_CASE("a partial swap frees, moves and brings back only its bytes, and the rest stays") {
  trace::Trace t = swap_trace();
  TraceIndex index(t);
  const std::uint64_t budget = kX + kY / 2;  // X must give up 50 MB while Y is live
  const std::uint64_t part = 24 * plan::kSwapGranularity;  // 50.3 MB: enough
  SimulationOptions options;
  options.gpu = gpu_profile("titanv");
  options.budget_bytes = budget;
  options.record_timeline = true;
  plan::Plan p = plan_for(t, budget);
  plan::Interval s = swap(0, 4, 4);  // brought back at its use: the copy in is exposed
  s.bytes = part;
  p.decisions.push_back({1, {s}});
  SimulationResult r = simulate(index, p, options);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.peak_bytes == kX + kY - part);
  CHECK(r.bytes_d2h == part);
  CHECK(r.bytes_h2d == part);
  CHECK(r.swaps == 1);
  CHECK(r.partial_swaps == 1);
  CHECK(r.stall_ns == transfer_ns(part, options.gpu.h2d_bytes_per_s, options.gpu.launch_latency_ns));
  REQUIRE(r.copies.size() == 2);
  CHECK(r.copies[0].bytes == part);
  CHECK(r.copies[0].end_ns - r.copies[0].start_ns == transfer_ns(part, options.gpu.d2h_bytes_per_s, options.gpu.launch_latency_ns));
  // After the copy back X is whole again: at the end of the step it holds all its bytes.
  CHECK(r.timeline.back().held_bytes == kX);
  // A page less than Y needs is not enough, and the simulator names where.
  p.decisions[0].intervals[0].bytes = 23 * plan::kSwapGranularity;
  SimulationResult short_by = simulate(index, p, options);
  REQUIRE_FALSE(short_by.feasible);
  CHECK(short_by.first_bad_op == 2);
  CHECK_THAT(short_by.error, Catch::Contains("budget exceeded"));
  // A byte count the block does not have is refused.
  p.decisions[0].intervals[0].bytes = kX;
  SimulationResult whole = simulate(index, p, options);
  REQUIRE_FALSE(whole.feasible);
  CHECK_THAT(whole.error, Catch::Contains("swaps 1200000000 bytes of block 1, which has 1200000000"));
}

TEST_CASE("a replay that writes a partially swapped block keeps its part on the device, and only the part comes back") {
  // Op 0 writes X and Z. Z is rebuilt for op 3 by replaying op 0 while part of X is away:
  // X's kept part must survive that replay (its new output goes to scratch), and the copy
  // back moves only the part.
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX, 0, trace::kNever));
  t.blocks.push_back(block(3, kY, 0, trace::kNever));
  op(t, "produce_x_and_z", 10 * kMs, {{1, Access::write}, {3, Access::write}});
  op(t, "filler_a", 150 * kMs, {});
  op(t, "filler_b", 100 * kMs, {});
  op(t, "consume_z", 150 * kMs, {{3, Access::read}});
  op(t, "consume_x", 10 * kMs, {{1, Access::read}});
  TraceIndex index(t);
  const std::uint64_t part = 24 * plan::kSwapGranularity;
  plan::Plan p = plan_for(t, 0);
  plan::Interval x = swap(0, 4, 4);
  x.bytes = part;
  p.decisions.push_back({1, {x}});
  p.decisions.push_back({3, {regeneration(0, 3, {0})}});
  SimulationOptions options;
  options.gpu = gpu_profile("titanv");
  options.record_timeline = true;
  SimulationResult r = simulate(index, p, options);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.regenerations == 1);
  CHECK(r.bytes_h2d == part);
  CHECK(r.stall_ns == transfer_ns(part, options.gpu.h2d_bytes_per_s, options.gpu.launch_latency_ns));
  CHECK(r.timeline.back().held_bytes == kX + kY);
}

TEST_CASE("through the caching allocator, a partial swap's remainder is placed and the block is whole again when back") {
  trace::Trace t = swap_trace();
  TraceIndex index(t);
  SimulationOptions options;
  options.gpu = gpu_profile("titanv");
  options.through_allocator = true;
  options.record_timeline = true;
  options.budget_bytes = kX + kY / 2 + (8u << 20);  // the allocator rounds to pages
  plan::Plan p = plan_for(t, options.budget_bytes);
  plan::Interval s = swap(0, 3, 4);
  s.bytes = 40 * plan::kSwapGranularity;
  p.decisions.push_back({1, {s}});
  SimulationResult r = simulate(index, p, options);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.stall_ns == 0);
  CHECK(r.allocator_reserved_peak <= options.budget_bytes);
  CHECK(r.bytes_h2d == s.bytes);
  REQUIRE(r.timeline.size() == 5);
  CHECK(r.timeline[2].held_bytes == kX - *s.bytes + kY);  // while Y is live, part of X is away
  CHECK(r.timeline[4].held_bytes == kX);                   // back whole for its use
  CHECK(r.timeline[4].reserved_bytes >= kX);
  // Too small a part cannot make room for Y beside the rest of X.
  p.decisions[0].intervals[0].bytes = 8 * plan::kSwapGranularity;
  SimulationResult tight = simulate(index, p, options);
  REQUIRE_FALSE(tight.feasible);
  CHECK(tight.first_bad_op == 2);
}

TEST_CASE("under executor placement, a moved block keeps its pages apart and its address while away") {
  trace::Trace t = swap_trace();
  TraceIndex index(t);
  SimulationOptions options;
  options.gpu = gpu_profile("titanv");
  options.through_allocator = true;
  options.executor_placement = true;
  options.record_timeline = true;
  options.budget_bytes = kX + kY / 2 + (8u << 20);
  plan::Plan p = plan_for(t, options.budget_bytes);
  SECTION("a whole swap: X's pages unmapped while Y is live, mapped again for op 4") {
    p.decisions.push_back({1, {swap(0, 3, 4)}});
    SimulationResult r = simulate(index, p, options);
    INFO(r.error);
    REQUIRE(r.feasible);
    REQUIRE(r.timeline.size() == 5);
    CHECK(r.timeline[2].reserved_bytes < kX);  // X away: only Y (and pages the allocator keeps)
    CHECK(r.timeline[4].reserved_bytes >= kX);
    CHECK(r.allocator_reserved_peak <= options.budget_bytes);
  }
  SECTION("a partial swap: only its last whole pages leave") {
    plan::Interval s = swap(0, 3, 4);
    s.bytes = 40 * plan::kSwapGranularity;
    p.decisions.push_back({1, {s}});
    SimulationResult r = simulate(index, p, options);
    INFO(r.error);
    REQUIRE(r.feasible);
    CHECK(r.timeline[2].reserved_bytes >= kX - *s.bytes);
    CHECK(r.timeline[4].reserved_bytes >= kX);
    CHECK(r.allocator_reserved_peak <= options.budget_bytes);
  }
  SECTION("the pages of a moved block are whole: a small block takes a page of its own") {
    trace::Trace small = swap_trace();
    small.blocks[0].size = 1u << 20;  // X: 1 MiB
    TraceIndex small_index(small);
    SimulationOptions loose = options;
    loose.budget_bytes = 0;
    plan::Plan q = plan_for(small, 0);
    q.decisions.push_back({1, {swap(0, 3, 4)}});
    loose.executor_placement = false;
    const SimulationResult shared = simulate(small_index, q, loose);
    loose.executor_placement = true;
    const SimulationResult own = simulate(small_index, q, loose);
    REQUIRE(shared.feasible);
    REQUIRE(own.feasible);
    CHECK(own.allocator_reserved_peak >= shared.allocator_reserved_peak);
    CHECK(own.allocator_reserved_peak % (2u << 20) == 0);
  }
}

TEST_CASE("a prefetch issued at the use is exposed by exactly its transfer time") {
  trace::Trace t = swap_trace();
  plan::Plan p = plan_for(t, kX + kY / 2);
  p.decisions.push_back({1, {swap(0, 4, 4)}});
  SimulationResult r = run(t, p, kX + kY / 2);
  REQUIRE(r.feasible);
  CHECK(r.step_time_ns == 420 * kMs + kTransfer);
  CHECK(r.stall_ns == kTransfer);
}

// Two blocks A and B (120 MB each, 10 ms on the Titan V link) made by op 0 and swapped out
// after it; op 1 (100 ms) leaves time for both copies out; op 2 (1 ms) issues both copies back;
// op 3 reads A, op 4 (20 ms) nothing, op 5 reads B. The plan lists B first.
TEST_CASE("copies back issued at one op take the lane in the plan's order, or as their blocks are needed where it says so") {
  using trace::Access;
  trace::Trace t = titanv_trace();
  constexpr std::uint64_t k120 = 120'000'000;
  constexpr std::int64_t kCopy = 10 * kMs + 5'000;  // 120 MB at 12 GB/s, plus the launch latency
  t.blocks.push_back(block(1, k120, 0, trace::kNever));
  t.blocks.push_back(block(2, k120, 0, trace::kNever));
  op(t, "make", 10 * kMs, {{1, Access::write}, {2, Access::write}});
  op(t, "filler_a", 100 * kMs, {});
  op(t, "filler_b", 1 * kMs, {});
  op(t, "read_a", 1 * kMs, {{1, Access::read}});
  op(t, "filler_c", 20 * kMs, {});
  op(t, "read_b", 1 * kMs, {{2, Access::read}});
  plan::Plan p = plan_for(t, k120);
  p.decisions.push_back({2, {swap(0, 2, 5)}});
  p.decisions.push_back({1, {swap(0, 2, 3)}});
  TraceIndex index(t);
  SimulationOptions options;
  options.gpu = gpu_profile("titanv");
  options.budget_bytes = 2 * k120;
  options.record_timeline = true;
  const auto copies_back = [](const SimulationResult& r) {
    std::vector<CopyMoment> back;
    for (const CopyMoment& c : r.copies)
      if (!c.to_host) back.push_back(c);
    return back;
  };
  SECTION("by need, where the plan says so: A, needed first, goes first; op 3 waits for one copy") {
    p.predicted.copies_back_by_need = true;
    const SimulationResult r = simulate(index, p, options);
    REQUIRE(r.feasible);
    const std::vector<CopyMoment> back = copies_back(r);
    REQUIRE(back.size() == 2);
    CHECK(back[0].block == 1);
    CHECK(back[0].start_ns == 110 * kMs);
    CHECK(back[1].block == 2);
    CHECK(back[1].start_ns == 110 * kMs + kCopy);
    CHECK(r.stall_ns == kCopy - 1 * kMs);
    CHECK(r.step_time_ns == 133 * kMs + kCopy - 1 * kMs);
  }
  SECTION("else in the plan's order: B first, and op 3 waits for both") {
    const SimulationResult r = simulate(index, p, options);
    REQUIRE(r.feasible);
    const std::vector<CopyMoment> back = copies_back(r);
    REQUIRE(back.size() == 2);
    CHECK(back[0].block == 2);
    CHECK(back[1].block == 1);
    CHECK(r.stall_ns == 2 * kCopy - 1 * kMs);
  }
}

TEST_CASE("an eviction still in flight makes the next allocation wait for it") {
  trace::Trace t = swap_trace();
  t.ops[1].duration_ns = 50 * kMs;  // op 2 now starts at 60 ms; the copy out ends at 110 ms
  for (std::size_t i = 2; i < t.ops.size(); ++i) t.ops[i].start_ns -= 100 * kMs;
  t.blocks[1].alloc_ns = 60 * kMs;
  t.blocks[1].free_ns = 160 * kMs;
  plan::Plan p = plan_for(t, kX + kY / 2);
  p.decisions.push_back({1, {swap(0, 3, 4)}});
  SimulationResult r = run(t, p, kX + kY / 2);
  REQUIRE(r.feasible);
  const std::int64_t wait = 10 * kMs + kTransfer - 60 * kMs;  // op 2 waits until 110 ms + 5 us
  CHECK(r.stall_ns >= wait);
  CHECK(r.step_time_ns >= 320 * kMs + wait);
  CHECK(r.peak_bytes <= kX + kY / 2);
}

TEST_CASE("regeneration replays the producer before the use: extra compute, no transfer") {
  trace::Trace t = swap_trace();
  plan::Plan p = plan_for(t, kX + kY / 2);
  plan::Interval regen;
  regen.action = plan::Action::regenerate;
  regen.release_after = 0;
  regen.needed_by = 4;
  regen.replay = {0};
  p.decisions.push_back({1, {regen}});
  SimulationResult r = run(t, p, kX + kY / 2);
  REQUIRE(r.feasible);
  CHECK(r.step_time_ns == 430 * kMs);
  CHECK(r.extra_compute_ns == 10 * kMs);
  CHECK(r.peak_bytes == kX);
  CHECK(r.bytes_h2d == 0);
  CHECK(r.regenerations == 1);
}

TEST_CASE("the timeline shows each op's memory, its replays and its stalls, and stops where a plan fails") {
  trace::Trace t = swap_trace();
  TraceIndex index(t);
  SimulationOptions options;
  options.gpu = gpu_profile("titanv");
  options.budget_bytes = kX + kY / 2;
  options.record_timeline = true;
  SECTION("a regeneration") {
    plan::Plan p = plan_for(t, options.budget_bytes);
    plan::Interval regen;
    regen.action = plan::Action::regenerate;
    regen.release_after = 0;
    regen.needed_by = 4;
    regen.replay = {0};
    p.decisions.push_back({1, {regen}});
    SimulationResult r = simulate(index, p, options);
    REQUIRE(r.feasible);
    REQUIRE(r.timeline.size() == t.ops.size());
    std::int64_t replayed = 0, previous_end = 0;
    for (std::size_t i = 0; i < r.timeline.size(); ++i) {
      const OpMoment& m = r.timeline[i];
      CHECK(m.end_ns - m.start_ns == t.ops[i].duration_ns);
      CHECK(m.start_ns == previous_end + m.replay_ns + m.stall_ns);  // nothing else delays an op
      CHECK(m.held_bytes <= m.peak_bytes);
      CHECK(m.peak_bytes <= options.budget_bytes);
      previous_end = m.end_ns;
      replayed += m.replay_ns;
    }
    CHECK(r.timeline[4].replay_ns == 10 * kMs);  // op 0 replayed just before op 4 reads X again
    CHECK(replayed == r.extra_compute_ns);
    CHECK(r.timeline[1].held_bytes == 0);        // X released after op 0: nothing held at op 1
    CHECK(r.timeline[4].held_bytes == kX);       // X rebuilt, Y freed after op 3
    CHECK(r.timeline.back().end_ns == r.step_time_ns);
  }
  SECTION("an exposed prefetch") {
    plan::Plan p = plan_for(t, options.budget_bytes);
    p.decisions.push_back({1, {swap(0, 4, 4)}});
    SimulationResult r = simulate(index, p, options);
    REQUIRE(r.feasible);
    CHECK(r.timeline[4].stall_ns == kTransfer);
    CHECK(r.timeline[4].replay_ns == 0);
  }
  SECTION("no plan") {
    SimulationResult r = simulate(index, plan_for(t, options.budget_bytes), options);
    REQUIRE_FALSE(r.feasible);
    CHECK(r.timeline.size() == static_cast<std::size_t>(r.first_bad_op));  // the ops that ran
  }
  SECTION("not asked for") {
    options.record_timeline = false;
    CHECK(simulate(index, plan_for(t, 0), options).timeline.empty());
  }
}

TEST_CASE("a block updated in place is regenerated only with its in-place updates replayed") {
  trace::Trace t = in_place_trace();
  TraceIndex index(t);
  CHECK(index.version_chain(index.block_index(1), 4) == std::vector<std::uint32_t>{0, 1});
  CHECK(index.version_chain(index.block_index(1), 1) == std::vector<std::uint32_t>{0});
  CHECK(index.regenerable(index.block_index(1), 4));
  plan::Interval regen;
  regen.action = plan::Action::regenerate;
  regen.release_after = 1;
  regen.needed_by = 4;
  SECTION("the producer alone leaves the old version: refused") {
    regen.replay = {0};
    plan::Plan p = plan_for(t, 0);
    p.decisions.push_back({1, {regen}});
    SimulationResult r = run(t, p, 0);
    REQUIRE_FALSE(r.feasible);
    CHECK(r.first_bad_op == 4);
    CHECK_THAT(r.error, Catch::Contains("block 1") && Catch::Contains("after 1 writes") && Catch::Contains("after 2"));
  }
  SECTION("the update without its producer reads data that is gone: refused") {
    regen.replay = {1};
    plan::Plan p = plan_for(t, 0);
    p.decisions.push_back({1, {regen}});
    SimulationResult r = run(t, p, 0);
    REQUIRE_FALSE(r.feasible);
    CHECK_THAT(r.error, Catch::Contains("reads block 1") && Catch::Contains("not resident"));
  }
  SECTION("producer then update: both replayed, the block comes back as it was") {
    regen.replay = {0, 1};
    plan::Plan p = plan_for(t, kX + kY / 2);
    p.decisions.push_back({1, {regen}});
    SimulationResult r = run(t, p, kX + kY / 2);
    INFO(r.error);
    REQUIRE(r.feasible);
    CHECK(r.extra_compute_ns == 160 * kMs);
    CHECK(r.step_time_ns == 580 * kMs);
    CHECK(r.peak_bytes == kX);
  }
  SECTION("replaying an op that has not run yet is refused") {
    regen.replay = {0, 1, 4};
    plan::Plan p = plan_for(t, 0);
    p.decisions.push_back({1, {regen}});
    SimulationResult r = run(t, p, 0);
    REQUIRE_FALSE(r.feasible);
    CHECK_THAT(r.error, Catch::Contains("has not run yet"));
  }
}

TEST_CASE("a replay whose input was updated in place since is refused") {
  // op0 writes X from W; op1 updates W in place; X is rebuilt before op 4: op 0 would now
  // read the new W.
  trace::Trace t = swap_trace();
  t.blocks.push_back(block(3, kY, trace::kNever, trace::kNever));
  t.ops[0].blocks.push_back({3, trace::Access::read});
  t.ops[1].blocks = {{3, trace::Access::read}, {3, trace::Access::write}};
  TraceIndex index(t);
  CHECK_FALSE(index.regenerable(index.block_index(1), 4));
  CHECK(index.regenerable(index.block_index(1), 1));
  plan::Plan p = plan_for(t, 0);
  plan::Interval regen;
  regen.action = plan::Action::regenerate;
  regen.release_after = 0;
  regen.needed_by = 4;
  regen.replay = {0};
  p.decisions.push_back({1, {regen}});
  SimulationResult r = run(t, p, 0);
  REQUIRE_FALSE(r.feasible);
  CHECK_THAT(r.error, Catch::Contains("read block 3 as it was after 0 writes") && Catch::Contains("updated in place since"));
}

TEST_CASE("a discard frees a block between its last read and its free, and nothing may read it after") {
  // Y is written by op 2 and read by nobody, freed after op 3 in this variant: discarding it
  // after op 2 frees it during op 3.
  trace::Trace t = swap_trace();
  t.blocks[1].free_ns = 400 * kMs;  // held through op 3
  TraceIndex index(t);
  REQUIRE(index.block(index.block_index(2)).last == 3);
  plan::Interval discard;
  discard.action = plan::Action::discard;
  discard.release_after = 2;
  plan::Plan p = plan_for(t, kX + kY);
  p.decisions.push_back({2, {discard}});
  SimulationResult r = run(t, p, kX + kY);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.discards == 1);
  CHECK(r.step_time_ns == 420 * kMs);
  // X outlives the step: discarding it is refused.
  discard.release_after = 0;
  plan::Plan bad = plan_for(t, 0);
  bad.decisions.push_back({1, {discard}});
  SimulationResult refused = run(t, bad, 0);
  REQUIRE_FALSE(refused.feasible);
  CHECK_THAT(refused.error, Catch::Contains("must still be resident at the end of the step"));
  // Freed at the end of op 4 instead, X may not be discarded after op 0 either: op 4 reads it.
  t.blocks[0].free_ns = 425 * kMs;
  bad = plan_for(t, 0);
  bad.decisions.push_back({1, {discard}});
  refused = run(t, bad, 0);
  REQUIRE_FALSE(refused.feasible);
  CHECK(refused.first_bad_op == 4);
  CHECK_THAT(refused.error, Catch::Contains("uses block 1, which the plan discarded after op 0"));
}

TEST_CASE("a block used before it is back is rejected naming the op") {
  trace::Trace t = swap_trace(true);
  plan::Plan p = plan_for(t, 0);
  p.decisions.push_back({1, {swap(0, 4, 4)}});
  SimulationResult r = run(t, p, 0);
  REQUIRE_FALSE(r.feasible);
  CHECK(r.first_bad_op == 2);
  CHECK_THAT(r.error, Catch::Contains("uses block 1") && Catch::Contains("not resident"));
}

TEST_CASE("a swap whose prefetch lies outside its release and need, or whose need is past the step, is refused") {
  trace::Trace t = swap_trace();
  for (const plan::Interval& bad : {swap(1, 1, 4), swap(0, 5, 4), swap(0, 3, 99)}) {
    plan::Plan p = plan_for(t, 0);
    p.decisions.push_back({1, {bad}});
    SimulationResult r = run(t, p, 0);
    REQUIRE_FALSE(r.feasible);
    CHECK_THAT(r.error, Catch::Contains("block 1"));
  }
}

// swap_trace with X read again by op 1 (150 ms, ending at 160 ms): X's data is final after op
// 0, but it can only leave after op 1, just before op 2 allocates Y.
trace::Trace read_again_trace(std::int64_t op1_ms = 150) {
  trace::Trace t = swap_trace();
  t.ops[1].blocks = {{1, trace::Access::read}};
  const std::int64_t shift = (op1_ms - 150) * kMs;
  t.ops[1].duration_ns = op1_ms * kMs;
  for (std::size_t i = 2; i < t.ops.size(); ++i) t.ops[i].start_ns += shift;
  t.blocks[1].alloc_ns += shift;
  t.blocks[1].free_ns += shift;
  return t;
}

plan::Interval early_swap(std::uint64_t copy_after, std::uint64_t after, std::uint64_t prefetch, std::uint64_t needed) {
  plan::Interval i = swap(after, prefetch, needed);
  i.copy_after = copy_after;
  return i;
}

TEST_CASE("a swap's copy may start at the block's last write, while later ops still read it") {
  trace::Trace t = read_again_trace();
  const std::uint64_t budget = kX + kY / 2;
  plan::Plan late = plan_for(t, budget);
  late.decisions.push_back({1, {swap(1, 3, 4)}});
  SimulationResult waited = run(t, late, budget);
  REQUIRE(waited.feasible);
  CHECK(waited.stall_ns == kTransfer);  // op 2 waits for the whole copy, started at 160 ms
  plan::Plan early = plan_for(t, budget);
  early.decisions.push_back({1, {early_swap(0, 1, 3, 4)}});
  SimulationResult r = run(t, early, budget);
  REQUIRE(r.feasible);
  // The copy runs from 10 to 110 ms, beside op 1's read; X is freed after op 1 (160 ms).
  CHECK(r.stall_ns == 0);
  CHECK(r.step_time_ns == 420 * kMs);
  CHECK(r.peak_bytes == kX);
  CHECK(r.bytes_d2h == kX);
  CHECK(r.bytes_h2d == kX);
  CHECK(r.swaps == 1);
}

TEST_CASE("a block released before its copy to host completes is freed only when it does") {
  trace::Trace t = read_again_trace(50);  // released after op 1 at 60 ms; the copy ends at 110 ms
  const std::uint64_t budget = kX + kY / 2;
  const std::int64_t wait = 10 * kMs + kTransfer - 60 * kMs;
  SECTION("an early copy") {
    plan::Plan p = plan_for(t, budget);
    p.decisions.push_back({1, {early_swap(0, 1, 3, 4)}});
    SimulationResult r = run(t, p, budget);
    REQUIRE(r.feasible);
    CHECK(r.stall_ns == wait);
    CHECK(r.peak_bytes <= budget);
  }
  SECTION("a copy out cancelled by a prefetch, then released again") {
    // Released after op 0, prefetched at op 1 while the copy runs (the data never left), and
    // released again after op 1: the host copy is not complete yet.
    plan::Plan p = plan_for(t, budget);
    p.decisions.push_back({1, {swap(0, 1, 1), swap(1, 3, 4)}});
    SimulationResult r = run(t, p, budget);
    REQUIRE(r.feasible);
    CHECK(r.stall_ns == wait);
    CHECK(r.bytes_d2h == kX);  // one copy serves both releases
    CHECK(r.peak_bytes <= budget);
  }
}

TEST_CASE("an early copy of data written again before the release, or of a block not yet made, is refused") {
  trace::Trace t = read_again_trace();
  t.ops[1].blocks = {{1, trace::Access::read}, {1, trace::Access::write}};  // op 1 updates X in place
  plan::Plan p = plan_for(t, 0);
  p.decisions.push_back({1, {early_swap(0, 1, 3, 4)}});
  SimulationResult r = run(t, p, 0);
  REQUIRE_FALSE(r.feasible);
  CHECK(r.first_bad_op == 1);
  CHECK_THAT(r.error, Catch::Contains("writes block 1, whose copy to host started after op 0") && Catch::Contains("stale"));
  trace::Trace y = swap_trace();
  y.blocks[1].free_ns = trace::kNever;  // Y, made by op 2, is read again by op 4
  y.ops[4].blocks.push_back({2, trace::Access::read});
  plan::Plan q = plan_for(y, 0);
  q.decisions.push_back({2, {early_swap(1, 2, 3, 4)}});
  r = run(y, q, 0);
  REQUIRE_FALSE(r.feasible);
  CHECK_THAT(r.error, Catch::Contains("copies block 2 to host before it exists"));
}

TEST_CASE("the DELTA planner starts a swap's copy at the block's last write") {
  trace::Trace t = read_again_trace();
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, kX + kY / 2);
  plan::Plan p = plan_delta(request);
  SimulationResult r = run(t, p, request.budget_bytes);
  REQUIRE(r.feasible);
  CHECK(r.step_time_ns == 420 * kMs);  // regenerating X would cost 10 ms, a late copy 100 ms
  REQUIRE(p.decisions.size() == 1);
  REQUIRE(p.decisions[0].intervals.size() == 1);
  const plan::Interval& x = p.decisions[0].intervals[0];
  CHECK(x.action == plan::Action::swap);
  CHECK(x.release_after == 1);
  REQUIRE(x.copy_after.has_value());
  CHECK(*x.copy_after == 0);
}

TEST_CASE("the DELTA planner finds the hidden swap on the tiny trace") {
  trace::Trace t = swap_trace();
  TraceIndex index(t);
  PlanRequest request;
  request.index = &index;
  request.gpu = gpu_profile("titanv");
  request.budget_bytes = kX + kY / 2;
  plan::Plan p = plan_delta(request);
  SimulationResult r = run(t, p, request.budget_bytes);
  REQUIRE(r.feasible);
  CHECK(r.peak_bytes <= request.budget_bytes);
  CHECK(r.step_time_ns <= 430 * kMs);  // hidden swap (420) or regenerating X (430)
}

TEST_CASE("the DELTA planner issues its copies back by need, unless the plan's order runs faster") {
  trace::Trace t = swap_trace();
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, kX + kY / 2);
  plan::Plan p = plan_delta(request);
  REQUIRE(run(t, p, request.budget_bytes).feasible);
  CHECK(p.predicted.copies_back_by_need);  // one copy back: either order runs alike, and by need is the default
  plan::Plan in_plan_order = p;
  in_plan_order.predicted.copies_back_by_need = false;
  CHECK(run(t, in_plan_order, request.budget_bytes).step_time_ns >= run(t, p, request.budget_bytes).step_time_ns);
}

TEST_CASE("the DELTA planner swaps a block live before the step over the ops before its first use") {
  trace::Trace t = optimizer_state_trace();
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, kX + kY / 2);
  // The whole planner, and a baseline built on the same sweep.
  for (auto method : {plan_delta, plan_capuchin}) {
    plan::Plan p = method(request);
    SimulationResult r = run(t, p, request.budget_bytes);
    REQUIRE(r.feasible);
    CHECK(r.peak_bytes <= request.budget_bytes);
    CHECK(r.step_time_ns == 420 * kMs);  // the copies hide behind ops 1 to 3
    REQUIRE(p.decisions.size() == 1);
    CHECK(p.decisions[0].block == 1);
    REQUIRE(p.decisions[0].intervals.size() == 1);
    const plan::Interval& s = p.decisions[0].intervals[0];
    CHECK(s.action == plan::Action::swap);
    CHECK(s.release_after == 0);
    CHECK(s.needed_by == 4);
  }
}

TEST_CASE("the sweep leaves a state's gap before its first use alone when told to") {
  // The portfolio's second chance plans without these swaps (they can fill the link that
  // activations need); on this trace the state's swap is the only way under the budget.
  trace::Trace t = optimizer_state_trace();
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, kX + kY / 2);
  DeltaOptions options;
  options.discard_dead = true;
  options.state_swaps = StateSwaps::none;
  plan::Plan without = plan_with_sweep(request, options);
  for (const plan::BlockDecision& d : without.decisions)
    for (const plan::Interval& x : d.intervals) CHECK_FALSE((d.block == 1 && x.release_after == 0 && x.needed_by == 4));
  CHECK_FALSE(run(t, without, request.budget_bytes).feasible);
  options.state_swaps = StateSwaps::any;
  plan::Plan with = plan_with_sweep(request, options);
  const SimulationResult r = run(t, with, request.budget_bytes);
  CHECK(r.feasible);
  CHECK(r.step_time_ns == 420 * kMs);
}

TEST_CASE("the sweep swaps a state within the link only where its copy out is done by the op that needs the room") {
  // optimizer_state_trace: S's copy out runs from op 0's end (10 ms) to 110 ms, op 2 needs the
  // room from 160 ms: done in time, so within the link the swap is taken as before.
  {
    trace::Trace t = optimizer_state_trace();
    TraceIndex index(t);
    const PlanRequest request = titanv_request(index, kX + kY / 2);
    DeltaOptions options;
    options.discard_dead = true;
    options.state_swaps = StateSwaps::within_link;
    plan::Plan p = plan_with_sweep(request, options);
    const SimulationResult r = run(t, p, request.budget_bytes);
    CHECK(r.feasible);
    CHECK(r.step_time_ns == 420 * kMs);
  }
  // The same with filler_a cut to 20 ms: op 2 starts at 30 ms, 80 ms before the copy out is
  // done. Any state swap takes it and waits; within the link it is left alone (nothing else
  // frees op 2, so that plan is over the budget).
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX, trace::kNever, trace::kNever, trace::Category::optimizer_state));
  t.blocks.push_back(block(2, kY, 30 * kMs, 130 * kMs));
  op(t, "forward", 10 * kMs, {});
  op(t, "filler_a", 20 * kMs, {});
  op(t, "produce_y", 100 * kMs, {{2, Access::write}});
  op(t, "filler_b", 150 * kMs, {});
  op(t, "optimizer_step", 10 * kMs, {{1, Access::read}, {1, Access::write}});
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, kX + kY / 2);
  DeltaOptions options;
  options.discard_dead = true;
  options.state_swaps = StateSwaps::any;
  plan::Plan any = plan_with_sweep(request, options);
  const SimulationResult waited = run(t, any, request.budget_bytes);
  CHECK(waited.feasible);
  CHECK(waited.step_time_ns > index.native_step_ns());  // op 2 waits for the copy out
  options.state_swaps = StateSwaps::within_link;
  plan::Plan within = plan_with_sweep(request, options);
  for (const plan::BlockDecision& d : within.decisions)
    for (const plan::Interval& x : d.intervals) CHECK_FALSE((d.block == 1 && x.release_after == 0));
  CHECK_FALSE(run(t, within, request.budget_bytes).feasible);
}

TEST_CASE("within the link, the sweep takes a state swap whose copy back is late only where nothing else frees the op") {
  // State S (kX: 100 ms each way) is first used by the optimizer at op 5; op 2 needs kY / 2
  // of room. S's copy back can start only after op 2 and has 21 ms of ops before op 5: 79 ms
  // late. A (kY), read at op 3 right after op 2, is late by its whole copy (8.3 ms) or rebuilt
  // (10 ms). Per byte and op covered S ranks first, so any state swap takes it; within the
  // link A goes instead.
  using trace::Access;
  auto state_trace = [](bool with_a) {
    trace::Trace t = titanv_trace();
    t.blocks.push_back(block(1, kX, trace::kNever, trace::kNever, trace::Category::optimizer_state));
    t.blocks.push_back(block(2, kY, 160 * kMs, 260 * kMs));
    if (with_a) t.blocks.push_back(block(3, kY, 0, 261 * kMs));
    op(t, "make_a", 10 * kMs, with_a ? std::vector<std::pair<std::uint64_t, Access>>{{3, Access::write}} : std::vector<std::pair<std::uint64_t, Access>>{});
    op(t, "filler_a", 150 * kMs, {});
    op(t, "produce_y", 100 * kMs, {{2, Access::write}});
    op(t, "read_a", 1 * kMs, with_a ? std::vector<std::pair<std::uint64_t, Access>>{{3, Access::read}} : std::vector<std::pair<std::uint64_t, Access>>{});
    op(t, "filler_b", 20 * kMs, {});
    op(t, "optimizer_step", 10 * kMs, {{1, Access::read}, {1, Access::write}});
    return t;
  };
  auto swaps_state = [](const plan::Plan& p) {
    for (const plan::BlockDecision& d : p.decisions)
      for (const plan::Interval& x : d.intervals)
        if (d.block == 1 && x.action == plan::Action::swap && x.release_after == 0) return true;
    return false;
  };
  DeltaOptions options;
  options.discard_dead = true;
  {
    const trace::Trace t = state_trace(true);
    TraceIndex index(t);
    const PlanRequest request = titanv_request(index, kX + kY + kY / 2);
    options.state_swaps = StateSwaps::any;
    const plan::Plan any = plan_with_sweep(request, options);
    CHECK(swaps_state(any));
    const SimulationResult late = run(t, any, request.budget_bytes);
    REQUIRE(late.feasible);
    options.state_swaps = StateSwaps::within_link;
    const plan::Plan within = plan_with_sweep(request, options);
    CHECK_FALSE(swaps_state(within));
    const SimulationResult r = run(t, within, request.budget_bytes);
    REQUIRE(r.feasible);
    CHECK(r.step_time_ns <= index.native_step_ns() + 11 * kMs);  // A's late copy or its rebuild
    CHECK(late.step_time_ns >= index.native_step_ns() + 70 * kMs);  // S's late copy back
  }
  // Without A nothing else frees op 2: within the link the late state swap is still taken,
  // and the plan holds the budget.
  const trace::Trace t = state_trace(false);
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, kX + kY / 2);
  options.state_swaps = StateSwaps::within_link;
  const plan::Plan within = plan_with_sweep(request, options);
  CHECK(swaps_state(within));
  const SimulationResult r = run(t, within, request.budget_bytes);
  REQUIRE(r.feasible);
  CHECK(r.peak_bytes <= request.budget_bytes);
}

TEST_CASE("with parameters kept resident, the sweep swaps one only where nothing else frees the op") {
  // Parameter P (kX) is read by the forward at op 0 and the backward at op 4; activation A
  // (kY), made at op 0, is read at op 3; op 2 makes Y. Where A's room is enough, P stays;
  // where it is not, P goes too (before, the sweep stopped there and its plan did not fit).
  using trace::Access;
  auto parameter_trace = [](std::uint64_t y) {
    trace::Trace t = titanv_trace();
    t.blocks.push_back(block(1, kX, trace::kNever, trace::kNever, trace::Category::parameter));
    t.blocks.push_back(block(2, kY, 0, 261 * kMs));
    t.blocks.push_back(block(3, y, 160 * kMs, 260 * kMs));
    op(t, "forward", 10 * kMs, {{1, Access::read}, {2, Access::write}});
    op(t, "filler", 150 * kMs, {});
    op(t, "produce_y", 100 * kMs, {{3, Access::write}});
    op(t, "read_a", 1 * kMs, {{2, Access::read}});
    op(t, "backward", 10 * kMs, {{1, Access::read}});
    return t;
  };
  auto moves_parameter = [](const plan::Plan& p) {
    return std::any_of(p.decisions.begin(), p.decisions.end(), [](const plan::BlockDecision& d) { return d.block == 1 && !d.intervals.empty(); });
  };
  DeltaOptions options;
  options.discard_dead = true;
  // The sweep's plan with parameters kept resident, `moves` as the case expects, run within
  // the budget.
  auto plan_keeping_parameters = [&](const trace::Trace& t, PlanRequest request, bool moves) {
    request.move_parameters = false;
    const plan::Plan p = plan_with_sweep(request, options);
    CHECK(moves_parameter(p) == moves);
    const SimulationResult r = run(t, p, request.budget_bytes);
    REQUIRE(r.feasible);
    CHECK(r.peak_bytes <= request.budget_bytes);
  };
  {
    const trace::Trace t = parameter_trace(kY);
    TraceIndex index(t);
    plan_keeping_parameters(t, titanv_request(index, kX + kY + kY / 2), false);
  }
  const trace::Trace t = parameter_trace(2 * kY);
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, kX + kY);
  plan_keeping_parameters(t, request, true);
  // Moving parameters freely finds the same room.
  const SimulationResult free = run(t, plan_with_sweep(request, options), request.budget_bytes);
  REQUIRE(free.feasible);
}

TEST_CASE("the sweep looks past candidates whose gaps have ended to the one that frees the op") {
  // Op 6 allocates T and is the only op over the budget. Eight R blocks idle across it rank
  // first but cannot be rebuilt (their producer read Q, changed since); 600 small S blocks
  // rank next, but their gaps ended at op 4; G, rebuilt by replaying op 5, ranks last and
  // frees the op. The sweep used to count the S blocks among the 512 it looks at beyond the
  // first few, and stopped before reaching G: its plan did not fit.
  using trace::Access;
  constexpr std::uint64_t kMB = 1'000'000;
  constexpr std::int64_t kUs = 1'000;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kMB, trace::kNever, trace::kNever));  // Q
  t.blocks.push_back(block(2, kMB, trace::kNever, trace::kNever));  // P, G's input
  t.blocks.push_back(block(3, kMB, 5 * kUs, trace::kNever));        // G
  t.blocks.push_back(block(4, kMB, 5 * kUs + 10 * kMs, 6 * kUs + 10 * kMs));  // T
  std::vector<std::pair<std::uint64_t, Access>> make_r{{1, Access::read}}, read_at_end{{3, Access::read}}, make_s, read_s;
  for (std::uint64_t r = 10; r < 18; ++r) {
    t.blocks.push_back(block(r, kMB, 0, trace::kNever));
    make_r.push_back({r, Access::write});
    read_at_end.push_back({r, Access::read});
  }
  for (std::uint64_t s = 100; s < 700; ++s) {
    t.blocks.push_back(block(s, 1'000, 2 * kUs, 5 * kUs));
    make_s.push_back({s, Access::write});
    read_s.push_back({s, Access::read});
  }
  op(t, "make_r", kUs, make_r);
  op(t, "mutate_q", kUs, {{1, Access::write}});
  op(t, "make_s", kUs, make_s);
  op(t, "idle", kUs, {});
  op(t, "read_s", kUs, read_s);
  op(t, "make_g", 10 * kMs, {{2, Access::read}, {3, Access::write}});
  op(t, "peak", kUs, {{4, Access::write}});
  op(t, "end", kUs, read_at_end);
  TraceIndex index(t);
  REQUIRE(index.native_peak() == 12 * kMB);
  const PlanRequest request = titanv_request(index, 11 * kMB + kMB / 2);
  DeltaOptions options;
  options.discard_dead = true;
  options.allow_swap = false;
  const plan::Plan p = plan_with_sweep(request, options);
  const SimulationResult r = run(t, p, request.budget_bytes);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.peak_bytes <= request.budget_bytes);
  REQUIRE(p.decisions.size() == 1);
  CHECK(p.decisions.front().block == 3);
  CHECK(p.decisions.front().intervals.front().action == plan::Action::regenerate);
}

TEST_CASE("through the caching allocator, the plan is judged with its rounding") {
  trace::Trace t = swap_trace();
  TraceIndex index(t);
  SimulationOptions options;
  options.gpu = gpu_profile("titanv");
  options.through_allocator = true;
  // The live bytes fit exactly, but the allocator's blocks are rounded up to pages and its cap
  // is the budget rounded down to whole pages: no room.
  options.budget_bytes = kX + kY;
  SimulationResult tight = simulate(index, plan_for(t, options.budget_bytes), options);
  REQUIRE_FALSE(tight.feasible);
  CHECK(tight.first_bad_op == 2);
  CHECK_THAT(tight.error, Catch::Contains("caching allocator"));
  // A few pages more and it fits, reserving more than the live peak but never past the budget.
  options.budget_bytes = kX + kY + (8u << 20);
  SimulationResult r = simulate(index, plan_for(t, options.budget_bytes), options);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.allocator_reserved_peak >= kX + kY);
  CHECK(r.allocator_reserved_peak <= options.budget_bytes);
}

TEST_CASE("through the caching allocator, an allocation it cannot place waits for an eviction in flight") {
  // As in the in-flight test above, op 2 allocates Y while X is still being copied out. In live
  // bytes X + Y fit the budget exactly, so nothing waits; the allocator, whose cap is rounded
  // down to whole pages, cannot place Y beside X until X's copy completes and frees it.
  trace::Trace t = swap_trace();
  t.ops[1].duration_ns = 50 * kMs;
  for (std::size_t i = 2; i < t.ops.size(); ++i) t.ops[i].start_ns -= 100 * kMs;
  t.blocks[1].alloc_ns = 60 * kMs;
  t.blocks[1].free_ns = 160 * kMs;
  TraceIndex index(t);
  SimulationOptions options;
  options.gpu = gpu_profile("titanv");
  options.budget_bytes = kX + kY;
  plan::Plan p = plan_for(t, options.budget_bytes);
  p.decisions.push_back({1, {swap(0, 3, 4)}});
  SimulationResult live = simulate(index, p, options);
  REQUIRE(live.feasible);
  CHECK(live.stall_ns == 0);
  options.through_allocator = true;
  SimulationResult placed = simulate(index, p, options);
  INFO(placed.error);
  REQUIRE(placed.feasible);
  const std::int64_t wait = 10 * kMs + kTransfer - 60 * kMs;  // until X's copy out completes
  CHECK(placed.stall_ns >= wait);
  CHECK(placed.step_time_ns >= live.step_time_ns + wait);
  CHECK(placed.allocator_reserved_peak <= options.budget_bytes);
}

TEST_CASE("a replay frees its temporaries after their last read in the sequence") {
  // op0 makes A from parameter W, op1 makes B from A, op2 makes C from B (A and B freed by the
  // program), op3 allocates D, op4 reads C. Rebuilding C before op 4 replays 0, 1, 2: A and B
  // are never needed together with C, so the replay peaks at two blocks, not three.
  using trace::Access;
  constexpr std::uint64_t kMb = 1'000'000;
  trace::Trace t = titanv_trace_with_weights();
  t.blocks.push_back(block(2, 100 * kMb, 0, 15 * kMs));
  t.blocks.push_back(block(3, 100 * kMb, 10 * kMs, 25 * kMs));
  t.blocks.push_back(block(4, 100 * kMb, 20 * kMs, trace::kNever));
  t.blocks.push_back(block(5, 250 * kMb, 30 * kMs, 35 * kMs));
  op(t, "make_a", 10 * kMs, {{1, Access::read}, {2, Access::write}});
  op(t, "make_b", 10 * kMs, {{2, Access::read}, {3, Access::write}});
  op(t, "make_c", 10 * kMs, {{3, Access::read}, {4, Access::write}});
  op(t, "make_d", 10 * kMs, {{5, Access::write}});
  op(t, "use_c", 10 * kMs, {{4, Access::read}});
  const std::uint64_t budget = kMb + 250 * kMb;  // C + D do not fit; A + B + C would not either
  plan::Plan p = plan_for(t, budget);
  plan::Interval regen;
  regen.action = plan::Action::regenerate;
  regen.release_after = 2;
  regen.needed_by = 4;
  regen.replay = {0, 1, 2};
  p.decisions.push_back({4, {regen}});
  SimulationResult r = run(t, p, budget);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.peak_bytes == budget);  // op 3: W + D
  CHECK(r.extra_compute_ns == 30 * kMs);
  CHECK(r.regenerations == 1);
}

TEST_CASE("the regenerations due at one op run in dependency order, each op once") {
  plan::Interval later, earlier;
  later.replay = {3, 5};
  earlier.replay = {1, 3};
  CHECK(replay_order({&later, &earlier}) == std::vector<std::uint64_t>{1, 3, 5});
}

TEST_CASE("replays ordered again with the same buffers come out as ordered afresh") {
  // The simulator keeps one ReplayOrder per replay: what one op's replays marked as seen must
  // not hide an op from the next op's, nor its order leak into them.
  plan::Interval a, b, c, d;
  a.replay = {3, 5};
  b.replay = {1, 3};
  c.replay = {5, 9, 7};
  d.replay = {2};
  ReplayOrder order;
  const std::vector<std::vector<const plan::Interval*>> calls = {{&a, &b}, {&c, &a}, {&d}, {&b, &c, &d}, {}, {&a, &b}};
  for (const auto& intervals : calls) {
    order.compute(intervals);
    const std::vector<std::uint64_t> reused(order.sequence().begin(), order.sequence().end());
    CHECK(reused == replay_order(intervals));
  }
  order.compute(calls[1]);
  CHECK(std::vector<std::uint64_t>(order.sequence().begin(), order.sequence().end()) == std::vector<std::uint64_t>{3, 5, 9, 7});
}

TEST_CASE("swap refinement turns an expensive regeneration into a swap when that is faster") {
  trace::Trace t = in_place_trace();
  TraceIndex index(t);
  PlanRequest request;
  request.index = &index;
  request.gpu = gpu_profile("titanv");
  request.budget_bytes = kX + kY / 2;
  plan::Plan p = empty_plan(request, "test");
  plan::Interval regen;
  regen.action = plan::Action::regenerate;
  regen.release_after = 1;
  regen.needed_by = 4;
  regen.replay = {0, 1};
  p.decisions.push_back({1, {regen}});
  SimulationResult before = judge(request, p);
  REQUIRE(before.feasible);
  REQUIRE(before.step_time_ns == 580 * kMs);
  SimulationResult after = before;
  plan::Plan refined = refine_with_swaps(request, p, after);
  INFO(after.error);
  REQUIRE(after.feasible);
  CHECK(after.step_time_ns < before.step_time_ns);
  CHECK(after.regenerations == 0);
  CHECK(after.swaps == 1);
  REQUIRE(refined.decisions.size() == 1);
  CHECK(refined.decisions[0].intervals[0].action == plan::Action::swap);
  CHECK(refined.decisions[0].intervals[0].release_after == 1);
  CHECK(after.peak_bytes <= request.budget_bytes);
}

TEST_CASE("interval pruning drops the evictions a plan does not need and keeps the rest") {
  trace::Trace t = swap_trace();
  TraceIndex index(t);
  PlanRequest request;
  request.index = &index;
  request.gpu = gpu_profile("titanv");
  plan::Plan p = empty_plan(request, "test");
  plan::Interval swap;
  swap.action = plan::Action::swap;
  swap.release_after = 0;
  swap.prefetch_at = 3;
  swap.needed_by = 4;
  p.decisions.push_back({1, {swap}});
  SECTION("X fits beside Y: its swap goes") {
    request.budget_bytes = kX + kY;
    SimulationResult judged = judge(request, p);
    REQUIRE(judged.feasible);
    REQUIRE(judged.swaps == 1);
    plan::Plan pruned = prune_intervals(request, p, judged);
    CHECK(pruned.decisions.empty());
    CHECK(judged.feasible);
    CHECK(judged.swaps == 0);
    CHECK(judged.bytes_d2h == 0);
    CHECK(judged.step_time_ns == index.native_step_ns());
  }
  SECTION("X must leave for Y: its swap stays") {
    request.budget_bytes = kX + kY / 2;
    SimulationResult judged = judge(request, p);
    REQUIRE(judged.feasible);
    plan::Plan pruned = prune_intervals(request, p, judged);
    REQUIRE(pruned.decisions.size() == 1);
    CHECK(pruned.decisions[0].intervals.size() == 1);
    CHECK(judged.feasible);
    CHECK(judged.swaps == 1);
  }
}

TEST_CASE("eviction exchange trades an expensive regeneration for a cheaper block's") {
  // A (50 ms to produce) and B (5 ms) are both idle across op 2, where C arrives; one of them
  // must go. The copies take 100 ms each way and the gap holds 15 ms, so no swap hides.
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX, 0, trace::kNever));
  t.blocks.push_back(block(2, kX, 50 * kMs, trace::kNever));
  t.blocks.push_back(block(3, kX, 55 * kMs, 60 * kMs));
  op(t, "produce_a", 50 * kMs, {{1, Access::write}});
  op(t, "produce_b", 5 * kMs, {{2, Access::write}});
  op(t, "produce_c", 5 * kMs, {{3, Access::write}});
  op(t, "filler", 5 * kMs, {});
  op(t, "consume", 5 * kMs, {{1, Access::read}, {2, Access::read}});
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, 2 * kX);
  plan::Plan p = plan_for(t, request.budget_bytes);
  add_interval(p, index, index.block_index(1), regeneration_interval(index, index.block_index(1), 0, 4));
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  REQUIRE(judged.extra_compute_ns == 50 * kMs);
  p = exchange_regenerations(request, std::move(p), judged);
  REQUIRE(judged.feasible);
  CHECK(judged.extra_compute_ns == 5 * kMs);
  REQUIRE(p.decisions.size() == 1);
  CHECK(p.decisions[0].block == 2);
  CHECK(p.decisions[0].intervals.at(0).action == plan::Action::regenerate);
}

TEST_CASE("a deep eviction exchange trades one regeneration for many small swaps") {
  // A (50 ms to produce) is read at op 8, just before C arrives at op 9, and again at the end:
  // no copy of A started at op 8 fits between, so to leave room for C it is regenerated (50 ms). Six small
  // blocks S1..S6 (a sixth of A each, 20 ms to produce) sit idle from their making to the end,
  // with 300 ms of compute on each side of op 9 where their copies hide. Swapping all six frees
  // as much as A at no cost; three are not enough.
  using trace::Access;
  trace::Trace t = titanv_trace();
  constexpr std::uint64_t kSmall = kX / 6;
  t.blocks.push_back(block(1, kX, 0, trace::kNever));
  for (std::uint64_t k = 0; k < 6; ++k) t.blocks.push_back(block(10 + k, kSmall, 50 * kMs + std::int64_t(k) * 20 * kMs, trace::kNever));
  constexpr std::int64_t kCAt = 50 * kMs + 6 * 20 * kMs + 300 * kMs + 5 * kMs;
  t.blocks.push_back(block(2, kX, kCAt, kCAt + 5 * kMs));
  op(t, "produce_a", 50 * kMs, {{1, Access::write}});
  for (std::uint64_t k = 0; k < 6; ++k) op(t, "produce_s" + std::to_string(k + 1), 20 * kMs, {{10 + k, Access::write}});
  op(t, "filler_a", 300 * kMs, {});
  op(t, "use_a", 5 * kMs, {{1, Access::read}});
  op(t, "produce_c", 5 * kMs, {{2, Access::write}});
  op(t, "filler_b", 300 * kMs, {});
  op(t, "consume", 5 * kMs, {{1, Access::read}, {10, Access::read}, {11, Access::read}, {12, Access::read},
                             {13, Access::read}, {14, Access::read}, {15, Access::read}});
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, 2 * kX);
  plan::Plan p = plan_for(t, request.budget_bytes);
  add_interval(p, index, index.block_index(1), regeneration_interval(index, index.block_index(1), 8, 11));
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  REQUIRE(judged.extra_compute_ns == 50 * kMs);

  // Copied from its last write (op 0), A itself travels in the 300 ms before op 9.
  EvictionExchangeOptions early;
  SimulationResult early_judged = judged;
  const plan::Plan swapped = exchange_regenerations(request, p, early_judged, early);
  CHECK(swapped.decisions.size() == 1);
  CHECK(early_judged.extra_compute_ns == 0);
  CHECK(early_judged.swaps == 1);
  CHECK(early_judged.stall_ns == 0);

  // Copied from its release (op 8) it cannot: the rest compares depths.
  EvictionExchangeOptions shallow;  // 3 evictions at most in place of one
  shallow.early_copies = false;
  SimulationResult shallow_judged = judged;
  const plan::Plan kept = exchange_regenerations(request, p, shallow_judged, shallow);
  CHECK(shallow_judged.extra_compute_ns == 50 * kMs);
  CHECK(kept.decisions.size() == 1);

  EvictionExchangeOptions deep;
  deep.early_copies = false;
  deep.max_added = 16;
  deep.max_simulations = 100;
  p = exchange_regenerations(request, std::move(p), judged, deep);
  REQUIRE(judged.feasible);
  CHECK(judged.extra_compute_ns == 0);
  CHECK(judged.stall_ns == 0);
  CHECK(judged.swaps == 6);
  CHECK(judged.regenerations == 0);
  CHECK(judged.step_time_ns == index.native_step_ns());
}

TEST_CASE("stall relief trades a wait for a copy out for a hidden swap of an idle parameter") {
  // read_again_trace plus a parameter P (the size of Y) read by ops 0 and 4. Under X + Y, X's
  // swap copied at its release (after op 1) makes op 2 wait for the whole copy; P, idle
  // across op 2, can travel out right after op 0, where the copy lane is idle, and back
  // before op 4.
  trace::Trace t = read_again_trace();
  t.blocks.push_back(block(3, kY, trace::kNever, trace::kNever, trace::Category::parameter));
  t.ops[0].blocks.push_back({3, trace::Access::read});
  t.ops[4].blocks.push_back({3, trace::Access::read});
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, kX + kY);
  plan::Plan p = plan_for(t, request.budget_bytes);
  p.decisions.push_back({1, {swap(1, 3, 4)}});
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  REQUIRE(judged.stall_ns >= kTransfer - 5'000);  // op 2 waits for X's copy
  p = relieve_stalls(request, std::move(p), judged);
  REQUIRE(judged.feasible);
  CHECK(judged.stall_ns == 0);
  CHECK(judged.step_time_ns == index.native_step_ns());
  CHECK(judged.extra_compute_ns == 0);
  CHECK(judged.swaps == 2);
  CHECK(judged.peak_bytes <= request.budget_bytes);
}

TEST_CASE("through the caching allocator, a replay's scratch output is allocated too") {
  // op0 makes A and B from parameter W; op1 allocates a small C (freed after it); op2 reads A
  // and B. A is dropped over op 1 and rebuilt by replaying op 0, which writes B again: B is
  // resident, so that output goes to scratch, and the allocator must see it (without it the
  // allocator would never hold more than W, A, B and C).
  using trace::Access;
  constexpr std::uint64_t kMb = 1'000'000;
  trace::Trace t = titanv_trace_with_weights();
  t.blocks.push_back(block(2, 100 * kMb, 0, 25 * kMs));
  t.blocks.push_back(block(3, 100 * kMb, 0, 25 * kMs));
  t.blocks.push_back(block(4, 10 * kMb, 10 * kMs, 15 * kMs));
  op(t, "make_ab", 10 * kMs, {{1, Access::read}, {2, Access::write}, {3, Access::write}});
  op(t, "make_c", 10 * kMs, {{4, Access::write}});
  op(t, "use_ab", 10 * kMs, {{2, Access::read}, {3, Access::read}});
  TraceIndex index(t);
  plan::Plan p = plan_for(t, 0);
  plan::Interval regen;
  regen.action = plan::Action::regenerate;
  regen.release_after = 0;
  regen.needed_by = 2;
  regen.replay = {0};
  p.decisions.push_back({2, {regen}});
  SimulationOptions options;
  options.gpu = gpu_profile("titanv");
  options.through_allocator = true;
  SimulationResult r = simulate(index, p, options);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.peak_bytes == kMb + 300 * kMb);  // op 2's replay: W, B, A and B's scratch
  CHECK(r.allocator_reserved_peak >= kMb + 300 * kMb);
}

TEST_CASE("a revived input is rebuilt once and read by later replays") {
  constexpr std::uint64_t kMb = 1'000'000;
  const trace::Trace t = concat_trace();
  const std::uint64_t budget = 230 * kMb;  // W + D + F fit over op 3; C1 and C2 must go
  // Both concatenations rebuilt with F as a temporary: make_f runs twice.
  plan::Plan twice = plan_for(t, budget);
  twice.decisions.push_back({3, {regeneration(1, 5, {0, 1})}});
  twice.decisions.push_back({4, {regeneration(2, 4, {0, 2})}});
  SimulationResult r = run(t, twice, budget);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.extra_compute_ns == 22 * kMs);
  // F revived before op 4 and kept through op 5: make_f runs once.
  plan::Plan once = plan_for(t, budget);
  once.decisions.push_back({2, {revival(2, 4, 5, {0})}});
  once.decisions.push_back({3, {regeneration(1, 5, {1}, {2})}});
  once.decisions.push_back({4, {regeneration(2, 4, {2}, {2})}});
  r = run(t, once, budget);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.extra_compute_ns == 12 * kMs);
  CHECK(r.regenerations == 2);
  CHECK(r.revivals == 1);
  CHECK(r.peak_bytes == kMb + 200 * kMb);  // op 3: W + D; F, C1 and C2 (111 MB) at most later
  // Freed after op 4 instead, F is gone when C1's replay reads it.
  once.decisions[0].intervals[0].until = 4;
  r = run(t, once, budget);
  REQUIRE_FALSE(r.feasible);
  CHECK_THAT(r.error, Catch::Contains("op 5 (use_c1)") && Catch::Contains("reads block 2 that is not resident"));
}

TEST_CASE("a revival before the program frees the block, or past the step, is refused") {
  constexpr std::uint64_t kMb = 1'000'000;
  const trace::Trace t = concat_trace();
  plan::Plan p = plan_for(t, 0);
  p.decisions.push_back({2, {revival(2, 2, 3, {0})}});
  SimulationResult r = run(t, p, 0);
  REQUIRE_FALSE(r.feasible);
  CHECK_THAT(r.error, Catch::Contains("revives block 2 before the program frees it (after op 2)"));
  p.decisions[0].intervals[0] = revival(2, 4, 6, {0});
  r = run(t, p, 0);
  REQUIRE_FALSE(r.feasible);
  CHECK_THAT(r.error, Catch::Contains("until op 6, outside [4, 5]"));
  p.decisions[0].intervals[0] = revival(2, 4, 5, {4});
  r = run(t, p, 0);
  REQUIRE_FALSE(r.feasible);
  CHECK_THAT(r.error, Catch::Contains("by replaying op 4, which has not run yet"));
  // The parameter cannot be revived, and a block revived twice over is still on the device.
  p.decisions[0] = {1, {revival(0, 4, 5, {0})}};
  r = run(t, p, 0);
  REQUIRE_FALSE(r.feasible);
  CHECK_THAT(r.error, Catch::Contains("holds to the end of the step"));
  p.decisions[0] = {2, {revival(2, 4, 5, {0}), revival(4, 5, 5, {0})}};
  r = run(t, p, 0);
  REQUIRE_FALSE(r.feasible);
  CHECK_THAT(r.error, Catch::Contains("revives block 2, which is still on the device"));
  (void)kMb;
}

TEST_CASE("replay sharing rebuilds two outputs of one op with one replay where memory allows") {
  // op0 (10 ms) reads parameter W and writes A and B (150 MB each, like a pooling's output
  // and indices); op1 (10 ms) allocates D (350 MB), freed after it; op2 reads A and writes E
  // (100 MB, freed after it), op3 reads B (1 ms each). Under less than W + D + A, A and B are
  // both dropped over op 1.
  using trace::Access;
  constexpr std::uint64_t kMb = 1'000'000;
  trace::Trace t = titanv_trace_with_weights();
  t.blocks.push_back(block(2, 150 * kMb, 0, 20 * kMs + kMs / 2));
  t.blocks.push_back(block(3, 150 * kMb, 0, 21 * kMs + kMs / 2));
  t.blocks.push_back(block(4, 350 * kMb, 10 * kMs, 15 * kMs));
  t.blocks.push_back(block(5, 100 * kMb, 20 * kMs, 20 * kMs + kMs / 2));
  op(t, "pool", 10 * kMs, {{1, Access::read}, {2, Access::write}, {3, Access::write}});
  op(t, "make_d", 10 * kMs, {{4, Access::write}});
  op(t, "use_a", 1 * kMs, {{2, Access::read}, {5, Access::write}});
  op(t, "use_b", 1 * kMs, {{3, Access::read}});
  TraceIndex index(t);
  for (const std::uint64_t budget : {410 * kMb, 360 * kMb}) {
    PlanRequest request = titanv_request(index, budget);
    plan::Plan p = plan_for(t, budget);
    p.decisions.push_back({2, {regeneration(0, 2, {0}, {1})}});
    p.decisions.push_back({3, {regeneration(0, 3, {0}, {1})}});
    SimulationResult judged = judge(request, p);
    INFO(judged.error);
    REQUIRE(judged.feasible);
    CHECK(judged.extra_compute_ns == 20 * kMs);
    p = share_replays(request, std::move(p), judged);
    REQUIRE(judged.feasible);
    if (budget == 410 * kMb) {
      // Room for W, A, E and B at op 2: B is rebuilt there too, by the same replay.
      CHECK(judged.extra_compute_ns == 10 * kMs);
      CHECK(judged.peak_bytes <= budget);
    } else {
      // W + A + E + B does not fit: the move is refused and the plan stays as it was.
      CHECK(judged.extra_compute_ns == 20 * kMs);
    }
  }
}

TEST_CASE("a revival ends with the last replay that reads it, and goes when none does") {
  const trace::Trace t = concat_trace();
  TraceIndex index(t);
  plan::Plan p = plan_for(t, 0);
  p.decisions.push_back({2, {revival(2, 4, 5, {0})}});
  p.decisions.push_back({3, {regeneration(1, 5, {1}, {2})}});
  p.decisions.push_back({4, {regeneration(2, 4, {2}, {2})}});
  CHECK(trim_revivals(index, p) == 0);  // read at op 5 (C1's replay): held through it
  CHECK(p.decisions[0].intervals[0].until == 5);
  p.decisions.erase(p.decisions.begin() + 1);  // C1 kept instead: the last reader is C2's, at op 4
  CHECK(trim_revivals(index, p) == 1);
  CHECK(p.decisions[0].intervals[0].until == 4);
  SimulationResult r = run(t, p, 0);
  INFO(r.error);
  CHECK(r.feasible);
  p.decisions.pop_back();  // nothing reads F: the revival goes, and with it F's decision
  CHECK(trim_revivals(index, p) == 1);
  CHECK(p.decisions.empty());
  // Revived twice, once for each reader: both stay; without the second reader only the first.
  p.decisions.push_back({2, {revival(2, 4, 4, {0}), revival(4, 5, 5, {0})}});
  p.decisions.push_back({3, {regeneration(1, 5, {1}, {2})}});
  p.decisions.push_back({4, {regeneration(2, 4, {2}, {2})}});
  REQUIRE_NOTHROW(plan::check_plan_matches(p, t));
  r = run(t, p, 0);
  INFO(r.error);
  CHECK(r.feasible);
  CHECK(r.revivals == 2);
  CHECK(trim_revivals(index, p) == 0);
  REQUIRE(p.decisions[0].intervals.size() == 2);
  p.decisions.erase(p.decisions.begin() + 1);
  CHECK(trim_revivals(index, p) == 1);
  REQUIRE(p.decisions[0].intervals.size() == 1);
  CHECK(p.decisions[0].intervals[0].needed_by == 4);
}

namespace {

plan::Interval retention(std::uint64_t after, std::uint64_t until) {
  plan::Interval i;
  i.action = plan::Action::retain;
  i.release_after = after;
  i.until = until;
  return i;
}

}  // namespace

TEST_CASE("a retained input stays for later replays at the price of its bytes, and only until its end") {
  constexpr std::uint64_t kMb = 1'000'000;
  const trace::Trace t = concat_trace();
  const std::uint64_t budget = 230 * kMb;  // W + D + F fit over op 3; C1 and C2 must go
  // F kept from the program's free (after op 2) through op 5: no make_f replay at all.
  plan::Plan kept = plan_for(t, budget);
  kept.decisions.push_back({2, {retention(2, 5)}});
  kept.decisions.push_back({3, {regeneration(1, 5, {1}, {2})}});
  kept.decisions.push_back({4, {regeneration(2, 4, {2}, {2})}});
  SimulationResult r = run(t, kept, budget);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.extra_compute_ns == 2 * kMs);           // the two concatenations only
  CHECK(r.peak_bytes == kMb + 10 * kMb + 200 * kMb);  // op 3: W, the retained F and D
  CHECK(r.revivals == 0);
  // Under a budget without room for F beside D, the retention does not fit.
  r = run(t, kept, 205 * kMb);
  REQUIRE_FALSE(r.feasible);
  CHECK_THAT(r.error, Catch::Contains("op 3 (make_d)") && Catch::Contains("budget exceeded"));
  // Ended after op 4, F is gone when C1's replay reads it.
  kept.decisions[0].intervals[0].until = 4;
  r = run(t, kept, budget);
  REQUIRE_FALSE(r.feasible);
  CHECK_THAT(r.error, Catch::Contains("op 5 (use_c1)") && Catch::Contains("reads block 2 that is not resident"));
}

TEST_CASE("a retention must start where the program frees the block and end inside the step") {
  constexpr std::uint64_t kMb = 1'000'000;
  const trace::Trace t = concat_trace();
  plan::Plan early = plan_for(t, 0);
  early.decisions.push_back({2, {retention(1, 5)}});  // F is still read by op 2
  SimulationResult r = run(t, early, 0);
  REQUIRE_FALSE(r.feasible);
  CHECK_THAT(r.error, Catch::Contains("the plan retains block 2") && Catch::Contains("frees it after op 2"));
  plan::Plan held = plan_for(t, 0);
  held.decisions.push_back({1, {retention(5, 5)}});  // W is held to the end anyway
  r = run(t, held, 0);
  REQUIRE_FALSE(r.feasible);
  CHECK_THAT(r.error, Catch::Contains("holds it to the end of the step"));
  plan::Plan past = plan_for(t, 0);
  past.decisions.push_back({2, {retention(2, 6)}});
  r = run(t, past, 0);
  REQUIRE_FALSE(r.feasible);
  CHECK_THAT(r.error, Catch::Contains("until op 6, outside (2, 5]"));
  (void)kMb;
}

TEST_CASE("revival retention keeps a freed input instead of rebuilding it where memory allows") {
  constexpr std::uint64_t kMb = 1'000'000;
  const trace::Trace t = concat_trace();
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, 230 * kMb);
  plan::Plan revived = plan_for(t, request.budget_bytes);
  revived.decisions.push_back({2, {revival(2, 4, 5, {0})}});
  revived.decisions.push_back({3, {regeneration(1, 5, {1}, {2})}});
  revived.decisions.push_back({4, {regeneration(2, 4, {2}, {2})}});
  SimulationResult judged = judge(request, revived);
  REQUIRE(judged.feasible);
  REQUIRE(judged.extra_compute_ns == 12 * kMs);
  plan::Plan kept = retain_revived_blocks(request, revived, judged);
  REQUIRE(judged.feasible);
  CHECK(judged.extra_compute_ns == 2 * kMs);  // make_f no longer replayed
  CHECK(judged.revivals == 0);
  const auto f = find_decision(kept, 2);
  REQUIRE(f != kept.decisions.end());
  REQUIRE(f->intervals.size() == 1);
  CHECK(f->intervals[0].action == plan::Action::retain);
  CHECK(f->intervals[0].release_after == 2);
  CHECK(f->intervals[0].until == 5);
  // Where the retained bytes do not fit beside D and nothing else can go, the revival stays.
  PlanRequest tight = titanv_request(index, 205 * kMb);
  plan::Plan revived_tight = revived;
  revived_tight.budget_bytes = tight.budget_bytes;
  SimulationResult tight_judged = judge(tight, revived_tight);
  REQUIRE(tight_judged.feasible);
  plan::Plan unchanged = retain_revived_blocks(tight, revived_tight, tight_judged);
  CHECK(tight_judged.revivals == 1);
  CHECK(find_decision(unchanged, 2)->intervals[0].action == plan::Action::revive);
}

TEST_CASE("a retention, too, ends with the last replay that reads it, and goes when none does") {
  const trace::Trace t = concat_trace();
  TraceIndex index(t);
  plan::Plan p = plan_for(t, 0);
  p.decisions.push_back({2, {retention(2, 5)}});
  p.decisions.push_back({4, {regeneration(2, 4, {2}, {2})}});  // C2's replay at op 4 reads F
  CHECK(trim_revivals(index, p) == 1);
  CHECK(p.decisions[0].intervals[0].until == 4);
  SimulationResult r = run(t, p, 0);
  INFO(r.error);
  CHECK(r.feasible);
  p.decisions.pop_back();  // nothing reads F: it is freed where the program frees it
  CHECK(trim_revivals(index, p) == 1);
  CHECK(p.decisions.empty());
}

TEST_CASE("a hidden swap of an idle input lets a regeneration go, and comes back for the replays that read it") {
  // op0 (10 ms) makes A (100 MB) from input I (120 MB, read again by op 6 only); op1 (30 ms)
  // fills; op2 (10 ms) makes B (100 MB), freed after it; op3 (30 ms) fills; op4 reads A; op5
  // (30 ms) fills; op6 reads I. The budget is 100 MB short of I + A + B at op 2. The plan
  // rebuilds A for op 4 by replaying op 0, which reads I: so a swap of I must bring it back by
  // op 4 (copy in during op 3), not just before op 6 (during op 5, too late for the replay).
  // I's copy out (10 ms) fits in the idle lane after op 0: with I away, A can stay, and the
  // plan runs at native speed.
  using trace::Access;
  constexpr std::uint64_t kMb = 1'000'000;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, 120 * kMb, trace::kNever, trace::kNever, trace::Category::input));
  t.blocks.push_back(block(2, 100 * kMb, 0, 90 * kMs));
  t.blocks.push_back(block(3, 100 * kMb, 40 * kMs, 50 * kMs));
  op(t, "make_a", 10 * kMs, {{1, Access::read}, {2, Access::write}});
  op(t, "filler_a", 30 * kMs, {});
  op(t, "make_b", 10 * kMs, {{3, Access::write}});
  op(t, "filler_b", 30 * kMs, {});
  op(t, "use_a", 10 * kMs, {{2, Access::read}});
  op(t, "filler_c", 30 * kMs, {});
  op(t, "use_i", 10 * kMs, {{1, Access::read}});
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, 220 * kMb);
  plan::Plan p = plan_for(t, request.budget_bytes);
  p.decisions.push_back({2, {regeneration(0, 4, {0}, {1})}});
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  REQUIRE(judged.extra_compute_ns == 10 * kMs);
  p = swap_hidden_and_prune(request, std::move(p), judged);
  INFO(judged.error);
  REQUIRE(judged.feasible);
  CHECK(judged.regenerations == 0);
  CHECK(judged.swaps == 1);
  CHECK(judged.extra_compute_ns == 0);
  CHECK(judged.stall_ns == 0);
  CHECK(judged.step_time_ns == index.native_step_ns());
  CHECK(judged.peak_bytes <= request.budget_bytes);
}

TEST_CASE("a rebuild whose input is rebuilt later is refused until that input is due back by its point") {
  // op0 makes A, op1 makes B from A, op2 makes Y, op3 reads B, op4 reads A (10 ms each). Both
  // A and B are rebuilt after op 1, each for its own next use: B's replay of op 1 at op 3
  // reads A, which its own plan brings back only at op 4.
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX, 0, trace::kNever));  // A
  t.blocks.push_back(block(2, kX, 10 * kMs, trace::kNever));  // B
  t.blocks.push_back(block(3, kX, 20 * kMs, 30 * kMs));  // Y
  op(t, "produce_a", 10 * kMs, {{1, Access::write}});
  op(t, "produce_b", 10 * kMs, {{1, Access::read}, {2, Access::write}});
  op(t, "produce_y", 10 * kMs, {{3, Access::write}});
  op(t, "consume_b", 10 * kMs, {{2, Access::read}});
  op(t, "consume_a", 10 * kMs, {{1, Access::read}});
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, index.native_peak());
  plan::Plan plan = empty_plan(request, "test");
  add_interval(plan, index, index.block_index(1), regeneration_interval(index, index.block_index(1), 1, 4));
  add_interval(plan, index, index.block_index(2), regeneration_interval(index, index.block_index(2), 1, 3));
  const SimulationResult refused = judge(request, plan);
  REQUIRE_FALSE(refused.feasible);
  CHECK_THAT(refused.error, Catch::Contains("op 3") && Catch::Contains("not resident"));
  const std::vector<std::uint64_t> reads = replay_reads(index, find_decision(plan, 2)->intervals.front());
  CHECK(reads == std::vector<std::uint64_t>{1});
  inputs_back_in_time(request, plan);
  CHECK(find_decision(plan, 1)->intervals.front().needed_by == 3);  // A is rebuilt before B now
  CHECK(find_decision(plan, 2)->intervals.front().needed_by == 3);
  const SimulationResult runs = judge(request, plan);
  INFO(runs.error);
  CHECK(runs.feasible);
  CHECK(runs.extra_compute_ns == 20 * kMs);  // each producer replayed once
}

TEST_CASE("a staircase of rebuilds, each due an op before its input's, is brought back whole however deep") {
  // op0 makes B0; op k (1..12) makes Bk from B(k-1); then B12, B11, ..., B1 are read in that
  // order, one op each. Every Bk is rebuilt for its read, so B12's replay reads B11 before
  // B11 is due, B11's reads B10, and so on: each pass over the plan moves the chain down by
  // one step, so a fixed handful of passes would leave its bottom away at the top's point.
  using trace::Access;
  constexpr std::uint64_t kDepth = 12;
  trace::Trace t = titanv_trace();
  for (std::uint64_t k = 0; k <= kDepth; ++k) t.blocks.push_back(block(k + 1, kY, static_cast<std::int64_t>(k) * 10 * kMs, trace::kNever));
  op(t, "produce_0", 10 * kMs, {{1, Access::write}});
  for (std::uint64_t k = 1; k <= kDepth; ++k) op(t, "produce_" + std::to_string(k), 10 * kMs, {{k, Access::read}, {k + 1, Access::write}});
  op(t, "filler", 10 * kMs, {});
  for (std::uint64_t k = kDepth; k >= 1; --k) op(t, "consume_" + std::to_string(k), 10 * kMs, {{k + 1, Access::read}});
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, index.native_peak());
  plan::Plan plan = empty_plan(request, "test");
  const std::uint32_t first_read = kDepth + 2;
  for (std::uint64_t k = 1; k <= kDepth; ++k) {
    const auto release_after = static_cast<std::uint32_t>(k < kDepth ? k + 1 : k);
    const auto needed_by = static_cast<std::uint32_t>(first_read + (kDepth - k));
    add_interval(plan, index, index.block_index(k + 1), regeneration_interval(index, index.block_index(k + 1), release_after, needed_by));
  }
  const SimulationResult refused = judge(request, plan);
  REQUIRE_FALSE(refused.feasible);
  CHECK_THAT(refused.error, Catch::Contains("not resident"));
  inputs_back_in_time(request, plan);
  for (std::uint64_t k = 1; k <= kDepth; ++k) {
    INFO("B" << k);
    CHECK(find_decision(plan, k + 1)->intervals.front().needed_by == first_read);
  }
  const SimulationResult runs = judge(request, plan);
  INFO(runs.error);
  CHECK(runs.feasible);
  CHECK(runs.extra_compute_ns == static_cast<std::int64_t>(kDepth) * 10 * kMs);  // each producer replayed once
}
