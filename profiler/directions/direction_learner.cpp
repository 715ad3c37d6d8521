#include "profiler/directions/direction_learner.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace delta::profiler {

const char* to_string(Direction direction) {
  switch (direction) {
    case Direction::touch: return "touch";
    case Direction::read: return "read";
    case Direction::write: return "write";
    case Direction::readwrite: return "readwrite";
  }
  return "?";
}

DirectionLearner::DirectionLearner(Fingerprinter& fingerprinter, std::uint32_t learning_iterations)
    : fingerprinter_(fingerprinter), learning_iterations_(learning_iterations) {}

std::size_t DirectionLearner::before(std::uint32_t iteration, std::uint32_t position, std::string name,
                                     std::vector<TouchedBlock> blocks, std::uint64_t stream) {
  Observation o;
  o.iteration = iteration;
  o.position = position;
  o.name = std::move(name);
  o.stream = stream;
  o.blocks = std::move(blocks);
  o.fresh.reserve(o.blocks.size());
  std::vector<FingerprintRange> ranges;
  for (const TouchedBlock& block : o.blocks) {
    o.fresh.push_back(!used_.count(block.id));
    ranges.push_back({block.address, block.bytes});
    counters_.bytes_fingerprinted += block.bytes;
  }
  o.before = fingerprints_.size();
  fingerprints_.resize(fingerprints_.size() + 2 * ranges.size(), 0);  // before, then after
  o.after = o.before + ranges.size();
  // A deque's elements are not contiguous: each range gets its own slot.
  for (std::size_t i = 0; i < ranges.size(); ++i)
    fingerprinter_.submit(std::span(&ranges[i], 1), stream, &fingerprints_[o.before + i]);
  counters_.blocks_fingerprinted += ranges.size();
  observations_.push_back(std::move(o));
  return observations_.size() - 1;
}

void DirectionLearner::after(std::size_t ticket) {
  if (ticket >= observations_.size()) throw std::out_of_range("direction learner: unknown ticket");
  Observation& o = observations_[ticket];
  if (o.done) throw std::logic_error("direction learner: after() twice for one launch");
  for (std::size_t i = 0; i < o.blocks.size(); ++i) {
    const FingerprintRange range{o.blocks[i].address, o.blocks[i].bytes};
    fingerprinter_.submit(std::span(&range, 1), o.stream, &fingerprints_[o.after + i]);
    used_.insert(o.blocks[i].id);
    counters_.bytes_fingerprinted += range.bytes;
  }
  counters_.blocks_fingerprinted += o.blocks.size();
  counters_.launches_observed++;
  o.done = true;
}

std::size_t DirectionLearner::take_slots(const Observation& o, std::span<const FingerprintRange> ranges,
                                          std::uint64_t stream) {
  if (ranges.size() != o.blocks.size()) throw std::invalid_argument("direction learner: one copy per block");
  const std::size_t first = fingerprints_.size();
  fingerprints_.resize(first + ranges.size(), 0);
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    fingerprinter_.submit(ranges.subspan(i, 1), stream, &fingerprints_[first + i]);
    counters_.bytes_fingerprinted += ranges[i].bytes;
  }
  counters_.blocks_fingerprinted += ranges.size();
  return first;
}

void DirectionLearner::copies(std::size_t ticket, Copies kind, std::span<const FingerprintRange> ranges,
                              std::uint64_t stream) {
  if (ticket >= observations_.size()) throw std::out_of_range("direction learner: unknown ticket");
  Observation& o = observations_[ticket];
  if (!o.done || !replaying(o.iteration)) throw std::logic_error("direction learner: copies of a launch not replayed");
  std::size_t& slot = kind == Copies::replayed ? o.replayed : kind == Copies::permuted_before ? o.permuted_before : o.permuted_after;
  if (slot != Observation::kNone) throw std::logic_error("direction learner: the same copies twice");
  if (kind == Copies::permuted_after && o.permuted_before == Observation::kNone)
    throw std::logic_error("direction learner: permuted copies after without before");
  slot = take_slots(o, ranges, stream);
  if (kind != Copies::permuted_before) counters_.replays++;
}

void DirectionLearner::note_uses(std::span<const std::uint64_t> blocks) {
  for (const std::uint64_t block : blocks) used_.insert(block);
}

namespace {

// What the observations of one parameter block say.
struct Evidence {
  bool changed = false, all_fresh = true;
  std::set<std::uint64_t> befores;
  std::size_t seen = 0;
  bool replayed = false, reproduced = false;
  bool permuted_changed = false, permuted_unchanged = false;
  bool unchanged_over_contents() const { return !changed && seen >= 2 && befores.size() >= 2; }
};

}  // namespace

Direction decide(const UseEvidence& e) {
  // A write seen here, by the same kernel on this parameter elsewhere, or by the replay on
  // permuted bytes (then the real launch wrote the same bytes back): written, and read too
  // unless the block was always fresh.
  if (e.changed_here || e.kernel_writes_it || e.permuted_changed)
    return e.fresh_every_time ? Direction::write : Direction::readwrite;
  // Never changed: a read on a second signal (a block written without being read cannot keep
  // two different contents unchanged).
  if (e.unchanged_over_contents || e.permuted_unchanged) return Direction::read;
  return Direction::touch;
}

LearnedDirections DirectionLearner::conclude() {
  fingerprinter_.drain();
  auto add = [&](Evidence& e, const Observation& o, std::size_t use) {
    const std::uint64_t before = fingerprints_[o.before + use], after = fingerprints_[o.after + use];
    e.changed = e.changed || before != after;
    e.all_fresh = e.all_fresh && o.fresh[use];
    e.befores.insert(before);
    e.seen++;
    if (o.replayed != Observation::kNone) {
      e.replayed = true;
      e.reproduced = e.reproduced || fingerprints_[o.replayed + use] == after;
    }
    if (o.permuted_after != Observation::kNone) {
      const std::uint64_t p0 = fingerprints_[o.permuted_before + use], p1 = fingerprints_[o.permuted_after + use];
      e.permuted_changed = e.permuted_changed || p0 != p1;
      // Only over bytes that differ from what the real launch saw (a constant block rotates
      // into itself and proves nothing).
      e.permuted_unchanged = e.permuted_unchanged || (p0 == p1 && p0 != before);
    }
  };
  // Per place in the step (this use, every learning iteration) and per kernel (the same
  // parameter block of every launch of the kernel with that many blocks).
  std::map<std::uint32_t, std::vector<const Observation*>> by_position;
  std::map<std::pair<std::string, std::size_t>, std::vector<Evidence>> by_kernel;
  for (const Observation& o : observations_) {
    if (!o.done) continue;
    by_position[o.position].push_back(&o);
    auto& slots = by_kernel[{o.name, o.blocks.size()}];
    slots.resize(o.blocks.size());
    for (std::size_t use = 0; use < o.blocks.size(); ++use) add(slots[use], o, use);
  }
  LearnedDirections out;
  for (const auto& [position, seen] : by_position) {
    LearnedLaunch launch;
    launch.name = seen.front()->name;
    const std::size_t n = seen.front()->blocks.size();
    launch.uses.assign(n, Direction::touch);
    launch.swap_only.assign(n, false);
    // The same place must hold the same launch in every iteration, or nothing is learned there.
    const bool alike = std::all_of(seen.begin(), seen.end(), [&](const Observation* o) {
      return o->name == launch.name && o->blocks.size() == n;
    });
    if (alike) {
      const std::vector<Evidence>& kernel = by_kernel.at({launch.name, n});
      for (std::size_t use = 0; use < n; ++use) {
        Evidence here;
        for (const Observation* o : seen) add(here, *o, use);
        UseEvidence e;
        e.changed_here = here.changed;
        e.fresh_every_time = here.all_fresh;
        e.kernel_writes_it = kernel[use].changed;
        e.unchanged_over_contents = here.unchanged_over_contents() || kernel[use].unchanged_over_contents();
        e.permuted_changed = here.permuted_changed;
        e.permuted_unchanged = here.permuted_unchanged;
        launch.uses[use] = decide(e);
        // A written block is regenerated only where a replay reproduced its bytes.
        const bool writes = launch.uses[use] == Direction::write || launch.uses[use] == Direction::readwrite;
        launch.swap_only[use] = writes && !here.reproduced;
      }
    }
    out.emplace(position, std::move(launch));
  }
  return out;
}

void DirectionLearner::check_invariants() const {
  std::uint64_t blocks = 0;
  std::map<std::uint32_t, std::uint32_t> last_position;
  for (std::size_t t = 0; t < observations_.size(); ++t) {
    const Observation& o = observations_[t];
    const std::string where = "direction learner: observation " + std::to_string(t) + ": ";
    if (o.fresh.size() != o.blocks.size()) throw std::logic_error(where + "freshness not known for every block");
    if (o.after != o.before + o.blocks.size() || o.after + o.blocks.size() > fingerprints_.size())
      throw std::logic_error(where + "fingerprint slots out of place");
    if (!learning(o.iteration)) throw std::logic_error(where + "taken outside the learning iterations");
    auto [it, first] = last_position.try_emplace(o.iteration, o.position);
    if (!first) {
      if (o.position <= it->second) throw std::logic_error(where + "positions of an iteration not increasing");
      it->second = o.position;
    }
    for (const TouchedBlock& block : o.blocks)
      if (o.done && !used_.count(block.id)) throw std::logic_error(where + "a block it used is still fresh");
    blocks += o.blocks.size() * (o.done ? 2 : 1);
    for (const std::size_t slot : {o.replayed, o.permuted_before, o.permuted_after}) {
      if (slot == Observation::kNone) continue;
      if (!o.done || !replaying(o.iteration)) throw std::logic_error(where + "copies of a launch not replayed");
      if (slot + o.blocks.size() > fingerprints_.size()) throw std::logic_error(where + "copy slots out of place");
      blocks += o.blocks.size();
    }
    if ((o.permuted_before == Observation::kNone) != (o.permuted_after == Observation::kNone) && o.done &&
        o.permuted_after != Observation::kNone)
      throw std::logic_error(where + "permuted copies after without before");
  }
  if (blocks != counters_.blocks_fingerprinted) throw std::logic_error("direction learner: counters disagree with observations");
}

DirectionApplication apply_directions(trace::Trace& trace, const LearnedDirections& learned) {
  DirectionApplication out;
  for (const trace::Iteration& iteration : trace.iterations) {
    std::uint32_t position = 0;
    for (std::uint64_t i = iteration.first_op; i < iteration.end_op; ++i) {
      trace::Op& op = trace.ops[i];
      if (op.kind != trace::OpKind::kernel) continue;
      const auto found = learned.find(position++);
      std::vector<trace::BlockUse> touches, known;
      for (const trace::BlockUse& use : op.blocks) (use.access == trace::Access::touch ? touches : known).push_back(use);
      if (touches.empty()) continue;
      if (found == learned.end() || found->second.name != op.name || found->second.uses.size() != touches.size() ||
          found->second.swap_only.size() != touches.size()) {
        out.left_touch += touches.size();
        continue;
      }
      std::vector<trace::BlockUse> uses = known;
      for (std::size_t k = 0; k < touches.size(); ++k) {
        const std::uint64_t block = touches[k].block;
        if (found->second.swap_only[k]) {
          // Replays do not reproduce it: the planner must not regenerate it, and a touch is
          // what it never regenerates from. Listed in the trace's metadata.
          uses.push_back({block, trace::Access::touch});
          out.swap_only.push_back(block);
          out.left_touch++;
          continue;
        }
        switch (found->second.uses[k]) {
          case Direction::touch: uses.push_back({block, trace::Access::touch}); break;
          case Direction::read: uses.push_back({block, trace::Access::read}); break;
          case Direction::write: uses.push_back({block, trace::Access::write}); break;
          case Direction::readwrite:
            uses.push_back({block, trace::Access::read});
            uses.push_back({block, trace::Access::write});
            break;
        }
        (found->second.uses[k] == Direction::touch ? out.left_touch : out.directed)++;
      }
      op.blocks = std::move(uses);
    }
  }
  return out;
}

}  // namespace delta::profiler
