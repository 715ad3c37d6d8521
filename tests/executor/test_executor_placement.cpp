// The executor places blocks where the planner's ledger placed them when the host runs ahead of
// an eviction: the ledger frees an eviction once it has completed on the device, so an
// allocation the device reaches after that finds its pages free there; the host, ahead, still
// sees them held. Were the allocator then to flush its bins (its OOM path), later small blocks
// would go elsewhere than the plan was fitted with: the DTR transformer at 0.3, discards kept,
// was served 5.4% over its budget that way. Driven by hand on the sim, as a run does.
#include "executor/executor.hpp"
#include "executor_fixtures.hpp"

#include <delta/sim_device.hpp>

#include <catch2/catch.hpp>

using namespace delta;
using namespace delta::executor::testing;
using delta::planner::testing::kMs;
using trace::Access;

namespace {

constexpr std::uint64_t KiB = 1024, MiB = 1024 * KiB;
constexpr std::uint64_t kBig = 60 * MiB;  // 30 pages; its copy out takes 5.2 ms on the Titan V's link

// op0 (1 ms) writes D (discarded after it, its copy out kept), h, k and s1; h and s1 are freed
// after it; op1 (20 ms) reads k; op2 allocates L, as large as D, freed after it; op3 allocates
// s2, of s1's size.
trace::Trace host_ahead_trace() {
  using planner::testing::block;
  trace::Trace t = planner::testing::titanv_trace();
  t.blocks.push_back(block(1, kBig, 0, 22 * kMs + kMs / 2));         // D
  t.blocks.push_back(block(2, 8 * KiB, 0, kMs / 2));                  // h: leaves an 8 KiB hole
  t.blocks.push_back(block(3, 4 * KiB, 0, trace::kNever));            // k: keeps the hole a hole
  t.blocks.push_back(block(4, 4 * KiB, 0, kMs / 2));                  // s1
  t.blocks.push_back(block(5, kBig, 21 * kMs, 21 * kMs + kMs / 2));   // L
  t.blocks.push_back(block(6, 4 * KiB, 22 * kMs, 22 * kMs + kMs / 2));  // s2
  planner::testing::op(t, "make", kMs, {{1, Access::write}, {2, Access::write}, {3, Access::write}, {4, Access::write}});
  planner::testing::op(t, "long", 20 * kMs, {{3, Access::read}});
  planner::testing::op(t, "big", kMs, {{5, Access::write}});
  planner::testing::op(t, "small", kMs, {{6, Access::write}, {3, Access::read}});
  return t;
}

}  // namespace

TEST_CASE("short of pages behind an eviction the device has done, the allocator's bins stay as the planner's ledger keeps them",
          "[executor]") {
  const trace::Trace t = host_ahead_trace();
  // 32 pages: D and the small blocks' page, or L and that page, never all three.
  plan::Plan p = plan_for(t, 64 * MiB);
  plan::Interval discard;
  discard.action = plan::Action::discard;
  discard.release_after = 0;
  add(p, 1, discard);
  Rig rig(t, p);
  const auto launch = [&](const char* name, std::int64_t duration, std::vector<executor::LaunchRange> ranges) {
    rig.exec.before_launch(executor::Launch{name, rig.stream, ranges, {}});
    SimLaunch l;
    l.name = name;
    l.duration_ns = static_cast<std::uint64_t>(duration);
    for (const auto& r : ranges) (r.read ? l.reads : l.writes).push_back({r.ptr, r.bytes});
    rig.sim.launch(l, rig.stream);
    rig.exec.check_invariants();
    rig.allocator.check_invariants();
  };
  const auto at = [](void* p) { return reinterpret_cast<DevicePtr>(p); };
  void* d = rig.exec.allocate(kBig, rig.stream);
  void* h = rig.exec.allocate(8 * KiB, rig.stream);
  void* k = rig.exec.allocate(4 * KiB, rig.stream);
  void* s1 = rig.exec.allocate(4 * KiB, rig.stream);
  launch("make", kMs, {{at(d), kBig, false, true}, {at(h), 8 * KiB, false, true}, {at(k), 4 * KiB, false, true},
                       {at(s1), 4 * KiB, false, true}});
  rig.exec.deallocate(h);  // both go to the allocator's bins, unmerged; D's copy out starts
  rig.exec.deallocate(s1);
  launch("long", 20 * kMs, {{at(k), 4 * KiB, true, false}});
  // The host is microseconds into op 1, D's copy still running: L does not fit beside D. On the
  // device, op 2 starts after D's copy has completed, as the ledger frees it.
  void* l = rig.exec.allocate(kBig, rig.stream);
  CHECK(rig.exec.stats().pressure_waits == 1);  // for D's copy, rather than flush the allocator's bins
  launch("big", kMs, {{at(l), kBig, false, true}});
  rig.exec.deallocate(l);
  void* s2 = rig.exec.allocate(4 * KiB, rig.stream);
  // The ledger's allocator never flushed its bins: s2 takes s1's place. After a flush, s1 would
  // have merged into the free tail, and s2 would take the best fit, h's hole.
  CHECK(s2 == s1);
  launch("small", kMs, {{at(s2), 4 * KiB, false, true}, {at(k), 4 * KiB, true, false}});
  rig.exec.deallocate(s2);
  rig.exec.deallocate(d);
  rig.exec.end_step();
  rig.device->synchronize();
  CHECK(rig.exec.stats().discards == 1);
  CHECK(rig.exec.stats().budget_exceeded == 0);
  CHECK(rig.allocator.stats().reserved_peak <= p.budget_bytes);
  CHECK(rig.sim.counters().unmapped_accesses == 0);
  rig.exec.check_invariants();
}

TEST_CASE("a plan fitted packed in groups: the executor places its moved blocks in the plan's groups", "[executor]") {
  // op0 writes m1, v1, m2 and v2 (allocated in that order, as AdamW allocates each parameter's
  // two moments); op1 and op4 read the v's, op2 the m's. The m's are away over op 1, the v's over
  // ops 2 and 3: plan::packed_groups puts them in two groups.
  using planner::testing::block;
  constexpr std::uint64_t kMoment = 3 * MiB;  // 1.5 pages: packed side by side, two share a page
  trace::Trace t = planner::testing::titanv_trace();
  for (std::uint64_t id = 1; id <= 4; ++id) t.blocks.push_back(block(id, kMoment, 0, 5 * kMs + kMs / 2));
  planner::testing::op(t, "make", kMs, {{1, Access::write}, {2, Access::write}, {3, Access::write}, {4, Access::write}});
  planner::testing::op(t, "v", kMs, {{2, Access::read}, {4, Access::read}});
  planner::testing::op(t, "m", kMs, {{1, Access::read}, {3, Access::read}});
  planner::testing::op(t, "idle", kMs, {});
  planner::testing::op(t, "v again", kMs, {{2, Access::read}, {4, Access::read}});
  plan::Plan p = plan_for(t, 64 * MiB);
  for (std::uint64_t m : {1, 3}) add(p, m, planner::testing::swap(0, 1, 2));
  for (std::uint64_t v : {2, 4}) add(p, v, planner::testing::swap(1, 3, 4));
  p.predicted.executor_placement = true;
  p.predicted.packed_moves = true;
  p.predicted.packed_groups = true;  // as a plan fitted so says
  const auto groups = plan::packed_groups(p);
  REQUIRE(groups.at(1) == groups.at(3));
  REQUIRE(groups.at(2) == groups.at(4));
  REQUIRE(groups.at(1) != groups.at(2));

  Rig rig(t, p);
  std::vector<DevicePtr> at;
  for (int k = 0; k < 4; ++k) at.push_back(reinterpret_cast<DevicePtr>(rig.exec.allocate(kMoment, rig.stream)));
  // Each group side by side; the two groups on no common page.
  CHECK(at[2] == at[0] + kMoment);
  CHECK(at[3] == at[1] + kMoment);
  constexpr std::uint64_t kPage = 2 * MiB;
  for (int m : {0, 2})
    for (int v : {1, 3}) CHECK(((at[m] + kMoment - 1) / kPage < at[v] / kPage || (at[v] + kMoment - 1) / kPage < at[m] / kPage));
  rig.exec.check_invariants();
  rig.allocator.check_invariants();
  for (DevicePtr ptr : at) rig.exec.deallocate(reinterpret_cast<void*>(ptr));

  // And run as a program, three steps: bytes-equal to cache mode, nothing touched while away.
  const Outcome out = run_both(t, p);
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
  CHECK(out.comparison.identical);
  CHECK(out.run.error.empty());
  CHECK(out.run.unmapped_accesses == 0);
  CHECK(out.run.executor.swaps == 3 * 4);
}
