// DELTA's log, for the library's own messages (the allocator, the device layer, the recorder).
// Messages go through spdlog, compiled into log.cpp alone; callers see only this header.
//
//   log::warn("DELTA: releasing device memory at shutdown failed: {}", e.what());
//
// Each {} is replaced by the next argument: text (std::string, string_view, const char*),
// an integer, a floating-point number or a bool. Their numbers must agree, which the
// compiler checks, so a message can never throw where it is written (a failing shutdown,
// a CUPTI callback).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

namespace delta::log {

enum class Level { trace, debug, info, warn, error, critical, off };

// Whether a message at `level` would be written now (so arguments are not converted for
// nothing).
bool enabled(Level level) noexcept;
// Writes `message` as it is. Never throws: a message that cannot be written is dropped.
void write(Level level, std::string_view message) noexcept;

// Sends DELTA's messages to stderr (never the job's stdout) under the "delta" logger, at the
// level DELTA_LOG_LEVEL names (trace … off; default warn, and a warning for a name it does not
// know). Once per process; later calls do nothing.
void configure_from_environment();

namespace detail {

// The number of {} in a message, checked against the arguments when the program is compiled.
constexpr std::size_t count_braces(std::string_view text) {
  std::size_t count = 0;
  for (std::size_t i = 0; i + 1 < text.size(); ++i)
    if (text[i] == '{' && text[i + 1] == '}') ++count, ++i;
  return count;
}

template <std::size_t Arguments>
struct Message {
  std::string_view text;
  template <std::size_t N>
  consteval Message(const char (&literal)[N]) : text(literal, N - 1) {
    // A throw while the compiler evaluates this constructor makes the call ill-formed: the
    // build stops at the message, quoting this text.
    if (count_braces(text) != Arguments) throw "the message's {} and its arguments differ in number";
  }
};

std::string number_text(long long value);
std::string number_text(unsigned long long value);
std::string number_text(double value);

template <class T>
std::string as_text(const T& value) {
  if constexpr (std::is_convertible_v<const T&, std::string_view>) return std::string(std::string_view(value));
  else if constexpr (std::is_same_v<T, bool>) return value ? "true" : "false";
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return number_text(static_cast<long long>(value));
  else if constexpr (std::is_integral_v<T>) return number_text(static_cast<unsigned long long>(value));
  else if constexpr (std::is_floating_point_v<T>) return number_text(static_cast<double>(value));
  else static_assert(std::is_void_v<T>, "log: an argument must be text, a number or a bool");
}

// Fills the {} of `text` with `arguments` in order, then writes it. Never throws.
void write_filled(Level level, std::string_view text, const std::string* arguments, std::size_t count) noexcept;

template <class... Args>
void emit(Level level, std::string_view text, const Args&... args) noexcept {
  if (!enabled(level)) return;
  if constexpr (sizeof...(Args) == 0) {
    write(level, text);
  } else {
    try {
      const std::string arguments[] = {as_text(args)...};
      write_filled(level, text, arguments, sizeof...(Args));
    } catch (...) {  // out of memory converting an argument: the message is dropped
    }
  }
}

}  // namespace detail

template <class... Args>
void debug(detail::Message<sizeof...(Args)> message, const Args&... args) noexcept {
  detail::emit(Level::debug, message.text, args...);
}
template <class... Args>
void info(detail::Message<sizeof...(Args)> message, const Args&... args) noexcept {
  detail::emit(Level::info, message.text, args...);
}
template <class... Args>
void warn(detail::Message<sizeof...(Args)> message, const Args&... args) noexcept {
  detail::emit(Level::warn, message.text, args...);
}
template <class... Args>
void error(detail::Message<sizeof...(Args)> message, const Args&... args) noexcept {
  detail::emit(Level::error, message.text, args...);
}

}  // namespace delta::log
