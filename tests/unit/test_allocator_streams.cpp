// Stream-ordered reuse: blocks are reused per stream, and a block used on another stream is
// only reused after that stream's work completes (record_stream).
#include "tests/support/allocator_fixture.hpp"

#include <catch2/catch.hpp>

#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace delta;
using namespace delta::testing;

TEST_CASE("a block freed on one stream is not reused by another") {
  SimAllocator a;
  StreamHandle s1 = a.sim->create_stream(), s2 = a.sim->create_stream();
  void* p = a->allocate(4096, s1);
  a->deallocate(p);
  void* q = a->allocate(4096, s2);
  CHECK(q != p);
  void* r = a->allocate(4096, s1);
  CHECK(r == p);
  a->deallocate(q);
  a->deallocate(r);
  a->check_invariants();
}

TEST_CASE("record_stream defers reuse until the other stream's work completes") {
  SimAllocator a;
  StreamHandle s1 = a.sim->create_stream(), s2 = a.sim->create_stream();
  for (std::size_t size : {8192ul, 6 * MiB}) {
    void* p = a->allocate(size, s1);
    a->record_stream(p, s2);
    a->record_stream(p, s1);  // its own stream: nothing to wait for
    SimLaunch kernel{"reader", 1'000'000, {{dptr(p), size}}, {}};
    a.sim->launch(kernel, s2);  // 1 ms of work on s2 still reading p
    a->deallocate(p);
    auto s = a->stats();
    CHECK(s.pending_frees == 1);
    CHECK(s.allocated_bytes == 0);
    CHECK(s.active_bytes >= size);
    a->check_invariants();

    void* q = a->allocate(size, s1);
    CHECK(q != p);  // s2 may still read p
    a->check_invariants();
    a.sim->advance_ns(2'000'000);  // s2's kernel has finished
    void* r = a->allocate(size, s1);
    CHECK(r == p);
    CHECK(a->stats().pending_frees == 0);
    a->deallocate(q);
    a->deallocate(r);
    a->check_invariants();
  }
}

TEST_CASE("pending frees are completed by waiting when memory runs out") {
  SimAllocator a(64 * MiB);
  StreamHandle s1 = a.sim->create_stream(), s2 = a.sim->create_stream();
  void* p = a->allocate(40 * MiB, s1);
  a->record_stream(p, s2);
  a.sim->launch(SimLaunch{"long", 10'000'000'000ull, {{dptr(p), 40 * MiB}}, {}}, s2);
  a->deallocate(p);
  // 40 MiB more does not fit beside the pending block: the allocator waits for s2, then
  // reuses the pages.
  void* q = a->allocate(40 * MiB, s1);
  REQUIRE(q != nullptr);
  CHECK(a.sim->now_ns() >= 10'000'000'000ull);
  CHECK(a->stats().retries == 1);
  a->deallocate(q);
  a->check_invariants();
}

TEST_CASE("record_stream and frees on unknown pointers are refused") {
  SimAllocator a;
  CHECK_THROWS_AS(a->record_stream(reinterpret_cast<void*>(0x4000), 0), InvalidFreeError);
}

TEST_CASE("record_stream refuses a stream the device does not know, changing nothing") {
  SimAllocator a;
  void* p = a->allocate(4096, 0);
  CHECK_THROWS_WITH(a->record_stream(p, 0xdead0000), Catch::Contains("0xdead0000") && Catch::Contains("nothing was changed"));
  CHECK(a->owns(p));
  a->check_invariants();
  a->deallocate(p);  // no event on the bogus stream: freed at once
  CHECK_FALSE(a->owns(p));
  CHECK(a->stats().pending_frees == 0);
  a->check_invariants();
}

TEST_CASE("a block whose recorded stream was destroyed since is freed after a device-wide wait") {
  // CUDA lets a stream's owner destroy it while work it queued still runs: the free cannot
  // record an event there, and must neither fail (the block would never go back) nor let the
  // block be reused before that work ends.
  SimAllocator a;
  StreamHandle s1 = a.sim->create_stream(), s2 = a.sim->create_stream();
  void* p = a->allocate(6 * MiB, s1);
  a->record_stream(p, s2);
  SimLaunch kernel{"reader", 1'000'000, {{dptr(p), 6 * MiB}}, {}};
  a.sim->launch(kernel, s2);
  const std::uint64_t busy_until = a.sim->stream_ready_ns(s2);
  a.sim->destroy_stream(s2);
  a->deallocate(p);
  CHECK_FALSE(a->owns(p));
  CHECK(a.sim->now_ns() >= busy_until);  // the reader finished before the block went back
  CHECK(a->stats().allocated_bytes == 0);
  a->check_invariants();
  void* q = a->allocate(6 * MiB, s1);
  CHECK(q == p);
  a->deallocate(q);
  a->check_invariants();
}

TEST_CASE("a page reclaimed from a destroyed stream's cache waits for the device instead") {
  SimAllocator a(64 * MiB);
  StreamHandle s1 = a.sim->create_stream(), s2 = a.sim->create_stream();
  void* p = a->allocate(60 * MiB, s1);
  SimLaunch kernel{"writer", 1'000'000, {}, {{dptr(p), 60 * MiB}}};
  a.sim->launch(kernel, s1);
  const std::uint64_t busy_until = a.sim->stream_ready_ns(s1);
  a->deallocate(p);
  a.sim->destroy_stream(s1);  // its pages stay cached, idle
  void* q = a->allocate(60 * MiB, s2);  // only by taking those pages
  REQUIRE(q != nullptr);
  CHECK(a.sim->now_ns() >= busy_until);
  CHECK(a->stats().live_blocks == 1);
  a->check_invariants();
  a->deallocate(q);
  a->empty_cache();
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == 0);
}

namespace {

// The sim device, but able to refuse every wait: a device failing under the allocator.
class WaitRefusing final : public Device {
 public:
  explicit WaitRefusing(std::shared_ptr<Device> inner) : inner_(std::move(inner)) {}
  bool refuse = false;
  void check(const char* what) {
    if (refuse) throw DeviceError(DeviceErrc::driver_error, std::string(what) + ": refused by the test");
  }
  std::string_view kind() const noexcept override { return inner_->kind(); }
  int ordinal() const noexcept override { return inner_->ordinal(); }
  MemInfo mem_info() override { return inner_->mem_info(); }
  std::size_t granularity() override { return inner_->granularity(); }
  DevicePtr reserve(std::size_t n) override { return inner_->reserve(n); }
  void release_reservation(DevicePtr va, std::size_t n) override { inner_->release_reservation(va, n); }
  PhysHandle create_physical(std::size_t n) override { return inner_->create_physical(n); }
  void release_physical(PhysHandle h) override { inner_->release_physical(h); }
  void map(DevicePtr va, std::size_t n, PhysHandle h) override { inner_->map(va, n, h); }
  void unmap(DevicePtr va, std::size_t n) override { inner_->unmap(va, n); }
  StreamHandle create_stream() override { return inner_->create_stream(); }
  void destroy_stream(StreamHandle s) override { inner_->destroy_stream(s); }
  void synchronize_stream(StreamHandle s) override {
    check("synchronize_stream");
    inner_->synchronize_stream(s);
  }
  void synchronize() override {
    check("synchronize");
    inner_->synchronize();
  }
  EventHandle create_event() override { return inner_->create_event(); }
  void destroy_event(EventHandle e) override { inner_->destroy_event(e); }
  void record_event(EventHandle e, StreamHandle s) override { inner_->record_event(e, s); }
  bool query_event(EventHandle e) override { return inner_->query_event(e); }
  void synchronize_event(EventHandle e) override {
    check("synchronize_event");
    inner_->synchronize_event(e);
  }
  void stream_wait_event(StreamHandle s, EventHandle e) override { inner_->stream_wait_event(s, e); }
  void copy_h2d_async(DevicePtr d, const void* h, std::size_t n, StreamHandle s) override { inner_->copy_h2d_async(d, h, n, s); }
  void copy_d2h_async(void* h, DevicePtr d, std::size_t n, StreamHandle s) override { inner_->copy_d2h_async(h, d, n, s); }
  void copy_d2d_async(DevicePtr d, DevicePtr src, std::size_t n, StreamHandle s) override { inner_->copy_d2d_async(d, src, n, s); }
  void memset_async(DevicePtr d, std::uint8_t v, std::size_t n, StreamHandle s) override { inner_->memset_async(d, v, n, s); }
  void* alloc_pinned(std::size_t n) override { return inner_->alloc_pinned(n); }
  void free_pinned(void* p) override { inner_->free_pinned(p); }

 private:
  std::shared_ptr<Device> inner_;
};

}  // namespace

TEST_CASE("a device refusing the wait a page reclaim needs leaves the allocator as it was") {
  SimOptions options;
  options.capacity_bytes = 64 * MiB;
  auto refusing = std::make_shared<WaitRefusing>(make_sim_device(options));
  CachingAllocator a(refusing, {});
  const StreamHandle s1 = refusing->create_stream(), s2 = refusing->create_stream();
  a.deallocate(a.allocate(60 * MiB, s1));  // cached on s1: s2 can have the pages only by a reclaim
  const AllocatorStats before = a.stats();
  refusing->refuse = true;
  CHECK_THROWS_AS(a.allocate(60 * MiB, s2), DeviceError);
  a.check_invariants();
  const AllocatorStats after = a.stats();
  CHECK(after.allocated_bytes == before.allocated_bytes);
  CHECK(after.live_blocks == 0);
  // Pages mapped for it before the refusal stay cached, every one of them idle: none is held
  // by a block that was never handed out.
  CHECK(after.reserved_bytes >= before.reserved_bytes);
  CHECK(a.unused_page_bytes() == after.reserved_bytes);
  refusing->refuse = false;  // the device recovers: the same request is served
  void* q = a.allocate(60 * MiB, s2);
  CHECK(q != nullptr);
  a.check_invariants();
  a.deallocate(q);
  a.check_invariants();
}

TEST_CASE("the allocator returns all its memory at shutdown even after its streams are gone") {
  // PyTorch keeps its streams for the life of the process, other owners destroy theirs: the
  // allocator's destructor must not need them (on the real driver a destroyed stream is a
  // dangling pointer), and must still wait for their work before unmapping.
  SimAllocator a;
  StreamHandle side = a.sim->create_stream();
  void* p = a->allocate(6 * MiB, side);
  std::vector<std::uint8_t> host(6 * MiB);
  a.sim->copy_d2h_async(host.data(), dptr(p), host.size(), side);  // still running below
  const std::uint64_t busy_until = a.sim->stream_ready_ns(side);
  a->deallocate(p);
  a.sim->destroy_stream(side);
  REQUIRE(a.sim->counters().physical_bytes_in_use > 0);
  a.allocator.reset();
  CHECK(a.sim->counters().physical_bytes_in_use == 0);
  CHECK(a.sim->counters().unmaps == a.sim->counters().maps);
  CHECK(a.sim->now_ns() >= busy_until);  // it waited for the copy before unmapping
}

TEST_CASE("synchronize waits for every stream, destroyed ones too") {
  SimAllocator a;
  StreamHandle s1 = a.sim->create_stream(), s2 = a.sim->create_stream();
  void* p = a->allocate(6 * MiB, s1);
  std::vector<std::uint8_t> host(6 * MiB);
  a.sim->copy_d2h_async(host.data(), dptr(p), host.size(), s1);
  a.sim->copy_d2h_async(host.data(), dptr(p), host.size(), s2);
  a.sim->copy_d2h_async(host.data(), dptr(p), host.size(), s2);
  const std::uint64_t latest = std::max(a.sim->stream_ready_ns(s1), a.sim->stream_ready_ns(s2));
  REQUIRE(latest > a.sim->now_ns());
  a.sim->destroy_stream(s2);
  a.sim->synchronize();
  CHECK(a.sim->now_ns() == latest);
  a->deallocate(p);
  a->check_invariants();
}

// Run mode's executor makes the allocator's lock its own: it holds it across an entry point and
// calls the allocator inside (CachingAllocator::lock).
TEST_CASE("the allocator's lock is re-entrant for its holder and excludes every other thread") {
  SimAllocator a;
  StreamHandle s = a.sim->create_stream();
  ReentrantLock& lock = a->lock();
  CHECK_FALSE(lock.held_by_this_thread());
  {
    std::lock_guard held(lock);
    CHECK(lock.held_by_this_thread());
    void* p = a->allocate(4096, s);  // takes the lock again: no deadlock
    CHECK(a->owns(p));
    bool other_got_it = true;
    std::thread([&] { other_got_it = lock.try_lock(); }).join();
    CHECK_FALSE(other_got_it);
    a->deallocate(p);
    CHECK(lock.held_by_this_thread());  // still held after the nested calls released theirs
  }
  CHECK_FALSE(lock.held_by_this_thread());
  bool other_got_it = false;
  std::thread([&] {
    other_got_it = lock.try_lock();
    if (other_got_it) lock.unlock();
  }).join();
  CHECK(other_got_it);

  // Threads that hold it around several calls each see their own calls as one.
  std::uint64_t counted = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        std::lock_guard held(lock);
        const std::uint64_t before = counted;
        void* p = a->allocate(4096, s);
        a->deallocate(p);
        counted = before + 1;
      }
    });
  for (std::thread& t : threads) t.join();
  CHECK(counted == 800);
  a->check_invariants();
}

// The holder's fast path: allocate and deallocate without re-entering the lock, refused to a
// thread that does not hold it (it would race every other thread on the allocator's state).
TEST_CASE("LockHeld calls serve the lock's holder and refuse any other thread") {
  SimAllocator a;
  StreamHandle s = a.sim->create_stream();
  ReentrantLock& lock = a->lock();
  using Held = CachingAllocator::LockHeld;
  CHECK_THROWS_AS(a->allocate(4096, s, Placement{}, Held{}), std::logic_error);
  void* p = a->allocate(4096, s);
  CHECK_THROWS_AS(a->deallocate(p, Held{}), std::logic_error);
  CHECK(a->owns(p));  // the refused free changed nothing
  {
    std::lock_guard held(lock);
    a->deallocate(p, Held{});
    CHECK_FALSE(a->owns(p));
    Placement own;
    own.own_pages = true;
    void* q = a->allocate(4096, s, own, Held{});
    CHECK(a->block_size(q) == std::optional<std::size_t>(a.sim->granularity()));
    bool refused = false;
    std::thread([&] {
      try {
        a->deallocate(q, Held{});
      } catch (const std::logic_error&) {
        refused = true;
      }
    }).join();
    CHECK(refused);
    a->deallocate(q, Held{});
    CHECK(lock.held_by_this_thread());
  }
  CHECK(a->stats().live_blocks == 0);
  a->check_invariants();
}
