// Every allocator option's parsing, including the bad values.
#include "allocator/config.hpp"
#include "allocator/structures/size_classes.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>

using namespace delta;

TEST_CASE("PyTorch's options are parsed") {
  AllocatorConfig c;
  auto ignored = apply_alloc_conf(
      "max_split_size_mb:128, garbage_collection_threshold:0.6,roundup_power2_divisions:[256:1,512:2,>:8],"
      "expandable_segments:True,backend:native",
      c);
  CHECK(c.max_split_size == 128u << 20);
  CHECK(c.garbage_collection_threshold == Approx(0.6));
  CHECK(c.roundup_power2_divisions[8] == 1);   // 256 MiB interval
  CHECK(c.roundup_power2_divisions[9] == 2);   // 512 MiB interval
  CHECK(c.roundup_power2_divisions[10] == 8);  // beyond: ">"
  CHECK(c.roundup_power2_divisions[15] == 8);
  CHECK(c.roundup_power2_divisions[0] == 0);
  CHECK(ignored == std::vector<std::string>{"expandable_segments", "backend"});

  AllocatorConfig d;
  apply_alloc_conf("roundup_power2_divisions:4,per_process_memory_fraction:0.5", d);
  for (auto v : d.roundup_power2_divisions) CHECK(v == 4);
  CHECK(d.memory_fraction == 0.5);
  AllocatorConfig e;
  apply_alloc_conf("", e);
  CHECK(e.max_split_size == SIZE_MAX);
}

TEST_CASE("malformed options name the option and the value") {
  struct Case { const char* text; const char* says; };
  Case cases[] = {
      {"max_split_size_mb:abc", "max_split_size_mb"},
      {"max_split_size_mb:0.5", "at least 1"},
      {"max_split_size_mb", "has no value"},
      {"garbage_collection_threshold:1.5", "strictly between 0 and 1"},
      {"garbage_collection_threshold:0", "strictly between 0 and 1"},
      {"garbage_collection_threshold:nan", "garbage_collection_threshold"},
      {"roundup_power2_divisions:3", "power of 2"},
      {"roundup_power2_divisions:[256:3]", "power of 2"},
      {"roundup_power2_divisions:[300:2]", "powers of 2"},
      {"roundup_power2_divisions:[256:2", "missing ']'"},
      {"max_split_size_mb:64]", "expected a number"},
      {"roundup_power2_divisions:[256]", "size_mb:divisions"},
      {"expandable_segments:maybe", "True or False"},
      {"backend:magic", "native or cudaMallocAsync"},
      {"per_process_memory_fraction:2", "(0, 1]"},
      {"no_such_option:1", "unknown allocator option 'no_such_option'"},
      {"roundup_power2_divisions:36028797018963968", "at most"},  // 2^55: the size arithmetic would overflow
      {"roundup_power2_divisions:[]", "empty list"},
      {"release_lock_on_cudamalloc:maybe", "True or False"},
      {"pinned_use_background_threads:1", "True or False"},
      {"pinned_num_register_threads:abc", "non-negative integer"},
      {"pinned_num_register_threads:3", "power of 2"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    AllocatorConfig config;
    CHECK_THROWS_WITH(apply_alloc_conf(c.text, config), Catch::Contains(c.says));
  }
}

TEST_CASE("a max_split_size_mb past what a size holds means no limit, as PyTorch clamps it") {
  for (const char* huge : {"max_split_size_mb:99999999999999999999", "max_split_size_mb:1e300", "max_split_size_mb:17592186044416"}) {
    INFO(huge);
    AllocatorConfig c;
    apply_alloc_conf(huge, c);
    CHECK(c.max_split_size == SIZE_MAX);  // not 0, which would mean never split
  }
  AllocatorConfig c;
  apply_alloc_conf("max_split_size_mb:17592186044415", c);  // the largest that fits: kept as asked
  CHECK(c.max_split_size == std::size_t{17592186044415} << 20);
}

TEST_CASE("the ignored PyTorch options are still checked") {
  AllocatorConfig c;
  auto ignored = apply_alloc_conf("release_lock_on_cudamalloc:True,pinned_num_register_threads:8,"
                                  "pinned_use_cuda_host_register:false,graph_capture_record_stream_reuse:False",
                                  c);
  CHECK(ignored.size() == 4);
  AllocatorConfig d;
  apply_alloc_conf("roundup_power2_divisions:1073741824", d);  // the most divisions allowed
  CHECK(d.roundup_power2_divisions[0] == std::size_t{1} << 30);
}

TEST_CASE("byte sizes accept units and reject garbage") {
  CHECK(parse_byte_size("5T", "X") == 5ull << 40);
  CHECK(parse_byte_size("4096", "X") == 4096);
  CHECK(parse_byte_size("64MiB", "X") == 64u << 20);
  CHECK(parse_byte_size("1.5 GiB", "X") == 3u << 29);
  CHECK(parse_byte_size("2GB", "X") == 2'000'000'000u);
  CHECK_THROWS_WITH(parse_byte_size("12 parsecs", "DELTA_MEMORY_LIMIT"), Catch::Contains("DELTA_MEMORY_LIMIT"));
  CHECK_THROWS_WITH(parse_byte_size("", "X"), Catch::Contains("expected a number"));
  CHECK_THROWS_WITH(parse_byte_size("-5MB", "X"), Catch::Contains("expected a number"));
  CHECK_THROWS_WITH(parse_byte_size("99999999999TiB", "X"), Catch::Contains("too large"));
}

TEST_CASE("the environment is read with the newer variable first") {
  ::setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:64", 1);
  ::setenv("DELTA_MEMORY_LIMIT", "10GiB", 1);
  ::setenv("DELTA_EVENT_LOG", "128", 1);
  AllocatorConfig c = config_from_env();
  CHECK(c.max_split_size == 64u << 20);
  CHECK(c.hard_limit_bytes == 10ull << 30);
  CHECK(c.event_log_capacity == 128);
  ::setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:32", 1);
  CHECK(config_from_env().max_split_size == 32u << 20);
  ::setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:-3", 1);
  CHECK_THROWS_WITH(config_from_env(), Catch::Contains("PYTORCH_ALLOC_CONF"));
  ::unsetenv("PYTORCH_ALLOC_CONF");
  ::setenv("DELTA_MEMORY_FRACTION", "1.2", 1);
  CHECK_THROWS_WITH(config_from_env(), Catch::Contains("DELTA_MEMORY_FRACTION"));
  ::unsetenv("DELTA_MEMORY_FRACTION");
  ::setenv("DELTA_EVENT_LOG", "lots", 1);
  CHECK_THROWS_WITH(config_from_env(), Catch::Contains("DELTA_EVENT_LOG"));
  ::setenv("DELTA_EVENT_LOG", "100000000000000", 1);  // a ring of petabytes: refused before it is made
  CHECK_THROWS_WITH(config_from_env(), Catch::Contains("DELTA_EVENT_LOG") && Catch::Contains("at most"));
  ::unsetenv("DELTA_EVENT_LOG");
  for (const char* nothing : {"0", "0GiB", "0.5"}) {  // 0 would mean no limit; 0.5 reads as half a byte
    INFO(nothing);
    ::setenv("DELTA_MEMORY_LIMIT", nothing, 1);
    CHECK_THROWS_WITH(config_from_env(), Catch::Contains("DELTA_MEMORY_LIMIT") && Catch::Contains("DELTA_MEMORY_FRACTION"));
  }
  ::unsetenv("DELTA_EVENT_LOG");
  ::unsetenv("DELTA_MEMORY_LIMIT");
  ::unsetenv("PYTORCH_CUDA_ALLOC_CONF");
}

TEST_CASE("rounding matches PyTorch's round_size") {
  std::vector<std::size_t> off(16, 0), four(16, 4);
  CHECK(round_size(1, off) == 512);
  CHECK(round_size(512, off) == 512);
  CHECK(round_size(513, off) == 1024);
  CHECK(round_size(1536, four) == 1536);  // not above 512 * 4: plain rounding
  CHECK(round_size(3000, four) == 3072);  // [2048, 4096) in steps of 512
  CHECK(round_size((1 << 20) + 1, four) == (1 << 20) + (1 << 18));
  CHECK(round_size(1 << 30, four) == 1u << 30);
  CHECK(roundup_power2_next_division(1000, 2) == 1024);
}
