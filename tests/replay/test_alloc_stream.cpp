// Reading alloc streams: valid input, and hostile input that must fail with a clear message.
#include "replay/alloc_stream.hpp"

#include <catch2/catch.hpp>

#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

using namespace delta::replay;

namespace {

std::string with_events(const std::string& events, const std::string& extra = "") {
  return R"({"format":"delta-alloc-stream","version":1,"source":{"kind":"test"},)" + extra + R"("events":[)" +
         events + "]}";
}

// The error message for `text`, which must be rejected.
std::string error_of(const std::string& text) {
  try {
    parse_alloc_stream(text, "s.json");
  } catch (const AllocStreamError& e) {
    return e.what();
  }
  FAIL("accepted: " << text);
  return "";
}

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("delta_replay_test_" + std::to_string(::getpid()) + "_" + name);
}

}  // namespace

TEST_CASE("a valid stream is read with its live-byte peak", "[stream]") {
  auto s = parse_alloc_stream(
      with_events(R"({"op":"alloc","id":1,"size":100,"stream":0,"t":1.5},
                    {"op":"alloc","id":2,"size":300,"t":2},
                    {"op":"free","id":1,"t":3},
                    {"op":"alloc","id":1,"size":50,"stream":7,"t":3},
                    {"op":"free","id":2,"size":300})",
                  R"("initial_live":[{"id":9,"size":1000}],"native_observed":{"peak_reserved":4096,"peak_allocated":1400},)"),
      "s.json");
  CHECK(s.source_kind == "test");
  REQUIRE(s.events.size() == 5);
  REQUIRE(s.initial_live.size() == 1);
  CHECK(s.peak_live_bytes == 1400);
  CHECK(s.events[3].stream == 7);
  CHECK(s.events[2].size == 100);  // frees carry the size of the block they free
  CHECK(s.events[4].t_us == 3.0);  // no time: the previous event's
  REQUIRE(s.native_observed.has_value());
  CHECK(s.native_observed->peak_reserved == 4096);
}

TEST_CASE("malformed streams are rejected naming the element and the rule", "[stream]") {
  CHECK_THAT(error_of("{\"format\":"), Catch::Contains("s.json: not valid JSON"));
  CHECK_THAT(error_of("[1,2]"), Catch::Contains("document: must be a JSON object"));
  CHECK_THAT(error_of(R"({"format":"other","version":1,"events":[]})"), Catch::Contains("format: expected"));
  CHECK_THAT(error_of(R"({"format":"delta-alloc-stream","version":2,"events":[]})"),
             Catch::Contains("version 2 is not supported"));
  CHECK_THAT(error_of(R"({"format":"delta-alloc-stream","version":1})"), Catch::Contains("missing field 'events'"));
  CHECK_THAT(error_of(with_events("42")), Catch::Contains("events[0]: must be an object"));
  CHECK_THAT(error_of(with_events(R"({"op":"grow","id":1,"size":8})")), Catch::Contains("events[0].op"));
  CHECK_THAT(error_of(with_events(R"({"op":"alloc","size":8})")), Catch::Contains("events[0]: missing field 'id'"));
  CHECK_THAT(error_of(with_events(R"({"op":"alloc","id":-3,"size":8})")),
             Catch::Contains("events[0].id: must not be negative"));
  CHECK_THAT(error_of(with_events(R"({"op":"alloc","id":1,"size":"8"})")),
             Catch::Contains("events[0].size: must be an integer"));
  CHECK_THAT(error_of(with_events(R"({"op":"alloc","id":1,"size":0})")),
             Catch::Contains("events[0].size: a block of 0 bytes"));
  CHECK_THAT(error_of(with_events(R"({"op":"alloc","id":1,"size":99999999999999999})")),
             Catch::Contains("events[0].size: 99999999999999999 bytes is not a plausible allocation"));
  CHECK_THAT(error_of(with_events(R"({"op":"alloc","id":1,"size":1.5})")),
             Catch::Contains("events[0].size: must be a whole non-negative number"));
}

TEST_CASE("lifetimes that cannot happen are rejected", "[stream]") {
  CHECK_THAT(error_of(with_events(R"({"op":"free","id":4})")),
             Catch::Contains("events[0]: free of id 4, which is not live"));
  CHECK_THAT(error_of(with_events(R"({"op":"alloc","id":4,"size":8},{"op":"free","id":4},{"op":"free","id":4})")),
             Catch::Contains("events[2]: free of id 4, which is not live"));
  CHECK_THAT(error_of(with_events(R"({"op":"alloc","id":4,"size":8},{"op":"alloc","id":4,"size":8})")),
             Catch::Contains("events[1]: alloc of id 4, which is already live (allocated at events[0])"));
  CHECK_THAT(error_of(with_events(R"({"op":"alloc","id":4,"size":8})", R"("initial_live":[{"id":4,"size":8}],)")),
             Catch::Contains("events[0]: alloc of id 4, which is already live (allocated at initial_live[0])"));
  CHECK_THAT(error_of(with_events(R"({"op":"alloc","id":4,"size":8},{"op":"free","id":4,"size":9})")),
             Catch::Contains("events[1].size: free says 9 bytes"));
  CHECK_THAT(error_of(with_events(R"({"op":"alloc","id":1,"size":8,"t":5},{"op":"alloc","id":2,"size":8,"t":4})")),
             Catch::Contains("events[1].t: time goes backwards"));
  CHECK_THAT(error_of(with_events("", R"("initial_live":[{"id":1}],)")),
             Catch::Contains("initial_live[0]: missing field 'size'"));
  CHECK_THAT(error_of(with_events("", R"("native_observed":{"peak_reserved":1},)")),
             Catch::Contains("native_observed: missing field 'peak_allocated'"));
}

TEST_CASE("files: gzip is read transparently, broken files fail clearly", "[stream]") {
  const std::string text = with_events(R"({"op":"alloc","id":1,"size":4096},{"op":"free","id":1})");
  auto gz = temp_path("ok.json.gz");
  {
    gzFile f = gzopen(gz.c_str(), "wb");
    REQUIRE(f != nullptr);
    REQUIRE(gzwrite(f, text.data(), unsigned(text.size())) == int(text.size()));
    gzclose(f);
  }
  CHECK(read_alloc_stream(gz).events.size() == 2);

  // Cut the compressed file in half: the reader must say the data is corrupt or truncated.
  auto cut = temp_path("cut.json.gz");
  {
    std::ifstream in(gz, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  CHECK_THROWS_AS(read_alloc_stream(cut), AllocStreamError);
  CHECK_THROWS_WITH(read_alloc_stream(cut), Catch::Contains(cut.string()));

  CHECK_THROWS_WITH(read_alloc_stream(temp_path("missing.json")), Catch::Contains("cannot open"));
  auto binary = temp_path("binary.json");
  std::ofstream(binary, std::ios::binary) << std::string("\x00\x01\x02garbage", 10);
  CHECK_THROWS_WITH(read_alloc_stream(binary), Catch::Contains("not valid JSON"));
  for (const auto& p : {gz, cut, binary}) std::filesystem::remove(p);
}
