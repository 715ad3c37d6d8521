#include "replay/replayer.hpp"

#include <chrono>
#include <stdexcept>
#include <unordered_map>

namespace delta::replay {
namespace {

// Accumulates the time-weighted mean of 1 - allocated/reserved. The state after an event
// holds until the next event, so each state is weighted by the time to the next one; a stream
// without times (or all at one instant) falls back to an unweighted mean over events.
class FragmentationMean {
 public:
  void observe(const TargetStats& s, double t_us) {
    double frag = s.reserved_bytes ? 1.0 - double(s.allocated_bytes) / double(s.reserved_bytes) : 0.0;
    if (have_previous_) {
      weighted_ += previous_ * (t_us - previous_t_);
      duration_ += t_us - previous_t_;
    }
    unweighted_ += frag;
    ++count_;
    previous_ = frag;
    previous_t_ = t_us;
    have_previous_ = true;
  }
  double mean() const {
    if (duration_ > 0) return weighted_ / duration_;
    return count_ ? unweighted_ / double(count_) : 0.0;
  }

 private:
  bool have_previous_ = false;
  double previous_ = 0, previous_t_ = 0, weighted_ = 0, duration_ = 0, unweighted_ = 0;
  std::size_t count_ = 0;
};

}  // namespace

ReplayResult replay(const AllocStream& stream, ReplayTarget& target, const ReplayOptions& options) {
  ReplayResult result;
  result.policy = target.name();
  result.peak_live = stream.peak_live_bytes;
  const std::size_t total = stream.initial_live.size() + stream.events.size();
  result.events = total;

  std::unordered_map<std::uint64_t, std::uintptr_t> address_of;  // live id -> block address
  address_of.reserve(stream.initial_live.size() + 1024);
  FragmentationMean fragmentation;
  const std::size_t progress_step = std::max<std::size_t>(1, total / 100);
  std::size_t done = 0;

  auto after_event = [&](const char* list, std::size_t index) {
    ++done;
    if (options.check_every != 0 && done % options.check_every == 0) {
      try {
        target.check_invariants();
      } catch (const std::exception& e) {
        throw std::runtime_error(target.name() + ": invariant broken after " + list + "[" +
                                 std::to_string(index) + "]: " + e.what());
      }
      ++result.invariant_checks;
    }
    if (options.progress && (done % progress_step == 0 || done == total)) options.progress(double(done) / double(total));
  };
  auto allocate = [&](std::uint64_t id, std::uint64_t size, std::uint64_t stream_id) {
    auto address = target.allocate(size, stream_id);
    if (address) {
      address_of.emplace(id, *address);
    }  // a failure is counted by the target's own OOM statistic
  };

  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < stream.initial_live.size(); ++i) {
    const LiveBlock& b = stream.initial_live[i];
    allocate(b.id, b.size, b.stream);
    after_event("initial_live", i);
  }
  for (std::size_t i = 0; i < stream.events.size(); ++i) {
    const AllocEvent& e = stream.events[i];
    if (e.op == AllocEvent::Op::alloc) {
      allocate(e.id, e.size, e.stream);
    } else if (auto it = address_of.find(e.id); it != address_of.end()) {
      target.free(it->second);
      address_of.erase(it);
    } else {
      ++result.skipped_frees;
    }
    fragmentation.observe(target.stats(), e.t_us);
    after_event("events", i);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const TargetStats s = target.stats();
  result.peak_allocated = s.allocated_peak;
  result.peak_reserved = s.reserved_peak;
  result.reserved_over_live = result.peak_live ? double(s.reserved_peak) / double(result.peak_live) : 0.0;
  result.mean_fragmentation = fragmentation.mean();
  const auto lookups = s.cache_hits + s.cache_misses;
  result.cache_hit_rate = lookups ? double(s.cache_hits) / double(lookups) : 0.0;
  result.ooms = s.ooms;
  result.seconds = seconds;
  result.events_per_second = seconds > 0 ? double(total) / seconds : 0.0;
  return result;
}

}  // namespace delta::replay
