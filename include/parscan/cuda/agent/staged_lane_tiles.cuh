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
//     tile's look-back overlaps the previous tile's store and the next tile's fold (the
//     kernel's comment says how); the compute warps publish each tile's aggregate as soon as
//     they have folded it;
//   * which tiles a block takes, and where a tile puts its threads, comes from a tile plan:
//     the batch's (batch_lane_tiles below) or packed sequences' (recurrence/varlen_recurrence.cuh).
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
// and, optionally, specializes / specialized(f) (with_specialized below),
// where i counts the thread's steps from `first`, and tensor j of a step sits at
// slot + j·tensor_stride.
#pragma once

#include <cstddef>
#include <type_traits>

#include "../block/lane_tile_scan.cuh"
#include "../thread/run_io.cuh"
#include "tile_state.cuh"

namespace parscan::cuda_detail {

/// Calls f(P), or, for a Problem that offers them (Problem::specializes, e.g. the gated
/// recurrence's lane packs), f with the copy of P that P.specialized picks for this call, in
/// which what the call decides at run time is a compile-time constant. The kernel's per-step
/// loops run inside it, so that the code a call runs is straight-line and in one place.
template <class Problem, class = void>
constexpr bool offers_specialized = false;
template <class Problem>
constexpr bool offers_specialized<Problem, std::void_t<decltype(Problem::specializes)>> = Problem::specializes;

template <class Problem, class F>
__device__ PARSCAN_INLINE void with_specialized(const Problem& P, F&& f) {
  if constexpr (offers_specialized<Problem>) P.specialized(f);
  else f(P);
}

/// A barrier for the first `threads` threads of the block only (barrier `id`, not 0, which is
/// __syncthreads').
__device__ PARSCAN_INLINE void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

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

/// Where a tile puts the calling thread: the tile's channel group g and time window k, the
/// thread's sequence s (lane of group g) and first step, how many of its Steps steps exist,
/// where the group's window 0 sits in the tile state, and the length of the tile's sequences.
struct lane_tile_place {
  index_t g, k, s, first, chain, length;
  int n;
  bool lane;            // s is a sequence (the last group may have fewer than 32)
  bool exists;          // a tile of the plan (a packed plan has a few unused slots)
  bool empty_sequence;  // the one slot of a sequence of no steps, which only finishes it
};

template <int Warps, int Steps>
__device__ PARSCAN_INLINE lane_tile_place place_lane_tile(index_t g, index_t k, index_t sequences, index_t length,
                                                          index_t chain) {
  lane_tile_place p;
  p.g = g, p.k = k, p.chain = chain, p.length = length;
  p.s = g * warp_threads + lane_id();
  p.first = (k * Warps + static_cast<int>(threadIdx.x) / warp_threads) * Steps;
  p.lane = p.s < sequences;
  p.exists = true, p.empty_sequence = false;
  p.n = 0;
  if (p.lane && p.first < length) p.n = length - p.first < Steps ? static_cast<int>(length - p.first) : Steps;
  return p;
}

/// The tiles of a batch: `sequences` sequences of P.length steps, in groups of 32, taken in
/// time-major order (every group's window 0, then every group's window 1, …), so that a tile's
/// predecessors in its sequences were taken a wave of tiles earlier. visit(P, tile, f) calls
/// f(P, place), for any tile in any order: a plan keeps no state between visits.
struct batch_lane_tiles {
  index_t groups, tiles_per_group, sequences;

  __device__ PARSCAN_INLINE index_t tiles() const { return groups * tiles_per_group; }
  template <int Warps, int Steps, class Problem, class F>
  __device__ PARSCAN_INLINE void visit(const Problem& P, index_t tile, F&& f) const {
    const index_t k = tile / groups, g = tile - k * groups;
    f(P, place_lane_tile<Warps, Steps>(g, k, sequences, P.length, g * tiles_per_group));
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
  lane_tile_grid grid;
  if (sequences <= 0 || length <= 0 || !lane_tile_grid_of(sequences, length, shape::lane_tile, grid)) return 0;
  return tile_state<typename Problem::acc_type, warp_threads>::bytes(grid.tiles) + 256;
}

/// What the compute warps and the look-back warp hand each other through shared memory, two
/// tiles deep (by the parity of the block's tile count): each compute warp's per-lane total of
/// a tile, which the look-back warp turns in place into that warp's prefix.
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

/// Warps 0 … Warps-1 stage, fold and store; warp Warps runs the look-back one tile behind them,
/// so that a tile costs the longer of its look-back and the compute warps' work, not their sum.
/// The block moves in lockstep, one __syncthreads per tile. Between barriers n and n + 1 (the
/// block's tile n is blockIdx.x + n·gridDim.x):
///   * the look-back warp turns the totals of tile n into prefixes (relay buffer n mod 2);
///   * each compute thread stores tile n - 1 from its prefix (buffer n - 1 mod 2), folding its
///     steps again; starts copying its steps of tile n + Stages - 1 into the slot that tile
///     n - 1 has just left; then waits for its copies of tile n + 1 and folds them into its
///     total (buffer n + 1 mod 2, where it has just read its own prefix of tile n - 1);
///   * after a barrier of the compute warps alone, compute warp 0 publishes tile n + 1's
///     aggregate, so that successors on other blocks find it a round before its look-back.
/// The ring holds tiles n - 1 … n + Stages - 2: the one being stored, the one in the look-back,
/// the one being folded, and Stages - 3 more in flight. (A version whose look-back warp and
/// compute warps signalled each other with named barriers, bar.arrive on one side and bar.sync
/// on the other, ran as fast; racecheck reported the relay's reuse across bar.arrive as a race.
/// With one __syncthreads per tile it reports none.)
template <int Warps, int Steps, int Stages, class Problem, class Op, class Plan>
__global__ void __launch_bounds__((Warps + 1) * warp_threads,
                                  lane_staging_ring<Warps, Steps, Stages, Problem>::bytes <= 100 * 1024 ? 2 : 1)
    scan_lane_staged_kernel(Problem P, Op op, tile_state<typename Problem::acc_type, warp_threads> st, Plan plan) {
  static_assert(Stages >= 3, "the ring holds the tiles being stored, looked back and folded");
  using Acc = typename Problem::acc_type;
  using ring_type = lane_staging_ring<Warps, Steps, Stages, Problem>;
  extern __shared__ __align__(16) unsigned char ring_bytes[];
  __shared__ lane_relay_smem<Acc, Warps> relay_smem;
  auto& relay = relay_smem.get();
  const ring_type ring{ring_bytes};
  const index_t tiles = plan.tiles();
  if (static_cast<index_t>(blockIdx.x) >= tiles) return;  // a packed plan may have fewer tiles than blocks
  const index_t count = (tiles - 1 - blockIdx.x) / gridDim.x + 1;
  const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_threads;
  auto tile_of = [&](index_t n) { return blockIdx.x + n * static_cast<index_t>(gridDim.x); };
  auto slot_of = [](index_t n) { return static_cast<int>(n % Stages); };

  auto stage = [&](index_t n) {
    if (n < count) {
      plan.template visit<Warps, Steps>(P, tile_of(n), [&](const auto& Q, const lane_tile_place& p) {
        if (p.n > 0) {
          const auto cur = Q.lane_at(p.s, p.first);
#pragma unroll
          for (int i = 0; i < Steps; ++i)
            if (i < p.n) Q.stage_lane_step(cur, i, ring.step(slot_of(n), i), ring_type::tensor_stride);
        }
      });
    }
    async_commit();  // a group per tile, empty or not, so that every thread counts the same
  };
  // Folds tile n (its copies landed) into this thread's total, for the look-back warp. Returns
  // where the tile's aggregate goes in the tile state (-1: not a tile), for publish().
  auto fold = [&](index_t n) {
    index_t aggregate_at = -1;
    plan.template visit<Warps, Steps>(P, tile_of(n), [&](const auto& R, const lane_tile_place& p) {
      Acc total{};
      with_specialized(R, [&](const auto& Q) {
        if (p.n > 0) total = Q.staged_element(ring.step(slot_of(n), 0), ring_type::tensor_stride);
#pragma unroll 8
        for (int j = 1; j < Steps; ++j)
          if (j < p.n) total = op(total, Q.staged_element(ring.step(slot_of(n), j), ring_type::tensor_stride));
      });
      relay.value[n & 1][warp][lane] = total;
      relay.has[n & 1][warp][lane] = p.n > 0;
      if (p.exists) aggregate_at = p.chain + p.k;
    });
    return aggregate_at;
  };
  // Stores tile n from its prefix, folding its steps again.
  auto store = [&](index_t n) {
    plan.template visit<Warps, Steps>(P, tile_of(n), [&](const auto& R, const lane_tile_place& p) {
      if (p.n == 0) {
        // A sequence of no steps: its carry out is its carry in.
        if (p.empty_sequence && warp == 0 && p.lane) R.finish(p.s, R.initial(p.s).value);
        return;
      }
      maybe<Acc> acc{relay.value[n & 1][warp][lane], relay.has[n & 1][warp][lane]};  // exclusive: always a prefix
      with_specialized(R, [&](const auto& Q) {
        const auto cur = Q.lane_at(p.s, p.first);
#pragma unroll 8
        for (int j = 0; j < Steps; ++j) {
          if (j >= p.n) break;
          const unsigned char* step = ring.step(slot_of(n), j);
          const maybe<Acc> e{Q.staged_element(step, ring_type::tensor_stride), true};
          if (Q.exclusive) {
            Q.store_staged(cur, j, step, ring_type::tensor_stride, acc.value);
            acc = combine(acc, e, op);
          } else {
            acc = combine(acc, e, op);
            Q.store_staged(cur, j, step, ring_type::tensor_stride, acc.value);
          }
          if (p.first + j == p.length - 1) Q.finish(p.s, acc.value);
        }
      });
    });
  };
  // The aggregate of tile n (folded, to go at `aggregate_at`), published by compute warp 0 as
  // soon as the compute warps have folded it, a barrier before its look-back. A tile's
  // predecessors in a packed plan are mostly tiles of the same round on other blocks: published
  // from their look-backs, each look-back would wait on the neighbours' previous look-backs,
  // and the grid would move in step with its slowest block.
  auto publish = [&](index_t n, index_t aggregate_at) {
    named_barrier_sync(1, Warps * warp_threads);
    if (warp != 0 || aggregate_at < 0) return;
    const int b = static_cast<int>(n & 1);
    maybe<Acc> tile_total{Acc{}, false};
    for (int w = 0; w < Warps; ++w)
      tile_total = combine(tile_total, maybe<Acc>{relay.value[b][w][lane], relay.has[b][w][lane]}, op);
    st.publish_lanes(st.aggregate, aggregate_at, tile_total.value, tile_aggregate);
  };
  // The look-back of tile n: the warps' totals become their prefixes.
  auto look_back = [&](index_t n) {
    plan.template visit<Warps, Steps>(P, tile_of(n), [&](const auto& Q, const lane_tile_place& p) {
      if (!p.exists) return;
      const int b = static_cast<int>(n & 1);
      maybe<Acc> tile_total{Acc{}, false};
      for (int w = 0; w < Warps; ++w) {
        const maybe<Acc> t{relay.value[b][w][lane], relay.has[b][w][lane]};
        relay.value[b][w][lane] = tile_total.value;  // warp w's exclusive prefix within the tile
        relay.has[b][w][lane] = tile_total.has;
        tile_total = combine(tile_total, t, op);
      }
      const maybe<Acc> carry = p.k < lookback_hyper && p.lane ? Q.initial(p.s) : maybe<Acc>{Acc{}, false};
      const maybe<Acc> before = lookback(st, p.chain, p.k, tile_total, carry, op, /*published=*/true);
#pragma unroll 1
      for (int w = 0; w < Warps; ++w) {
        const maybe<Acc> r = combine(before, maybe<Acc>{relay.value[b][w][lane], relay.has[b][w][lane]}, op);
        relay.value[b][w][lane] = r.value;
        relay.has[b][w][lane] = r.has;
      }
    });
  };

  if (warp < Warps) {
#pragma unroll
    for (int j = 0; j < Stages - 1; ++j) stage(j);
    async_wait<Stages - 2>();  // tile 0's copies have landed
    publish(0, fold(0));
    for (index_t n = 0; n <= count; ++n) {
      __syncthreads();
      if (n > 0) store(n - 1);
      if (n + 1 < count) {
        stage(n + Stages - 1);
        async_wait<Stages - 2>();  // tile n + 1's copies have landed
        publish(n + 1, fold(n + 1));
      }
    }
  } else {
    for (index_t n = 0; n <= count; ++n) {
      __syncthreads();
      if (n < count) look_back(n);
    }
  }
  async_wait<0>();
}

}  // namespace parscan::cuda_detail
