// The offline rematerialization planner: chains through inputs the trace has already freed,
// memory of the rebuilt temporaries, and budget-meeting plans on the shared DTR logs.
#include "common/plan_edits.hpp"
#include "delta/candidates.hpp"
#include "delta/remat/remat.hpp"
#include "planner_fixtures.hpp"
#include "tiny_traces.hpp"
#include "trace/dtr_loader.hpp"
#include "trace/trace_loading.hpp"

#include <catch2/catch.hpp>

#include <filesystem>

using namespace delta;
using namespace delta::planner;
using namespace delta::planner::testing;

namespace {

constexpr std::uint64_t kMb = 1'000'000;

// op0 reads parameter W and writes B; op1 reads B and writes C; B is freed after op1; op2
// writes D (freed after it); op3 reads C. Native peak W + C + D at op 2.
trace::Trace chain_trace() {
  using trace::Access;
  trace::Trace t = titanv_trace_with_weights();
  t.blocks.push_back(block(2, 100 * kMb, 0, 15 * kMs));
  t.blocks.push_back(block(3, 100 * kMb, 10 * kMs, trace::kNever));
  t.blocks.push_back(block(4, 250 * kMb, 20 * kMs, 25 * kMs));
  op(t, "make_b", 10 * kMs, {{1, Access::read}, {2, Access::write}});
  op(t, "make_c", 10 * kMs, {{2, Access::read}, {3, Access::write}});
  op(t, "make_d", 10 * kMs, {{4, Access::write}});
  op(t, "use_c", 10 * kMs, {{3, Access::read}});
  return t;
}

// The plan's decision for block `id`, or null.
const plan::BlockDecision* decision_of(const plan::Plan& p, std::uint64_t id) {
  for (const plan::BlockDecision& d : p.decisions)
    if (d.block == id) return &d;
  return nullptr;
}

}  // namespace

TEST_CASE("a block whose producer's input is already freed is rebuilt through a chain") {
  trace::Trace t = chain_trace();
  TraceIndex index(t);
  REQUIRE(index.native_peak() == 351 * kMb);
  const std::uint64_t budget = 300 * kMb;  // op 2 fits only with C gone
  PlanRequest request = titanv_request(index, budget);
  for (RematScore score : {RematScore::until_next_use, RematScore::since_last_use}) {
    RematOptions options;
    options.score = score;
    plan::Plan p = plan_offline_remat(request, options);
    REQUIRE_NOTHROW(plan::check_plan_matches(p, t));
    REQUIRE(p.decisions.size() == 1);
    CHECK(p.decisions[0].block == 3);
    REQUIRE(p.decisions[0].intervals.size() == 1);
    const plan::Interval& interval = p.decisions[0].intervals[0];
    CHECK(interval.action == plan::Action::regenerate);
    CHECK(interval.release_after == 1);
    CHECK(interval.needed_by == 3);
    // B is gone by op 3, so its producer replays first; W is the only resident input.
    CHECK(interval.replay == std::vector<std::uint64_t>{0, 1});
    CHECK(interval.inputs == std::vector<std::uint64_t>{1});
    SimulationResult r = judge(request, p);
    INFO(r.error);
    CHECK(r.feasible);
    CHECK(r.peak_bytes <= budget);
    CHECK(r.extra_compute_ns == 20 * kMs);
    CHECK(r.step_time_ns == 60 * kMs);
  }
}

TEST_CASE("the temporaries of a replay count against the budget") {
  trace::Trace t = chain_trace();
  TraceIndex index(t);
  // At op 3 the replay holds W, B and C (201 MB): with less the plan cannot be made, and the
  // planner stops where the simulator will name the op, instead of claiming a feasible plan.
  PlanRequest request = titanv_request(index, 200 * kMb);
  plan::Plan p = plan_offline_remat(request, RematOptions{});
  SimulationResult r = judge(request, p);
  CHECK_FALSE(r.feasible);
  CHECK_FALSE(r.error.empty());
}

TEST_CASE("a block updated in place is rebuilt by replaying its producer and the update") {
  // As chain_trace, with op 1 applying relu_ to C in place right after making it, and C's
  // producer reading W only.
  using trace::Access;
  trace::Trace t = titanv_trace_with_weights();
  t.blocks.push_back(block(3, 100 * kMb, 0, trace::kNever));
  t.blocks.push_back(block(4, 250 * kMb, 20 * kMs, 25 * kMs));
  op(t, "make_c", 10 * kMs, {{1, Access::read}, {3, Access::write}});
  op(t, "relu_", 5 * kMs, {{3, Access::read}, {3, Access::write}});
  op(t, "make_d", 10 * kMs, {{4, Access::write}});
  op(t, "use_c", 10 * kMs, {{3, Access::read}});
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, 300 * kMb);
  plan::Plan p = plan_offline_remat(request, RematOptions{});
  REQUIRE(p.decisions.size() == 1);
  REQUIRE(p.decisions[0].intervals.size() == 1);
  CHECK(p.decisions[0].intervals[0].replay == std::vector<std::uint64_t>{0, 1});
  SimulationResult r = judge(request, p);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.extra_compute_ns == 15 * kMs);
  CHECK(r.peak_bytes <= 300 * kMb);
}

TEST_CASE("siblings dropped together come back from one replay") {
  // op1 ("dropout") reads S and writes O and its mask M, read at ops 3 and 4; D at op 2 leaves
  // room for S (30 ms to make) and nothing else: O and M must go. Rebuilt apart they cost op 1
  // twice (20 ms); with siblings M comes back with O's replay at op 3 (10 ms).
  using trace::Access;
  trace::Trace t = titanv_trace_with_weights();
  t.blocks.push_back(block(2, 100 * kMb, 0, trace::kNever));        // S
  t.blocks.push_back(block(3, 100 * kMb, 30 * kMs, trace::kNever));  // O
  t.blocks.push_back(block(4, 50 * kMb, 30 * kMs, trace::kNever));   // M
  t.blocks.push_back(block(5, 200 * kMb, 40 * kMs, 50 * kMs));       // D
  op(t, "make_s", 30 * kMs, {{1, Access::read}, {2, Access::write}});
  op(t, "dropout", 10 * kMs, {{2, Access::read}, {3, Access::write}, {4, Access::write}});
  op(t, "make_d", 10 * kMs, {{5, Access::write}});
  op(t, "use_o", 1 * kMs, {{3, Access::read}});
  op(t, "use_m", 1 * kMs, {{4, Access::read}});
  op(t, "use_s", 1 * kMs, {{2, Access::read}});
  TraceIndex index(t);
  REQUIRE(index.native_peak() == 451 * kMb);
  PlanRequest request = titanv_request(index, 301 * kMb);
  RematOptions options;
  options.restore_headroom = 0;  // M fits beside O at op 3 with nothing to spare
  options.discard_dead = false;

  plan::Plan apart = plan_offline_remat(request, options);
  SimulationResult apart_run = judge(request, apart);
  INFO(apart_run.error);
  REQUIRE(apart_run.feasible);
  CHECK(apart_run.extra_compute_ns >= 20 * kMs);

  options.sibling_window = 0.1;
  plan::Plan together = plan_offline_remat(request, options);
  REQUIRE_NOTHROW(plan::check_plan_matches(together, t));
  SimulationResult together_run = judge(request, together);
  INFO(together_run.error);
  REQUIRE(together_run.feasible);
  CHECK(together_run.peak_bytes <= 301 * kMb);
  CHECK(together_run.extra_compute_ns == 10 * kMs);
  for (std::uint64_t id : {3, 4}) {
    const plan::BlockDecision* d = decision_of(together, id);
    REQUIRE(d != nullptr);
    REQUIRE(d->intervals.size() == 1);
    CHECK(d->intervals[0].action == plan::Action::regenerate);
    CHECK(d->intervals[0].needed_by == 3);  // M with O, one op before its own use
    CHECK(d->intervals[0].replay == std::vector<std::uint64_t>{1});
  }

  // Outside the window M is left to a replay of its own.
  options.sibling_window = 0.001;
  plan::Plan narrow = plan_offline_remat(request, options);
  CHECK(judge(request, narrow).extra_compute_ns >= 20 * kMs);
}

TEST_CASE("offline rematerialization meets the budget on the DTR logs where it finds a plan") {
  const std::filesystem::path dir = std::filesystem::path(DELTA_TRACES_DIR) / "dtr";
  REQUIRE(std::filesystem::exists(dir));
  std::size_t feasible = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".log") continue;
    trace::Trace t = load_dtr_log(entry.path().string());
    TraceIndex index(t);
    for (double ratio : {0.6, 0.3}) {
      PlanRequest request = titanv_request(index, static_cast<std::uint64_t>(double(index.native_peak()) * ratio));
      bool found = false;
      for (double headroom : {0.0, 2.0, 8.0}) {
        RematOptions options;
        options.restore_headroom = headroom;
        plan::Plan p = plan_offline_remat(request, options);
        REQUIRE_NOTHROW(plan::check_plan_matches(p, t));
        SimulationResult r = judge(request, p);
        if (!r.feasible) continue;  // a regeneration-only plan may not exist at 0.3
        found = true;
        INFO(entry.path().filename().string() << " at " << ratio << ", headroom " << headroom);
        CHECK(r.peak_bytes <= request.budget_bytes);
        CHECK(r.swaps == 0);
        CHECK(r.stall_ns == 0);  // regeneration only: nothing waits for a copy
        CHECK(r.step_time_ns == index.native_step_ns() + r.extra_compute_ns);
      }
      feasible += found ? 1 : 0;
    }
  }
  CHECK(feasible >= 9);
}

TEST_CASE("offline rematerialization plans again with stranded blocks pinned") {
  // On the U-Net log at 0.3 of its peak, the greedy drops leave an op whose rebuilds do not
  // fit; pinning what it needed and planning again finds a plan the simulator accepts.
  const std::string log = dtr_log("unet");
  REQUIRE(!log.empty());
  trace::Trace t = load_dtr_log(log);
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, static_cast<std::uint64_t>(double(index.native_peak()) * 0.3));
  RematOptions options;
  options.score = RematScore::since_last_use;
  options.restore_headroom = 8;
  options.rebuild_depth = 1;
  options.distance_weight = 0.5;
  options.max_restarts = 0;
  plan::Plan first = plan_offline_remat(request, options);
  SimulationResult once = judge(request, first);
  CHECK_FALSE(once.feasible);
  options.max_restarts = 4;
  plan::Plan again = plan_offline_remat(request, options);
  REQUIRE_NOTHROW(plan::check_plan_matches(again, t));
  SimulationResult r = judge(request, again);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.peak_bytes <= request.budget_bytes);
  CHECK(r.swaps == 0);
}

TEST_CASE("a drop's cost counts the dropped blocks made from it when asked to") {
  // A (9 ms) makes B (1 ms); C (10 ms) stands alone. D forces one drop (B, the cheapest), then
  // E forces another: A is cheaper than C alone, but B, already dropped, needs A to come back.
  using trace::Access;
  trace::Trace t = titanv_trace_with_weights();
  t.blocks.push_back(block(2, 100 * kMb, 0, 45 * kMs));
  t.blocks.push_back(block(3, 100 * kMb, 9 * kMs, 45 * kMs));
  t.blocks.push_back(block(4, 100 * kMb, 10 * kMs, 45 * kMs));
  t.blocks.push_back(block(5, 100 * kMb, 20 * kMs, 25 * kMs));
  t.blocks.push_back(block(6, 200 * kMb, 30 * kMs, 35 * kMs));
  op(t, "make_a", 9 * kMs, {{1, Access::read}, {2, Access::write}});
  op(t, "make_b", 1 * kMs, {{2, Access::read}, {3, Access::write}});
  op(t, "make_c", 10 * kMs, {{1, Access::read}, {4, Access::write}});
  op(t, "make_d", 10 * kMs, {{5, Access::write}});
  op(t, "make_e", 10 * kMs, {{6, Access::write}});
  op(t, "use_all", 10 * kMs, {{2, Access::read}, {3, Access::read}, {4, Access::read}});
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, 301 * kMb);
  auto dropped = [&](double children_weight) {
    RematOptions options;
    options.score = RematScore::until_next_use;
    options.children_weight = children_weight;
    plan::Plan p = plan_offline_remat(request, options);
    SimulationResult r = judge(request, p);
    INFO(r.error);
    REQUIRE(r.feasible);
    std::vector<std::uint64_t> blocks;
    for (const plan::BlockDecision& d : p.decisions) blocks.push_back(d.block);
    std::sort(blocks.begin(), blocks.end());
    return blocks;
  };
  CHECK(dropped(0) == std::vector<std::uint64_t>{2, 3});
  CHECK(dropped(4) == std::vector<std::uint64_t>{3, 4});
}

TEST_CASE("an input the program has freed is revived once for the replays that read it") {
  const trace::Trace t = concat_trace();
  TraceIndex index(t);
  REQUIRE(index.native_peak() == 401 * kMb);
  PlanRequest request = titanv_request(index, 230 * kMb);  // C1 and C2 cannot stay over op 3
  RematOptions options;
  options.restore_inputs = false;
  plan::Plan rebuilt = plan_offline_remat(request, options);
  SimulationResult r = judge(request, rebuilt);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.extra_compute_ns == 22 * kMs);  // make_f replayed for each concatenation
  options.revive_inputs = true;
  plan::Plan revived = plan_offline_remat(request, options);
  REQUIRE_NOTHROW(plan::check_plan_matches(revived, t));
  r = judge(request, revived);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.peak_bytes <= request.budget_bytes);
  CHECK(r.extra_compute_ns == 12 * kMs);
  const plan::BlockDecision* f = decision_of(revived, 2);
  REQUIRE(f != nullptr);
  REQUIRE(f->intervals.size() == 1);
  CHECK(f->intervals[0].action == plan::Action::revive);
  CHECK(f->intervals[0].needed_by == 4);
  CHECK(f->intervals[0].until == 5);
  CHECK(f->intervals[0].replay == std::vector<std::uint64_t>{0});
}

TEST_CASE("a revived block nothing will read again is freed first when memory is short") {
  // The concatenation trace with op6 (1 ms) allocating E (225 MB) after C1's last read: F,
  // revived for the two replays, must go for E to fit, and nothing dropped needs it any more.
  trace::Trace t = concat_trace();
  t.blocks.push_back(block(6, 225 * kMb, 24 * kMs, 24 * kMs + kMs / 2));
  op(t, "make_e", 1 * kMs, {{6, trace::Access::write}});
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, 230 * kMb);
  RematOptions options;
  options.restore_inputs = false;
  options.revive_inputs = true;
  plan::Plan p = plan_offline_remat(request, options);
  SimulationResult r = judge(request, p);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.peak_bytes <= request.budget_bytes);
  CHECK(r.extra_compute_ns == 12 * kMs);
  const plan::BlockDecision* f = decision_of(p, 2);
  REQUIRE(f != nullptr);
  REQUIRE(f->intervals.size() == 1);
  CHECK(f->intervals[0].until == 5);  // freed after op 5, before E is allocated
}

TEST_CASE("counting a dropped input's rebuild as shared frees the pieces made from it, not a dearer block") {
  // op0 makes P (10 ms); ops 1 and 2 make A and B from P (1 ms each); op3 makes S (6 ms); op4
  // needs room for T (two units). The backward reads S, B, A soon after a 100 ms filler and P
  // only after another 1000 ms. Under three units, op3 drops P (cheapest per byte and time).
  // At op4 two more must go. Counting P's rebuild in full, A and B cost 11 ms each and S goes
  // with one of them: S (6 ms) plus A with P (11 ms). Counted as shared, A and B cost 1 ms
  // each and go: P comes back once, for B, and stays for A (12 ms).
  using trace::Access;
  constexpr std::uint64_t kUnit = 100 * kMb;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kUnit, 0, 1123 * kMs));        // P
  t.blocks.push_back(block(2, kUnit, 10 * kMs, 122 * kMs));  // A
  t.blocks.push_back(block(3, kUnit, 11 * kMs, 121 * kMs));  // B
  t.blocks.push_back(block(4, kUnit, 12 * kMs, 120 * kMs));  // S
  t.blocks.push_back(block(5, 2 * kUnit, 18 * kMs, 19 * kMs));  // T
  op(t, "proj", 10 * kMs, {{1, Access::write}});
  op(t, "piece_a", 1 * kMs, {{1, Access::read}, {2, Access::write}});
  op(t, "piece_b", 1 * kMs, {{1, Access::read}, {3, Access::write}});
  op(t, "scores", 6 * kMs, {{4, Access::write}});
  op(t, "big", 1 * kMs, {{5, Access::write}});
  op(t, "filler", 100 * kMs, {});
  op(t, "use_s", 1 * kMs, {{4, Access::read}});
  op(t, "use_b", 1 * kMs, {{3, Access::read}});
  op(t, "use_a", 1 * kMs, {{2, Access::read}});
  op(t, "filler", 1000 * kMs, {});
  op(t, "use_p", 1 * kMs, {{1, Access::read}});
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, 3 * kUnit);
  auto plan_with = [&](double weight) {
    RematOptions options;
    options.restore_headroom = 0;  // P, restored for one piece, stays for the other
    options.dropped_input_weight = weight;
    return plan_offline_remat(request, options);
  };
  plan::Plan full = plan_with(1.0), shared = plan_with(0.0);
  const SimulationResult full_run = judge(request, full);
  const SimulationResult shared_run = judge(request, shared);
  INFO(full_run.error << shared_run.error);
  REQUIRE(full_run.feasible);
  REQUIRE(shared_run.feasible);
  CHECK(decision_of(full, 4) != nullptr);  // S dropped
  CHECK(full_run.extra_compute_ns == 17 * kMs);
  CHECK(decision_of(shared, 4) == nullptr);  // S kept, A and B dropped
  CHECK(decision_of(shared, 2) != nullptr);
  CHECK(decision_of(shared, 3) != nullptr);
  CHECK(shared_run.extra_compute_ns == 12 * kMs);
  CHECK(shared_run.peak_bytes <= 3 * kUnit);
}

TEST_CASE("the portfolio knows when regeneration alone cannot fit: what lives across the step beside an op's own blocks") {
  // chain_trace: W (1 MB) lives across the step; op 2 uses D (250 MB) alone, so any plan
  // holds at least 251 MB there, and the offline replay fits where that does.
  const trace::Trace t = chain_trace();
  TraceIndex index(t);
  const PlanRequest roomy = titanv_request(index, 300 * kMb);
  CHECK_FALSE(regeneration_alone_cannot_fit(roomy));
  plan::Plan fits = plan_offline_remat(roomy, RematOptions{});
  CHECK(judge(roomy, fits).feasible);
  const PlanRequest tight = titanv_request(index, 250 * kMb);
  CHECK(regeneration_alone_cannot_fit(tight));
  plan::Plan fails = plan_offline_remat(tight, RematOptions{});
  CHECK_FALSE(judge(tight, fails).feasible);
  // D's 250 MB alone, without W: a budget of 251 MB is the least it needs.
  CHECK_FALSE(regeneration_alone_cannot_fit(titanv_request(index, 251 * kMb)));
  // The offline replay can drop C over op 2 (make_c's input B is rebuilt from W), so its
  // floor is that too.
  CHECK_FALSE(offline_remat_cannot_fit(roomy));
  CHECK(offline_remat_cannot_fit(tight));
}

TEST_CASE("the portfolio skips the offline replay where blocks it cannot rebuild fill the budget") {
  // B is made from parameter W, which op 1 then updates: B's replay would read the new W, so
  // from op 1 on nothing can rebuild B, and it stays until op 3 reads it. At op 2, W, B and
  // D (351 MB) are all resident under any plan of the offline replay, though W beside D alone
  // (251 MB) would leave room.
  using trace::Access;
  trace::Trace t = titanv_trace_with_weights();
  t.blocks.push_back(block(2, 100 * kMb, 0, 35 * kMs));          // B
  t.blocks.push_back(block(3, 250 * kMb, 20 * kMs, 25 * kMs));  // D
  op(t, "make_b", 10 * kMs, {{1, Access::read}, {2, Access::write}});
  op(t, "update_w", 10 * kMs, {{1, Access::write}});
  op(t, "make_d", 10 * kMs, {{3, Access::write}});
  op(t, "use_b", 10 * kMs, {{2, Access::read}});
  TraceIndex index(t);
  REQUIRE(index.native_peak() == 351 * kMb);
  const PlanRequest tight = titanv_request(index, 300 * kMb);
  CHECK_FALSE(regeneration_alone_cannot_fit(tight));
  CHECK(offline_remat_cannot_fit(tight));
  for (const bool discard_dead : {true, false}) {
    RematOptions options;
    options.discard_dead = discard_dead;
    plan::Plan fails = plan_offline_remat(tight, options);
    CHECK_FALSE(judge(tight, fails).feasible);
  }
  CHECK_FALSE(offline_remat_cannot_fit(titanv_request(index, 351 * kMb)));
}

TEST_CASE("the offline replay's floor never rules out a plan it finds") {
  // Wherever some setting of the offline replay finds a plan, its floor must say it may fit:
  // else the portfolio would skip a plan and change its choice. Both verdicts must occur.
  std::vector<std::pair<std::string, std::string>> traces;  // (path, GPU)
  for (const std::string& log : dtr_logs()) traces.emplace_back(log, "titanv");
  REQUIRE(traces.size() >= 5);
  traces.emplace_back(std::string(DELTA_TEST_DATA_DIR) + "/h200-mlp-recorded.json.gz", "h200");
  std::size_t ruled_out = 0, found = 0;
  for (const auto& [path, gpu] : traces) {
    const trace::Trace t = path.ends_with(".log") ? load_dtr_log(path) : load_any_trace(path);
    TraceIndex index(t);
    for (const double ratio : {0.8, 0.5, 0.3}) {
      PlanRequest request = titanv_request_at(index, ratio);
      request.gpu = gpu_profile(gpu);
      const bool cannot = offline_remat_cannot_fit(request);
      ruled_out += cannot ? 1 : 0;
      for (const RematOptions& options : remat_settings(2, 1, 1, 1, 1)) {
        plan::Plan p = plan_offline_remat(request, options);
        const SimulationResult r = judge(request, p);
        INFO(std::filesystem::path(path).filename().string() << " at " << ratio << ": " << r.error);
        if (!r.feasible) continue;
        ++found;
        CHECK_FALSE(cannot);
      }
    }
  }
  CHECK(ruled_out > 0);
  CHECK(found > 0);
}
