// The GPU launch route's parameter handling on fake parameter buffers: which words point into
// DELTA's blocks (both ways of passing parameters, words at offsets a kernel sees as aligned,
// pointers into the middle of blocks), copying them, and patching a copy for a replay without
// touching any other byte.
#include "executor/routes/cuda_params.hpp"

#include <cuda.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <map>

using namespace delta;
using namespace delta::executor;

namespace {

constexpr DevicePtr kA = 0x7f0000000000;  // block A: 4 KiB
constexpr DevicePtr kB = 0x7f0000200000;  // block B: 2 MiB
constexpr DevicePtr kForeign = 0x7f0000100000;  // between them: not DELTA's

BlockLookup fake_blocks() {
  static const std::map<DevicePtr, std::size_t> blocks{{kA, 4096}, {kB, 2u << 20}};
  return [](DevicePtr p) -> std::optional<std::pair<DevicePtr, std::size_t>> {
    auto it = blocks.upper_bound(p);
    if (it == blocks.begin()) return std::nullopt;
    --it;
    if (p >= it->first + it->second) return std::nullopt;
    return *it;
  };
}

// A kernel(int n, float* a, struct {int k; float* b; float* c;} s, long foreign, struct {float* d;} t)
// whose struct s starts at offset 12 (packed after two ints): its pointers sit at 16 and 24 of
// the param buffer, aligned as the kernel sees them; t at 32 with B's middle in it.
struct Fake {
  ParamLayout layout{{0, 4}, {4, 4}, {8, 4}, {12, 20}, {32, 8}, {40, 8}};
  std::int32_t n = 7, m = 9, pad = 0x5a5a5a5a;
  std::byte s[20] = {};
  std::uint64_t foreign = kForeign + 64;
  std::uint64_t t = kB + 1000;  // into the middle of B
  std::vector<void*> args;
  std::vector<std::byte> packed;

  Fake() {
    const std::uint32_t k = 0xdeadbeef;
    const std::uint64_t b = kA, c = kA + 4088;  // A's first and last word
    std::memcpy(s, &k, 4);
    std::memcpy(s + 4, &b, 8);
    std::memcpy(s + 12, &c, 8);
    args = {&n, &m, &pad, s, &foreign, &t};
    packed.assign(48, std::byte{0});
    for (std::size_t i = 0; i < layout.size(); ++i) std::memcpy(packed.data() + layout[i].offset, args[i], layout[i].size);
  }
};

}  // namespace

TEST_CASE("pointer words are found in kernelParams by the layout, and in a packed extra buffer alike", "[cuda_route]") {
  Fake f;
  FoundPointers by_args, by_extra;
  REQUIRE(find_block_pointers({&f.layout, f.args.data(), nullptr}, fake_blocks(), by_args));
  std::size_t size = f.packed.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, f.packed.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  REQUIRE(find_block_pointers({nullptr, nullptr, extra}, fake_blocks(), by_extra));
  CHECK(by_args.offsets == std::vector<std::size_t>{16, 24, 40});
  CHECK(by_extra.offsets == by_args.offsets);
  REQUIRE(by_args.ranges.size() == 3);
  CHECK(by_args.ranges[0].ptr == kA);
  CHECK(by_args.ranges[0].bytes == 4096);
  CHECK(by_args.ranges[1].ptr == kA + 4088);  // an interior pointer: the range runs to the block's end
  CHECK(by_args.ranges[1].bytes == 8);
  CHECK(by_args.ranges[2].ptr == kB + 1000);
  CHECK(by_args.ranges[2].bytes == (2u << 20) - 1000);
  for (const LaunchRange& r : by_args.ranges) CHECK((r.read && r.write));  // offsets say nothing of direction
}

TEST_CASE("a word the kernel sees unaligned is no pointer", "[cuda_route]") {
  // A struct at offset 4 whose first 8 bytes hold A's address: buffer offset 4, not a word.
  ParamLayout layout{{0, 4}, {4, 12}};
  std::int32_t n = 1;
  std::byte s[12] = {};
  const std::uint64_t a = kA;
  std::memcpy(s, &a, 8);
  void* args[] = {&n, s};
  FoundPointers found;
  REQUIRE(find_block_pointers({&layout, args, nullptr}, fake_blocks(), found));
  CHECK(found.ranges.empty());
}

TEST_CASE("kernelParams without a layout cannot be read; no parameters at all read as none", "[cuda_route]") {
  Fake f;
  FoundPointers found;
  CHECK_FALSE(find_block_pointers({nullptr, f.args.data(), nullptr}, fake_blocks(), found));
  CHECK_FALSE(copy_params({nullptr, f.args.data(), nullptr}, {}).has_value());
  void* no_buffer[] = {CU_LAUNCH_PARAM_END};
  CHECK_FALSE(find_block_pointers({nullptr, nullptr, no_buffer}, fake_blocks(), found));
  CHECK(find_block_pointers({nullptr, nullptr, nullptr}, fake_blocks(), found));
  CHECK(found.ranges.empty());
}

TEST_CASE("a copy patched for a replay changes the pointer words and no other byte, either way", "[cuda_route]") {
  Fake f;
  FoundPointers found;
  REQUIRE(find_block_pointers({&f.layout, f.args.data(), nullptr}, fake_blocks(), found));
  std::size_t size = f.packed.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, f.packed.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  for (const bool via_extra : {false, true}) {
    INFO("via extra: " << via_extra);
    const ParamSource source = via_extra ? ParamSource{nullptr, nullptr, extra} : ParamSource{&f.layout, f.args.data(), nullptr};
    const std::optional<ParamCopy> copy = copy_params(source, found.offsets);
    REQUIRE(copy);
    CHECK(copy->via_extra == via_extra);
    CHECK(copy->bytes == f.packed);  // the copy is the packed buffer, byte for byte
    // The caller's buffers may change after the launch: the copy does not.
    f.n = 1000;
    f.packed[0] = std::byte{0xff};
    const DevicePtr moved_a = 0x7e0000000000, scratch = 0x7d0000000000;
    const std::vector<DevicePtr> ptrs{moved_a, moved_a + 4088, scratch + 1000};
    PatchedParams patched(*copy, ptrs);
    const std::span<const std::byte> bytes = patched.bytes();
    REQUIRE(bytes.size() == 48);
    for (std::size_t i = 0; i < 3; ++i) {
      std::uint64_t word;
      std::memcpy(&word, bytes.data() + found.offsets[i], 8);
      CHECK(word == ptrs[i]);
    }
    std::vector<std::byte> expected = copy->bytes;
    for (std::size_t i = 0; i < 3; ++i) std::memcpy(expected.data() + found.offsets[i], &ptrs[i], 8);
    CHECK(std::equal(bytes.begin(), bytes.end(), expected.begin()));
    std::uint64_t foreign;
    std::memcpy(&foreign, bytes.data() + 32, 8);
    CHECK(foreign == kForeign + 64);  // not DELTA's: untouched
    if (via_extra) {
      CHECK(patched.kernel_params() == nullptr);
      void** e = patched.extra();
      REQUIRE(e != nullptr);
      CHECK(e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER);
      CHECK(e[1] == bytes.data());
      CHECK(e[2] == CU_LAUNCH_PARAM_BUFFER_SIZE);
      CHECK(*static_cast<std::size_t*>(e[3]) == 48);
      CHECK(e[4] == CU_LAUNCH_PARAM_END);
    } else {
      CHECK(patched.extra() == nullptr);
      void** args = patched.kernel_params();
      REQUIRE(args != nullptr);
      for (std::size_t i = 0; i < f.layout.size(); ++i) CHECK(args[i] == bytes.data() + f.layout[i].offset);
      std::int32_t n;
      std::memcpy(&n, args[0], 4);
      CHECK(n == 7);  // the value at launch time
    }
    f.n = 7;
    f.packed[0] = copy->bytes[0];
  }
}

TEST_CASE("misuse is refused with a message naming the place", "[cuda_route]") {
  Fake f;
  const std::optional<ParamCopy> copy = copy_params({&f.layout, f.args.data(), nullptr}, {16});
  REQUIRE(copy);
  const std::vector<DevicePtr> two{1, 2};
  CHECK_THROWS_WITH(PatchedParams(*copy, two), Catch::Contains("2 addresses for 1 pointer words"));
  CHECK_THROWS_WITH(copy_params({&f.layout, f.args.data(), nullptr}, {44}), Catch::Contains("offset 44"));
  std::vector<void*> holes = f.args;
  holes[1] = nullptr;
  CHECK_THROWS_WITH(copy_params({&f.layout, holes.data(), nullptr}, {}), Catch::Contains("kernelParams[1] is NULL"));
}
