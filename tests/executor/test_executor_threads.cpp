// The executor's entry points from several threads: the program's thread allocates, launches
// and frees while another reads the figures, the state and the invariants, as a monitoring
// thread or delta_stats_json() from Python would. Run under ThreadSanitizer in CI.
#include "executor/routes/sim_route.hpp"
#include "executor_fixtures.hpp"

#include <delta/sim_device.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

using namespace delta;
using namespace delta::executor::testing;

TEST_CASE("figures and invariants read from another thread while a plan runs", "[executor][threads]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, 1'250'000'000);
  add(p, 1, swap(0, 3, 4));
  Rig rig(t, p);
  const executor::StepProgram& program = rig.program;
  executor::Executor& exec = rig.exec;
  SimDevice& sim = rig.sim;
  executor::SimLaunchRoute route(sim, exec);
  const StreamHandle stream = rig.stream;

  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> reads{0};
  std::thread monitor([&] {
    while (!done.load()) {
      const executor::ExecutorStats s = exec.stats();
      exec.check_invariants();
      (void)exec.state_json();
      (void)s;
      reads++;
    }
  });
  std::vector<DevicePtr> ptr(program.blocks.size(), 0);
  for (int step = 0; step < 20; ++step) {
    if (ptr[0]) exec.deallocate(reinterpret_cast<void*>(ptr[0]));  // X is carried over to the next step
    ptr[0] = 0;
    for (std::uint32_t k = 0; k < program.ops.size(); ++k) {
      for (std::uint32_t b : program.ops[k].allocate_before)
        ptr[b] = reinterpret_cast<DevicePtr>(exec.allocate(program.blocks[b].size, stream));
      SimLaunch l;
      l.name = program.ops[k].name;
      l.duration_ns = 1000;
      l.seed = k + 1;
      for (const executor::StepUse& u : program.ops[k].uses) {
        if (u.read) l.reads.push_back({ptr[u.block], program.blocks[u.block].size});
        if (u.write) l.writes.push_back({ptr[u.block], program.blocks[u.block].size});
      }
      sim.launch(l, stream);
      for (std::uint32_t b : program.ops[k].free_after) {
        exec.deallocate(reinterpret_cast<void*>(ptr[b]));
        ptr[b] = 0;
      }
    }
    exec.end_step();
  }
  exec.finish();
  done = true;
  monitor.join();
  CHECK(reads.load() > 0);
  CHECK(exec.stats().swaps == 20);
  CHECK(exec.stats().divergences == 0);
  CHECK(sim.counters().unmapped_accesses == 0);
}
