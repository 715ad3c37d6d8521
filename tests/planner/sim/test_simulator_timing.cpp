// The simulator's timing as the executor runs a plan on the sim device: discards copied to
// host before their bytes go (SimulationOptions::discard_copies, DELTA_DISCARD=keep) and the
// host's launch pace (host_pace). Worked out on paper on the Titan V profile: 12 GB/s copies,
// 5 us per copy and per launch.
#include "common/request.hpp"
#include "delta/passes/discard_keeping.hpp"
#include "hand_plans.hpp"
#include "sim/simulator.hpp"
#include "tiny_traces.hpp"

#include <delta/plan.hpp>

#include <catch2/catch.hpp>

using namespace delta;
using namespace delta::planner;
using namespace delta::planner::testing;

namespace {

constexpr std::int64_t kUs = 1'000;
constexpr std::int64_t kLaunch = 5 * kUs;  // the Titan V profile's launch cost
// kX (1.2 GB) to host at 12 GB/s, plus one copy latency.
constexpr std::int64_t kCopyX = 100 * kMs + 5 * kUs;

// op0 (10 ms) writes A (kX), read by nobody after; op1 (1 ms) writes B (kX), allocated at its
// start; op2 (10 ms) reads B. A is freed after op `a_freed_after`, B after op 2. A budget of
// 1.5 kX: B fits only once A is gone.
trace::Trace dead_block_trace(int a_freed_after) {
  using trace::Access;
  trace::Trace t = titanv_trace();
  const std::int64_t ends[] = {10 * kMs, 11 * kMs, 21 * kMs};
  t.blocks.push_back(block(1, kX, 0, ends[a_freed_after]));
  t.blocks.push_back(block(2, kX, 10 * kMs, 21 * kMs));
  op(t, "produce_a", 10 * kMs, {{1, Access::write}});
  op(t, "produce_b", 1 * kMs, {{2, Access::write}});
  op(t, "consume_b", 10 * kMs, {{2, Access::read}});
  return t;
}

plan::Plan discard_a_after_op0(const trace::Trace& t, std::uint64_t budget) {
  plan::Plan p = plan_for(t, budget);
  plan::Interval discard;
  discard.action = plan::Action::discard;
  discard.release_after = 0;
  p.decisions.push_back({1, {discard}});
  return p;
}

SimulationOptions titanv(std::uint64_t budget) {
  SimulationOptions options;
  options.gpu = gpu_profile("titanv");
  options.budget_bytes = budget;
  options.record_timeline = true;
  return options;
}

}  // namespace

TEST_CASE("a discard with copies occupies the D2H lane and frees its bytes when the copy completes") {
  const trace::Trace t = dead_block_trace(2);
  TraceIndex index(t);
  const std::uint64_t budget = kX + kX / 2;
  const plan::Plan p = discard_a_after_op0(t, budget);
  SimulationOptions options = titanv(budget);

  // Dropped: A's bytes go at once, B allocates at 10 ms, nothing waits.
  const SimulationResult dropped = simulate(index, p, options);
  INFO(dropped.error);
  REQUIRE(dropped.feasible);
  CHECK(dropped.step_time_ns == 21 * kMs);
  CHECK(dropped.stall_ns == 0);
  CHECK(dropped.bytes_d2h == 0);
  CHECK(dropped.copies.empty());

  // Copied: A goes to host on the D2H lane from op 0's end; B's allocation waits for the copy
  // to complete, which frees A's bytes.
  options.discard_copies = true;
  const SimulationResult copied = simulate(index, p, options);
  INFO(copied.error);
  REQUIRE(copied.feasible);
  CHECK(copied.discards == 1);
  CHECK(copied.bytes_d2h == kX);
  REQUIRE(copied.copies.size() == 1);
  CHECK(copied.copies[0].to_host);
  CHECK(copied.copies[0].block == 1);
  CHECK(copied.copies[0].start_ns == 10 * kMs);
  CHECK(copied.copies[0].end_ns == 10 * kMs + kCopyX);
  CHECK(copied.stall_ns == kCopyX);
  CHECK(copied.step_time_ns == 21 * kMs + kCopyX);
  REQUIRE(copied.timeline.size() == 3);
  CHECK(copied.timeline[1].start_ns == 10 * kMs + kCopyX);
  CHECK(copied.peak_bytes == kX);  // A and B never together

  // With room for both, op 1 does not wait; but the program frees A after op 2 with its copy
  // still reading it, and the step ends when that copy does.
  options.budget_bytes = 2 * kX;
  const SimulationResult roomy = simulate(index, p, options);
  REQUIRE(roomy.feasible);
  CHECK(roomy.timeline[2].end_ns == 21 * kMs);
  CHECK(roomy.step_time_ns == 10 * kMs + kCopyX);
  CHECK(roomy.bytes_d2h == kX);
  CHECK(roomy.peak_bytes == 2 * kX);  // A's bytes held until its copy completes, at 110 ms
}

TEST_CASE("a discard with copies whose block the program frees first makes the next op wait for the copy") {
  // A freed by the program after op 1, its copy out still reading it: the stream that will
  // reuse its memory waits for the copy, as the executor's free does.
  const trace::Trace t = dead_block_trace(1);
  TraceIndex index(t);
  const plan::Plan p = discard_a_after_op0(t, 0);
  SimulationOptions options = titanv(0);
  options.discard_copies = true;
  const SimulationResult r = simulate(index, p, options);
  INFO(r.error);
  REQUIRE(r.feasible);
  REQUIRE(r.timeline.size() == 3);
  CHECK(r.timeline[1].start_ns == 10 * kMs);                // no room needed: op 1 does not wait
  CHECK(r.timeline[2].start_ns == 10 * kMs + kCopyX);       // the free after op 1 does
  CHECK(r.step_time_ns == 20 * kMs + kCopyX);
  CHECK(r.stall_ns == kCopyX - 1 * kMs);
  options.discard_copies = false;
  CHECK(simulate(index, p, options).step_time_ns == 21 * kMs);
}

TEST_CASE("a discard of a block the host holds a current copy of copies nothing") {
  // A swapped out after op 0 and back for a read at op 1 (its host copy stays current: op 1
  // only reads it), then discarded after op 1: no second copy.
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX, 0, 400 * kMs));
  op(t, "produce_a", 10 * kMs, {{1, Access::write}});
  op(t, "filler", 300 * kMs, {});
  op(t, "read_a", 10 * kMs, {{1, Access::read}});
  op(t, "filler", 80 * kMs, {});
  TraceIndex index(t);
  plan::Plan p = plan_for(t, 0);
  plan::Interval discard;
  discard.action = plan::Action::discard;
  discard.release_after = 2;
  p.decisions.push_back({1, {swap(0, 1, 2), discard}});
  SimulationOptions options = titanv(0);
  options.discard_copies = true;
  const SimulationResult r = simulate(index, p, options);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.bytes_d2h == kX);  // the swap's copy only
  CHECK(r.discards == 1);
  CHECK(r.step_time_ns == 400 * kMs);
}

TEST_CASE("the host's launch pace floors a run of short ops and leaves long ones alone") {
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kY, 0, trace::kNever));
  for (int k = 0; k < 100; ++k) op(t, "short", 1 * kUs, {{1, Access::write}});
  TraceIndex index(t);
  const plan::Plan p = plan_for(t, 0);
  SimulationOptions options = titanv(0);
  SECTION("device time only: the kernels back to back") {
    const SimulationResult r = simulate(index, p, options);
    REQUIRE(r.feasible);
    CHECK(r.step_time_ns == 100 * kUs);
    CHECK(r.native_step_time_ns == 100 * kUs);
  }
  SECTION("host paced: one launch cost per op, the last kernel after it") {
    options.host_pace = true;
    const SimulationResult r = simulate(index, p, options);
    REQUIRE(r.feasible);
    CHECK(r.step_time_ns == 100 * kLaunch + 1 * kUs);
    CHECK(r.native_step_time_ns == r.step_time_ns);
    CHECK(r.stall_ns == 0);  // waiting for the host is no stall: the program without a plan waits alike
    CHECK(r.timeline[7].start_ns == 8 * kLaunch);
    CHECK(native_step_ns(index, options) == r.step_time_ns);
  }
  SECTION("host paced, long kernels: the host runs ahead and costs only the first launch") {
    for (trace::Op& o : t.ops) o.duration_ns = 1 * kMs;
    TraceIndex long_index(t);
    options.host_pace = true;
    const SimulationResult r = simulate(long_index, p, options);
    REQUIRE(r.feasible);
    CHECK(r.step_time_ns == kLaunch + 100 * kMs);
  }
}

TEST_CASE("under the host's pace a wait for room holds the host: the next op is issued after it") {
  const trace::Trace t = dead_block_trace(2);
  TraceIndex index(t);
  const std::uint64_t budget = kX + kX / 2;
  SimulationOptions options = titanv(budget);
  options.discard_copies = true;
  options.host_pace = true;
  const SimulationResult r = simulate(index, discard_a_after_op0(t, budget), options);
  INFO(r.error);
  REQUIRE(r.feasible);
  // op 0 from 5 us; A's copy from its end; op 1's allocation waits for it on the host, which
  // then issues op 1 (one launch later) and op 2 (running ahead of op 1's 1 ms).
  const std::int64_t copied = kLaunch + 10 * kMs + kCopyX;
  REQUIRE(r.timeline.size() == 3);
  CHECK(r.timeline[0].start_ns == kLaunch);
  CHECK(r.timeline[1].start_ns == copied + kLaunch);
  CHECK(r.step_time_ns == copied + kLaunch + 11 * kMs);
  CHECK(r.native_step_time_ns == kLaunch + 21 * kMs);
}

TEST_CASE("a plan request's timing model reaches the simulator and is recorded in the plan, and read back") {
  const trace::Trace t = dead_block_trace(2);
  TraceIndex index(t);
  PlanRequest request;
  request.index = &index;
  request.gpu = gpu_profile("titanv");
  request.budget_bytes = kX + kX / 2;
  plan::Plan p = discard_a_after_op0(t, request.budget_bytes);
  CHECK(judge(request, p).step_time_ns == 21 * kMs);
  CHECK_FALSE(p.predicted.discard_copies);
  CHECK_FALSE(p.predicted.host_pace);
  CHECK(plan::to_json_text(p).find("\"discards\"") == std::string::npos);  // older files read as written
  CHECK(plan::to_json_text(p).find("\"timing\"") == std::string::npos);
  request.discard_copies = request.host_pace = true;
  const SimulationOptions options = simulation_options(request);
  CHECK(options.discard_copies);
  CHECK(options.host_pace);
  CHECK(judge(request, p).step_time_ns == kLaunch + 10 * kMs + kCopyX + kLaunch + 11 * kMs);
  CHECK(p.predicted.discard_copies);
  CHECK(p.predicted.host_pace);
  const plan::Plan back = plan::parse_plan(plan::to_json_text(p));
  CHECK(back.predicted.discard_copies);
  CHECK(back.predicted.host_pace);
  CHECK(back.predicted.step_time_ns == p.predicted.step_time_ns);

  std::string text = plan::to_json_text(p);
  text.replace(text.find("\"copied\""), 8, "\"kept\"");
  CHECK_THROWS_WITH(plan::parse_plan(text, "p.json"), Catch::Contains("p.json.predicted.discards: expected \"copied\" or \"dropped\""));
  text = plan::to_json_text(p);
  text.replace(text.find("\"host-paced\""), 12, "1");
  CHECK_THROWS_WITH(plan::parse_plan(text, "p.json"), Catch::Contains("p.json.predicted.timing: expected \"host-paced\" or \"device\""));
}

TEST_CASE("discards whose copies cost time are kept resident where the budget has room, and only there") {
  const trace::Trace t = dead_block_trace(2);
  TraceIndex index(t);
  PlanRequest request;
  request.index = &index;
  request.gpu = gpu_profile("titanv");
  request.discard_copies = true;
  SECTION("room for A and B: A's discard only costs its copy, which the step waits for") {
    request.budget_bytes = 2 * kX;
    plan::Plan p = discard_a_after_op0(t, request.budget_bytes);
    SimulationResult judged = judge(request, p);
    REQUIRE(judged.step_time_ns == 10 * kMs + kCopyX);
    const plan::Plan kept = keep_discards_resident(request, p, judged);
    CHECK(kept.decisions.empty());
    CHECK(judged.feasible);
    CHECK(judged.discards == 0);
    CHECK(judged.step_time_ns == 21 * kMs);
    // Under the drop model a discard costs nothing: the pass leaves the plan alone.
    request.discard_copies = false;
    SimulationResult dropped = judge(request, p);
    CHECK(keep_discards_resident(request, p, dropped).decisions.size() == 1);
  }
  SECTION("no room for both: the discard is what makes the plan fit, and stays") {
    request.budget_bytes = kX + kX / 2;
    plan::Plan p = discard_a_after_op0(t, request.budget_bytes);
    SimulationResult judged = judge(request, p);
    REQUIRE(judged.feasible);
    const plan::Plan kept = keep_discards_resident(request, p, judged);
    REQUIRE(kept.decisions.size() == 1);
    CHECK(kept.decisions[0].intervals[0].action == plan::Action::discard);
    CHECK(judged.discards == 1);
  }
}
