// What device memory holds and how it moves: bytes in host pages (SimContent::bytes), runs of
// symbolic content (SimContent::digest), or nothing (SimContent::none). Each function checks
// its device range before it changes anything.
#include "device/sim/memory/sim_memory.hpp"

#include "device/sim/sim_errors.hpp"

#include <delta/sim_device.hpp>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <vector>

namespace delta::sim {

template <typename Visit>
void SimMemory::walk(DevicePtr ptr, std::size_t bytes, Visit&& visit) const {
  DevicePtr cursor = ptr;
  std::size_t done = 0;
  while (done < bytes) {
    DevicePtr start = 0;
    const Mapping* mapping = mapping_containing(cursor, &start);
    std::size_t length = bytes - done;
    if (mapping != nullptr) {
      length = std::min<std::size_t>(length, start + mapping->size - cursor);
      visit(mapping, static_cast<std::uint64_t>(cursor - start), length, done);
    } else {
      // Up to the next mapping, or to the end of the range.
      const auto next = mappings_.upper_bound(cursor);
      if (next != mappings_.end()) length = std::min<std::size_t>(length, next->first - cursor);
      visit(nullptr, 0, length, done);
    }
    cursor += length;
    done += length;
  }
}

void SimMemory::copy_in(const char* operation, DevicePtr dst, const void* src, std::size_t bytes) {
  check_mapped(operation, dst, bytes);
  const auto* from = static_cast<const std::uint8_t*>(src);
  if (content_ == SimContent::digest) {
    // One buffer for the whole copy, shared by the run each mapping receives.
    auto buffer = std::make_shared<const std::vector<std::uint8_t>>(from, from + bytes);
    walk(dst, bytes, [&](const Mapping* mapping, std::uint64_t offset, std::size_t length, std::size_t done) {
      mapping->symbolic->assign(offset, {Run::literal(buffer, done, length)});
    });
    return;
  }
  if (content_ != SimContent::bytes) return;
  walk(dst, bytes, [&](const Mapping* mapping, std::uint64_t offset, std::size_t length, std::size_t done) {
    std::memcpy(mapping->data + offset, from + done, length);
  });
}

void SimMemory::copy_out(const char* operation, void* dst, DevicePtr src, std::size_t bytes) const {
  check_mapped(operation, src, bytes);
  auto* to = static_cast<std::uint8_t*>(dst);
  if (content_ == SimContent::none) return;
  walk(src, bytes, [&](const Mapping* mapping, std::uint64_t offset, std::size_t length, std::size_t done) {
    if (mapping->symbolic != nullptr) {
      mapping->symbolic->materialise(offset, length, to + done);
    } else {
      std::memcpy(to + done, mapping->data + offset, length);
    }
  });
}

void SimMemory::copy_within(const char* operation, DevicePtr dst, DevicePtr src, std::size_t bytes) {
  check_mapped(operation, src, bytes);
  check_mapped(operation, dst, bytes);
  if (content_ == SimContent::none) return;
  if (content_ == SimContent::digest) {
    // Extracting first makes overlapping ranges behave like memmove.
    store(operation, dst, extract(operation, src, bytes));
    return;
  }
  // Staged through a bounded buffer: the two ranges may sit on different handles, or on the
  // same handle mapped twice. Overlapping ranges behave like memmove: when the destination
  // starts inside the source, the chunks go from the end backwards.
  constexpr std::size_t kChunk = std::size_t{4} << 20;
  std::vector<std::uint8_t> staging(std::min(bytes, kChunk));
  const bool backwards = dst > src && dst - src < bytes;
  std::size_t done = 0;
  while (done != bytes) {
    const std::size_t run = std::min(bytes - done, kChunk);
    const std::size_t offset = backwards ? bytes - done - run : done;
    copy_out(operation, staging.data(), src + offset, run);
    copy_in(operation, dst + offset, staging.data(), run);
    done += run;
  }
}

void SimMemory::fill(const char* operation, DevicePtr dst, std::uint8_t value, std::size_t bytes) {
  check_mapped(operation, dst, bytes);
  if (content_ == SimContent::none) return;
  walk(dst, bytes, [&](const Mapping* mapping, std::uint64_t offset, std::size_t length, std::size_t) {
    if (mapping->symbolic != nullptr) {
      mapping->symbolic->assign(offset, {Run::fill(value, length)});
    } else {
      std::memset(mapping->data + offset, value, length);
    }
  });
}

Runs SimMemory::extract(const char* operation, DevicePtr src, std::size_t bytes) const {
  check_mapped(operation, src, bytes);
  if (content_ != SimContent::digest) throw std::logic_error("sim: SimMemory::extract outside SimContent::digest");
  Runs out;
  walk(src, bytes, [&](const Mapping* mapping, std::uint64_t offset, std::size_t length, std::size_t) {
    Runs part = mapping->symbolic->extract(offset, length);
    out.insert(out.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  });
  return out;
}

void SimMemory::store(const char* operation, DevicePtr dst, const Runs& runs) {
  const std::size_t bytes = total_length(runs);
  check_mapped(operation, dst, bytes);
  if (content_ != SimContent::digest) throw std::logic_error("sim: SimMemory::store outside SimContent::digest");
  RunCursor cursor(runs);
  walk(dst, bytes, [&](const Mapping* mapping, std::uint64_t offset, std::size_t length, std::size_t) {
    mapping->symbolic->assign(offset, cursor.take(length));
  });
}

std::uint64_t SimMemory::hash(const char* operation, DevicePtr ptr, std::size_t bytes, bool tolerate_unmapped) const {
  if (tolerate_unmapped) {
    check_range(operation, ptr, bytes);
  } else {
    check_mapped(operation, ptr, bytes);
  }
  if (content_ == SimContent::none) throw std::logic_error("sim: SimMemory::hash under SimContent::none");
  ContentHasher hasher;
  walk(ptr, bytes, [&](const Mapping* mapping, std::uint64_t offset, std::size_t length, std::size_t done) {
    if (mapping == nullptr) {
      hasher.generated(kSimPoisonSeed, ptr + done, length);
    } else if (mapping->symbolic != nullptr) {
      mapping->symbolic->hash_into(offset, length, hasher);
    } else {
      hasher.bytes(mapping->data + offset, length);
    }
  });
  return hasher.finish();
}

void SimMemory::generate(const char* operation, DevicePtr dst, std::size_t bytes, std::uint64_t seed,
                         bool tolerate_unmapped) {
  if (tolerate_unmapped) {
    check_range(operation, dst, bytes);
  } else {
    check_mapped(operation, dst, bytes);
  }
  if (content_ == SimContent::none) return;
  walk(dst, bytes, [&](const Mapping* mapping, std::uint64_t offset, std::size_t length, std::size_t done) {
    if (mapping == nullptr) return;  // a write to unmapped memory goes nowhere
    if (mapping->symbolic != nullptr) {
      mapping->symbolic->assign(offset, {Run::generated(seed, done, length)});
    } else {
      generate_bytes(seed, done, mapping->data + offset, length);
    }
  });
}

std::size_t SimMemory::content_runs() const {
  std::size_t runs = 0;
  for (const auto& [handle, physical] : physical_) {
    if (physical.symbolic) runs += physical.symbolic->run_count();
  }
  return runs;
}

}  // namespace delta::sim
