// The executor's reading of a step must be the planner's: plans name ops and blocks by the
// positions TraceIndex gives them, and the executor acts at its own (StepProgram). Checked on
// every shared trace.
#include "executor/step/step_program.hpp"
#include "trace/trace_index.hpp"
#include "trace/trace_loading.hpp"

#include <catch2/catch.hpp>

#include <filesystem>

using namespace delta;

namespace {

std::vector<std::string> shared_traces() {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DELTA_TRACES_DIR) + "/dtr"))
    paths.push_back(entry.path().string());
  paths.push_back(std::string(DELTA_TEST_DATA_DIR) + "/h200-gpt2-small-recorded.json.gz");
  paths.push_back(std::string(DELTA_TEST_DATA_DIR) + "/h200-mlp-recorded.json.gz");
  return paths;
}

}  // namespace

TEST_CASE("the executor's step agrees with the planner's index on every shared trace", "[executor]") {
  for (const std::string& path : shared_traces()) {
    CAPTURE(path);
    const trace::Trace t = planner::load_any_trace(path);
    const planner::TraceIndex index(t);
    const executor::StepProgram program = executor::step_program(t);
    REQUIRE(program.ops.size() == index.op_count());
    REQUIRE(program.blocks.size() == index.blocks().size());
    for (std::size_t k = 0; k < program.ops.size(); ++k) {
      CHECK(program.ops[k].allocate_before == index.allocated_at(k));
      CHECK(program.ops[k].free_after == index.freed_after(k));
      CHECK(program.ops[k].uses.size() == index.uses(k).size());
      for (std::size_t u = 0; u < program.ops[k].uses.size() && u < index.uses(k).size(); ++u) {
        CHECK(program.ops[k].uses[u].block == index.uses(k)[u].block);
        CHECK(program.ops[k].uses[u].read == index.uses(k)[u].read);
        CHECK(program.ops[k].uses[u].write == index.uses(k)[u].write);
      }
    }
    for (std::uint32_t b = 0; b < program.blocks.size(); ++b) {
      CHECK(program.blocks[b].persistent == index.block(b).from_start);
      CHECK(program.blocks[b].to_end == index.block(b).to_end);
    }
  }
}

TEST_CASE("a use of an unknown block is refused naming the op", "[executor]") {
  trace::Trace t;
  t.ops.push_back({});
  t.ops[0].blocks.push_back({7, trace::Access::read});
  CHECK_THROWS_WITH(executor::step_program(t), Catch::Contains("ops[0]: unknown block 7"));
}
