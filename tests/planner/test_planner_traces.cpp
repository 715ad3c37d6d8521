// The planner and every baseline on the shared DTR logs (real training runs).
#include "delta_planner.hpp"
#include "dtr_loader.hpp"
#include "methods.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>

using namespace delta;
using namespace delta::planner;

namespace {

std::vector<std::string> dtr_logs() {
  std::vector<std::string> logs;
  const std::filesystem::path dir = std::filesystem::path(DELTA_TRACES_DIR) / "dtr";
  if (std::filesystem::exists(dir))
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.path().extension() == ".log") logs.push_back(entry.path().string());
  std::sort(logs.begin(), logs.end());
  return logs;
}

PlanRequest request_for(const TraceIndex& index, double ratio) {
  PlanRequest request;
  request.index = &index;
  request.gpu = gpu_profile("titanv");
  request.budget_ratio = ratio;
  request.budget_bytes = static_cast<std::uint64_t>(double(index.native_peak()) * ratio);
  return request;
}

// A layered forward/backward model with `layers` layers: the shape of a training step.
trace::Trace synthetic_trace(std::size_t layers) {
  trace::Trace t;
  std::uint64_t next_block = 0;
  std::int64_t now = 0;
  auto add_op = [&](const std::string& name, std::int64_t duration, std::vector<trace::BlockUse> uses, trace::Phase phase) {
    trace::Op op;
    op.id = t.ops.size();
    op.name = name;
    op.start_ns = now;
    op.duration_ns = duration;
    op.phase = phase;
    op.blocks = std::move(uses);
    now += duration;
    t.ops.push_back(std::move(op));
  };
  std::vector<std::uint64_t> activations;
  std::uint64_t input = next_block++;
  t.blocks.push_back({input, 1 << 20, 0, 0, trace::kNever, trace::kNever, trace::Category::input, ""});
  std::uint64_t previous = input;
  for (std::size_t l = 0; l < layers; ++l) {
    const std::uint64_t id = next_block++;
    trace::Block b;
    b.id = id;
    b.size = (4 + l % 7) << 20;
    b.alloc_ns = now;
    t.blocks.push_back(b);
    add_op("fwd", 100'000 + 10'000 * (l % 5), {{previous, trace::Access::read}, {id, trace::Access::write}}, trace::Phase::forward);
    activations.push_back(id);
    previous = id;
  }
  for (std::size_t l = layers; l-- > 0;) {
    add_op("bwd", 200'000, {{activations[l], trace::Access::read}}, trace::Phase::backward);
    t.blocks[activations[l] + 0].free_ns = now;
  }
  return t;
}

}  // namespace

TEST_CASE("DELTA honours the budget at every op on every DTR log at 0.5") {
  const auto logs = dtr_logs();
  REQUIRE(logs.size() == 5);
  for (const std::string& log : logs) {
    trace::Trace t = load_dtr_log(log);
    TraceIndex index(t);
    PlanRequest request = request_for(index, 0.5);
    plan::Plan p = plan_delta(request);
    REQUIRE_NOTHROW(plan::check_plan_matches(p, t));
    SimulationOptions options;
    options.gpu = request.gpu;
    options.budget_bytes = request.budget_bytes;
    SimulationResult r = simulate(index, p, options);
    INFO(log << ": " << r.error);
    CHECK(r.feasible);  // the simulator fails any op whose allocations exceed the budget
    CHECK(r.peak_bytes <= request.budget_bytes);
    CHECK(r.overhead() >= 1.0);
    // The plan survives a trip through its file format and still matches its trace.
    plan::Plan q = plan::parse_plan(plan::to_json_text(p));
    CHECK(simulate(index, q, options).step_time_ns == r.step_time_ns);
  }
}

TEST_CASE("every baseline runs on a DTR log, and native is infeasible below its peak") {
  const auto logs = dtr_logs();
  REQUIRE_FALSE(logs.empty());
  trace::Trace t = load_dtr_log(logs[1]);  // resnet32 (sorted: lstm, resnet32, ...): small and fast
  setenv("DELTA_MILP_SECONDS", "10", 1);
  TraceIndex index(t);
  for (const std::string& method : method_names()) {
    MethodResult r = run_method(method, request_for(index, 0.5));
    INFO(method << ": " << r.reason);
    if (method == "native") {
      CHECK_FALSE(r.feasible);
    } else if (method == "milp" && !r.plan) {
      CHECK_THAT(r.reason, Catch::Contains("milp"));  // no solver installed, or too large
    } else if (r.feasible) {
      CHECK(r.simulation.peak_bytes <= request_for(index, 0.5).budget_bytes);
      CHECK(r.simulation.overhead() >= 1.0);
    } else {
      CHECK_FALSE(r.reason.empty());
    }
  }
  CHECK(run_method("native", request_for(index, 1.0)).feasible);
  CHECK(run_method("dtr", request_for(index, 0.5)).feasible);
  CHECK_THROWS_WITH(run_method("magic", request_for(index, 0.5)), Catch::Contains("unknown method 'magic'"));
}

TEST_CASE("a plan made for one trace is refused on another") {
  const auto logs = dtr_logs();
  REQUIRE(logs.size() >= 2);
  trace::Trace a = load_dtr_log(logs[1]);
  trace::Trace b = load_dtr_log(logs[4]);
  TraceIndex index(a);
  plan::Plan p = plan_delta(request_for(index, 0.5));
  CHECK_THROWS_WITH(plan::check_plan_matches(p, b), Catch::Contains("made for another trace"));
}

TEST_CASE("DTR loader: blocks, phases and liveness of a real log") {
  const auto logs = dtr_logs();
  REQUIRE_FALSE(logs.empty());
  trace::Trace t = load_dtr_log(logs[1]);  // resnet32
  CHECK(t.source == "dtr-log");
  CHECK(t.ops.size() == 286);
  bool backward = false;
  for (const auto& op : t.ops) backward |= op.phase == trace::Phase::backward;
  CHECK(backward);
  TraceIndex index(t);
  CHECK(index.native_peak() > index.resident_at_start());
  CHECK_THROWS_AS(load_dtr_log("/nonexistent.log"), trace::TraceError);
}

TEST_CASE("planning time grows about linearly; 100k ops plan in under 2 s") {
  for (std::size_t layers : {std::size_t(50), std::size_t(12'500), std::size_t(25'000), std::size_t(50'000)}) {
    trace::Trace t = synthetic_trace(layers);
    TraceIndex index(t);
    PlanRequest request = request_for(index, 0.5);
    const auto start = std::chrono::steady_clock::now();
    plan::Plan p = plan_delta(request);  // all its sweeps and the simulations that judge them
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    SimulationOptions sim;
    sim.gpu = request.gpu;
    sim.budget_bytes = request.budget_bytes;
    SimulationResult r = simulate(index, p, sim);
    std::cout << "plan " << t.ops.size() << " ops: " << seconds << " s, " << p.decisions.size()
              << " blocks decided, feasible " << r.feasible << ", overhead " << r.overhead() << " " << r.error << "\n";
    CHECK(r.feasible);
    if (t.ops.size() >= 100'000) CHECK(seconds < 2.0);
  }
}
