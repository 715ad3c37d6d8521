// Live blocks by address: an open-addressing hash map with linear probing. The fast path
// looks up or inserts one pointer per call, so unlike std::unordered_map it never allocates
// per entry; it only grows (rehashing) when the load passes one half.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace delta::detail {

template <typename Value>
class PointerMap {
 public:
  explicit PointerMap(std::size_t initial_capacity = 1024) { slots_.resize(round_up(initial_capacity)); }

  Value* find(std::uintptr_t key) const {
    if (key <= kTombstone) return nullptr;
    for (std::size_t i = home(key);; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (s.key == key) return const_cast<Value*>(&s.value);
      if (s.key == kEmpty) return nullptr;
    }
  }
  // Inserts or overwrites. `key` must not be 0 or 1 (reserved markers): device pointers are
  // 512-aligned and never that small.
  void insert(std::uintptr_t key, Value value) {
    if ((used_ + 1) * 2 > slots_.size()) rehash(size_ * 4 > slots_.size() ? slots_.size() * 2 : slots_.size());
    std::size_t tomb = SIZE_MAX;
    for (std::size_t i = home(key);; i = (i + 1) & mask()) {
      Slot& s = slots_[i];
      if (s.key == key) {
        s.value = value;
        return;
      }
      if (s.key == kTombstone && tomb == SIZE_MAX) tomb = i;
      if (s.key == kEmpty) {
        std::size_t at = tomb != SIZE_MAX ? tomb : i;
        if (at == i) ++used_;
        slots_[at] = Slot{key, value};
        ++size_;
        return;
      }
    }
  }
  bool erase(std::uintptr_t key) {
    if (key <= kTombstone) return false;
    for (std::size_t i = home(key);; i = (i + 1) & mask()) {
      Slot& s = slots_[i];
      if (s.key == key) {
        s.key = kTombstone;
        --size_;
        return true;
      }
      if (s.key == kEmpty) return false;
    }
  }
  std::size_t size() const { return size_; }
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.key > kTombstone) f(s.key, s.value);
  }

 private:
  static constexpr std::uintptr_t kEmpty = 0, kTombstone = 1;
  struct Slot {
    std::uintptr_t key = kEmpty;
    Value value{};
  };
  static std::size_t round_up(std::size_t n) {
    std::size_t c = 16;
    while (c < n) c *= 2;
    return c;
  }
  std::size_t mask() const { return slots_.size() - 1; }
  std::size_t home(std::uintptr_t key) const {
    return static_cast<std::size_t>(((key >> 9) * 0x9E3779B97F4A7C15ull) >> 20) & mask();
  }
  void rehash(std::size_t capacity) {
    std::vector<Slot> old(round_up(capacity));
    old.swap(slots_);
    size_ = used_ = 0;
    for (const Slot& s : old)
      if (s.key > kTombstone) insert(s.key, s.value);
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;  // live entries
  std::size_t used_ = 0;  // live entries and tombstones
};

}  // namespace delta::detail
