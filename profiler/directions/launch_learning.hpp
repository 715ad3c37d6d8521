// The direction learner driven from DELTA's interposed driver launch entry points, where any
// driver call is legal (unlike a CUPTI callback): the recorder's half of what a launch wrapper
// does during the learning iterations (direction_learner.hpp has the method).
//
//   before(): the launch's parameters are read (kernelParams by the layout, or the `extra`
//     buffer: launch_params.hpp), the blocks they point into looked up in the recorder's block
//     map, fingerprinted on the launch's stream, and, in the replay iteration, copied twice
//     (the exact copy is made now; the permuted one after the launch ran, from the exact one);
//   the wrapper forwards the launch;
//   after(): fingerprints again; in the replay iteration replays the launch through the real
//     entry point with every pointer word into a touched block patched to point into its copy,
//     once on the exact copies and once on the permuted ones, then frees the copies in stream
//     order.
//
// The launch's place in the step is counted here, one per kernel launch of an iteration (the
// recorder numbers its kernel ops the same way: one op per driver launch). Nothing is
// fingerprinted, copied or replayed while a stream captures a graph (a captured call is not
// run, and the learner's own work would be captured into the graph); such launches still
// count their place. The learner's own calls (fingerprints, copies, replays) are issued with
// OwnWorkScope set, so an activity source skips them (own_work.hpp).
#pragma once

#include "profiler/directions/direction_learner.hpp"
#include "profiler/launch_params.hpp"
#include "profiler/recorder.hpp"

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace delta::profiler {

// Scratch device memory and copies on a stream, for the replays' copies. On a GPU: stream
// ordered allocation and copies through the real driver (cuda_copy_stager.hpp); in tests,
// host memory.
class CopyStager {
 public:
  virtual ~CopyStager() = default;
  // 0 when there is no room (the launch then goes without replays, its writes swap only).
  virtual std::uint64_t allocate(std::size_t bytes, std::uint64_t stream) = 0;
  virtual void copy(std::uint64_t dst, std::uint64_t src, std::size_t bytes, std::uint64_t stream) = 0;
  // Frees after the work queued on `stream` so far.
  virtual void release(std::uint64_t address, std::size_t bytes, std::uint64_t stream) = 0;
};

// One kernel launch as the wrapper sees it, before it is forwarded.
struct KernelCall {
  std::string_view name;  // as the recorder names the op (the kernel's symbol)
  std::uint64_t stream = 0;  // the stream the launch runs on (the per-thread stream made explicit)
  ParamSource params;
};
// Issues the launch again, through the real entry point, with these parameters (one of the two
// non-null, as in the original call). False when the driver refused it.
using Relaunch = std::function<bool(void** kernel_params, void** extra)>;

struct LaunchLearningCounters {
  std::uint64_t launches = 0;        // kernel launches seen while learning
  std::uint64_t learned = 0;         // of them, handed to the learner
  std::uint64_t unreadable = 0;      // parameters that could not be read (no layout)
  std::uint64_t during_capture = 0;  // seen while a stream captured a graph: left alone
  std::uint64_t refused = 0;         // the driver refused the launch: no after-fingerprint
  std::uint64_t replays = 0;         // relaunches on copies issued
  std::uint64_t failed_replays = 0;  // relaunches the driver refused (the writes then swap only)
  std::uint64_t no_room = 0;         // copies that could not be allocated
  std::uint64_t transfers = 0;       // copies and memsets noted
};

class LaunchLearning {
 public:
  LaunchLearning(Recorder& recorder, DirectionLearner& learner, CopyStager& stager);

  // A launch in flight between before() and after(), held by the wrapper's stack frame.
  struct Pending {
    std::optional<std::size_t> ticket;  // the learner's, when the launch is being learned
    ParamCopy copy;                     // the parameters, pointer words listed (replay iteration)
    std::vector<TouchedBlock> blocks;
    std::vector<std::size_t> word_block;  // per pointer word of `copy`, its block's index
    std::uint64_t stream = 0;
    std::uint64_t scratch = 0;            // the copies: exact ones, then permuted ones
    std::size_t scratch_bytes = 0;
    std::vector<FingerprintRange> exact, permuted;
  };
  // Whether launches are being learned now (cheap: the wrappers ask before anything else).
  bool active() const;
  // Before forwarding. Never throws for a launch it cannot learn (it counts it instead).
  Pending before(const KernelCall& call);
  // After forwarding: `launched` is whether the driver accepted the launch.
  void after(Pending& pending, bool launched, const Relaunch& relaunch);

  // A copy or memset (its direction is known): the blocks it uses are no longer fresh.
  void note_transfer(std::uint64_t dst, std::uint64_t src);
  void capture_began();
  void capture_ended();

  LaunchLearningCounters counters() const;
  // Throws std::logic_error naming the rule: the capture count not negative, learned launches
  // no more than those seen, replays no more than two per learned launch.
  void check_invariants() const;

 private:
  void stage(Pending& pending);
  void replay(Pending& pending, const Relaunch& relaunch);
  std::vector<DevicePtr> patched(const Pending& pending, const std::vector<FingerprintRange>& copies) const;

  Recorder& recorder_;
  DirectionLearner& learner_;
  CopyStager& stager_;
  mutable std::mutex mutex_;
  std::size_t position_iteration_ = 0;
  std::uint32_t next_position_ = 0;
  int capturing_ = 0;
  LaunchLearningCounters counters_;
};

}  // namespace delta::profiler
