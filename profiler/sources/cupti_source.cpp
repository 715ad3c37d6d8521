#include "profiler/sources/cupti_source.hpp"

#include "profiler/sources/cupti_launch_decode.hpp"
#include "profiler/directions/own_work.hpp"
#include "logging/log.hpp"

#include <delta/device.hpp>

#include <chrono>
#include <cstdlib>
#include <vector>

namespace delta::profiler {
namespace {

constexpr std::size_t kActivityBufferBytes = 8u << 20;
constexpr std::size_t kActivityBufferAlignment = 8;

// The source activity buffers are delivered to: the buffer callbacks carry no user data.
std::mutex current_mutex;
CuptiActivitySource* current = nullptr;

// Per thread: the op of the launch or copy whose callback is running, so that the driver
// call it makes (if CUPTI reports it) is folded into it.
struct ThreadState {
  int depth = 0;
  std::optional<std::size_t> op;
  bool attributed = false;
};
thread_local ThreadState thread_state;

const std::vector<CUpti_ActivityKind>& activity_kinds() {
  static const std::vector<CUpti_ActivityKind> kinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                                        CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                                                        CUPTI_ACTIVITY_KIND_OVERHEAD};
  return kinds;
}

void check(const CuptiApi& api, CUptiResult result, const std::string& what) {
  if (result == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  api.cuptiGetResultString(result, &text);
  throw CuptiError(what + " failed: " + (text ? text : "CUPTI error " + std::to_string(static_cast<int>(result))));
}

}  // namespace

Recorder::Clock cupti_clock() {
  const CuptiApi& api = cupti();
  return [&api] {
    std::uint64_t t = 0;
    api.cuptiGetTimestamp(&t);
    return static_cast<std::int64_t>(t);
  };
}

CuptiActivitySource::CuptiActivitySource(Recorder& recorder, WrapperLaunches* wrapper_launches)
    : api_(cupti()), recorder_(recorder), wrapper_launches_(wrapper_launches) {
  {
    std::lock_guard lock(current_mutex);
    if (current != nullptr) throw CuptiError("a DELTA CUPTI recorder is already active in this process");
  }
  CUptiResult subscribed;
  std::string holder;
  if (api_.cuptiSubscribe_v2) {
    char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {};
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "DELTA recorder";
    params.oldSubscriberName = old_name;
    params.oldSubscriberSize = sizeof old_name - 1;
    subscribed = api_.cuptiSubscribe_v2(&subscriber_, &CuptiActivitySource::on_callback, this, &params);
    holder = old_name;
  } else {
    subscribed = api_.cuptiSubscribe(&subscriber_, &CuptiActivitySource::on_callback, this);
  }
  if (subscribed == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    throw CuptiError(
        "DELTA_MODE=record cannot subscribe to CUPTI: another profiler holds CUPTI's only subscriber slot" +
        (holder.empty() ? std::string() : " ('" + holder + "')") +
        " - torch.profiler / Kineto, Nsight Systems, Nsight Compute or a debugger. Record without it, or stop it "
        "before DELTA starts");
  }
  check(api_, subscribed, "cuptiSubscribe");
  try {
    for (CUpti_CallbackId id : runtime_callback_ids()) {
      // The wrappers record launches: no runtime launch callback (each cost a decode and a
      // host-stub lookup, and the driver's callback inside it another).
      if (wrapper_launches_ && is_launch_callback(CUPTI_CB_DOMAIN_RUNTIME_API, id)) continue;
      check(api_, api_.cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API, id),
            "cuptiEnableCallback(runtime " + std::to_string(id) + ")");
    }
    for (CUpti_CallbackId id : driver_callback_ids()) {
      check(api_, api_.cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, id),
            "cuptiEnableCallback(driver " + std::to_string(id) + ")");
    }
    {
      std::lock_guard lock(current_mutex);
      current = this;
    }
    check(api_, api_.cuptiActivityRegisterCallbacks(&on_buffer_requested, &on_buffer_completed),
          "cuptiActivityRegisterCallbacks");
    for (CUpti_ActivityKind kind : activity_kinds()) {
      const CUptiResult r = api_.cuptiActivityEnable(kind);
      // Overhead records are a nicety: without them the trace lacks CUPTI's own cost only.
      if (kind == CUPTI_ACTIVITY_KIND_OVERHEAD && r != CUPTI_SUCCESS) continue;
      check(api_, r, "cuptiActivityEnable(" + std::to_string(static_cast<int>(kind)) + ")");
    }
  } catch (...) {
    teardown();
    throw;
  }
  active_ = true;
  const std::string name = params_.gpu_name();
  recorder_.set_gpu({name, gpu_profile_for_device(name), params_.gpu_memory_bytes()});
  recorder_.set_metadata("cupti_library", api_.path);
  recorder_.set_metadata("cupti_version", std::to_string(api_.version));
  log::info("DELTA recorder: CUPTI {} from {}; {}", api_.version, api_.path, params_.describe());
}

CuptiActivitySource::~CuptiActivitySource() { stop(); }

void CuptiActivitySource::teardown() noexcept {
  for (CUpti_ActivityKind kind : activity_kinds()) api_.cuptiActivityDisable(kind);
  if (subscriber_ != nullptr) {
    api_.cuptiEnableDomain(0, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API);
    api_.cuptiEnableDomain(0, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API);
    api_.cuptiUnsubscribe(subscriber_);
    subscriber_ = nullptr;
  }
  std::lock_guard lock(current_mutex);
  if (current == this) current = nullptr;
}

void CuptiActivitySource::flush() {
  std::lock_guard lock(stop_mutex_);
  if (!active_) return;
  // Records exist only for work that finished: wait for the GPU first.
  if (!params_.synchronize()) log::debug("DELTA recorder: no context to synchronize before the CUPTI flush");
  api_.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  publish_metadata();
}

void CuptiActivitySource::stop() {
  std::lock_guard lock(stop_mutex_);
  if (!active_) return;
  params_.synchronize();
  api_.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  teardown();
  active_ = false;
  publish_metadata();
}

std::string CuptiActivitySource::describe() const { return "CUPTI " + std::to_string(api_.version) + " (" + api_.path + ")"; }

void CuptiActivitySource::publish_metadata() {
  recorder_.set_metadata("launches_seen", std::to_string(launches_.load()));
  recorder_.set_metadata("launches_without_param_layout", std::to_string(unattributed_launches_.load()));
  recorder_.set_metadata("failed_host_stub_lookups", std::to_string(params_.failed_stub_lookups()));
  recorder_.set_metadata("first_host_stub_error", std::to_string(params_.first_stub_error()));
  recorder_.set_metadata("driver_param_layouts", params_.layout_sources());
  recorder_.set_metadata("driver_launch_callbacks", std::to_string(driver_launches_.load()));
  recorder_.set_metadata("nested_launch_callbacks", std::to_string(nested_launches_.load()));
  recorder_.set_metadata("transfers_seen", std::to_string(transfers_.load()));
  if (wrapper_launches_) {
    recorder_.set_metadata("launches_recorded_by", "driver launch wrappers");
    recorder_.set_metadata("launches_seen", std::to_string(wrapper_launches_->launches()));
    recorder_.set_metadata("launches_without_param_layout", std::to_string(wrapper_launches_->unattributed()));
    recorder_.set_metadata("wrapper_launch_correlations", std::to_string(wrapper_correlations_.load()));
    // Launches the driver saw that no wrapper forwarded (entry points fetched before libdelta
    // was loaded): not in the trace.
    recorder_.set_metadata("launches_outside_wrappers", std::to_string(launches_outside_wrappers_.load()));
  }
  recorder_.set_metadata("cupti_overhead_ns", std::to_string(cupti_overhead_ns_.load()));
  recorder_.set_metadata("cupti_activity_records", std::to_string(activity_records_.load()));
  recorder_.set_metadata("cupti_dropped_records", std::to_string(dropped_records_.load()));
}

void CUPTIAPI CuptiActivitySource::on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                               const void* cbdata) {
  if (userdata == nullptr || cbdata == nullptr) return;
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  if (issuing_own_work()) return;  // the direction learner's fingerprints, copies and replays
  const auto start = std::chrono::steady_clock::now();
  auto* self = static_cast<CuptiActivitySource*>(userdata);
  try {
    self->handle_api(domain, cbid, *static_cast<const CUpti_CallbackData*>(cbdata));
  } catch (const std::exception& e) {
    // Nothing may escape into the CUDA call being made; the op is lost, the job goes on.
    log::warn("DELTA recorder: a CUPTI callback failed: {}", e.what());
  }
  self->recorder_.add_callback_overhead(std::chrono::steady_clock::now() - start);
}

void CuptiActivitySource::handle_api(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                     const CUpti_CallbackData& data) {
  ThreadState& state = thread_state;
  if (data.callbackSite == CUPTI_API_EXIT) {
    if (state.depth > 0 && --state.depth == 0) {
      state.op.reset();
      state.attributed = false;
    }
    return;
  }
  const bool nested = state.depth > 0;
  ++state.depth;
  if (is_launch_callback(domain, cbid)) handle_launch(domain, cbid, data, nested);
  else if (is_transfer_callback(domain, cbid)) handle_transfer(domain, cbid, data, nested);
}

void CuptiActivitySource::handle_launch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                        const CUpti_CallbackData& data, bool nested) {
  ThreadState& state = thread_state;
  if (recorder_.finished()) return;
  if (wrapper_launches_) {
    // The wrapper recorded the op; only the correlation id (for the duration) is CUPTI's.
    if (const std::optional<std::size_t> op = WrapperLaunches::current_op()) {
      recorder_.bind_correlation(data.correlationId, *op);
      wrapper_correlations_.fetch_add(1, std::memory_order_relaxed);
    } else {
      launches_outside_wrappers_.fetch_add(1, std::memory_order_relaxed);  // a launch that bypassed them
    }
    return;
  }
  const std::optional<DecodedLaunch> launch = decode_launch(domain, cbid, data.functionParams);
  if (!launch) return;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) driver_launches_.fetch_add(1, std::memory_order_relaxed);
  if (nested) nested_launches_.fetch_add(1, std::memory_order_relaxed);
  const ParamLayout* layout = nullptr;
  switch (launch->handle_kind) {
    case DecodedLaunch::Handle::function: layout = params_.for_function(static_cast<CUfunction>(const_cast<void*>(launch->handle))); break;
    case DecodedLaunch::Handle::kernel: layout = params_.for_kernel(static_cast<CUkernel>(const_cast<void*>(launch->handle))); break;
    case DecodedLaunch::Handle::host_stub: layout = params_.for_host_stub(launch->handle); break;
  }
  if (nested) {
    if (!state.op) return;
    recorder_.bind_correlation(data.correlationId, *state.op);
    if (!state.attributed) {
      bool attributed = false;
      recorder_.amend_op(*state.op, [&](const BlockMap& blocks, trace::Op& op) {
        attributed = attribute_launch(*launch, layout, blocks, op);
      });
      if (attributed) {
        state.attributed = true;
        unattributed_launches_.fetch_sub(1, std::memory_order_relaxed);
      }
    }
    return;
  }
  launches_.fetch_add(1, std::memory_order_relaxed);
  OpInfo info;
  info.name = data.symbolName && *data.symbolName ? data.symbolName : (data.functionName ? data.functionName : "kernel");
  info.kind = trace::OpKind::kernel;
  info.stream = launch->stream;
  bool attributed = false;
  state.op = recorder_.add_op(std::move(info), [&](const BlockMap& blocks, trace::Op& op) {
    attributed = attribute_launch(*launch, layout, blocks, op);
  });
  state.attributed = attributed;
  if (!attributed) unattributed_launches_.fetch_add(1, std::memory_order_relaxed);
  if (state.op) recorder_.bind_correlation(data.correlationId, *state.op);
}

void CuptiActivitySource::handle_transfer(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                          const CUpti_CallbackData& data, bool nested) {
  ThreadState& state = thread_state;
  if (recorder_.finished()) return;
  if (nested) {
    if (state.op) recorder_.bind_correlation(data.correlationId, *state.op);
    return;
  }
  const std::optional<DecodedTransfer> transfer = decode_transfer(domain, cbid, data.functionParams);
  if (!transfer || transfer->bytes == 0) return;
  transfers_.fetch_add(1, std::memory_order_relaxed);
  OpInfo info;
  const bool memset = transfer->kind == trace::OpKind::memset;
  info.name = memset ? "memset" : (data.functionName ? data.functionName : "memcpy");
  info.kind = transfer->kind.value_or(trace::OpKind::copy_d2d);
  info.stream = transfer->stream;
  info.bytes = transfer->bytes;
  state.op = recorder_.add_op(std::move(info), [&](const BlockMap& blocks, trace::Op& op) {
    attribute_transfer(*transfer, blocks, op);
  });
  state.attributed = true;
  if (state.op) recorder_.bind_correlation(data.correlationId, *state.op);
}

void CUPTIAPI CuptiActivitySource::on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kActivityBufferAlignment, kActivityBufferBytes));
  *size = *buffer ? kActivityBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI CuptiActivitySource::on_buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                                       size_t, size_t valid_size) {
  {
    std::lock_guard lock(current_mutex);
    if (current != nullptr && buffer != nullptr && valid_size > 0) {
      try {
        current->consume(buffer, valid_size);
        std::size_t dropped = 0;
        if (current->api_.cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS) {
          current->dropped_records_.fetch_add(dropped, std::memory_order_relaxed);
        }
      } catch (const std::exception& e) {
        log::warn("DELTA recorder: reading CUPTI activity records failed: {}", e.what());
      }
    }
  }
  std::free(buffer);
}

void CuptiActivitySource::consume(std::uint8_t* buffer, std::size_t valid_size) {
  CUpti_Activity* record = nullptr;
  while (api_.cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    activity_records_.fetch_add(1, std::memory_order_relaxed);
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        recorder_.complete_correlation(kernel->correlationId, static_cast<std::int64_t>(kernel->end - kernel->start));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        recorder_.complete_correlation(copy->correlationId, static_cast<std::int64_t>(copy->end - copy->start), copy->bytes);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* memset = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        recorder_.complete_correlation(memset->correlationId, static_cast<std::int64_t>(memset->end - memset->start),
                                       memset->bytes);
        break;
      }
      case CUPTI_ACTIVITY_KIND_OVERHEAD: {
        auto* overhead = reinterpret_cast<CUpti_ActivityOverhead3*>(record);
        if (overhead->end > overhead->start) cupti_overhead_ns_.fetch_add(overhead->end - overhead->start);
        // cupti_activity.h: the client frees the details with free() when done.
        std::free(overhead->overheadData);
        overhead->overheadData = nullptr;
        break;
      }
      default: break;
    }
  }
}

}  // namespace delta::profiler
