#include "device/sim/memory/sim_hash.hpp"

#include <delta/sim_device.hpp>

#include <cstring>

namespace delta::sim {

namespace {

void store_word(std::uint64_t word, std::uint8_t* out) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(out, &word, sizeof word);
  } else {
    for (int k = 0; k < 8; ++k) out[k] = static_cast<std::uint8_t>(word >> (8 * k));
  }
}

std::uint64_t load_word(const std::uint8_t* in) {
  std::uint64_t word = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&word, in, sizeof word);
  } else {
    for (int k = 0; k < 8; ++k) word |= std::uint64_t{in[k]} << (8 * k);
  }
  return word;
}

// Folds the values of one segment into a running state: each value is mixed in turn, so
// neither the order nor the boundaries between values can be confused.
std::uint64_t fold(std::uint64_t state, std::uint64_t value) { return mix64(state ^ mix64(value + 0x632BE59BD9B4E019ULL)); }

}  // namespace

void generate_bytes(std::uint64_t seed, std::uint64_t base, std::uint8_t* out, std::size_t length) {
  std::size_t done = 0;
  // Up to the next word boundary byte by byte, whole words, then the tail.
  while (done < length && ((base + done) & 7) != 0) {
    out[done] = generated_byte(seed, base + done);
    ++done;
  }
  while (length - done >= 8) {
    store_word(generated_word(seed, (base + done) >> 3), out + done);
    done += 8;
  }
  while (done < length) {
    out[done] = generated_byte(seed, base + done);
    ++done;
  }
}

void ByteHash::update(const std::uint8_t* data, std::size_t length) {
  length_ += length;
  std::size_t done = 0;
  while (done < length && partial_bytes_ != 0) {
    partial_ |= std::uint64_t{data[done++]} << (8 * partial_bytes_);
    if (++partial_bytes_ == 8) {
      absorb(partial_);
      partial_ = 0;
      partial_bytes_ = 0;
    }
  }
  while (length - done >= 8) {
    absorb(load_word(data + done));
    done += 8;
  }
  while (done < length) partial_ |= std::uint64_t{data[done++]} << (8 * partial_bytes_++);
}

std::uint64_t ByteHash::finish() const {
  // The length goes in last, so a trailing zero byte is not the same as no byte.
  return mix64(mix64(state_ ^ partial_) ^ length_);
}

void ContentHasher::flush() {
  switch (kind_) {
    case Kind::none: return;
    case Kind::fill: state_ = fold(fold(fold(state_, 1), param_), length_); break;
    case Kind::generated: state_ = fold(fold(fold(fold(state_, 2), param_), base_), length_); break;
    case Kind::bytes: state_ = fold(fold(fold(state_, 3), bytes_.finish()), length_); break;
  }
  kind_ = Kind::none;
  length_ = 0;
}

void ContentHasher::fill(std::uint8_t value, std::uint64_t length) {
  if (length == 0) return;
  total_ += length;
  if (kind_ == Kind::fill && param_ == value) {
    length_ += length;
    return;
  }
  flush();
  kind_ = Kind::fill;
  param_ = value;
  length_ = length;
}

void ContentHasher::generated(std::uint64_t seed, std::uint64_t base, std::uint64_t length) {
  if (length == 0) return;
  total_ += length;
  if (kind_ == Kind::generated && param_ == seed && base_ + length_ == base) {
    length_ += length;
    return;
  }
  flush();
  kind_ = Kind::generated;
  param_ = seed;
  base_ = base;
  length_ = length;
}

void ContentHasher::bytes(const std::uint8_t* data, std::size_t length) {
  if (length == 0) return;
  total_ += length;
  if (kind_ != Kind::bytes) {
    flush();
    kind_ = Kind::bytes;
    bytes_ = ByteHash{};
  }
  bytes_.update(data, length);
  length_ += length;
}

std::uint64_t ContentHasher::finish() {
  flush();
  return fold(state_, total_);
}

}  // namespace delta::sim

namespace delta {

std::uint8_t sim_generated_byte(std::uint64_t seed, std::uint64_t index) { return sim::generated_byte(seed, index); }

std::uint64_t sim_write_seed(std::uint64_t launch_seed, std::size_t write_index,
                             std::span<const std::uint64_t> read_digests) {
  std::uint64_t state = sim::mix64(launch_seed ^ 0xA0761D6478BD642FULL);
  state = sim::mix64(state ^ sim::mix64(write_index + 0xE7037ED1A0B428DBULL));
  for (const std::uint64_t digest : read_digests) state = sim::mix64(state ^ sim::mix64(digest));
  // The count goes in too, so a launch reading one more range of "empty" content differs.
  return sim::mix64(state ^ read_digests.size());
}

}  // namespace delta
