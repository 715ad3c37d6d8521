// The recorder fed by CUPTI on a real GPU.
//
// Callback API: every kernel launch (runtime and driver entry points, see
// cupti_launch_decode.hpp), copy and memset is recorded as it is issued, on the issuing
// thread, with the blocks its arguments point into. A runtime call that reaches the driver may
// raise the driver's callback too: calls nested inside one already being recorded on the same
// thread add to that op (its correlation id, its attribution if the outer call had none)
// instead of recording it twice.
// Activity API: CONCURRENT_KERNEL, MEMCPY and MEMSET records give device durations, joined to
// the ops by correlation id; OVERHEAD records give CUPTI's own cost. Buffers are delivered on
// CUPTI's thread and on flush().
//
// Only one CUPTI subscriber may exist per process: when torch.profiler (Kineto), Nsight or
// another tool holds it, construction fails with a message saying so.
#pragma once

#include "profiler/sources/activity_source.hpp"
#include "profiler/sources/cupti_kernel_params.hpp"
#include "profiler/sources/cupti_library.hpp"
#include "profiler/recorder.hpp"
#include "profiler/sources/wrapper_launches.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>

namespace delta::profiler {

// CUPTI's timestamps (the clock activity records use), for a Recorder fed by CUPTI.
// Throws CuptiError when CUPTI cannot be loaded.
Recorder::Clock cupti_clock();

class CuptiActivitySource final : public ActivitySource {
 public:
  // Subscribes and enables callbacks and activity kinds; throws CuptiError on any failure
  // (leaving nothing enabled). With `wrapper_launches`, DELTA's driver launch wrappers record
  // the launches (wrapper_launches.hpp): the runtime's launch callbacks are not enabled, and the
  // driver's only bind their correlation id to the op the wrapper is forwarding.
  explicit CuptiActivitySource(Recorder& recorder, WrapperLaunches* wrapper_launches = nullptr);
  ~CuptiActivitySource() override;

  void flush() override;
  void stop() override;
  std::string describe() const override;

 private:
  static void CUPTIAPI on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                   const void* cbdata);
  static void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI on_buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                                           size_t valid_size);

  void handle_api(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData& data);
  void handle_launch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData& data, bool nested);
  void handle_transfer(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData& data, bool nested);
  void consume(std::uint8_t* buffer, std::size_t valid_size);
  void publish_metadata();
  void teardown() noexcept;

  const CuptiApi& api_;
  Recorder& recorder_;
  KernelParamInfo params_;
  WrapperLaunches* wrapper_launches_ = nullptr;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::mutex stop_mutex_;
  bool active_ = false;

  std::atomic<std::uint64_t> launches_{0}, unattributed_launches_{0}, transfers_{0};
  std::atomic<std::uint64_t> driver_launches_{0}, nested_launches_{0};
  std::atomic<std::uint64_t> wrapper_correlations_{0}, launches_outside_wrappers_{0};  // which callbacks launches came through
  std::atomic<std::uint64_t> cupti_overhead_ns_{0}, dropped_records_{0}, activity_records_{0};
};

}  // namespace delta::profiler
