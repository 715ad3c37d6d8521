// The link's windows (bound/link_windows.cpp): stretches of ops that read more data made before
// them than the budget leaves room for at their start, worked out by hand; never above a plan.
#include "bound/link_window_stretches.hpp"
#include "bound/lower_bound.hpp"
#include "delta/pipeline.hpp"
#include "planner_fixtures.hpp"
#include "tiny_traces.hpp"

#include <catch2/catch.hpp>

using namespace delta;
using namespace delta::planner;
using namespace delta::planner::testing;

namespace {

// State P (kX: 100 ms over the link; live before the step) and Q (kX, loaded by op 1 with
// whatever it held: no replay can make it), read in turn the way an optimizer's launches read
// its lists, each freed after its last read (the step's end asks for neither). All ops 10 ms:
// native 60 ms.
trace::Trace lists_read_in_turn() {
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX, trace::kNever, 41 * kMs, trace::Category::optimizer_state));
  t.blocks.push_back(block(2, kX, 10 * kMs, 51 * kMs, trace::Category::optimizer_state));
  op(t, "update_p", 10 * kMs, {{1, Access::read}});
  op(t, "load_q", 10 * kMs, {{2, Access::touch}});
  op(t, "update_p_again", 10 * kMs, {{1, Access::read}});
  op(t, "update_q", 10 * kMs, {{2, Access::read}});
  op(t, "update_p_last", 10 * kMs, {{1, Access::read}});
  op(t, "update_q_last", 10 * kMs, {{2, Access::read}});
  return t;
}

}  // namespace

TEST_CASE("two stretches that each read both lists copy what the budget has no room for, each in its own time") {
  trace::Trace t = lists_read_in_turn();
  TraceIndex index(t);
  // Under 1.5 X: when op 1 starts it makes Q, so half of P is not on the device, and must come
  // in after op 1 ends (a copy back issued before it would hold its room during it) and before
  // op 2 starts: 50 ms of link, 50 ms more; so again from op 3. The half of P away when op 1
  // starts was copied out first (a step starts with no host copies): 50 ms of the
  // device-to-host lane in the 10 ms before op 1, 40 ms more. 140 ms over a 60 ms step.
  const OverheadBound bound = overhead_lower_bound(titanv_request(index, kX + kX / 2));
  REQUIRE(bound.status == OverheadBound::Status::bounded);
  CHECK(bound.link_windows_overhead == Approx(1.0 + 140.0 / 60.0).epsilon(1e-4));
  // The linear program, following every block at every op here, is the higher bound: it
  // also counts the copies out that make the room.
  CHECK(bound.overhead >= bound.link_windows_overhead);
  REQUIRE(bound.link_windows.size() == 2);
  CHECK(bound.link_windows[0].first == 1);
  CHECK(bound.link_windows[0].last < bound.link_windows[1].first);
  CHECK(bound.link_windows[0].waits_before_ms == Approx(40.0).epsilon(1e-4));
  CHECK(bound.link_windows[1].waits_before_ms == Approx(0.0).margin(1e-6));  // what it has away was copied out in time
  for (const LinkWindow& w : bound.link_windows) {
    CHECK(w.last == w.first + 1);
    CHECK(w.read_bytes - w.room_bytes == Approx(0.5 * double(kX)));
    CHECK(w.compute_ms == Approx(20.0));
    CHECK(w.added_ms == Approx(50.0).epsilon(1e-4));
    CHECK(w.rebuilt_bytes == Approx(0.0).margin(1.0));
  }
  // With room for both lists nothing needs to come in.
  const OverheadBound roomy = overhead_lower_bound(titanv_request(index, 2 * kX));
  CHECK(roomy.overhead == 1.0);
  CHECK(roomy.link_windows.empty());
}

TEST_CASE("split into launches of small blocks, the lists still come in within each stretch that reads them all") {
  using trace::Access;
  // The same two lists (freed after their last reads), each cut into 3000 blocks, and each update after the first two split
  // into three launches of 1000 blocks (10/3 ms each), as a GPU runs an optimizer's foreach
  // ops: no op reads a whole list. The stretches still read both lists (from the first launch
  // of P to the last of Q, and again): half a list away, at best the blocks of the last launch
  // and half the one before, due before the last starts, copied back from the stretch's first
  // op's end: from load_q (ops 1-4), 50 ms of link over two launches (20/3 ms), 130/3 ms more;
  // from P's first launch of the second round (ops 8-13, Q's last launches due), over three
  // launches, 110/3 ms; and 40 ms before the first, where half a list is copied out in the
  // 10 ms before it, over a 60 ms step. (Here the linear program's
  // blocks alike share a column and it follows them all; on GPT2-XL's launches, with hundreds
  // of gradients each a column of its own, it does not, and the windows are the tighter bound:
  // docs/planner-results.md.)
  constexpr std::uint64_t kBlocks = 3000, kLaunch = 1000;
  trace::Trace t = titanv_trace();
  std::vector<std::pair<std::uint64_t, Access>> whole_p, load_q;
  for (std::uint64_t k = 0; k < kBlocks; ++k) {
    t.blocks.push_back(block(1 + k, kX / kBlocks, trace::kNever, 41 * kMs, trace::Category::optimizer_state));
    t.blocks.push_back(block(10001 + k, kX / kBlocks, 10 * kMs, 51 * kMs, trace::Category::optimizer_state));
    whole_p.push_back({1 + k, Access::read});
    load_q.push_back({10001 + k, Access::touch});
  }
  op(t, "update_p", 10 * kMs, whole_p);
  op(t, "load_q", 10 * kMs, load_q);
  for (int round = 0; round < 2; ++round)
    for (std::uint64_t list : {1, 10001})
      for (std::uint64_t first = 0; first < kBlocks; first += kLaunch) {
        std::vector<std::pair<std::uint64_t, Access>> slice;
        for (std::uint64_t k = first; k < first + kLaunch; ++k) slice.push_back({list + k, Access::read});
        op(t, list == 1 ? "update_p_launch" : "update_q_launch", 10 * kMs / 3, slice);
      }
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, kX + kX / 2);
  const OverheadBound bound = overhead_lower_bound(request);
  REQUIRE(bound.status == OverheadBound::Status::bounded);
  CHECK(bound.link_windows_overhead == Approx(1.0 + (240.0 / 3.0 + 40.0) / 60.0).epsilon(1e-3));
  CHECK(bound.overhead >= bound.link_windows_overhead - 1e-9);
  REQUIRE(bound.link_windows.size() == 2);
  for (const LinkWindow& w : bound.link_windows) {
    CHECK(w.read_bytes - w.room_bytes == Approx(0.5 * double(kX)).epsilon(1e-6));
  }
  CHECK(bound.link_windows[0].first == 1);
  CHECK(bound.link_windows[0].added_ms == Approx(130.0 / 3.0).epsilon(1e-3));
  CHECK(bound.link_windows[1].first == 8);
  CHECK(bound.link_windows[1].added_ms == Approx(110.0 / 3.0).epsilon(1e-3));
  CHECK(bound.link_windows[0].waits_before_ms == Approx(40.0).epsilon(1e-3));
}

TEST_CASE("what the step made may be rebuilt within the stretch rather than copied in") {
  using trace::Access;
  // Op 0 makes A (kX), op 1 makes B (0.75 X), op 2 reads B, op 3 reads A; 10 ms each. Under
  // 1.25 X, when op 2 starts B is on the device, so half of A is not, and comes in after op 2
  // ends, or is rebuilt by replaying op 0, before op 3 starts. A share s copied and r rebuilt
  // (s + r = 1/2) add max(100 s, 10 r) ms, and the share copied in was copied out after op 0
  // made it and before op 2: 100 s ms of the device-to-host lane in the 20 ms before op 2, else
  // the step waits. Least at s = 1 / 22: 10 x (0.5 - 1 / 22) = 4.55 ms over a 40 ms step.
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX, 0, 40 * kMs));
  t.blocks.push_back(block(2, kX / 4 * 3, 10 * kMs, 30 * kMs));
  op(t, "make_a", 10 * kMs, {{1, Access::write}});
  op(t, "make_b", 10 * kMs, {{2, Access::write}});
  op(t, "read_b", 10 * kMs, {{2, Access::read}});
  op(t, "read_a", 10 * kMs, {{1, Access::read}});
  TraceIndex index(t);
  const OverheadBound bound = overhead_lower_bound(titanv_request(index, kX + kX / 4));
  REQUIRE(bound.status == OverheadBound::Status::bounded);
  REQUIRE(bound.link_windows.size() == 1);
  const LinkWindow& w = bound.link_windows[0];
  CHECK(w.first == 2);
  CHECK(w.last == 3);
  CHECK(w.read_bytes == Approx(1.75 * double(kX)));
  CHECK(w.room_bytes == Approx(1.25 * double(kX)));
  const double copied = 1.0 / 22.0;
  CHECK(w.added_ms == Approx(10.0 * (0.5 - copied)).epsilon(1e-4));
  CHECK(w.waits_before_ms == Approx(0.0).margin(1e-6));
  CHECK(w.rebuilt_bytes == Approx((0.5 - copied) * double(kX)).epsilon(1e-4));
  CHECK(w.copied_bytes == Approx(copied * double(kX)).epsilon(1e-4));
  CHECK(w.replay_ms == Approx(10.0 * (0.5 - copied)).epsilon(1e-4));
  REQUIRE(w.replays.size() == 1);
  CHECK(w.replays[0].first == "make_a");
  CHECK(bound.link_windows_overhead == Approx(1.0 + 10.0 * (0.5 - copied) / 40.0).epsilon(1e-4));
  CHECK(bound.overhead >= bound.link_windows_overhead - 1e-9);
  plan::Plan plan = plan_delta(titanv_request(index, kX + kX / 4));
  REQUIRE(plan.predicted.feasible);
  CHECK(plan.predicted.overhead >= bound.overhead - 1e-9);
}

namespace {

// Test 3's stretch, where what A is rebuilt from is an activation X (kX/4) that a forward op
// made from a parameter W, and freed: a rebuild of A replays `grad` from X, held when the
// stretch starts or revived by replaying `forward` (1 ms). `in_place_update`: an optimizer op
// updates W in place before the stretch, so no replay can make X again there.
trace::Trace rebuilt_through_a_parameter(bool in_place_update) {
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX / 100, trace::kNever, trace::kNever, trace::Category::parameter));  // W
  t.blocks.push_back(block(2, kX / 4, 0, 11 * kMs));                                                  // X
  t.blocks.push_back(block(3, kX, 1 * kMs, trace::kNever));                                           // A
  t.blocks.push_back(block(4, kX / 4 * 3, 21 * kMs, 41 * kMs));                                        // B
  op(t, "forward", 1 * kMs, {{1, Access::read}, {2, Access::write}});
  op(t, "grad", 10 * kMs, {{2, Access::read}, {3, Access::write}});
  if (in_place_update)
    op(t, "update_w", 10 * kMs, {{1, Access::read}, {1, Access::write}});
  else
    op(t, "read_w", 10 * kMs, {{1, Access::read}});
  op(t, "make_b", 10 * kMs, {{4, Access::write}});
  op(t, "read_b", 10 * kMs, {{4, Access::read}});
  op(t, "read_a", 10 * kMs, {{3, Access::read}});
  return t;
}

}  // namespace

TEST_CASE("a rebuild cannot revive an activation whose parameter the optimizer has since updated in place") {
  const std::uint64_t budget = kX + kX / 4 + kX / 100;
  // The stretch is read_b .. read_a: 1.75 X + W read (W is back on the device when the step
  // ends), room for 1.25 X + W: 0.5 X is away when it starts. W, not read there, is due only
  // at the stretch's end: all of it away costs 1 ms of link; a share e = 0.49 of A is due before
  // read_a starts, copied from read_b's end. With X held (its quarter counted against the room,
  // s + 3r/4 = e) a rebuild replays only `grad`: the added time max(100 s, 10 r) is least at
  // r = 100 e / 85.
  const double e = 0.49;
  const double held_only_ms = 10.0 * (100.0 * e) / 85.0;
  trace::Trace updated = rebuilt_through_a_parameter(true);
  TraceIndex updated_index(updated);
  const OverheadBound bound = overhead_lower_bound(titanv_request(updated_index, budget));
  REQUIRE(bound.status == OverheadBound::Status::bounded);
  REQUIRE(bound.link_windows.size() == 1);
  CHECK(bound.link_windows[0].first == 4);
  CHECK(bound.link_windows[0].last == 5);
  CHECK(bound.link_windows[0].added_ms == Approx(held_only_ms).epsilon(1e-4));
  // X held for the share of A rebuilt, replaying `grad` alone.
  const double r = held_only_ms / 10.0;
  CHECK(bound.link_windows[0].held_bytes == Approx(r * double(kX / 4)).epsilon(1e-4));
  CHECK(bound.link_windows[0].revived_bytes == Approx(0.0).margin(1.0));
  CHECK(bound.link_windows[0].replay_ms == Approx(held_only_ms).epsilon(1e-4));
  // W read only: reviving X by replaying `forward` is cheaper than holding it.
  trace::Trace read_only = rebuilt_through_a_parameter(false);
  TraceIndex read_only_index(read_only);
  const OverheadBound looser = overhead_lower_bound(titanv_request(read_only_index, budget));
  REQUIRE(looser.link_windows.size() == 1);
  CHECK(looser.link_windows[0].added_ms < held_only_ms - 0.3);
  CHECK(looser.link_windows[0].revived_bytes > 0.1 * double(kX / 4));
  // The linear program over the whole step asks the same at its checkpoints: a rebuild of A
  // after update_w holds X (1.1046 against 1.0841 here; 1.0863 while it could revive X).
  CHECK(bound.overhead > looser.overhead + 0.015);
  // Never above a plan.
  for (TraceIndex* index : {&updated_index, &read_only_index}) {
    plan::Plan plan = plan_delta(titanv_request(*index, budget));
    if (plan.predicted.feasible) CHECK(plan.predicted.overhead >= overhead_lower_bound(titanv_request(*index, budget)).overhead - 1e-9);
  }
}

TEST_CASE("an input held for a rebuild in one stretch takes room in the stretch before, where it was freed before both") {
  using trace::Access;
  // X (kX/4), made by `forward` from the parameter W and freed after `grad` made A (kX) from
  // it; W is updated in place, so no replay can make X again. Stretch 1 (read_b1, read_s)
  // reads B1 and S (inputs: nothing rebuilds them), stretch 2 (read_b2, read_a) B2 and A, each
  // 0.5 X - W beyond its room over 20 ms of compute; 200 ms of compute between them.
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX / 100, trace::kNever, trace::kNever, trace::Category::parameter));  // W
  t.blocks.push_back(block(2, kX / 4, 0, 11 * kMs));                                                  // X
  t.blocks.push_back(block(3, kX, 1 * kMs, trace::kNever));                                           // A
  t.blocks.push_back(block(4, kX, 21 * kMs, 61 * kMs, trace::Category::input));                       // S
  t.blocks.push_back(block(5, kX / 4 * 3, 31 * kMs, 51 * kMs, trace::Category::input));               // B1
  t.blocks.push_back(block(6, kX / 4 * 3, 261 * kMs, 281 * kMs, trace::Category::input));             // B2
  op(t, "forward", 1 * kMs, {{1, Access::read}, {2, Access::write}});
  op(t, "grad", 10 * kMs, {{2, Access::read}, {3, Access::write}});
  op(t, "update_w", 10 * kMs, {{1, Access::read}, {1, Access::write}});
  op(t, "make_s", 10 * kMs, {{4, Access::write}});
  op(t, "make_b1", 10 * kMs, {{5, Access::write}});
  op(t, "read_b1", 10 * kMs, {{5, Access::read}});
  op(t, "read_s", 10 * kMs, {{4, Access::read}});
  op(t, "elsewhere", 200 * kMs, {{1, Access::read}});
  op(t, "make_b2", 10 * kMs, {{6, Access::write}});
  op(t, "read_b2", 10 * kMs, {{6, Access::read}});
  op(t, "read_a", 10 * kMs, {{3, Access::read}});
  TraceIndex index(t);
  const OverheadBound bound = overhead_lower_bound(titanv_request(index, kX + kX / 4 + kX / 100));
  REQUIRE(bound.status == OverheadBound::Status::bounded);
  REQUIRE(bound.link_windows.size() == 2);
  CHECK(bound.link_windows[0].first == 5);
  CHECK(bound.link_windows[1].first == 9);
  // A share r of A rebuilt in stretch 2 holds r of X there (s + 3r/4 = e2, added
  // max(100 s, 10 r), A copied back from read_b2's end and due before read_a starts), and so in
  // stretch 1 too, which copies in r/4 X more of S, from read_b1's end and due before read_s
  // starts: 100 (e + r/4); what S has away then, made by op 3, was copied out before op 5,
  // 100 (e + r/4) ms of the device-to-host lane in the 41 ms before: 100 (e + r/4) - 41 more.
  // Least at r = 100 e2 / 85, the rebuild's 10 ms a unit against the copies' 75 in stretch 2,
  // 50 in stretch 1 and its wait. Stretch 1's e is 0.49; stretch 2 runs to the step's end,
  // where W is on the device too, due there alone: it has all of W away (1 ms of link over
  // 10 ms), and its e2 is 0.49 as well.
  const double e = 0.5 - 0.01, e2 = 0.5 - 0.01, r = 100.0 * e2 / 85.0;
  CHECK(bound.link_windows[0].added_ms == Approx(100.0 * (e + r / 4)).epsilon(1e-4));
  CHECK(bound.link_windows[0].waits_before_ms == Approx(100.0 * (e + r / 4) - 41.0).epsilon(1e-4));
  CHECK(bound.link_windows[1].added_ms == Approx(10.0 * r).epsilon(1e-4));
  CHECK(bound.link_windows_overhead ==
        Approx(1.0 + (2.0 * 100.0 * (e + r / 4) - 41.0 + 10.0 * r) / 291.0).epsilon(1e-4));
  plan::Plan plan = plan_delta(titanv_request(index, kX + kX / 4 + kX / 100));
  if (plan.predicted.feasible) CHECK(plan.predicted.overhead >= bound.overhead - 1e-9);
}

TEST_CASE("a stretch that starts just before the optimizer's first in-place update is also tried from that update") {
  using trace::Access;
  // A (kX) rebuilt by `grad` from X (kX/4), which `forward` made from the parameter W; B
  // (0.75 X) and D (0.05 X) are inputs. The stretch chosen, read_d .. read_a, reads
  // D, B and A: 0.55 X beyond its room over 22 ms, and there X is revived by replaying
  // `forward` (1 ms) before update_w changes W. From update_w on, 0.5 X beyond the room, and X
  // can only be held (a quarter of what a rebuild of A frees): A, copied back from update_w's
  // end and due before read_a starts (10 ms of compute, where B is due at once), s + 3r/4 =
  // 0.5, max(100 s - 10, 10 r) least at r = 40/85, more than from read_d.
  // (make_b is long enough for what either stretch copies in to be copied out before it.) W
  // and D are freed after their last uses, so that the step's end asks for neither.
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX / 100, trace::kNever, 112 * kMs + kMs / 2, trace::Category::parameter));  // W
  t.blocks.push_back(block(2, kX / 4, 0, 11 * kMs));                                                  // X
  t.blocks.push_back(block(3, kX, 1 * kMs, trace::kNever));                                           // A
  t.blocks.push_back(block(4, kX / 4 * 3, 11 * kMs, 123 * kMs, trace::Category::input));              // B
  t.blocks.push_back(block(5, kX / 20, trace::kNever, 111 * kMs + kMs / 2, trace::Category::input));    // D
  op(t, "forward", 1 * kMs, {{1, Access::read}, {2, Access::write}});
  op(t, "grad", 10 * kMs, {{2, Access::read}, {3, Access::write}});
  op(t, "make_b", 100 * kMs, {{4, Access::write}});
  op(t, "read_d", 1 * kMs, {{5, Access::read}});
  op(t, "update_w", 1 * kMs, {{1, Access::read}, {1, Access::write}});
  op(t, "read_b", 10 * kMs, {{4, Access::read}});
  op(t, "read_a", 10 * kMs, {{3, Access::read}});
  TraceIndex index(t);
  const OverheadBound bound = overhead_lower_bound(titanv_request(index, kX + kX / 4 + kX / 100));
  REQUIRE(bound.status == OverheadBound::Status::bounded);
  const PlanRequest request = titanv_request(index, kX + kX / 4 + kX / 100);
  const relaxation::LinkRates rates{1e3 / request.gpu.h2d_bytes_per_s, 1e3 / request.gpu.d2h_bytes_per_s};
  const std::vector<relaxation::Stretch> from_read_d{relaxation::stretch_over(index, request.budget_bytes, 3, 6)};
  const std::vector<relaxation::Stretch> from_update = relaxation::from_first_updates(index, request.budget_bytes, from_read_d);
  REQUIRE(from_update.size() == 1);
  CHECK(from_update[0].first == 4);
  CHECK(from_update[0].last == 6);
  const double at_update = relaxation::solve_stretches(index, from_update, rates, 30).added_ms;
  CHECK(at_update == Approx(10.0 * 40.0 / 85.0).epsilon(1e-4));
  CHECK(at_update > relaxation::solve_stretches(index, from_read_d, rates, 30).added_ms + 0.1);
  // The search keeps at least that; here more: when `grad` starts A is made beside X, W and D,
  // so D (0.05 X) is away, copied out in forward's 1 ms (4 ms more), and [read_b, read_a] alone
  // has A due from read_b's end.
  const double native_ms = 133.0;  // 1 + 10 + 100 + 1 + 1 + 10 + 10
  CHECK(bound.link_windows_overhead >= 1.0 + at_update / native_ms - 1e-9);
  plan::Plan plan = plan_delta(request);
  if (plan.predicted.feasible) CHECK(plan.predicted.overhead >= bound.overhead - 1e-9);
}

TEST_CASE("a foreach op's outputs take their room from its first launch, and none is rebuilt before its first write") {
  using trace::Access;
  // P (kX, live before the step) is read by op 0 and op 5. A foreach op allocates Q1 and Q2
  // (0.5 X each) at its first launch, op 1, which writes Q1; op 2 writes Q2; ops 3 and 4 read
  // them. Under 1.5 X, when op 1 starts Q1 and Q2 are placed, so half of P or of Q2 is not
  // on the device, and neither can be rebuilt (P was never made, Q2 holds nothing yet): 0.5 X
  // comes in, at best of P, after op 1 ends and before op 5 starts, 21 ms of compute, 29 ms more
  // (Q2 would be due before op 2, at once); and the half away was copied out
  // first (P has no host copy when the step starts, Q2 none until placed), 50 ms of the
  // device-to-host lane in the 10 ms before op 1, 40 ms more. Counted from its first write, Q2
  // would leave room at op 1, and the stretches after it rebuild Q1 or Q2 by a 1 ms replay.
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX, trace::kNever, 33 * kMs, trace::Category::optimizer_state));  // P
  t.blocks.push_back(block(2, kX / 2, 10 * kMs, 13 * kMs, trace::Category::temporary));         // Q1
  t.blocks.push_back(block(3, kX / 2, 10 * kMs, 23 * kMs, trace::Category::temporary));         // Q2
  op(t, "read_p", 10 * kMs, {{1, Access::read}});
  op(t, "launch_1", 1 * kMs, {{2, Access::write}});
  op(t, "launch_2", 1 * kMs, {{3, Access::write}});
  op(t, "read_q1", 10 * kMs, {{2, Access::read}});
  op(t, "read_q2", 10 * kMs, {{3, Access::read}});
  op(t, "read_p_again", 10 * kMs, {{1, Access::read}});
  TraceIndex index(t);
  REQUIRE(index.block(2).first == 1);  // Q2 placed at op 1, first written at op 2
  const PlanRequest request = titanv_request(index, kX + kX / 2);
  const OverheadBound bound = overhead_lower_bound(request);
  REQUIRE(bound.status == OverheadBound::Status::bounded);
  REQUIRE(bound.link_windows.size() == 1);
  const LinkWindow& w = bound.link_windows[0];
  CHECK(w.first == 1);
  CHECK(w.last == 5);
  CHECK(w.read_bytes == Approx(1.5 * double(kX)));
  CHECK(w.room_bytes == Approx(1.0 * double(kX)));
  CHECK(w.added_ms == Approx(50.0 - 21.0).epsilon(1e-4));
  CHECK(w.waits_before_ms == Approx(40.0).epsilon(1e-4));
  CHECK(w.rebuilt_bytes == Approx(0.0).margin(1.0));
  CHECK(bound.link_windows_overhead == Approx(1.0 + 69.0 / 42.0).epsilon(1e-4));
  CHECK(bound.overhead >= bound.link_windows_overhead - 1e-9);
  plan::Plan plan = plan_delta(request);
  if (plan.predicted.feasible) CHECK(plan.predicted.overhead >= bound.overhead - 1e-9);
}

TEST_CASE("a stretch that runs to the step's end brings back what lives past it, read there or not") {
  using trace::Access;
  // P (kX) lives across the step and is read only by op 0; op 1 makes T (kX), op 2 reads it.
  // Under 1.5 X half of P is away when op 2 starts beside T, and every plan has P whole on
  // the device when the step ends: 0.5 X comes in after op 2 ends, 50 ms more; that half was
  // copied out in the 20 ms before op 2, 30 ms more.
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX, trace::kNever, trace::kNever, trace::Category::optimizer_state));  // P
  t.blocks.push_back(block(2, kX, 10 * kMs, 21 * kMs));                                               // T
  op(t, "read_p", 10 * kMs, {{1, Access::read}});
  op(t, "make_t", 10 * kMs, {{2, Access::write}});
  op(t, "read_t", 10 * kMs, {{2, Access::read}});
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, kX + kX / 2);
  const OverheadBound bound = overhead_lower_bound(request);
  REQUIRE(bound.status == OverheadBound::Status::bounded);
  REQUIRE(bound.link_windows.size() == 1);
  CHECK(bound.link_windows[0].first == 2);
  CHECK(bound.link_windows[0].last == 2);
  CHECK(bound.link_windows[0].read_bytes == Approx(2.0 * double(kX)));  // T at op 2, P at the end
  CHECK(bound.link_windows[0].added_ms == Approx(50.0).epsilon(1e-4));
  CHECK(bound.link_windows[0].waits_before_ms == Approx(30.0).epsilon(1e-4));
  CHECK(bound.link_windows_overhead == Approx(1.0 + 80.0 / 30.0).epsilon(1e-4));
  CHECK(bound.overhead >= bound.link_windows_overhead - 1e-9);
  plan::Plan plan = plan_delta(request);
  if (plan.predicted.feasible) CHECK(plan.predicted.overhead >= bound.overhead - 1e-9);
}

TEST_CASE("a stretch starts at the op whose inputs die when it ends, though the choice's sampled starts miss it") {
  using trace::Access;
  // P (kX, live before the step) is read by `update`; G1 and G2 (kX/4 each, loaded: nothing
  // rebuilds them) are summed by `sum` into G (kX/4), which `update` reads. Under 1.26 X,
  // when `sum` starts its inputs are on the device beside its output: 0.49 of P is away and
  // comes in after `sum` ends and before `update` starts, 49 ms more, and was copied out in the
  // 21.4 ms before `sum`, 27.6 ms more. One op earlier the stretch has room for 0.76 of P
  // (24 ms and 2.6 ms). 1,400 idle ops before `sum` and 2,000 later (Q and R, loaded later, both live
  // there) put it where the choice's evenly spread starts skip it and take the op before.
  trace::Trace t = titanv_trace();
  auto end_of = [&](std::size_t o) { return t.ops[o].start_ns + t.ops[o].duration_ns; };
  constexpr std::size_t kBefore = 1400, kBetween = 2000, kAfter = 100;
  op(t, "start", 10 * kMs, {});
  op(t, "load_g", 10 * kMs, {{2, Access::touch}, {3, Access::touch}});
  for (std::size_t k = 0; k < kBefore; ++k) op(t, "idle", kMs / 1000, {});
  const std::size_t sum = t.ops.size();
  op(t, "sum", 10 * kMs, {{2, Access::read}, {3, Access::read}, {4, Access::write}});
  op(t, "update", 10 * kMs, {{1, Access::read}, {4, Access::read}});
  const std::size_t load_q = t.ops.size();
  op(t, "load_q", kMs, {{5, Access::touch}});
  op(t, "load_r", kMs, {{6, Access::touch}});
  for (std::size_t k = 0; k < kBetween; ++k) op(t, "idle", kMs / 1000, {});
  const std::size_t read_r = t.ops.size();
  op(t, "read_r", 10 * kMs, {{6, Access::read}});
  for (std::size_t k = 0; k < kAfter; ++k) op(t, "idle", kMs, {});
  op(t, "read_q", 10 * kMs, {{5, Access::read}});
  const std::size_t last = t.ops.size() - 1;
  t.blocks.push_back(block(1, kX, trace::kNever, end_of(sum + 1), trace::Category::optimizer_state));  // P
  t.blocks.push_back(block(2, kX / 4, t.ops[1].start_ns, end_of(sum), trace::Category::input));                        // G1
  t.blocks.push_back(block(3, kX / 4, t.ops[1].start_ns, end_of(sum), trace::Category::input));                        // G2
  t.blocks.push_back(block(4, kX / 4, t.ops[sum].start_ns, end_of(sum + 1)));                          // G
  t.blocks.push_back(block(5, kX, t.ops[load_q].start_ns, end_of(last), trace::Category::input));      // Q
  t.blocks.push_back(block(6, kX / 2, t.ops[load_q + 1].start_ns, end_of(read_r), trace::Category::input));  // R
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, kX + kX / 4 + kX / 100);
  const OverheadBound bound = overhead_lower_bound(request);
  REQUIRE(bound.status == OverheadBound::Status::bounded);
  REQUIRE(bound.link_windows.size() == 1);
  const LinkWindow& w = bound.link_windows[0];
  CHECK(w.first == sum);
  CHECK(w.last == sum + 1);
  CHECK(w.read_bytes - w.room_bytes == Approx(0.49 * double(kX)));
  CHECK(w.added_ms == Approx(49.0).epsilon(1e-4));
  CHECK(w.waits_before_ms == Approx(49.0 - 21.4).epsilon(1e-4));
  const double native_ms = double(end_of(last)) / kMs;
  CHECK(bound.link_windows_overhead == Approx(1.0 + (49.0 + 49.0 - 21.4) / native_ms).epsilon(1e-4));
  // The starts nearby: `sum` first, the most the swap-only excess rises (only rises count).
  const relaxation::Stretch later = relaxation::stretch_over(index, request.budget_bytes, sum + 1, sum + 1);
  const std::vector<std::uint32_t> nearby =
      relaxation::nearby_starts(index, request.budget_bytes, 1e3 / request.gpu.h2d_bytes_per_s, later, -1, 4, 8);
  REQUIRE_FALSE(nearby.empty());
  CHECK(nearby.front() == sum);
  CHECK(std::find(nearby.begin(), nearby.end(), sum + 1) == nearby.end());
  plan::Plan plan = plan_delta(request);
  if (plan.predicted.feasible) CHECK(plan.predicted.overhead >= bound.overhead - 1e-9);
}

TEST_CASE("a crunch at the end of a long stretch counts on its own, and the state away before it is copied back or still away") {
  using trace::Access;
  // S (kX, optimizer state, live before the step) is read only by the last op, `update`. A (kX,
  // loaded by `load_a`, read by `read_a`) and then G1, G2 (kX/4 each, loaded) and their sum G
  // (kX/4) take the room in turn; none can be rebuilt. Under 1.26 X, when `load_a` starts 0.74
  // of S is away: copied out over the device-to-host lane in the 44 ms before it, 30 ms more.
  // When `sum` starts its inputs are on the device beside its output: 0.49 of S is away, and
  // comes in after `sum` ends, before `update` starts: 49 ms more. 79 ms in all. One stretch
  // from `load_a` to the end sees only the first (0.74 of S back by `update`, from load_a's end:
  // 44 ms, and the 30 ms before); split at `sum`, a first part that reads nothing of its own sees nothing
  // unless what it has away of S is followed into the second: back over its lane (0.25 of S in
  // 30 ms), or away there.
  trace::Trace t = titanv_trace();
  op(t, "start", 44 * kMs, {});
  op(t, "load_a", 10 * kMs, {{2, Access::touch}});
  op(t, "read_a", 10 * kMs, {{2, Access::read}});
  op(t, "load_g", 10 * kMs, {{3, Access::touch}, {4, Access::touch}});
  op(t, "sum", 10 * kMs, {{3, Access::read}, {4, Access::read}, {5, Access::write}});
  op(t, "update", 10 * kMs, {{1, Access::read}, {5, Access::read}});
  auto end_of = [&](std::size_t o) { return t.ops[o].start_ns + t.ops[o].duration_ns; };
  t.blocks.push_back(block(1, kX, trace::kNever, end_of(5), trace::Category::optimizer_state));  // S
  t.blocks.push_back(block(2, kX, t.ops[1].start_ns, end_of(2), trace::Category::input));        // A
  t.blocks.push_back(block(3, kX / 4, t.ops[3].start_ns, end_of(4), trace::Category::input));    // G1
  t.blocks.push_back(block(4, kX / 4, t.ops[3].start_ns, end_of(4), trace::Category::input));    // G2
  t.blocks.push_back(block(5, kX / 4, t.ops[4].start_ns, end_of(5)));                            // G
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, kX + kX / 4 + kX / 100);
  const relaxation::LinkRates rates{1e3 / request.gpu.h2d_bytes_per_s, 1e3 / request.gpu.d2h_bytes_per_s};
  auto total = [&](const relaxation::LinkWindowBound& b) {
    double ms = 0;
    for (const LinkWindow& w : b.windows) ms += w.added_ms + w.waits_before_ms;
    return ms;
  };
  auto solve = [&](std::vector<std::pair<std::uint32_t, std::uint32_t>> spans) {
    std::vector<relaxation::Stretch> stretches;
    for (auto [first, last] : spans) stretches.push_back(relaxation::stretch_over(index, request.budget_bytes, first, last));
    return relaxation::solve_stretches(index, stretches, rates, 30);
  };
  CHECK(total(solve({{1, 5}})) == Approx(74.0).epsilon(1e-4));
  CHECK(total(solve({{4, 5}})) == Approx(49.0).epsilon(1e-4));  // alone: S's copies out fit in the 74 ms before
  const relaxation::LinkWindowBound split = solve({{1, 3}, {4, 5}});
  REQUIRE(split.windows.size() == 2);
  CHECK(split.windows[0].next_reads_bytes == Approx(double(kX)));  // S, read by the second alone
  CHECK(split.windows[1].next_reads_bytes == 0.0);
  CHECK(split.windows[0].waits_before_ms == Approx(30.0).epsilon(1e-4));
  CHECK(split.windows[0].added_ms == Approx(0.0).margin(1e-6));  // 0.25 of S back over its 30 ms
  CHECK(split.windows[1].added_ms == Approx(49.0).epsilon(1e-4));
  CHECK(total(split) == Approx(79.0).epsilon(1e-4));
  // The split is found: `sum` is where the end alone needs the link and the op after it does not.
  const relaxation::Stretch whole = relaxation::stretch_over(index, request.budget_bytes, 1, 5);
  const std::vector<std::uint32_t> points = relaxation::split_points(index, request.budget_bytes, rates.h2d_ms_per_byte, whole, 2);
  CHECK(std::find(points.begin(), points.end(), 4u) != points.end());
  const OverheadBound bound = overhead_lower_bound(request);
  REQUIRE(bound.status == OverheadBound::Status::bounded);
  const double native_ms = double(end_of(5)) / kMs;
  // The search splits the stretches it chose; it need not find every split, but never keeps
  // less than one stretch from `load_a` gives.
  CHECK(bound.link_windows_overhead >= 1.0 + 74.0 / native_ms - 1e-6);
  CHECK(bound.overhead >= bound.link_windows_overhead - 1e-9);
  plan::Plan plan = plan_delta(request);
  if (plan.predicted.feasible) CHECK(plan.predicted.overhead >= bound.overhead - 1e-9);
}
