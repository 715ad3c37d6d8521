#include "profiler/recorder.hpp"

#include <catch2/catch.hpp>

#include <thread>

using namespace delta::profiler;
using delta::trace::Access;
using delta::trace::Phase;

namespace {

// A clock the test moves by hand.
struct FakeClock {
  std::int64_t now = 1000;
  Recorder::Clock clock() {
    return [this] { return now; };
  }
};

std::optional<std::size_t> launch(Recorder& recorder, FakeClock& clock, const std::string& name,
                                  std::vector<std::uint64_t> touched = {}) {
  clock.now += 10;
  OpInfo info;
  info.name = name;
  info.duration_ns = 5;
  return recorder.add_op(info, [&](const BlockMap& blocks, delta::trace::Op& op) {
    for (std::uint64_t address : touched) {
      if (auto block = blocks.find(address)) op.blocks.push_back({block->id, Access::touch});
    }
  });
}

}  // namespace

TEST_CASE("recorder: block lives and launches on one clock, markers split iterations") {
  FakeClock clock;
  RecorderOptions options;
  options.iterations = 2;
  Recorder recorder(options, clock.clock());
  recorder.mark_step();  // before any op: adds nothing
  recorder.on_alloc(0x1000, 256, 7);
  launch(recorder, clock, "a", {0x1010});
  clock.now += 5;
  recorder.on_free(0x1000);
  recorder.on_free(0x9999);  // allocated before recording: counted, not fatal
  recorder.mark_step();
  recorder.mark_step();      // twice in a row: one boundary
  CHECK_FALSE(recorder.finished());
  launch(recorder, clock, "b");
  recorder.mark_step();
  CHECK(recorder.finished());
  launch(recorder, clock, "late");  // after the end: ignored
  recorder.on_alloc(0x2000, 64, 0);

  auto trace = recorder.snapshot();
  REQUIRE(trace.blocks.size() == 1);
  CHECK(trace.blocks[0].address == 0x1000);
  CHECK(trace.blocks[0].stream == 7);
  CHECK(trace.blocks[0].alloc_ns == 0);      // times count from the recorder's start
  CHECK(trace.blocks[0].free_ns == 15);
  REQUIRE(trace.ops.size() == 2);
  CHECK(trace.ops[0].blocks.size() == 1);
  CHECK(trace.ops[0].start_ns == 10);
  REQUIRE(trace.iterations.size() == 2);
  CHECK(trace.iterations[1].first_op == 1);
  CHECK(trace.ops[1].iteration == 1);
  CHECK(trace.metadata.at("iteration_detection") == "markers");
  CHECK(trace.metadata.at("frees_of_unknown_blocks") == "1");
  CHECK_NOTHROW(delta::trace::validate(trace));
}

TEST_CASE("recorder: an allocation over a live block ends that block") {
  FakeClock clock;
  Recorder recorder({}, clock.clock());
  recorder.on_alloc(0x1000, 256, 0);
  clock.now += 3;
  recorder.on_alloc(0x1080, 64, 0);  // its free was never seen
  auto trace = recorder.snapshot();
  REQUIRE(trace.blocks.size() == 2);
  CHECK(trace.blocks[0].free_ns == 3);
  CHECK(trace.blocks[1].free_ns == delta::trace::kNever);
  CHECK(trace.metadata.at("blocks_closed_by_overlap") == "1");
  CHECK_NOTHROW(delta::trace::validate(trace));
}

TEST_CASE("recorder: phases from explicit marks, else from the issuing threads") {
  FakeClock clock;
  Recorder recorder({}, clock.clock());
  launch(recorder, clock, "fwd1");
  launch(recorder, clock, "fwd2");
  std::thread([&] {
    launch(recorder, clock, "bwd1");
    launch(recorder, clock, "bwd2");
  }).join();
  launch(recorder, clock, "opt");
  recorder.mark_step();
  recorder.mark_phase(Phase::forward);
  launch(recorder, clock, "marked");
  auto trace = recorder.snapshot();
  REQUIRE(trace.ops.size() == 6);
  CHECK(trace.ops[0].phase == Phase::forward);
  CHECK(trace.ops[1].phase == Phase::forward);
  CHECK(trace.ops[2].phase == Phase::backward);
  CHECK(trace.ops[3].phase == Phase::backward);
  CHECK(trace.ops[4].phase == Phase::optimizer);
  CHECK(trace.ops[5].phase == Phase::forward);  // set explicitly, in a single-thread iteration
  CHECK(trace.metadata.at("last_iteration_complete") == "false");
}

TEST_CASE("recorder: durations arrive later by correlation id") {
  FakeClock clock;
  Recorder recorder({}, clock.clock());
  OpInfo info;
  info.name = "k";
  auto op = recorder.add_op(info, {});
  REQUIRE(op);
  recorder.bind_correlation(41, *op);
  recorder.complete_correlation(41, 1234);
  recorder.complete_correlation(99, 5);  // unknown id: ignored
  auto trace = recorder.snapshot();
  CHECK(trace.ops[0].duration_ns == 1234);
  CHECK(trace.metadata.at("ops_without_duration") == "0");
}

TEST_CASE("recorder: without markers the repeating launches end the recording") {
  FakeClock clock;
  RecorderOptions options;
  options.iterations = 2;
  options.first_detection_at = 8;
  Recorder recorder(options, clock.clock());
  launch(recorder, clock, "init");
  launch(recorder, clock, "autotune");
  int issued = 0;
  for (int step = 0; step < 10 && !recorder.finished(); ++step) {
    recorder.on_alloc(0x1000, 512, 0);  // an activation: live bytes peak inside the step
    for (const char* name : {"fwd", "loss", "bwd", "opt"}) {
      launch(recorder, clock, name, {0x1000});
      ++issued;
    }
    recorder.on_free(0x1000);
  }
  REQUIRE(recorder.finished());
  auto trace = recorder.snapshot();
  CHECK(trace.metadata.at("iteration_detection") == "automatic");
  CHECK(trace.metadata.at("warmup_iteration") == "true");
  REQUIRE(trace.iterations.size() == 3);  // warm-up + 2
  CHECK(trace.iterations[0].end_op == 2);
  CHECK(trace.iterations[1].end_op - trace.iterations[1].first_op == 4);
  CHECK(trace.ops[trace.iterations[1].first_op].name == "fwd");
  CHECK(trace.ops.size() == 10);
  CHECK(issued > 10);  // the recording went on until the cycle was confirmed, then was cut
  CHECK_NOTHROW(delta::trace::validate(trace));
}

TEST_CASE("recorder: a loop that keeps memory from every step is not taken for training, and says why") {
  FakeClock clock;
  RecorderOptions options;
  options.iterations = 2;
  options.first_detection_at = 8;
  Recorder recorder(options, clock.clock());
  for (int step = 0; step < 10; ++step) {
    recorder.on_alloc(0x100000 + step * 0x400000, 4 << 20, 0);  // 4 MiB kept every step, never freed
    for (const char* name : {"fwd", "loss", "bwd", "opt"}) launch(recorder, clock, name);
  }
  CHECK_FALSE(recorder.finished());
  auto trace = recorder.snapshot();
  REQUIRE(trace.metadata.count("iteration_detection_refused") == 1);
  CHECK(trace.metadata.at("iteration_detection_refused").find("repeat every 4 kernels") != std::string::npos);
}
