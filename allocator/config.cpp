#include "allocator/config.hpp"

#include "allocator/structures/size_classes.hpp"

#include <array>
#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace delta {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

[[noreturn]] void bad(std::string_view option, std::string_view value, std::string_view why) {
  throw ConfigError("invalid value '" + std::string(value) + "' for allocator option '" +
                    std::string(option) + "': " + std::string(why));
}

double parse_double(std::string_view option, std::string_view text) {
  text = trim(text);
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    bad(option, text, "expected a number");
  return value;
}

std::size_t parse_unsigned(std::string_view option, std::string_view text) {
  text = trim(text);
  std::size_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    bad(option, text, "expected a non-negative integer");
  return value;
}

constexpr std::size_t kMaxEventLogEntries = std::size_t{1} << 24;
constexpr std::size_t kMaxRoundUpDivisions = std::size_t{1} << 30;

// One roundup_power2_divisions value: 0 or 1 turn rounding off, else a power of two.
std::size_t parse_division(std::string_view text) {
  std::size_t value = parse_unsigned("roundup_power2_divisions", text);
  if (value > 1 && !std::has_single_bit(value))
    bad("roundup_power2_divisions", text, "divisions must be a power of 2");
  // Finer than the smallest block size rounds nothing more, and far beyond it the size
  // arithmetic would overflow.
  if (value > kMaxRoundUpDivisions)
    bad("roundup_power2_divisions", text, "divisions must be at most " + std::to_string(kMaxRoundUpDivisions));
  return value;
}

// "4" sets every interval; "[256:1,512:2,>:4]" sets intervals by size in MiB (powers of two),
// ">" the rest beyond the last one named.
void apply_roundup_divisions(std::string_view text, AllocatorConfig& config) {
  text = trim(text);
  auto& divisions = config.roundup_power2_divisions;
  divisions.assign(kRoundUpIntervals, 0);
  if (text.empty() || text.front() != '[') {
    divisions.assign(kRoundUpIntervals, parse_division(text));
    return;
  }
  if (text.back() != ']') bad("roundup_power2_divisions", text, "missing ']'");
  std::string_view body = text.substr(1, text.size() - 2);
  std::size_t last_index = 0;
  bool any = false;
  while (!body.empty()) {
    std::size_t comma = body.find(',');
    std::string_view item = trim(body.substr(0, comma));
    body = comma == std::string_view::npos ? std::string_view{} : body.substr(comma + 1);
    std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) bad("roundup_power2_divisions", item, "expected 'size_mb:divisions'");
    std::string_view key = trim(item.substr(0, colon));
    std::size_t value = parse_division(item.substr(colon + 1));
    if (key == ">") {
      for (std::size_t i = any ? last_index + 1 : 0; i < kRoundUpIntervals; ++i) divisions[i] = value;
      continue;
    }
    std::size_t mb = parse_unsigned("roundup_power2_divisions", key);
    if (mb == 0 || !std::has_single_bit(mb)) bad("roundup_power2_divisions", key, "sizes must be powers of 2 (MiB)");
    std::size_t index = std::min<std::size_t>(std::bit_width(mb) - 1, kRoundUpIntervals - 1);
    divisions[index] = value;
    last_index = index;
    any = true;
  }
  if (!any && trim(text.substr(1, text.size() - 2)).empty())
    bad("roundup_power2_divisions", text, "an empty list (expected [size_mb:divisions, ...])");
}

}  // namespace

std::size_t parse_byte_size(std::string_view text, std::string_view what) {
  std::string_view s = trim(text);
  std::size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  std::string_view number = s.substr(0, i), unit = trim(s.substr(i));
  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (number.empty() || ec != std::errc() || end != number.data() + number.size())
    throw ConfigError("invalid byte size '" + std::string(text) + "' for " + std::string(what) +
                      ": expected a number with an optional unit (B, KB, MB, GB, KiB, MiB, GiB)");
  static constexpr std::array<std::pair<std::string_view, double>, 14> units{{
      {"", 1}, {"b", 1}, {"k", 1024.0}, {"kb", 1e3}, {"kib", 1024.0}, {"m", 1048576.0},
      {"mb", 1e6}, {"mib", 1048576.0}, {"g", 1073741824.0}, {"gb", 1e9}, {"gib", 1073741824.0},
      {"t", 1099511627776.0}, {"tb", 1e12}, {"tib", 1099511627776.0}}};
  std::string lower;
  for (char c : unit) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (auto [name, scale] : units) {
    if (lower == name) {
      double bytes = value * scale;
      if (bytes >= 1.8e19) throw ConfigError("byte size '" + std::string(text) + "' for " + std::string(what) + " is too large");
      return static_cast<std::size_t>(bytes);
    }
  }
  throw ConfigError("unknown unit '" + std::string(unit) + "' in '" + std::string(text) + "' for " +
                    std::string(what) + " (use B, KB, MB, GB, KiB, MiB or GiB)");
}

std::vector<std::string> apply_alloc_conf(std::string_view text, AllocatorConfig& config) {
  std::vector<std::string> ignored;
  // Split on commas that are not inside [...] (roundup_power2_divisions lists contain commas).
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] == '[') ++depth;
    if (i < text.size() && text[i] == ']') --depth;
    if (i < text.size() && (text[i] != ',' || depth > 0)) continue;
    std::string_view item = trim(text.substr(start, i - start));
    start = i + 1;
    if (item.empty()) continue;
    std::size_t colon = item.find(':');
    if (colon == std::string_view::npos)
      throw ConfigError("allocator option '" + std::string(item) + "' has no value (expected key:value)");
    std::string_view key = trim(item.substr(0, colon)), value = trim(item.substr(colon + 1));
    if (key == "max_split_size_mb") {
      double mb = parse_double(key, value);
      if (mb < 1.0) bad(key, value, "must be at least 1 (MiB)");
      // Past what a size_t holds it means what the default does, every block split (PyTorch
      // clamps so too); the cast itself would be undefined there.
      const double bytes = mb * 1048576.0;
      config.max_split_size = bytes >= 18446744073709549568.0 ? SIZE_MAX : static_cast<std::size_t>(bytes);
    } else if (key == "roundup_power2_divisions") {
      apply_roundup_divisions(value, config);
    } else if (key == "garbage_collection_threshold") {
      double threshold = parse_double(key, value);
      if (threshold <= 0.0 || threshold >= 1.0) bad(key, value, "must be strictly between 0 and 1");
      config.garbage_collection_threshold = threshold;
    } else if (key == "backend") {
      if (value != "native" && value != "cudaMallocAsync") bad(key, value, "expected native or cudaMallocAsync");
      ignored.emplace_back(key);
    } else if (key == "expandable_segments") {
      if (value != "True" && value != "False" && value != "true" && value != "false")
        bad(key, value, "expected True or False");
      ignored.emplace_back(key);  // DELTA's segments always grow page by page
    } else if (key == "release_lock_on_cudamalloc" || key == "pinned_use_cuda_host_register" ||
               key == "pinned_num_register_threads" || key == "pinned_use_background_threads" ||
               key == "per_process_memory_fraction" || key == "graph_capture_record_stream_reuse") {
      if (key == "per_process_memory_fraction") {
        double fraction = parse_double(key, value);
        if (fraction <= 0.0 || fraction > 1.0) bad(key, value, "must be in (0, 1]");
        config.memory_fraction = fraction;
      } else if (key == "pinned_num_register_threads") {
        const std::size_t threads = parse_unsigned(key, value);
        if (threads == 0 || !std::has_single_bit(threads)) bad(key, value, "must be a power of 2");
        ignored.emplace_back(key);
      } else {
        if (value != "True" && value != "False" && value != "true" && value != "false")
          bad(key, value, "expected True or False");
        ignored.emplace_back(key);
      }
    } else {
      throw ConfigError("unknown allocator option '" + std::string(key) +
                        "' (known: max_split_size_mb, roundup_power2_divisions, "
                        "garbage_collection_threshold, per_process_memory_fraction, backend, "
                        "expandable_segments)");
    }
  }
  if (depth != 0) throw ConfigError("unbalanced brackets in allocator options '" + std::string(text) + "'");
  return ignored;
}

AllocatorConfig config_from_env() {
  AllocatorConfig config;
  const char* conf = std::getenv("PYTORCH_ALLOC_CONF");
  const char* conf_name = "PYTORCH_ALLOC_CONF";
  if (!conf) {
    conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
    conf_name = "PYTORCH_CUDA_ALLOC_CONF";
  }
  if (conf) {
    try {
      apply_alloc_conf(conf, config);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string(conf_name) + ": " + e.what());
    }
  }
  if (const char* limit = std::getenv("DELTA_MEMORY_LIMIT")) {
    config.hard_limit_bytes = parse_byte_size(limit, "DELTA_MEMORY_LIMIT");
    // 0 would mean no limit at all, the opposite of what a user writing it (or 0.5, meaning a
    // fraction) asks for.
    if (config.hard_limit_bytes == 0)
      throw ConfigError("invalid byte size '" + std::string(limit) +
                        "' for DELTA_MEMORY_LIMIT: it is under one byte (unset it for no limit; "
                        "DELTA_MEMORY_FRACTION takes a fraction of the device)");
  }
  if (const char* fraction = std::getenv("DELTA_MEMORY_FRACTION")) {
    double value = parse_double("DELTA_MEMORY_FRACTION", fraction);
    if (value <= 0.0 || value > 1.0) bad("DELTA_MEMORY_FRACTION", fraction, "must be in (0, 1]");
    config.memory_fraction = value;
  }
  if (const char* events = std::getenv("DELTA_EVENT_LOG")) {
    config.event_log_capacity = parse_unsigned("DELTA_EVENT_LOG", events);
    // The ring is allocated whole at start: past this it would take gigabytes of host memory.
    if (config.event_log_capacity > kMaxEventLogEntries)
      bad("DELTA_EVENT_LOG", events, "at most " + std::to_string(kMaxEventLogEntries) + " events");
  }
  if (const char* dump = std::getenv("DELTA_OOM_DUMP")) config.oom_dump_path = dump;
  return config;
}

}  // namespace delta
