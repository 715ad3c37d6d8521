#include "allocator/structures/page_table.hpp"

#include <sys/mman.h>

#include <new>
#include <utility>

namespace delta::detail {

PageTable::PageTable(std::size_t count) : count_(count) {
  if (count == 0) return;
  // Anonymous private memory reads as zeros and is backed page by page on first write.
  void* memory = ::mmap(nullptr, count * sizeof(Page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) throw std::bad_alloc();
  pages_ = std::launder(static_cast<Page*>(memory));
}

PageTable::~PageTable() { release(); }

PageTable::PageTable(PageTable&& other) noexcept
    : pages_(std::exchange(other.pages_, nullptr)), count_(std::exchange(other.count_, 0)) {}

PageTable& PageTable::operator=(PageTable&& other) noexcept {
  if (this != &other) {
    release();
    pages_ = std::exchange(other.pages_, nullptr);
    count_ = std::exchange(other.count_, 0);
  }
  return *this;
}

void PageTable::release() {
  if (pages_ != nullptr) ::munmap(pages_, count_ * sizeof(Page));
  pages_ = nullptr;
  count_ = 0;
}

}  // namespace delta::detail
