// Host overhead of the GPU launch route, against a plain call measured in the same run:
//  - BM_plain_call / BM_route_launch: a cuLaunchKernel-shaped call (3 parameters: an int and
//    two pointers into a live block) made directly, and through CudaLaunchRoute with an
//    executor running a plan that has no action due (decode the parameters, look the pointers
//    up, the executor's guard), both ending in the same do-nothing "real" function;
//  - BM_route_launch_online / BM_route_launch_auto: the same launch through the route with the
//    online policy behind it (auto mode's first steps: the block resident, nothing to do), and
//    with auto mode's pilot in front of that policy (its own lock, block lookup and step key);
//  - BM_stub_plain / BM_stub_wrapped: the stub driver's cuLaunchKernel called directly, and
//    through the wrapper libdelta's cuGetProcAddress_v2 hands out, with no run mode (one atomic
//    load, then forward). Only when built beside libdelta and the stub (DELTA_BENCH_LIBDELTA).
#include "bench/bench_steps.hpp"
#include "executor/routes/cuda_route.hpp"
#include "executor/executor.hpp"
#include "executor/online/online_policy.hpp"
#include "autopilot/autopilot.hpp"
#include "profiler/sources/sim_source.hpp"

#include <delta/plan.hpp>
#include <delta/sim_device.hpp>

#include <benchmark/benchmark.h>
#include <dlfcn.h>

namespace {

using namespace delta;
using namespace delta::bench;

__attribute__((noinline)) CUresult nothing(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                           unsigned, CUstream, void** params, void**) {
  benchmark::DoNotOptimize(params);
  return CUDA_SUCCESS;
}

CUresult layout(CUfunction, size_t i, size_t* offset, size_t* size) {
  if (i >= 3) return CUDA_ERROR_INVALID_VALUE;
  *offset = i == 0 ? 0 : 8 * i;
  *size = i == 0 ? 4 : 8;
  return CUDA_SUCCESS;
}

CUresult name(const char** out, CUfunction) {
  *out = "op";
  return CUDA_SUCCESS;
}

struct Args {
  int n = 1;
  std::uint64_t a = 0, b = 0;
  void* params[3] = {&n, &a, &b};
};

void BM_plain_call(benchmark::State& state) {
  Args args;
  auto* volatile fn = &nothing;
  for (auto _ : state) fn(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, args.params, nullptr);
}
BENCHMARK(BM_plain_call);

void BM_route_launch(benchmark::State& state) {
  const trace::Trace t = launch_trace();
  auto device = make_sim_device(SimOptions{.profile = "h200", .content = SimContent::none});
  CachingAllocator allocator{device, AllocatorConfig{}};
  const StreamHandle stream = device->create_stream();
  const executor::StepProgram program = executor::step_program(t);
  executor::Executor exec(allocator, program, executor::schedule_actions(empty_plan(t), t, program));
  executor::FunctionQueries q;
  q.func_get_param_info = &layout;
  q.func_get_name = &name;
  executor::CudaLaunchRoute route(exec, q);
  void* block = exec.allocate(kBytes, stream);
  Args args;
  args.a = reinterpret_cast<std::uint64_t>(block);
  args.b = args.a + 64;  // an interior pointer
  auto* volatile fn = &nothing;
  std::size_t k = 0;
  for (auto _ : state) {
    route.launch_kernel(fn, false, reinterpret_cast<CUfunction>(0x10), 1, 1, 1, 1, 1, 1, 0,
                        reinterpret_cast<CUstream>(stream), args.params, nullptr);
    if (++k == kOps) {
      exec.end_step();
      k = 0;
    }
  }
  if (exec.stats().divergences != 0) state.SkipWithError("the benchmark strayed from the plan's step");
  if (route.stats().pointer_words != 2 * route.stats().launches) state.SkipWithError("the pointers were not found");
}
BENCHMARK(BM_route_launch);

// The launches of BM_route_launch through a route over `entry`, with a block from it.
void launches_through(benchmark::State& state, executor::EntryPoints& entry, StreamHandle stream) {
  executor::FunctionQueries q;
  q.func_get_param_info = &layout;
  q.func_get_name = &name;
  executor::CudaLaunchRoute route(entry, q);
  void* block = entry.allocate(kBytes, stream);
  Args args;
  args.a = reinterpret_cast<std::uint64_t>(block);
  args.b = args.a + 64;
  auto* volatile fn = &nothing;
  std::size_t k = 0;
  for (auto _ : state) {
    route.launch_kernel(fn, false, reinterpret_cast<CUfunction>(0x10), 1, 1, 1, 1, 1, 1, 0,
                        reinterpret_cast<CUstream>(stream), args.params, nullptr);
    if (++k == kOps) {
      entry.end_step();
      k = 0;
    }
  }
  if (route.stats().pointer_words != 2 * route.stats().launches) state.SkipWithError("the pointers were not found");
  entry.deallocate(block);
}

void BM_route_launch_online(benchmark::State& state) {
  auto device = make_sim_device(SimOptions{.profile = "h200", .content = SimContent::none});
  CachingAllocator allocator{device, AllocatorConfig{}};
  executor::OnlinePolicy policy(allocator, executor::OnlineOptions{.budget_bytes = std::uint64_t{1} << 30});
  launches_through(state, policy, device->create_stream());
  if (policy.stats().evictions != 0) state.SkipWithError("the online policy had work to do");
}
BENCHMARK(BM_route_launch_online);

// The pilot over the online policy, recording (never finished, so no planner runs in the
// measured loop): what the pilot adds to the policy's guard on the host.
void BM_route_launch_auto(benchmark::State& state) {
  auto device = make_sim_device(SimOptions{.profile = "h200", .content = SimContent::none});
  SimDevice& sim = *as_sim(device.get());
  CachingAllocator allocator{device, AllocatorConfig{}};
  autopilot::AutoOptions options;
  options.budget_bytes = std::uint64_t{1} << 30;
  options.gpu = "h200";
  options.record_iterations = 1u << 30;  // never finished: no planner runs in the measured loop
  options.use_cache = false;
  auto record = [&sim](std::uint32_t iterations) {
    profiler::RecorderOptions ro;
    ro.iterations = iterations;
    ro.first_detection_at = static_cast<std::size_t>(-1);
    autopilot::AutoPilot::Recording r;
    r.recorder = std::make_unique<profiler::Recorder>(ro, profiler::sim_clock(sim));
    r.source = std::make_unique<profiler::SimActivitySource>(sim, *r.recorder);
    return r;
  };
  autopilot::AutoPilot pilot(allocator, options, record);
  launches_through(state, pilot, device->create_stream());
}
BENCHMARK(BM_route_launch_auto);

#ifdef DELTA_BENCH_LIBDELTA
using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                            void**, void**);
using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

// The stub driver loaded under its soname, then libdelta (as the pluggable route loads it:
// its dlsym does not take over, but its exported cuGetProcAddress_v2 hands out its wrappers).
struct Stub {
  void* driver = dlopen(DELTA_BENCH_STUB, RTLD_NOW | RTLD_LOCAL);
  void* delta = dlopen(DELTA_BENCH_LIBDELTA, RTLD_NOW | RTLD_LOCAL);
  Launch plain = driver ? reinterpret_cast<Launch>(dlsym(driver, "cuLaunchKernel")) : nullptr;
  Launch wrapped() const {
    auto get = delta ? reinterpret_cast<GetProc>(dlsym(delta, "cuGetProcAddress_v2")) : nullptr;
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status{};
    if (get == nullptr || get("cuLaunchKernel", &fn, 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) != CUDA_SUCCESS)
      return nullptr;
    return fn != reinterpret_cast<void*>(plain) ? reinterpret_cast<Launch>(fn) : nullptr;
  }
};

void BM_stub_plain(benchmark::State& state) {
  Stub stub;
  if (stub.plain == nullptr) return state.SkipWithError("no stub driver");
  Args args;
  for (auto _ : state) stub.plain(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, args.params, nullptr);
}
BENCHMARK(BM_stub_plain);

void BM_stub_wrapped(benchmark::State& state) {
  Stub stub;
  const Launch fn = stub.wrapped();
  if (fn == nullptr) return state.SkipWithError("libdelta did not hand out its wrapper");
  Args args;
  for (auto _ : state) fn(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, args.params, nullptr);
}
BENCHMARK(BM_stub_wrapped);
#endif

}  // namespace

BENCHMARK_MAIN();
