// Allocator options: PyTorch's PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF keys that apply to
// DELTA, and DELTA's own DELTA_* settings. Every malformed value is an error that names the
// option and the value; nothing falls back silently to a default.
#pragma once

#include <delta/allocator.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace delta {

class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Applies a comma-separated "key:value" string (PyTorch's syntax) to `config`. Keys that
// belong to PyTorch's other backends (backend, expandable_segments, pinned_* ...) are
// accepted and ignored; returns their names so the caller can say so. Unknown keys throw.
std::vector<std::string> apply_alloc_conf(std::string_view text, AllocatorConfig& config);

// Parses "123", "64MiB", "1.5GB", "80GiB" ... into bytes. Throws ConfigError naming `what`.
std::size_t parse_byte_size(std::string_view text, std::string_view what);

// The configuration this process asks for: defaults, then PYTORCH_ALLOC_CONF (or its older
// name PYTORCH_CUDA_ALLOC_CONF when the new one is unset), then DELTA_MEMORY_LIMIT,
// DELTA_MEMORY_FRACTION, DELTA_EVENT_LOG, DELTA_OOM_DUMP.
AllocatorConfig config_from_env();

}  // namespace delta
