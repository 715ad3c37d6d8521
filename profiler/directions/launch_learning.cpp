#include "profiler/directions/launch_learning.hpp"

#include "profiler/directions/own_work.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

namespace delta::profiler {
namespace {

// Copies start on 256-byte boundaries, as device allocations do (vector loads stay aligned).
std::size_t padded(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

LaunchLearning::LaunchLearning(Recorder& recorder, DirectionLearner& learner, CopyStager& stager)
    : recorder_(recorder), learner_(learner), stager_(stager) {}

bool LaunchLearning::active() const {
  if (recorder_.finished()) return false;
  return learner_.learning(static_cast<std::uint32_t>(recorder_.steps_marked()));
}

LaunchLearning::Pending LaunchLearning::before(const KernelCall& call) {
  Pending pending;
  pending.stream = call.stream;
  if (recorder_.finished()) return pending;
  std::lock_guard lock(mutex_);
  const std::size_t iteration = recorder_.steps_marked();
  if (iteration != position_iteration_) {
    position_iteration_ = iteration;
    next_position_ = 0;
  }
  // Every kernel launch takes its place, learned or not: the recorder counts them all.
  const std::uint32_t position = next_position_++;
  const auto it = static_cast<std::uint32_t>(iteration);
  if (!learner_.learning(it)) return pending;
  ++counters_.launches;
  if (capturing_ > 0) {
    ++counters_.during_capture;
    return pending;
  }
  std::optional<ParamCopy> copy;
  try {
    copy = copy_params(call.params, {});
  } catch (const std::invalid_argument&) {
    copy.reset();  // a NULL kernelParams entry: the driver will refuse it, nothing to learn
  }
  if (!copy) {
    ++counters_.unreadable;
    return pending;
  }
  for (const LiveBlock& block : recorder_.blocks_in_params(copy->bytes))
    pending.blocks.push_back({block.id, block.address, block.size});
  // Every pointer word into a touched block, so a replay can point it into the block's copy.
  std::vector<std::size_t> offsets;
  for_each_param_word(copy->bytes, [&](std::size_t offset, std::uint64_t word) {
    for (std::size_t k = 0; k < pending.blocks.size(); ++k) {
      const TouchedBlock& b = pending.blocks[k];
      if (word >= b.address && word < b.address + b.bytes) {
        offsets.push_back(offset);
        pending.word_block.push_back(k);
        return;
      }
    }
  });
  copy->pointer_offsets = std::move(offsets);
  pending.copy = std::move(*copy);
  OwnWorkScope own;
  if (learner_.replaying(it)) stage(pending);
  pending.ticket = learner_.before(it, position, std::string(call.name), pending.blocks, call.stream);
  ++counters_.learned;
  return pending;
}

void LaunchLearning::stage(Pending& p) {
  std::size_t need = 0;
  for (const TouchedBlock& b : p.blocks) need += 2 * padded(b.bytes);
  if (need == 0) return;
  p.scratch = stager_.allocate(need, p.stream);
  if (p.scratch == 0) {
    ++counters_.no_room;
    return;
  }
  p.scratch_bytes = need;
  std::uint64_t at = p.scratch;
  for (const TouchedBlock& b : p.blocks) {
    p.exact.push_back({at, b.bytes});
    stager_.copy(at, b.address, b.bytes, p.stream);  // before the launch, in stream order
    at += padded(b.bytes);
  }
  for (const TouchedBlock& b : p.blocks) {
    p.permuted.push_back({at, b.bytes});
    at += padded(b.bytes);
  }
}

void LaunchLearning::after(Pending& p, bool launched, const Relaunch& relaunch) {
  if (!p.ticket && p.scratch == 0) return;
  std::lock_guard lock(mutex_);
  OwnWorkScope own;
  if (!launched) {
    // Nothing ran: no after-fingerprint (the learner leaves an unfinished observation a touch).
    ++counters_.refused;
  } else if (p.ticket) {
    learner_.after(*p.ticket);
    if (p.scratch != 0) replay(p, relaunch);
  }
  if (p.scratch != 0) stager_.release(p.scratch, p.scratch_bytes, p.stream);
  p.scratch = 0;
}

std::vector<DevicePtr> LaunchLearning::patched(const Pending& p, const std::vector<FingerprintRange>& copies) const {
  std::vector<DevicePtr> ptrs;
  ptrs.reserve(p.copy.pointer_offsets.size());
  for (std::size_t i = 0; i < p.copy.pointer_offsets.size(); ++i) {
    std::uint64_t word = 0;
    std::memcpy(&word, p.copy.bytes.data() + p.copy.pointer_offsets[i], sizeof word);
    const std::size_t k = p.word_block[i];
    ptrs.push_back(static_cast<DevicePtr>(copies[k].address + (word - p.blocks[k].address)));
  }
  return ptrs;
}

void LaunchLearning::replay(Pending& p, const Relaunch& relaunch) {
  // On the exact copies: does the launch reproduce what it wrote?
  {
    PatchedParams params(p.copy, patched(p, p.exact));
    ++counters_.replays;
    if (!relaunch(params.kernel_params(), params.extra())) {
      ++counters_.failed_replays;
      return;  // not reported: the written blocks stay swap only
    }
  }
  learner_.copies(*p.ticket, DirectionLearner::Copies::replayed, p.exact, p.stream);
  // The same values elsewhere: each copy rotated by 16 bytes (whole elements of any type up to
  // 16 bytes), so indices stay indices and the replay stays in bounds.
  for (std::size_t k = 0; k < p.exact.size(); ++k) {
    const FingerprintRange from = p.exact[k], to = p.permuted[k];
    if (from.bytes >= 32) {
      stager_.copy(to.address, from.address + 16, from.bytes - 16, p.stream);
      stager_.copy(to.address + from.bytes - 16, from.address, 16, p.stream);
    } else {
      stager_.copy(to.address, from.address, from.bytes, p.stream);
    }
  }
  learner_.copies(*p.ticket, DirectionLearner::Copies::permuted_before, p.permuted, p.stream);
  PatchedParams params(p.copy, patched(p, p.permuted));
  ++counters_.replays;
  if (!relaunch(params.kernel_params(), params.extra())) {
    ++counters_.failed_replays;
    return;
  }
  learner_.copies(*p.ticket, DirectionLearner::Copies::permuted_after, p.permuted, p.stream);
}

void LaunchLearning::note_transfer(std::uint64_t dst, std::uint64_t src) {
  if (!active()) return;
  std::uint64_t words[2] = {dst, src};
  std::vector<std::uint64_t> ids;
  for (const LiveBlock& block : recorder_.blocks_in_params(std::as_bytes(std::span(words)))) ids.push_back(block.id);
  std::lock_guard lock(mutex_);
  ++counters_.transfers;
  learner_.note_uses(ids);
}

void LaunchLearning::capture_began() {
  std::lock_guard lock(mutex_);
  ++capturing_;
}

void LaunchLearning::capture_ended() {
  std::lock_guard lock(mutex_);
  if (capturing_ > 0) --capturing_;
}

LaunchLearningCounters LaunchLearning::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void LaunchLearning::check_invariants() const {
  std::lock_guard lock(mutex_);
  const LaunchLearningCounters& c = counters_;
  auto fail = [](const std::string& what) { throw std::logic_error("LaunchLearning: " + what); };
  if (capturing_ < 0) fail("capture count " + std::to_string(capturing_) + " is negative");
  if (c.learned + c.unreadable + c.during_capture != c.launches)
    fail(std::to_string(c.learned) + " learned + " + std::to_string(c.unreadable) + " unreadable + " +
         std::to_string(c.during_capture) + " during capture != " + std::to_string(c.launches) + " launches seen");
  if (c.replays > 2 * c.learned)
    fail(std::to_string(c.replays) + " replays for " + std::to_string(c.learned) + " learned launches (at most two each)");
  if (c.failed_replays > c.replays) fail("more failed replays than replays");
  learner_.check_invariants();
}

}  // namespace delta::profiler
