// Injected failures (SimDevice::inject_fault): the failure a driver would report, raised
// before the operation changes anything, so that a test sees exactly what a caller must
// survive. Called with the device's mutex held.
#include "device/sim/sim_device_core.hpp"
#include "device/sim/sim_errors.hpp"

namespace delta::sim {

void SimDeviceImpl::inject_fault(SimFault fault, std::uint64_t count, std::uint64_t skip) {
  std::lock_guard lock(mutex_);
  faults_[static_cast<std::size_t>(fault)] = InjectedFault{skip, count};
}

void SimDeviceImpl::maybe_fail(SimFault fault, const char* operation) {
  InjectedFault& due = faults_[static_cast<std::size_t>(fault)];
  if (due.count == 0) return;
  if (due.skip > 0) {
    --due.skip;
    return;
  }
  --due.count;
  const bool memory = fault == SimFault::alloc_pinned || fault == SimFault::create_physical;
  fail(memory ? DeviceErrc::out_of_memory : DeviceErrc::driver_error, "{}: injected failure ({} left to inject)",
       operation, due.count);
}

}  // namespace delta::sim
