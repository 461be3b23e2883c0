// parscan/cuda/agent/span_chain.cuh — the look-back of the persistent staged grid in which no
// tile waits on a look-back of its own round.
//
// The grid takes tiles round-robin: in round r its G blocks hold tiles rG … rG+G-1, and each
// block publishes the aggregate of its next tile (round r+1) before the look-back of this one
// (scan_chained_staged_kernel's reduce-ahead). The tiles of a sequence form spans of
// span_tiles (≥ G), and with A_k the aggregate of tile k and E_q the inclusive prefix through
// the last tile of span q,
//   prefix of tile k = E_{q-1} ⊕ (A_{qS} ⊕ … ⊕ A_{k-1})   with q = k / S, S = span_tiles,
//   E_q = prefix of tile qS+S-1 ⊕ A_{qS+S-1},   E_{-1} = the sequence's carry in (or nothing).
// The aggregates a tile needs were published a round ago, so gathering them (all threads of the
// block, span_tiles / threads each, in one L2 round trip) waits on nothing in the current
// round; E_{q-1} comes from one earlier tile, which itself waited only on older rounds. (The
// window chain of window_chain.cuh needs, for each window, a total published in the look-back
// of the window's last tile, mostly in the same round: every round then waited for the
// slowest earlier block of the round, ~4 µs of a ~10 µs round on an H100, docs/performance.md.)
//
// Every combination has a fixed order (each thread folds its tiles in order, then the lanes
// of a warp, then the warps, in one tree fixed by the tile's place in its span), so results
// are bitwise identical from run to run. Records are tagged words as in window_chain.cuh.
//
// The carry in may be the carry-out array (chunks chained in place): the sequence's last tile
// writes it as soon as every aggregate before it is out. So a tile of span 0 (the only ones
// that read the carry in) reads it before its aggregate goes out, and keeps it until its own
// look-back (scan_chained_staged_kernel).
#pragma once

#include <cstddef>

#include "../../config.hpp"
#include "../warp/warp_shuffle.cuh"
#include "window_chain.cuh"

namespace parscan::cuda_detail {

/// Tiles per span. A grid of more blocks than this would chain span ends within a round, so
/// launches cap their grid at span_tiles blocks.
constexpr int span_tiles = 1024;

template <class Acc>
struct span_chain_state {
  using record = window_chain_state<Acc>;  // the tagged words: store, try_load, wait
  using word = typename record::word;
  static constexpr int words = record::words;

  word* aggregates;  // [tiles][words]: A_k
  word* ends;        // [spans][words]: E_q, published by the span's last tile

  static std::size_t bytes(index_t tiles, index_t spans) {
    return record::record_bytes(tiles) + record::record_bytes(spans);
  }
  static span_chain_state carve(void* base, index_t tiles, index_t spans) {
    char* p = static_cast<char*>(base);
    return {reinterpret_cast<word*>(p), reinterpret_cast<word*>(p + record::record_bytes(tiles))};
  }
  __device__ static PARSCAN_INLINE void store(word* r, const Acc& v) { record::store(r, v); }
  __device__ PARSCAN_INLINE word* aggregate(index_t tile) const { return aggregates + tile * words; }
  __device__ PARSCAN_INLINE word* end(index_t span) const { return ends + span * words; }
};

/// This thread's share of a span's aggregates: thread i takes the Threads-th part
/// A_{qS + i·c} … A_{qS + i·c + c-1} (c = span_tiles / Threads) of those before the tile.
/// Issue (loads in flight, nothing waited for) and finish (poll what was not ready, fold in
/// order, reduce over the warp's lanes) are apart so the caller can overlap the round trip.
template <int Threads, class Acc>
struct span_share {
  static_assert(span_tiles % Threads == 0, "a span divides evenly among the block's threads");
  static constexpr int per_thread = span_tiles / Threads;
  using record = window_chain_state<Acc>;
  Acc v[per_thread];
  bool ready[per_thread];

  __device__ PARSCAN_INLINE int first() const { return static_cast<int>(threadIdx.x) * per_thread; }
  /// `span_start`: the state index of the span's first tile; `before`: the tile's place in it.
  __device__ PARSCAN_INLINE void issue(const span_chain_state<Acc>& st, index_t span_start, int before) {
#pragma unroll
    for (int i = 0; i < per_thread; ++i)
      ready[i] = first() + i >= before || record::try_load(st.aggregate(span_start + first() + i), v[i]);
  }
  /// The warp's fold of its lanes' shares (valid in lane 0; has false when it holds none).
  template <class Op>
  __device__ PARSCAN_INLINE maybe<Acc> finish(const span_chain_state<Acc>& st, index_t span_start, int before,
                                              const Op& op) {
#pragma unroll
    for (int i = 0; i < per_thread; ++i)
      while (!ready[i]) ready[i] = record::try_load(st.aggregate(span_start + first() + i), v[i]);
    Acc fold = v[0];
#pragma unroll
    for (int i = 1; i < per_thread; ++i)
      if (first() + i < before) fold = op(fold, v[i]);
    constexpr int per_warp = per_thread * warp_threads;
    const int warp_first = static_cast<int>(threadIdx.x) / warp_threads * per_warp;
    const int left = before - warp_first;
    const int lanes = left <= 0 ? 0 : (left >= per_warp ? warp_threads : (left + per_thread - 1) / per_thread);
    return {warp_ordered_reduce(fold, lanes, op), lanes > 0};
  }
};

/// Everything before tile k of a sequence whose spans start at `first_span`, run by one whole warp with the tile's aggregate; the same in every
/// lane. `warp_parts[w]` holds warp w's span_share fold; `carry` is the sequence's carry in
/// (read by the caller before the tile's aggregate went out), used only by tiles of span 0.
template <int Warps, class Acc, class Op>
__device__ PARSCAN_INLINE maybe<Acc> span_chain_prefix(const span_chain_state<Acc>& st, index_t first_span, index_t k, const Acc& aggregate,
                                                       const maybe<Acc>* warp_parts, const maybe<Acc>& carry,
                                                       const Op& op) {
  using record = window_chain_state<Acc>;
  constexpr int per_warp = span_tiles / Warps;
  const int lane = lane_id();
  const index_t q = k / span_tiles;
  const int before = static_cast<int>(k % span_tiles);
  const int warps_with = (before + per_warp - 1) / per_warp;
  maybe<Acc> in_span{Acc{}, false};
  if (warps_with > 0) {
    const Acc part = warp_parts[lane < warps_with ? lane : 0].value;
    in_span = {shfl_idx(warp_ordered_reduce(part, warps_with, op), 0), true};
  }
  const maybe<Acc> start = q == 0 ? carry : maybe<Acc>{record::wait(st.end(first_span + q - 1)), true};
  const maybe<Acc> prefix = combine(start, in_span, op);
  if (before == span_tiles - 1 && lane == 0)
    record::store(st.end(first_span + q), combine(prefix, maybe<Acc>{aggregate, true}, op).value);
  return prefix;
}

}  // namespace parscan::cuda_detail
