// The C ABI: PyTorch's pluggable-allocator entry points and the control functions. Nothing
// may throw across this boundary: failures become return codes (or nullptr) plus
// delta_last_error().
#include "include/delta/delta.h"

#include "allocator/reports/stats_json.hpp"
#include "src/modes/record_mode.hpp"
#include "src/driver/driver_interpose.hpp"
#include "src/modes/run_mode.hpp"
#include "src/runtime.hpp"

#include <cstring>
#include <exception>
#include <string>

namespace {

using delta::runtime_allocator;
using delta::StreamHandle;

StreamHandle to_stream(delta_stream_t stream) { return reinterpret_cast<StreamHandle>(stream); }

template <typename F>
int guarded(F&& body) noexcept {
  try {
    body();
    return 0;
  } catch (const std::exception& e) {
    delta::set_last_error(e.what());
  } catch (...) {
    delta::set_last_error("unknown error");
  }
  return -1;
}

}  // namespace

extern "C" {

void* delta_malloc(ssize_t size, int device, delta_stream_t stream) {
  void* ptr = nullptr;
  if (size < 0) {
    delta::set_last_error(("delta_malloc: negative size " + std::to_string(size)).c_str());
    return nullptr;
  }
  if (device != 0) {
    delta::set_last_error(("delta_malloc: device " + std::to_string(device) +
                           " requested, but DELTA serves device 0 only in this version").c_str());
    return nullptr;
  }
  guarded([&] { ptr = delta::serve_allocation(runtime_allocator(), static_cast<std::size_t>(size), to_stream(stream)); });
  delta::record_allocated(ptr, static_cast<std::size_t>(size), to_stream(stream));
  return ptr;
}

void delta_free(void* ptr, ssize_t, int, delta_stream_t) {
  if (!ptr) return;
  // Recorded before the block goes back: once it has, another thread may be handed the
  // same address, and its allocation must not be mistaken for this block.
  delta::record_freed(ptr);
  guarded([&] { delta::serve_free(runtime_allocator(), ptr); });
}

void delta_init(int) {
  guarded([] { runtime_allocator(); });
}

void delta_reset(void) { delta_empty_cache(); }

void delta_memory_fraction(double fraction, int device) {
  if (device != 0) {  // as delta_malloc: another device's limit must not land on device 0
    delta::set_last_error(("delta_memory_fraction: device " + std::to_string(device) +
                           " requested, but DELTA serves device 0 only in this version; no limit changed").c_str());
    return;
  }
  guarded([&] { runtime_allocator().set_memory_fraction(fraction); });
}

void delta_record_stream(void* ptr, delta_stream_t stream) {
  if (!ptr) return;
  guarded([&] { runtime_allocator().record_stream(ptr, to_stream(stream)); });
}

int delta_empty_cache(void) {
  return guarded([] { runtime_allocator().empty_cache(); });
}

int delta_owns(const void* ptr) {
  delta::CachingAllocator* a = delta::runtime_allocator_if_created();
  return a && ptr && a->owns(ptr) ? 1 : 0;
}

int delta_stats_json(char* buffer, size_t capacity) {
  std::string text;
  int rc = guarded([&] {
    auto& a = runtime_allocator();
    nlohmann::json doc = delta::stats_to_json(a.stats());
    doc["device"] = std::string(a.device().kind());
    // Whether run mode could guard launches on a GPU (src/driver/driver_interpose.hpp).
    doc["driver_interposer"] = delta::interpose::live()        ? "live"
                               : !delta::preload_enabled()     ? "off (DELTA_PRELOAD=0)"
                                                                : "not preloaded";
    if (const std::string run = delta::run_stats_json(); !run.empty()) doc["executor"] = nlohmann::json::parse(run);
    text = doc.dump();
  });
  if (rc != 0) return rc;
  if (buffer && capacity > text.size()) std::memcpy(buffer, text.c_str(), text.size() + 1);
  return static_cast<int>(text.size() + 1);
}

int delta_reset_peak_stats(void) {
  return guarded([] { runtime_allocator().reset_peak_stats(); });
}

int delta_dump(const char* path) {
  if (!path || !*path) {
    delta::set_last_error("delta_dump: empty path");
    return -1;
  }
  return guarded([&] { runtime_allocator().dump(path); });
}

int delta_check_invariants(void) {
  return guarded([] { runtime_allocator().check_invariants(); });
}

int delta_step(void) {
  return guarded([] {
    delta::record_step();
    delta::run_step();
  });
}

int delta_trace_dump(const char* path) {
  if (path != nullptr && *path == '\0') {
    delta::set_last_error("delta_trace_dump: empty path (pass NULL for the DELTA_TRACE path)");
    return -1;
  }
  return guarded([&] { delta::record_dump(path); });
}

const char* delta_last_error(void) { return delta::last_error_text(); }

const char* delta_version(void) { return "0.1.0"; }

}  // extern "C"
