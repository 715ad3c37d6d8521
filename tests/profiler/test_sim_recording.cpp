// End to end on the sim device: a 3-layer MLP trained through the caching allocator while a
// record session watches, then the written trace held against what the harness issued.
#include "mlp_step.hpp"

#include <delta/trace.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <set>

using namespace delta;
using delta::test::ExpectedOp;
using delta::test::MlpHarness;

namespace {

namespace fs = std::filesystem;

struct SimRun {
  std::shared_ptr<Device> device = make_sim_device({});
  CachingAllocator allocator{device, AllocatorConfig{}};
  SimDevice& sim = *as_sim(device.get());
};

fs::path fresh_path(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "delta_profiler_tests";
  fs::create_directories(dir);
  fs::remove(dir / name);
  return dir / name;
}

using UseSet = std::set<std::pair<std::uint64_t, trace::Access>>;

// The recorded op against the expected one: same name, kind, iteration, phase, and exactly the
// expected blocks (found by address among the blocks live at the op) with the same directions.
void check_op(const trace::Trace& recorded, const trace::Op& op, const ExpectedOp& expected) {
  INFO("op " << op.id << " '" << op.name << "'");
  CHECK(op.name == expected.name);
  CHECK(op.kind == expected.kind);
  CHECK(op.iteration == expected.iteration);
  CHECK(op.phase == expected.phase);
  CHECK(op.duration_ns > 0);
  UseSet want;
  for (const auto& [address, access] : expected.uses) {
    const trace::Block* owner = nullptr;
    for (const trace::Block& block : recorded.blocks) {
      const bool live = block.alloc_ns <= op.start_ns && (block.free_ns == trace::kNever || block.free_ns > op.start_ns);
      if (block.address == address && live) owner = &block;
    }
    REQUIRE(owner != nullptr);
    want.emplace(owner->id, access);
  }
  UseSet got;
  for (const trace::BlockUse& use : op.blocks) got.emplace(use.block, use.access);
  CHECK(got == want);
  CHECK(op.blocks.size() == got.size());
}

}  // namespace

TEST_CASE("recording an MLP training step on the sim with step markers") {
  SimRun run;
  const fs::path path = fresh_path("mlp_markers.json");
  profiler::RecordSettings settings;
  settings.mode = profiler::DeltaMode::record;
  settings.trace_path = path.string();
  settings.iterations = 2;
  profiler::RecordSession session(settings, *run.device);
  MlpHarness mlp(run.allocator, run.sim, session);

  mlp.step(true);
  CHECK_FALSE(session.written());
  mlp.step(true);  // the second marker completes the recording: the file is written now
  CHECK(session.written());
  REQUIRE(fs::exists(path));
  const auto written_at = fs::last_write_time(path);
  mlp.step(true);  // a third step is not recorded and does not rewrite the file
  mlp.release();
  CHECK(fs::last_write_time(path) == written_at);

  const trace::Trace recorded = trace::read_trace(path.string());
  CHECK_NOTHROW(trace::validate(recorded));
  CHECK(recorded.source == "delta-recorder");
  CHECK(recorded.gpu.profile == "h200");
  CHECK(recorded.metadata.at("iteration_detection") == "markers");
  CHECK(recorded.metadata.at("recorded_on") == "sim");
  CHECK(std::stoull(recorded.metadata.at("recorder_callbacks")) == recorded.ops.size());
  CHECK(recorded.metadata.count("recorder_overhead_ns") == 1);

  std::vector<ExpectedOp> expected;
  for (const ExpectedOp& op : mlp.expected()) {
    if (op.iteration < 2) expected.push_back(op);
  }
  REQUIRE(recorded.ops.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) check_op(recorded, recorded.ops[i], expected[i]);

  REQUIRE(recorded.iterations.size() == 2);
  CHECK(recorded.iterations[0].first_op == 0);
  CHECK(recorded.iterations[0].end_op == expected.size() / 2);
  CHECK(recorded.iterations[1].end_op == expected.size());
  // Every phase shows up in every iteration.
  for (const auto& iteration : recorded.iterations) {
    std::set<trace::Phase> phases;
    for (auto i = iteration.first_op; i < iteration.end_op; ++i) phases.insert(recorded.ops[i].phase);
    CHECK(phases == std::set<trace::Phase>{trace::Phase::forward, trace::Phase::backward, trace::Phase::optimizer});
  }

  // Parameters (first 6 blocks) outlive the recording; activations of step 1 were freed in it.
  REQUIRE(recorded.blocks.size() > 6);
  for (int i = 0; i < 6; ++i) CHECK(recorded.blocks[i].free_ns == trace::kNever);
  std::size_t freed = 0;
  for (const auto& block : recorded.blocks) freed += block.free_ns != trace::kNever ? 1 : 0;
  CHECK(freed > 20);
}

TEST_CASE("recording the MLP on the sim without markers detects the iterations") {
  SimRun run;
  const fs::path path = fresh_path("mlp_auto.json");
  profiler::RecordSettings settings;
  settings.mode = profiler::DeltaMode::record;
  settings.trace_path = path.string();
  settings.iterations = 2;
  profiler::RecordSession session(settings, *run.device);
  MlpHarness mlp(run.allocator, run.sim, session);

  // Warm-up noise: initialisation kernels that never come back.
  for (const char* name : {"init_normal", "init_normal", "cublas_workspace", "autotune"}) {
    SimLaunch launch;
    launch.name = name;
    launch.duration_ns = 1000;
    run.sim.launch(launch, 0);
  }
  for (int step = 0; step < 8 && !session.written(); ++step) mlp.step(false);
  REQUIRE(session.written());
  mlp.release();

  const trace::Trace recorded = trace::read_trace(path.string());
  CHECK(recorded.metadata.at("iteration_detection") == "automatic");
  CHECK(recorded.metadata.at("warmup_iteration") == "true");
  REQUIRE(recorded.iterations.size() == 3);
  CHECK(recorded.iterations[0].end_op == 4);
  const std::size_t per_step = recorded.iterations[1].end_op - recorded.iterations[1].first_op;
  CHECK(recorded.iterations[2].end_op - recorded.iterations[2].first_op == per_step);
  // The detected boundary is the start of a training step (its batch copy), not a rotation.
  CHECK(recorded.ops[recorded.iterations[1].first_op].name == "h2d");
  CHECK(recorded.ops.size() == 4 + 2 * per_step);

  // Recorded iteration k + 1 is the harness's step k.
  std::vector<ExpectedOp> expected;
  for (const ExpectedOp& op : mlp.expected()) {
    if (op.iteration >= 2) continue;
    expected.push_back(op);
    expected.back().iteration += 1;
  }
  REQUIRE(expected.size() == 2 * per_step);
  for (std::size_t i = 0; i < expected.size(); ++i) check_op(recorded, recorded.ops[4 + i], expected[i]);
}

TEST_CASE("a dump before the iterations are complete writes what was recorded") {
  SimRun run;
  const fs::path path = fresh_path("mlp_dump.json.gz");
  profiler::RecordSettings settings;
  settings.mode = profiler::DeltaMode::record;
  settings.trace_path = path.string();
  settings.iterations = 4;
  profiler::RecordSession session(settings, *run.device);
  MlpHarness mlp(run.allocator, run.sim, session);
  mlp.step(true);
  session.dump();
  CHECK(session.written());
  session.finish_at_exit();  // nothing more to write
  const trace::Trace recorded = trace::read_trace(path.string());
  CHECK(recorded.iterations.size() == 1);
  CHECK(recorded.metadata.at("recording_finished") == "true");
  CHECK(recorded.ops.size() == mlp.expected().size());
  mlp.release();
}
