// Work DELTA issues itself: the recorder's while it learns directions (fingerprint kernels,
// copies for replays, the replays), and in auto mode, where a recording runs while the online
// policy or a plan's executor moves blocks, theirs (copies out and back, replays of dropped
// blocks; autopilot/autopilot.hpp). Not the program's, so an activity source that sees it
// (CUPTI's callbacks on the same thread, the sim's observer) must not record it as ops. Per
// thread: another program thread launching meanwhile is still recorded.
#pragma once

namespace delta::profiler {

inline thread_local int t_own_work_depth = 0;

inline bool issuing_own_work() noexcept { return t_own_work_depth > 0; }

class OwnWorkScope {
 public:
  OwnWorkScope() noexcept { ++t_own_work_depth; }
  ~OwnWorkScope() { --t_own_work_depth; }
  OwnWorkScope(const OwnWorkScope&) = delete;
  OwnWorkScope& operator=(const OwnWorkScope&) = delete;
};

}  // namespace delta::profiler
