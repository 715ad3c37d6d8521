#include "running/replay_report.hpp"

#include "replay/byte_size.hpp"

#include <cstdio>
#include <string>

namespace deltactl {

using delta::replay::format_bytes;

namespace {
std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}
std::string percent(double fraction) { return fixed(100.0 * fraction, 1) + "%"; }

void row(std::ostream& out, const std::vector<std::string>& cells) {
  static const int kWidths[] = {18, 15, 15, 10, 10, 10, 6, 12};
  char line[256];
  int at = 0;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    at += std::snprintf(line + at, sizeof line - at, i == 0 ? "%-*s" : " %*s", kWidths[i], cells[i].c_str());
  }
  out << line << '\n';
}
}  // namespace

void print_replay_table(std::ostream& out, const delta::replay::AllocStream& stream,
                        const std::vector<delta::replay::ReplayResult>& results) {
  out << stream.origin << " (" << (stream.source_kind.empty() ? "unknown source" : stream.source_kind)
      << "): " << stream.events.size() << " events, " << stream.initial_live.size()
      << " initial live blocks, peak live " << format_bytes(stream.peak_live_bytes) << "\n\n";
  row(out, {"policy", "peak allocated", "peak reserved", "res/live", "mean frag", "cache hits", "OOMs", "events/s"});
  for (const auto& r : results) {
    row(out, {r.policy, format_bytes(r.peak_allocated), format_bytes(r.peak_reserved), fixed(r.reserved_over_live, 3),
              percent(r.mean_fragmentation), percent(r.cache_hit_rate), std::to_string(r.ooms),
              fixed(r.events_per_second, 0)});
  }
  if (stream.native_observed) {
    const auto& o = *stream.native_observed;
    row(out, {"native (recorded)", "-", format_bytes(o.peak_reserved),
              fixed(double(o.peak_reserved) / double(o.peak_allocated), 3), "-", "-", "-", "-"});
  }
  out << "\nres/live: peak reserved / the stream's peak of requested live bytes (the same denominator "
         "for every row).\nmean frag: time-weighted mean of 1 - allocated/reserved.\n";
  for (const auto& r : results) {
    if (r.skipped_frees) out << r.policy << ": " << r.skipped_frees << " frees skipped (their allocation failed)\n";
  }
}

nlohmann::json replay_json(const delta::replay::AllocStream& stream,
                           const std::vector<delta::replay::ReplayResult>& results) {
  nlohmann::json doc;
  doc["stream"] = {{"path", stream.origin},
                   {"source", stream.source_kind},
                   {"events", stream.events.size()},
                   {"initial_live", stream.initial_live.size()},
                   {"peak_live_bytes", stream.peak_live_bytes}};
  doc["results"] = nlohmann::json::array();
  for (const auto& r : results) {
    doc["results"].push_back({{"policy", r.policy},
                              {"peak_allocated", r.peak_allocated},
                              {"peak_reserved", r.peak_reserved},
                              {"reserved_over_live", r.reserved_over_live},
                              {"mean_fragmentation", r.mean_fragmentation},
                              {"cache_hit_rate", r.cache_hit_rate},
                              {"ooms", r.ooms},
                              {"skipped_frees", r.skipped_frees},
                              {"invariant_checks", r.invariant_checks},
                              {"seconds", r.seconds},
                              {"events_per_second", r.events_per_second}});
  }
  if (stream.native_observed) {
    const auto& o = *stream.native_observed;
    doc["native_observed"] = {{"peak_reserved", o.peak_reserved},
                              {"peak_allocated", o.peak_allocated},
                              {"reserved_over_allocated", double(o.peak_reserved) / double(o.peak_allocated)}};
  }
  return doc;
}

}  // namespace deltactl
