// parse_trace(): JSON text of format version 1 to a Trace. Every field is checked for type and
// range where it is read, so a message can name its place ("ops[12].blocks[3]"); the rules that
// span fields are validate()'s.
#include <delta/trace.hpp>

#include "format_rules.hpp"
#include "gzip_codec.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <string_view>

namespace delta::trace {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& place, const std::string& problem) {
  throw TraceError(place + ": " + problem);
}

std::string type_name(const json& value) {
  if (value.is_number_unsigned()) return "a non-negative integer";
  if (value.is_number_integer()) return "a negative integer";
  if (value.is_number_float()) return "a fractional or out-of-range number";
  return std::string("a ") + value.type_name();
}

// Rejects nesting deeper than the format can hold before the parser sees it. Strings are
// skipped so that brackets inside them do not count.
void check_nesting(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > format::kMaxNesting) {
        fail("byte " + std::to_string(i), "JSON nested deeper than " + std::to_string(format::kMaxNesting) +
                                              " levels (the format needs 4)");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

const json& member(const json& object, const char* key, const std::string& place) {
  auto it = object.find(key);
  if (it == object.end()) fail(place.empty() ? key : place + "." + key, "missing");
  return *it;
}

std::uint64_t as_uint(const json& value, const std::string& place, std::uint64_t max = UINT64_MAX) {
  if (!value.is_number_unsigned()) fail(place, "must be a non-negative integer, not " + type_name(value));
  const auto number = value.get<std::uint64_t>();
  if (number > max) fail(place, std::to_string(number) + " is above the limit " + std::to_string(max));
  return number;
}

std::int64_t as_time(const json& value, const std::string& place, bool never_allowed) {
  if (value.is_number_integer() && !value.is_number_unsigned()) {
    const auto number = value.get<std::int64_t>();
    if (never_allowed && number == kNever) return kNever;
    fail(place, std::to_string(number) + " is negative" + (never_allowed ? " (only -1, never, is allowed)" : ""));
  }
  return static_cast<std::int64_t>(as_uint(value, place, static_cast<std::uint64_t>(format::kMaxTimeNs)));
}

int as_code(const json& value, const std::string& place, int count, const char* what) {
  const std::uint64_t code = as_uint(value, place);
  if (code >= static_cast<std::uint64_t>(count)) {
    fail(place, "unknown " + std::string(what) + " code " + std::to_string(code) + " (0 .. " +
                    std::to_string(count - 1) + ")");
  }
  return static_cast<int>(code);
}

const json& as_array(const json& value, const std::string& place) {
  if (!value.is_array()) fail(place, "must be an array, not " + type_name(value));
  return value;
}

const json& as_row(const json& value, const std::string& place, std::size_t columns) {
  as_array(value, place);
  if (value.size() != columns) {
    fail(place, "has " + std::to_string(value.size()) + " columns, expected " + std::to_string(columns));
  }
  return value;
}

std::string as_string(const json& value, const std::string& place) {
  if (!value.is_string()) fail(place, "must be a string, not " + type_name(value));
  return value.get<std::string>();
}

std::map<std::string, std::string> as_string_map(const json& value, const std::string& place) {
  if (!value.is_object()) fail(place, "must be an object of strings, not " + type_name(value));
  std::map<std::string, std::string> out;
  for (auto it = value.begin(); it != value.end(); ++it) out[it.key()] = as_string(it.value(), place + "." + it.key());
  return out;
}

template <std::size_t N>
void check_columns(const json& root, const char* key, const std::array<std::string_view, N>& expected) {
  const json& columns = as_array(member(root, key, ""), key);
  bool same = columns.size() == N;
  for (std::size_t i = 0; same && i < N; ++i) same = columns[i].is_string() && columns[i].get<std::string>() == expected[i];
  if (!same) {
    std::string wanted;
    for (std::string_view name : expected) wanted += (wanted.empty() ? "" : ",") + std::string(name);
    fail(key, "must be exactly [" + wanted + "] in format version 1, found " + columns.dump());
  }
}

class Decoder {
 public:
  explicit Decoder(const json& root) : root_(root) {}

  Trace decode() {
    if (!root_.is_object()) fail("document", "must be a JSON object, not " + type_name(root_));
    const std::string format_name = as_string(member(root_, "format", ""), "format");
    if (format_name != format::kFormatName) {
      fail("format", "\"" + format_name + "\" is not \"" + std::string(format::kFormatName) + "\"");
    }
    const json& version = member(root_, "version", "");
    if (!version.is_number_integer() || version.get<std::int64_t>() != kFormatVersion) {
      fail("version", version.dump() + " is not supported (this reader reads version " +
                          std::to_string(kFormatVersion) + ")");
    }
    Trace trace;
    trace.source = as_string(member(root_, "source", ""), "source");
    if (auto it = root_.find("model"); it != root_.end()) trace.model = as_string(*it, "model");
    if (auto it = root_.find("gpu"); it != root_.end()) trace.gpu = gpu(*it);
    if (auto it = root_.find("allocator_settings"); it != root_.end()) {
      trace.allocator_settings = as_string_map(*it, "allocator_settings");
    }
    if (auto it = root_.find("metadata"); it != root_.end()) trace.metadata = as_string_map(*it, "metadata");

    const json& strings = as_array(member(root_, "strings", ""), "strings");
    strings_.reserve(strings.size());
    for (std::size_t i = 0; i < strings.size(); ++i) {
      strings_.push_back(as_string(strings[i], "strings[" + std::to_string(i) + "]"));
    }
    check_columns(root_, "block_columns", format::kBlockColumns);
    check_columns(root_, "op_columns", format::kOpColumns);
    check_columns(root_, "iteration_columns", format::kIterationColumns);

    const json& blocks = as_array(member(root_, "blocks", ""), "blocks");
    trace.blocks.reserve(blocks.size());
    for (std::size_t i = 0; i < blocks.size(); ++i) trace.blocks.push_back(block(blocks[i], "blocks[" + std::to_string(i) + "]"));
    const json& ops = as_array(member(root_, "ops", ""), "ops");
    trace.ops.reserve(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) trace.ops.push_back(op(ops[i], "ops[" + std::to_string(i) + "]"));
    const json& iterations = as_array(member(root_, "iterations", ""), "iterations");
    for (std::size_t i = 0; i < iterations.size(); ++i) {
      trace.iterations.push_back(iteration(iterations[i], "iterations[" + std::to_string(i) + "]"));
    }
    return trace;
  }

 private:
  const std::string& string_ref(const json& value, const std::string& place) {
    const std::uint64_t index = as_uint(value, place);
    if (index >= strings_.size()) {
      fail(place, "string index " + std::to_string(index) + " is outside the table of " +
                      std::to_string(strings_.size()) + " strings");
    }
    return strings_[index];
  }

  GpuInfo gpu(const json& value) {
    if (!value.is_object()) fail("gpu", "must be an object, not " + type_name(value));
    GpuInfo info;
    if (auto it = value.find("name"); it != value.end()) info.name = as_string(*it, "gpu.name");
    if (auto it = value.find("profile"); it != value.end()) info.profile = as_string(*it, "gpu.profile");
    if (auto it = value.find("memory_bytes"); it != value.end()) info.memory_bytes = as_uint(*it, "gpu.memory_bytes");
    return info;
  }

  Block block(const json& row, const std::string& place) {
    as_row(row, place, format::kBlockColumns.size());
    Block block;
    block.id = as_uint(row[0], place + ".id");
    block.size = as_uint(row[1], place + ".size");
    block.address = as_uint(row[2], place + ".address");
    block.stream = as_uint(row[3], place + ".stream", format::kMaxStream);
    block.alloc_ns = as_time(row[4], place + ".alloc_ns", true);
    block.free_ns = as_time(row[5], place + ".free_ns", true);
    block.category = static_cast<Category>(as_code(row[6], place + ".category", format::kCategoryCount, "category"));
    block.label = string_ref(row[7], place + ".label");
    return block;
  }

  Op op(const json& row, const std::string& place) {
    as_row(row, place, format::kOpColumns.size());
    Op op;
    op.id = as_uint(row[0], place + ".id");
    op.name = string_ref(row[1], place + ".name");
    op.kind = static_cast<OpKind>(as_code(row[2], place + ".kind", format::kOpKindCount, "op kind"));
    op.stream = as_uint(row[3], place + ".stream", format::kMaxStream);
    op.start_ns = as_time(row[4], place + ".start_ns", false);
    op.duration_ns = as_time(row[5], place + ".duration_ns", false);
    op.duration_estimated = as_code(row[6], place + ".duration_estimated", 2, "flag") == 1;
    op.iteration = static_cast<std::uint32_t>(as_uint(row[7], place + ".iteration", UINT32_MAX));
    op.phase = static_cast<Phase>(as_code(row[8], place + ".phase", format::kPhaseCount, "phase"));
    const json& flops = row[9];
    if (!flops.is_number()) fail(place + ".flops", "must be a number, not " + type_name(flops));
    op.flops = flops.get<double>();
    if (!std::isfinite(op.flops) || op.flops < 0) fail(place + ".flops", "must be finite and not negative");
    op.bytes = as_uint(row[10], place + ".bytes");
    const json& uses = as_array(row[11], place + ".blocks");
    if (uses.size() % 2 != 0) {
      fail(place + ".blocks", "holds " + std::to_string(uses.size()) + " numbers; block uses are [block, access] pairs");
    }
    op.blocks.reserve(uses.size() / 2);
    for (std::size_t u = 0; u < uses.size(); u += 2) {
      const std::string use_place = place + ".blocks[" + std::to_string(u / 2) + "]";
      BlockUse use;
      use.block = as_uint(uses[u], use_place + ".block");
      use.access = static_cast<Access>(as_code(uses[u + 1], use_place + ".access", format::kAccessCount, "access"));
      op.blocks.push_back(use);
    }
    return op;
  }

  Iteration iteration(const json& row, const std::string& place) {
    as_row(row, place, format::kIterationColumns.size());
    Iteration iteration;
    iteration.index = static_cast<std::uint32_t>(as_uint(row[0], place + ".index", UINT32_MAX));
    iteration.start_ns = as_time(row[1], place + ".start_ns", false);
    iteration.end_ns = as_time(row[2], place + ".end_ns", false);
    iteration.first_op = as_uint(row[3], place + ".first_op");
    iteration.end_op = as_uint(row[4], place + ".end_op");
    return iteration;
  }

  const json& root_;
  std::vector<std::string> strings_;
};

}  // namespace

// Not in an anonymous namespace only because parse_trace and parse_trace_bytes share it.
static Trace parse_text(std::string_view json_text, const std::string& origin) {
  try {
    // The JSON reader stops at a NUL byte as at the end of the text: what follows would go unread.
    if (const auto nul = json_text.find('\0'); nul != std::string_view::npos)
      throw TraceError("byte " + std::to_string(nul) + ": a NUL byte: not a JSON text");
    check_nesting(json_text);
    json root;
    try {
      root = json::parse(json_text.begin(), json_text.end());
    } catch (const json::parse_error& e) {
      // e.byte is where the parser stopped; its own message repeats that, so only the reason is kept.
      std::string reason = e.what();
      if (auto colon = reason.rfind(": "); colon != std::string::npos) reason = reason.substr(colon + 2);
      throw TraceError("byte " + std::to_string(e.byte) + ": invalid JSON: " + reason);
    } catch (const json::exception& e) {
      // Numbers beyond double range: "[json.exception.out_of_range.406] number overflow ...".
      std::string reason = e.what();
      if (auto bracket = reason.find("] "); bracket != std::string::npos) reason = reason.substr(bracket + 2);
      throw TraceError("invalid JSON: " + reason);
    }
    Trace trace = Decoder(root).decode();
    validate(trace);
    return trace;
  } catch (const TraceError& e) {
    throw TraceError(origin + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw TraceError(origin + ": " + e.what());
  }
}

Trace parse_trace_bytes(std::string_view bytes, const std::string& origin) {
  if (is_gzip(bytes)) {
    std::string text;
    try {
      text = gunzip(bytes, format::kMaxTextBytes);
    } catch (const TraceError& e) {
      throw TraceError(origin + ": " + e.what());
    }
    return parse_text(text, origin);
  }
  return parse_text(bytes, origin);
}

Trace parse_trace(const std::string& json_text, const std::string& origin) {
  return parse_text(json_text, origin);
}

}  // namespace delta::trace
