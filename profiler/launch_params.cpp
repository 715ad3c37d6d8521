#include "profiler/launch_params.hpp"

#include "profiler/sources/cupti_launch_decode.hpp"

#include <cuda.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace delta::profiler {
namespace {

std::size_t packed_size(const ParamLayout& layout) {
  std::size_t size = 0;
  for (const ParamSlot& slot : layout) size = std::max(size, slot.offset + slot.size);
  return size;
}

}  // namespace

std::optional<ParamCopy> copy_params(const ParamSource& source, std::vector<std::size_t> pointer_offsets) {
  ParamCopy copy;
  if (source.kernel_params != nullptr) {
    if (source.layout == nullptr) return std::nullopt;
    copy.layout = *source.layout;
    copy.bytes.assign(packed_size(copy.layout), std::byte{0});
    for (std::size_t i = 0; i < copy.layout.size(); ++i) {
      const ParamSlot& slot = copy.layout[i];
      if (source.kernel_params[i] == nullptr) {
        if (slot.size == 0) continue;
        throw std::invalid_argument("copy_params: kernelParams[" + std::to_string(i) + "] is NULL for a parameter of " +
                                    std::to_string(slot.size) + " bytes");
      }
      std::memcpy(copy.bytes.data() + slot.offset, source.kernel_params[i], slot.size);
    }
  } else if (source.extra != nullptr) {
    const auto buffer = extra_param_buffer(source.extra);
    if (buffer.data() == nullptr) return std::nullopt;
    copy.via_extra = true;
    copy.bytes.assign(buffer.begin(), buffer.end());
  }
  for (std::size_t offset : pointer_offsets)
    if (offset + sizeof(std::uint64_t) > copy.bytes.size())
      throw std::invalid_argument("copy_params: a pointer word at offset " + std::to_string(offset) +
                                  " lies outside the " + std::to_string(copy.bytes.size()) + "-byte param buffer");
  copy.pointer_offsets = std::move(pointer_offsets);
  return copy;
}

PatchedParams::PatchedParams(const ParamCopy& copy, std::span<const DevicePtr> ptrs)
    : bytes_(copy.bytes), size_(copy.bytes.size()), via_extra_(copy.via_extra) {
  if (ptrs.size() != copy.pointer_offsets.size())
    throw std::invalid_argument("PatchedParams: " + std::to_string(ptrs.size()) + " addresses for " +
                                std::to_string(copy.pointer_offsets.size()) + " pointer words");
  for (std::size_t i = 0; i < ptrs.size(); ++i) {
    const std::uint64_t word = ptrs[i];
    std::memcpy(bytes_.data() + copy.pointer_offsets[i], &word, sizeof word);
  }
  if (via_extra_) {
    extra_[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    extra_[1] = bytes_.data();
    extra_[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    extra_[3] = &size_;
    extra_[4] = CU_LAUNCH_PARAM_END;
  } else {
    args_.reserve(copy.layout.size());
    for (const ParamSlot& slot : copy.layout) args_.push_back(bytes_.data() + slot.offset);
  }
}

}  // namespace delta::profiler
