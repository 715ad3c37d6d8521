// Offline rematerialization planning: replays the trace op by op under the budget, like a
// rematerializing runtime (DTR), but with the whole step known in advance. When an op's
// allocations do not fit, resident blocks are dropped, chosen by the least cost per byte per
// nanosecond until the block is needed again (or, as DTR does online, since it was last used).
// A dropped block is rebuilt where it is next needed by replaying its producer, preceded by
// whatever the producer reads that is not resident then, however long that chain: inputs still
// live are rebuilt as their own regenerations (and stay resident), inputs already freed by the
// trace are rebuilt as temporaries of the replay. The memory of the rebuilt blocks and of the
// temporaries is accounted where the replay runs, so the result meets the budget in the
// simulator by construction. When an op cannot be met (a block dropped long before needs a
// rebuild whose temporaries do not fit), what it needed is pinned over the window since that
// drop and the step is planned again, up to `max_restarts` times. Cost: O((ops + uses) *
// chain) plus a bounded scan per eviction, per restart.
#pragma once

#include "common/plan_edits.hpp"

namespace delta::planner {

enum class RematScore {
  until_next_use,    // cost / (bytes * time until the block is needed again): uses the future
  since_last_use,    // cost / (bytes * time since its last use): DTR's staleness
};

struct RematOptions {
  RematScore score = RematScore::until_next_use;
  int rebuild_depth = 3;          // levels of not-resident inputs counted in a drop's cost
  double distance_weight = 1.0;   // exponent of the time term in the score
  double children_weight = 0;     // weight of dropped blocks made from a block in its drop cost
  std::size_t scan_limit = 1024;  // blocks scored per eviction (a rotating window beyond that)
  // A dropped block read by a replay but not by the op itself: restored and kept resident (as
  // DTR does) when it fits, or always rebuilt as a temporary of the replay (less memory, maybe
  // more compute).
  bool restore_inputs = true;
  double restore_headroom = 2.0;  // room left for temporaries, in sizes of the restored block
  // An input the program has already freed, read by a replay: revived (rebuilt once and kept
  // for later replays, until memory is short or nothing dropped made from it is still needed)
  // rather than rebuilt as a temporary of every replay that reads it. densenet121 frees each
  // layer's new features once they are concatenated; rebuilding a concatenation then needs
  // them all again.
  bool revive_inputs = false;
  // With revivals, a freed input's rebuild counts in a drop's cost divided among the blocks
  // made from it (it is rebuilt once for all of them), not in full for each.
  bool share_revived_cost = false;
  // Siblings: a block written by the same op as a dropped block needed shortly before it (a
  // dropout's mask beside its output) comes back with that block's replay, as a target of its
  // own, when it is needed within this fraction of the step after it; so its drop costs no
  // compute. Negative: off.
  double sibling_window = -1;
  // Weight of an input that is itself dropped in the estimated cost of a drop (its chain, up to
  // rebuild_depth levels). That input comes back at its own need anyway, and a replay that
  // needs it earlier restores it for both, so its replay is often shared: each of a GELU's
  // pieces in GPT-2 reads the MLP's first projection, whose one replay rebuilds them all. At 1
  // (in full) the pieces look dear once the projection is dropped, and the attention scores
  // go instead (GPT2-large bfloat16 at batch 56 under an H200, in live bytes, with every
  // setting so: 1.147 at 1, 1.130 at 0).
  double dropped_input_weight = 1.0;
  // Plans again, pinning what the failing op needed, when an op cannot be met: at most this
  // many times.
  std::size_t max_restarts = 4;
  bool discard_dead = true;       // free blocks after their last read, before the trace frees them
  // The room at each op (one per op and one for the step's end), where it differs from the
  // request's budget; empty: the budget everywhere. The plan of rebuilt activations beside
  // swapped state (delta/hybrid/) gives the ops before the state fills memory more room and
  // those after all of it, and swaps the difference away.
  std::vector<std::uint64_t> budget_by_op;
  std::string method = "delta";
};

// A plan of regenerations only. Its intervals always name a replayable producer; where no
// block can be dropped to make room, the plan is returned as far as it got, and the simulator
// names the op that does not fit.
plan::Plan plan_offline_remat(const PlanRequest& request, const RematOptions& options);

// True when some op needs more than the budget resident under any plan that only
// regenerates: the blocks live across the whole step (parameters, an optimizer's state:
// nothing rebuilds them, and the step hands them on) beside the blocks the op itself uses.
// Where the state fills memory the optimizer's lists are such ops: the offline replay and the
// sweeps without swaps are skipped there, their plans could only fail.
bool regeneration_alone_cannot_fit(const PlanRequest& request);

// True when every plan of the offline rematerialisation, whatever its settings (without
// budget_by_op), fails under `request`: some op needs more than the budget beside the blocks
// it cannot drop there (versions its replays cannot rebuild until their next need, blocks
// the request keeps, state). Sharper than regeneration_alone_cannot_fit, for the remat alone:
// GPT2-XL bfloat16 at 0.7 of its peak, whose activations are held by such versions.
bool offline_remat_cannot_fit(const PlanRequest& request);

}  // namespace delta::planner
