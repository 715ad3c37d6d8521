// Record mode's hook in the driver launch wrappers (src/driver/driver_record.cpp), with a fake driver:
// the "real" cuLaunchKernel / cuLaunchKernelEx run a host kernel on the parameters they are
// given, and the function queries name the kernel and lay out its parameters. Host memory
// stands in for the device (host_device.hpp). Checked: the op recorded from the wrapper (the
// kernel's name from the driver, the per-thread stream made explicit, its blocks), the op
// visible to CUPTI's correlation callback while the real call runs, the learner's replays
// reaching the real entry point with patched parameters and the caller's configuration,
// captures, and nothing recorded once the recording is over.
#include "host_device.hpp"
#include "profiler/sources/wrapper_launches.hpp"
#include "src/driver/driver_record.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <optional>
#include <vector>

using namespace delta;
using namespace delta::profiler;
using namespace delta::profiler::testing;

namespace {

constexpr std::size_t kFloats = 64;

// One kernel: y[i] += x[i] (x read, y read and written); parameters (float* x, float* y).
struct Driver {
  std::vector<std::uint64_t> seen_streams;
  std::vector<std::optional<std::size_t>> op_during_call;  // what CUPTI's callback would bind
  std::vector<std::pair<std::uint64_t, std::uint64_t>> pointers;  // per call, (x, y)
  std::vector<unsigned> grid_x;  // per cuLaunchKernelEx call, the configuration it got
};
Driver* driver = nullptr;

void run_kernel(CUstream stream, void** params) {
  float* x = *static_cast<float**>(params[0]);
  float* y = *static_cast<float**>(params[1]);
  driver->seen_streams.push_back(reinterpret_cast<std::uint64_t>(stream));
  driver->op_during_call.push_back(WrapperLaunches::current_op());
  driver->pointers.emplace_back(reinterpret_cast<std::uint64_t>(x), reinterpret_cast<std::uint64_t>(y));
  for (std::size_t i = 0; i < kFloats; ++i) y[i] += x[i];
}

CUresult fake_launch(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream stream,
                     void** params, void**) {
  run_kernel(stream, params);
  return CUDA_SUCCESS;
}

CUresult fake_launch_ex(const CUlaunchConfig* config, CUfunction, void** params, void**) {
  driver->grid_x.push_back(config->gridDimX);
  run_kernel(config->hStream, params);
  return CUDA_SUCCESS;
}

CUresult refuse_launch(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                       void**, void**) {
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult fake_param_info(CUfunction, size_t i, size_t* offset, size_t* size) {
  if (i >= 2) return CUDA_ERROR_INVALID_VALUE;
  *offset = 8 * i;
  *size = 8;
  return CUDA_SUCCESS;
}

CUresult fake_name(const char** name, CUfunction) {
  *name = "_Z4axpyPfS_";
  return CUDA_SUCCESS;
}

struct Rig {
  Driver d;
  Log log;
  HostFingerprinter prints{log};
  HostStager stager{log};
  std::int64_t t = 0;
  Recorder recorder{RecorderOptions{3, {}, static_cast<std::size_t>(-1)}, [this] { return ++t; }};
  DirectionLearner learner{prints, 2};
  LaunchLearning learning{recorder, learner, stager};
  WrapperLaunches launches{recorder};
  interpose::RecordLaunchHook hook;
  std::vector<float> x = std::vector<float>(kFloats, 1.5f), y = std::vector<float>(kFloats, 0.25f);
  float* px = x.data();
  float* py = y.data();
  void* params[2] = {&px, &py};
  CUfunction f = reinterpret_cast<CUfunction>(0x40);

  static executor::FunctionQueries queries() {
    executor::FunctionQueries q;
    q.func_get_param_info = &fake_param_info;
    q.func_get_name = &fake_name;
    return q;
  }
  Rig() : hook(&launches, &learning, queries()) {
    driver = &d;
    recorder.on_alloc(reinterpret_cast<std::uint64_t>(px), kFloats * sizeof(float), 0);
    recorder.on_alloc(reinterpret_cast<std::uint64_t>(py), kFloats * sizeof(float), 0);
  }
  ~Rig() { driver = nullptr; }
  CUresult launch(bool per_thread, CUstream stream, executor::LaunchKernelFn real = &fake_launch) {
    return hook.launch_kernel(real, per_thread, f, 1, 1, 1, 64, 1, 1, 0, stream, params, nullptr);
  }
};

}  // namespace

TEST_CASE("record hook: the wrapper records the op, CUPTI's callback sees it during the real call") {
  Rig r;
  REQUIRE(r.hook.active());
  CHECK(r.launch(/*per_thread=*/true, nullptr) == CUDA_SUCCESS);
  const trace::Trace t = r.recorder.snapshot();
  REQUIRE(t.ops.size() == 1);
  CHECK(t.ops[0].name == "_Z4axpyPfS_");
  // Stream 0 of a per-thread flavour is the per-thread stream, made explicit.
  CHECK(t.ops[0].stream == reinterpret_cast<std::uint64_t>(CU_STREAM_PER_THREAD));
  REQUIRE(t.ops[0].blocks.size() == 2);
  CHECK(t.ops[0].blocks[0].access == trace::Access::touch);
  // The real call ran once (no replay in the first learning iteration), with op 0 current.
  REQUIRE(r.d.op_during_call.size() == 1);
  CHECK(r.d.op_during_call[0] == std::optional<std::size_t>(0));
  CHECK_FALSE(WrapperLaunches::current_op().has_value());  // cleared after the call
  CHECK(r.d.seen_streams[0] == 0);  // the caller's arguments reach the driver unchanged
  CHECK(r.learning.counters().learned == 1);
  CHECK(r.log.events.size() == 4);  // x and y fingerprinted before and after
  r.learning.check_invariants();
}

TEST_CASE("record hook: replays in the replay iteration reach the real entry point, patched") {
  Rig r;
  r.launch(false, reinterpret_cast<CUstream>(0x77));
  r.recorder.mark_step();
  const std::vector<float> y_before = r.y;
  CUlaunchConfig config{};
  config.gridDimX = 3;
  config.hStream = reinterpret_cast<CUstream>(0x77);
  CHECK(r.hook.launch_kernel_ex(&fake_launch_ex, false, &config, r.f, r.params, nullptr) == CUDA_SUCCESS);
  // The real launch and two replays, all with the caller's configuration.
  REQUIRE(r.d.pointers.size() == 4);
  CHECK(r.d.grid_x == std::vector<unsigned>{3, 3, 3});
  const auto real = std::make_pair(reinterpret_cast<std::uint64_t>(r.px), reinterpret_cast<std::uint64_t>(r.py));
  CHECK(r.d.pointers[1] == real);
  for (std::size_t i = 2; i < 4; ++i) {
    CHECK(r.d.pointers[i].first != real.first);
    CHECK(r.d.pointers[i].second != real.second);
    CHECK_FALSE(r.d.op_during_call[i].has_value());  // replays are no op of the program's
  }
  // y holds the real launch's result exactly: the replays wrote into the copies.
  for (std::size_t i = 0; i < kFloats; ++i) REQUIRE(r.y[i] == y_before[i] + r.x[i]);
  CHECK(r.stager.live.empty());
  CHECK(r.recorder.snapshot().ops.size() == 2);
  r.learning.check_invariants();
}

TEST_CASE("record hook: captures, refused launches, and the end of the recording") {
  Rig r;
  r.hook.before_capture();
  r.launch(false, nullptr);
  r.hook.after_capture();
  CHECK(r.log.events.empty());  // recorded, not learned
  CHECK(r.recorder.snapshot().ops.size() == 1);
  CHECK(r.launch(false, nullptr, &refuse_launch) == CUDA_ERROR_INVALID_VALUE);  // the driver's answer, unchanged
  CHECK(r.learning.counters().refused == 1);
  r.hook.transfer(reinterpret_cast<std::uint64_t>(r.py), 0);
  CHECK(r.learning.counters().transfers == 1);
  r.recorder.finish();
  CHECK_FALSE(r.hook.active());
  r.learning.check_invariants();
}
