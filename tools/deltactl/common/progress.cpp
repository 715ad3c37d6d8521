#include "common/progress.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace deltactl {
namespace {

constexpr int kBarWidth = 24;

std::string seconds_text(std::chrono::steady_clock::duration d) {
  const long s = static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(d).count());
  char text[32];
  if (s < 60) std::snprintf(text, sizeof text, "%lds", s);
  else std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  return text;
}

// Columns of the terminal: a bar longer than its line would wrap, and erasing the line would
// then leave the part above behind.
std::size_t terminal_width() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

}  // namespace

Progress::Style Progress::style_for(int fd, std::size_t steps) {
  if (const char* chosen = std::getenv("DELTA_PROGRESS"); chosen && *chosen) {
    const std::string_view value(chosen);
    if (value == "bar") return Style::bar;
    if (value == "lines") return Style::lines;
    if (value == "off") return Style::off;
  }
  if (steps < 2) return Style::off;
  return ::isatty(fd) ? Style::bar : Style::lines;
}

Progress::Progress(std::string task, std::size_t steps)
    : task_(std::move(task)), steps_(steps), style_(style_for(STDERR_FILENO, steps)),
      started_(std::chrono::steady_clock::now()), step_started_(started_) {
  if (style_ == Style::bar) clock_ = std::thread([this] { tick(); });
}

Progress::~Progress() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (clock_.joinable()) clock_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  clear_locked();
}

void Progress::start(const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!what_.empty()) ++done_;
  what_ = what;
  step_started_ = std::chrono::steady_clock::now();
  if (style_ == Style::lines) {
    std::fprintf(stderr, "deltactl: %s [%zu/%zu, %s]: %s\n", task_.c_str(), done_ + 1, steps_,
                 seconds_text(step_started_ - started_).c_str(), what.c_str());
    std::fflush(stderr);
  } else if (style_ == Style::bar) {
    draw_locked();
  }
}

void Progress::write(std::ostream& out, const std::string& text) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool redraw = shown_;
  clear_locked();
  out << text << std::flush;
  if (redraw) draw_locked();
}

void Progress::clear_locked() {
  if (style_ != Style::bar || !shown_) return;
  std::fputs("\r\033[K", stderr);  // to the line's start, and erase it
  std::fflush(stderr);
  shown_ = false;
}

void Progress::draw_locked() {
  const auto now = std::chrono::steady_clock::now();
  const int filled = steps_ ? static_cast<int>(kBarWidth * done_ / steps_) : 0;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kBarWidth, '.');
  char head[160];
  std::snprintf(head, sizeof head, "%s [%s] %zu/%zu %s  ", task_.c_str(), bar.c_str(), done_, steps_,
                seconds_text(now - started_).c_str());
  std::string line = std::string(head) + what_ + " (" + seconds_text(now - step_started_) + ")";
  if (const std::size_t width = terminal_width(); line.size() >= width) line.resize(width - 1);
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void Progress::tick() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::seconds(1));
    if (!stop_ && !what_.empty()) draw_locked();
  }
}

}  // namespace deltactl
