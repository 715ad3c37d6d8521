// The direction learner: which blocks each launch writes and which it only reads, learned
// from what the launches do to memory, without knowing the kernels.
//
// During the learning iterations (the first `learning_iterations` of a recording) every block
// a launch's parameters point into is fingerprinted just before the launch and just after it,
// in stream order (fingerprint.hpp). A launch is known by its place in the step: the k-th
// kernel launch of the iteration (the same program issues the same launches every step), and
// a block by the order its first pointer appears in the parameters. The evidence for one use
// gathered over the learning iterations decides its direction, never in the unsafe direction.
// Evidence comes from two places: the use itself (the same place in every learning iteration)
// and its kernel (the same parameter block, by order, of every launch of that kernel with that
// many blocks in the learning iterations: a kernel's parameter is an output or it is not):
//
//   - changed in some observation of the use, of its kernel's parameter, or by the replay on
//     permuted copies (copies() below): written. Written
//     only (`write`) when every observation of the use saw the block fresh (its first use since
//     it was allocated, so no earlier bytes could be read); otherwise read and written
//     (`readwrite`): a change shows a write, not whether the launch also read the block.
//   - never changed: `read` only on a second signal: unchanged over two different contents,
//     of the use (two iterations where the block held different bytes before the launch) or of
//     the kernel's parameter (two launches), or unchanged by the replay on permuted copies
//     (bytes the real launch did not see). A kernel that writes a block without reading it
//     produces bytes that do not depend on what was there, so it cannot leave two different
//     contents both unchanged; "unchanged once" can be a write of the same bytes (a step that
//     recomputes what the previous step left there, a deterministic program repeating itself).
//   - anything else, or launches that differ between iterations at that place: `touch`.
//
// A use that changed a block is therefore never `read`. A written block whose exact replay did
// not reproduce it (or that was never replayed) is swap only. The learner holds fingerprints
// and freshness only; it never reads the kernels' parameters itself (the source gives it
// blocks and replays). docs/directions.md has the method and its results.
#pragma once

#include "profiler/fingerprints/fingerprint.hpp"

#include <delta/trace.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace delta::profiler {

enum class Direction : std::uint8_t { touch, read, write, readwrite };
const char* to_string(Direction direction);

struct TouchedBlock {
  std::uint64_t id = 0;  // the recorder's block id
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
};

// What was learned for the kernel launch at one place of the step.
struct LearnedLaunch {
  std::string name;
  std::vector<Direction> uses;  // per block, in parameter order
  // Per block: the launch writes it, but replaying the launch did not reproduce its bytes
  // (a non-deterministic kernel), or it was never replayed: the block may only be swapped.
  std::vector<bool> swap_only;
};
// By the launch's kernel position in the step (0 = the iteration's first kernel launch).
using LearnedDirections = std::map<std::uint32_t, LearnedLaunch>;

struct LearnerCounters {
  std::uint64_t launches_observed = 0;
  std::uint64_t blocks_fingerprinted = 0;  // before and after count once each
  std::uint64_t bytes_fingerprinted = 0;
  std::uint64_t replays = 0;  // launches replayed on copies (exact and permuted count once each)
};

class DirectionLearner {
 public:
  DirectionLearner(Fingerprinter& fingerprinter, std::uint32_t learning_iterations);

  std::uint32_t learning_iterations() const { return learning_iterations_; }
  bool learning(std::uint32_t iteration) const { return iteration < learning_iterations_; }

  // A kernel launch about to run at `position` of learning iteration `iteration`, on `stream`,
  // touching `blocks` (parameter order). Fingerprints them now; returns a ticket for after().
  std::size_t before(std::uint32_t iteration, std::uint32_t position, std::string name,
                     std::vector<TouchedBlock> blocks, std::uint64_t stream);
  // The launch of `ticket` has been issued: fingerprints its blocks again.
  void after(std::size_t ticket);
  // Blocks used by an op whose directions are known (a copy, a memset): no longer fresh.
  void note_uses(std::span<const std::uint64_t> blocks);

  // Replays, in the last learning iteration: the source copies the launch's blocks before it
  // runs and replays the launch on the copies (its pointers patched) after it ran, then on
  // permuted copies (each copy's bytes rotated by 16: the same values, elsewhere, so index
  // tensors stay in range). It reports the copies here, in block order, for fingerprints:
  //   replayed        : the exact copies after the replay (equal to the real result: the
  //                     launch reproduces what it wrote; validation before any regeneration);
  //   permuted_before : the permuted copies before the second replay;
  //   permuted_after  : them after it (unchanged over bytes that differ from the real ones:
  //                     a read; changed: a write, even where the real launch wrote the same bytes).
  enum class Copies { replayed, permuted_before, permuted_after };
  bool replaying(std::uint32_t iteration) const { return iteration + 1 == learning_iterations_; }
  void copies(std::size_t ticket, Copies kind, std::span<const FingerprintRange> ranges, std::uint64_t stream);

  // Drains the fingerprints and decides every place observed.
  LearnedDirections conclude();
  const LearnerCounters& counters() const { return counters_; }

  // Throws std::logic_error naming the first broken rule: tickets in range, every observation
  // with one before and (once after() ran) one after slot per block, positions of one
  // iteration strictly increasing, the counters matching what is held.
  void check_invariants() const;

 private:
  struct Observation {
    std::uint32_t iteration = 0, position = 0;
    std::string name;
    std::uint64_t stream = 0;
    std::vector<TouchedBlock> blocks;
    std::vector<bool> fresh;
    std::size_t before = 0, after = 0;  // first slot in fingerprints_ of each side
    static constexpr std::size_t kNone = ~std::size_t{0};
    std::size_t replayed = kNone, permuted_before = kNone, permuted_after = kNone;  // Copies
    bool done = false;
  };
  std::size_t take_slots(const Observation& o, std::span<const FingerprintRange> ranges, std::uint64_t stream);

  Fingerprinter& fingerprinter_;
  const std::uint32_t learning_iterations_;
  std::deque<std::uint64_t> fingerprints_;  // stable addresses: the fingerprinter writes them later
  std::vector<Observation> observations_;
  std::unordered_set<std::uint64_t> used_;  // blocks used since their allocation (ids are never reused)
  LearnerCounters counters_;
};

// The evidence about one use (see the top of this file), and the rule on it.
struct UseEvidence {
  bool changed_here = false;        // the launch changed the block in some observation
  bool fresh_every_time = true;     // every observation saw the block fresh
  bool kernel_writes_it = false;    // the kernel changed this parameter's block in some launch
  bool unchanged_over_contents = false;  // here or by the kernel: unchanged over two contents
  bool permuted_changed = false;    // the replay on permuted copies changed it
  bool permuted_unchanged = false;  // that replay left it unchanged, over bytes the real launch did not see
};
Direction decide(const UseEvidence& evidence);

// Gives the kernel ops of every iteration of `trace` the directions learned at their place:
// a touch use becomes a read, a write, or a read and a write. Ops whose place was not learned,
// or was learned for another kernel or another number of blocks, keep their touches.
struct DirectionApplication {
  std::uint64_t directed = 0, left_touch = 0;
  std::vector<std::uint64_t> swap_only;  // blocks written where no replay reproduced them, by id
};
DirectionApplication apply_directions(trace::Trace& trace, const LearnedDirections& learned);

}  // namespace delta::profiler
