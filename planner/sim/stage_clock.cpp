#include "sim/stage_clock.hpp"

#include <atomic>
#include <ctime>
#include <map>
#include <mutex>

namespace delta::planner {
namespace {

constexpr const char* kSeparator = " › ";

std::atomic<bool> g_enabled{false};

// What was counted, by stage path, in the order first entered.
struct Counted {
  std::mutex mutex;
  std::map<std::string, std::size_t> row_of;
  std::vector<StageTime> rows;
  std::uint64_t generation = 0;  // bumped by enable(true): frames of an earlier count add nothing

  void add(const std::string& path, std::uint64_t generation_seen, std::int64_t self_ns, std::uint64_t simulations,
           std::uint64_t calls) {
    std::lock_guard lock(mutex);
    if (generation_seen != generation) return;
    auto [it, fresh] = row_of.try_emplace(path, rows.size());
    if (fresh) rows.push_back(StageTime{path});
    StageTime& row = rows[it->second];
    row.calls += calls;
    row.simulations += simulations;
    row.self_seconds += double(self_ns) * 1e-9;
  }
};

Counted& counted() {
  static Counted instance;
  return instance;
}

// The thread's CPU time: a thread that waits for others (parallel_for's join) counts nothing.
std::int64_t thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::int64_t(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

struct Frame {
  std::string path;
  std::uint64_t generation = 0;
  std::int64_t since_ns = 0;       // the start of the time not yet added
  std::uint64_t simulations = 0;   // not yet added
};

thread_local std::vector<Frame> t_stack;

std::uint64_t current_generation() {
  std::lock_guard lock(counted().mutex);
  return counted().generation;
}

// Adds the top frame's time and simulations so far, and restarts its count at `now`.
void flush_top(std::int64_t now, std::uint64_t calls = 0) {
  Frame& top = t_stack.back();
  counted().add(top.path, top.generation, now - top.since_ns, top.simulations, calls);
  top.simulations = 0;
  top.since_ns = now;
}

void push(std::string path) {
  const std::int64_t now = thread_cpu_ns();
  if (!t_stack.empty()) flush_top(now);
  t_stack.push_back(Frame{std::move(path), current_generation(), now, 0});
}

void pop(std::uint64_t calls) {
  const std::int64_t now = thread_cpu_ns();
  flush_top(now, calls);
  t_stack.pop_back();
  if (!t_stack.empty()) t_stack.back().since_ns = now;
}

}  // namespace

void StageClock::enable(bool on) {
  if (on) {
    std::lock_guard lock(counted().mutex);
    counted().row_of.clear();
    counted().rows.clear();
    ++counted().generation;
  }
  g_enabled.store(on, std::memory_order_relaxed);
}

bool StageClock::enabled() { return g_enabled.load(std::memory_order_relaxed); }

std::vector<StageTime> StageClock::report() {
  std::vector<StageTime> rows;
  {
    std::lock_guard lock(counted().mutex);
    rows = counted().rows;
  }
  // A stage's total: its own time and that of every stage within it.
  for (StageTime& row : rows) {
    const std::string inner = row.path + kSeparator;
    for (const StageTime& other : rows)
      if (&other == &row || other.path.compare(0, inner.size(), inner) == 0) row.total_seconds += other.self_seconds;
  }
  return rows;
}

StageScope::StageScope(const char* name) {
  if (!StageClock::enabled()) return;
  active_ = true;
  push(t_stack.empty() ? std::string(name) : t_stack.back().path + kSeparator + name);
}

StageScope::~StageScope() {
  if (active_) pop(1);
}

std::string StageScope::current_path() {
  if (!StageClock::enabled() || t_stack.empty()) return {};
  return t_stack.back().path;
}

StageScope::Inherit::Inherit(const std::string& path) {
  if (path.empty() || !StageClock::enabled()) return;
  active_ = true;
  push(path);
}

StageScope::Inherit::~Inherit() {
  if (active_) pop(0);
}

void count_simulation() {
  if (!StageClock::enabled()) return;
  if (t_stack.empty()) counted().add("(outside any stage)", current_generation(), 0, 1, 0);
  else ++t_stack.back().simulations;
}

}  // namespace delta::planner
