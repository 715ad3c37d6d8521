// The bookkeeping of an arena's pages: one Page per page of its reservation, indexed from the
// arena's base. An arena spans the whole device (add_arena), 70,000 pages of an H200, and a
// job mostly uses its low pages, so the table is zero-filled memory from the OS that costs
// RAM and time only where it is touched: a default Page is all zero bits (test_allocator's
// page table test holds that). A vector of Pages wrote all of it at every arena's birth,
// which the planner, making an allocator for each plan it judges, paid thousands of times.
#pragma once

#include "allocator/structures/block.hpp"

#include <cstddef>
#include <type_traits>

namespace delta::detail {

// Zero-filled memory holds Pages only if a Page needs no constructor to run: an aggregate
// with a trivial destructor is an implicit-lifetime type.
static_assert(std::is_aggregate_v<Page> && std::is_trivially_destructible_v<Page>);

class PageTable {
 public:
  PageTable() = default;
  explicit PageTable(std::size_t count);  // throws std::bad_alloc when the host has no room
  ~PageTable();
  PageTable(const PageTable&) = delete;
  PageTable& operator=(const PageTable&) = delete;
  PageTable(PageTable&& other) noexcept;
  PageTable& operator=(PageTable&& other) noexcept;

  Page& operator[](std::size_t index) { return pages_[index]; }
  const Page& operator[](std::size_t index) const { return pages_[index]; }
  std::size_t size() const { return count_; }
  Page* data() { return pages_; }
  const Page* data() const { return pages_; }

 private:
  void release();
  Page* pages_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace delta::detail
