#include "profiler/record_settings.hpp"

#include <charconv>
#include <cstdlib>
#include <stdexcept>

namespace delta::profiler {
namespace {

std::optional<std::uint64_t> parse_unsigned(const std::string& text) {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

EnvLookup process_environment() {
  return [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

RecordSettings parse_record_settings(const EnvLookup& env) {
  RecordSettings settings;
  if (auto mode = env("DELTA_MODE"); mode && !mode->empty()) {
    if (*mode == "cache") settings.mode = DeltaMode::cache;
    else if (*mode == "record") settings.mode = DeltaMode::record;
    else if (*mode == "run") settings.mode = DeltaMode::run;
    else if (*mode == "auto") settings.mode = DeltaMode::automatic;
    else throw std::invalid_argument("DELTA_MODE='" + *mode + "' is not one of: cache, record, run, auto");
  }
  if (auto path = env("DELTA_TRACE")) {
    if (path->empty()) throw std::invalid_argument("DELTA_TRACE is set but empty: give the path of the trace file to write");
    if (path->back() == '/') throw std::invalid_argument("DELTA_TRACE='" + *path + "' names a directory; give a file path");
    settings.trace_path = *path;
  }
  if (auto count = env("DELTA_RECORD_ITERATIONS")) {
    const auto value = parse_unsigned(*count);
    if (!value || *value == 0 || *value > 1'000'000) {
      throw std::invalid_argument("DELTA_RECORD_ITERATIONS='" + *count +
                                  "' is not a whole number of iterations between 1 and 1000000");
    }
    settings.iterations = static_cast<std::uint32_t>(*value);
  }
  if (auto count = env("DELTA_LEARNING_ITERATIONS")) {
    const auto value = parse_unsigned(*count);
    if (!value || *value > settings.iterations) {
      throw std::invalid_argument("DELTA_LEARNING_ITERATIONS='" + *count +
                                  "' is not a whole number of iterations between 0 and DELTA_RECORD_ITERATIONS (" +
                                  std::to_string(settings.iterations) + "): the learning iterations are the first "
                                  "ones recorded");
    }
    settings.learning_iterations = static_cast<std::uint32_t>(*value);
  }
  settings.trace_path = rank_trace_path(settings.trace_path, env);
  return settings;
}

std::string rank_trace_path(const std::string& path, const EnvLookup& env) {
  const char* variable = "RANK";
  std::optional<std::string> rank = env("RANK");
  if (!rank || rank->empty()) {
    variable = "LOCAL_RANK";
    rank = env("LOCAL_RANK");
  }
  if (!rank || rank->empty()) return path;
  const auto value = parse_unsigned(*rank);
  if (!value) throw std::invalid_argument(std::string(variable) + "='" + *rank + "' is not a non-negative integer");

  const std::size_t slash = path.rfind('/');
  const std::size_t name_start = slash == std::string::npos ? 0 : slash + 1;
  const std::string name = path.substr(name_start);
  // A leading dot starts a hidden file's name, not an extension.
  std::size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot > 0 && name.substr(dot) == ".gz") {
    const std::size_t inner = name.rfind('.', dot - 1);
    if (inner != std::string::npos && inner > 0) dot = inner;
  }
  const std::string tag = ".rank" + std::to_string(*value);
  if (dot == std::string::npos || dot == 0) return path + tag;
  return path.substr(0, name_start + dot) + tag + name.substr(dot);
}

}  // namespace delta::profiler
