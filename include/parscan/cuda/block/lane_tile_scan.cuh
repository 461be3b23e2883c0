// parscan/cuda/block/lane_tile_scan.cuh — a tile of 32 adjacent sequences, one per lane, for
// layouts whose sequences sit next to each other and whose steps are far apart (a (B, T, D)
// tensor scanned along T). A warp then reads 32 neighbouring sequences' step t in one
// coalesced access, and each lane scans its own sequence with no shuffles at all.
//
// The tile is 32 sequences × Warps·Steps steps: warp w scans steps w·Steps … w·Steps+Steps-1
// of the tile sequentially in registers, warp 0 combines the warps' totals per lane through
// shared memory, and `tile_prefix` (run by warp 0 with each lane's tile aggregate) supplies
// what precedes the tile. The Problem provides, besides the interface in tile_scan.cuh:
//   acc_type load_at(cursor, index_t pos);  void store_at(cursor, index_t pos, acc_type)
#pragma once

#include <cstdint>

#include "../../layout.hpp"
#include "../warp/warp_shuffle.cuh"

namespace parscan::cuda_detail {

/// Whether a tensor suits lane tiles: sequences next to each other in memory, steps apart.
inline bool is_lane_major(const sequence_layout& l) {
  return l.count >= warp_threads && l.sequence_stride == 1 && l.step_stride != 1;
}

/// Whether K adjacent sequences of layout l, starting at a multiple of K, sit in K adjacent
/// elements whose first one is K·sizeof(T)-aligned whenever the base pointer is.
template <int K>
inline bool lane_packs_fit(const sequence_layout& l) {
  return is_lane_major(l) && l.count % K == 0 && l.step_stride % K == 0 && (l.groups == 1 || l.group_stride % K == 0);
}
template <int K, class T>
inline bool lane_packs_fit(const sequence_layout& l, const T* base) {
  return lane_packs_fit<K>(l) && reinterpret_cast<std::uintptr_t>(base) % (K * sizeof(T)) == 0;
}

/// The lane tiles of `sequences` × `length` steps: groups of 32 sequences, each cut into tiles
/// of `lane_tile` steps. False when the tile count overflows.
struct lane_tile_grid {
  index_t groups, tiles_per_group, tiles;
};
inline bool lane_tile_grid_of(index_t sequences, index_t length, index_t lane_tile, lane_tile_grid& g) {
  g.groups = (sequences + warp_threads - 1) / warp_threads;
  g.tiles_per_group = (length + lane_tile - 1) / lane_tile;
  return !__builtin_mul_overflow(g.groups, g.tiles_per_group, &g.tiles);
}

template <class Acc, int Warps>
struct lane_tile_storage {
  maybe<Acc> warp_value[Warps][warp_threads];  // each warp's total, then its exclusive prefix
};

template <class Acc, int Warps>
struct alignas(16) lane_tile_smem {
  alignas(Acc) unsigned char raw[sizeof(lane_tile_storage<Acc, Warps>)];
  __device__ PARSCAN_INLINE lane_tile_storage<Acc, Warps>& get() {
    return *reinterpret_cast<lane_tile_storage<Acc, Warps>*>(raw);
  }
};

/// The prefix of this thread's steps within its lane's sequence, given the thread's total:
/// warp 0 folds the warps' totals per lane, asks `tile_prefix` (the look-back) for what
/// precedes the tile with the tile's aggregate, and hands each warp its prefix. Called by the
/// whole block.
template <int Warps, class Acc, class Op, class TilePrefix>
__device__ PARSCAN_INLINE maybe<Acc> lane_tile_warp_prefix(const maybe<Acc>& total, const Op& op,
                                                           lane_tile_smem<Acc, Warps>& smem, TilePrefix&& tile_prefix) {
  auto& sm = smem.get();
  const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_threads;
  __syncthreads();  // the previous tile may still read the shared values
  sm.warp_value[warp][lane] = total;
  __syncthreads();
  if (warp == 0) {
    maybe<Acc> tile_total{Acc{}, false};
    for (int w = 0; w < Warps; ++w) {
      const maybe<Acc> t = sm.warp_value[w][lane];
      sm.warp_value[w][lane] = tile_total;  // becomes warp w's exclusive prefix within the tile
      tile_total = combine(tile_total, t, op);
    }
    const maybe<Acc> before = tile_prefix(tile_total);
#pragma unroll 1
    for (int w = 0; w < Warps; ++w) sm.warp_value[w][lane] = combine(before, sm.warp_value[w][lane], op);
  }
  __syncthreads();
  return sm.warp_value[warp][lane];
}

/// Scans steps [k·Warps·Steps, (k+1)·Warps·Steps) of sequences 32g … 32g+31.
template <int Warps, int Steps, class Problem, class Op, class TilePrefix>
__device__ PARSCAN_INLINE void scan_lane_tile(const Problem& P, const Op& op, index_t sequences, index_t g, index_t k,
                                              lane_tile_smem<typename Problem::acc_type, Warps>& smem,
                                              TilePrefix&& tile_prefix) {
  using Acc = typename Problem::acc_type;
  const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_threads;
  const index_t s = g * warp_threads + lane;
  const bool active = s < sequences;
  const index_t first = (k * Warps + warp) * Steps;
  const index_t length = P.length;
  int n = 0;  // valid steps of this thread
  if (active && first < length) n = length - first < Steps ? static_cast<int>(length - first) : Steps;
  const auto cur = P.at(active ? s : 0);

  Acc items[Steps];
#pragma unroll
  for (int i = 0; i < Steps; ++i) items[i] = i < n ? P.load_at(cur, first + i) : Acc{};
  Acc total = items[0];  // the thread's inclusive total (a constant index keeps items in registers)
#pragma unroll
  for (int i = 1; i < Steps; ++i)
    if (i < n) total = items[i] = op(items[i - 1], items[i]);

  const maybe<Acc> prefix = lane_tile_warp_prefix<Warps>(maybe<Acc>{total, n > 0}, op, smem, tile_prefix);
#pragma unroll
  for (int i = 0; i < Steps; ++i) {
    if (i >= n) break;
    const Acc x = items[i];  // the inclusive scan within this thread's steps
    const Acc r = prefix.has ? op(prefix.value, x) : x;
    if (P.exclusive) {
      // exclusive: prefix ⊕ (steps before i); there is always a prefix (init or carry)
      P.store_at(cur, first + i, i == 0 ? prefix.value : op(prefix.value, items[i - 1]));
    } else {
      P.store_at(cur, first + i, r);
    }
    if (first + i == length - 1) P.finish(s, r);
  }
}

}  // namespace parscan::cuda_detail
