// parscan/cuda/agent/staging_ring.cuh — how a worker keeps its next tiles in flight without
// holding registers: a ring of tiles in shared memory, filled by cp.async.
#pragma once

#include <type_traits>

#include "../block/tile_scan.cuh"
#include "../thread/run_io.cuh"

namespace parscan::cuda_detail {

/// Whether a Problem can stage its runs through shared memory (stage_run / load_staged).
template <class Problem, class = void>
constexpr bool has_staging = false;
template <class Problem>
constexpr bool has_staging<Problem, std::void_t<decltype(Problem::staged_tensors)>> = true;

/// A ring of Stages tiles per block in dynamic shared memory, filled by cp.async so that loads
/// stay in flight without holding registers. Every lane copies its own 16-byte runs and later
/// reads back only those, so no barrier is needed between a copy and its read; a run that
/// cannot be staged (misaligned, strided, the sequence's end) is read directly instead.
template <int BlockWarps, int Chunks, int Stages, class Problem>
struct staging_ring {
  static constexpr int V = Problem::run;
  static constexpr index_t chunk = static_cast<index_t>(warp_threads) * V;
  static constexpr int tensor_stride = warp_threads * 16;  // one 16-byte run per lane
  static constexpr int chunk_bytes = Problem::staged_tensors * tensor_stride;
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
  /// Starts copying this warp's segment (from step `segment`) of sequence s into `slot`.
  __device__ PARSCAN_INLINE void stage(const Problem& P, index_t s, index_t segment, int slot) const {
    const auto cur = P.at(s);
    unsigned mask = 0;
#pragma unroll
    for (int j = 0; j < Chunks; ++j)
      if (P.stage_run(cur, segment + j * chunk + lane_id() * V, run_at(slot, j), tensor_stride)) mask |= 1u << j;
    staged(slot) = mask;
  }
  /// The segment staged in `slot`, into registers (after the copies have been waited for).
  __device__ PARSCAN_INLINE void load(const Problem& P, index_t s, index_t segment, int slot,
                                      tile_items<Problem, Chunks>& items) const {
    const auto cur = P.at(s);
    const unsigned mask = staged(slot);
#pragma unroll
    for (int j = 0; j < Chunks; ++j)
      P.load_staged(cur, segment + j * chunk + lane_id() * V, run_at(slot, j), tensor_stride, (mask >> j) & 1u,
                    items.v[j]);
  }
};

}  // namespace parscan::cuda_detail
