// parscan/cuda/agent/warp_loop.cuh — the warp loop: each warp owns whole sequences and walks
// their tiles in order, carrying the running prefix in registers. No barriers and no
// inter-block traffic; chosen when there are enough sequences to give every resident warp its
// own. Sequences of one tile of at most a run a lane take segment tiles instead: a warp scans
// one or two of them at once, the next groups staged while it scans.
#pragma once

#include <type_traits>

#include "../block/tile_scan.cuh"
#include "staging_ring.cuh"

namespace parscan::cuda_detail {

/// Sequence s of P, whole, by the calling warp: its tiles in order, the running prefix in
/// registers, starting from `running` (the same in every lane). P.length > 0.
template <int Chunks, class Problem, class Op>
__device__ PARSCAN_INLINE void scan_sequence_in_warp(const Problem& P, const Op& op, index_t s,
                                                     maybe<typename Problem::acc_type> running) {
  using Acc = typename Problem::acc_type;
  using items = tile_items<Problem, Chunks>;
  constexpr index_t tile = tile_steps<Problem, 1, Chunks>;
  const index_t tiles = (P.length + tile - 1) / tile;
  // No prefetch of tile k+1 here: measured on an H200 it doubled the tile's registers, cut the
  // resident warps from 20 to 12 per SM and lowered the forward from 55% to 38% of copy.
  // Independent warps already overlap one another's loads and scans.
  for (index_t k = 0; k < tiles; ++k) {
    items now;
    load_tile<1, Chunks>(P, s, k, now);
    scan_tile<1, Chunks>(P, op, s, k, now, static_cast<tile_scan_smem<Acc, 1>*>(nullptr), [&](const Acc& aggregate) {
      const maybe<Acc> before = running;
      running = combine(running, maybe<Acc>{aggregate, true}, op);
      return before;
    });
  }
}

/// The same from the sequence's own carry in (or init).
template <int Chunks, class Problem, class Op>
__device__ PARSCAN_INLINE void scan_sequence_in_warp(const Problem& P, const Op& op, index_t s) {
  scan_sequence_in_warp<Chunks>(P, op, s, P.initial(s));
}

template <int Warps, int Chunks, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads) scan_warp_loop_kernel(Problem P, Op op, index_t sequences) {
  const index_t first_warp = static_cast<index_t>(blockIdx.x) * Warps + threadIdx.x / warp_threads;
  const index_t all_warps = static_cast<index_t>(gridDim.x) * Warps;
  for (index_t s = first_warp; s < sequences; s += all_warps) scan_sequence_in_warp<Chunks>(P, op, s);
}

/// Sequence s of P, whole, by the calling warp, with its next Stages-1 tiles in flight through
/// this warp's slots of `ring` (a staging_ring of Stages slots), from `running`. P.length > 0.
template <int Chunks, int Stages, class Problem, class Op, class Ring>
__device__ PARSCAN_INLINE void scan_sequence_in_warp_staged(const Problem& P, const Op& op, index_t s, const Ring& ring,
                                                            maybe<typename Problem::acc_type> running) {
  using Acc = typename Problem::acc_type;
  constexpr index_t tile = tile_steps<Problem, 1, Chunks>;
  const index_t tiles = (P.length + tile - 1) / tile;
  const auto cur = P.at(s);
  pipeline_through_ring<Stages>(
      tiles, [&](index_t k, int slot) { ring.stage(P, cur, k * tile, slot); },
      [&](index_t k, int slot) {
        tile_items<Problem, Chunks> now;
        const unsigned staged = ring.load(P, cur, k * tile, slot, now);
        scan_tile<1, Chunks>(
            P, op, s, k, now, static_cast<tile_scan_smem<Acc, 1>*>(nullptr),
            [&](const Acc& aggregate) {
              const maybe<Acc> before = running;
              running = combine(running, maybe<Acc>{aggregate, true}, op);
              return before;
            },
            [&](int j, index_t first, const Acc (&run)[Problem::run]) {
              ring.store(P, cur, first, slot, j, staged, run);
            });
      });
  __syncwarp();  // the next sequence's copies reuse the slots this warp just read
}

/// Sequences of at most one tile of Lanes lanes and one run a lane: each warp scans 32 / Lanes
/// of them at once, one in each segment of Lanes lanes, so that a short sequence does not leave
/// most of its warp idle. (A bfloat16 sequence of 128 steps is 16 runs: on a whole warp, half
/// the lanes ran the partial-run paths for nothing, and the forward at (8, 1536, 128) issued
/// 2.2 times the float forward's instructions a sequence; ncu on an H100.) A persistent grid:
/// each warp takes every gridDim·Warps-th group of sequences, the next Stages-1 groups' runs in
/// flight through the staging ring while it scans one, since a tile this short is mostly the
/// wait for its loads. Each lane's cursor is computed once, when its group is staged, and kept
/// beside the ring until the group is scanned (segment_tiles_smem).
template <int Warps, int Lanes, int Stages, class Problem>
struct segment_tiles_smem {
  using ring = staging_ring<Warps, 1, Stages, Problem, Lanes>;
  using cursor = typename Problem::cursor;
  // (An iterator holding a lambda is trivially copyable but not assignable: recomputed.)
  static constexpr bool keeps_cursors = std::is_trivially_copyable_v<cursor> && std::is_copy_assignable_v<cursor>;
  static constexpr int bytes = ring::bytes + (keeps_cursors ? Stages * Warps * warp_threads * int(sizeof(cursor)) : 0);
};

template <int Warps, int Lanes, int Stages, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_segment_tiles_kernel(Problem P, Op op, index_t sequences) {
  using Acc = typename Problem::acc_type;
  using smem = segment_tiles_smem<Warps, Lanes, Stages, Problem>;
  using cursor = typename smem::cursor;
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  const typename smem::ring ring{dynamic_smem};
  cursor* const kept_base = reinterpret_cast<cursor*>(dynamic_smem + smem::ring::bytes) + threadIdx.x;
  const auto kept = [kept_base](int slot) -> cursor& { return kept_base[slot * Warps * warp_threads]; };
  constexpr index_t per_warp = warp_threads / Lanes, tile = tile_steps<Problem, 1, 1, Lanes>;
  const index_t first = (static_cast<index_t>(blockIdx.x) * Warps + threadIdx.x / warp_threads) * per_warp;
  const index_t stride = static_cast<index_t>(gridDim.x) * Warps * per_warp;
  const index_t groups = first < sequences ? (sequences - first + stride - 1) / stride : 0;  // the same in every lane
  // Group i's sequence for this lane's segment, and whether it is one: a segment past the last
  // sequence takes the group's first from its second tile, which is past the end, so it reads,
  // writes and finishes nothing but takes part in the shuffles.
  struct place {
    index_t s;
    bool real;
  };
  const auto place_of = [&](index_t i) {
    const index_t base = first + i * stride, mine = base + lane_id() / Lanes;
    return mine < sequences ? place{mine, true} : place{base, false};
  };
  pipeline_through_ring<Stages>(
      groups,
      [&](index_t i, int slot) {
        const place q = place_of(i);
        const cursor cur = P.at(q.s);
        if constexpr (smem::keeps_cursors) kept(slot) = cur;
        ring.stage(P, cur, q.real ? 0 : tile, slot);
      },
      [&](index_t i, int slot) {
        const place q = place_of(i);
        const index_t k = q.real ? 0 : 1;
        const cursor cur = [&] {
          if constexpr (smem::keeps_cursors) return kept(slot);
          else return P.at(q.s);
        }();
        const maybe<Acc> before = q.real ? P.initial(q.s) : maybe<Acc>{};
        tile_items<Problem, 1> now;
        const unsigned staged = ring.load(P, cur, k * tile, slot, now);
        scan_tile<1, 1, Lanes>(
            P, op, q.s, k, now, static_cast<tile_scan_smem<Acc, 1>*>(nullptr), [&](const Acc&) { return before; },
            [&](int j, index_t at, const Acc (&run)[Problem::run]) { ring.store(P, cur, at, slot, j, staged, run); });
      });
}

/// Blocks per SM that the staged warp loop's registers must allow for Problem, where the
/// Problem asks (Problem::loop_min_blocks); otherwise 0, which leaves ptxas its own choice. (A
/// stated 1 is not the same: `.minnctapersm 1` cost the bf16 forward 4–5 points of copy.)
template <class Problem, class = void>
constexpr int loop_min_blocks = 0;
template <class Problem>
constexpr int loop_min_blocks<Problem, std::void_t<decltype(Problem::loop_min_blocks)>> = Problem::loop_min_blocks;

/// The warp loop with the next Stages-1 tiles of the warp's sequence in flight (staging_ring).
template <int Warps, int Chunks, int Stages, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads, loop_min_blocks<Problem>)
    scan_warp_loop_staged_kernel(Problem P, Op op, index_t sequences) {
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  const staging_ring<Warps, Chunks, Stages, Problem> ring{dynamic_smem};
  const index_t first_warp = static_cast<index_t>(blockIdx.x) * Warps + threadIdx.x / warp_threads;
  const index_t all_warps = static_cast<index_t>(gridDim.x) * Warps;
  for (index_t s = first_warp; s < sequences; s += all_warps)
    scan_sequence_in_warp_staged<Chunks, Stages>(P, op, s, ring, P.initial(s));
}

}  // namespace parscan::cuda_detail
