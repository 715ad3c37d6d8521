#include "replay/alloc_stream.hpp"

#include "replay/file_bytes.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <unordered_map>

namespace delta::replay {
namespace {

using nlohmann::json;

// Builds messages like "trace.json: events[17].size: must be ...".
class Context {
 public:
  explicit Context(const std::string& origin) : origin_(origin) {}
  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw AllocStreamError(origin_ + ": " + where + ": " + what);
  }

 private:
  const std::string& origin_;
};

std::string type_name(const json& value) { return value.type_name(); }

const json& require(const json& object, const char* key, const std::string& where, const Context& ctx) {
  auto it = object.find(key);
  if (it == object.end()) ctx.fail(where, std::string("missing field '") + key + "'");
  return *it;
}

std::uint64_t as_unsigned(const json& value, const std::string& where, const Context& ctx) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer()) ctx.fail(where, "must not be negative (got " + value.dump() + ")");
  // Importers write integers; a float with no fraction (1e6) is still an exact count.
  if (value.is_number_float()) {
    double d = value.get<double>();
    if (std::isfinite(d) && d >= 0 && d == std::floor(d) && d < 1.8e19) return static_cast<std::uint64_t>(d);
    ctx.fail(where, "must be a whole non-negative number (got " + value.dump() + ")");
  }
  ctx.fail(where, "must be an integer, not " + type_name(value));
}

std::uint64_t as_size(const json& value, const std::string& where, const Context& ctx) {
  std::uint64_t size = as_unsigned(value, where, ctx);
  if (size == 0) ctx.fail(where, "a block of 0 bytes is not an allocation");
  if (size > kMaxAllocationBytes) {
    ctx.fail(where, std::to_string(size) + " bytes is not a plausible allocation (limit 16 TiB)");
  }
  return size;
}

void check_header(const json& doc, const Context& ctx) {
  if (!doc.is_object()) ctx.fail("document", "must be a JSON object, not " + type_name(doc));
  const json& format = require(doc, "format", "document", ctx);
  if (!format.is_string() || format.get<std::string>() != kAllocStreamFormat) {
    ctx.fail("format", "expected \"" + std::string(kAllocStreamFormat) + "\", got " + format.dump());
  }
  const json& version = require(doc, "version", "document", ctx);
  std::uint64_t v = as_unsigned(version, "version", ctx);
  if (v != kAllocStreamVersion) {
    ctx.fail("version", "version " + std::to_string(v) + " is not supported (this reader knows version " +
                            std::to_string(kAllocStreamVersion) + ")");
  }
}

// Tracks which ids are live so that frees and allocs can be checked as they are read.
struct LiveSet {
  struct Entry {
    std::uint64_t size;
    std::uint64_t stream;
    std::string where;
  };
  std::unordered_map<std::uint64_t, Entry> live;
  std::uint64_t live_bytes = 0, peak = 0;

  void add(std::uint64_t id, std::uint64_t size, std::uint64_t stream, const std::string& where,
           const Context& ctx) {
    auto [it, inserted] = live.try_emplace(id, Entry{size, stream, where});
    if (!inserted) {
      ctx.fail(where, "alloc of id " + std::to_string(id) + ", which is already live (allocated at " +
                          it->second.where + ")");
    }
    live_bytes += size;
    peak = std::max(peak, live_bytes);
  }
};

void read_initial_live(const json& doc, AllocStream& stream, LiveSet& live, const Context& ctx) {
  auto it = doc.find("initial_live");
  if (it == doc.end()) return;
  if (!it->is_array()) ctx.fail("initial_live", "must be an array, not " + type_name(*it));
  stream.initial_live.reserve(it->size());
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& block = (*it)[i];
    std::string where = "initial_live[" + std::to_string(i) + "]";
    if (!block.is_object()) ctx.fail(where, "must be an object, not " + type_name(block));
    LiveBlock b;
    b.id = as_unsigned(require(block, "id", where, ctx), where + ".id", ctx);
    b.size = as_size(require(block, "size", where, ctx), where + ".size", ctx);
    b.stream = block.contains("stream") ? as_unsigned(block["stream"], where + ".stream", ctx) : 0;
    live.add(b.id, b.size, b.stream, where, ctx);
    stream.initial_live.push_back(b);
  }
}

void read_events(const json& doc, AllocStream& stream, LiveSet& live, const Context& ctx) {
  const json& events = require(doc, "events", "document", ctx);
  if (!events.is_array()) ctx.fail("events", "must be an array, not " + type_name(events));
  stream.events.reserve(events.size());
  double last_t = -INFINITY;
  std::string last_t_where;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& event = events[i];
    std::string where = "events[" + std::to_string(i) + "]";
    if (!event.is_object()) ctx.fail(where, "must be an object, not " + type_name(event));
    const json& op = require(event, "op", where, ctx);
    if (!op.is_string()) ctx.fail(where + ".op", "must be \"alloc\" or \"free\", not " + type_name(op));
    AllocEvent e{};
    e.id = as_unsigned(require(event, "id", where, ctx), where + ".id", ctx);
    if (auto t = event.find("t"); t != event.end()) {
      if (!t->is_number() || !std::isfinite(t->get<double>())) {
        ctx.fail(where + ".t", "must be a finite number of microseconds, not " + t->dump());
      }
      e.t_us = t->get<double>();
      if (e.t_us < last_t) {
        ctx.fail(where + ".t", "time goes backwards (" + t->dump() + " after " + std::to_string(last_t) +
                                   " at " + last_t_where + ")");
      }
      last_t = e.t_us;
      last_t_where = where;
    } else {
      e.t_us = std::isfinite(last_t) ? last_t : 0.0;
    }
    const std::string& name = op.get_ref<const std::string&>();
    if (name == "alloc") {
      e.op = AllocEvent::Op::alloc;
      e.size = as_size(require(event, "size", where, ctx), where + ".size", ctx);
      e.stream = event.contains("stream") ? as_unsigned(event["stream"], where + ".stream", ctx) : 0;
      live.add(e.id, e.size, e.stream, where, ctx);
    } else if (name == "free") {
      e.op = AllocEvent::Op::free;
      auto it = live.live.find(e.id);
      if (it == live.live.end()) {
        ctx.fail(where, "free of id " + std::to_string(e.id) + ", which is not live (never allocated or already freed)");
      }
      e.size = it->second.size;
      e.stream = it->second.stream;
      if (event.contains("size") && as_unsigned(event["size"], where + ".size", ctx) != e.size) {
        ctx.fail(where + ".size", "free says " + event["size"].dump() + " bytes but id " + std::to_string(e.id) +
                                      " was allocated with " + std::to_string(e.size));
      }
      live.live_bytes -= e.size;
      live.live.erase(it);
    } else {
      ctx.fail(where + ".op", "must be \"alloc\" or \"free\", not " + op.dump());
    }
    stream.events.push_back(e);
  }
}

void read_native_observed(const json& doc, AllocStream& stream, const Context& ctx) {
  auto it = doc.find("native_observed");
  if (it == doc.end() || it->is_null()) return;
  if (!it->is_object()) ctx.fail("native_observed", "must be an object, not " + type_name(*it));
  NativeObserved observed;
  observed.peak_reserved = as_unsigned(require(*it, "peak_reserved", "native_observed", ctx),
                                       "native_observed.peak_reserved", ctx);
  observed.peak_allocated = as_unsigned(require(*it, "peak_allocated", "native_observed", ctx),
                                        "native_observed.peak_allocated", ctx);
  if (observed.peak_allocated == 0) ctx.fail("native_observed.peak_allocated", "must be positive");
  stream.native_observed = observed;
}

}  // namespace

AllocStream parse_alloc_stream(std::string_view text, const std::string& origin) {
  Context ctx(origin);
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw AllocStreamError(origin + ": not valid JSON (byte " + std::to_string(e.byte) + "): " + e.what());
  }
  check_header(doc, ctx);
  AllocStream stream;
  stream.origin = origin;
  if (auto source = doc.find("source"); source != doc.end() && source->is_object()) {
    stream.source_kind = source->value("kind", "");
  }
  LiveSet live;
  read_initial_live(doc, stream, live, ctx);
  read_events(doc, stream, live, ctx);
  read_native_observed(doc, stream, ctx);
  stream.peak_live_bytes = live.peak;
  return stream;
}

AllocStream read_alloc_stream(const std::string& path) {
  std::string bytes;
  try {
    bytes = read_file_maybe_gzip(path);
  } catch (const std::runtime_error& e) {
    throw AllocStreamError(e.what());
  }
  return parse_alloc_stream(bytes, path);
}

}  // namespace delta::replay
