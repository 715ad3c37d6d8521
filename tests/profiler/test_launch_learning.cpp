// The direction learner driven from interposed driver launches (LaunchLearning), with the
// device played by host memory: blocks are host buffers registered with the recorder, the
// fingerprinter hashes their bytes when asked (work on a stream runs at once), the stager
// copies with memcpy, and a "kernel" is a host function given the launch's parameters in the
// driver's two forms (kernelParams by a layout, or the packed `extra` buffer). The recorder is
// fed the ops as CUPTI would feed it (touches found in the parameter bytes). Checked: which
// launches are learned, the order of fingerprints, copies, launch and replays, that replays
// get pointers into the copies and leave the real blocks bytes-equal, nothing during a
// capture, refused launches, and the learned directions applied to the recorded trace.
#include "host_device.hpp"
#include "profiler/directions/launch_learning.hpp"
#include "profiler/directions/param_scan.hpp"
#include "profiler/record_session.hpp"

#include <catch2/catch.hpp>
#include <cuda.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

using namespace delta;
using namespace delta::profiler;
using namespace delta::profiler::testing;

namespace {

constexpr std::size_t kFloats = 64;
constexpr std::size_t kBytes = kFloats * sizeof(float);

// The program's kernels. Parameters: pointers and one float, laid out as a compiler would.
struct Kernel {
  std::string name;
  ParamLayout layout;
  int pointers;  // the first `pointers` parameters are float*
  void (*body)(float** p, float a);
};
int noisy_calls = 0;  // makes "noisy" non-deterministic: its replays never reproduce it
const Kernel kFill{"fill", {{0, 8}, {8, 4}}, 1, [](float** p, float a) {
                     for (std::size_t i = 0; i < kFloats; ++i) p[0][i] = a + static_cast<float>(i);
                   }};
const Kernel kAxpy{"axpy", {{0, 8}, {8, 8}, {16, 4}}, 2, [](float** p, float a) {
                     for (std::size_t i = 0; i < kFloats; ++i) p[1][i] += a * p[0][i];
                   }};
const Kernel kScale{"scale", {{0, 8}, {8, 8}, {16, 4}}, 2, [](float** p, float a) {
                      for (std::size_t i = 0; i < kFloats; ++i) p[1][i] = a * p[0][i];
                    }};
const Kernel kNoisy{"noisy", {{0, 8}, {8, 4}}, 1, [](float** p, float a) {
                      ++noisy_calls;
                      for (std::size_t i = 0; i < kFloats; ++i) p[0][i] = a + static_cast<float>(noisy_calls);
                    }};

// Reads kernelParams or the packed extra buffer back into pointers and the scalar.
void run_body(const Kernel& k, void** kernel_params, void** extra) {
  std::vector<std::byte> packed;
  if (kernel_params) {
    packed.assign(k.layout.back().offset + k.layout.back().size, std::byte{0});
    for (std::size_t i = 0; i < k.layout.size(); ++i)
      std::memcpy(packed.data() + k.layout[i].offset, kernel_params[i], k.layout[i].size);
  } else {
    REQUIRE(extra != nullptr);
    REQUIRE(extra[0] == CU_LAUNCH_PARAM_BUFFER_POINTER);
    const std::size_t size = *static_cast<std::size_t*>(extra[3]);
    packed.assign(static_cast<std::byte*>(extra[1]), static_cast<std::byte*>(extra[1]) + size);
  }
  float* ptrs[2] = {};
  for (int i = 0; i < k.pointers; ++i) std::memcpy(&ptrs[i], packed.data() + 8 * i, 8);
  float a = 0;
  std::memcpy(&a, packed.data() + k.layout.back().offset, 4);
  k.body(ptrs, a);
}

struct Host {
  Log log;
  HostFingerprinter prints{log};
  HostStager stager{log};
  std::int64_t t = 0;
  Recorder recorder{RecorderOptions{3, {}, static_cast<std::size_t>(-1)}, [this] { return ++t; }};
  DirectionLearner learner{prints, 2};
  LaunchLearning learning{recorder, learner, stager};
  std::map<std::uint64_t, std::unique_ptr<float[]>> memory;
  std::vector<std::vector<std::uint64_t>> replay_pointers;  // per relaunch, its pointer words
  bool use_extra = false;

  float* alloc() {
    auto buffer = std::make_unique<float[]>(kFloats);
    float* p = buffer.get();
    for (std::size_t i = 0; i < kFloats; ++i) p[i] = static_cast<float>(i * 7 % 13) + 0.5f;
    memory.emplace(reinterpret_cast<std::uint64_t>(p), std::move(buffer));
    recorder.on_alloc(reinterpret_cast<std::uint64_t>(p), kBytes, 0);
    return p;
  }
  void free(float* p) {
    recorder.on_free(reinterpret_cast<std::uint64_t>(p));
    memory.erase(reinterpret_cast<std::uint64_t>(p));
  }

  // One launch through the wrapper's sequence: before, the real launch (recorded as CUPTI
  // would), after with a relaunch that runs the body on whatever it is given.
  void launch(const Kernel& k, std::vector<float*> ptrs, float a, bool accepted = true) {
    std::vector<std::byte> packed(k.layout.back().offset + k.layout.back().size, std::byte{0});
    for (std::size_t i = 0; i < ptrs.size(); ++i) std::memcpy(packed.data() + 8 * i, &ptrs[i], 8);
    std::memcpy(packed.data() + k.layout.back().offset, &a, 4);
    std::vector<void*> args;
    for (const ParamSlot& slot : k.layout) args.push_back(packed.data() + slot.offset);
    std::size_t size = packed.size();
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    const ParamSource source = use_extra ? ParamSource{nullptr, nullptr, extra} : ParamSource{&k.layout, args.data(), nullptr};
    LaunchLearning::Pending pending = learning.before({k.name, 7, source});
    if (accepted) {
      log.add("run " + k.name);
      run_body(k, use_extra ? nullptr : args.data(), use_extra ? extra : nullptr);
      OpInfo info;
      info.name = k.name;
      info.stream = 7;
      recorder.add_op(std::move(info), [&](const BlockMap& blocks, trace::Op& op) {
        scan_param_buffer(packed, blocks, op.blocks);
      });
    }
    learning.after(pending, accepted, [&](void** kp, void** ex) {
      log.add("replay " + k.name);
      std::vector<std::uint64_t> words;
      const std::vector<std::byte> before(packed);
      if (kp) {
        for (int i = 0; i < k.pointers; ++i) words.push_back(*static_cast<std::uint64_t*>(kp[i]));
      } else {
        for (int i = 0; i < k.pointers; ++i) {
          std::uint64_t w;
          std::memcpy(&w, static_cast<std::byte*>(ex[1]) + 8 * i, 8);
          words.push_back(w);
        }
      }
      replay_pointers.push_back(words);
      run_body(k, kp, ex);
      return true;
    });
    learning.check_invariants();
  }
};

// A training step: weights w (read), an accumulator acc (read and written), activations
// allocated and freed inside the step (written fresh, then read), a non-deterministic kernel.
struct Step {
  float* w;
  float* acc;
  void run(Host& h, int step) {
    float* act = h.alloc();
    float* out = h.alloc();
    float* rnd = h.alloc();
    h.launch(kFill, {act}, static_cast<float>(step));
    h.launch(kAxpy, {w, acc}, 0.5f);
    h.launch(kScale, {act, out}, 2.0f);
    h.launch(kNoisy, {rnd}, 1.0f);
    h.free(rnd);
    h.free(out);
    h.free(act);
    h.recorder.mark_step();
  }
};

// The accesses an op makes to a block: {read, write} for a block read and written.
std::set<trace::Access> access_of(const trace::Op& op, std::uint64_t block) {
  std::set<trace::Access> out;
  for (const trace::BlockUse& use : op.blocks)
    if (use.block == block) out.insert(use.access);
  return out;
}
using A = std::set<trace::Access>;

}  // namespace

TEST_CASE("launch learning: directions learned through the wrapper sequence land on the recorded trace") {
  for (const bool use_extra : {false, true}) {
    DYNAMIC_SECTION((use_extra ? "extra buffer" : "kernelParams")) {
      Host h;
      h.use_extra = use_extra;
      Step s{h.alloc(), h.alloc()};
      for (int step = 0; step < 3; ++step) s.run(h, step);
      REQUIRE(h.recorder.finished());
      const LaunchLearningCounters c = h.learning.counters();
      CHECK(c.launches == 8);  // 4 launches in each of the two learning iterations, none after
      CHECK(c.learned == 8);
      CHECK(c.unreadable == 0);
      CHECK(c.replays == 8);  // two per launch of the replay iteration
      CHECK(h.stager.live.empty());  // every copy released
      CHECK(h.stager.allocations == 4);

      trace::Trace trace = h.recorder.snapshot();
      const DirectionApplication applied = apply_directions(trace, h.learner.conclude());
      REQUIRE(trace.ops.size() == 12);
      // Per op, its uses in parameter order (a block read and written: read, then write).
      using V = std::vector<trace::Access>;
      const auto R = trace::Access::read, W = trace::Access::write, T = trace::Access::touch;
      const std::set<std::uint64_t> swap_only(applied.swap_only.begin(), applied.swap_only.end());
      for (std::size_t step = 0; step < 3; ++step) {
        const trace::Op* ops = &trace.ops[4 * step];
        INFO("step " << step);
        auto accesses = [](const trace::Op& op) {
          V out;
          for (const trace::BlockUse& use : op.blocks) out.push_back(use.access);
          return out;
        };
        CHECK(accesses(ops[0]) == V{W});     // fill: a fresh block written
        CHECK(accesses(ops[1]) == V{R, R, W});  // axpy: the weight read, the accumulator read and written
        CHECK(accesses(ops[2]) == V{R, W});  // scale: the activation read, a fresh block written
        // noisy: its replays never reproduce what it wrote: a touch, the block swap only.
        CHECK(accesses(ops[3]) == V{T});
        CHECK(swap_only.count(ops[3].blocks[0].block) == 1);
        // The same weight and accumulator every step; fill's block is what scale reads.
        CHECK(ops[1].blocks[0].block == trace.ops[1].blocks[0].block);
        CHECK(ops[1].blocks[2].block == trace.ops[1].blocks[2].block);
        CHECK(ops[2].blocks[0].block == ops[0].blocks[0].block);
      }
      CHECK(applied.directed == 15);
      CHECK(applied.left_touch == 3);
    }
  }
}

TEST_CASE("launch learning: fingerprints, copies, launch and replays in stream order; replays on copies only") {
  Host h;
  Step s{h.alloc(), h.alloc()};
  s.run(h, 0);  // the first learning iteration: fingerprints only
  const std::size_t first = h.log.events.size();
  CHECK(first == 3 + 5 + 5 + 3);  // per launch: its blocks fingerprinted, the run, them again
  // The replay iteration, axpy alone: w and acc.
  float* act = h.alloc();
  h.launch(kFill, {act}, 1.0f);
  h.log.events.clear();
  h.replay_pointers.clear();
  const std::vector<float> acc_before(s.acc, s.acc + kFloats);
  const std::vector<float> w_before(s.w, s.w + kFloats);
  h.launch(kAxpy, {s.w, s.acc}, 0.5f);
  const std::vector<float> acc_after_launch(s.acc, s.acc + kFloats);
  const auto w = std::to_string(reinterpret_cast<std::uint64_t>(s.w));
  const auto acc = std::to_string(reinterpret_cast<std::uint64_t>(s.acc));
  const std::vector<std::string> expected_head = {"copy", "copy", "fp " + w, "fp " + acc, "run axpy", "fp " + w,
                                                  "fp " + acc, "replay axpy"};
  REQUIRE(h.log.events.size() >= expected_head.size());
  // The exact copies are made before the launch ran, and fingerprinted before and after it.
  for (std::size_t i = 0; i < expected_head.size(); ++i) {
    INFO("event " << i << ": " << h.log.events[i]);
    CHECK(h.log.events[i].rfind(expected_head[i], 0) == 0);
  }
  const std::vector<std::string> tail(h.log.events.begin() + 8, h.log.events.end());
  // exact copies fingerprinted, two rotated copies each, permuted fingerprinted, replayed, again.
  REQUIRE(tail.size() == 2 + 4 + 2 + 1 + 2);
  CHECK(tail[6].rfind("fp ", 0) == 0);
  CHECK(tail[8] == "replay axpy");
  // Both replays were given pointers into the staged copies, never the real blocks.
  REQUIRE(h.replay_pointers.size() == 2);
  for (const auto& words : h.replay_pointers) {
    REQUIRE(words.size() == 2);
    for (std::uint64_t word : words) {
      CHECK(word != reinterpret_cast<std::uint64_t>(s.w));
      CHECK(word != reinterpret_cast<std::uint64_t>(s.acc));
    }
  }
  // The real blocks hold what the real launch left, bytes-equal: the replays wrote elsewhere.
  CHECK(std::memcmp(acc_after_launch.data(), s.acc, kBytes) == 0);
  CHECK(std::memcmp(w_before.data(), s.w, kBytes) == 0);
  CHECK(std::memcmp(acc_before.data(), s.acc, kBytes) != 0);  // the launch itself did write
  CHECK(h.stager.live.empty());
  h.learning.check_invariants();
}

TEST_CASE("launch learning: nothing during a graph capture, refused launches, no room for copies") {
  Host h;
  float* w = h.alloc();
  float* acc = h.alloc();
  h.learning.capture_began();
  h.launch(kAxpy, {w, acc}, 0.5f);
  h.learning.capture_ended();
  CHECK(h.log.events == std::vector<std::string>{"run axpy"});  // no fingerprint, no copy
  CHECK(h.learning.counters().during_capture == 1);
  h.learning.capture_ended();  // an unmatched end does not go negative
  h.learning.check_invariants();

  h.log.events.clear();
  h.launch(kAxpy, {w, acc}, 0.5f, /*accepted=*/false);
  CHECK(h.log.events == std::vector<std::string>{"fp " + std::to_string(reinterpret_cast<std::uint64_t>(w)),
                                                 "fp " + std::to_string(reinterpret_cast<std::uint64_t>(acc))});
  CHECK(h.learning.counters().refused == 1);
  h.recorder.mark_step();

  // The replay iteration with no room: fingerprints still, no copies, no replays.
  h.stager.refuse = true;
  h.log.events.clear();
  h.launch(kAxpy, {w, acc}, 0.5f);
  CHECK(h.learning.counters().no_room == 1);
  CHECK(h.learning.counters().replays == 0);
  CHECK(h.log.events.size() == 5);  // fp, fp, run, fp, fp
  // Positions: the captured and the refused launch each took a place in iteration 0.
  h.recorder.mark_step();
  h.learning.check_invariants();
}

TEST_CASE("launch learning: unreadable parameters and transfers") {
  Host h;
  float* w = h.alloc();
  const Kernel& k = kAxpy;
  void* args[3] = {};
  LaunchLearning::Pending pending = h.learning.before({k.name, 7, ParamSource{nullptr, args, nullptr}});
  CHECK_FALSE(pending.ticket.has_value());
  h.learning.after(pending, true, [](void**, void**) { return true; });
  CHECK(h.learning.counters().unreadable == 1);
  h.learning.note_transfer(reinterpret_cast<std::uint64_t>(w), 0);
  CHECK(h.learning.counters().transfers == 1);
  h.learning.check_invariants();
  // After the learning iterations (a marker counts once an op came since the last one),
  // nothing is learned and nothing counted.
  h.launch(kFill, {w}, 1.0f);
  h.recorder.mark_step();
  CHECK(h.learning.active());
  h.launch(kFill, {w}, 2.0f);
  h.recorder.mark_step();
  CHECK_FALSE(h.learning.active());
  const std::uint64_t seen = h.learning.counters().launches;
  CHECK(seen == 3);
  const std::size_t events = h.log.events.size();
  h.launch(kFill, {w}, 3.0f);
  CHECK(h.learning.counters().launches == seen);
  CHECK(h.log.events.size() == events + 1);  // the run alone: no fingerprint
}

namespace {

// A device that says it is a GPU and can do nothing: what RecordSession decides before it
// touches CUPTI or the driver.
class NamedGpu final : public Device {
 public:
  std::string_view kind() const noexcept override { return "cuda"; }
  int ordinal() const noexcept override { return 0; }
  [[noreturn]] static void no() { throw std::logic_error("NamedGpu: not a device"); }
  MemInfo mem_info() override { no(); }
  std::size_t granularity() override { no(); }
  DevicePtr reserve(std::size_t) override { no(); }
  void release_reservation(DevicePtr, std::size_t) override { no(); }
  PhysHandle create_physical(std::size_t) override { no(); }
  void release_physical(PhysHandle) override { no(); }
  void map(DevicePtr, std::size_t, PhysHandle) override { no(); }
  void unmap(DevicePtr, std::size_t) override { no(); }
  StreamHandle create_stream() override { no(); }
  void destroy_stream(StreamHandle) override { no(); }
  void synchronize_stream(StreamHandle) override { no(); }
  void synchronize() override { no(); }
  EventHandle create_event() override { no(); }
  void destroy_event(EventHandle) override { no(); }
  void record_event(EventHandle, StreamHandle) override { no(); }
  bool query_event(EventHandle) override { no(); }
  void synchronize_event(EventHandle) override { no(); }
  void stream_wait_event(StreamHandle, EventHandle) override { no(); }
  void copy_h2d_async(DevicePtr, const void*, std::size_t, StreamHandle) override { no(); }
  void copy_d2h_async(void*, DevicePtr, std::size_t, StreamHandle) override { no(); }
  void copy_d2d_async(DevicePtr, DevicePtr, std::size_t, StreamHandle) override { no(); }
  void memset_async(DevicePtr, std::uint8_t, std::size_t, StreamHandle) override { no(); }
  void* alloc_pinned(std::size_t) override { no(); }
  void free_pinned(void*) override { no(); }
};

}  // namespace

TEST_CASE("record session on a GPU: learning iterations are refused without the launch wrappers, naming LD_PRELOAD") {
  NamedGpu gpu;
  RecordSettings settings;
  settings.mode = DeltaMode::record;
  settings.iterations = 3;
  settings.learning_iterations = 2;
  CHECK_THROWS_WITH(RecordSession(settings, gpu, /*launches_interposed=*/false),
                    Catch::Contains("LD_PRELOAD=libdelta.so") && Catch::Contains("DELTA_LEARNING_ITERATIONS=2"));
}
