// The plan: which blocks to swap to host memory or regenerate, and when, for one trace on one
// GPU under one memory budget. Computed offline by the planner (planner/), judged by its
// simulator, executed by the runtime. On disk it is versioned JSON, documented in
// docs/plan-format.md. Op positions are indices into Trace::ops ("launch indices").
#pragma once

#include <delta/trace.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace delta::plan {

inline constexpr int kPlanFormatVersion = 1;

enum class Action : std::uint8_t { swap, regenerate, discard, revive, retain };
const char* to_string(Action);

// One idle interval of a block during which it does not occupy device memory.
//  swap:       copied to host after op `release_after`, copy back issued when op `prefetch_at`
//              is reached, must be resident before op `needed_by` runs. With `copy_after`
//              (at most `release_after`), the copy to host starts after that op instead, as
//              soon as the data is final: the block stays on the device, read but not
//              written, until after `release_after`, and is freed once both are done.
//              The copies back issued at one op take the lane in the plan's order, or, where
//              the plan says so (Prediction::copies_back_by_need), in the order of `needed_by`
//              (on a tie, in the plan's order).
//  regenerate: dropped after op `release_after`; the ops in `replay` (trace op indices, in
//              order) run again just before op `needed_by`; `inputs` are the blocks those ops
//              read, which must be resident then.
//  discard:    freed after op `release_after` and never read again before the trace frees it
//              (the program still holds it, but no op reads it); the block's last interval.
//              `needed_by` is not used (0).
//  revive:     the block, freed by the program after op `release_after` (its last op), is
//              rebuilt by the ops in `replay` just before op `needed_by` (as a regeneration
//              is) so that later regenerations' replays can read it instead of rebuilding it
//              each time, and freed again after op `until`. No op of the program uses it then.
//  retain:     the block, which the program frees after op `release_after` (its last op),
//              stays allocated with its data until after op `until`, so that later
//              regenerations' replays can read it instead of reviving it; its last interval
//              but for revivals after `until`. `needed_by` is not used (0).
// `needed_by` may equal the op count: the block must be back by the end of the step.
struct Interval {
  Action action = Action::swap;
  std::uint64_t release_after = 0;
  std::uint64_t prefetch_at = 0;       // swap only
  std::optional<std::uint64_t> copy_after;  // swap only; absent: release_after
  std::optional<std::uint64_t> bytes;       // swap only; absent: the whole block
  std::uint64_t needed_by = 0;         // swap, regenerate and revive
  std::uint64_t until = 0;             // revive and retain
  std::vector<std::uint64_t> replay;   // regenerate and revive
  std::vector<std::uint64_t> inputs;   // regenerate and revive (block ids)
};

// A partial swap moves whole pages of the runtime's mappings: 2 MiB, the granularity of CUDA's
// virtual memory management on the GPUs DELTA profiles.
inline constexpr std::uint64_t kSwapGranularity = std::uint64_t{2} << 20;

// The bytes a swap of a block of `block_size` bytes copies out, frees and copies back.
inline std::uint64_t swapped_bytes(const Interval& swap, std::uint64_t block_size) { return swap.bytes.value_or(block_size); }

// The op after which a swap's copy to host starts.
inline std::uint64_t copy_out_after(const Interval& swap) { return swap.copy_after.value_or(swap.release_after); }

// A block absent from the plan, or with no intervals, is kept resident.
struct BlockDecision {
  std::uint64_t block = 0;             // trace::Block::id
  std::vector<Interval> intervals;     // sorted by release_after, not overlapping
};

struct Prediction {
  std::uint64_t peak_bytes = 0;
  std::int64_t step_time_ns = 0;
  std::int64_t native_step_time_ns = 0;
  double overhead = 1.0;               // step_time / native step time
  bool feasible = true;
  // Judged through the caching allocator capped at the budget: the most it reserved (0 when
  // judged by live bytes only).
  std::uint64_t reserved_peak_bytes = 0;
  // The live budget the plan was made for, as a fraction of budget_bytes: below 1 when the
  // allocator's rounding and splitting needed room (fitted plans), else 1.
  double planned_fraction = 1.0;
  // Fitted as the executor places blocks (a moved block on pages of its own, its pages unmapped
  // and mapped back at its address) rather than as the planner's default fitting counts them
  // (its memory free for any block once it leaves). Meaningful when reserved_peak_bytes > 0;
  // plans written before the field existed were fitted the planner's way.
  bool executor_placement = false;
  // With executor_placement: the moved blocks packed side by side on pages no other block
  // shares (Placement::packed; "placement": "executor-packed") rather than each on whole pages
  // of its own ("executor"). The executor places them as the plan was fitted.
  bool packed_moves = false;
  // With packed_moves: the moved blocks packed in groups by when they are away (packed_groups()
  // below; "placement": "executor-packed-grouped").
  bool packed_groups = false;
  // Judged with each discard copied to host before its bytes go, as the executor runs them by
  // default (DELTA_DISCARD=keep), rather than freed at once. Plans written before the field
  // existed were judged without the copies.
  bool discard_copies = false;
  // Judged, native step included, with the host's launch pace (each op issued no earlier than
  // the host's launch cost after the one before), as the sim device runs a step, rather than
  // in device time alone (every older file).
  bool host_pace = false;
  // The copies back issued at one op run in the order their blocks are needed ("copies_back":
  // "by-need"), rather than in the plan's order (every older file): the executor issues them so.
  bool copies_back_by_need = false;
};

struct Plan {
  int version = kPlanFormatVersion;
  std::string method;                  // "delta", "vdnn", ...
  std::string trace_hash;              // trace_fingerprint() of the trace it was made for
  std::uint64_t trace_ops = 0;
  std::uint64_t trace_blocks = 0;
  // The iteration of its trace it is for (trace::slice_iteration), when the trace has several:
  // the hash and counts above are that iteration's. None: the whole trace.
  std::optional<std::uint32_t> trace_iteration;
  std::string gpu_profile;             // a delta::gpu_profile name
  std::uint64_t budget_bytes = 0;
  double budget_ratio = 0;             // budget / native peak, for reports (0 when unknown)
  std::vector<BlockDecision> decisions;
  Prediction predicted;
};

// Packed placement groups (Placement::group, docs/allocator.md): for each block the plan moves
// (its id), the group it is packed in, 0 to kPackedGroups - 1. Blocks away over nearly the same
// ops share a group, so that a page two neighbours share seldom stays mapped for one while the
// other is away: AdamW allocates each parameter's two moments side by side, and the optimizer's
// launches bring the lists back one after the other. The ledger that fits a plan and the
// executor that runs it both follow it.
inline constexpr std::size_t kPackedGroups = 8;
std::unordered_map<std::uint64_t, std::uint8_t> packed_groups(const Plan& plan);

// Malformed plan files and plans that do not fit their trace. The message names the place.
class PlanError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A stable hash of what a plan depends on: op order, durations, blocks, sizes and accesses.
std::string trace_fingerprint(const trace::Trace& trace);

std::string to_json_text(const Plan& plan);
Plan parse_plan(const std::string& json_text, const std::string& origin = "<memory>");
Plan read_plan(const std::string& path);
void write_plan(const Plan& plan, const std::string& path);  // atomic (temp file + rename)

// The part of `trace` a plan is for: the iteration it names (trace::slice_iteration), or the
// whole trace. Throws trace::TraceError when the trace lacks that iteration.
trace::Trace plan_step(const trace::Trace& trace, const Plan& plan);

// Refuses (PlanError) a plan made for another trace, or naming unknown blocks or ops, or with
// intervals out of order. Timing and memory feasibility are the simulator's job.
void check_plan_matches(const Plan& plan, const trace::Trace& trace);

}  // namespace delta::plan
