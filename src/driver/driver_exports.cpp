// The launch entry points exported under their own names too: a program or library linked
// against libcuda (calls through the PLT, no dlsym) reaches these first when libdelta is
// preloaded. Their real function is the driver's export of the same name, found on first use.
#include "src/driver/driver_wrappers.hpp"

#define DELTA_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// Stores the driver's export of `symbol` when no lookup has handed it out yet.
void ensure_real(std::atomic<void*>& slot, const char* symbol) {
  if (slot.load(std::memory_order_acquire) == nullptr)
    if (void* fn = delta::interpose::real_driver_symbol(symbol)) slot.store(fn, std::memory_order_release);
}

}  // namespace

#define DELTA_EXPORT_LAUNCH(symbol, W)                                                                         \
  DELTA_EXPORT CUresult symbol(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,   \
                               unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {  \
    ensure_real(W::launch, #symbol);                                        \
    return W::launch_kernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);                       \
  }
#define DELTA_EXPORT_LAUNCH_EX(symbol, W)                                                                   \
  DELTA_EXPORT CUresult symbol(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) { \
    ensure_real(W::launch_ex, #symbol);                                \
    return W::launch_kernel_ex(config, f, params, extra);                                                 \
  }
#define DELTA_EXPORT_COOPERATIVE(symbol, W)                                                                      \
  DELTA_EXPORT CUresult symbol(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,     \
                               unsigned bz, unsigned shared, CUstream stream, void** params) {                  \
    ensure_real(W::cooperative, #symbol);                                \
    return W::launch_cooperative(f, gx, gy, gz, bx, by, bz, shared, stream, params);                           \
  }

DELTA_EXPORT_LAUNCH(cuLaunchKernel, delta::interpose::L)
DELTA_EXPORT_LAUNCH(cuLaunchKernel_ptsz, delta::interpose::P)
DELTA_EXPORT_LAUNCH_EX(cuLaunchKernelEx, delta::interpose::L)
DELTA_EXPORT_LAUNCH_EX(cuLaunchKernelEx_ptsz, delta::interpose::P)
DELTA_EXPORT_COOPERATIVE(cuLaunchCooperativeKernel, delta::interpose::L)
DELTA_EXPORT_COOPERATIVE(cuLaunchCooperativeKernel_ptsz, delta::interpose::P)
