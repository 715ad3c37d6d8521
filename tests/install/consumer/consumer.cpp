// Allocates and frees through the installed libdelta.so's C ABI on the simulated GPU, and
// reads the version and the stats back: what a program linked to the package can do.
#include <delta/delta.h>

#include <cstdio>
#include <cstring>
#include <string>

int main() {
  void* block = delta_malloc(1 << 20, 0, nullptr);
  if (block == nullptr) {
    std::fprintf(stderr, "consumer: delta_malloc failed: %s\n", delta_last_error());
    return 1;
  }
  if (delta_owns(block) != 1) {
    std::fprintf(stderr, "consumer: DELTA does not own the block it allocated\n");
    return 1;
  }
  char stats[8192];
  const int needed = delta_stats_json(stats, sizeof stats);
  if (needed < 0 || needed > static_cast<int>(sizeof stats) || std::string(stats).find('{') != 0) {
    std::fprintf(stderr, "consumer: no stats (%d): %s\n", needed, delta_last_error());
    return 1;
  }
  delta_free(block, 1 << 20, 0, nullptr);
  if (delta_owns(block) != 0) {
    std::fprintf(stderr, "consumer: the freed block is still owned\n");
    return 1;
  }
  std::printf("consumer: libdelta %s allocated and freed 1 MiB\n", delta_version());
  return 0;
}
