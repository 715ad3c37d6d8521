// DELTA's log (logging/log.hpp): messages filled in and filtered by level, written through
// spdlog, and the DELTA_LOG_LEVEL setting.
#include "logging/log.hpp"

#include <catch2/catch.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>

using namespace delta;

namespace {

// Sends the default logger's messages (their text alone) into `out` at `level`.
void capture_into(std::ostringstream& out, spdlog::level::level_enum level) {
  auto logger = std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_st>(out));
  logger->set_pattern("%l|%v");
  logger->set_level(level);
  spdlog::set_default_logger(logger);
}

}  // namespace

// Checked when the program is compiled: a message whose {} and arguments differ in number
// does not build (log_mismatch.cpp, the ctest entry log_placeholders_checked_when_compiled).
static_assert(log::detail::count_braces("no placeholder") == 0);
static_assert(log::detail::count_braces("{} and {}") == 2);
static_assert(log::detail::count_braces("{}{}{}") == 3);
static_assert(log::detail::count_braces("{ } {") == 0);

TEST_CASE("a message's {} are filled in order with text, numbers and bools") {
  std::ostringstream out;
  capture_into(out, spdlog::level::trace);
  const std::string owned = "owned";
  log::warn("text {} {} {}", "literal", owned, std::string_view("view"));
  log::info("numbers {} {} {} {}", -3, std::numeric_limits<std::uint64_t>::max(), std::size_t(7), 0.5);
  log::error("flag {}", true);
  log::debug("no arguments");
  CHECK(out.str() ==
        "warning|text literal owned view\n"
        "info|numbers -3 18446744073709551615 7 0.5\n"
        "error|flag true\n"
        "debug|no arguments\n");
}

TEST_CASE("messages below the logger's level are neither formatted nor written") {
  std::ostringstream out;
  capture_into(out, spdlog::level::warn);
  CHECK_FALSE(log::enabled(log::Level::info));
  CHECK(log::enabled(log::Level::warn));
  CHECK(log::enabled(log::Level::error));
  log::debug("hidden {}", 1);
  log::info("hidden too");
  log::warn("shown {}", 2);
  CHECK(out.str() == "warning|shown 2\n");
  log::write(log::Level::error, "as it is: {}");
  CHECK(out.str() == "warning|shown 2\nerror|as it is: {}\n");
}

TEST_CASE("DELTA_LOG_LEVEL: a name it does not know falls back to warn, with a warning") {
  // Once per process: this is the only test here that configures.
  setenv("DELTA_LOG_LEVEL", "loud", 1);
  log::configure_from_environment();
  CHECK(spdlog::default_logger()->name() == "delta");
  CHECK(spdlog::default_logger()->level() == spdlog::level::warn);
  CHECK_FALSE(log::enabled(log::Level::info));
  setenv("DELTA_LOG_LEVEL", "trace", 1);
  log::configure_from_environment();  // already done: the level stays
  CHECK(spdlog::default_logger()->level() == spdlog::level::warn);
  unsetenv("DELTA_LOG_LEVEL");
}
