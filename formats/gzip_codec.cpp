#include "gzip_codec.hpp"

#include <delta/trace.hpp>

#include <zlib.h>

#include <climits>
#include <memory>

namespace delta::trace {
namespace {

constexpr int kGzipWindow = 15 + 16;  // zlib: 32 KiB window, gzip wrapper

struct InflateStream {
  z_stream stream{};
  InflateStream() {
    if (inflateInit2(&stream, kGzipWindow) != Z_OK) throw TraceError("gzip: cannot initialise zlib");
  }
  ~InflateStream() { inflateEnd(&stream); }
};

struct DeflateStream {
  z_stream stream{};
  DeflateStream() {
    if (deflateInit2(&stream, 6, Z_DEFLATED, kGzipWindow, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      throw TraceError("gzip: cannot initialise zlib");
    }
  }
  ~DeflateStream() { deflateEnd(&stream); }
};

}  // namespace

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

std::string gunzip(std::string_view bytes, std::uint64_t max_bytes) {
  if (bytes.size() >= UINT_MAX) throw TraceError("gzip: compressed file of 4 GiB or more is not supported");
  InflateStream inflater;
  z_stream& z = inflater.stream;
  // All input is handed over at once, so "no progress possible" means the data ended early.
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  std::string out;
  char chunk[1 << 16];
  for (;;) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    const int status = inflate(&z, Z_NO_FLUSH);
    const std::size_t produced = sizeof chunk - z.avail_out;
    if (out.size() + produced > max_bytes) {
      throw TraceError("gzip: decompresses to more than " + std::to_string(max_bytes >> 20) + " MiB");
    }
    out.append(chunk, produced);
    switch (status) {
      case Z_OK:
        continue;
      case Z_STREAM_END:
        if (z.avail_in == 0) return out;
        // Concatenated gzip members are one file to gzip(1); anything else after the end is not.
        if (!is_gzip(std::string_view(reinterpret_cast<const char*>(z.next_in), z.avail_in))) {
          throw TraceError("corrupt gzip data: " + std::to_string(z.avail_in) + " stray bytes after the compressed stream");
        }
        inflateReset(&z);
        continue;
      case Z_BUF_ERROR:
        throw TraceError("truncated gzip data: the compressed stream ends early");
      case Z_MEM_ERROR:
        throw TraceError("gzip: out of memory");
      default:
        throw TraceError(std::string("corrupt gzip data: ") + (z.msg != nullptr ? z.msg : "invalid stream"));
    }
  }
}

std::string gzip(std::string_view text) {
  DeflateStream deflater;
  z_stream& z = deflater.stream;
  std::string out;
  char chunk[1 << 16];
  std::size_t consumed = 0;
  int status = Z_OK;
  do {
    const std::size_t feed = std::min<std::size_t>(text.size() - consumed, UINT_MAX / 2);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data() + consumed));
    z.avail_in = static_cast<uInt>(feed);
    consumed += feed;
    const int flush = consumed == text.size() ? Z_FINISH : Z_NO_FLUSH;
    do {
      z.next_out = reinterpret_cast<Bytef*>(chunk);
      z.avail_out = sizeof chunk;
      status = deflate(&z, flush);
      if (status == Z_STREAM_ERROR) throw TraceError("gzip: compression failed");
      out.append(chunk, sizeof chunk - z.avail_out);
    } while (z.avail_out == 0);
  } while (status != Z_STREAM_END);
  return out;
}

}  // namespace delta::trace
