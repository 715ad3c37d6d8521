// Where a recorder's ops come from: CUPTI on a real GPU, the sim device's observer otherwise.
#pragma once

#include <string>

namespace delta::profiler {

class ActivitySource {
 public:
  virtual ~ActivitySource() = default;
  // Deliver everything measured so far (CUPTI activity buffers) to the recorder. Never called
  // from inside one of the source's own callbacks.
  virtual void flush() = 0;
  // Stop observing; the recorder keeps what it has. Idempotent.
  virtual void stop() = 0;
  virtual std::string describe() const = 0;
};

}  // namespace delta::profiler
