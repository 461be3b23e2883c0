// parscan/cuda/agent/tile_state.cuh — the per-tile state of the single-pass chained scan
// (decoupled look-back, Merrill & Garland 2016), in a deterministic form.
//
// CUB's look-back takes whichever predecessors happen to be ready, so the association of a
// floating-point prefix changes from run to run. Here every prefix has one fixed formula.
// Tiles form windows of 32, windows form super-windows of 32 (1024 tiles), and super-windows
// form hyper-windows of 32 (32768 tiles):
//   * every tile publishes its aggregate as soon as it has reduced its own elements;
//   * the last tile of a window also publishes the window's aggregate (from the 31 aggregates
//     before it, which never wait on anything);
//   * the last tile of a super-window also publishes the super-window's aggregate (from the
//     windows before it);
//   * the last tile of a hyper-window also publishes its inclusive prefix;
//   * tile k's prefix is
//       inclusive(end of the previous hyper-window)
//         ⊕ the aggregates of the earlier super-windows of its hyper-window (≤ 31)
//         ⊕ the aggregates of the earlier windows of its super-window (≤ 31)
//         ⊕ the aggregates of the earlier tiles of its window (≤ 31),
//     which one warp gathers 32 values at a time.
// Only hyper-window ends form a chain, so a sequence of n tiles has n/32768 dependent hops.
// (With two levels, a chain hop every 1024 tiles, each hop a few dependent L2 round trips, held
// a 2^28-step scan in 512-step tiles at 21% of copy on an H100.) Results are bitwise identical
// from run to run.
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
constexpr int lookback_super = lookback_window * lookback_window;
constexpr int lookback_hyper = lookback_super * lookback_window;

enum tile_status : unsigned {
  tile_empty = 0,
  tile_aggregate = 1,
  tile_window = 2,
  tile_super = 3,
  tile_inclusive = 4
};

/// Lanes values per tile: 1 when a tile covers one sequence, 32 when it covers 32 sequences
/// (one per lane, see block/lane_tile_scan.cuh).
template <class Acc, int Lanes = 1>
struct tile_state {
  unsigned* status;  // [tiles], zeroed before each launch
  Acc* aggregate;    // [tiles · Lanes]
  Acc* window;       // [tiles · Lanes], written at window ends
  Acc* super;        // [tiles · Lanes], written at super-window ends
  Acc* inclusive;    // [tiles · Lanes], written at hyper-window ends

  static constexpr std::size_t align(std::size_t b) { return (b + 255) / 256 * 256; }
  static std::size_t status_bytes(index_t tiles) { return align(static_cast<std::size_t>(tiles) * sizeof(unsigned)); }
  static std::size_t value_bytes(index_t tiles) { return align(static_cast<std::size_t>(tiles) * Lanes * sizeof(Acc)); }
  static std::size_t bytes(index_t tiles) { return status_bytes(tiles) + 4 * value_bytes(tiles); }
  static tile_state carve(void* base, index_t tiles) {
    char* p = static_cast<char*>(base);
    tile_state s;
    s.status = reinterpret_cast<unsigned*>(p);
    p += status_bytes(tiles);
    s.aggregate = reinterpret_cast<Acc*>(p);
    s.window = reinterpret_cast<Acc*>(p + value_bytes(tiles));
    s.super = reinterpret_cast<Acc*>(p + 2 * value_bytes(tiles));
    s.inclusive = reinterpret_cast<Acc*>(p + 3 * value_bytes(tiles));
    return s;
  }

  __device__ PARSCAN_INLINE void wait(index_t tile, unsigned at_least) const {
    cuda::atomic_ref<unsigned, cuda::thread_scope_device> ref(status[tile]);
    int spins = 0;
    while (ref.load(cuda::memory_order_acquire) < at_least)
      if (++spins > 8) __nanosleep(32);
  }
  /// Called by one lane: the value, then the status with release semantics.
  __device__ PARSCAN_INLINE void publish(Acc* values, index_t tile, const Acc& v, unsigned st) const {
    values[tile] = v;
    release(tile, st);
  }
  /// Called by a whole warp, each lane with its own sequence's value.
  __device__ PARSCAN_INLINE void publish_lanes(Acc* values, index_t tile, const Acc& v, unsigned st) const {
    values[tile * Lanes + lane_id()] = v;
    __threadfence();  // every lane's value is visible device-wide before lane 0's release
    __syncwarp();
    if (lane_id() == 0) release(tile, st);
  }
  __device__ PARSCAN_INLINE void release(index_t tile, unsigned st) const {
    cuda::atomic_ref<unsigned, cuda::thread_scope_device> ref(status[tile]);
    ref.store(st, cuda::memory_order_release);
  }
};

/// Where tile k of a sequence finds its predecessors: the first tile of its window, of its
/// super-window and of its hyper-window (all relative to the sequence's first tile).
struct lookback_frame {
  index_t k, w, sw, hw;
  __device__ PARSCAN_INLINE explicit lookback_frame(index_t k_)
      : k(k_), w(k_ - k_ % lookback_window), sw(k_ - k_ % lookback_super), hw(k_ - k_ % lookback_hyper) {}
  __device__ PARSCAN_INLINE int tiles_before() const { return static_cast<int>(k - w); }
  __device__ PARSCAN_INLINE int windows_before() const { return static_cast<int>((w - sw) / lookback_window); }
  __device__ PARSCAN_INLINE int supers_before() const { return static_cast<int>((sw - hw) / lookback_super); }
  __device__ PARSCAN_INLINE bool ends_window() const { return k % lookback_window == lookback_window - 1; }
  __device__ PARSCAN_INLINE bool ends_super() const { return k % lookback_super == lookback_super - 1; }
  __device__ PARSCAN_INLINE bool ends_hyper() const { return k % lookback_hyper == lookback_hyper - 1; }
};

/// Reads `n` (≤ 32) values, lane i taking tile first + i·stride once its status reaches
/// `at_least`, and combines them in order. Valid in every lane; n = 0 gives nothing.
template <class Acc, class Op>
__device__ PARSCAN_INLINE maybe<Acc> gather_in_order(const tile_state<Acc, 1>& st, const Acc* values, index_t first,
                                                     index_t stride, int n, unsigned at_least, const Op& op) {
  if (n == 0) return {Acc{}, false};
  const int lane = lane_id();
  Acc v{};
  if (lane < n) {
    st.wait(first + lane * stride, at_least);
    v = values[first + lane * stride];
  }
  v = warp_ordered_reduce(v, n, op);
  return {shfl_idx(v, 0), true};
}

/// The whole look-back of tile k of a sequence whose first tile is `first`, run by one warp
/// with the tile's aggregate. Publishes what the tile owes its successors and returns the
/// tile's prefix (carry ⊕ tiles 0..k-1), the same in every lane. `carry` is the sequence's
/// carry in, used by the tiles of the first hyper-window.
template <class Acc, class Op>
__device__ PARSCAN_INLINE maybe<Acc> lookback(const tile_state<Acc, 1>& st, index_t first, index_t k, const Acc& aggregate,
                                              const maybe<Acc>& carry, const Op& op) {
  const lookback_frame f(k);
  const index_t tile = first + k;
  const bool lane0 = lane_id() == 0;
  const maybe<Acc> own{aggregate, true};
  if (lane0) st.publish(st.aggregate, tile, aggregate, tile_aggregate);

  const maybe<Acc> in_window = gather_in_order(st, st.aggregate, first + f.w, 1, f.tiles_before(), tile_aggregate, op);
  if (f.ends_window() && lane0) st.publish(st.window, tile, combine(in_window, own, op).value, tile_window);
  const maybe<Acc> windows = gather_in_order(st, st.window, first + f.sw + lookback_window - 1, lookback_window,
                                             f.windows_before(), tile_window, op);
  const maybe<Acc> in_super = combine(windows, in_window, op);
  if (f.ends_super() && lane0) st.publish(st.super, tile, combine(in_super, own, op).value, tile_super);
  const maybe<Acc> supers = gather_in_order(st, st.super, first + f.hw + lookback_super - 1, lookback_super,
                                            f.supers_before(), tile_super, op);
  maybe<Acc> start = carry;
  if (f.hw > 0) {
    st.wait(first + f.hw - 1, tile_inclusive);
    start = {st.inclusive[first + f.hw - 1], true};
  }
  const maybe<Acc> prefix = combine(combine(start, supers, op), in_super, op);
  if (f.ends_hyper() && lane0) st.publish(st.inclusive, tile, combine(prefix, own, op).value, tile_inclusive);
  return prefix;
}

/// The same look-back for a tile of 32 sequences, one per lane: every lane folds its own
/// sequence's values, in the same fixed order. Run by a whole warp. `published`: the caller
/// has already published the tile's aggregate (publish_lanes with tile_aggregate).
template <class Acc, class Op>
__device__ PARSCAN_INLINE maybe<Acc> lookback(const tile_state<Acc, 32>& st, index_t first, index_t k,
                                              const maybe<Acc>& aggregate, const maybe<Acc>& carry, const Op& op,
                                              bool published = false) {
  const lookback_frame f(k);
  const int lane = lane_id();
  const index_t tile = first + k;
  const Acc own = aggregate.value;  // lanes past the last sequence publish whatever they hold
  if (!published) st.publish_lanes(st.aggregate, tile, own, tile_aggregate);
  // Up to 31 tiles: lane i waits for tile i (the waits overlap), then every lane folds its own
  // sequence's values in order, loading a batch at a time so the loads overlap too. (One tile
  // after another, wait then load, cost two dependent L2 round trips per tile and held the
  // channel-last forward at 43% of copy on an H100.) The warp barrier orders each lane's reads
  // after the other lanes' acquires.
  auto fold = [&](const Acc* values, index_t from, index_t stride, index_t n, unsigned at_least) {
    if (lane < n) st.wait(from + lane * stride, at_least);
    __syncwarp();
    maybe<Acc> r{Acc{}, false};
    constexpr int batch = 8;
    for (index_t i0 = 0; i0 < n; i0 += batch) {
      Acc v[batch];
#pragma unroll
      for (int j = 0; j < batch; ++j)
        if (i0 + j < n) v[j] = values[(from + (i0 + j) * stride) * 32 + lane];
#pragma unroll
      for (int j = 0; j < batch; ++j)
        if (i0 + j < n) r = combine(r, maybe<Acc>{v[j], true}, op);
    }
    return r;
  };
  const maybe<Acc> in_window = fold(st.aggregate, first + f.w, 1, f.tiles_before(), tile_aggregate);
  if (f.ends_window()) st.publish_lanes(st.window, tile, combine(in_window, aggregate, op).value, tile_window);
  const maybe<Acc> windows =
      fold(st.window, first + f.sw + lookback_window - 1, lookback_window, f.windows_before(), tile_window);
  const maybe<Acc> in_super = combine(windows, in_window, op);
  if (f.ends_super()) st.publish_lanes(st.super, tile, combine(in_super, aggregate, op).value, tile_super);
  const maybe<Acc> supers =
      fold(st.super, first + f.hw + lookback_super - 1, lookback_super, f.supers_before(), tile_super);
  maybe<Acc> start = carry;
  if (f.hw > 0) {
    st.wait(first + f.hw - 1, tile_inclusive);
    start = {st.inclusive[(first + f.hw - 1) * 32 + lane], true};
  }
  const maybe<Acc> prefix = combine(combine(start, supers, op), in_super, op);
  if (f.ends_hyper()) st.publish_lanes(st.inclusive, tile, combine(prefix, aggregate, op).value, tile_inclusive);
  return prefix;
}

}  // namespace parscan::cuda_detail
