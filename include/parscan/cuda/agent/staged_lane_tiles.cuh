// parscan/cuda/agent/staged_lane_tiles.cuh — lane tiles (block/lane_tile_scan.cuh) on a
// persistent grid, each thread keeping the steps of its next tiles in flight in shared memory.
//
// A plain lane tile (lane_tiles.cuh) holds its steps in registers from load to store, so a
// block has nothing in flight while warp 0 runs the look-back, and registers cap the steps per
// thread. On an H100 the bf16 channel-last recurrence took ~15 µs per 37 KB tile that way (21%
// of copy), most of it not moving data. Here:
//   * blocks stay resident (a cooperative launch) and take tiles round-robin in time-major
//     order: every channel group's first time window, then every group's second, and so on. A
//     tile's predecessors in its sequences were taken a wave of tiles earlier;
//   * each thread copies its own steps of the next Stages - 1 tiles into a ring in shared memory
//     with cp.async and reads back only those, so the ring needs no barrier and the copies stay
//     in flight through the look-back;
//   * a thread keeps no steps in registers: it folds its staged elements into its total, and
//     after the look-back folds them again from its prefix, storing each result as it goes.
//     For the gated recurrence the second fold is the sequential recurrence itself.
// The grid never deadlocks: a tile waits only on tiles of smaller index, and every block takes
// its tiles in increasing order, so the smallest unfinished tile always has a block on it.
//
// The Problem provides, besides at / initial / finish / exclusive of lane_tile_scan.cuh:
//   static constexpr int staged_lane_tensors;   tensors staged per step
//   static constexpr int staged_lane_bytes;     bytes per tensor, step and lane (4, 8 or 16)
//   void stage_lane_step(cursor, index_t pos, unsigned char* slot, int tensor_stride);
//   acc_type staged_element(const unsigned char* slot, int tensor_stride);
//   void store_staged(cursor, index_t pos, const unsigned char* slot, int tensor_stride, acc_type);
//   bool stages_lanes() const;                  (host) whether this call's pointers allow it
// where tensor j of a step sits at slot + j·tensor_stride.
#pragma once

#include <cstddef>
#include <type_traits>

#include "../block/lane_tile_scan.cuh"
#include "../thread/run_io.cuh"
#include "tile_state.cuh"

namespace parscan::cuda_detail {

/// The ring: [Stages][Steps][tensors][block threads] words of staged_lane_bytes each, so a warp
/// reads 32 adjacent words of one tensor and step (no bank conflicts).
template <int Warps, int Steps, int Stages, class Problem>
struct lane_staging_ring {
  static constexpr int threads = Warps * warp_threads;
  static constexpr int tensor_stride = threads * Problem::staged_lane_bytes;
  static constexpr int step_bytes = Problem::staged_lane_tensors * tensor_stride;
  static constexpr int bytes = Stages * Steps * step_bytes;
  unsigned char* base;

  __device__ PARSCAN_INLINE unsigned char* step(int slot, int i) const {
    return base + (slot * Steps + i) * step_bytes + static_cast<int>(threadIdx.x) * Problem::staged_lane_bytes;
  }
};

/// Where a tile puts the calling thread: its sequence (lane of channel group g), the tile's
/// time window k, the thread's first step and how many of its Steps steps exist.
template <int Warps, int Steps>
struct lane_tile_place {
  index_t g, k, s, first;
  int n;
  __device__ PARSCAN_INLINE lane_tile_place(index_t tile, index_t groups, index_t sequences, index_t length) {
    k = tile / groups;
    g = tile - k * groups;
    s = g * warp_threads + lane_id();
    first = (k * Warps + static_cast<int>(threadIdx.x) / warp_threads) * Steps;
    n = 0;
    if (s < sequences && first < length) n = length - first < Steps ? static_cast<int>(length - first) : Steps;
  }
};

/// Whether a Problem can run as staged lane tiles (it names what it stages), and whether this
/// call's pointers allow it (Problem::stages_lanes(), on the host: cp.async needs each word
/// aligned to its size).
template <class Problem, class = void>
constexpr bool has_staged_lanes = false;
template <class Problem>
constexpr bool has_staged_lanes<Problem, std::void_t<decltype(Problem::staged_lane_tensors)>> = true;

/// The shape of the staged lane tiles of a Problem: 8 warps, and a ring of about 96 KB per block so that two blocks fit on an H100 or H200
/// multiprocessor. A thread stages `per_step` bytes a step; 16 steps a thread where that keeps
/// at least two stages (for the gated recurrence: the forward, and the backward of 2- and 4-byte
/// types, which stages a, dx and x), else 8.
template <class Problem>
struct staged_lane_shape {
  static constexpr int lane_warps = 8;
  static constexpr int per_step = Problem::staged_lane_tensors * Problem::staged_lane_bytes;
  static constexpr int ring_budget = 96 * 1024;
  static constexpr int lane_steps = 16 * per_step * 2 * lane_warps * warp_threads <= ring_budget ? 16 : 8;
  static constexpr int fitting_stages = ring_budget / (lane_steps * per_step * lane_warps * warp_threads);
  static constexpr int lane_stages = fitting_stages > 4 ? 4 : fitting_stages;
  static constexpr index_t lane_tile = static_cast<index_t>(lane_warps) * lane_steps;
  static_assert(lane_stages >= 2, "the ring holds at least the tile being scanned and the next");
};

/// Workspace bytes of the staged lane tiles of `sequences` × `length` steps of Problem.
template <class Problem, class shape = staged_lane_shape<Problem>>
std::size_t staged_lane_workspace_bytes(index_t sequences, index_t length) {
  if (sequences <= 0 || length <= 0) return 0;
  const index_t groups = (sequences + warp_threads - 1) / warp_threads;
  const index_t tiles = groups * ((length + shape::lane_tile - 1) / shape::lane_tile);
  return tile_state<typename Problem::acc_type, warp_threads>::bytes(tiles) + 256;
}

template <int Warps, int Steps, int Stages, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_lane_staged_kernel(Problem P, Op op, tile_state<typename Problem::acc_type, warp_threads> st, index_t groups,
                            index_t tiles_per_group, index_t sequences) {
  using Acc = typename Problem::acc_type;
  using ring_type = lane_staging_ring<Warps, Steps, Stages, Problem>;
  using place = lane_tile_place<Warps, Steps>;
  extern __shared__ __align__(16) unsigned char ring_bytes[];
  __shared__ lane_tile_smem<Acc, Warps> sm;
  const ring_type ring{ring_bytes};
  const index_t tiles = groups * tiles_per_group, length = P.length;

  auto stage = [&](index_t tile, int slot) {
    if (tile < tiles) {
      const place p(tile, groups, sequences, length);
      const auto cur = P.at(p.n > 0 ? p.s : 0);
#pragma unroll
      for (int i = 0; i < Steps; ++i)
        if (i < p.n) P.stage_lane_step(cur, p.first + i, ring.step(slot, i), ring_type::tensor_stride);
    }
    async_commit();  // a group per tile, empty or not, so that every thread counts the same
  };

#pragma unroll
  for (int j = 0; j < Stages - 1; ++j) stage(blockIdx.x + static_cast<index_t>(j) * gridDim.x, j);
  int slot = 0;
  for (index_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    stage(tile + static_cast<index_t>(Stages - 1) * gridDim.x, slot == 0 ? Stages - 1 : slot - 1);
    async_wait<Stages - 1>();  // this thread's copies for `tile` have landed
    const place p(tile, groups, sequences, length);

    Acc total{};
#pragma unroll
    for (int i = 0; i < Steps; ++i) {
      if (i < p.n) {
        const Acc e = P.staged_element(ring.step(slot, i), ring_type::tensor_stride);
        total = i == 0 ? e : op(total, e);
      }
    }
    const maybe<Acc> prefix =
        lane_tile_warp_prefix<Warps>(maybe<Acc>{total, p.n > 0}, op, sm, [&](const maybe<Acc>& aggregate) {
          const maybe<Acc> carry = p.k < lookback_hyper && p.s < sequences ? P.initial(p.s) : maybe<Acc>{Acc{}, false};
          return lookback(st, p.g * tiles_per_group, p.k, aggregate, carry, op);
        });

    const auto cur = P.at(p.n > 0 ? p.s : 0);
    maybe<Acc> acc = prefix;  // exclusive: there is always a prefix (init or carry)
#pragma unroll
    for (int i = 0; i < Steps; ++i) {
      if (i >= p.n) break;
      const unsigned char* step = ring.step(slot, i);
      const maybe<Acc> e{P.staged_element(step, ring_type::tensor_stride), true};
      if (P.exclusive) {
        P.store_staged(cur, p.first + i, step, ring_type::tensor_stride, acc.value);
        acc = combine(acc, e, op);
      } else {
        acc = combine(acc, e, op);
        P.store_staged(cur, p.first + i, step, ring_type::tensor_stride, acc.value);
      }
      if (p.first + i == length - 1) P.finish(p.s, acc.value);
    }
    slot = slot == Stages - 1 ? 0 : slot + 1;
  }
  async_wait<0>();
}

}  // namespace parscan::cuda_detail
