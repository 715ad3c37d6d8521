// The online policy: no plan, a budget. Blocks swapped out and back are bytes-equal; every
// block a launch touches is on the device when it runs; the budget holds; the stalest large
// block goes first; several program threads at once. And the policy runs the shared DTR logs
// as programs identical to cache mode.
#include "executor/online/online_policy.hpp"
#include "executor/routes/sim_route.hpp"
#include "executor/step/step_program.hpp"
#include "tools/execute/auto_program.hpp"
#include "trace/trace_index.hpp"
#include "trace/trace_loading.hpp"

#include <delta/allocator.hpp>
#include <delta/sim_device.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <filesystem>
#include <thread>

using namespace delta;

namespace {

constexpr std::size_t kPage = std::size_t{2} << 20;

struct OnlineRig {
  explicit OnlineRig(std::uint64_t budget, SimContent content = SimContent::bytes)
      : device(make_sim_device(SimOptions{.profile = "titanv", .content = content})),
        sim(*as_sim(device.get())),
        allocator(device, AllocatorConfig{}),
        policy(allocator, executor::OnlineOptions{.budget_bytes = budget}),
        route(sim, policy),
        stream(device->create_stream()) {}
  std::shared_ptr<Device> device;
  SimDevice& sim;
  CachingAllocator allocator;
  executor::OnlinePolicy policy;
  executor::SimLaunchRoute route;
  StreamHandle stream;

  // A kernel that reads `ptr` (its bytes unchanged), through the launch hook.
  void read(DevicePtr ptr, std::size_t bytes, std::uint64_t seed) {
    SimLaunch l;
    l.name = "read";
    l.duration_ns = 1000;
    l.seed = seed;
    l.reads.push_back({ptr, bytes});
    sim.launch(l, stream);
  }
};

std::vector<std::uint8_t> pattern(std::size_t bytes, std::uint8_t seed) {
  std::vector<std::uint8_t> out(bytes);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::uint8_t>(seed * 31 + i * 7 + (i >> 11));
  return out;
}

}  // namespace

TEST_CASE("blocks swapped out and back are bytes-equal, within the budget", "[online]") {
  OnlineRig rig(4 * kPage);  // four blocks of a page fit; ten are made
  std::vector<DevicePtr> ptrs;
  for (std::uint8_t i = 0; i < 10; ++i) {
    ptrs.push_back(reinterpret_cast<DevicePtr>(rig.policy.allocate(kPage, rig.stream)));
    rig.device->synchronize();
    const auto bytes = pattern(kPage, i);
    rig.sim.write(ptrs.back(), bytes);
    rig.read(ptrs.back(), kPage, i);  // used once: its host copy must be made when it leaves
    rig.policy.check_invariants();
  }
  // Twice round: every block comes back through the guard, is read, and leaves again.
  for (int round = 0; round < 2; ++round) {
    for (std::uint8_t i = 0; i < 10; ++i) {
      rig.read(ptrs[i], kPage, 100 + i);
      rig.device->synchronize();
      std::vector<std::uint8_t> back(kPage);
      rig.sim.read(ptrs[i], back);
      REQUIRE(back == pattern(kPage, i));
      rig.policy.check_invariants();
    }
  }
  const executor::OnlineStats s = rig.policy.stats();
  CHECK(s.evictions >= 16);
  CHECK(s.fetches >= 16);
  CHECK(s.copies_spared > 0);  // read only since it came back: its host copy is still current
  CHECK(s.budget_exceeded == 0);
  CHECK(rig.allocator.stats().reserved_peak <= 4 * kPage);
  CHECK(rig.sim.counters().unmapped_accesses == 0);
  for (DevicePtr p : ptrs) rig.policy.deallocate(reinterpret_cast<void*>(p));
  rig.policy.check_invariants();
}

TEST_CASE("a block written after it came back is copied out again", "[online]") {
  OnlineRig rig(2 * kPage);
  const DevicePtr a = reinterpret_cast<DevicePtr>(rig.policy.allocate(kPage, rig.stream));
  const DevicePtr b = reinterpret_cast<DevicePtr>(rig.policy.allocate(kPage, rig.stream));
  SimLaunch w;
  w.name = "write_a";
  w.duration_ns = 1000;
  w.seed = 7;
  w.writes.push_back({a, kPage});
  rig.sim.launch(w, rig.stream);
  rig.read(b, kPage, 1);
  const DevicePtr c = reinterpret_cast<DevicePtr>(rig.policy.allocate(kPage, rig.stream));  // a leaves
  rig.read(c, kPage, 2);
  rig.device->synchronize();
  CHECK_FALSE(rig.sim.is_mapped(a, kPage));
  rig.read(a, kPage, 3);  // back, and b or c leaves
  rig.device->synchronize();
  const std::uint64_t before = rig.sim.digest(a, kPage);
  w.seed = 8;
  rig.sim.launch(w, rig.stream);  // a written again: its host copy is stale
  rig.device->synchronize();
  const std::uint64_t written = rig.sim.digest(a, kPage);
  REQUIRE(written != before);
  rig.read(b, kPage, 4);
  rig.read(c, kPage, 5);  // a is the stalest: it leaves, copied again
  rig.read(a, kPage, 6);
  rig.device->synchronize();
  CHECK(rig.sim.digest(a, kPage) == written);
  CHECK(rig.sim.counters().unmapped_accesses == 0);
  CHECK(rig.allocator.stats().reserved_peak <= 2 * kPage);
  rig.policy.check_invariants();
}

TEST_CASE("the stalest large block leaves first; small blocks stay", "[online]") {
  OnlineRig rig(8 * kPage, SimContent::digest);
  const DevicePtr small = reinterpret_cast<DevicePtr>(rig.policy.allocate(kPage / 4, rig.stream));
  const DevicePtr big_old = reinterpret_cast<DevicePtr>(rig.policy.allocate(3 * kPage, rig.stream));
  const DevicePtr small_old = reinterpret_cast<DevicePtr>(rig.policy.allocate(kPage, rig.stream));
  const DevicePtr recent = reinterpret_cast<DevicePtr>(rig.policy.allocate(3 * kPage, rig.stream));
  rig.read(small, kPage / 4, 1);
  rig.read(big_old, 3 * kPage, 2);
  rig.read(small_old, kPage, 3);
  for (int i = 0; i < 5; ++i) rig.read(recent, 3 * kPage, 10 + i);
  // 7 pages and a shared small segment are held; 2 more pages do not fit.
  const DevicePtr more = reinterpret_cast<DevicePtr>(rig.policy.allocate(2 * kPage, rig.stream));
  rig.read(more, 2 * kPage, 20);
  rig.device->synchronize();
  CHECK_FALSE(rig.sim.is_mapped(big_old, 3 * kPage));  // stale and large: scored lowest
  CHECK(rig.sim.is_mapped(small_old, kPage));
  CHECK(rig.sim.is_mapped(recent, 3 * kPage));
  CHECK(rig.sim.is_mapped(small, kPage / 4));
  CHECK(rig.policy.stats().evictions == 1);
  rig.policy.check_invariants();
}

TEST_CASE("nothing left to evict: the allocation is served above the budget, and counted", "[online]") {
  OnlineRig rig(2 * kPage, SimContent::digest);
  const DevicePtr a = reinterpret_cast<DevicePtr>(rig.policy.allocate(2 * kPage, rig.stream));
  SimLaunch l;
  l.name = "needs_both";
  l.duration_ns = 1000;
  l.seed = 1;
  l.reads.push_back({a, 2 * kPage});
  const DevicePtr b = reinterpret_cast<DevicePtr>(rig.policy.allocate(kPage, rig.stream));  // a leaves
  l.writes.push_back({b, kPage});
  rig.sim.launch(l, rig.stream);  // a must come back while b stays: above the budget
  rig.device->synchronize();
  CHECK(rig.sim.counters().unmapped_accesses == 0);
  CHECK(rig.policy.stats().budget_exceeded >= 1);
  rig.policy.check_invariants();
  rig.policy.end_step();  // the budget comes back at the boundary, and the excess leaves
  CHECK(rig.allocator.stats().reserved_bytes <= 2 * kPage);
  rig.policy.check_invariants();
}

TEST_CASE("program threads on their own streams, and a monitor, at once", "[online][threads]") {
  OnlineRig rig(6 * kPage);
  // Each program's blocks are made and filled first (host writes are not launches: the guard
  // does not see them), then both programs launch at once, each on its own stream.
  std::vector<std::vector<DevicePtr>> blocks(2);
  std::vector<StreamHandle> streams;
  for (std::uint8_t id = 0; id < 2; ++id) {
    streams.push_back(rig.device->create_stream());
    for (std::uint8_t i = 0; i < 5; ++i) {
      blocks[id].push_back(reinterpret_cast<DevicePtr>(rig.policy.allocate(kPage, streams[id])));
      rig.device->synchronize();
      rig.sim.write(blocks[id].back(), pattern(kPage, static_cast<std::uint8_t>(id * 16 + i)));
    }
  }
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::mutex first_mutex;
  std::string first;
  auto failed = [&](const std::exception& e) {
    std::lock_guard lock(first_mutex);
    if (first.empty()) first = e.what();
    failures++;
  };
  std::thread monitor([&] {
    while (!done.load()) {
      try {
        rig.policy.check_invariants();
        (void)rig.policy.stats();
      } catch (const std::exception& e) {
        failed(e);
      }
    }
  });
  auto program = [&](std::uint8_t id) {
    try {
      for (int round = 0; round < 6; ++round)
        for (std::uint8_t i = 0; i < 5; ++i) {
          SimLaunch l;
          l.name = "read";
          l.duration_ns = 1000;
          l.seed = i;
          l.reads.push_back({blocks[id][i], kPage});
          rig.sim.launch(l, streams[id]);
        }
    } catch (const std::exception& e) {
      failed(e);
    }
  };
  std::thread a([&] { program(0); });
  std::thread b([&] { program(1); });
  a.join();
  b.join();
  done = true;
  monitor.join();
  INFO(first);
  CHECK(failures == 0);
  // Every block, brought back by a launch that reads it, holds what was written.
  for (std::uint8_t id = 0; id < 2; ++id)
    for (std::uint8_t i = 0; i < 5; ++i) {
      rig.read(blocks[id][i], kPage, 50 + i);
      rig.device->synchronize();
      std::vector<std::uint8_t> back(kPage);
      rig.sim.read(blocks[id][i], back);
      CHECK(back == pattern(kPage, static_cast<std::uint8_t>(id * 16 + i)));
    }
  CHECK(rig.sim.counters().unmapped_accesses == 0);
  CHECK(rig.policy.stats().evictions > 0);
  CHECK(rig.allocator.stats().reserved_peak <= 6 * kPage);
  rig.policy.check_invariants();
}

TEST_CASE("the online policy runs shared DTR logs identical to cache mode, within the budget", "[online][dtr]") {
  const std::string log = GENERATE(as<std::string>{}, "unet", "resnet32");
  const double ratio = GENERATE(0.5, 0.3);
  std::string path;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DELTA_TRACES_DIR) + "/dtr"))
    if (entry.path().filename().string().rfind(log + "-", 0) == 0) path = entry.path().string();
  REQUIRE_FALSE(path.empty());
  const trace::Trace t = planner::load_any_trace(path);
  const executor::StepProgram program = executor::step_program(t);
  const std::uint64_t budget = static_cast<std::uint64_t>(ratio * double(planner::TraceIndex(t).native_peak()));
  execute::ProgramOptions options;
  options.gpu = "titanv";
  options.iterations = 2;
  options.check_invariants = true;
  const execute::ProgramRun cache = execute::run_program(t, program, nullptr, options);
  executor::OnlineStats stats;
  execute::run_online(options, executor::OnlineOptions{.budget_bytes = budget}, &stats);
  const execute::ProgramRun run = execute::run_program(t, program, nullptr, options);
  INFO(log << " at " << ratio << ": " << run.error);
  CHECK(run.error.empty());
  CHECK(execute::compare_runs(cache, run).identical);
  CHECK(run.unmapped_accesses == 0);
  CHECK(run.reserved_peak_bytes <= budget);
  CHECK(stats.evictions > 0);
  CHECK(stats.budget_exceeded == 0);
}

TEST_CASE("blocks handed back to the policy (auto mode, from a plan) leave and come back bytes-equal", "[online][adopt]") {
  OnlineRig rig(4 * kPage);
  std::vector<DevicePtr> ptrs;
  for (std::uint8_t i = 0; i < 6; ++i) {  // six through four pages: two are away
    ptrs.push_back(reinterpret_cast<DevicePtr>(rig.policy.allocate(kPage, rig.stream)));
    rig.device->synchronize();
    rig.sim.write(ptrs.back(), pattern(kPage, i));
    rig.read(ptrs.back(), kPage, i);
  }
  rig.device->synchronize();
  // While blocks are away the policy cannot be given others: hand_over() first.
  CHECK_THROWS_WITH(rig.policy.adopt({}), Catch::Contains("hand_over() first"));
  std::vector<executor::HeldBlock> held = rig.policy.hand_over();  // every block back
  REQUIRE(held.size() == 6);
  for (const executor::HeldBlock& h : held) CHECK(rig.sim.is_mapped(h.ptr, kPage));
  // As a plan's executor hands them back: the same blocks, one of them on shared pages now
  // (it must stay), the others free to leave.
  held[0].own_pages = false;
  rig.policy.adopt(held);  // six pages held, four allowed: two leave at once
  rig.policy.check_invariants();
  rig.device->synchronize();
  CHECK(rig.allocator.stats().reserved_bytes <= 4 * kPage);
  for (std::uint8_t i = 6; i < 9; ++i) {  // more: adopted blocks must make room
    ptrs.push_back(reinterpret_cast<DevicePtr>(rig.policy.allocate(kPage, rig.stream)));
    rig.device->synchronize();
    rig.sim.write(ptrs.back(), pattern(kPage, i));
    rig.read(ptrs.back(), kPage, i);
    rig.policy.check_invariants();
  }
  rig.device->synchronize();
  CHECK(rig.sim.is_mapped(held[0].ptr, kPage));  // not its own pages: it never left
  for (std::uint8_t i = 0; i < ptrs.size(); ++i) {
    rig.read(ptrs[i], kPage, 100 + i);
    rig.device->synchronize();
    std::vector<std::uint8_t> back(kPage);
    rig.sim.read(ptrs[i], back);
    REQUIRE(back == pattern(kPage, i));
    rig.policy.check_invariants();
  }
  CHECK(rig.policy.stats().evictions > 2);
  CHECK(rig.sim.counters().unmapped_accesses == 0);
  for (DevicePtr p : ptrs) rig.policy.deallocate(reinterpret_cast<void*>(p));
  rig.policy.check_invariants();
}
