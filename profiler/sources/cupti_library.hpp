// libcupti, opened at run time (record mode only), like the driver: libdelta.so must load in
// processes that have no CUPTI at all.
//
// Where it is looked for, first hit wins:
//   1. DELTA_CUPTI_PATH: the library file itself, or a directory holding it;
//   2. a libcupti already loaded in the process (Kineto's): two copies in one process would
//      compete for the one subscriber slot and the activity buffers;
//   3. next to the process's libcudart (the nvidia-cuda-runtime / nvidia-cuda-cupti wheels
//      PyTorch ships: nvidia/cu13/lib holds both; CUDA 12 wheels use nvidia/cuda_cupti/lib);
//   4. the toolkit: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda (extras/CUPTI/lib64, then lib64);
//   5. the dynamic loader's own search path.
// Only the CUPTI major version of the headers DELTA was built with is accepted: activity
// records are read with those headers' layouts.
#pragma once

#include <cupti.h>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace delta::profiler {

class CuptiError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

#define DELTA_CUPTI_ENTRY(name) decltype(&::name) name = nullptr

struct CuptiApi {
  DELTA_CUPTI_ENTRY(cuptiGetVersion);
  DELTA_CUPTI_ENTRY(cuptiGetResultString);
  DELTA_CUPTI_ENTRY(cuptiSubscribe);
  DELTA_CUPTI_ENTRY(cuptiUnsubscribe);
  DELTA_CUPTI_ENTRY(cuptiEnableCallback);
  DELTA_CUPTI_ENTRY(cuptiEnableDomain);
  DELTA_CUPTI_ENTRY(cuptiGetTimestamp);
  DELTA_CUPTI_ENTRY(cuptiActivityEnable);
  DELTA_CUPTI_ENTRY(cuptiActivityDisable);
  DELTA_CUPTI_ENTRY(cuptiActivityRegisterCallbacks);
  DELTA_CUPTI_ENTRY(cuptiActivityGetNextRecord);
  DELTA_CUPTI_ENTRY(cuptiActivityFlushAll);
  DELTA_CUPTI_ENTRY(cuptiActivityGetNumDroppedRecords);
  // Newer CUPTI only: names the subscriber that holds the slot. May stay null.
  DELTA_CUPTI_ENTRY(cuptiSubscribe_v2);

  std::string path;          // the file that was opened
  std::uint32_t version = 0; // cuptiGetVersion()
};

#undef DELTA_CUPTI_ENTRY

// What the search looks at, gathered from the process (tests pass their own).
struct CuptiSearchInputs {
  std::optional<std::string> explicit_path;     // DELTA_CUPTI_PATH
  std::optional<std::string> loaded_cupti;      // path of a libcupti already in the process
  std::optional<std::string> loaded_cudart;     // path of the process's libcudart
  std::vector<std::string> toolkit_roots;       // $CUDA_HOME, $CUDA_PATH, /usr/local/cuda
};
CuptiSearchInputs cupti_search_inputs_from_process();

// The files to try, in order (the last entries are bare names for the loader's search path).
std::vector<std::string> cupti_candidates(const CuptiSearchInputs& inputs);

// Loads CUPTI once per process and resolves every entry point; throws CuptiError listing the
// places tried (or naming DELTA_CUPTI_PATH when that setting points nowhere useful).
const CuptiApi& cupti();

// "CUPTI_ERROR_... (text)" for messages.
std::string describe_cupti_result(CUptiResult result);

}  // namespace delta::profiler
