// libFuzzer target: any bytes, plain or gzip, through the trace reader. A TraceError is the
// expected answer to bad input; anything else (a crash, a sanitizer report, another exception,
// a hang) is a bug. Accepted input must also survive a write and re-read unchanged.
#include <delta/trace.hpp>

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace delta::trace;
  Trace trace;
  try {
    trace = parse_trace_bytes(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const TraceError&) {
    return 0;
  }
  const std::string text = to_json_text(trace);
  if (to_json_text(parse_trace(text, "fuzz-rewritten")) != text) std::abort();
  return 0;
}
