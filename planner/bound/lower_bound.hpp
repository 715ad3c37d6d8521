// A lower bound on the overhead any plan can reach on a trace under a budget, in this
// simulator: the optimum of a linear program that relaxes every plan.
//
// Each idle gap of a block (between two uses; before the first use of a block live at the
// start; after the last use of one that must be back at the end) may be left resident, or
// made absent (by any means, and possibly by a swap and a regeneration in turn), fractionally.
// Making it absent frees its bytes over the whole gap, which no real plan does better; this
// alone decides whether a budget is reachable at all. A regeneration must replay the block's
// chain (its last write that does not read it, and the in-place updates since) and, for every
// block those ops read whose version no plan can have on the device during the gap
// (overwritten since), that block's chain too. A block the trace freed is not gone for every
// plan (a plan may retain it past its free); it is charged at checkpoints, below. An op is
// charged once per replay,
// and replayed at least as often as any one block needs it, since one replay can rebuild all of
// an op's outputs at once. Inputs still allocated may be missing: a plan may rebuild them
// first. A swap costs no compute, but every swap inside a window of ops moves its bytes over
// the copy lanes within that window's compute plus the step's whole added time. Blocks whose
// data is dead (after their last read, or overwritten without being read) free their bytes at
// no cost. At every op the freed bytes must cover the excess of the live bytes over the
// budget.
//
// At checkpoints (the ops in most excess, the ops that need the most bytes resident, and
// others spread over the step) the program also
// follows which blocks are away at that very op (the largest there, and every block at the op
// in most excess). Their bytes cover its excess; a block away
// by swap there was copied out after its last write and before the op, and is copied back
// after the op and before its next use, and those copies share one lane each way within the
// compute in between plus the delays in between. This is what keeps swaps from freeing more
// memory at the peak than the link can carry out before it. The delays form a chain: a
// column per checkpoint and per end of a lane window, each at most the next and the last at
// most the added time (a plan's delays only accrue), and a window gets only the delay
// accrued between its ends, so the copies of blocks away at two ops in turn (an
// optimizer's lists, each idle at some of its ops) cannot spend the same delay twice. At the ops in most excess the
// delay accrued before the op is followed too: the added time less the replays that surely run
// after it (of blocks away there by regeneration, and of gaps that start later), so a plan
// cannot stall before the peak to let copies out at the price of compute it spends after. A block away there by regeneration is
// rebuilt after the op, so the producers of what its chain reads that is overwritten by then
// are replayed as well, and of each block it reads that the trace freed before the op, unless
// that block is retained across the op: then its bytes add to what the op must free. What
// those producers read that the trace freed before the op is revived in turn (a few levels),
// unless a block on the way is retained.
//
// The link's windows (LinkWindow, link_windows.cpp) are a second bound, taken where higher: a
// stretch of ops that reads more data made before it than the budget leaves room for at its
// start copies the rest in, or rebuilds it, within its own time.
//
// What the relaxation leaves out makes the bound lower, never higher: replay inputs and
// temporaries, blocks held while their copies run, launch latency, fragmentation. So no plan
// (DELTA's, a baseline's, DTR's evictions) can run faster than the bound under the budget.
#pragma once

#include "bound/lp_solver.hpp"
#include "common/plan_edits.hpp"

#include <map>
#include <optional>
#include <utility>
#include <string>
#include <vector>

namespace delta::planner {

// How the relaxation's optimum spends its added time and frees memory: what a plan at the
// bound would look like, by op name. Blocks are named by the op that made them (or their
// category when nothing in the step did).
struct BoundExplanation {
  std::map<std::string, double> replay_ms;      // op name -> compute replayed
  std::map<std::string, double> replay_count;   // op name -> replays
  // The added time (ms), and what of it no replay accounts for: waiting for the link.
  double added_ms = 0, waiting_ms = 0;
  std::uint32_t peak_op = 0;                    // the op in most excess over the budget
  double excess_bytes = 0;                      // there
  std::map<std::string, double> swapped_bytes;  // away by swap at peak_op
  std::map<std::string, double> regenerated_bytes;  // away by regeneration at peak_op
  std::map<std::string, double> away_bytes;     // small blocks away there, by either means
  // The same, block by block: the shares of each block followed one by one at peak_op that
  // is away there. A gap's whole-gap share (GapShare::away) says it is away somewhere in the
  // gap; these say whether it is away at the peak, which is what a plan can be set beside.
  struct PeakBlock {
    std::uint64_t block = 0;  // trace::Block::id
    double swapped = 0, regenerated = 0;
  };
  std::vector<PeakBlock> peak_blocks;
  // What the optimum has away at a few ops over the budget, spread over the step (the peak
  // among them), by the blocks' categories ("activation", "optimizer_state"): each gap's
  // whole-gap shares over the op, the part rebuilt and the rest swapped.
  struct StepPoint {
    std::uint32_t op = 0;
    double excess_bytes = 0;
    std::map<std::string, double> swapped_bytes, regenerated_bytes;
  };
  std::vector<StepPoint> along_step;
  // Whether the optimum explained is the one that swaps the fewest bytes (fewest_moved below);
  // false when that second solve was not asked for or failed, and the first optimum is shown.
  bool fewest_moved = false;
};

// One idle gap of a block in the relaxation's optimum: how much of it is away (by any
// means) and how much of it is rebuilt, each between 0 and 1.
struct GapShare {
  std::uint64_t block = 0;                // trace::Block::id
  std::uint32_t after = 0, before = 0;    // idle over ops (after, before); before may be op_count()
  double away = 0, regenerated = 0;
};

// A stretch of ops [first, last] that reads more data made before it than the budget leaves
// room for when it starts: the rest must come over the host-to-device link, or be rebuilt,
// within it (link_windows.cpp). Stretches that do not overlap add their times.
struct LinkWindow {
  std::uint32_t first = 0, last = 0;
  double read_bytes = 0;     // data older than the stretch that it reads
  double room_bytes = 0;     // what the budget leaves for that data when the stretch starts
  // State live before the step that the stretch right after this one reads and this one does
  // not: it too is on the device when this one starts, or comes back over its lane, or is still
  // away when the next starts (counted in this one's room beside read_bytes).
  double next_reads_bytes = 0;
  double compute_ms = 0;     // the stretch's own compute
  double added_ms = 0;       // the least time any plan adds within it
  // The least time added between the stretch before (or the step's start) and this one: what
  // it needs away, written since, is copied out over the device-to-host lane before it starts.
  double waits_before_ms = 0;
  double rebuilt_bytes = 0;  // of the data not on the device at the start, rebuilt rather than copied
  double copied_bytes = 0;   // the same, copied in
  // What the rebuilds read that the trace freed before the stretch: held from its start (its
  // bytes there), or revived within it; and the replays, by op name, most time first.
  double held_bytes = 0, revived_bytes = 0;
  double replay_ms = 0;
  std::vector<std::pair<std::string, double>> replays;
};

struct OverheadBound {
  enum class Status { bounded, unreachable, unsolved } status = Status::unsolved;
  double overhead = 1.0;  // bounded: no plan's step time / native step time is below this
  std::string message;    // unreachable: why no plan can meet the budget; unsolved: why no bound
  std::optional<BoundExplanation> explanation;  // bounded by the linear program: its optimum
  std::vector<GapShare> gap_shares;             // the same: every gap some share of which is away
  // The link's windows: a bound of their own (their added times summed), taken where higher
  // than the linear program's, and shown by `deltactl bound --explain`.
  std::vector<LinkWindow> link_windows;
  double link_windows_overhead = 1.0;
  // integer: the solver whose bound of the integer program is the overhead ("HiGHS 1.16.0",
  // "cbc"); empty where the overhead is the linear bound's.
  std::string proved_by;
  // integer: why the overhead is not the integer program's (no solver, none proved in time,
  // or it proved no more than the linear bound); empty otherwise.
  std::string integer_message;
};

// `integer`: solve the program with its regeneration shares and replay counts integral, as they
// are in any plan (a swap may take part of a block, so its shares stay fractional), and take
// the best lower bound HiGHS or cbc proves within the time (solve_for_lower_bound): at least
// the linear program's, often higher, slower.
// `link_windows`: also bound the stretches of ops that read more older data than the budget
// leaves room for (LinkWindow), and take that bound where it is higher.
// `fewest_moved`: solve the linear program a second time, its added time held at the optimum
// (within the solver's tolerance), for the optimum that swaps the fewest bytes (a rebuilt share
// counts as away, not as moved): the same bound, but an explanation and gap shares of what must
// be away. The first optimum is degenerate: it marks whole gaps away at no cost wherever the
// link's windows do not bind (5.8 GB of parameter gaps on gpt2-large bfloat16 at 0.6 of its
// peak, where 0.12 GB of state needs to go). About twice the solver time.
OverheadBound overhead_lower_bound(const PlanRequest& request, int solver_seconds = 120, bool integer = false,
                                   IntegerSolver solver = IntegerSolver::automatic, bool fewest_moved = false,
                                   bool link_windows = true);

}  // namespace delta::planner
