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

  void check(std::uint32_t b, const plan::Interval& x) {
    block_ = b;
    const StepBlock& info = program_.blocks[b];
    const std::uint64_t n = program_.ops.size();
    switch (x.action) {
      case plan::Action::retain:
        if (info.to_end || x.release_after != info.last)
          fail(x.release_after, "retains it after that op, but the program " +
                                    (info.to_end ? std::string("holds it to the end of the step")
                                                 : "frees it after op " + std::to_string(info.last)));
        if (x.until <= x.release_after || x.until >= n) fail(x.release_after, "retains it until op " + std::to_string(x.until) + ", outside the step after its free");
        return;
      case plan::Action::revive:
        if (info.to_end || info.persistent) fail(x.needed_by, "revives it, but the program never frees it in the step");
        if (x.needed_by <= info.last) fail(x.needed_by, "revives it before the program frees it (after op " + std::to_string(info.last) + ")");
        if (x.until < x.needed_by || x.until >= n) fail(x.needed_by, "revives it until op " + std::to_string(x.until) + ", outside the step");
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
    if (x.needed_by <= x.release_after || x.needed_by > n || (!info.to_end && x.needed_by > info.last))
      fail(x.release_after, "needs it back at op " + std::to_string(x.needed_by) + ", not between its release and the program's free");
    if (x.action == plan::Action::regenerate) {
      if (info.persistent) fail(x.needed_by, "rebuilds it, but it was live before the step: no op of the step made it");
      check_rebuild(b, x, "rebuilds");
      return;
    }
    // A swap.
    if (x.prefetch_at <= x.release_after || x.prefetch_at > x.needed_by)
      fail(x.needed_by, "fetches it back at op " + std::to_string(x.prefetch_at) + ", outside its release (after op " +
                            std::to_string(x.release_after) + ") and need");
    if (x.bytes && (*x.bytes == 0 || *x.bytes >= info.size || *x.bytes % plan::kSwapGranularity != 0))
      fail(x.release_after, "swaps " + std::to_string(*x.bytes) + " bytes of its " + std::to_string(info.size) +
                                " (a part must be whole pages of " + std::to_string(plan::kSwapGranularity) + " bytes, less than the block)");
    const std::uint64_t from = plan::copy_out_after(x);
    if (from > x.release_after || from < info.first)
      fail(from, "copies it to host after op " + std::to_string(from) + ", outside [" + std::to_string(info.first) + ", " +
                     std::to_string(x.release_after) + "]");
    for (std::uint32_t w : uses_[b].writes)
      if (w > from && w <= x.release_after)
        fail(w, "copies it to host after op " + std::to_string(from) + ", but op " + std::to_string(w) +
                    " writes it before its release: the host's copy would be stale");
  }

 private:
  void check_rebuild(std::uint32_t b, const plan::Interval& x, const char* verb) {
    const trace::Category category = b < trace_.blocks.size() ? trace_.blocks[b].category : trace::Category::unknown;
    if (category == trace::Category::parameter || category == trace::Category::input)
      fail(x.needed_by, std::string(verb) + " it, but it is a " + trace::to_string(category) + ": nothing in the step makes it");
    if (x.replay.empty()) fail(x.needed_by, std::string(verb) + " it by replaying no op");
    bool writes = false;
    for (std::uint64_t op : x.replay) {
      if (op >= x.needed_by || op >= program_.ops.size()) fail(x.needed_by, std::string(verb) + " it by replaying op " + std::to_string(op) + ", which has not run yet then");
      for (const StepUse& u : program_.ops[op].uses) writes = writes || (u.block == b && u.write);
    }
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
