// One iteration of a trace as a trace of its own (trace::slice_iteration), and plans that name
// the iteration they are for.
#include <delta/plan.hpp>
#include <delta/trace.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace delta;
using trace::kNever;

namespace {

trace::Block block(std::uint64_t id, std::int64_t alloc, std::int64_t free) {
  trace::Block b;
  b.id = id;
  b.size = 1024 * id;
  b.alloc_ns = alloc;
  b.free_ns = free;
  return b;
}

trace::Op op(std::uint64_t id, std::int64_t start, std::uint32_t iteration, std::vector<std::uint64_t> blocks) {
  trace::Op o;
  o.id = id;
  o.name = "k" + std::to_string(id);
  o.start_ns = start;
  o.duration_ns = 10;
  o.iteration = iteration;
  for (std::uint64_t b : blocks) o.blocks.push_back({b, trace::Access::read});
  return o;
}

// Two iterations, [0, 100) and [100, 200): P lives throughout; A is made and freed in the
// first; B is made in the first and freed in the second; C is made in the second and outlives
// the trace; D is made and freed in the second; E is made and freed before the second starts.
trace::Trace two_steps() {
  trace::Trace t;
  t.source = "test";
  t.gpu.profile = "h200";
  t.blocks = {block(1, kNever, kNever), block(2, 5, 50), block(3, 20, 130), block(4, 110, kNever), block(5, 120, 150),
              block(6, 60, 100)};
  t.ops = {op(0, 10, 0, {1, 2}), op(1, 30, 0, {3}), op(2, 70, 0, {6}), op(3, 115, 1, {1, 3, 4}), op(4, 125, 1, {5})};
  t.iterations = {{0, 0, 100, 0, 3}, {1, 100, 200, 3, 5}};
  trace::validate(t);
  return t;
}

const trace::Block* find(const trace::Trace& t, std::uint64_t id) {
  for (const trace::Block& b : t.blocks)
    if (b.id == id) return &b;
  return nullptr;
}

}  // namespace

TEST_CASE("an iteration sliced from a trace keeps its ops and the blocks live in it", "[trace][iteration]") {
  const trace::Trace step = trace::slice_iteration(two_steps(), 1);
  REQUIRE(step.ops.size() == 2);
  CHECK(step.ops[0].id == 3);
  CHECK(step.ops[1].id == 4);
  CHECK(step.ops[0].iteration == 0);
  REQUIRE(step.iterations.size() == 1);
  CHECK(step.iterations[0].first_op == 0);
  CHECK(step.iterations[0].end_op == 2);
  CHECK(step.metadata.at("iteration") == "1");
  // A and E are gone before it starts.
  CHECK(find(step, 2) == nullptr);
  CHECK(find(step, 6) == nullptr);
  // P and B were made before it: persistent; B is still freed in it.
  REQUIRE(find(step, 1));
  CHECK(find(step, 1)->alloc_ns == kNever);
  REQUIRE(find(step, 3));
  CHECK(find(step, 3)->alloc_ns == kNever);
  CHECK(find(step, 3)->free_ns == 130);
  // C and D are made in it; C outlives it.
  CHECK(find(step, 4)->alloc_ns == 110);
  CHECK(find(step, 4)->free_ns == kNever);
  CHECK(find(step, 5)->free_ns == 150);
}

TEST_CASE("the first iteration: blocks freed after it live to its end", "[trace][iteration]") {
  const trace::Trace step = trace::slice_iteration(two_steps(), 0);
  CHECK(step.ops.size() == 3);
  CHECK(find(step, 3)->free_ns == kNever);  // B, freed in the next one
  CHECK(find(step, 6)->free_ns == kNever);  // E, freed right at its end
  CHECK(find(step, 4) == nullptr);          // C, made in the next one
}

TEST_CASE("an iteration the trace does not have is refused naming those it has", "[trace][iteration]") {
  CHECK_THROWS_WITH(trace::slice_iteration(two_steps(), 7), Catch::Contains("iteration 7") && Catch::Contains("iterations 0, 1"));
  trace::Trace none = two_steps();
  none.iterations.clear();
  for (trace::Op& o : none.ops) o.iteration = 0;
  CHECK_THROWS_WITH(trace::slice_iteration(none, 0), Catch::Contains("no iterations"));
}

TEST_CASE("by default a plan is for the last iteration of a trace with several", "[trace][iteration]") {
  CHECK(trace::default_iteration(two_steps()) == std::optional<std::uint32_t>(1));
  trace::Trace one = trace::slice_iteration(two_steps(), 1);
  CHECK_FALSE(trace::default_iteration(one).has_value());
}

TEST_CASE("a plan names its iteration, and is checked against that iteration", "[trace][iteration][plan]") {
  const trace::Trace whole = two_steps();
  const trace::Trace step = trace::slice_iteration(whole, 1);
  plan::Plan p;
  p.method = "test";
  p.trace_hash = plan::trace_fingerprint(step);
  p.trace_ops = step.ops.size();
  p.trace_blocks = step.blocks.size();
  p.gpu_profile = "h200";
  p.budget_bytes = 1 << 20;
  p.trace_iteration = 1;
  const plan::Plan back = plan::parse_plan(plan::to_json_text(p));
  CHECK(back.trace_iteration == std::optional<std::uint32_t>(1));
  CHECK_NOTHROW(plan::check_plan_matches(back, plan::plan_step(whole, back)));
  CHECK_THROWS_WITH(plan::check_plan_matches(back, whole), Catch::Contains("of its iteration 1"));
  SECTION("a plan for the whole trace says nothing of iterations") {
    p.trace_iteration.reset();
    const std::string text = plan::to_json_text(p);
    CHECK(text.find("iteration") == std::string::npos);
    CHECK_FALSE(plan::parse_plan(text).trace_iteration.has_value());
  }
  SECTION("an iteration out of range is refused naming the place") {
    auto doc = nlohmann::json::parse(plan::to_json_text(p));
    doc["trace"]["iteration"] = 99999999999ULL;
    const std::string text = doc.dump();
    CHECK_THROWS_WITH(plan::parse_plan(text), Catch::Contains("trace.iteration"));
  }
}
