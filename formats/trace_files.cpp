// read_trace() / write_trace(): files, gzip when the name ends in .gz, written atomically.
#include <delta/trace.hpp>

#include "gzip_codec.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace delta::trace {
namespace {

bool ends_with_gz(const std::string& path) { return path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0; }

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TraceError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw TraceError(path + ": cannot read (" + std::strerror(errno) + ")");
  return std::move(bytes).str();
}

// A temporary file next to the target, renamed over it once complete: a reader never sees a
// half-written trace, and a failed write leaves the old file in place.
void write_atomically(const std::string& path, const std::string& bytes) {
  static std::atomic<unsigned> counter{0};
  const std::string temp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw TraceError(path + ": cannot create " + temp + " (" + std::strerror(errno) + ")");
  auto fail = [&](const char* what) {
    const int error = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    throw TraceError(path + ": cannot " + what + " (" + std::strerror(error) + ")");
  };
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("flush to disk");
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    throw TraceError(path + ": cannot close (" + std::strerror(error) + ")");
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    throw TraceError(path + ": cannot rename " + temp + " into place (" + std::strerror(error) + ")");
  }
}

}  // namespace

Trace read_trace(const std::string& path) { return parse_trace_bytes(read_bytes(path), path); }

void write_trace(const Trace& trace, const std::string& path) {
  try {
    validate(trace);
  } catch (const TraceError& e) {
    throw TraceError(path + ": refusing to write an invalid trace: " + e.what());
  }
  const std::string text = to_json_text(trace);
  write_atomically(path, ends_with_gz(path) ? gzip(text) : text);
}

}  // namespace delta::trace
