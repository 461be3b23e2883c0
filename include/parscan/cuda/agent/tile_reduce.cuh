// parscan/cuda/agent/tile_reduce.cuh — the total of one tile, for a reduce that writes no
// scan. The tile has the layout of block/tile_scan.cuh (Warps × Chunks chunks of 32 runs of V
// steps), and its total one fixed order: each lane folds its run, each chunk is a
// warp_ordered_reduce over its lanes, a warp folds its chunks in order, and the block's warps
// are one more warp_ordered_reduce. Steps at or past the sequence's end take no part (a
// default-constructed element is not an identity for every operator).
#pragma once

#include <type_traits>

#include "../../ops/basic.hpp"
#include "../block/tile_scan.cuh"

namespace parscan::cuda_detail {

template <class Acc, int Warps>
struct tile_reduce_storage {
  Acc warp_total[Warps];
  Acc block_total;  // apart from warp_total, which lanes of warp 0 are still reading
  int warps_with_steps;
};

template <class Acc, int Warps>
struct alignas(16) tile_reduce_smem {
  alignas(Acc) unsigned char raw[sizeof(tile_reduce_storage<Acc, Warps>)];
  __device__ PARSCAN_INLINE tile_reduce_storage<Acc, Warps>& get() {
    return *reinterpret_cast<tile_reduce_storage<Acc, Warps>*>(raw);
  }
};

/// This warp's total of tile k's loaded items (valid in lane 0; .has false when the warp's
/// segment lies past the end).
template <int Warps, int Chunks, class Problem, class Op>
__device__ PARSCAN_INLINE maybe<typename Problem::acc_type> reduce_warp_segment(const Problem& P, const Op& op, index_t k,
                                                                                const tile_items<Problem, Chunks>& tile) {
  using Acc = typename Problem::acc_type;
  constexpr int V = Problem::run;
  constexpr index_t chunk = static_cast<index_t>(warp_threads) * V;
  const index_t segment = segment_start<Warps, Chunks, Problem>(k);
  const index_t length = P.length;
  maybe<Acc> total{Acc{}, false};
  if (segment + Chunks * chunk <= length) {  // the whole segment is inside the sequence
#pragma unroll
    for (int j = 0; j < Chunks; ++j) {
      Acc fold = tile.v[j][0];
#pragma unroll
      for (int v = 1; v < V; ++v) fold = op(fold, tile.v[j][v]);
      total = combine(total, maybe<Acc>{warp_ordered_reduce(fold, warp_threads, op), true}, op);
    }
    return total;
  }
  const index_t first = segment + lane_id() * V;
#pragma unroll
  for (int j = 0; j < Chunks; ++j) {
    const index_t chunk_first = segment + j * chunk;
    if (chunk_first >= length) break;  // the same in every lane
    const index_t left = length - chunk_first;
    const int lanes = left >= chunk ? warp_threads : static_cast<int>((left + V - 1) / V);
    Acc fold = tile.v[j][0];
#pragma unroll
    for (int v = 1; v < V; ++v)
      if (first + j * chunk + v < length) fold = op(fold, tile.v[j][v]);
    total = combine(total, maybe<Acc>{warp_ordered_reduce(fold, lanes, op), true}, op);
  }
  return total;
}

/// The total of tile k (which holds at least one step), the same in every thread of the block.
template <int Warps, int Chunks, class Problem, class Op>
__device__ PARSCAN_INLINE typename Problem::acc_type reduce_tile(const Problem& P, const Op& op, index_t k,
                                                                 const tile_items<Problem, Chunks>& tile,
                                                                 tile_reduce_smem<typename Problem::acc_type, Warps>& smem) {
  using Acc = typename Problem::acc_type;
  const maybe<Acc> mine = reduce_warp_segment<Warps, Chunks>(P, op, k, tile);
  if constexpr (Warps == 1) {
    return shfl_idx(mine.value, 0);
  } else {
    auto& sm = smem.get();
    const int warp = static_cast<int>(threadIdx.x) / warp_threads;
    if (lane_id() == 0) {
      sm.warp_total[warp] = mine.value;
      // Warps with steps are a prefix of the block: the last one says how many there are.
      if (mine.has && (warp == Warps - 1 || segment_start<Warps, Chunks, Problem>(k) +
                                                    Chunks * static_cast<index_t>(warp_threads) * Problem::run >=
                                                P.length))
        sm.warps_with_steps = warp + 1;
    }
    __syncthreads();
    if (warp == 0) {
      const Acc v = sm.warp_total[lane_id() < Warps ? lane_id() : 0];
      const Acc total = warp_ordered_reduce(v, sm.warps_with_steps, op);
      if (lane_id() == 0) sm.block_total = total;
    }
    __syncthreads();
    const Acc total = sm.block_total;
    __syncthreads();  // the storage is reused by the next tile
    return total;
  }
}

/// Operators whose operands may be swapped: sums of arithmetic types (IEEE addition is
/// commutative, though not associative) and integer max and min (float max and min are not:
/// a NaN wins or loses by position). A reduce with one of these lets each thread fold its own
/// elements across a whole span of tiles and combines the threads once at the end; the order
/// is still fixed by the length alone, so results stay bitwise reproducible.
template <class Op, class Acc>
constexpr bool swaps_operands = false;
template <class T>
constexpr bool swaps_operands<sum_op<T>, T> = std::is_arithmetic_v<T>;
template <class T>
constexpr bool swaps_operands<max_op<T>, T> = std::is_integral_v<T>;
template <class T>
constexpr bool swaps_operands<min_op<T>, T> = std::is_integral_v<T>;

/// Folds this thread's loaded items of tile k into `mine` (steps at or past the end take no part).
template <int Warps, int Chunks, class Problem, class Op>
__device__ PARSCAN_INLINE void fold_thread_items(const Problem& P, const Op& op, index_t k,
                                                 const tile_items<Problem, Chunks>& tile,
                                                 maybe<typename Problem::acc_type>& mine) {
  constexpr int V = Problem::run;
  constexpr index_t chunk = static_cast<index_t>(warp_threads) * V;
  const index_t segment = segment_start<Warps, Chunks, Problem>(k);
  const bool whole = segment + Chunks * chunk <= P.length;  // the same in every lane of the warp
  const index_t first = segment + lane_id() * V;
#pragma unroll
  for (int j = 0; j < Chunks; ++j)
#pragma unroll
    for (int v = 0; v < V; ++v)
      if (whole || first + j * chunk + v < P.length)
        mine = {mine.has ? op(mine.value, tile.v[j][v]) : tile.v[j][v], true};
}

/// The block's threads' folds combined in one fixed tree; the result is valid in thread 0.
template <int Warps, class Acc, class Op>
__device__ PARSCAN_INLINE maybe<Acc> reduce_thread_folds(maybe<Acc> mine, const Op& op,
                                                         maybe<Acc> (&warp_folds)[Warps]) {
  const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_threads;
  auto warp_fold = [&](maybe<Acc> v) {
#pragma unroll
    for (int d = warp_threads / 2; d >= 1; d /= 2) {
      const maybe<Acc> other{shfl_down(v.value, d), shfl_down(static_cast<int>(v.has), d) != 0};
      if (lane + d < warp_threads) v = combine(v, other, op);
    }
    return v;
  };
  mine = warp_fold(mine);
  if (lane == 0) warp_folds[warp] = mine;
  __syncthreads();
  maybe<Acc> total{Acc{}, false};
  if (warp == 0) total = warp_fold(lane < Warps ? warp_folds[lane] : maybe<Acc>{Acc{}, false});
  return total;
}

}  // namespace parscan::cuda_detail
