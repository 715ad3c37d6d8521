// What the sim's memory holds: the content modes (bytes, digest, none), digest(), deterministic
// kernels, launches on unmapped memory under SimUnmapped::count, and the symbolic runs behind
// SimContent::digest.
#include <delta/sim_device.hpp>

#include "device/sim/memory/sim_content.hpp"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <fstream>
#include <functional>
#include <random>
#include <vector>

using namespace delta;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;
constexpr std::size_t kPage = 2 * kMiB;

std::shared_ptr<SimDevice> make_sim(SimContent content, std::size_t capacity = 256 * kMiB,
                                    SimUnmapped on_unmapped = SimUnmapped::fail) {
  SimOptions options;
  options.capacity_bytes = capacity;
  options.content = content;
  options.on_unmapped = on_unmapped;
  auto device = std::dynamic_pointer_cast<SimDevice>(make_sim_device(options));
  REQUIRE(device != nullptr);
  REQUIRE(device->content() == content);
  return device;
}

// Maps `handles` handles of `handle_bytes` back to back and returns the start.
DevicePtr map_handles(SimDevice& device, std::size_t handles, std::size_t handle_bytes = kPage) {
  const DevicePtr va = device.reserve(handles * handle_bytes);
  for (std::size_t i = 0; i < handles; ++i) {
    device.map(va + i * handle_bytes, handle_bytes, device.create_physical(handle_bytes));
  }
  return va;
}

std::vector<std::uint8_t> read_back(SimDevice& device, DevicePtr ptr, std::size_t bytes) {
  std::vector<std::uint8_t> out(bytes);
  device.read(ptr, out);
  return out;
}

std::vector<std::uint8_t> random_bytes(std::mt19937_64& rng, std::size_t bytes) {
  std::vector<std::uint8_t> out(bytes);
  for (auto& byte : out) byte = static_cast<std::uint8_t>(rng());
  return out;
}

// What a seeded launch writes, by the documented rule.
std::vector<std::uint8_t> generated(std::uint64_t seed, std::size_t bytes, std::uint64_t base = 0) {
  std::vector<std::uint8_t> out(bytes);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = sim_generated_byte(seed, base + i);
  return out;
}

bool same_bytes(const std::vector<std::uint8_t>& actual, const std::vector<std::uint8_t>& expected) {
  if (actual.size() != expected.size()) {
    UNSCOPED_INFO("sizes differ: " << actual.size() << " vs " << expected.size());
    return false;
  }
  const auto [a, e] = std::mismatch(actual.begin(), actual.end(), expected.begin());
  if (a == actual.end()) return true;
  UNSCOPED_INFO("first difference at offset " << (a - actual.begin()) << ": " << int(*a) << " vs " << int(*e));
  return false;
}

DeviceError error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const DeviceError& error) {
    return error;
  }
  FAIL("expected a DeviceError");
  return DeviceError(DeviceErrc::driver_error, "");
}

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

SimLaunch kernel(std::uint64_t seed, std::vector<SimRange> reads, std::vector<SimRange> writes) {
  return SimLaunch{"k" + std::to_string(seed), 1000, std::move(reads), std::move(writes), seed};
}

}  // namespace

TEST_CASE("digest mode holds 100 GiB and round-trips it through pinned memory for megabytes", "[sim][content][digest]") {
  const std::size_t before = resident_bytes();
  auto device = make_sim(SimContent::digest, 256 * kGiB);
  constexpr std::size_t kBig = 100 * kGiB;
  const StreamHandle stream = device->create_stream();

  // One 100 GiB handle filled by a kernel, then cut up by a memset and a device copy.
  const DevicePtr va = map_handles(*device, 1, kBig);
  device->launch(kernel(42, {}, {{va, kBig}}), stream);
  device->memset_async(va + 7 * kGiB + 3, 0xA5, 5 * kMiB, stream);
  device->copy_d2d_async(va + 50 * kGiB + 1, va + 90 * kGiB, 3 * kGiB, stream);
  device->synchronize_stream(stream);
  const std::uint64_t original = device->digest(va, kBig);

  void* pinned = device->alloc_pinned(kBig);
  device->copy_d2h_async(pinned, va, kBig, stream);
  device->memset_async(va, 0, kBig, stream);  // ordered after the copy on the same stream
  device->synchronize_stream(stream);
  CHECK(device->digest(va, kBig) != original);

  // Back at the same address...
  device->copy_h2d_async(va, pinned, kBig, stream);
  device->synchronize_stream(stream);
  CHECK(device->digest(va, kBig) == original);

  // ...and at another one, made of 50 handles of 2 GiB, so the content is cut at each.
  const DevicePtr other = map_handles(*device, 50, 2 * kGiB);
  device->copy_h2d_async(other, pinned, kBig, stream);
  device->synchronize_stream(stream);
  CHECK(device->digest(other, kBig) == original);
  CHECK(device->digest(other + 10 * kGiB, 20 * kGiB) == device->digest(va + 10 * kGiB, 20 * kGiB));

  // The bytes are the kernel's, the memset's and the copy's, read out exactly.
  const std::uint64_t seed = sim_write_seed(42, 0, {});
  CHECK(same_bytes(read_back(*device, other + 3 * kGiB - 8, 16), generated(seed, 16, 3 * kGiB - 8)));
  CHECK(same_bytes(read_back(*device, other + 7 * kGiB + 3, 8), std::vector<std::uint8_t>(8, 0xA5)));
  CHECK(same_bytes(read_back(*device, other + 50 * kGiB + 1, 64), generated(seed, 64, 90 * kGiB)));

  // What it cost: a few runs per handle, not bytes.
  const SimCounters counters = device->counters();
  INFO("runs: " << counters.content_runs << ", resident growth: " << (resident_bytes() - before) / kMiB << " MiB");
  CHECK(counters.content_runs < 500);
  CHECK(resident_bytes() < before + 64 * kMiB);
  device->check_invariants();
  device->free_pinned(pinned);
}

TEST_CASE("read() of generated content is the byte function, in bytes and digest modes", "[sim][content]") {
  const SimContent mode = GENERATE(SimContent::bytes, SimContent::digest);
  auto device = make_sim(mode);
  const DevicePtr va = map_handles(*device, 3);
  // A write range that starts off a word boundary and straddles two handles.
  const SimRange out{va + kPage - 1001, 5000};
  device->launch(kernel(9, {}, {out}), 0);
  device->synchronize();
  const std::uint64_t seed = sim_write_seed(9, 0, {});
  CHECK(same_bytes(read_back(*device, out.ptr, out.bytes), generated(seed, out.bytes)));
  CHECK(same_bytes(read_back(*device, out.ptr + 13, 77), generated(seed, 77, 13)));
  // The bytes around it are untouched (fresh memory reads as zeros in both modes).
  CHECK(read_back(*device, out.ptr - 1, 1)[0] == 0);
  CHECK(read_back(*device, out.ptr + out.bytes, 1)[0] == 0);
  device->check_invariants();
}

TEST_CASE("digest mode and bytes mode hold the same bytes after the same operations", "[sim][content][digest]") {
  auto bytes = make_sim(SimContent::bytes);
  auto digest = make_sim(SimContent::digest);
  constexpr std::size_t kRegion = 3 * kPage;
  const DevicePtr va = map_handles(*bytes, 3);
  REQUIRE(map_handles(*digest, 3) == va);  // same layout, same addresses
  void* pinned_bytes = bytes->alloc_pinned(kRegion);
  void* pinned_digest = digest->alloc_pinned(kRegion);
  std::mt19937_64 rng(7);
  auto offset = [&](std::size_t limit) { return rng() % limit; };

  for (int step = 0; step < 300; ++step) {
    const std::size_t length = 1 + offset(rng() % 4 == 0 ? kMiB : 4096);
    const DevicePtr at = va + offset(kRegion - length);
    const DevicePtr from = va + offset(kRegion - length);
    INFO("step " << step << " length " << length);
    switch (rng() % 7) {
      case 0: {
        const auto data = random_bytes(rng, length);
        bytes->write(at, data);
        digest->write(at, data);
        break;
      }
      case 1: {
        const auto value = static_cast<std::uint8_t>(rng());
        bytes->memset_async(at, value, length, 0);
        digest->memset_async(at, value, length, 0);
        break;
      }
      case 2:  // may overlap: behaves like memmove in both
        bytes->copy_d2d_async(at, from, length, 0);
        digest->copy_d2d_async(at, from, length, 0);
        break;
      case 3: {  // no reads: the same seed, so the same bytes in both modes
        const std::uint64_t seed = 1 + rng() % 5;
        bytes->launch(kernel(seed, {}, {{at, length}}), 0);
        digest->launch(kernel(seed, {}, {{at, length}}), 0);
        break;
      }
      case 4: {  // pageable host memory: real bytes in and out of both
        const auto data = random_bytes(rng, length);
        bytes->copy_h2d_async(at, data.data(), length, 0);
        digest->copy_h2d_async(at, data.data(), length, 0);
        std::vector<std::uint8_t> out_bytes(length), out_digest(length);
        bytes->copy_d2h_async(out_bytes.data(), from, length, 0);
        digest->copy_d2h_async(out_digest.data(), from, length, 0);
        CHECK(same_bytes(out_digest, out_bytes));
        break;
      }
      case 5: {  // through pinned memory, symbolic in digest mode
        const std::size_t host = offset(kRegion - length);
        bytes->copy_d2h_async(static_cast<std::uint8_t*>(pinned_bytes) + host, from, length, 0);
        digest->copy_d2h_async(static_cast<std::uint8_t*>(pinned_digest) + host, from, length, 0);
        const DevicePtr back = va + offset(kRegion - length);
        bytes->copy_h2d_async(back, static_cast<std::uint8_t*>(pinned_bytes) + host, length, 0);
        digest->copy_h2d_async(back, static_cast<std::uint8_t*>(pinned_digest) + host, length, 0);
        break;
      }
      default: {
        bytes->synchronize();
        digest->synchronize();
        CHECK(same_bytes(read_back(*digest, at, length), read_back(*bytes, at, length)));
      }
    }
    bytes->synchronize();
    digest->synchronize();
    digest->check_invariants();
  }
  CHECK(same_bytes(read_back(*digest, va, kRegion), read_back(*bytes, va, kRegion)));
  INFO("runs after 300 operations: " << digest->counters().content_runs);
  CHECK(digest->counters().content_runs < 3000);
  bytes->free_pinned(pinned_bytes);
  digest->free_pinned(pinned_digest);
}

TEST_CASE("digest() depends on the content, not on where it lives or how it is cut", "[sim][content][digest]") {
  const SimContent mode = GENERATE(SimContent::bytes, SimContent::digest);
  auto device = make_sim(mode);
  const DevicePtr one = map_handles(*device, 1, 2 * kPage);  // one handle
  const DevicePtr two = map_handles(*device, 2);             // the same length in two handles
  std::mt19937_64 rng(3);

  // Generated content: one run in `one`, cut in two at the handle boundary in `two`.
  device->launch(kernel(5, {}, {{one, 2 * kPage}}), 0);
  device->copy_d2d_async(two, one, 2 * kPage, 0);
  device->synchronize();
  CHECK(device->digest(one, 2 * kPage) == device->digest(two, 2 * kPage));
  CHECK(device->digest(one + 100, 3 * kMiB) == device->digest(two + 100, 3 * kMiB));
  // Copied in pieces, in a jumbled order, it is still the same content.
  const DevicePtr pieces = map_handles(*device, 2);
  for (const std::size_t at : {3 * kMiB, std::size_t{0}, kMiB + 5, std::size_t{4096}}) {
    const std::size_t end = at == 3 * kMiB ? 2 * kPage : at == 0 ? 4096 : at == 4096 ? kMiB + 5 : 3 * kMiB;
    device->copy_d2d_async(pieces + at, one + at, end - at, 0);
  }
  device->synchronize();
  CHECK(device->digest(pieces, 2 * kPage) == device->digest(one, 2 * kPage));

  // Literal bytes written in one piece or in many hash alike.
  const auto data = random_bytes(rng, 100'000);
  device->write(one, data);
  for (std::size_t at = 0; at < data.size(); at += 9'999) {
    const std::size_t length = std::min<std::size_t>(9'999, data.size() - at);
    device->write(two + kPage - 50'000 + at, std::span(data).subspan(at, length));
  }
  CHECK(device->digest(one, data.size()) == device->digest(two + kPage - 50'000, data.size()));

  // Different content hashes differently: one byte, one byte more, a shift.
  const std::uint64_t reference = device->digest(one, data.size());
  CHECK(device->digest(one, data.size() - 1) != reference);
  CHECK(device->digest(one + 1, data.size()) != reference);
  auto changed = data;
  changed[54'321] ^= 1;
  device->write(two, changed);
  CHECK(device->digest(two, data.size()) != reference);
  // Zeros and an empty range are content too.
  CHECK(device->digest(one, 0) == device->digest(two, 0));
  device->memset_async(one, 0, 64, 0);
  device->synchronize();
  CHECK(device->digest(one, 64) != device->digest(one, 65));
  device->check_invariants();
}

TEST_CASE("host-written bytes hash the same in bytes and digest modes", "[sim][content][digest]") {
  auto bytes = make_sim(SimContent::bytes);
  auto digest = make_sim(SimContent::digest);
  const DevicePtr va = map_handles(*bytes, 2);
  REQUIRE(map_handles(*digest, 2) == va);
  std::mt19937_64 rng(11);
  const auto data = random_bytes(rng, kPage + 12345);
  bytes->write(va + 17, data);
  digest->write(va + 17, data);
  CHECK(bytes->digest(va + 17, data.size()) == digest->digest(va + 17, data.size()));
}

TEST_CASE("deterministic kernels: equal inputs give equal outputs, any change another", "[sim][content][kernel]") {
  const SimContent mode = GENERATE(SimContent::bytes, SimContent::digest);
  INFO("mode " << static_cast<int>(mode));
  auto device = make_sim(mode);
  const DevicePtr va = map_handles(*device, 4);
  const SimRange a{va, 10'000}, b{va + kPage - 3000, 6000}, a_copy{va + 3 * kPage, 10'000};
  const SimRange out1{va + kPage + 10'000, 50'000}, out2{va + 2 * kPage, 50'000};
  std::mt19937_64 rng(5);
  device->write(a.ptr, random_bytes(rng, a.bytes));
  device->write(b.ptr, random_bytes(rng, b.bytes));
  auto run = [&](const SimLaunch& launch, SimRange out) {
    device->launch(launch, 0);
    device->synchronize();
    return device->digest(out.ptr, out.bytes);
  };

  const std::uint64_t first = run(kernel(7, {a, b}, {out1}), out1);
  CHECK(run(kernel(7, {a, b}, {out2}), out2) == first);            // same inputs, elsewhere
  CHECK(run(kernel(8, {a, b}, {out2}), out2) != first);            // another seed
  CHECK(run(kernel(7, {b, a}, {out2}), out2) != first);            // inputs in another order
  CHECK(run(kernel(7, {a}, {out2}), out2) != first);               // one input fewer
  CHECK(run(kernel(7, {a, b, a}, {out2}), out2) != first);         // one input more
  device->copy_d2d_async(a_copy.ptr, a.ptr, a.bytes, 0);
  CHECK(run(kernel(7, {a_copy, b}, {out2}), out2) == first);       // an equal input elsewhere
  const std::uint8_t flip = read_back(*device, b.ptr + 4321, 1)[0] ^ 0x10;
  device->write(b.ptr + 4321, std::span(&flip, 1));
  CHECK(run(kernel(7, {a, b}, {out2}), out2) != first);            // one input byte differs
  // Each write range gets its own content.
  device->launch(kernel(7, {a}, {out1, out2}), 0);
  device->synchronize();
  CHECK(device->digest(out1.ptr, out1.bytes) != device->digest(out2.ptr, out2.bytes));

  // Read-modify-write: a range in both lists is read before it is written.
  const std::uint64_t a_before = device->digest(a.ptr, a.bytes);
  device->copy_d2d_async(a_copy.ptr, a.ptr, a.bytes, 0);
  device->launch(kernel(3, {a}, {a}), 0);
  device->launch(kernel(3, {a_copy}, {out1}), 0);
  device->synchronize();
  CHECK(device->digest(a.ptr, a.bytes) != a_before);
  CHECK(same_bytes(read_back(*device, a.ptr, a.bytes), read_back(*device, out1.ptr, a.bytes)));
  // ...by the documented rule: seeded with the digest the launch read.
  const std::vector<std::uint64_t> read_digests{a_before};
  CHECK(same_bytes(read_back(*device, a.ptr, 512), generated(sim_write_seed(3, 0, read_digests), 512)));

  // Seed 0: no effect on the data.
  const std::uint64_t out1_before = device->digest(out1.ptr, out1.bytes);
  device->launch(SimLaunch{"timing only", 1000, {a}, {out1}}, 0);
  device->synchronize();
  CHECK(device->digest(out1.ptr, out1.bytes) == out1_before);
  device->check_invariants();
}

TEST_CASE("without content a seeded kernel still runs, and digest() is refused", "[sim][content]") {
  auto device = make_sim(SimContent::none);
  const DevicePtr va = map_handles(*device, 1);
  device->launch(kernel(1, {{va, 100}}, {{va + 100, 100}}), 0);
  CHECK(device->counters().kernels == 1);
  device->synchronize();
  const DeviceError error = error_of([&] { device->digest(va, 100); });
  CHECK(error.code() == DeviceErrc::invalid_value);
  CHECK_THAT(std::string(error.what()), Catch::Contains("digest") && Catch::Contains("not backed"));
  // back_memory = false is the older spelling of SimContent::none, whatever `content` says.
  SimOptions options;
  options.content = SimContent::digest;
  options.back_memory = false;
  CHECK(as_sim(make_sim_device(options).get())->content() == SimContent::none);
}

TEST_CASE("digest() checks its range like read()", "[sim][content]") {
  auto device = make_sim(SimContent::digest);
  const DevicePtr va = map_handles(*device, 1);
  const DeviceError error = error_of([&] { device->digest(va + kPage - 8, 16); });
  CHECK(error.code() == DeviceErrc::not_mapped);
  CHECK_THAT(std::string(error.what()), Catch::Contains("digest") && Catch::Contains("offset 8"));
}

TEST_CASE("count mode: a launch on unmapped memory runs, is counted, reads poison, drops writes", "[sim][content][unmapped]") {
  const SimContent mode = GENERATE(SimContent::bytes, SimContent::digest);
  INFO("mode " << static_cast<int>(mode));
  // Two devices with the same layout: one where the input's second page is unmapped, one where
  // it is mapped (fresh, as the unmapped one would have been had it been mapped).
  auto counting = make_sim(mode, 256 * kMiB, SimUnmapped::count);
  auto whole = make_sim(mode, 256 * kMiB, SimUnmapped::count);
  DevicePtr input = 0, out = 0;
  for (SimDevice* device : {counting.get(), whole.get()}) {
    input = device->reserve(2 * kPage);
    device->map(input, kPage, device->create_physical(kPage));
    if (device == whole.get()) device->map(input + kPage, kPage, device->create_physical(kPage));
    out = map_handles(*device, 1);
  }
  const SimLaunch reader = kernel(4, {{input + kPage - 100, 200}}, {{out, 4096}});
  counting->launch(reader, 0);
  whole->launch(reader, 0);
  counting->synchronize();
  whole->synchronize();
  CHECK(counting->counters().unmapped_accesses == 1);
  CHECK(whole->counters().unmapped_accesses == 0);
  CHECK(counting->counters().kernels == 1);
  // The poisoned run computed something else than the correct one.
  CHECK(counting->digest(out, 4096) != whole->digest(out, 4096));

  // Writes: the mapped part gets its bytes, the unmapped part goes nowhere.
  const SimRange straddling{input + kPage - 64, 128};
  counting->launch(kernel(6, {}, {straddling}), 0);
  counting->synchronize();
  CHECK(counting->counters().unmapped_accesses == 2);
  CHECK(same_bytes(read_back(*counting, straddling.ptr, 64), generated(sim_write_seed(6, 0, {}), 64)));

  // Copies, memsets and host access stay strict.
  std::vector<std::uint8_t> host(128);
  CHECK(error_of([&] { counting->copy_d2h_async(host.data(), straddling.ptr, 128, 0); }).code() == DeviceErrc::not_mapped);
  CHECK(error_of([&] { counting->memset_async(straddling.ptr, 0, 128, 0); }).code() == DeviceErrc::not_mapped);
  CHECK(error_of([&] { counting->read(straddling.ptr, host); }).code() == DeviceErrc::not_mapped);
  CHECK(counting->counters().unmapped_accesses == 2);

  // The default refuses the launch and counts nothing.
  auto strict = make_sim(mode);
  const DevicePtr half = strict->reserve(2 * kPage);
  strict->map(half, kPage, strict->create_physical(kPage));
  CHECK(error_of([&] { strict->launch(kernel(4, {{half + kPage - 100, 200}}, {}), 0); }).code() == DeviceErrc::not_mapped);
  CHECK(strict->counters().unmapped_accesses == 0);
  CHECK(strict->counters().kernels == 0);
}

TEST_CASE("digest mode: pinned memory is symbolic and faults on host access; pageable memory is real",
          "[sim][content][pinned]") {
  auto device = make_sim(SimContent::digest);
  const DevicePtr va = map_handles(*device, 1);
  std::mt19937_64 rng(2);
  const auto data = random_bytes(rng, 10'000);
  device->copy_h2d_async(va, data.data(), data.size(), 0);  // absorbed from pageable memory
  auto* pinned = static_cast<std::uint8_t*>(device->alloc_pinned(20'000));
  device->copy_d2h_async(pinned + 5000, va, data.size(), 0);
  device->copy_h2d_async(va + 50'000, pinned + 5000, data.size(), 0);
  std::vector<std::uint8_t> out(data.size());
  device->copy_d2h_async(out.data(), va + 50'000, out.size(), 0);  // materialised into pageable memory
  CHECK(same_bytes(out, data));
  CHECK(device->counters().bytes_d2h == 2 * data.size());

  // A host range that reaches into a pinned block without lying inside it is refused.
  const DeviceError error = error_of([&] { device->copy_d2h_async(pinned + 19'000, va, 4096, 0); });
  CHECK(error.code() == DeviceErrc::invalid_value);
  CHECK_THAT(std::string(error.what()), Catch::Contains("copy_d2h_async") && Catch::Contains("pinned"));

  // The host cannot touch pinned memory: reading it kills a child process, while reading an
  // ordinary buffer does not.
  auto child_reads = [](const volatile std::uint8_t* address) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      // The default action, not the test framework's (or a sanitizer's) handler.
      ::signal(SIGSEGV, SIG_DFL);
      ::signal(SIGBUS, SIG_DFL);
      const std::uint8_t value = *address;
      ::_exit(value == 0x77 ? 3 : 0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  };
  const int faulted = child_reads(pinned + 100);
  CHECK((WIFSIGNALED(faulted) || (WIFEXITED(faulted) && WEXITSTATUS(faulted) != 0 && WEXITSTATUS(faulted) != 3)));
  const int fine = child_reads(out.data());
  CHECK((WIFEXITED(fine) && (WEXITSTATUS(fine) == 0 || WEXITSTATUS(fine) == 3)));
  device->free_pinned(pinned);
  device->check_invariants();
}

TEST_CASE("symbolic content matches a byte model and keeps its invariants", "[sim][content][runs]") {
  constexpr std::uint64_t kSize = 1 << 16;
  sim::SymbolicContent content(kSize);
  std::vector<std::uint8_t> model(kSize, 0);
  std::mt19937_64 rng(17);
  auto check = [&] {
    content.check_invariants("the test content");
    std::vector<std::uint8_t> bytes(kSize);
    content.materialise(0, kSize, bytes.data());
    REQUIRE(same_bytes(bytes, model));
  };
  check();
  for (int step = 0; step < 2000; ++step) {
    const std::uint64_t length = 1 + rng() % (rng() % 8 == 0 ? kSize / 2 : 300);
    const std::uint64_t at = rng() % (kSize - length + 1);
    switch (rng() % 4) {
      case 0: {
        const auto value = static_cast<std::uint8_t>(rng() % 3);  // few values: fills meet and join
        content.assign(at, {sim::Run::fill(value, length)});
        std::fill_n(model.begin() + at, length, value);
        break;
      }
      case 1: {
        const std::uint64_t seed = rng() % 2, base = rng() % 1000;
        content.assign(at, {sim::Run::generated(seed, base, length)});
        for (std::uint64_t i = 0; i < length; ++i) model[at + i] = sim_generated_byte(seed, base + i);
        break;
      }
      case 2: {
        auto bytes = std::make_shared<const std::vector<std::uint8_t>>(random_bytes(rng, length + 10));
        content.assign(at, {sim::Run::literal(bytes, 5, length)});
        std::copy_n(bytes->begin() + 5, length, model.begin() + at);
        break;
      }
      default: {  // a move within, overlapping or not, in pieces as a copy across handles cuts it
        const std::uint64_t from = rng() % (kSize - length + 1);
        const sim::Runs runs = content.extract(from, length);
        const std::uint64_t cut = rng() % (length + 1);
        sim::RunCursor cursor(runs);
        const sim::Runs head = cursor.take(cut), tail = cursor.take(length - cut);
        content.assign(at, head);
        content.assign(at + cut, tail);
        std::vector<std::uint8_t> moved(model.begin() + from, model.begin() + from + length);
        std::copy(moved.begin(), moved.end(), model.begin() + at);
      }
    }
    if (step % 50 == 0) check();
  }
  check();
  // Moving content back where it came from joins the pieces again.
  sim::SymbolicContent joined(kSize);
  joined.assign(0, {sim::Run::generated(9, 0, kSize)});
  const sim::Runs all = joined.extract(0, kSize);
  joined.assign(0, sim::Runs{all[0].slice(0, 100)});
  joined.assign(100, sim::Runs{all[0].slice(100, kSize - 100)});
  CHECK(joined.run_count() == 1);
}

TEST_CASE("hashing joins runs that continue each other", "[sim][content][runs]") {
  auto hash = [](const sim::Runs& runs) {
    sim::ContentHasher hasher;
    for (const sim::Run& run : runs) run.hash_into(hasher);
    return hasher.finish();
  };
  auto bytes = std::make_shared<const std::vector<std::uint8_t>>(std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6});
  auto other = std::make_shared<const std::vector<std::uint8_t>>(std::vector<std::uint8_t>{4, 5, 6});
  CHECK(hash({sim::Run::generated(1, 10, 100)}) ==
        hash({sim::Run::generated(1, 10, 30), sim::Run::generated(1, 40, 70)}));
  CHECK(hash({sim::Run::generated(1, 10, 100)}) !=
        hash({sim::Run::generated(1, 10, 30), sim::Run::generated(1, 41, 70)}));
  CHECK(hash({sim::Run::fill(3, 10)}) == hash({sim::Run::fill(3, 4), sim::Run::fill(3, 6)}));
  CHECK(hash({sim::Run::fill(3, 10)}) != hash({sim::Run::fill(3, 4), sim::Run::fill(4, 6)}));
  // Literal bytes hash as bytes, whichever buffers hold them.
  CHECK(hash({sim::Run::literal(bytes, 0, 6)}) == hash({sim::Run::literal(bytes, 0, 3), sim::Run::literal(other, 0, 3)}));
  CHECK(hash({sim::Run::literal(bytes, 0, 6)}) != hash({sim::Run::literal(bytes, 0, 5)}));
}
