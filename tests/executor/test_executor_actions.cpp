// The executor running hand-built plans on hand-built traces, as programs on the sim device:
// every action keeps the data bytes-equal to cache mode, holds the budget, and is counted.
#include "executor_fixtures.hpp"

#include <catch2/catch.hpp>

using namespace delta;
using namespace delta::executor::testing;
using delta::planner::testing::kMs;
using delta::planner::testing::kX;
using delta::planner::testing::kY;
using trace::Access;

TEST_CASE("a swap copies the block out and back at the same address, within the budget", "[executor]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, 1'250'000'000);
  add(p, 1, swap(0, 3, 4));
  const Outcome out = run_both(t, p);
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
  CHECK(out.comparison.identical);
  CHECK(out.run.error.empty());
  CHECK(out.run.unmapped_accesses == 0);
  CHECK(out.run.reserved_peak_bytes <= p.budget_bytes);
  CHECK(out.cache.reserved_peak_bytes > p.budget_bytes);  // the budget really bites
  CHECK(out.run.executor.swaps == 3);                     // once per iteration
  CHECK(out.run.executor.prefetches == 3);
  CHECK(out.run.executor.bytes_d2h == 3 * kX);
  CHECK(out.run.executor.bytes_h2d == 3 * kX);
  CHECK(out.run.executor.divergences == 0);
}

TEST_CASE("an early copy out (copy_after) and a partial swap move only what they say", "[executor]") {
  trace::Trace t = planner::testing::swap_trace(/*x_read_at_op2=*/false);
  SECTION("partial") {
    plan::Plan p = plan_for(t, 1'250'000'000);
    plan::Interval s = swap(0, 3, 4);
    s.bytes = 100 * plan::kSwapGranularity;
    add(p, 1, s);
    p.budget_bytes = 2'000'000'000;
    const Outcome out = run_both(t, p);
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
    CHECK(out.comparison.identical);
    CHECK(out.run.executor.partial_swaps == 3);
    // The last 100 pages of X's placement go; the last one holds X's end, so a little less is copied.
    const std::uint64_t placed = (kX + plan::kSwapGranularity - 1) / plan::kSwapGranularity * plan::kSwapGranularity;
    CHECK(out.run.executor.bytes_d2h == 3 * (kX - (placed - 100 * plan::kSwapGranularity)));
  }
  SECTION("partial, the moved blocks packed") {
    plan::Plan p = plan_for(t, 1'250'000'000);
    plan::Interval s = swap(0, 3, 4);
    s.bytes = 100 * plan::kSwapGranularity;
    add(p, 1, s);
    p.budget_bytes = 2'000'000'000;
    p.predicted.executor_placement = true;
    p.predicted.packed_moves = true;  // as a plan fitted so says
    const Outcome out = run_both(t, p);
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
    CHECK(out.comparison.identical);
    CHECK(out.run.executor.partial_swaps == 3);
    CHECK(out.run.unmapped_accesses == 0);
    // X is placed at its size in 512-byte steps, not whole pages, at the arena's start; the part
    // that leaves starts on a page boundary (a part starting inside a page X keeps frees
    // nothing there), so X's bytes from there on are copied.
    const std::uint64_t placed = (kX + 511) / 512 * 512;
    const std::uint64_t from = (placed - 100 * plan::kSwapGranularity + plan::kSwapGranularity - 1) /
                               plan::kSwapGranularity * plan::kSwapGranularity;
    CHECK(out.run.executor.bytes_d2h == 3 * (kX - from));
  }
  SECTION("copy_after") {
    t = planner::testing::swap_trace(/*x_read_at_op2=*/true);  // X read at op 2, its last use before the gap
    plan::Plan p = plan_for(t, 2'000'000'000);
    plan::Interval s = swap(2, 3, 4);
    s.copy_after = 0;
    add(p, 1, s);
    const Outcome out = run_both(t, p);
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
    CHECK(out.comparison.identical);
    CHECK(out.run.executor.swaps == 3);
    CHECK(out.run.unmapped_accesses == 0);
  }
}

TEST_CASE("a regeneration replays the producer into the block's own pages", "[executor]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, 1'250'000'000);
  add(p, 1, regeneration(0, 4, {0}));
  const Outcome out = run_both(t, p);
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
  CHECK(out.comparison.identical);
  CHECK(out.run.reserved_peak_bytes <= p.budget_bytes);
  CHECK(out.run.executor.regenerations == 3);
  CHECK(out.run.executor.replayed_launches == 3);
  CHECK(out.run.executor.bytes_d2h == 0);
  CHECK(out.run.executor.swaps == 0);
}

TEST_CASE("retained and revived inputs serve a later regeneration", "[executor]") {
  const trace::Trace t = planner::testing::concat_trace();  // F (block 2) feeds C1 and C2
  const plan::Interval c2 = regeneration(2, 4, {2}, {2});
  // W, F, C1 and D fit, C2 beside them does not: C2's pages must go before D is allocated.
  constexpr std::uint64_t kBudget = 330'000'000;
  SECTION("retain F until C2 is rebuilt") {
    plan::Plan p = plan_for(t, kBudget);
    add(p, 4, c2);
    plan::Interval keep;
    keep.action = plan::Action::retain;
    keep.release_after = 2;
    keep.until = 4;
    add(p, 2, keep);
    const Outcome out = run_both(t, p);
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
    CHECK(out.comparison.identical);
    CHECK(out.run.executor.regenerations == 3);
    CHECK(out.run.executor.retentions == 3);
    CHECK(out.run.reserved_peak_bytes <= kBudget);
    CHECK(out.cache.reserved_peak_bytes > kBudget);
    CHECK(out.run.executor.revivals == 0);
  }
  SECTION("revive F from W") {
    plan::Plan p = plan_for(t, kBudget);
    add(p, 4, c2);
    add(p, 2, planner::testing::revival(2, 4, 4, {0}, {1}));
    const Outcome out = run_both(t, p);
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
    CHECK(out.comparison.identical);
    CHECK(out.run.executor.revivals == 3);
    CHECK(out.run.executor.regenerations == 3);
    CHECK(out.run.executor.replayed_launches == 6);
    CHECK(out.run.reserved_peak_bytes <= kBudget);
  }
}

TEST_CASE("a weight gradient rebuilt where the optimizer reads it, from its inputs held, is bytes-equal",
          "[executor]") {
  // As delta/passes/replays/gradient_rebuilds.hpp writes it: G (5) dropped after bwd_w and
  // rebuilt by it before opt, its inputs X (3) and DY (4) retained from their free until then.
  const trace::Trace t = planner::testing::gradient_trace();
  constexpr std::uint64_t kBudget = 670'000'000;  // 640 MB held at most, page rounding beside it
  plan::Plan p = plan_for(t, kBudget);
  add(p, 5, regeneration(3, 5, {3}, {3, 4}));
  for (std::uint64_t input : {3, 4}) {
    plan::Interval hold;
    hold.action = plan::Action::retain;
    hold.release_after = 3;
    hold.until = 5;
    add(p, input, hold);
  }
  const Outcome out = run_both(t, p);
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
  CHECK(out.comparison.identical);
  CHECK(out.run.error.empty());
  CHECK(out.run.unmapped_accesses == 0);
  CHECK(out.run.executor.regenerations == 3);  // once per iteration
  CHECK(out.run.executor.retentions == 6);
  CHECK(out.run.executor.replayed_launches == 3);
  CHECK(out.run.reserved_peak_bytes <= kBudget);
  CHECK(out.cache.reserved_peak_bytes > kBudget);  // the budget really bites
}

TEST_CASE("a discarded block keeps a host copy and is never read again", "[executor]") {
  trace::Trace t = planner::testing::titanv_trace();
  t.blocks.push_back(planner::testing::block(1, kY, 0, 300 * kMs));  // written, never read, freed late
  t.blocks.push_back(planner::testing::block(2, kX, 15 * kMs, trace::kNever));
  planner::testing::op(t, "write_z", 10 * kMs, {{1, Access::write}});
  planner::testing::op(t, "make_x", 10 * kMs, {{2, Access::write}});
  planner::testing::op(t, "use_x", 300 * kMs, {{2, Access::read}});
  plan::Plan p = plan_for(t, 1'250'000'000);
  add(p, 1, discard(0));
  const Outcome out = run_both(t, p);
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
  CHECK(out.comparison.identical);
  CHECK(out.run.executor.discards == 3);
  CHECK(out.run.executor.bytes_d2h == 3 * kY);  // kept: copied to host first
  CHECK(out.run.reserved_peak_bytes <= p.budget_bytes);
  SECTION("dropped (DELTA_DISCARD=drop): no copy, and nothing reads it, so nothing is lost") {
    const executor::StepProgram program = executor::step_program(t);
    execute::ProgramOptions options;
    options.gpu = "titanv";
    options.copy_discards = false;
    options.check_invariants = true;
    const execute::ProgramRun dropped = execute::run_program(t, program, &p, options);
    CHECK(execute::compare_runs(out.cache, dropped).identical);
    CHECK(dropped.executor.discards == 3);
    CHECK(dropped.executor.bytes_d2h == 0);
    CHECK(dropped.executor.faults == 0);
    CHECK(dropped.reserved_peak_bytes <= p.budget_bytes);
  }
}

TEST_CASE("a program that strays from its trace is caught, and its data stay intact", "[executor]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, 1'250'000'000);
  add(p, 1, swap(0, 3, 4));
  for (std::uint64_t seed : {1, 2, 3, 5, 8, 13}) {
    CAPTURE(seed);
    const Outcome out = run_both(t, p, /*iterations=*/100, seed);
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
    CHECK(out.comparison.identical);
    CHECK(out.run.error.empty());
    CHECK(out.run.unmapped_accesses == 0);
    CHECK(out.run.executor.divergences > 0);
    CHECK(out.run.executor.divergences <= out.run.perturbations);
  }
}

TEST_CASE("copies back issued at one op are issued in plan order, or as their blocks are needed where the plan says so", "[executor]") {
  // Blocks 1 to 3 (12 MB each) made by op 0, swapped out after it and issued back at op 2;
  // op 3 reads block 2, op 5 blocks 1 and 3. The plan lists 3, 1, 2.
  trace::Trace t = planner::testing::titanv_trace();
  for (std::uint64_t id : {1, 2, 3}) t.blocks.push_back(planner::testing::block(id, 12'000'000, 0, trace::kNever));
  planner::testing::op(t, "make", 10 * kMs, {{1, Access::write}, {2, Access::write}, {3, Access::write}});
  planner::testing::op(t, "filler_a", 100 * kMs, {});
  planner::testing::op(t, "filler_b", 1 * kMs, {});
  planner::testing::op(t, "read_2", 1 * kMs, {{2, Access::read}});
  planner::testing::op(t, "filler_c", 20 * kMs, {});
  planner::testing::op(t, "read_1_3", 1 * kMs, {{1, Access::read}, {3, Access::read}});
  plan::Plan p = plan_for(t, 40'000'000);
  add(p, 3, swap(0, 2, 5));
  add(p, 1, swap(0, 2, 5));
  add(p, 2, swap(0, 2, 3));
  const executor::StepProgram program = executor::step_program(t);
  const auto order = [&](const executor::ActionSchedule& schedule) {
    std::vector<std::uint64_t> ids;
    for (const executor::Action& a : schedule.ops[2].prefetch_at) ids.push_back(program.blocks[a.block].id);
    return ids;
  };
  CHECK(order(executor::schedule_actions(p, t, program)) == std::vector<std::uint64_t>{3, 1, 2});  // the plan's order
  p.predicted.copies_back_by_need = true;
  CHECK(order(executor::schedule_actions(p, t, program)) == std::vector<std::uint64_t>{2, 3, 1});  // a tie stays in plan order
  const Outcome out = run_both(t, p);
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
  CHECK(out.comparison.identical);
  CHECK(out.run.error.empty());
  CHECK(out.run.unmapped_accesses == 0);
  CHECK(out.run.executor.prefetches == 9);  // three a step, three steps
}

TEST_CASE("decisions the executor cannot carry out without losing data are refused before anything runs", "[executor]") {
  // Block 1 a parameter W; block 2 made by op 0 from W and read at op 3, then freed; op 1
  // writes block 3 only, which op 2 reads and the step hands on.
  trace::Trace t = planner::testing::titanv_trace_with_weights();
  t.blocks.push_back(planner::testing::block(2, 8'000'000, 0, 4 * kMs));
  t.blocks.push_back(planner::testing::block(3, 8'000'000, 0, trace::kNever));
  planner::testing::op(t, "make_2", 1 * kMs, {{1, Access::read}, {2, Access::write}});
  planner::testing::op(t, "make_3", 1 * kMs, {{3, Access::write}});
  planner::testing::op(t, "read_3", 1 * kMs, {{3, Access::read}});
  planner::testing::op(t, "read_2", 1 * kMs, {{2, Access::read}});
  const executor::StepProgram program = executor::step_program(t);
  const auto refused = [&](std::uint64_t block, const plan::Interval& interval) {
    plan::Plan p = plan_for(t, 40'000'000);
    add(p, block, interval);
    std::string why;
    try {
      executor::schedule_actions(p, t, program);
    } catch (const plan::PlanError& e) {
      why = e.what();
    }
    return why;
  };
  CHECK(refused(2, planner::testing::regeneration(0, 3, {0})).empty());  // the op that makes it: carried out
  CHECK(refused(2, planner::testing::swap(0, 2, 3)).empty());
  CHECK_THAT(refused(1, planner::testing::regeneration(0, 3, {0})), Catch::Contains("block 1") && Catch::Contains("live before the step"));
  CHECK_THAT(refused(2, planner::testing::regeneration(0, 3, {1})), Catch::Contains("block 2") && Catch::Contains("none of which writes it"));
  CHECK_THAT(refused(2, planner::testing::regeneration(0, 3, {3})), Catch::Contains("has not run yet"));
  plan::Interval stale = planner::testing::swap(2, 3, 4);
  stale.copy_after = 0;  // before op 1 writes it
  CHECK_THAT(refused(3, stale), Catch::Contains("block 3") && Catch::Contains("would be stale"));
  CHECK_THAT(refused(2, planner::testing::discard(0)), Catch::Contains("op 3 uses it after"));
  CHECK_THAT(refused(2, planner::testing::revival(0, 2, 3, {0})), Catch::Contains("before the program frees it") || Catch::Contains("never frees it"));
}

TEST_CASE("a plan made for another trace is refused", "[executor]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(planner::testing::concat_trace(), 1'250'000'000);
  const executor::StepProgram program = executor::step_program(t);
  CHECK_THROWS_AS(executor::schedule_actions(p, t, program), plan::PlanError);
}

TEST_CASE("a block freed while its copy out is still queued: the memory waits for the copy, the step does not",
          "[executor]") {
  // op0 writes Z (600 MiB, its copy out ~50 ms on the Titan V's link) and S (16 MiB). The plan
  // copies both out after op 0, S queued behind Z, and wants S back for op 2, its last use,
  // before its copy has even started; Z comes back during op 4 (100 ms) for op 5. The program
  // frees S after op 2: the copy still reads S's memory then, so the allocator must not hand it
  // out before the copy has passed (N, S's size, is allocated next), but the step need not wait.
  using planner::testing::block;
  constexpr std::uint64_t MiB = 1 << 20, kZ = 600 * MiB, kS = 16 * MiB;
  trace::Trace t = planner::testing::titanv_trace();
  t.blocks.push_back(block(1, kZ, 0, trace::kNever));
  t.blocks.push_back(block(2, kS, 0, 2 * kMs + kMs / 2));
  t.blocks.push_back(block(3, kS, 3 * kMs, 3 * kMs + kMs / 2));
  planner::testing::op(t, "produce", kMs, {{1, Access::write}, {2, Access::write}});
  planner::testing::op(t, "idle", kMs, {});
  planner::testing::op(t, "consume_s", kMs, {{2, Access::read}});
  planner::testing::op(t, "produce_n", kMs, {{3, Access::write}});
  planner::testing::op(t, "long", 100 * kMs, {});
  planner::testing::op(t, "consume_z", kMs, {{1, Access::read}});
  plan::Plan p = plan_for(t, 2'000'000'000);
  add(p, 1, swap(0, 4, 5));  // Z first: its copy is queued first
  plan::Interval early = swap(0, 1, 2);
  early.copy_after = 0;
  add(p, 2, early);
  add(p, 3, discard(3));  // N moved too, so that it is placed among the moved blocks, at S's
  const Outcome out = run_both(t, p);
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
  CHECK(out.comparison.identical);
  CHECK(out.run.executor.discards == 3);
  CHECK(out.run.error.empty());  // the sim device refuses a write racing the copy still reading S
  CHECK(out.run.unmapped_accesses == 0);
  // A step whose op 3 waited for S's copy, behind Z's, would take about 50 ms more.
  CHECK(out.run.step_time_ns < out.cache.step_time_ns + 10 * kMs);
}
