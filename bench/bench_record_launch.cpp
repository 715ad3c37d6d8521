// Host cost of recording one kernel launch, against a plain call measured in the same run.
// The launch is shaped like PyTorch's elementwise kernels: an int, a 256-byte struct passed by
// value holding three pointers into live blocks (a TensorIterator-style offset calculator),
// and a float; the recorder holds 600 live blocks (GPT-2 small's step has about that many).
//
//  - BM_plain_call: the do-nothing "real" launch alone (the baseline);
//  - BM_record_cupti_path: what DELTA's CUPTI callbacks do per launch today, fed the same
//    launch: the runtime cudaLaunchKernel callback (decode, host-stub layout lookup, which
//    fails for PyTorch's stubs, the op added unattributed, its correlation bound), the
//    driver cuLaunchKernel callback nested in it (decode, layout lookup, correlation bound,
//    attribution added to the op), and the two exit callbacks, each timed as on_callback
//    times itself. CUPTI's own dispatch into the callbacks is not in it (it is not
//    reproducible without CUPTI and a GPU);
//  - BM_record_wrapper_path: the same launch recorded from the driver launch wrapper (the
//    function's description from a cache under a shared lock, WrapperLaunches::record, the
//    Forwarding scope) plus what CUPTI's one remaining callback does (the driver launch's
//    enter and exit: bind the correlation id to the op being forwarded), then the real call.
// Both recording paths include the plain call. Recorders are never finished, so every launch
// is recorded (ops accumulate: a few hundred MB at most for the default benchmark time).
#include "profiler/sources/cupti_launch_decode.hpp"
#include "profiler/recorder.hpp"
#include "profiler/sources/wrapper_launches.hpp"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>

namespace {

using namespace delta;
using namespace delta::profiler;

constexpr std::uint64_t kBase = 0x7f0000000000;
constexpr std::uint64_t kBlock = 1 << 20;
constexpr int kBlocks = 600;

__attribute__((noinline)) CUresult nothing(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                           unsigned, CUstream, void** params, void**) {
  benchmark::DoNotOptimize(params);
  return CUDA_SUCCESS;
}
using LaunchFn = decltype(&nothing);

struct OffsetCalc {
  std::uint64_t data[3];
  std::int64_t strides[3][6];
  std::int32_t sizes[6];
  std::int32_t dims;
  std::int32_t pad[1];
};
static_assert(sizeof(OffsetCalc) == 24 + 144 + 24 + 8);

struct Launch {
  int n = 1 << 20;
  OffsetCalc calc{};
  float alpha = 1.0f;
  void* args[3] = {&n, &calc, &alpha};
  ParamLayout layout{{0, 4}, {8, sizeof(OffsetCalc)}, {8 + sizeof(OffsetCalc), 4}};
  Launch() {
    // Three tensors in three blocks, one through an interior pointer (a view).
    calc.data[0] = kBase + 17 * kBlock;
    calc.data[1] = kBase + 230 * kBlock + 4096;
    calc.data[2] = kBase + 599 * kBlock;
    for (auto& row : calc.strides)
      for (int d = 0; d < 6; ++d) row[d] = 4 << d;
    for (int d = 0; d < 6; ++d) calc.sizes[d] = 8;
    calc.dims = 2;
  }
};

std::unique_ptr<Recorder> make_recorder() {
  RecorderOptions options;
  options.iterations = 0;  // never finishes
  options.first_detection_at = static_cast<std::size_t>(-1);
  auto recorder = std::make_unique<Recorder>(options, [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  });
  for (int i = 0; i < kBlocks; ++i) recorder->on_alloc(kBase + i * kBlock, kBlock, 0);
  return recorder;
}

// A per-handle cache under a mutex, as KernelParamInfo keeps layouts (and as the wrapper hook
// keeps function descriptions under a shared lock).
struct LayoutCache {
  std::mutex mutex;
  std::unordered_map<const void*, std::optional<ParamLayout>> layouts;
  const ParamLayout* find(const void* key) {
    std::lock_guard lock(mutex);
    auto it = layouts.find(key);
    return it != layouts.end() && it->second ? &*it->second : nullptr;
  }
};

// on_callback's own timing around each callback.
template <typename Body>
void timed(Recorder& recorder, Body&& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  recorder.add_callback_overhead(std::chrono::steady_clock::now() - start);
}

void BM_plain_call(benchmark::State& state) {
  Launch launch;
  auto* volatile fn = &nothing;
  for (auto _ : state) fn(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, launch.args, nullptr);
}
BENCHMARK(BM_plain_call);

void BM_record_cupti_path(benchmark::State& state) {
  auto recorder = make_recorder();
  Launch launch;
  const void* stub = reinterpret_cast<const void*>(0x1234);
  auto* function = reinterpret_cast<CUfunction>(0x5678);
  LayoutCache stubs, functions;
  stubs.layouts[stub] = std::nullopt;  // PyTorch's host stubs: the lookup failed once, cached
  functions.layouts[function] = launch.layout;
  cudaLaunchKernel_v7000_params runtime_params{stub, dim3(1), dim3(1), launch.args, 0, nullptr};
  cuLaunchKernel_params driver_params{function, 1, 1, 1, 1, 1, 1, 0, nullptr, launch.args, nullptr};
  auto* volatile fn = &nothing;
  std::uint32_t correlation = 0;
  std::uint64_t attributed = 0;
  for (auto _ : state) {
    std::optional<std::size_t> op;
    ++correlation;
    timed(*recorder, [&] {  // runtime enter
      const auto decoded =
          decode_launch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &runtime_params);
      const ParamLayout* layout = stubs.find(decoded->handle);
      OpInfo info;
      info.name = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>";
      info.stream = decoded->stream;
      op = recorder->add_op(std::move(info), [&](const BlockMap& blocks, trace::Op& o) {
        attribute_launch(*decoded, layout, blocks, o);
      });
      recorder->bind_correlation(correlation, *op);
    });
    timed(*recorder, [&] {  // driver enter, nested
      const auto decoded = decode_launch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &driver_params);
      const ParamLayout* layout = functions.find(decoded->handle);
      recorder->bind_correlation(correlation + 1, *op);
      recorder->amend_op(*op, [&](const BlockMap& blocks, trace::Op& o) {
        attributed += attribute_launch(*decoded, layout, blocks, o);
      });
    });
    fn(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, launch.args, nullptr);
    timed(*recorder, [] {});  // driver exit
    timed(*recorder, [] {});  // runtime exit
  }
  if (attributed != static_cast<std::uint64_t>(state.iterations())) state.SkipWithError("the launch was not attributed");
}
BENCHMARK(BM_record_cupti_path);

void BM_record_wrapper_path(benchmark::State& state) {
  auto recorder = make_recorder();
  WrapperLaunches launches(*recorder);
  Launch launch;
  auto* function = reinterpret_cast<CUfunction>(0x5678);
  struct Info {
    std::string name = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>";
    ParamLayout layout;
  };
  std::shared_mutex mutex;
  std::unordered_map<CUfunction, Info> described;
  described[function].layout = launch.layout;
  auto* volatile fn = &nothing;
  std::uint32_t correlation = 0;
  for (auto _ : state) {
    std::optional<std::size_t> op;
    {
      std::shared_lock lock(mutex);
      const Info& info = described.find(function)->second;
      op = launches.record({info.name, 0, {&info.layout, launch.args, nullptr}});
    }
    const WrapperLaunches::Forwarding forwarding(op);
    ++correlation;
    timed(*recorder, [&] {  // CUPTI's driver launch callback, inside the real call
      if (const auto current = WrapperLaunches::current_op()) recorder->bind_correlation(correlation, *current);
    });
    fn(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, launch.args, nullptr);
    timed(*recorder, [] {});  // its exit
  }
  if (launches.unattributed() != 0 || recorder->op_count() != static_cast<std::size_t>(state.iterations()))
    state.SkipWithError("launches were not recorded and attributed");
}
BENCHMARK(BM_record_wrapper_path);

// Where the recording's time goes: the op alone (no attribution), and the attribution alone
// (the parameter words looked up among the 600 live blocks).
void BM_part_add_op(benchmark::State& state) {
  auto recorder = make_recorder();
  for (auto _ : state) {
    OpInfo info;
    info.name = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>";
    benchmark::DoNotOptimize(recorder->add_op(std::move(info), {}));
  }
}
BENCHMARK(BM_part_add_op);

void BM_part_attribution(benchmark::State& state) {
  BlockMap blocks;
  for (int i = 0; i < kBlocks; ++i) blocks.insert(kBase + i * kBlock, kBlock, i);
  Launch launch;
  std::vector<trace::BlockUse> uses;
  for (auto _ : state) {
    uses.clear();
    scan_kernel_args(launch.layout, launch.args, blocks, uses);
    benchmark::DoNotOptimize(uses.data());
  }
  if (uses.size() != 3) state.SkipWithError("three blocks expected");
}
BENCHMARK(BM_part_attribution);

}  // namespace

BENCHMARK_MAIN();
