#include "sim/ledger_device.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace delta::planner {

namespace {

constexpr std::size_t kPage = 2ull << 20;

[[noreturn]] void refuse(DeviceErrc code, const std::string& what) { throw DeviceError(code, "ledger device: " + what); }

class LedgerDevice final : public Device {
 public:
  LedgerDevice(const GpuProfile& profile, const LedgerClockSlot* clock) : capacity_(profile.memory_bytes), clock_(clock) {}

  std::string_view kind() const noexcept override { return "ledger"; }
  int ordinal() const noexcept override { return 0; }
  MemInfo mem_info() override { return {capacity_ - physical_bytes_, capacity_}; }
  std::size_t granularity() override { return kPage; }

  DevicePtr reserve(std::size_t size) override {
    if (size == 0 || size % kPage != 0) refuse(DeviceErrc::invalid_value, "reserve of " + std::to_string(size) + " bytes");
    const DevicePtr va = next_va_;
    next_va_ += size + kPage;  // a guard page between reservations; addresses only grow
    Reservation& r = reservations_.emplace_back();
    r.va = va;
    r.size = size;
    return va;
  }
  void release_reservation(DevicePtr va, std::size_t size) override {
    auto it = std::find_if(reservations_.begin(), reservations_.end(), [&](const Reservation& r) { return r.va == va; });
    if (it == reservations_.end() || it->size != size) refuse(DeviceErrc::invalid_handle, "release of an unknown reservation");
    if (it->live_mappings != 0) refuse(DeviceErrc::invalid_value, "release of a reservation with live mappings");
    reservations_.erase(it);
  }

  PhysHandle create_physical(std::size_t size) override {
    if (size == 0 || size % kPage != 0) refuse(DeviceErrc::invalid_value, "create_physical of " + std::to_string(size) + " bytes");
    if (size > capacity_ - physical_bytes_) refuse(DeviceErrc::out_of_memory, "out of device memory");
    physical_bytes_ += size;
    handles_.push_back(Handle{size, 0, false});
    return handles_.size();  // ids are never reused: a ledger lives for one simulation
  }
  void release_physical(PhysHandle handle) override {
    Handle& h = live_handle(handle, "release_physical");
    h.released = true;
    if (h.maps == 0) free_handle(h);
  }

  void map(DevicePtr va, std::size_t size, PhysHandle handle) override {
    Handle& h = live_handle(handle, "map");
    if (size != h.size || va % kPage != 0) refuse(DeviceErrc::invalid_value, "a map must cover its whole handle, page-aligned");
    Reservation& r = reservation_of(va, size, "map");
    const std::size_t first = (va - r.va) / kPage, count = size / kPage;
    if (r.pages.size() < first + count) r.pages.resize(first + count);  // grown as the arena is used: most of it never is
    for (std::size_t i = first; i < first + count; ++i)
      if (r.pages[i].mapped) refuse(DeviceErrc::already_mapped, "map over a mapped page");
    for (std::size_t i = first; i < first + count; ++i) r.pages[i].mapped = true;
    r.pages[first].mapping_pages = count;
    r.pages[first].handle = handle;
    r.live_mappings++;
    h.maps++;
  }
  void unmap(DevicePtr va, std::size_t size) override {
    Reservation& r = reservation_of(va, size, "unmap");
    const std::size_t first = (va - r.va) / kPage;
    if (va % kPage != 0 || first >= r.pages.size() || r.pages[first].mapping_pages == 0)
      refuse(DeviceErrc::not_mapped, "unmap of an address that starts no mapping");
    if (r.pages[first].mapping_pages * kPage != size) refuse(DeviceErrc::invalid_value, "an unmap must cover exactly one mapping");
    Handle& h = handles_[r.pages[first].handle - 1];
    for (std::size_t i = first; i < first + size / kPage; ++i) r.pages[i] = Page{};
    r.live_mappings--;
    if (--h.maps == 0 && h.released) free_handle(h);
  }

  StreamHandle create_stream() override { return next_name_++; }
  void destroy_stream(StreamHandle) override {}
  // One clock for every stream: the simulation runs the step's work in order.
  void synchronize_stream(StreamHandle) override { synchronize(); }
  void synchronize() override {
    if (LedgerClock* c = clock()) c->host_waits_until(c->device_done_ns());
  }
  EventHandle create_event() override { return next_name_++; }
  void destroy_event(EventHandle) override {}
  void record_event(EventHandle event, StreamHandle) override {
    const LedgerClock* c = clock();
    event_done(event) = {c ? c->device_done_ns() : 0, clock_ ? clock_->generation : 0};
  }
  bool query_event(EventHandle event) override {
    const LedgerClock* c = clock();
    const EventDone& done = event_done(event);
    return !c || done.generation != clock_->generation || done.ns <= c->host_ns();
  }
  void synchronize_event(EventHandle event) override {
    const EventDone& done = event_done(event);
    if (LedgerClock* c = clock(); c && done.generation == clock_->generation) c->host_waits_until(done.ns);
  }
  void stream_wait_event(StreamHandle, EventHandle) override {}

  void copy_h2d_async(DevicePtr, const void*, std::size_t, StreamHandle) override { no_data("copy_h2d_async"); }
  void copy_d2h_async(void*, DevicePtr, std::size_t, StreamHandle) override { no_data("copy_d2h_async"); }
  void copy_d2d_async(DevicePtr, DevicePtr, std::size_t, StreamHandle) override { no_data("copy_d2d_async"); }
  void memset_async(DevicePtr, std::uint8_t, std::size_t, StreamHandle) override { no_data("memset_async"); }
  void* alloc_pinned(std::size_t) override { no_data("alloc_pinned"); }
  void free_pinned(void*) override { no_data("free_pinned"); }

 private:
  struct Handle {
    std::size_t size;
    std::size_t maps;
    bool released;  // no longer usable; its bytes go once its last mapping does
  };
  // A page of a reservation: whether mapped, and at the first page of a mapping, its length in
  // pages and its handle (0 elsewhere).
  struct Page {
    bool mapped = false;
    std::size_t mapping_pages = 0;
    PhysHandle handle = 0;
  };
  struct Reservation {
    DevicePtr va = 0;
    std::size_t size = 0;
    std::vector<Page> pages;  // by index from va, up to the last page ever mapped
    std::size_t live_mappings = 0;
  };

  [[noreturn]] static void no_data(const char* operation) {
    refuse(DeviceErrc::invalid_value, std::string(operation) + ": this device keeps no data");
  }
  Handle& live_handle(PhysHandle handle, const char* operation) {
    if (handle == 0 || handle > handles_.size() || handles_[handle - 1].released)
      refuse(DeviceErrc::invalid_handle, std::string(operation) + " of an unknown or released handle");
    return handles_[handle - 1];
  }
  Reservation& reservation_of(DevicePtr va, std::size_t size, const char* operation) {
    // Reservations are few (an arena per stream and pool) and in address order.
    auto it = std::upper_bound(reservations_.begin(), reservations_.end(), va,
                               [](DevicePtr v, const Reservation& r) { return v < r.va; });
    if (it == reservations_.begin()) refuse(DeviceErrc::invalid_value, std::string(operation) + " outside every reservation");
    Reservation& r = *std::prev(it);
    if (va - r.va >= r.size || size > r.size - (va - r.va))
      refuse(DeviceErrc::invalid_value, std::string(operation) + " of a range not inside one reservation");
    return r;
  }
  void free_handle(const Handle& h) { physical_bytes_ -= h.size; }
  LedgerClock* clock() const { return clock_ ? clock_->clock : nullptr; }
  struct EventDone {
    std::int64_t ns = 0;             // when the work queued before the event completes
    std::uint64_t generation = 0;    // the clock's, when recorded
  };
  EventDone& event_done(EventHandle event) {
    if (event < kFirstName || event >= next_name_) refuse(DeviceErrc::invalid_handle, "an unknown event");
    const std::size_t slot = event - kFirstName;
    if (event_done_.size() <= slot) event_done_.resize(slot + 1);
    return event_done_[slot];
  }

  std::size_t capacity_;
  std::size_t physical_bytes_ = 0;
  // Where the sim device starts its address space, with its guard page after each reservation:
  // the same calls get the same addresses on both, so a ledger's placements read beside a sim
  // run's address by address (as docs/executor.md traces them).
  DevicePtr next_va_ = 0x9000'0000'0000ULL;
  static constexpr std::uintptr_t kFirstName = 0x100;
  std::uintptr_t next_name_ = kFirstName;
  const LedgerClockSlot* clock_;
  std::vector<EventDone> event_done_;  // by name - kFirstName
  std::vector<Reservation> reservations_;
  std::vector<Handle> handles_;  // by id - 1
};

}  // namespace

std::shared_ptr<Device> make_ledger_device(const std::string& gpu_profile, const LedgerClockSlot* clock) {
  return std::make_shared<LedgerDevice>(delta::gpu_profile(gpu_profile), clock);
}

}  // namespace delta::planner
