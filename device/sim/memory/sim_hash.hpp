// Hashing and generated content: the byte function behind generated runs, the canonical
// content hash that SimDevice::digest returns, and the streaming byte hash under both.
//
// The content hash sees content as a sequence of pieces (filled, generated or literal bytes)
// and joins a piece onto the one before whenever it continues it (the same fill value, the
// same seed at the next index, more literal bytes), so the hash depends on what the content
// is, never on how it happens to be cut into runs or where it lives.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace delta::sim {

// splitmix64's finaliser: a bijective mix with full avalanche, cheap enough for every word.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

// Generated content comes in 8-byte words: byte i of the run with `seed` is byte i % 8 (least
// significant first) of word i / 8, so materialising costs one mix per 8 bytes.
constexpr std::uint64_t generated_word(std::uint64_t seed, std::uint64_t word) {
  return mix64(seed ^ mix64(word + 0x9E3779B97F4A7C15ULL));
}
constexpr std::uint8_t generated_byte(std::uint64_t seed, std::uint64_t index) {
  return static_cast<std::uint8_t>(generated_word(seed, index >> 3) >> (8 * (index & 7)));
}

// Writes bytes [base, base + length) of the run with `seed` to `out`.
void generate_bytes(std::uint64_t seed, std::uint64_t base, std::uint8_t* out, std::size_t length);

// A streaming 64-bit hash of a byte string fed in pieces of any size: the result depends only
// on the concatenated bytes.
class ByteHash {
 public:
  void update(const std::uint8_t* data, std::size_t length);
  std::uint64_t finish() const;

 private:
  void absorb(std::uint64_t word) { state_ = std::rotl((state_ ^ mix64(word)) * 0x9FB21C651E98DF25ULL, 29); }

  std::uint64_t state_ = 0x6A09E667F3BCC908ULL;
  std::uint64_t partial_ = 0;      // bytes of an unfinished word, least significant first
  unsigned partial_bytes_ = 0;
  std::uint64_t length_ = 0;
};

// The canonical hash of content fed as pieces, in address order.
class ContentHasher {
 public:
  void fill(std::uint8_t value, std::uint64_t length);
  void generated(std::uint64_t seed, std::uint64_t base, std::uint64_t length);
  void bytes(const std::uint8_t* data, std::size_t length);
  // The hash of everything fed so far (the hasher is spent afterwards).
  std::uint64_t finish();

 private:
  enum class Kind { none, fill, generated, bytes };
  void flush();

  Kind kind_ = Kind::none;
  std::uint64_t param_ = 0;      // fill: the value; generated: the seed
  std::uint64_t base_ = 0;       // generated: the index of the segment's first byte
  std::uint64_t length_ = 0;     // of the pending segment
  ByteHash bytes_;               // of the pending literal segment
  std::uint64_t state_ = 0x243F6A8885A308D3ULL;
  std::uint64_t total_ = 0;
};

}  // namespace delta::sim
