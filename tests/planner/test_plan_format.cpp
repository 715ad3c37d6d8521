#include "tiny_traces.hpp"

#include <delta/plan.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace delta;
using namespace delta::planner::testing;

namespace {

plan::Plan sample_plan(const trace::Trace& t) {
  plan::Plan p;
  p.method = "delta";
  p.trace_hash = plan::trace_fingerprint(t);
  p.trace_ops = t.ops.size();
  p.trace_blocks = t.blocks.size();
  p.gpu_profile = "titanv";
  p.budget_bytes = 123456789;
  p.budget_ratio = 0.5;
  plan::Interval s;
  s.action = plan::Action::swap;
  s.release_after = 0;
  s.prefetch_at = 3;
  s.needed_by = 4;
  plan::Interval r;
  r.action = plan::Action::regenerate;
  r.release_after = 0;
  r.needed_by = 2;
  r.replay = {0};
  r.inputs = {};
  p.decisions.push_back({1, {s}});
  p.predicted = {1200000000, 420000000, 420000000, 1.0, true, 1300000000, 0.97};
  return p;
}

}  // namespace

TEST_CASE("plans round-trip through JSON text and files") {
  trace::Trace t = swap_trace();
  plan::Plan p = sample_plan(t);
  plan::Plan q = plan::parse_plan(plan::to_json_text(p));
  CHECK(q.method == p.method);
  CHECK(q.trace_hash == p.trace_hash);
  CHECK(q.budget_bytes == p.budget_bytes);
  CHECK(q.budget_ratio == p.budget_ratio);
  REQUIRE(q.decisions.size() == 1);
  CHECK(q.decisions[0].intervals[0].prefetch_at == 3);
  CHECK_FALSE(q.decisions[0].intervals[0].copy_after.has_value());
  CHECK(q.predicted.peak_bytes == p.predicted.peak_bytes);
  CHECK(q.predicted.reserved_peak_bytes == 1300000000);
  CHECK(q.predicted.planned_fraction == 0.97);
  CHECK(plan::to_json_text(q) == plan::to_json_text(p));
  const std::string path = (std::filesystem::temp_directory_path() / "delta-plan-roundtrip.json").string();
  plan::write_plan(p, path);
  CHECK(plan::to_json_text(plan::read_plan(path)) == plan::to_json_text(p));
  std::remove(path.c_str());
  REQUIRE_NOTHROW(plan::check_plan_matches(q, t));
}

TEST_CASE("a plan file named .gz is written compressed and read by its content, whatever its name") {
  trace::Trace t = swap_trace();
  const plan::Plan p = sample_plan(t);
  const auto dir = std::filesystem::temp_directory_path();
  const std::string gz = (dir / "delta-plan-roundtrip.json.gz").string(), renamed = (dir / "delta-plan-gz-named.json").string();
  plan::write_plan(p, gz);
  {
    std::ifstream in(gz, std::ios::binary);
    char magic[2] = {0, 0};
    in.read(magic, 2);
    CHECK((static_cast<unsigned char>(magic[0]) == 0x1f && static_cast<unsigned char>(magic[1]) == 0x8b));  // gzip, not text
  }
  CHECK(plan::to_json_text(plan::read_plan(gz)) == plan::to_json_text(p));
  std::filesystem::copy_file(gz, renamed, std::filesystem::copy_options::overwrite_existing);
  CHECK(plan::to_json_text(plan::read_plan(renamed)) == plan::to_json_text(p));
  // Cut short: refused naming the file, not read as a NUL-laden text.
  std::filesystem::resize_file(renamed, std::filesystem::file_size(renamed) / 2);
  try {
    plan::read_plan(renamed);
    FAIL("a truncated gzip plan was read");
  } catch (const plan::PlanError& e) {
    CHECK(std::string(e.what()).find(renamed + ": a damaged gzip file") != std::string::npos);
  }
  std::remove(gz.c_str());
  std::remove(renamed.c_str());
}

TEST_CASE("how a plan was fitted (executor placement) round-trips, and is written only when it differs") {
  trace::Trace t = swap_trace();
  plan::Plan p = sample_plan(t);
  p.predicted.reserved_peak_bytes = 1300000000;
  CHECK_THAT(plan::to_json_text(p), !Catch::Contains("\"placement\""));
  p.predicted.executor_placement = true;
  const std::string text = plan::to_json_text(p);
  CHECK_THAT(text, Catch::Contains("\"placement\": \"executor\""));
  CHECK(plan::parse_plan(text).predicted.executor_placement);
  CHECK_FALSE(plan::parse_plan(text).predicted.packed_moves);
  p.predicted.packed_moves = true;  // the moved blocks packed side by side
  const std::string packed = plan::to_json_text(p);
  CHECK_THAT(packed, Catch::Contains("\"placement\": \"executor-packed\""));
  CHECK(plan::parse_plan(packed).predicted.executor_placement);
  CHECK(plan::parse_plan(packed).predicted.packed_moves);
  CHECK_FALSE(plan::parse_plan(packed).predicted.packed_groups);
  p.predicted.packed_groups = true;  // and the state packed in groups
  const std::string grouped = plan::to_json_text(p);
  CHECK_THAT(grouped, Catch::Contains("\"placement\": \"executor-packed-grouped\""));
  CHECK(plan::parse_plan(grouped).predicted.packed_moves);
  CHECK(plan::parse_plan(grouped).predicted.packed_groups);
  CHECK(plan::to_json_text(plan::parse_plan(grouped)) == grouped);
  p.predicted.reserved_peak_bytes = 0;  // judged by live bytes: no placement to speak of
  CHECK_THAT(plan::to_json_text(p), !Catch::Contains("\"placement\""));
}

TEST_CASE("the order of the copies back at one op round-trips, and is written only when by need") {
  trace::Trace t = swap_trace();
  plan::Plan p = sample_plan(t);
  CHECK_THAT(plan::to_json_text(p), !Catch::Contains("\"copies_back\""));
  p.predicted.copies_back_by_need = true;
  const std::string text = plan::to_json_text(p);
  CHECK_THAT(text, Catch::Contains("\"copies_back\": \"by-need\""));
  CHECK(plan::parse_plan(text).predicted.copies_back_by_need);
  CHECK(plan::to_json_text(plan::parse_plan(text)) == text);
}

TEST_CASE("a discard round-trips with only its release point") {
  trace::Trace t = swap_trace();
  plan::Plan p = sample_plan(t);
  plan::Interval discard;
  discard.action = plan::Action::discard;
  discard.release_after = 1;
  p.decisions.push_back({2, {discard}});
  const nlohmann::json j = nlohmann::json::parse(plan::to_json_text(p));
  CHECK(j["decisions"][1]["intervals"][0] == nlohmann::json({{"action", "discard"}, {"release_after", 1}}));
  plan::Plan q = plan::parse_plan(j.dump());
  REQUIRE(q.decisions.size() == 2);
  CHECK(q.decisions[1].intervals[0].action == plan::Action::discard);
  CHECK(q.decisions[1].intervals[0].release_after == 1);
  CHECK(plan::to_json_text(q) == plan::to_json_text(p));
}

TEST_CASE("a revival round-trips with its end, and may follow a discard") {
  trace::Trace t = swap_trace();
  plan::Plan p = sample_plan(t);
  plan::Interval discard, revive;
  discard.action = plan::Action::discard;
  discard.release_after = 2;
  revive.action = plan::Action::revive;
  revive.release_after = 2;
  revive.needed_by = 3;
  revive.until = 4;
  revive.replay = {2};
  p.decisions.push_back({2, {discard, revive}});
  const nlohmann::json j = nlohmann::json::parse(plan::to_json_text(p));
  CHECK(j["decisions"][1]["intervals"][1]["action"] == "revive");
  CHECK(j["decisions"][1]["intervals"][1]["until"] == 4);
  plan::Plan q = plan::parse_plan(j.dump());
  REQUIRE(q.decisions.size() == 2);
  CHECK(q.decisions[1].intervals[1].action == plan::Action::revive);
  CHECK(q.decisions[1].intervals[1].until == 4);
  CHECK(plan::to_json_text(q) == plan::to_json_text(p));
  CHECK_NOTHROW(plan::check_plan_matches(q, t));
}

TEST_CASE("a retention round-trips with its end, may be followed by revivals only, and must end after its start") {
  trace::Trace t = swap_trace();
  plan::Plan p = sample_plan(t);
  plan::Interval retain, revive;
  retain.action = plan::Action::retain;
  retain.release_after = 2;
  retain.until = 3;
  revive.action = plan::Action::revive;
  revive.release_after = 3;
  revive.needed_by = 4;
  revive.until = 4;
  revive.replay = {2};
  p.decisions.push_back({2, {retain, revive}});
  const nlohmann::json j = nlohmann::json::parse(plan::to_json_text(p));
  CHECK(j["decisions"][1]["intervals"][0] == nlohmann::json({{"action", "retain"}, {"release_after", 2}, {"until", 3}}));
  plan::Plan q = plan::parse_plan(j.dump());
  REQUIRE(q.decisions.size() == 2);
  CHECK(q.decisions[1].intervals[0].action == plan::Action::retain);
  CHECK(q.decisions[1].intervals[0].until == 3);
  CHECK(plan::to_json_text(q) == plan::to_json_text(p));
  CHECK_NOTHROW(plan::check_plan_matches(q, t));
  plan::Plan after_swap = p;  // nothing but a revival after a retention
  plan::Interval swap;
  swap.action = plan::Action::swap;
  swap.release_after = 3;
  swap.prefetch_at = 4;
  swap.needed_by = 4;
  after_swap.decisions[1].intervals[1] = swap;
  CHECK_THROWS_WITH(plan::check_plan_matches(after_swap, t), Catch::Contains("only revivals may follow a retain"));
  plan::Plan backwards = p;
  backwards.decisions[1].intervals = {retain};
  backwards.decisions[1].intervals[0].until = 2;
  CHECK_THROWS_WITH(plan::check_plan_matches(backwards, t), Catch::Contains("until must lie in (release_after, last op]"));
  nlohmann::json missing = j;
  missing["decisions"][1]["intervals"][0].erase("until");
  CHECK_THROWS_WITH(plan::parse_plan(missing.dump()), Catch::Contains("missing field 'until'"));
}

TEST_CASE("hostile plan files are refused with a message naming the problem") {
  trace::Trace t = swap_trace();
  const nlohmann::json good = nlohmann::json::parse(plan::to_json_text(sample_plan(t)));
  auto refused = [](const std::string& text, const std::string& expected) {
    try {
      plan::parse_plan(text, "hostile.json");
      FAIL("accepted: " << text);
    } catch (const plan::PlanError& e) {
      CHECK_THAT(e.what(), Catch::Contains(expected));
    }
  };
  refused("", "not valid JSON");
  refused("{\"format\": ", "not valid JSON");
  refused("[1,2]", "a plan is a JSON object");
  refused("{}", "missing field 'format'");
  nlohmann::json j = good;
  j["format"] = "delta-trace";
  refused(j.dump(), "not a DELTA plan");
  j = good;
  j["version"] = 99;
  refused(j.dump(), "version 99 is not supported");
  j = good;
  j["version"] = 4294967297;  // 2^32 + 1: read as an int it would wrap to version 1
  refused(j.dump(), "version 4294967297 is not supported");
  j = good;
  j["budget_bytes"] = 0;  // would read as no budget at all
  refused(j.dump(), "budget_bytes: 0 is no budget");
  refused(good.dump() + std::string(1, '\0') + "garbage", "a NUL byte at offset");
  j = good;
  j.erase("budget_bytes");
  refused(j.dump(), "missing field 'budget_bytes'");
  j = good;
  j["budget_bytes"] = -5;
  refused(j.dump(), "budget_bytes: expected a non-negative integer");
  j = good;
  j["decisions"][0]["intervals"][0]["action"] = "teleport";
  refused(j.dump(), "action: expected \"swap\", \"regenerate\", \"discard\", \"revive\" or \"retain\"");
  j = good;
  j["decisions"][0]["intervals"][0] = {{"action", "revive"}, {"release_after", 0}, {"needed_by", 2}, {"replay", {0}}, {"inputs", nlohmann::json::array()}};
  refused(j.dump(), "decisions[0].intervals[0]: missing field 'until'");
  j = good;
  j["decisions"][0]["intervals"][0].erase("prefetch_at");
  refused(j.dump(), "decisions[0].intervals[0]: missing field 'prefetch_at'");
  j = good;
  j["decisions"] = "everything";
  refused(j.dump(), "decisions: expected an array");
  j = good;
  j["decisions"][0]["intervals"][0] = {{"action", "regenerate"}, {"release_after", 0}, {"needed_by", 2}, {"replay", nlohmann::json::array()}, {"inputs", nlohmann::json::array()}};
  refused(j.dump(), "a regeneration needs at least one op");
  j = good;
  j["predicted"]["planned_fraction"] = 1.5;
  refused(j.dump(), "predicted.planned_fraction: expected a number in (0, 1]");
  j = good;
  j["predicted"]["reserved_peak_bytes"] = "lots";
  refused(j.dump(), "reserved_peak_bytes: expected a non-negative integer");
  // Files written before the two fields existed still load, with the defaults.
  j = good;
  j["predicted"].erase("reserved_peak_bytes");
  j["predicted"].erase("planned_fraction");
  const plan::Plan older = plan::parse_plan(j.dump());
  CHECK(older.predicted.reserved_peak_bytes == 0);
  CHECK(older.predicted.planned_fraction == 1.0);
  CHECK_FALSE(older.predicted.executor_placement);  // fitted the planner's way, as plans then were
  CHECK_FALSE(older.predicted.copies_back_by_need);  // copies back in the plan's order, as they then ran
  j = good;
  j["predicted"]["copies_back"] = "soonest";
  refused(j.dump(), "predicted.copies_back: expected \"by-need\" or \"in-plan-order\"");
  j = good;
  j["predicted"]["placement"] = "anywhere";
  refused(j.dump(), "predicted.placement: expected \"executor\", \"executor-packed\", \"executor-packed-grouped\" or \"planner\"");
  CHECK_THROWS_AS(plan::read_plan("/nonexistent/plan.json"), plan::PlanError);
}

TEST_CASE("a number too large for any type is refused as a plan error, not a crash") {
  CHECK_THROWS_WITH(plan::parse_plan("{\"budget_bytes\": 94E718400}"), Catch::Contains("not valid JSON"));
}

TEST_CASE("a swap's early copy (copy_after) round-trips and is optional") {
  trace::Trace t = swap_trace();
  plan::Plan p = sample_plan(t);
  p.decisions[0].intervals[0].release_after = 1;
  p.decisions[0].intervals[0].copy_after = 0;
  const std::string text = plan::to_json_text(p);
  CHECK_THAT(text, Catch::Contains("\"copy_after\""));
  plan::Plan q = plan::parse_plan(text);
  REQUIRE(q.decisions[0].intervals[0].copy_after.has_value());
  CHECK(*q.decisions[0].intervals[0].copy_after == 0);
  CHECK(plan::copy_out_after(q.decisions[0].intervals[0]) == 0);
  CHECK_NOTHROW(plan::check_plan_matches(q, t));
  auto j = nlohmann::json::parse(text);
  j["decisions"][0]["intervals"][0]["copy_after"] = -1;
  CHECK_THROWS_WITH(plan::parse_plan(j.dump()), Catch::Contains("copy_after: expected a non-negative integer"));
  // A second swap's copy cannot start before the first brings the block back.
  plan::Interval later = p.decisions[0].intervals[0];
  p.decisions[0].intervals[0].copy_after.reset();
  p.decisions[0].intervals[0].release_after = 0;
  p.decisions[0].intervals[0].prefetch_at = 1;
  p.decisions[0].intervals[0].needed_by = 2;
  later.release_after = 2;
  later.prefetch_at = 3;
  later.needed_by = 4;
  later.copy_after = 1;
  p.decisions[0].intervals.push_back(later);
  CHECK_THROWS_WITH(plan::check_plan_matches(p, t), Catch::Contains("copy_after must lie in [the previous interval's needed_by, release_after]"));
  p.decisions[0].intervals[1].copy_after = 2;
  CHECK_NOTHROW(plan::check_plan_matches(p, t));
}

TEST_CASE("a partial swap's byte count round-trips, and must be whole pages below the block's size") {
  trace::Trace t = swap_trace();
  plan::Plan p = sample_plan(t);
  p.decisions[0].intervals[0].bytes = 3 * plan::kSwapGranularity;
  const std::string text = plan::to_json_text(p);
  CHECK_THAT(text, Catch::Contains("\"bytes\""));
  plan::Plan q = plan::parse_plan(text);
  REQUIRE(q.decisions[0].intervals[0].bytes.has_value());
  CHECK(*q.decisions[0].intervals[0].bytes == 3 * plan::kSwapGranularity);
  CHECK(plan::swapped_bytes(q.decisions[0].intervals[0], kX) == 3 * plan::kSwapGranularity);
  CHECK_NOTHROW(plan::check_plan_matches(q, t));
  CHECK_FALSE(plan::parse_plan(plan::to_json_text(sample_plan(t))).decisions[0].intervals[0].bytes.has_value());
  CHECK(plan::swapped_bytes(sample_plan(t).decisions[0].intervals[0], kX) == kX);
  for (std::uint64_t bad : {std::uint64_t{0}, plan::kSwapGranularity + 1, kX, (kX / plan::kSwapGranularity + 1) * plan::kSwapGranularity}) {
    INFO(bad);
    p.decisions[0].intervals[0].bytes = bad;
    CHECK_THROWS_WITH(plan::check_plan_matches(p, t), Catch::Contains("bytes must be a positive multiple of 2097152 below the block's size"));
  }
  auto j = nlohmann::json::parse(text);
  j["decisions"][0]["intervals"][0]["bytes"] = "many";
  CHECK_THROWS_WITH(plan::parse_plan(j.dump()), Catch::Contains("bytes: expected a non-negative integer"));
}

TEST_CASE("a plan that does not match its trace is refused") {
  trace::Trace t = swap_trace();
  auto mismatch = [&](const plan::Plan& p, const trace::Trace& against, const std::string& expected) {
    try {
      plan::check_plan_matches(p, against);
      FAIL("accepted a mismatched plan");
    } catch (const plan::PlanError& e) {
      CHECK_THAT(e.what(), Catch::Contains(expected));
    }
  };
  trace::Trace other = swap_trace();
  other.ops[1].duration_ns += 1;
  mismatch(sample_plan(t), other, "made for another trace");
  plan::Plan p = sample_plan(t);
  p.decisions[0].block = 77;
  mismatch(p, t, "unknown block");
  p = sample_plan(t);
  p.decisions[0].intervals[0].needed_by = 9;
  mismatch(p, t, "past the end of the trace");
  p = sample_plan(t);
  p.decisions[0].intervals[0].prefetch_at = 0;
  mismatch(p, t, "prefetch_at must lie in");
  p = sample_plan(t);
  p.decisions[0].intervals[0].copy_after = 1;  // after its release (op 0)
  mismatch(p, t, "copy_after must lie in [0, release_after]");
  p = sample_plan(t);
  p.decisions[0].intervals.push_back(p.decisions[0].intervals[0]);
  mismatch(p, t, "overlaps the previous interval");
  p = sample_plan(t);
  p.decisions.push_back(p.decisions[0]);
  mismatch(p, t, "two decisions");
  p = sample_plan(t);
  plan::Interval discard;
  discard.action = plan::Action::discard;
  discard.release_after = 0;
  p.decisions[0].intervals.insert(p.decisions[0].intervals.begin(), discard);
  mismatch(p, t, "only revivals may follow a discard");
  p = sample_plan(t);
  plan::Interval revive;
  revive.action = plan::Action::revive;
  revive.release_after = 2;
  revive.needed_by = 3;
  revive.until = 5;  // the trace has ops 0..4
  revive.replay = {0};
  p.decisions[0].intervals = {revive};
  mismatch(p, t, "until must lie in [needed_by, last op]");
  p = sample_plan(t);
  plan::Interval r;
  r.action = plan::Action::regenerate;
  r.release_after = 0;
  r.needed_by = 2;
  r.replay = {3};
  p.decisions[0].intervals = {r};
  mismatch(p, t, "has not run yet");
}

TEST_CASE("packed groups: blocks away over nearly the same ops share a group") {
  // A step of 1,000 ops. Blocks 0 to 9 live before it, allocated as AdamW allocates each
  // parameter's moments: m0 v0 m1 v1 ... Each m leaves after op 0 and is back for op 800 + k
  // (its launch in the first update), each v for op 900 + k (the second). Blocks 20 and 21 are
  // activations, away over the same ops but one.
  plan::Plan p;
  p.trace_ops = 1000;
  const auto swap = [](std::uint64_t release_after, std::uint64_t needed_by) {
    plan::Interval s;
    s.action = plan::Action::swap;
    s.release_after = release_after;
    s.prefetch_at = needed_by - 1;
    s.needed_by = needed_by;
    return s;
  };
  for (std::uint64_t k = 0; k < 5; ++k) {
    p.decisions.push_back({2 * k, {swap(0, 800 + k)}});      // m_k
    p.decisions.push_back({2 * k + 1, {swap(0, 900 + k)}});  // v_k
  }
  p.decisions.push_back({20, {swap(100, 600)}});
  p.decisions.push_back({21, {swap(101, 601)}});
  p.decisions.push_back({30, {}});  // kept: not moved, no group
  const auto groups = plan::packed_groups(p);
  REQUIRE(groups.size() == 12);
  CHECK(groups.count(30) == 0);
  for (std::uint64_t k = 0; k < 5; ++k) {
    CHECK(groups.at(2 * k) == groups.at(0));
    CHECK(groups.at(2 * k + 1) == groups.at(1));
  }
  CHECK(groups.at(0) != groups.at(1));
  CHECK(groups.at(20) == groups.at(21));
  CHECK(groups.at(20) != groups.at(0));
  CHECK(groups.at(20) != groups.at(1));
  // More patterns than groups: never past the last group, and a block joins the group whose
  // last block is closest to it.
  plan::Plan many;
  many.trace_ops = 1000;
  for (std::uint64_t id = 0; id < 40; ++id) many.decisions.push_back({id, {swap(0, 100 + 20 * id)}});
  const auto spread = plan::packed_groups(many);
  for (const auto& [id, group] : spread) CHECK(group < plan::kPackedGroups);
  for (std::uint64_t id = 0; id < plan::kPackedGroups; ++id) CHECK(spread.at(id) == id);
  CHECK(spread.at(39) == spread.at(38));
}
