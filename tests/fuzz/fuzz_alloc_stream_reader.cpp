// libFuzzer target: any text through the alloc-stream reader of tools/replay; it must answer
// bad input with an exception naming the problem, never crash.
#include "replay/alloc_stream.hpp"

#include <cstdint>
#include <stdexcept>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    delta::replay::parse_alloc_stream(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const std::exception&) {
  }
  return 0;
}
