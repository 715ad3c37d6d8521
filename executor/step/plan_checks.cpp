#include "executor/step/plan_checks.hpp"

#include <string>
#include <vector>

namespace delta::executor {
namespace {

// Per block: the ops that use it, and the ops that write it, in op order.
struct BlockUses {
  std::vector<std::uint32_t> uses, writes;
};

class Checker {
 public:
  Checker(const trace::Trace& trace, const StepProgram& program) : trace_(trace), program_(program), uses_(program.blocks.size()) {
    for (std::uint32_t op = 0; op < program.ops.size(); ++op)
      for (const StepUse& u : program.ops[op].uses) {
        BlockUses& b = uses_[u.block];
        if (b.uses.empty() || b.uses.back() != op) b.uses.push_back(op);
        if (u.write && (b.writes.empty() || b.writes.back() != op)) b.writes.push_back(op);
      }
  }

  // Only what check_plan_matches leaves to the step: the ranges and orders of an interval's own
  // ops (needed_by, prefetch_at, until, copy_after, bytes, replays that have run) it checks.
  void check(std::uint32_t b, const plan::Interval& x) {
    block_ = b;
    const StepBlock& info = program_.blocks[b];
    switch (x.action) {
      case plan::Action::retain:
        if (info.to_end || x.release_after != info.last)
          fail(x.release_after, "retains it after that op, but the program " +
                                    (info.to_end ? std::string("holds it to the end of the step")
                                                 : "frees it after op " + std::to_string(info.last)));
        return;
      case plan::Action::revive:
        if (info.to_end || info.persistent) fail(x.needed_by, "revives it, but the program never frees it in the step");
        if (x.needed_by <= info.last) fail(x.needed_by, "revives it before the program frees it (after op " + std::to_string(info.last) + ")");
        check_rebuild(b, x, "revives");
        return;
      default:
        break;
    }
    if (x.release_after < info.first || x.release_after > info.last)
      fail(x.release_after, "releases it while the program does not hold it (live over ops " + std::to_string(info.first) + ".." +
                                std::to_string(info.last) + ")");
    if (x.action == plan::Action::discard) {
      if (info.to_end) fail(x.release_after, "discards it, but the step hands it on at its end");
      const std::vector<std::uint32_t>& uses = uses_[b].uses;
      if (!uses.empty() && uses.back() > x.release_after)
        fail(x.release_after, "discards it, but op " + std::to_string(uses.back()) + " uses it after");
      return;
    }
    if (!info.to_end && x.needed_by > info.last)
      fail(x.release_after, "needs it back at op " + std::to_string(x.needed_by) + ", after the program frees it (op " +
                                std::to_string(info.last) + ")");
    if (x.action == plan::Action::regenerate) {
      if (info.persistent) fail(x.needed_by, "rebuilds it, but it was live before the step: no op of the step made it");
      check_rebuild(b, x, "rebuilds");
      return;
    }
    // A swap.
    const std::uint64_t from = plan::copy_out_after(x);
    if (from < info.first)
      fail(from, "copies it to host after op " + std::to_string(from) + ", before it exists (op " + std::to_string(info.first) + ")");
    for (std::uint32_t w : uses_[b].writes)
      if (w > from && w <= x.release_after)
        fail(w, "copies it to host after op " + std::to_string(from) + ", but op " + std::to_string(w) +
                    " writes it before its release: the host's copy would be stale");
  }

 private:
  // The replays have run by the need (check_plan_matches); one of them must write the block.
  void check_rebuild(std::uint32_t b, const plan::Interval& x, const char* verb) {
    const trace::Category category = trace_.blocks[b].category;
    if (category == trace::Category::parameter || category == trace::Category::input)
      fail(x.needed_by, std::string(verb) + " it, but it is a " + trace::to_string(category) + ": nothing in the step makes it");
    bool writes = false;
    for (std::uint64_t op : x.replay)
      for (const StepUse& u : program_.ops[op].uses) writes = writes || (u.block == b && u.write);
    if (!writes) fail(x.needed_by, std::string(verb) + " it by replaying ops none of which writes it: its data would be lost");
  }

  [[noreturn]] void fail(std::uint64_t op, const std::string& what) const {
    throw plan::PlanError("plan: op " + std::to_string(op) + ": block " + std::to_string(program_.blocks[block_].id) + ": the plan " +
                          what + "; refused before anything runs");
  }

  const trace::Trace& trace_;
  const StepProgram& program_;
  std::vector<BlockUses> uses_;
  std::uint32_t block_ = 0;
};

}  // namespace

void check_plan_against_step(const plan::Plan& plan, const trace::Trace& trace, const StepProgram& program) {
  Checker checker(trace, program);
  for (const plan::BlockDecision& decision : plan.decisions) {
    const std::uint32_t b = program.block_index(decision.block);
    for (const plan::Interval& interval : decision.intervals) checker.check(b, interval);
  }
}

}  // namespace delta::executor
