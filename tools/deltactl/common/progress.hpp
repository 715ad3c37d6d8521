// Progress of long work (compare over traces × budgets, bound's solver runs) on stderr: a bar
// redrawn in place when stderr is a terminal, one plain line a step when it is not (a log, a
// pipe), so that CI logs and scripts read it as well as a person does. No C++ progress-bar
// library is packaged by Debian; this is the little that the commands need.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

namespace deltactl {

class Progress {
 public:
  enum class Style { bar, lines, off };

  // `task` names the command in plain lines; `steps` is how many start() calls will come.
  // Style: off for a single step (nothing to follow), else bar on a terminal, lines otherwise;
  // DELTA_PROGRESS=bar|lines|off overrides.
  Progress(std::string task, std::size_t steps);
  ~Progress();  // clears the bar
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Step `what` begins (the previous one, if any, is done).
  void start(const std::string& what);

  // Writes whole lines (`text` ends in a newline) to `out` (stdout): the bar is taken off the
  // screen first and drawn again below them, so that the two never mix on a terminal.
  void write(std::ostream& out, const std::string& text);

  Style style() const { return style_; }

  // The style for a stream: a terminal gets a bar, anything else lines (DELTA_PROGRESS first).
  static Style style_for(int fd, std::size_t steps);

 private:
  void draw_locked();   // the bar, on the line it owns
  void clear_locked();  // the bar off the screen
  void tick();         // the clock thread: the elapsed time of a long step, once a second

  std::string task_;
  std::size_t steps_;
  std::size_t done_ = 0;
  std::string what_;
  Style style_;
  bool shown_ = false;
  bool stop_ = false;
  std::chrono::steady_clock::time_point started_, step_started_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread clock_;
};

}  // namespace deltactl
