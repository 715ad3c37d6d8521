#include "profiler/sources/cupti_library.hpp"
#include "profiler/record_settings.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>

using namespace delta::profiler;

namespace {

EnvLookup env_of(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const char* name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

std::string error_of(const std::map<std::string, std::string>& values) {
  try {
    parse_record_settings(env_of(values));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("record settings: defaults and valid values") {
  RecordSettings defaults = parse_record_settings(env_of({}));
  CHECK(defaults.mode == DeltaMode::cache);
  CHECK(defaults.trace_path == "delta-trace.json");
  CHECK(defaults.iterations == 2);

  RecordSettings set = parse_record_settings(
      env_of({{"DELTA_MODE", "record"}, {"DELTA_TRACE", "/tmp/run/t.json.gz"}, {"DELTA_RECORD_ITERATIONS", "5"}}));
  CHECK(set.mode == DeltaMode::record);
  CHECK(set.trace_path == "/tmp/run/t.json.gz");
  CHECK(set.iterations == 5);
  CHECK(parse_record_settings(env_of({{"DELTA_MODE", ""}})).mode == DeltaMode::cache);
  CHECK(parse_record_settings(env_of({{"DELTA_MODE", "auto"}})).mode == DeltaMode::automatic);
  CHECK(defaults.learning_iterations == 0);
  CHECK(parse_record_settings(env_of({{"DELTA_RECORD_ITERATIONS", "3"}, {"DELTA_LEARNING_ITERATIONS", "2"}}))
            .learning_iterations == 2);
  CHECK(parse_record_settings(env_of({{"DELTA_LEARNING_ITERATIONS", "0"}})).learning_iterations == 0);
}

TEST_CASE("record settings: every bad value is refused with the variable's name") {
  CHECK(error_of({{"DELTA_MODE", "recrod"}}).find("DELTA_MODE='recrod'") != std::string::npos);
  CHECK(error_of({{"DELTA_MODE", "RECORD "}}).find("DELTA_MODE") != std::string::npos);
  CHECK(error_of({{"DELTA_TRACE", ""}}).find("DELTA_TRACE") != std::string::npos);
  CHECK(error_of({{"DELTA_TRACE", "/tmp/"}}).find("DELTA_TRACE") != std::string::npos);
  for (const char* bad : {"0", "-1", "two", "3x", "", " 2", "99999999999999999999"}) {
    INFO(bad);
    CHECK(error_of({{"DELTA_RECORD_ITERATIONS", bad}}).find("DELTA_RECORD_ITERATIONS") != std::string::npos);
  }
  for (const char* bad : {"-1", "two", "", "3"}) {  // 3: more than the 2 iterations recorded
    INFO(bad);
    CHECK(error_of({{"DELTA_LEARNING_ITERATIONS", bad}}).find("DELTA_LEARNING_ITERATIONS='") != std::string::npos);
  }
  CHECK(error_of({{"DELTA_LEARNING_ITERATIONS", "3"}}).find("DELTA_RECORD_ITERATIONS (2)") != std::string::npos);
  CHECK(error_of({{"RANK", "first"}}).find("RANK='first'") != std::string::npos);
  CHECK(error_of({{"LOCAL_RANK", "-2"}}).find("LOCAL_RANK") != std::string::npos);
}

TEST_CASE("trace file names carry the rank under torchrun") {
  auto with = [](const std::string& path, std::map<std::string, std::string> env) {
    return rank_trace_path(path, env_of(std::move(env)));
  };
  CHECK(with("trace.json", {}) == "trace.json");
  CHECK(with("trace.json", {{"RANK", "3"}}) == "trace.rank3.json");
  CHECK(with("trace.json", {{"LOCAL_RANK", "1"}}) == "trace.rank1.json");
  CHECK(with("trace.json", {{"RANK", "7"}, {"LOCAL_RANK", "1"}}) == "trace.rank7.json");  // global rank wins
  CHECK(with("out/run.v2/trace.json.gz", {{"RANK", "0"}}) == "out/run.v2/trace.rank0.json.gz");
  CHECK(with("out/run.v2/trace", {{"RANK", "2"}}) == "out/run.v2/trace.rank2");
  CHECK(with("dir/.trace", {{"RANK", "2"}}) == "dir/.trace.rank2");
  CHECK(with("trace.gz", {{"RANK", "4"}}) == "trace.rank4.gz");
  CHECK(parse_record_settings(env_of({{"DELTA_TRACE", "t.json"}, {"RANK", "12"}})).trace_path == "t.rank12.json");
}

TEST_CASE("CUPTI is looked for where the setting, the process and the toolkit say, in that order") {
  namespace fs = std::filesystem;
  CuptiSearchInputs in;
  in.loaded_cudart = "/venv/site-packages/nvidia/cu13/lib/libcudart.so.13";
  in.toolkit_roots = {"/opt/cuda"};
  auto candidates = cupti_candidates(in);
  REQUIRE(candidates.size() >= 6);
  CHECK(candidates[0] == "/venv/site-packages/nvidia/cu13/lib/libcupti.so.13");
  CHECK(std::find(candidates.begin(), candidates.end(), "/venv/site-packages/nvidia/cuda_cupti/lib/libcupti.so.13") !=
        candidates.end());
  const auto toolkit = std::find(candidates.begin(), candidates.end(), "/opt/cuda/extras/CUPTI/lib64/libcupti.so.13");
  const auto toolkit_lib64 = std::find(candidates.begin(), candidates.end(), "/opt/cuda/lib64/libcupti.so.13");
  CHECK(toolkit != candidates.end());
  CHECK(toolkit < toolkit_lib64);
  CHECK(candidates.back() == "libcupti.so");

  in.loaded_cupti = "/somewhere/libcupti.so.13";
  CHECK(cupti_candidates(in).front() == "/somewhere/libcupti.so.13");  // the copy already loaded comes first

  // An explicit setting is the only place looked at; a directory is searched for the library.
  const fs::path dir = fs::temp_directory_path() / "delta_cupti_search";
  fs::create_directories(dir);
  in.explicit_path = dir.string();
  auto only = cupti_candidates(in);
  REQUIRE(only.size() == 2);
  CHECK(only[0] == (dir / "libcupti.so.13").string());
  in.explicit_path = "/exact/libcupti.so.13.0.1";
  CHECK(cupti_candidates(in) == std::vector<std::string>{"/exact/libcupti.so.13.0.1"});
  fs::remove_all(dir);
}
