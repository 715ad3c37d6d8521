#include "device/sim/memory/sim_content.hpp"

#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace delta::sim {

// ---- runs ----

Run Run::slice(std::uint64_t from, std::uint64_t length) const {
  Run out = *this;
  out.length = length;
  // A fill is the same everywhere; the others move their start along.
  if (kind != Kind::fill) out.base = base + from;
  return out;
}

bool Run::continued_by(const Run& next) const {
  if (kind != next.kind) return false;
  switch (kind) {
    case Kind::fill: return param == next.param;
    case Kind::generated: return param == next.param && base + length == next.base;
    case Kind::literal: return bytes == next.bytes && base + length == next.base;
  }
  return false;
}

void Run::materialise(std::uint8_t* out) const {
  switch (kind) {
    case Kind::fill: std::memset(out, static_cast<int>(param), length); break;
    case Kind::generated: generate_bytes(param, base, out, length); break;
    case Kind::literal: std::memcpy(out, bytes->data() + base, length); break;
  }
}

void Run::hash_into(ContentHasher& hasher) const {
  switch (kind) {
    case Kind::fill: hasher.fill(static_cast<std::uint8_t>(param), length); break;
    case Kind::generated: hasher.generated(param, base, length); break;
    case Kind::literal: hasher.bytes(bytes->data() + base, length); break;
  }
}

std::uint64_t total_length(const Runs& runs) {
  std::uint64_t total = 0;
  for (const Run& run : runs) total += run.length;
  return total;
}

Runs RunCursor::take(std::uint64_t length) {
  Runs out;
  while (length != 0) {
    if (index_ == runs_.size()) throw std::logic_error("sim: RunCursor::take: asked for more bytes than the runs hold");
    const Run& run = runs_[index_];
    const std::uint64_t piece = std::min(run.length - offset_, length);
    if (piece != 0) out.push_back(run.slice(offset_, piece));
    offset_ += piece;
    length -= piece;
    if (offset_ == run.length) {
      ++index_;
      offset_ = 0;
    }
  }
  return out;
}

// ---- symbolic content ----

SymbolicContent::SymbolicContent(std::uint64_t size) : size_(size) {
  if (size != 0) runs_.emplace(0, Run::fill(0, size));
}

void SymbolicContent::require_inside(const char* operation, std::uint64_t offset, std::uint64_t length) const {
  if (offset > size_ || length > size_ - offset) {
    throw std::logic_error(fmt::format("sim: symbolic content {}: range at offset {} of {} bytes lies outside its {} bytes",
                                       operation, offset, length, size_));
  }
}

SymbolicContent::Map::iterator SymbolicContent::split(std::uint64_t offset) {
  if (offset == size_) return runs_.end();
  auto it = std::prev(runs_.upper_bound(offset));
  if (it->first == offset) return it;
  const std::uint64_t cut = offset - it->first;
  Run tail = it->second.slice(cut, it->second.length - cut);
  it->second.length = cut;
  return runs_.emplace_hint(std::next(it), offset, std::move(tail));
}

template <typename Visit>
void SymbolicContent::for_each(std::uint64_t offset, std::uint64_t length, Visit&& visit) const {
  if (length == 0) return;
  const std::uint64_t end = offset + length;
  for (auto it = std::prev(runs_.upper_bound(offset)); it != runs_.end() && it->first < end; ++it) {
    const std::uint64_t from = std::max(offset, it->first);
    const std::uint64_t to = std::min(end, it->first + it->second.length);
    visit(it->second.slice(from - it->first, to - from));
  }
}

Runs SymbolicContent::extract(std::uint64_t offset, std::uint64_t length) const {
  require_inside("extract", offset, length);
  Runs out;
  for_each(offset, length, [&](Run&& run) { out.push_back(std::move(run)); });
  return out;
}

void SymbolicContent::assign(std::uint64_t offset, const Runs& runs) {
  const std::uint64_t length = total_length(runs);
  require_inside("assign", offset, length);
  if (length == 0) return;
  const auto first = split(offset);
  const auto after = split(offset + length);
  runs_.erase(first, after);
  // Insert the new runs, joining each onto the run before it when it continues it: the run
  // before the range first, then each other; finally the run after the range onto the last.
  auto previous = after == runs_.begin() ? runs_.end() : std::prev(after);
  std::uint64_t position = offset;
  for (const Run& run : runs) {
    if (run.length == 0) continue;
    if (previous != runs_.end() && previous->second.continued_by(run)) {
      previous->second.length += run.length;
    } else {
      previous = runs_.emplace_hint(after, position, run);
    }
    position += run.length;
  }
  if (after != runs_.end() && previous != runs_.end() && previous->second.continued_by(after->second)) {
    previous->second.length += after->second.length;
    runs_.erase(after);
  }
}

void SymbolicContent::materialise(std::uint64_t offset, std::uint64_t length, std::uint8_t* out) const {
  require_inside("materialise", offset, length);
  for_each(offset, length, [&](Run&& run) {
    run.materialise(out);
    out += run.length;
  });
}

void SymbolicContent::hash_into(std::uint64_t offset, std::uint64_t length, ContentHasher& hasher) const {
  require_inside("hash", offset, length);
  for_each(offset, length, [&](Run&& run) { run.hash_into(hasher); });
}

void SymbolicContent::check_invariants(const char* owner) const {
  auto broken = [&](std::uint64_t at, const std::string& rule) {
    throw std::logic_error(fmt::format("sim: symbolic content of {} ({} bytes, {} runs): at offset {}: {}", owner,
                                       size_, runs_.size(), at, rule));
  };
  if (size_ == 0) {
    if (!runs_.empty()) broken(0, "empty content holds runs");
    return;
  }
  std::uint64_t expected = 0;
  const Run* before = nullptr;
  for (const auto& [start, run] : runs_) {
    if (start != expected) broken(start, fmt::format("the run starts at {}, the one before ended at {}", start, expected));
    if (run.length == 0) broken(start, "empty run");
    if (run.length > size_ - start) broken(start, fmt::format("the run of {} bytes runs past the end", run.length));
    if (run.kind == Run::Kind::fill && run.param > 0xFF) {
      broken(start, fmt::format("fill value {} is not a byte", run.param));
    }
    if (run.kind == Run::Kind::literal) {
      if (!run.bytes) broken(start, "literal run without bytes");
      if (run.base > run.bytes->size() || run.length > run.bytes->size() - run.base) {
        broken(start, fmt::format("literal run [{}, +{}) outside its {}-byte buffer", run.base, run.length,
                                  run.bytes->size()));
      }
    } else if (run.bytes) {
      broken(start, "a fill or generated run holds bytes");
    }
    if (before != nullptr && before->continued_by(run)) {
      broken(start, "the run continues the one before it but is not joined");
    }
    expected = start + run.length;
    before = &run;
  }
  if (expected != size_) broken(expected, fmt::format("the runs end at {}, short of the end", expected));
}

}  // namespace delta::sim
