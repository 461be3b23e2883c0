// parscan/cuda/block/tile_scan.cuh — one tile of one sequence, end to end.
//
// A tile is Warps × Chunks × 32 × V consecutive steps. Each warp owns a contiguous segment
// of Chunks chunks; in each chunk lane l holds the V steps l·V … l·V+V-1, so one 16-byte
// load per lane per tensor reads the chunk fully coalesced, with no shared-memory transpose.
// Order of work: every lane folds its V steps, the warp scans the folds chunk by chunk, the
// warps' totals are scanned through shared memory, and `tile_prefix` — run by one warp with
// the tile's aggregate — supplies everything before the tile (a running carry or a
// look-back). With Warps = 1 a warp is a whole tile and never waits on its block; with
// Lanes < 32 as well, each segment of Lanes lanes is a tile of its own sequence (every lane
// names its own sequence s), so one warp scans 32 / Lanes short sequences at once.
// Every combination happens in a fixed order, so results never depend on timing.
//
// The elements come from and go to a Problem, which hides where they live:
//   using acc_type;  static constexpr int run;            // V
//   cursor at(index_t s)                                  // per-sequence addressing
//   void load_run(cursor, index_t pos, acc_type (&)[V])   // steps pos … pos+V-1 (processing
//   void store_run(cursor, index_t pos, const acc_type (&)[V])   //  order), those < length
//   maybe<acc_type> initial(index_t s)                    // carry in / init, if any
//   void finish(index_t s, acc_type)                      // total of sequence s (carry out)
//   bool exclusive; index_t length;
// The generic scans and every fast path are Problems, so they share these kernels.
#pragma once

#include "../warp/warp_shuffle.cuh"

namespace parscan::cuda_detail {

template <class Acc, int Warps>
struct tile_scan_storage {
  Acc warp_total[Warps];
  maybe<Acc> warp_prefix[Warps];
};

/// Raw bytes, because accumulators such as complex numbers have constructors, which a
/// __shared__ variable may not.
template <class Acc, int Warps>
struct alignas(16) tile_scan_smem {
  alignas(Acc) unsigned char raw[sizeof(tile_scan_storage<Acc, Warps>)];
  __device__ PARSCAN_INLINE tile_scan_storage<Acc, Warps>& get() {
    return *reinterpret_cast<tile_scan_storage<Acc, Warps>*>(raw);
  }
};

/// Steps of a tile of Warps warps × Chunks chunks; a tile of Lanes < 32 lanes is a segment of one
/// warp (Warps = 1), which scans 32 / Lanes such tiles at once, one in each segment.
template <class Problem, int Warps, int Chunks, int Lanes = warp_threads>
constexpr index_t tile_steps = static_cast<index_t>(Warps) * Chunks * Lanes * Problem::run;

/// The elements of one tile, in registers: lane l of warp w holds, for each chunk j, the run of
/// V steps at tile start + (w·Chunks + j)·32·V + l·V.
template <class Problem, int Chunks>
struct tile_items {
  typename Problem::acc_type v[Chunks][Problem::run];
};

template <int Warps, int Chunks, class Problem, int Lanes = warp_threads>
__device__ PARSCAN_INLINE index_t segment_start(index_t k) {
  static_assert(Lanes == warp_threads || Warps == 1, "tiles of part of a warp are one warp's segments");
  constexpr index_t chunk = static_cast<index_t>(Lanes) * Problem::run;
  const int warp = Warps == 1 ? 0 : static_cast<int>(threadIdx.x) / warp_threads;
  return k * tile_steps<Problem, Warps, Chunks, Lanes> + warp * (Chunks * chunk);
}

/// The calling lane's place in its tile's segment of Lanes lanes.
template <int Lanes>
__device__ PARSCAN_INLINE int segment_lane() {
  return lane_id() & (Lanes - 1);
}

/// Issues the loads of tile k of sequence s (the registers fill in the background, so a
/// caller can load the next tile before scanning this one).
template <int Warps, int Chunks, int Lanes = warp_threads, class Problem>
__device__ PARSCAN_INLINE void load_tile(const Problem& P, index_t s, index_t k, tile_items<Problem, Chunks>& items) {
  constexpr index_t chunk = static_cast<index_t>(Lanes) * Problem::run;
  const index_t segment = segment_start<Warps, Chunks, Problem, Lanes>(k);
  const auto cur = P.at(s);
  const int lane = segment_lane<Lanes>();
#pragma unroll
  for (int j = 0; j < Chunks; ++j) P.load_run(cur, segment + j * chunk + lane * Problem::run, items.v[j]);
}

/// Scans the loaded tile k of sequence s and stores it. `tile_prefix` is run by one warp with
/// the tile's aggregate and returns what precedes the tile. `smem` is unused when Warps == 1.
/// `store(j, first, run)` writes chunk j's run of results at step `first` (the staged kernels
/// write from their ring; otherwise Problem::store_run).
template <int Warps, int Chunks, int Lanes = warp_threads, class Problem, class Op, class TilePrefix, class Store>
__device__ PARSCAN_INLINE void scan_tile(const Problem& P, const Op& op, index_t s, index_t k,
                                         tile_items<Problem, Chunks>& tile,
                                         tile_scan_smem<typename Problem::acc_type, Warps>* smem,
                                         TilePrefix&& tile_prefix, Store&& store) {
  using Acc = typename Problem::acc_type;
  constexpr int V = Problem::run;
  constexpr index_t chunk = static_cast<index_t>(Lanes) * V;
  const int lane = segment_lane<Lanes>(), warp = Warps == 1 ? 0 : static_cast<int>(threadIdx.x) / warp_threads;
  const index_t segment = segment_start<Warps, Chunks, Problem, Lanes>(k);
  auto& items = tile.v;

  Acc lane_inclusive[Chunks], chunk_total[Chunks];
#pragma unroll
  for (int j = 0; j < Chunks; ++j) {
    Acc fold = items[j][0];
#pragma unroll
    for (int v = 1; v < V; ++v) fold = op(fold, items[j][v]);
    lane_inclusive[j] = warp_inclusive_scan<Lanes>(fold, op);
    chunk_total[j] = shfl_idx(lane_inclusive[j], Lanes - 1, Lanes);
  }
  Acc warp_total = chunk_total[0];
#pragma unroll
  for (int j = 1; j < Chunks; ++j) warp_total = op(warp_total, chunk_total[j]);

  maybe<Acc> run;
  if constexpr (Warps == 1) {
    run = tile_prefix(warp_total);
  } else {
    auto& sm = smem->get();
    if (lane == 0) sm.warp_total[warp] = warp_total;
    __syncthreads();
    if (warp == 0) {
      const Acc total = sm.warp_total[lane < Warps ? lane : 0];
      const Acc warps_inclusive = warp_inclusive_scan(total, op);
      const maybe<Acc> prefix = tile_prefix(shfl_idx(warps_inclusive, Warps - 1));
      const Acc before = shfl_up(warps_inclusive, 1);
      if (lane < Warps) sm.warp_prefix[lane] = lane == 0 ? prefix : combine(prefix, maybe<Acc>{before, true}, op);
    }
    __syncthreads();
    run = sm.warp_prefix[warp];
  }

  const index_t length = P.length;
#pragma unroll
  for (int j = 0; j < Chunks; ++j) {
    const Acc lane_before = shfl_up(lane_inclusive[j], 1, Lanes);
    const maybe<Acc> lane_prefix = lane == 0 ? run : combine(run, maybe<Acc>{lane_before, true}, op);
    const index_t first = segment + j * chunk + lane * V;
    // The step of this run that ends the sequence, or -1: one compare per run, not per step.
    const index_t to_end = length - 1 - first;
    const int end_v = to_end >= 0 && to_end < V ? static_cast<int>(to_end) : -1;
    Acc r = lane_prefix.value;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const Acc x = items[j][v];
      if (P.exclusive) items[j][v] = r;
      r = (v == 0 && !lane_prefix.has) ? x : op(r, x);
      if (!P.exclusive) items[j][v] = r;
      if (v == end_v) P.finish(s, r);
    }
    run = combine(run, maybe<Acc>{chunk_total[j], true}, op);
    store(j, first, items[j]);
  }
}

template <int Warps, int Chunks, int Lanes = warp_threads, class Problem, class Op, class TilePrefix>
__device__ PARSCAN_INLINE void scan_tile(const Problem& P, const Op& op, index_t s, index_t k,
                                         tile_items<Problem, Chunks>& tile,
                                         tile_scan_smem<typename Problem::acc_type, Warps>* smem,
                                         TilePrefix&& tile_prefix) {
  using Acc = typename Problem::acc_type;
  scan_tile<Warps, Chunks, Lanes>(
      P, op, s, k, tile, smem, tile_prefix,
      [&](int, index_t first, const Acc (&run)[Problem::run]) { P.store_run(P.at(s), first, run); });
}

}  // namespace parscan::cuda_detail
