// How launches reach the executor on the sim device: its launch hook stands in for a driver
// entry point that libdelta interposes (cuLaunchKernel under LD_PRELOAD). Every launch of the
// program is shown to the executor before it is issued, in a context where device calls are
// legal; the executor's own replays go straight to the device.
#pragma once

#include "executor/executor.hpp"

#include <delta/sim_device.hpp>

namespace delta::executor {

// A sim launch as the executor sees it: its reads and writes as ranges (a range both read and
// written once), and a copy of it to replay with other pointers.
struct SimLaunchView {
  explicit SimLaunchView(const SimLaunch& launch, StreamHandle stream, SimDevice& device);
  Launch launch() const;

  const SimLaunch& source;
  StreamHandle stream;
  SimDevice& device;
  std::vector<LaunchRange> ranges;
  std::vector<std::pair<int, int>> positions;  // per range: its index in reads and in writes, or -1
};

class SimLaunchRoute {
 public:
  SimLaunchRoute(SimDevice& device, EntryPoints& entry);  // installs the hook
  ~SimLaunchRoute();                                       // removes it
  SimLaunchRoute(const SimLaunchRoute&) = delete;
  SimLaunchRoute& operator=(const SimLaunchRoute&) = delete;

 private:
  SimDevice& device_;
};

}  // namespace delta::executor
