// The GPU launch route with a fake driver over the sim device: launches arrive as
// cuLaunchKernel / cuLaunchKernelEx calls with real parameter buffers (an op index and a seed,
// then one pointer per block the op uses), and the fake "real" launch turns the bytes it is
// given back into a sim kernel. So the guard, the parameter decoding and the replay of a
// patched copy are checked end to end: every block is mapped when the driver gets the call,
// and the data read are bytes-equal to what was written.
#include "executor/routes/cuda_route.hpp"
#include "executor_fixtures.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <thread>

using namespace delta;
using namespace delta::executor;
using namespace delta::executor::testing;

namespace {

struct World {
  explicit World(Rig& r) : rig(r), ptr(r.program.blocks.size(), 0) {}
  Rig& rig;
  std::vector<DevicePtr> ptr;  // per block of the step program, its address now (0: none)
  std::uint64_t calls = 0;          // launches the fake driver received
  std::uint64_t unmapped_at_call = 0;  // blocks a launch points to that were not mapped then
  std::vector<std::uint64_t> last_seen_param_words;
};
World* world = nullptr;

ParamLayout layout_of(std::size_t k) {
  ParamLayout layout{{0, 4}, {4, 4}};
  for (std::size_t i = 0; i < world->rig.program.ops[k].uses.size(); ++i) layout.push_back({8 + 8 * i, 8});
  return layout;
}

std::size_t op_of(CUfunction f) { return reinterpret_cast<std::uintptr_t>(f) - 1; }
CUfunction function_of(std::size_t k) { return reinterpret_cast<CUfunction>(k + 1); }

CUresult fake_param_info(CUfunction f, size_t i, size_t* offset, size_t* size) {
  const ParamLayout layout = layout_of(op_of(f));
  if (i >= layout.size()) return CUDA_ERROR_INVALID_VALUE;
  *offset = layout[i].offset;
  *size = layout[i].size;
  return CUDA_SUCCESS;
}

CUresult fake_name(const char** name, CUfunction f) {
  *name = world->rig.program.ops[op_of(f)].name.c_str();
  return CUDA_SUCCESS;
}

CUresult fake_module(CUmodule* module, CUfunction) {
  *module = reinterpret_cast<CUmodule>(0x77);
  return CUDA_SUCCESS;
}

// The driver's side: the bytes it was given become a sim kernel on the stream it was given.
void run_on_sim(CUfunction f, CUstream stream, std::span<const std::byte> bytes) {
  const std::size_t k = op_of(f);
  const StepOp& op = world->rig.program.ops[k];
  std::uint32_t index = 0, seed = 0;
  std::memcpy(&index, bytes.data(), 4);
  std::memcpy(&seed, bytes.data() + 4, 4);
  REQUIRE(index == k);
  SimLaunch l;
  l.name = op.name;
  l.duration_ns = 1000;
  l.seed = seed;
  world->last_seen_param_words.clear();
  for (std::size_t i = 0; i < op.uses.size(); ++i) {
    std::uint64_t p = 0;
    std::memcpy(&p, bytes.data() + 8 + 8 * i, 8);
    world->last_seen_param_words.push_back(p);
    const std::size_t size = world->rig.program.blocks[op.uses[i].block].size;
    if (!world->rig.sim.is_mapped(p, size)) world->unmapped_at_call++;
    if (op.uses[i].read) l.reads.push_back({p, size});
    if (op.uses[i].write) l.writes.push_back({p, size});
  }
  world->calls++;
  world->rig.sim.launch(l, reinterpret_cast<StreamHandle>(stream));
}

std::vector<std::byte> packed(std::size_t k, void** params, void** extra) {
  if (extra != nullptr) {
    const std::byte* buffer = nullptr;
    std::size_t size = 0;
    for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = static_cast<const std::byte*>(extra[i + 1]);
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *static_cast<std::size_t*>(extra[i + 1]);
    }
    return {buffer, buffer + size};
  }
  const ParamLayout layout = layout_of(k);
  std::vector<std::byte> out(8 + 8 * (layout.size() - 2));
  for (std::size_t i = 0; i < layout.size(); ++i) std::memcpy(out.data() + layout[i].offset, params[i], layout[i].size);
  return out;
}

CUresult fake_launch(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream stream,
                     void** params, void** extra) {
  run_on_sim(f, stream, packed(op_of(f), params, extra));
  return CUDA_SUCCESS;
}

CUresult fake_launch_ex(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  REQUIRE(config->gridDimX == 3);
  REQUIRE(config->numAttrs == 1);
  REQUIRE(config->attrs[0].id == CU_LAUNCH_ATTRIBUTE_PRIORITY);
  run_on_sim(f, config->hStream, packed(op_of(f), params, extra));
  return CUDA_SUCCESS;
}

CUresult fake_launch_unchecked(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                               void**, void**) {
  return CUDA_SUCCESS;
}

FunctionQueries fake_queries(bool with_layouts = true) {
  FunctionQueries q;
  if (with_layouts) q.func_get_param_info = &fake_param_info;
  q.func_get_name = &fake_name;
  q.func_get_module = &fake_module;
  return q;
}

enum class Style { kernel_params, extra, launch_ex };

// Op k's launch as an application makes it, through the route.
CUresult launch(CudaLaunchRoute& route, std::size_t k, Style style) {
  const StepOp& op = world->rig.program.ops[k];
  std::uint32_t index = static_cast<std::uint32_t>(k), seed = static_cast<std::uint32_t>(k + 1);
  std::vector<std::uint64_t> words;
  for (const StepUse& u : op.uses) words.push_back(world->ptr[u.block]);
  std::vector<void*> args{&index, &seed};
  for (std::uint64_t& w : words) args.push_back(&w);
  std::vector<std::byte> buffer(8 + 8 * words.size());
  std::memcpy(buffer.data(), &index, 4);
  std::memcpy(buffer.data() + 4, &seed, 4);
  if (!words.empty()) std::memcpy(buffer.data() + 8, words.data(), 8 * words.size());
  std::size_t size = buffer.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  const auto stream = reinterpret_cast<CUstream>(world->rig.stream);
  switch (style) {
    case Style::kernel_params:
      return route.launch_kernel(&fake_launch, false, function_of(k), 3, 1, 1, 128, 1, 1, 0, stream, args.data(), nullptr);
    case Style::extra:
      return route.launch_kernel(&fake_launch, false, function_of(k), 3, 1, 1, 128, 1, 1, 0, stream, nullptr, extra);
    case Style::launch_ex: {
      CUlaunchAttribute attr{};
      attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
      attr.value.priority = 1;
      CUlaunchConfig config{};
      config.gridDimX = 3;
      config.gridDimY = config.gridDimZ = 1;
      config.blockDimX = 128;
      config.blockDimY = config.blockDimZ = 1;
      config.hStream = stream;
      config.attrs = &attr;
      config.numAttrs = 1;
      return route.launch_kernel_ex(&fake_launch_ex, false, &config, function_of(k), args.data(), nullptr);
    }
  }
  return CUDA_ERROR_UNKNOWN;
}

struct StepHooks {
  std::function<void(int step, std::size_t k)> before_op, after_op;
};

// Steps of swap_trace as a program: X (block index 0) written by op 0 and read by op 4.
// Returns X's digest after op 0 and when op 4 read it, per step.
std::vector<std::pair<std::uint64_t, std::uint64_t>> run_steps(CudaLaunchRoute& route, int steps, Style style,
                                                               const StepHooks& hooks = {}) {
  Rig& rig = world->rig;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> digests;
  for (int step = 0; step < steps; ++step) {
    if (world->ptr[0]) rig.exec.deallocate(reinterpret_cast<void*>(world->ptr[0]));
    world->ptr[0] = 0;
    std::pair<std::uint64_t, std::uint64_t> d{};
    for (std::size_t k = 0; k < rig.program.ops.size(); ++k) {
      for (std::uint32_t b : rig.program.ops[k].allocate_before)
        world->ptr[b] = reinterpret_cast<DevicePtr>(rig.exec.allocate(rig.program.blocks[b].size, rig.stream));
      if (hooks.before_op) hooks.before_op(step, k);
      REQUIRE(launch(route, k, style) == CUDA_SUCCESS);
      // X's digest in stream order (a small kernel of DELTA's, no host wait).
      const SimRange x{world->ptr[0], rig.program.blocks[0].size};
      if (k == 0) d.first = rig.sim.fingerprint(std::span(&x, 1), rig.stream).at(0);
      if (k == 4) d.second = rig.sim.fingerprint(std::span(&x, 1), rig.stream).at(0);
      if (hooks.after_op) hooks.after_op(step, k);
      for (std::uint32_t b : rig.program.ops[k].free_after) {
        rig.exec.deallocate(reinterpret_cast<void*>(world->ptr[b]));
        world->ptr[b] = 0;
      }
      rig.exec.check_invariants();
      route.check_invariants();
    }
    rig.exec.end_step();
    rig.exec.check_invariants();
    digests.push_back(d);
  }
  return digests;
}

void check_bytes_equal(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& digests) {
  for (const auto& [written, read] : digests) {
    CHECK(written != 0);
    CHECK(read == written);  // what op 4 reads is what op 0 wrote, after X's trip
    CHECK(written == digests.front().first);  // and the same every step (a deterministic op 0)
  }
}

constexpr std::uint64_t kBudget = 1'250'000'000;

// One test's sim rig, the fake driver's view of it, and the route under test.
struct Harness {
  Harness(const trace::Trace& t, const plan::Plan& p, FunctionQueries q = fake_queries())
      : rig(t, p), w(rig), route(rig.exec, q) {
    world = &w;
  }
  ~Harness() { world = nullptr; }
  Rig rig;
  World w;
  CudaLaunchRoute route;
};

// Three steps of `p` in each way of passing parameters, each checked for the data and for
// launches on unmapped memory, then by `more`.
void in_every_style(const trace::Trace& t, const plan::Plan& p, const std::function<void(Harness&)>& more) {
  for (const Style style : {Style::kernel_params, Style::extra, Style::launch_ex}) {
    DYNAMIC_SECTION("style " << static_cast<int>(style)) {
      Harness h(t, p);
      check_bytes_equal(run_steps(h.route, 3, style));
      CHECK(h.w.unmapped_at_call == 0);
      CHECK(h.rig.sim.counters().unmapped_accesses == 0);
      more(h);
    }
  }
}

}  // namespace

TEST_CASE("the route's guard brings a swapped block back before the driver gets the launch", "[cuda_route]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, kBudget);
  add(p, 1, swap(0, 3, 4));
  in_every_style(t, p, [](Harness& h) {
    const ExecutorStats s = h.rig.exec.stats();
    CHECK(s.swaps == 3);
    CHECK(s.divergences == 0);
    CHECK(h.w.calls == 15);
    const RouteStats r = h.route.stats();
    CHECK(r.launches == 15);
    CHECK(r.unreadable == 0);
    // X at ops 0 and 4, each step; Y (op 2) is not the executor's to move: its word is left alone.
    CHECK(r.pointer_words == 6);
    CHECK(r.functions == 5);
  });
}

TEST_CASE("a regeneration replays the captured parameter bytes, patched, through the real entry point", "[cuda_route]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, kBudget);
  add(p, 1, regeneration(0, 4, {0}));
  in_every_style(t, p, [](Harness& h) {
    const ExecutorStats s = h.rig.exec.stats();
    CHECK(s.regenerations == 3);
    CHECK(s.replayed_launches == 3);
    CHECK(s.bytes_d2h == 0);
    CHECK(h.w.calls == 15 + 3);  // the replays reached the fake driver
  });
}

TEST_CASE("copies and memsets are matched by kind and guarded like launches", "[cuda_route]") {
  trace::Trace t = planner::testing::swap_trace();
  t.ops[4].kind = trace::OpKind::copy_d2h;  // consume_x becomes the runtime's copy of X to host
  t.ops[4].name = "cudaMemcpyAsync";
  plan::Plan p = plan_for(t, kBudget);
  add(p, 1, swap(0, 3, 4));
  Harness h(t, p);
  std::uint64_t mapped_at_copy = 0;
  for (int step = 0; step < 2; ++step) {
    if (h.w.ptr[0]) h.rig.exec.deallocate(reinterpret_cast<void*>(h.w.ptr[0]));
    h.w.ptr[0] = 0;
    for (std::size_t k = 0; k < h.rig.program.ops.size(); ++k) {
      for (std::uint32_t b : h.rig.program.ops[k].allocate_before)
        h.w.ptr[b] = reinterpret_cast<DevicePtr>(h.rig.exec.allocate(h.rig.program.blocks[b].size, h.rig.stream));
      if (k == 4) {
        const std::size_t size = h.rig.program.blocks[0].size;
        const CUresult r = h.route.transfer(LaunchKind::copy, "cuMemcpyDtoHAsync", false, reinterpret_cast<CUstream>(h.rig.stream),
                                          0x1000 /* host */, h.w.ptr[0] + 64, size - 64, [&] {
                                            mapped_at_copy += h.rig.sim.is_mapped(h.w.ptr[0], size);
                                            return CUDA_SUCCESS;
                                          });
        CHECK(r == CUDA_SUCCESS);
      } else {
        REQUIRE(launch(h.route, k, Style::kernel_params) == CUDA_SUCCESS);
      }
      for (std::uint32_t b : h.rig.program.ops[k].free_after) {
        h.rig.exec.deallocate(reinterpret_cast<void*>(h.w.ptr[b]));
        h.w.ptr[b] = 0;
      }
    }
    h.rig.exec.end_step();
    h.rig.exec.check_invariants();
  }
  CHECK(mapped_at_copy == 2);
  CHECK(h.rig.exec.stats().swaps == 2);
  CHECK(h.rig.exec.stats().divergences == 0);
  CHECK(h.route.stats().transfers == 2);
}

TEST_CASE("a graph capture quiets the executor and pins what the captured launches touch", "[cuda_route]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, kBudget);
  add(p, 1, swap(0, 3, 4));
  Harness h(t, p);
  std::uint64_t d2h_at_begin = 0, d2h_in_capture = 0;
  StepHooks hooks;
  hooks.before_op = [&](int step, std::size_t k) {
    if (step == 1 && k == 0) {
      h.route.before_capture();
      d2h_at_begin = h.rig.exec.stats().bytes_d2h;
    }
  };
  hooks.after_op = [&](int step, std::size_t k) {
    if (step == 1 && k == 4) {
      d2h_in_capture = h.rig.exec.stats().bytes_d2h - d2h_at_begin;
      h.route.after_capture();
    }
  };
  const auto digests = run_steps(h.route, 4, Style::kernel_params, hooks);
  check_bytes_equal(digests);
  const ExecutorStats s = h.rig.exec.stats();
  CHECK(d2h_in_capture == 0);  // nothing moved while the stream captured
  CHECK(s.graph_captures == 1);
  CHECK(s.swaps == 1);          // step 0 only: X is pinned since the capture
  CHECK(s.pinned_skips >= 2);   // steps 2 and 3 skipped X's eviction
  CHECK(s.pinned_ranges == 1);  // X; Y is never moved, so never pinned
  CHECK(h.w.unmapped_at_call == 0);
}

TEST_CASE("an exported block is pinned: brought back at once, never evicted again", "[cuda_route]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, kBudget);
  add(p, 1, swap(0, 3, 4));
  Harness h(t, p);
  bool was_away = false;
  StepHooks hooks;
  hooks.before_op = [&](int step, std::size_t k) {
    if (step == 1 && k == 2) {  // X is away here: evicted after op 0
      was_away = !h.rig.sim.is_mapped(h.w.ptr[0], h.rig.program.blocks[0].size);
      h.route.pin(h.w.ptr[0] + 4096);  // an interior address, as cuIpcGetMemHandle may be given
      CHECK(h.rig.sim.is_mapped(h.w.ptr[0], h.rig.program.blocks[0].size));
    }
  };
  const auto digests = run_steps(h.route, 3, Style::kernel_params, hooks);
  check_bytes_equal(digests);
  CHECK(was_away);
  const ExecutorStats s = h.rig.exec.stats();
  CHECK(s.swaps == 2);  // steps 0 and 1; none after the pin
  CHECK(s.pinned_skips == 1);
  CHECK(s.pinned_ranges == 1);
  CHECK(h.route.stats().pins == 1);
}

TEST_CASE("a launch whose parameters cannot be read is counted and still issued", "[cuda_route]") {
  const trace::Trace t = planner::testing::swap_trace();
  const plan::Plan p = plan_for(t, 4'000'000'000);  // no actions
  Harness h(t, p, fake_queries(/*with_layouts=*/false));
  run_steps(h.route, 1, Style::kernel_params);
  CHECK(h.route.stats().unreadable == 5);
  CHECK(h.route.stats().pointer_words == 0);
  CHECK(h.w.calls == 5);
  CHECK(h.rig.exec.stats().divergences == 0);
}

TEST_CASE("a block the route cannot see in the parameters is still made resident for the op the plan says uses it",
          "[cuda_route]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, kBudget);
  add(p, 1, swap(0, 3, 4));
  Harness h(t, p, fake_queries(/*with_layouts=*/false));  // no pointer is found in any launch
  check_bytes_equal(run_steps(h.route, 3, Style::kernel_params));
  CHECK(h.route.stats().pointer_words == 0);
  CHECK(h.rig.exec.stats().swaps == 3);
  CHECK(h.w.unmapped_at_call == 0);  // X was back for op 4 all the same: the plan lists the use
}

TEST_CASE("a module unloading has the route tell the executor and forget its functions", "[cuda_route]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, kBudget);
  add(p, 1, regeneration(0, 4, {0}));
  Harness h(t, p);
  StepHooks hooks;
  hooks.after_op = [&](int step, std::size_t k) {
    if (step == 1 && k == 2) h.route.before_unload(0x77);  // X dropped, its producer's module going
  };
  const auto digests = run_steps(h.route, 2, Style::kernel_params, hooks);
  check_bytes_equal(digests);
  CHECK(h.rig.exec.stats().unload_rebuilds == 1);
  CHECK(h.route.stats().functions == 2);  // ops 3 and 4 described again after the unload
}

TEST_CASE("the route's invariant checker rejects a layout whose parameters overlap", "[cuda_route]") {
  const trace::Trace t = planner::testing::swap_trace();
  FunctionQueries q = fake_queries();
  q.func_get_param_info = [](CUfunction, size_t i, size_t* offset, size_t* size) -> CUresult {
    if (i >= 2) return CUDA_ERROR_INVALID_VALUE;
    *offset = i == 0 ? 0 : 4;  // the second parameter starts inside the first
    *size = 8;
    return CUDA_SUCCESS;
  };
  Harness h(t, plan_for(t, 4'000'000'000), q);
  h.route.check_invariants();  // nothing cached yet
  std::uint64_t a = 0, b = 0;
  void* args[] = {&a, &b};
  h.route.launch_kernel(&fake_launch_unchecked, false, function_of(0), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr);
  CHECK_THROWS_WITH(h.route.check_invariants(), Catch::Contains("parameter 1 overlaps"));
}

std::atomic<std::uint64_t> forwarded{0};
CUresult count_launch(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**,
                      void**) {
  forwarded++;
  return CUDA_SUCCESS;
}

TEST_CASE("launches from several threads describe each function once and all reach the driver", "[cuda_route]") {
  const trace::Trace t = planner::testing::swap_trace();
  Harness h(t, plan_for(t, 4'000'000'000));
  forwarded = 0;
  constexpr int kThreads = 4, kLaunches = 500;
  std::atomic<bool> done{false};
  std::thread monitor([&] {
    while (!done) {
      h.route.check_invariants();
      (void)h.route.stats();
    }
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      std::uint32_t index = 0, seed = 1;
      void* args[] = {&index, &seed};
      for (int n = 0; n < kLaunches; ++n) {
        const std::size_t k = static_cast<std::size_t>(n + i) % 2 == 0 ? 1 : 3;  // ops without pointers
        index = static_cast<std::uint32_t>(k);
        h.route.launch_kernel(&count_launch, i % 2 == 1, function_of(k), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr);
      }
    });
  for (std::thread& th : threads) th.join();
  done = true;
  monitor.join();
  CHECK(forwarded == kThreads * kLaunches);
  CHECK(h.route.stats().launches == kThreads * kLaunches);
  CHECK(h.route.stats().functions == 2);
  h.route.check_invariants();
  h.rig.exec.check_invariants();
}

TEST_CASE("stream 0 of a per-thread flavour is the per-thread default stream", "[cuda_route]") {
  CHECK(CudaLaunchRoute::stream_of(nullptr, true) == kPerThreadStream);
  CHECK(CudaLaunchRoute::stream_of(nullptr, false) == 0);
  CHECK(CudaLaunchRoute::stream_of(reinterpret_cast<CUstream>(0x1234), true) == 0x1234);
}
