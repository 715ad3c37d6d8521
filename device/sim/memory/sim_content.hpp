// Symbolic content (SimContent::digest): memory described as an ordered map of runs instead of
// bytes, so what it costs grows with the number of runs, never with their length. A run is
//   fill       every byte is `value` (memset, and fresh memory: zeros);
//   generated  byte i is generated_byte(seed, base + i) (deterministic kernels);
//   literal    real bytes, shared and immutable (host writes and pageable copies).
// Copies move runs (cutting them at the range ends), and a run that continues the one before
// it (same value; same seed at the next index; the next bytes of the same buffer) is joined
// onto it, so repeated copies do not fragment the map.
//
// Not thread-safe on its own: the sim device serialises every call with its mutex.
#pragma once

#include "device/sim/memory/sim_hash.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace delta::sim {

struct Run {
  enum class Kind : std::uint8_t { fill, generated, literal };
  Kind kind = Kind::fill;
  std::uint64_t length = 0;
  std::uint64_t param = 0;  // fill: the byte value; generated: the seed
  std::uint64_t base = 0;   // generated: index of the first byte; literal: offset in `bytes`
  std::shared_ptr<const std::vector<std::uint8_t>> bytes;  // literal only

  static Run fill(std::uint8_t value, std::uint64_t length) { return {Kind::fill, length, value, 0, nullptr}; }
  static Run generated(std::uint64_t seed, std::uint64_t base, std::uint64_t length) {
    return {Kind::generated, length, seed, base, nullptr};
  }
  static Run literal(std::shared_ptr<const std::vector<std::uint8_t>> bytes, std::uint64_t offset,
                     std::uint64_t length) {
    return {Kind::literal, length, 0, offset, std::move(bytes)};
  }

  // Bytes [from, from + length) of this run, as a run of its own.
  Run slice(std::uint64_t from, std::uint64_t length) const;
  // True when `next`, placed right after this run, reads as more of it.
  bool continued_by(const Run& next) const;
  void materialise(std::uint8_t* out) const;
  void hash_into(ContentHasher& hasher) const;
};
using Runs = std::vector<Run>;

std::uint64_t total_length(const Runs& runs);

// Hands out the concatenation of a list of runs front to back, in pieces of any length.
class RunCursor {
 public:
  explicit RunCursor(const Runs& runs) : runs_(runs) {}
  // The next `length` bytes; throws std::logic_error when fewer are left.
  Runs take(std::uint64_t length);

 private:
  const Runs& runs_;
  std::size_t index_ = 0;
  std::uint64_t offset_ = 0;  // into runs_[index_]
};

class SymbolicContent {
 public:
  // `size` bytes of fresh content: zeros, as the pages of SimContent::bytes start out.
  explicit SymbolicContent(std::uint64_t size);

  std::uint64_t size() const { return size_; }
  std::size_t run_count() const { return runs_.size(); }

  // Every function below takes a range that lies inside [0, size()) (callers check; a range
  // outside is a bug in the sim and throws std::logic_error).
  Runs extract(std::uint64_t offset, std::uint64_t length) const;
  // Replaces the content of [offset, offset + total_length(runs)) with `runs`.
  void assign(std::uint64_t offset, const Runs& runs);
  void materialise(std::uint64_t offset, std::uint64_t length, std::uint8_t* out) const;
  void hash_into(std::uint64_t offset, std::uint64_t length, ContentHasher& hasher) const;

  // Runs sorted, each non-empty, together covering [0, size()) without overlap, none a
  // continuation of the one before, literal runs inside their buffers. Throws
  // std::logic_error naming `owner` and the first broken rule.
  void check_invariants(const char* owner) const;

 private:
  using Map = std::map<std::uint64_t, Run>;
  void require_inside(const char* operation, std::uint64_t offset, std::uint64_t length) const;
  // Cuts the run containing `offset` there, so that a run starts at `offset`; returns it (end()
  // when offset == size()).
  Map::iterator split(std::uint64_t offset);
  // Calls visit(slice) for the parts of runs inside [offset, offset + length), in order.
  template <typename Visit>
  void for_each(std::uint64_t offset, std::uint64_t length, Visit&& visit) const;

  std::uint64_t size_;
  Map runs_;  // start offset -> run
};

}  // namespace delta::sim
