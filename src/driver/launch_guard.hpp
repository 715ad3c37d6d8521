// Whether run or auto mode can guard kernel launches on a GPU. Their guard is the interposed
// driver (src/driver/driver_interpose.hpp): it sees launches only when libdelta.so was preloaded at
// process start, and it needs the driver to name kernels and lay out their parameters. Both
// modes refuse to start otherwise, with the command line that works; the decision is one pure
// function, so that it is tested on machines without a GPU (tests/unit/test_launch_guard.cpp).
#pragma once

#include "executor/routes/cuda_route.hpp"

#include <string>

namespace delta {

enum class GuardedMode { run, automatic };

// Why `mode` cannot guard launches here, naming what works; "" when it can.
std::string launch_guard_refusal(GuardedMode mode, bool interposer_live, const executor::FunctionQueries& queries);

}  // namespace delta
