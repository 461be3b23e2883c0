// src/cuda/longest_first.cu — packed sequences sorted longest first (cuda/device/longest_first.cuh):
// a kernel writes each sequence's length and index, CUB's radix sort orders them. One
// instantiation for every caller: 64-bit keys of as many bits as the total length needs (so
// 2^18 steps sort in one or two passes), 32-bit item counts.
#include <cstdint>
#include <limits>

#include <cub/device/device_radix_sort.cuh>

#include <parscan/cuda/device/longest_first.cuh>
#include <parscan/cuda/runtime.cuh>

namespace parscan::cuda_detail {
namespace {

constexpr std::size_t piece_align = 256;

std::size_t aligned(std::size_t bytes) { return (bytes + piece_align - 1) / piece_align * piece_align; }

/// Bits of the largest length, total_length: the sort's end bit (at least 1).
int length_bits(index_t total_length) {
  int bits = 1;
  while (bits < 63 && (static_cast<std::uint64_t>(total_length) >> bits) != 0) ++bits;
  return bits;
}

/// The workspace: lengths and indices in, lengths and indices out, CUB's temporary storage.
struct pieces {
  std::size_t keys = 0, indices = 0, temp = 0;
  std::size_t total() const { return 2 * keys + 2 * indices + temp; }
};

cudaError_t plan(index_t sequences, index_t total_length, pieces& p, cudaStream_t stream) {
  const int n = static_cast<int>(sequences);
  p.keys = aligned(sizeof(std::uint64_t) * static_cast<std::size_t>(n));
  p.indices = aligned(sizeof(index_t) * static_cast<std::size_t>(n));
  std::size_t temp = 0;
  const cudaError_t e = cub::DeviceRadixSort::SortPairsDescending(
      nullptr, temp, static_cast<const std::uint64_t*>(nullptr), static_cast<std::uint64_t*>(nullptr),
      static_cast<const index_t*>(nullptr), static_cast<index_t*>(nullptr), n, 0, length_bits(total_length), stream);
  p.temp = aligned(temp);
  return e;
}

bool sorts(index_t sequences) { return sequences >= 2 && sequences <= std::numeric_limits<int>::max(); }

__global__ void lengths_kernel(const std::int64_t* offsets, index_t sequences, index_t total_length,
                               std::uint64_t* lengths, index_t* indices) {
  const index_t stride = static_cast<index_t>(gridDim.x) * blockDim.x;
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < sequences; i += stride) {
    const std::int64_t length = offsets[i + 1] - offsets[i];
    lengths[i] = static_cast<std::uint64_t>(length < 0 ? 0 : length > total_length ? total_length : length);
    indices[i] = i;
  }
}

}  // namespace

std::size_t longest_first_bytes(index_t sequences, index_t total_length) {
  if (!sorts(sequences)) return 0;
  pieces p;
  if (plan(sequences, total_length, p, nullptr) != cudaSuccess) {
    cudaGetLastError();  // not sticky
    return 0;
  }
  return p.total();
}

status longest_first(const std::int64_t* offsets, index_t sequences, index_t total_length, void* workspace,
                     cudaStream_t stream, const index_t*& order) {
  order = nullptr;
  if (!sorts(sequences)) return status::success;
  pieces p;
  if (status st = report(plan(sequences, total_length, p, stream)); st != status::success) return st;
  char* at = static_cast<char*>(workspace);
  auto* lengths = reinterpret_cast<std::uint64_t*>(at);
  auto* lengths_sorted = reinterpret_cast<std::uint64_t*>(at + p.keys);
  auto* indices = reinterpret_cast<index_t*>(at + 2 * p.keys);
  auto* sorted = reinterpret_cast<index_t*>(at + 2 * p.keys + p.indices);
  void* temp = at + 2 * p.keys + 2 * p.indices;

  constexpr int threads = 256;
  const index_t blocks = (sequences + threads - 1) / threads;
  lengths_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), threads, 0, stream>>>(
      offsets, sequences, total_length, lengths, indices);
  if (status st = check_launch(); st != status::success) return st;
  std::size_t temp_bytes = p.temp;
  if (status st = report(cub::DeviceRadixSort::SortPairsDescending(temp, temp_bytes, lengths, lengths_sorted, indices,
                                                                   sorted, static_cast<int>(sequences), 0,
                                                                   length_bits(total_length), stream));
      st != status::success)
    return st;
  order = sorted;
  return status::success;
}

}  // namespace parscan::cuda_detail
