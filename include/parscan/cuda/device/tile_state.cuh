// parscan/cuda/device/tile_state.cuh — the per-tile state of the single-pass chained scan
// (decoupled look-back, Merrill & Garland 2016), in a deterministic form.
//
// Every tile publishes its aggregate as soon as it has reduced its own elements. Tile k's
// prefix is always formed the same way, whatever the timing:
//     prefix(k) = inclusive(w-1) ⊕ aggregate(w) ⊕ … ⊕ aggregate(k-1),   w = 32·⌊k/32⌋,
// and the tiles that close a window of 32 (k ≡ 31 mod 32) also publish their inclusive
// value. A look-back therefore reads at most one inclusive value and 31 aggregates, in one
// warp-wide step, and results are bitwise identical from run to run. CUB's decoupled
// look-back instead takes whichever predecessors are ready, which is faster to converge but
// gives floating-point results that vary between runs.
//
// Values of any size stay in their own arrays; a status word per tile is written with
// release semantics after the values and read with acquire semantics before them, so a
// struct value (an affine pair, a small matrix) needs no special slow path.
#pragma once

#include <cstddef>

#include <cuda/atomic>

#include "../../config.hpp"
#include "../warp/warp_shuffle.cuh"

namespace parscan::cuda_detail {

constexpr int lookback_window = 32;

enum tile_status : unsigned { tile_empty = 0, tile_aggregate = 1, tile_inclusive = 2 };

/// `lanes` values per tile: 1 when a tile covers one sequence, 32 when it covers 32.
template <class Acc, int Lanes>
struct tile_state {
  unsigned* status;  // [tiles], zeroed before each launch
  Acc* aggregate;    // [tiles · Lanes]
  Acc* inclusive;    // [tiles · Lanes]

  static constexpr std::size_t align(std::size_t b) { return (b + 255) / 256 * 256; }
  static std::size_t status_bytes(index_t tiles) { return align(static_cast<std::size_t>(tiles) * sizeof(unsigned)); }
  static std::size_t bytes(index_t tiles) {
    return status_bytes(tiles) + 2 * align(static_cast<std::size_t>(tiles) * Lanes * sizeof(Acc));
  }
  static tile_state carve(void* base, index_t tiles) {
    char* p = static_cast<char*>(base);
    tile_state s;
    s.status = reinterpret_cast<unsigned*>(p);
    p += status_bytes(tiles);
    s.aggregate = reinterpret_cast<Acc*>(p);
    p += align(static_cast<std::size_t>(tiles) * Lanes * sizeof(Acc));
    s.inclusive = reinterpret_cast<Acc*>(p);
    return s;
  }

  __device__ PARSCAN_INLINE void release(index_t tile, unsigned st) const {
    cuda::atomic_ref<unsigned, cuda::thread_scope_device> ref(status[tile]);
    ref.store(st, cuda::memory_order_release);
  }
  __device__ PARSCAN_INLINE void wait(index_t tile, unsigned at_least) const {
    cuda::atomic_ref<unsigned, cuda::thread_scope_device> ref(status[tile]);
    int spins = 0;
    while (ref.load(cuda::memory_order_acquire) < at_least)
      if (++spins > 8) __nanosleep(32);
  }

  /// Called by the lanes that hold the tile's values (lane < Lanes) of one warp, all 32 lanes
  /// present. Each lane writes its own value; one lane then releases the status.
  __device__ PARSCAN_INLINE void publish(Acc* values, index_t tile, const Acc& v, unsigned st) const {
    const int lane = lane_id();
    if (lane < Lanes) {
      values[tile * Lanes + lane] = v;
      if (Lanes > 1) __threadfence();  // other lanes' writes are ordered before lane 0's release
    }
    __syncwarp();
    if (lane == 0) release(tile, st);
  }
  __device__ PARSCAN_INLINE void publish_aggregate(index_t tile, const Acc& v) const { publish(aggregate, tile, v, tile_aggregate); }
  __device__ PARSCAN_INLINE void publish_inclusive(index_t tile, const Acc& v) const { publish(inclusive, tile, v, tile_inclusive); }
};

/// Deterministic look-back for a tile that covers one sequence (Lanes = 1). Called by a whole
/// warp; `first` is the global index of the sequence's first tile and k the tile's index
/// within it. Returns carry ⊕ tiles 0..k-1 of the sequence, the same in every lane.
template <class Acc, class Op>
__device__ PARSCAN_INLINE maybe<Acc> lookback_prefix(const tile_state<Acc, 1>& st, index_t first, index_t k,
                                                     maybe<Acc> carry, const Op& op) {
  const int lane = lane_id();
  const index_t w = (k / lookback_window) * lookback_window;
  maybe<Acc> start = carry;
  if (w > 0) {
    st.wait(first + w - 1, tile_inclusive);
    start = {st.inclusive[first + w - 1], true};
  }
  const int n = static_cast<int>(k - w);
  if (n == 0) return start;
  Acc v{};
  if (lane < n) {
    st.wait(first + w + lane, tile_aggregate);
    v = st.aggregate[first + w + lane];
  }
  v = warp_ordered_reduce(v, n, op);
  return combine(start, maybe<Acc>{shfl_idx(v, 0), true}, op);
}

/// The same for a tile that covers 32 sequences, one per lane (Lanes = 32): each lane folds
/// its own sequence's aggregates in order.
template <class Acc, class Op>
__device__ PARSCAN_INLINE maybe<Acc> lookback_prefix(const tile_state<Acc, 32>& st, index_t first, index_t k,
                                                     maybe<Acc> carry, const Op& op) {
  const int lane = lane_id();
  const index_t w = (k / lookback_window) * lookback_window;
  maybe<Acc> run = carry;
  if (w > 0) {
    st.wait(first + w - 1, tile_inclusive);
    run = {st.inclusive[(first + w - 1) * 32 + lane], true};
  }
  for (index_t j = w; j < k; ++j) {
    st.wait(first + j, tile_aggregate);
    run = combine(run, maybe<Acc>{st.aggregate[(first + j) * 32 + lane], true}, op);
  }
  return run;
}

PARSCAN_HD PARSCAN_INLINE bool closes_window(index_t k) { return k % lookback_window == lookback_window - 1; }

}  // namespace parscan::cuda_detail
