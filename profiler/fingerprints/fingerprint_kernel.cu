// DELTA's fingerprint kernel: a 64-bit hash of one device range, for the direction learner on a
// GPU (cuda_fingerprint.cpp loads its PTX through the driver; nothing links libcudart).
// Each word is mixed with its position and the mixes are summed: addition is associative
// and commutative, so any number of blocks and threads adding into one slot with atomics gives
// the same value every time, and a change of any byte or its place changes it.
// Regenerate the PTX header after editing: scripts/fingerprint-ptx.
#include <stdint.h>

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// `slot` must hold 0 before the launch (the fingerprinter clears its slots).
extern "C" __global__ void delta_fingerprint(const unsigned char* base, uint64_t bytes, unsigned long long* slot) {
  const uint64_t words = bytes / 8;
  const uint64_t* data = reinterpret_cast<const uint64_t*>(base);  // blocks start 256-byte aligned
  uint64_t sum = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride)
    sum += mix64(data[i] ^ mix64(i));
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    uint64_t tail = 0;
    for (uint64_t b = words * 8; b < bytes; ++b) tail = (tail << 8) | base[b];
    sum += mix64(tail ^ mix64(~bytes));  // the tail and the length
  }
  // Sum the block's threads, then one atomic per block.
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xFFFFFFFFu, sum, offset);
  __shared__ uint64_t warp_sums[32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t total = 0;
    for (unsigned w = 0; w < (blockDim.x + 31) / 32; ++w) total += warp_sums[w];
    atomicAdd(slot, static_cast<unsigned long long>(total));
  }
}
