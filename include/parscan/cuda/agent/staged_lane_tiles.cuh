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
//   * each thread copies its own steps of the next tiles into a ring in shared memory with
//     cp.async and reads back only those, so the ring needs no barrier and the copies stay in
//     flight whatever else the block waits for;
//   * a thread keeps no steps in registers: it folds its staged elements into its total, and
//     once the tile's prefix is known folds them again from it, storing each result as it
//     goes. For the gated recurrence the second fold is the sequential recurrence itself;
//   * one extra warp per block runs the look-back, a tile behind the compute warps, so a
//     tile's look-back overlaps the next tile's fold (the kernel's comment says how).
// The grid never deadlocks: a tile waits only on tiles of smaller index, and every block takes
// its tiles in increasing order, so the smallest unfinished tile always has a block on it.
//
// The Problem provides, besides initial / finish / exclusive of lane_tile_scan.cuh:
//   static constexpr int staged_lane_tensors;   tensors staged per step
//   static constexpr int staged_lane_bytes;     bytes per tensor, step and lane (4, 8 or 16)
//   bool stages_lanes() const;                  (host) whether this call's pointers allow it
//   lane_cursor lane_at(index_t s, index_t first);   a thread's steps first, first + 1, … of s
//   void stage_lane_step(lane_cursor, int i, unsigned char* slot, int tensor_stride);
//   acc_type staged_element(const unsigned char* slot, int tensor_stride);
//   void store_staged(lane_cursor, int i, const unsigned char* slot, int tensor_stride, acc_type);
// where i counts the thread's steps from `first`, and tensor j of a step sits at
// slot + j·tensor_stride.
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

/// The shape of the staged lane tiles of a Problem: 8 compute warps (and the look-back warp),
/// and a ring of at least three stages in about 96 KB per block, so that two blocks fit on an
/// H100 or H200 multiprocessor. A thread stages `per_step` bytes a step; 16 steps a thread where
/// three stages of them fit, else 8 (the gated recurrence's backward stages a, dx and x). Where
/// even three stages of 8 steps exceed the budget (the backward of 8-byte types), the ring takes
/// what they need and the block has its multiprocessor alone.
template <class Problem>
struct staged_lane_shape {
  static constexpr int lane_warps = 8;
  static constexpr int per_step = Problem::staged_lane_tensors * Problem::staged_lane_bytes;
  static constexpr int ring_budget = 96 * 1024;
  static constexpr int stage_bytes(int steps) { return steps * per_step * lane_warps * warp_threads; }
  static constexpr int lane_steps = 3 * stage_bytes(16) <= ring_budget ? 16 : 8;
  static constexpr int fitting_stages = ring_budget / stage_bytes(lane_steps);
  static constexpr int lane_stages = fitting_stages < 3 ? 3 : (fitting_stages > 4 ? 4 : fitting_stages);
  static constexpr index_t lane_tile = static_cast<index_t>(lane_warps) * lane_steps;
};

/// Workspace bytes of the staged lane tiles of `sequences` × `length` steps of Problem.
template <class Problem, class shape = staged_lane_shape<Problem>>
std::size_t staged_lane_workspace_bytes(index_t sequences, index_t length) {
  if (sequences <= 0 || length <= 0) return 0;
  const index_t groups = (sequences + warp_threads - 1) / warp_threads;
  const index_t tiles = groups * ((length + shape::lane_tile - 1) / shape::lane_tile);
  return tile_state<typename Problem::acc_type, warp_threads>::bytes(tiles) + 256;
}

/// What the compute warps and the look-back warp hand each other through shared memory, two
/// tiles deep: each compute warp's per-lane total of a tile, which the look-back warp turns in
/// place into that warp's prefix.
template <class Acc, int Warps>
struct lane_relay_storage {
  Acc value[2][Warps][warp_threads];
  bool has[2][Warps][warp_threads];
};
template <class Acc, int Warps>
struct alignas(16) lane_relay_smem {
  alignas(Acc) unsigned char raw[sizeof(lane_relay_storage<Acc, Warps>)];
  __device__ PARSCAN_INLINE lane_relay_storage<Acc, Warps>& get() {
    return *reinterpret_cast<lane_relay_storage<Acc, Warps>*>(raw);
  }
};

/// Named barriers between the compute warps and the look-back warp (0 is __syncthreads), one
/// pair per tile parity so that a barrier is never reused before its last use completed:
/// "totals of tile i are in" (compute warps arrive, the look-back warp waits) and "prefixes of
/// tile i are out" (the look-back warp arrives, the compute warps wait).
template <int Id, int Threads>
__device__ PARSCAN_INLINE void named_arrive() {
  asm volatile("bar.arrive %0, %1;\n" ::"n"(Id), "n"(Threads) : "memory");
}
template <int Id, int Threads>
__device__ PARSCAN_INLINE void named_sync() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(Id), "n"(Threads) : "memory");
}
// Immediate barrier numbers, so that ptxas counts four barriers, not all sixteen.
template <int Threads>
__device__ PARSCAN_INLINE void arrive_totals_in(index_t i) {
  if (i & 1) named_arrive<2, Threads>();
  else named_arrive<1, Threads>();
}
template <int Threads>
__device__ PARSCAN_INLINE void wait_totals_in(index_t i) {
  if (i & 1) named_sync<2, Threads>();
  else named_sync<1, Threads>();
}
template <int Threads>
__device__ PARSCAN_INLINE void arrive_prefixes_out(index_t i) {
  if (i & 1) named_arrive<4, Threads>();
  else named_arrive<3, Threads>();
}
template <int Threads>
__device__ PARSCAN_INLINE void wait_prefixes_out(index_t i) {
  if (i & 1) named_sync<4, Threads>();
  else named_sync<3, Threads>();
}

/// Warps 0 … Warps-1 stage, fold and store; warp Warps runs the look-back of each tile while the
/// compute warps fold the next one, so a tile costs the longer of the two, not their sum. Per
/// block iteration i (tile blockIdx.x + i·gridDim.x), a compute thread
///   1. starts copying its steps of tile i + Stages - 2 (into the slot tile i - 2 has left),
///   2. waits for its copies of tile i and folds them into its total,
///   3. hands the total to the look-back warp,
///   4. takes tile i - 1's prefix back and stores tile i - 1, folding its steps again.
/// So the ring holds tile i - 1 (to store), tile i (to fold) and Stages - 2 tiles in flight.
template <int Warps, int Steps, int Stages, class Problem, class Op>
__global__ void __launch_bounds__((Warps + 1) * warp_threads,
                                  lane_staging_ring<Warps, Steps, Stages, Problem>::bytes <= 100 * 1024 ? 2 : 1)
    scan_lane_staged_kernel(Problem P, Op op, tile_state<typename Problem::acc_type, warp_threads> st, index_t groups,
                            index_t tiles_per_group, index_t sequences) {
  static_assert(Stages >= 3, "the ring holds the tile to store, the tile to fold and one in flight");
  using Acc = typename Problem::acc_type;
  using ring_type = lane_staging_ring<Warps, Steps, Stages, Problem>;
  using place = lane_tile_place<Warps, Steps>;
  constexpr int all_threads = (Warps + 1) * warp_threads;
  extern __shared__ __align__(16) unsigned char ring_bytes[];
  __shared__ lane_relay_smem<Acc, Warps> relay_smem;
  auto& relay = relay_smem.get();
  const ring_type ring{ring_bytes};
  const index_t tiles = groups * tiles_per_group, length = P.length;
  const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_threads;

  if (warp == Warps) {  // the look-back warp
    index_t i = 0;
    for (index_t tile = blockIdx.x; tile < tiles; tile += gridDim.x, ++i) {
      const int b = static_cast<int>(i & 1);
      wait_totals_in<all_threads>(i);
      maybe<Acc> tile_total{Acc{}, false};
      for (int w = 0; w < Warps; ++w) {
        const maybe<Acc> t{relay.value[b][w][lane], relay.has[b][w][lane]};
        relay.value[b][w][lane] = tile_total.value;  // becomes warp w's exclusive prefix within the tile
        relay.has[b][w][lane] = tile_total.has;
        tile_total = combine(tile_total, t, op);
      }
      const place p(tile, groups, sequences, length);
      const maybe<Acc> carry = p.k < lookback_hyper && p.s < sequences ? P.initial(p.s) : maybe<Acc>{Acc{}, false};
      const maybe<Acc> before = lookback(st, p.g * tiles_per_group, p.k, tile_total, carry, op);
#pragma unroll 1
      for (int w = 0; w < Warps; ++w) {
        const maybe<Acc> r = combine(before, maybe<Acc>{relay.value[b][w][lane], relay.has[b][w][lane]}, op);
        relay.value[b][w][lane] = r.value;
        relay.has[b][w][lane] = r.has;
      }
      arrive_prefixes_out<all_threads>(i);
    }
    return;
  }

  auto stage = [&](index_t tile, int slot) {
    if (tile < tiles) {
      const place p(tile, groups, sequences, length);
      if (p.n > 0) {
        const auto cur = P.lane_at(p.s, p.first);
#pragma unroll
        for (int i = 0; i < Steps; ++i)
          if (i < p.n) P.stage_lane_step(cur, i, ring.step(slot, i), ring_type::tensor_stride);
      }
    }
    async_commit();  // a group per tile, empty or not, so that every thread counts the same
  };
  // Stores tile `tile` (block iteration i, in `slot`) from its prefix, folding its steps again.
  auto store = [&](index_t tile, index_t i, int slot) {
    wait_prefixes_out<all_threads>(i);
    const int b = static_cast<int>(i & 1);
    maybe<Acc> acc{relay.value[b][warp][lane], relay.has[b][warp][lane]};  // exclusive: always a prefix
    const place p(tile, groups, sequences, length);
    if (p.n == 0) return;
    const auto cur = P.lane_at(p.s, p.first);
#pragma unroll 8
    for (int j = 0; j < Steps; ++j) {
      if (j >= p.n) break;
      const unsigned char* step = ring.step(slot, j);
      const maybe<Acc> e{P.staged_element(step, ring_type::tensor_stride), true};
      if (P.exclusive) {
        P.store_staged(cur, j, step, ring_type::tensor_stride, acc.value);
        acc = combine(acc, e, op);
      } else {
        acc = combine(acc, e, op);
        P.store_staged(cur, j, step, ring_type::tensor_stride, acc.value);
      }
      if (p.first + j == length - 1) P.finish(p.s, acc.value);
    }
  };

#pragma unroll
  for (int j = 0; j < Stages - 2; ++j) stage(blockIdx.x + static_cast<index_t>(j) * gridDim.x, j);
  int slot = 0, previous_slot = 0;
  index_t i = 0;
  for (index_t tile = blockIdx.x; tile < tiles; tile += gridDim.x, ++i) {
    stage(tile + static_cast<index_t>(Stages - 2) * gridDim.x, slot < 2 ? slot + Stages - 2 : slot - 2);
    async_wait<Stages - 2>();  // this thread's copies for `tile` have landed
    const place p(tile, groups, sequences, length);
    Acc total{};
#pragma unroll 8
    for (int j = 0; j < Steps; ++j) {
      if (j < p.n) {
        const Acc e = P.staged_element(ring.step(slot, j), ring_type::tensor_stride);
        total = j == 0 ? e : op(total, e);
      }
    }
    const int b = static_cast<int>(i & 1);
    relay.value[b][warp][lane] = total;
    relay.has[b][warp][lane] = p.n > 0;
    arrive_totals_in<all_threads>(i);
    if (i > 0) store(tile - gridDim.x, i - 1, previous_slot);
    previous_slot = slot;
    slot = slot == Stages - 1 ? 0 : slot + 1;
  }
  if (i > 0) store(blockIdx.x + (i - 1) * static_cast<index_t>(gridDim.x), i - 1, previous_slot);
  async_wait<0>();
}

}  // namespace parscan::cuda_detail
