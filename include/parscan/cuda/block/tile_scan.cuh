// parscan/cuda/block/tile_scan.cuh — one tile of one sequence, end to end: load the tile's
// elements (striped, so a warp touches adjacent steps), transpose to blocked through shared
// memory, scan, transpose back, store.
//
// The elements come from and go to a Problem, which hides where they live:
//   using acc_type;                      // the accumulator
//   cursor at(index_t s)                 // per-sequence addressing, computed once per tile
//   acc_type load(cursor, index_t pos)   // element at processing position pos
//   void store(cursor, index_t pos, acc_type)   // result at processing position pos
//   maybe<acc_type> initial(index_t s)   // carry in / init of sequence s, if any
//   void finish(index_t s, acc_type)     // total of sequence s (carry out)
//   bool exclusive; index_t length;
// The generic scans and every fast path (the gated recurrence, forward and backward) are
// Problems, so they share these kernels.
#pragma once

#include <cstddef>

#include "block_scan.cuh"

namespace parscan::cuda_detail {

template <class Acc, int Block, int Items>
struct tile_config {
  static constexpr int block = Block;
  static constexpr int items = Items;
  static constexpr index_t tile = static_cast<index_t>(Block) * Items;
  // One padding element per Items keeps the blocked reads free of bank conflicts.
  static constexpr int exchange_elems = Items > 1 ? Block * Items + Block : 1;
};

// Raw bytes shared by the transpose and the scan: accumulators such as complex numbers have
// constructors, which a __shared__ union would not allow.
template <class Acc, int Block, int Items>
struct tile_storage {
  static constexpr std::size_t exchange_bytes = sizeof(Acc) * tile_config<Acc, Block, Items>::exchange_elems;
  static constexpr std::size_t bytes =
      exchange_bytes > sizeof(block_scan_storage<Acc, Block>) ? exchange_bytes : sizeof(block_scan_storage<Acc, Block>);
  alignas(16) alignas(Acc) unsigned char raw[bytes];
  __device__ PARSCAN_INLINE Acc* exchange() { return reinterpret_cast<Acc*>(raw); }
  __device__ PARSCAN_INLINE block_scan_storage<Acc, Block>& scan() {
    return *reinterpret_cast<block_scan_storage<Acc, Block>*>(raw);
  }
};

template <int Items>
__device__ PARSCAN_INLINE int padded(int i) { return Items > 1 ? i + i / Items : i; }

/// Processes tile `k` of sequence `s`; `tile_prefix` is called by warp 0 with the tile's
/// aggregate and returns what precedes the tile.
template <int Block, int Items, class Problem, class Op, class TilePrefix>
__device__ PARSCAN_INLINE void scan_one_tile(const Problem& P, const Op& op, index_t s, index_t k,
                                             tile_storage<typename Problem::acc_type, Block, Items>& sm,
                                             TilePrefix&& tile_prefix) {
  using Acc = typename Problem::acc_type;
  constexpr index_t tile = static_cast<index_t>(Block) * Items;
  const int tid = static_cast<int>(threadIdx.x);
  const index_t start = k * tile, length = P.length;
  const auto cur = P.at(s);

  Acc items[Items];
#pragma unroll
  for (int i = 0; i < Items; ++i) {
    const index_t pos = start + i * Block + tid;
    items[i] = pos < length ? P.load(cur, pos) : Acc{};
  }
  if constexpr (Items > 1) {
    __syncthreads();  // the previous tile may still read the exchange buffer
#pragma unroll
    for (int i = 0; i < Items; ++i) sm.exchange()[padded<Items>(i * Block + tid)] = items[i];
    __syncthreads();
#pragma unroll
    for (int j = 0; j < Items; ++j) items[j] = sm.exchange()[padded<Items>(tid * Items + j)];
    __syncthreads();  // the scan storage shares the buffer
  }

  const index_t first_pos = start + static_cast<index_t>(tid) * Items;
  block_scan_tile<Block, Items>(items, P.exclusive, op, sm.scan(), tile_prefix, [&](int j, const Acc& inclusive) {
    if (first_pos + j == length - 1) P.finish(s, inclusive);
  });

  if constexpr (Items > 1) {
    __syncthreads();
#pragma unroll
    for (int j = 0; j < Items; ++j) sm.exchange()[padded<Items>(tid * Items + j)] = items[j];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < Items; ++i) items[i] = sm.exchange()[padded<Items>(i * Block + tid)];
  }
#pragma unroll
  for (int i = 0; i < Items; ++i) {
    const index_t pos = start + i * Block + tid;
    if (pos < length) P.store(cur, pos, items[i]);
  }
}

}  // namespace parscan::cuda_detail
