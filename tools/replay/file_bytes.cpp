#include "replay/file_bytes.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace delta::replay {

std::string read_file_maybe_gzip(const std::string& path) {
  // gzopen reads plain files unchanged, so one path serves both.
  std::unique_ptr<gzFile_s, decltype(&gzclose)> file(gzopen(path.c_str(), "rb"), &gzclose);
  if (!file) {
    throw std::runtime_error(path + ": cannot open (" + std::strerror(errno) + ")");
  }
  gzbuffer(file.get(), 1 << 17);
  std::string bytes;
  char chunk[1 << 16];
  for (;;) {
    int n = gzread(file.get(), chunk, sizeof chunk);
    if (n < 0) {
      int code = 0;
      const char* message = gzerror(file.get(), &code);
      throw std::runtime_error(path + ": cannot read: " +
                               (code == Z_ERRNO ? std::strerror(errno) : message));
    }
    if (n == 0) break;
    bytes.append(chunk, static_cast<std::size_t>(n));
  }
  // A gzip stream cut short reads as a clean end of file followed by this error.
  int code = 0;
  const char* message = gzerror(file.get(), &code);
  if (code != Z_OK && code != Z_STREAM_END) {
    throw std::runtime_error(path + ": corrupt compressed data: " + message);
  }
  if (!gzdirect(file.get()) && bytes.empty()) {
    throw std::runtime_error(path + ": compressed file holds no data");
  }
  return bytes;
}

}  // namespace delta::replay
