// The trace index's lookups that the planner's scans lean on: block ids to indices (dense table
// or hash map), the blocks live at the step's ends, and the blocks idle across an op, checked
// against their definitions on random traces.
#include "tiny_traces.hpp"
#include "trace/trace_index.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <tuple>

using namespace delta;
using namespace delta::planner;
using namespace delta::planner::testing;

namespace {

// `blocks` blocks with ids id_of(k), each used by a few random ops of `ops`; some live before
// the step, some still live at its end.
template <typename IdOf>
trace::Trace random_trace(std::uint32_t seed, std::size_t blocks, std::size_t ops, IdOf id_of) {
  std::mt19937 rng(seed);
  trace::Trace t = titanv_trace();
  for (std::size_t k = 0; k < blocks; ++k) {
    const bool from_start = rng() % 5 == 0, to_end = rng() % 4 == 0;
    const std::int64_t alloc = from_start ? trace::kNever : std::int64_t(rng() % ops) * kMs;
    const std::int64_t free = to_end ? trace::kNever : alloc + std::int64_t(1 + rng() % ops) * kMs;
    t.blocks.push_back(block(id_of(k), 1000 * (k + 1), alloc, free));
  }
  for (std::size_t i = 0; i < ops; ++i) {
    std::vector<std::pair<std::uint64_t, trace::Access>> uses;
    for (std::size_t u = rng() % 4; u > 0; --u) {
      const std::size_t k = rng() % blocks;
      uses.emplace_back(id_of(k), rng() % 2 ? trace::Access::read : trace::Access::write);
    }
    op(t, "op" + std::to_string(i), kMs, uses);
  }
  return t;
}

// idle_across by its definition: every block with a use before the op and one after it (or
// live to the end of the step), and none at the op.
std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> idle_by_definition(const TraceIndex& index,
                                                                                       std::uint32_t op) {
  std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> idle;
  const auto n = static_cast<std::uint32_t>(index.op_count());
  for (std::uint32_t b = 0; b < index.blocks().size(); ++b) {
    const BlockInfo& info = index.block(b);
    std::int64_t before_op = -1, after_op = -1;
    bool at_op = false;
    for (std::uint32_t use : info.uses) {
      if (use < op) before_op = use;
      if (use == op) at_op = true;
      if (use > op && after_op < 0) after_op = use;
    }
    if (at_op || before_op < 0) continue;
    if (after_op < 0 && !info.to_end) continue;
    idle.emplace_back(b, std::uint32_t(before_op), after_op < 0 ? n : std::uint32_t(after_op));
  }
  return idle;
}

std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> idle_listed(const TraceIndex& index, std::uint32_t op) {
  std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> idle;
  for (const TraceIndex::IdleAcross& x : index.idle_across(op)) idle.emplace_back(x.block, x.after, x.before);
  return idle;
}

}  // namespace

TEST_CASE("blocks idle across an op are those used before and after it, in block order") {
  for (std::uint32_t seed = 1; seed <= 5; ++seed) {
    const trace::Trace t = random_trace(seed, 60, 40, [](std::size_t k) { return std::uint64_t(k); });
    const TraceIndex index(t);
    for (std::uint32_t op = 0; op < index.op_count(); ++op) {
      INFO("seed " << seed << ", op " << op);
      CHECK(idle_listed(index, op) == idle_by_definition(index, op));
      CHECK(idle_listed(index, op) == idle_by_definition(index, op));  // the kept answer, asked again
    }
  }
}

TEST_CASE("an op past the trace has no idle blocks to ask about") {
  const trace::Trace t = random_trace(7, 10, 5, [](std::size_t k) { return std::uint64_t(k); });
  const TraceIndex index(t);
  CHECK_THROWS_AS(index.idle_across(5), std::out_of_range);
}

TEST_CASE("sparse block ids index as dense ones do") {
  // The same trace twice: ids 0..59, and ids spread over 64 bits (a hash map, not a table).
  const trace::Trace dense = random_trace(3, 60, 40, [](std::size_t k) { return std::uint64_t(k); });
  const trace::Trace sparse = random_trace(3, 60, 40, [](std::size_t k) { return (std::uint64_t(k) << 40) + 7; });
  const TraceIndex a(dense), b(sparse);
  REQUIRE(a.blocks().size() == b.blocks().size());
  for (std::uint32_t k = 0; k < 60; ++k) {
    CHECK(a.block_index(k) == k);
    CHECK(b.block_index((std::uint64_t(k) << 40) + 7) == k);
    CHECK(a.block(k).uses == b.block(k).uses);
    CHECK(a.size(k) == a.block(k).size);
    CHECK(b.size(k) == b.block(k).size);
  }
  for (std::uint32_t op = 0; op < a.op_count(); ++op) CHECK(idle_listed(a, op) == idle_listed(b, op));
  CHECK(a.live_at_start() == b.live_at_start());
  CHECK(a.live_at_end() == b.live_at_end());
  for (const TraceIndex* index : {&a, &b}) {
    CHECK_FALSE(index->has_block(60));
    CHECK_FALSE(index->has_block(std::uint64_t(60) << 40));
    CHECK_FALSE(index->has_block(~std::uint64_t{0}));
    CHECK_THROWS_AS(index->block_index(123456789), std::out_of_range);
  }
  CHECK(a.has_block(59));
  CHECK(b.has_block((std::uint64_t(59) << 40) + 7));
}

TEST_CASE("an unknown block is named in the error") {
  CHECK_THROWS_WITH(TraceIndex(random_trace(1, 5, 5, [](std::size_t k) { return std::uint64_t(k); })).block_index(99),
                    "unknown block 99");
}

TEST_CASE("the blocks live at the step's start and end are listed in block order") {
  const trace::Trace t = random_trace(11, 50, 30, [](std::size_t k) { return std::uint64_t(k) * 3; });
  const TraceIndex index(t);
  std::vector<std::uint32_t> at_start, at_end;
  for (std::uint32_t b = 0; b < index.blocks().size(); ++b) {
    if (index.block(b).from_start) at_start.push_back(b);
    if (index.block(b).to_end) at_end.push_back(b);
  }
  CHECK_FALSE(at_start.empty());
  CHECK_FALSE(at_end.empty());
  CHECK(index.live_at_start() == at_start);
  CHECK(index.live_at_end() == at_end);
}
