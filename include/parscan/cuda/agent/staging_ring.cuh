// parscan/cuda/agent/staging_ring.cuh — how a worker keeps its next tiles in flight without
// holding registers: a ring of tiles in shared memory, filled by cp.async.
#pragma once

#include <type_traits>
#include <utility>

#include "../block/tile_scan.cuh"
#include "../thread/run_io.cuh"

namespace parscan::cuda_detail {

/// Whether a Problem can stage its runs through shared memory (stage_run / load_staged).
template <class Problem, class = void>
constexpr bool has_staging = false;
template <class Problem>
constexpr bool has_staging<Problem, std::void_t<decltype(Problem::staged_tensors)>> = true;

/// Bytes a lane stages beside each run's tensors (Problem::staged_lane_bytes, a multiple of 4;
/// 0 when the Problem says nothing): a word next to the run, such as the backward's x one step
/// off (staged_lane_word).
template <class Problem, class = void>
constexpr int staged_lane_bytes = 0;
template <class Problem>
constexpr int staged_lane_bytes<Problem, std::void_t<decltype(Problem::staged_lane_bytes)>> = Problem::staged_lane_bytes;

/// Whether a Problem writes a staged run's results from what the ring holds (store_staged),
/// instead of reading global memory again in store_run.
template <class Problem, class = void>
constexpr bool has_staged_store = false;
template <class Problem>
constexpr bool has_staged_store<
    Problem, std::void_t<decltype(std::declval<const Problem&>().store_staged(
                 std::declval<const typename Problem::cursor&>(), index_t{}, std::declval<const unsigned char*>(), 0,
                 std::declval<const typename Problem::acc_type (&)[Problem::run]>()))>> = true;

/// The calling lane's staged_lane_bytes beside its run at `run` (a run of tensor 0 of a ring
/// slot, as stage_run receives it): after the chunk's tensors, lane by lane.
template <class Problem>
__device__ PARSCAN_INLINE unsigned char* staged_lane_word(unsigned char* run, int tensor_stride) {
  return run + Problem::staged_tensors * tensor_stride + lane_id() * (staged_lane_bytes<Problem> - 16);
}
template <class Problem>
__device__ PARSCAN_INLINE const unsigned char* staged_lane_word(const unsigned char* run, int tensor_stride) {
  return staged_lane_word<Problem>(const_cast<unsigned char*>(run), tensor_stride);
}

/// A ring of Stages tiles per block in dynamic shared memory, filled by cp.async so that loads
/// stay in flight without holding registers. Every lane copies its own 16-byte runs and later
/// reads back only those, so no barrier is needed between a copy and its read; a run that
/// cannot be staged (misaligned, strided, the sequence's end) is read directly instead. With
/// Lanes < 32 a warp's tile is one per segment of Lanes lanes (block/tile_scan.cuh), each lane
/// with its own sequence's cursor.
template <int BlockWarps, int Chunks, int Stages, class Problem, int Lanes = warp_threads>
struct staging_ring {
  static constexpr int V = Problem::run;
  static constexpr index_t chunk = static_cast<index_t>(Lanes) * V;
  static constexpr int tensor_stride = warp_threads * 16;  // one 16-byte run per lane
  static constexpr int chunk_bytes = Problem::staged_tensors * tensor_stride + staged_lane_bytes<Problem> * warp_threads;
  static constexpr int slot_bytes = BlockWarps * Chunks * chunk_bytes;
  static constexpr int mask_bytes = BlockWarps * warp_threads * static_cast<int>(sizeof(unsigned));
  static constexpr int bytes = Stages * (slot_bytes + mask_bytes);
  unsigned char* base;

  __device__ PARSCAN_INLINE unsigned char* run_at(int slot, int j) const {
    const int warp = static_cast<int>(threadIdx.x) / warp_threads;
    return base + slot * slot_bytes + (warp * Chunks + j) * chunk_bytes + lane_id() * 16;
  }
  // Bit j: chunk j of this lane's runs in `slot` was staged.
  __device__ PARSCAN_INLINE unsigned& staged(int slot) const {
    return reinterpret_cast<unsigned*>(base + Stages * slot_bytes)[slot * BlockWarps * warp_threads + threadIdx.x];
  }
  // Each takes the sequence's cursor (Problem::at), which its caller computes once: placing a
  // sequence costs a 64-bit division (then one a tensor), and doing it in each of these
  // (stage, load, and store for every chunk) was a fifth of the bf16 backward's instructions
  // (ncu source counters, H100).
  using cursor = typename Problem::cursor;

  /// Starts copying this warp's segment (from step `segment`) of the sequence at `cur` into
  /// `slot`.
  __device__ PARSCAN_INLINE void stage(const Problem& P, const cursor& cur, index_t segment, int slot) const {
    unsigned mask = 0;
    const int lane = segment_lane<Lanes>();
#pragma unroll
    for (int j = 0; j < Chunks; ++j)
      if (P.stage_run(cur, segment + j * chunk + lane * V, run_at(slot, j), tensor_stride)) mask |= 1u << j;
    staged(slot) = mask;
  }
  /// The segment staged in `slot`, into registers (after the copies have been waited for).
  /// Returns which chunks of this lane's runs were staged (bit j), for store.
  __device__ PARSCAN_INLINE unsigned load(const Problem& P, const cursor& cur, index_t segment, int slot,
                                          tile_items<Problem, Chunks>& items) const {
    const unsigned mask = staged(slot);
    const int lane = segment_lane<Lanes>();
#pragma unroll
    for (int j = 0; j < Chunks; ++j)
      P.load_staged(cur, segment + j * chunk + lane * V, run_at(slot, j), tensor_stride, (mask >> j) & 1u, items.v[j]);
    return mask;
  }
  /// Writes chunk j's results (the run at step `first`) of the segment in `slot`: from what the
  /// slot holds where the Problem can (store_staged) and the run was staged (`mask` from load),
  /// otherwise through store_run. The slot must not have been refilled since load.
  __device__ PARSCAN_INLINE void store(const Problem& P, const cursor& cur, index_t first, int slot, int j, unsigned mask,
                                       const typename Problem::acc_type (&items)[V]) const {
    if constexpr (has_staged_store<Problem>) {
      if ((mask >> j) & 1u) return P.store_staged(cur, first, run_at(slot, j), tensor_stride, items);
    }
    P.store_run(cur, first, items);
  }
};

/// Runs `consume(i, slot)` for i = 0 … count-1 in order, with `stage(i, slot)` (which starts
/// cp.async copies into ring slot `slot`) issued Stages-1 items ahead, one commit group an
/// item, so that item i's copies are complete when it is consumed. Every lane of the warp
/// calls it with the same count.
template <int Stages, class Stage, class Consume>
__device__ PARSCAN_INLINE void pipeline_through_ring(index_t count, Stage&& stage, Consume&& consume) {
  for (index_t i = 0; i < Stages - 1; ++i) {
    if (i < count) stage(i, static_cast<int>(i));
    async_commit();  // one group per item, empty or not, so the wait below counts items
  }
  for (index_t i = 0; i < count; ++i) {
    const index_t ahead = i + Stages - 1;
    if (ahead < count) stage(ahead, static_cast<int>(ahead % Stages));
    async_commit();
    async_wait<Stages - 1>();  // item i's group is complete
    consume(i, static_cast<int>(i % Stages));
  }
  async_wait<0>();
}

}  // namespace parscan::cuda_detail
