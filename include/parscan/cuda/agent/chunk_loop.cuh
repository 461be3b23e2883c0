// parscan/cuda/agent/chunk_loop.cuh — the chunk loop: channel-last sequences scanned in
// 16-byte chunks (one word of adjacent channels, a lane owning a chunk over a run of
// consecutive steps), the rows of a step staged whole through shared memory.
//
// A block owns a group of 16, 8 or 4 chunks of one batch row (or packed sequence) for the whole
// length, as the lane loop does (lane_loop.cuh: no look-back, no workspace), and walks it in
// tiles of 32·Steps steps:
//   - all threads copy the next tile's inputs into shared memory with 16-byte cp.async (thread t
//     chunk t mod Chunks of lane t / Chunks' run; a quarter warp one or two whole rows) while
//     the current tile is scanned;
//   - warp w scans the tile's chunk w, lane l its steps l·Steps … l·Steps+Steps-1 (what the
//     scan is, is the Chunks' own: the gated recurrence's in recurrence/channel_last_chunks.cuh,
//     any operator's in generic/generic_chunks.cuh), writing its outputs over the inputs it has
//     read;
//   - all threads copy the outputs out in whole rows.
// Every access moves 16 bytes, in rows of 256 or 128 bytes (16 or 8 chunks) wherever their jobs
// fill the device: a probe of the access pattern alone (H100) moved 65% of copy in 64-byte rows,
// 86% in 128-byte ones and 90–94% in 256-byte ones (docs/performance.md, "Whole rows, and rows
// of 128 bytes").
//
// Shared memory: per tile and tensor, slots of one row (the group's chunks), step j of lane l's
// run at slot j·32 + l. Whole rows keep cp.async coalesced: it merges two threads' halves of a
// 32-byte sector only where they land side by side in shared memory (a probe measured 68% of
// copy for the staging alone with each chunk's words apart, 84% with whole rows). 64-byte rows
// take a 16-byte pad after every two slots, wider rows a permutation of their sectors
// (chunk_loop_shape::word_of), so that a warp's read of one chunk of 32 slots and a quarter
// warp's copy of its rows spread over the bank groups.
#pragma once

#include <cstdint>

#include "../../layout.hpp"
#include "../runtime.cuh"
#include "../thread/run_io.cuh"
#include "../warp/warp_shuffle.cuh"

namespace parscan::cuda_detail {

/// Elements of type E in a chunk: one 16-byte word.
template <class E>
constexpr int chunk_channels = static_cast<int>(16 / sizeof(E));

/// A block of the chunk loop over `Tensors` staged tensors of element E: a group of `Chunks`
/// chunks side by side (one row of 16·Chunks bytes a step), a warp a chunk, runs of `Steps`
/// steps a lane (tiles of 32·Steps steps), `Stages` tiles in shared memory (one scanned, the
/// next ones loading).
template <class E, int Tensors, int Steps, int Chunks, int Stages = 2>
struct chunk_loop_shape {
  static constexpr int chunks = Chunks, warps = Chunks, steps = Steps, tensors = Tensors, stages = Stages;
  static constexpr int threads = warps * warp_threads;
  static constexpr int channels = chunk_channels<E>;
  static constexpr int group_channels = Chunks * channels;
  static constexpr int rows = warp_threads * Steps;  // steps (slots) a tile
  static constexpr int row_bytes = Chunks * 16;
  static_assert(Chunks == 4 || Chunks == 8 || Chunks == 16, "64-, 128- or 256-byte rows");
  // 64-byte rows: a 16-byte pad after every two; wider rows: none (their 32-byte sectors
  // permuted instead, below).
  static constexpr int pair_bytes = Chunks == 4 ? 2 * row_bytes + 16 : 2 * row_bytes;
  static constexpr int tensor_bytes = rows / 2 * pair_bytes;  // one tensor of one tile
  static constexpr int stage_bytes = Tensors * tensor_bytes;
  static constexpr int smem_bytes = Stages * stage_bytes;
  static_assert(Stages >= 2, "one tile scanned while the next loads");

  /// The byte offset of step j of lane l's run, chunk c, within one tensor of a stage. In a
  /// row of 128 or 256 bytes, the row's 32-byte sectors are XOR-permuted by the slot (a sector's
  /// two chunks stay side by side, so cp.async still merges them): a warp's read of one chunk of
  /// 32 slots then meets each of four bank groups twice a quarter warp, not one eight times.
  __device__ PARSCAN_INLINE static int word_of(int l, int j, int c) {
    const int slot = j * warp_threads + l;
    if constexpr (Chunks == 4) return slot / 2 * pair_bytes + slot % 2 * row_bytes + c * 16;
    return slot * row_bytes + ((c / 2) ^ (slot % (Chunks / 2))) * 32 + c % 2 * 16;
  }
};

/// Whether a tensor of layout l at p keeps whole, aligned chunks: channel-last, channels a
/// multiple of a chunk, strides of whole 16-byte words, the base on a 16-byte boundary.
template <class E>
bool chunk_layout_fits(const E* p, const sequence_layout& l) {
  const auto words = [](index_t elements) { return static_cast<std::size_t>(elements) * sizeof(E) % 16 == 0; };
  return l.sequence_stride == 1 && l.count % chunk_channels<E> == 0 && words(l.step_stride) &&
         (l.groups <= 1 || words(l.group_stride)) && reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

/// The chunk loop's group for `rows` batch rows (or packed sequences) of `channels` channels of
/// E: its width in chunks and its jobs (rows × groups a row). Where the caller takes them
/// (`wide`), 256-byte rows where the channels make whole groups of them and their jobs reach two
/// thirds of the multiprocessors; else 128-byte rows where their jobs fill the device, else
/// 64-byte rows where theirs do (a job's whole length goes to one block; with fewer jobs, kernels
/// that spread the steps further do better); width 0: none. Why wide first: a probe of the rows
/// alone (H100, (8, 15360, 1536) bf16, read two write one, no scan) moved 65% of copy in 64-byte
/// rows, 86% in 128-byte and 90–94% in 256-byte rows; and the chunk loop in 256-byte rows
/// measured faster than in 128-byte rows with twice the jobs at (8, 4096, 1536) bf16 (96 jobs
/// on 132 SMs) and (8, 4096, 1024) float (128 jobs; docs/performance.md, "Rows of 256 bytes").
/// Where the caller asks (`narrow_two_thirds`), 64-byte rows also where their jobs reach two
/// thirds of the multiprocessors: the recurrence on GPUs whose SMs each draw an H200's share of
/// the bandwidth, where float (8, T, 256) in 128 such jobs moved 62 / 67 / 74% of copy at
/// T = 1024 / 4096 / 16384 against the lane loop's 35 / 43 / 52% (docs/performance.md).
struct chunk_group {
  int width;
  index_t jobs;
};
template <class E>
chunk_group chunk_group_for(index_t channels, index_t rows, int multiprocessors, bool wide,
                            bool narrow_two_thirds = false) {
  const index_t wide_group = 16 * chunk_channels<E>;
  if (wide && channels % wide_group == 0 && 3 * rows * (channels / wide_group) >= 2 * index_t(multiprocessors))
    return {16, rows * (channels / wide_group)};
  for (int width : {8, 4}) {
    const index_t group = static_cast<index_t>(width * chunk_channels<E>);
    const index_t jobs = rows * ((channels + group - 1) / group);
    if (jobs >= static_cast<index_t>(multiprocessors)) return {width, jobs};
    if (width == 4 && narrow_two_thirds && 3 * jobs >= 2 * index_t(multiprocessors)) return {width, jobs};
  }
  return {0, 0};
}

/// The jobs of a batch: (batch row, group of chunks) pairs, row by row.
struct batch_chunk_jobs {
  __device__ PARSCAN_INLINE index_t count(const sequence_layout& l, index_t per_row) const {
    return l.groups * per_row;
  }
  /// f(the job's Chunks, its batch row, its group in the row).
  template <class Chunks, class F>
  __device__ PARSCAN_INLINE void visit(const Chunks& C, index_t job, index_t per_row, F&& f) const {
    f(C, job / per_row, job % per_row);
  }
};

/// The chunk loop: block b takes jobs b, b + grid, … (a job: a group of chunks of one batch row
/// or packed sequence), each for its whole length. Thread t copies chunk t mod Chunks of lane
/// t / Chunks' run in and out; warp w scans chunk w.
///
/// What Chunks gives (recurrence/channel_last_chunks.cuh, generic/generic_chunks.cuh):
///   layout(), length(), group_at(s) → group: the shape, and the tensors at sequence s;
///   carry_type, read_carry(s, carry), write_carry(s, carry): the state carried along a chunk's
///     K sequences from s on, from before the first step to past the last;
///   stage(g, c, p, s, word, tensor_bytes): step p of chunk c into its words (any p: past the
///     length, whatever the scan needs there); stage_whole<N>(g, c, p, word, tensor_bytes):
///     steps p … p+N-1, all before length - lookahead, word(i) for step p + i;
///   scan<Steps>(word, tensor_bytes, valid, carry): the warp's scan of its chunk over a tile
///     whose first `valid` steps lie before the length (all, when valid ≥ the tile);
///   writes (whether there are outputs), store(g, c, p, word, tensor_bytes), store_whole<N>(…).
template <class shape, class Chunks, class Jobs>
__global__ void __launch_bounds__(shape::threads) chunk_loop_kernel(Chunks whole, Jobs jobs) {
  extern __shared__ uint4 chunk_smem[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(chunk_smem);
  constexpr int K = shape::channels, S = shape::steps, TB = shape::tensor_bytes;
  const sequence_layout& l = whole.layout();
  const index_t per_row = (l.count + shape::group_channels - 1) / shape::group_channels;
  const int copy_chunk = static_cast<int>(threadIdx.x % shape::chunks),
            copy_run = static_cast<int>(threadIdx.x / shape::chunks);
  const int scan_chunk = static_cast<int>(threadIdx.x / warp_threads),
            lane = static_cast<int>(threadIdx.x % warp_threads);

  for (index_t job = blockIdx.x; job < jobs.count(l, per_row); job += gridDim.x) {
    jobs.visit(whole, job, per_row, [&](const Chunks& C, index_t batch, index_t group) {
      const index_t length = C.length(), tiles = (length + shape::rows - 1) / shape::rows;
      const index_t first = group * shape::group_channels;
      const typename Chunks::group grp = C.group_at(batch * l.count + first);
      const bool copies = first + copy_chunk * K < l.count, scans = first + scan_chunk * K < l.count;
      const index_t copy_s = batch * l.count + first + copy_chunk * K;  // sequences of the chunks' first channels
      const index_t scan_s = batch * l.count + first + scan_chunk * K;
      // The words of the run this thread copies of tile k, in the tile's stage.
      const auto copy_words = [&](index_t k) {
        unsigned char* stage = smem + (k % shape::stages) * shape::stage_bytes;
        return [stage, copy_run, copy_chunk](int i) { return stage + shape::word_of(copy_run, i, copy_chunk); };
      };
      const auto stage_tile = [&](index_t k) {
        const index_t p = k * shape::rows + copy_run * S;
        const auto word = copy_words(k);
        if (copies && p + S + Chunks::lookahead <= length) {
          C.template stage_whole<S>(grp, copy_chunk, p, word, TB);
        } else if (copies) {  // the last tile
#pragma unroll
          for (int i = 0; i < S; ++i) C.stage(grp, copy_chunk, p + i, copy_s, word(i), TB);
        }
        async_commit();
      };

      typename Chunks::carry_type carry;
      if (scans) C.read_carry(scan_s, carry);
      for (index_t k = 0; k + 1 < shape::stages && k < tiles; ++k) stage_tile(k);
      for (index_t k = 0; k < tiles; ++k) {
        if (k + shape::stages - 1 < tiles) {
          stage_tile(k + shape::stages - 1);
          async_wait<shape::stages - 1>();
        } else {  // no tile left to stage: the last ones wait for everything in flight
          async_wait<0>();
        }
        __syncthreads();  // tile k staged by every thread
        if (scans) {
          unsigned char* stage = smem + (k % shape::stages) * shape::stage_bytes;
          const auto word = [&](int j) { return stage + shape::word_of(lane, j, scan_chunk); };
          C.template scan<S>(word, TB, length - k * shape::rows, carry);
        }
        if constexpr (Chunks::writes) {
          __syncthreads();  // tile k's outputs written by every warp
          const index_t p = k * shape::rows + copy_run * S;
          const auto word = copy_words(k);
          if (copies && p + S <= length) {
            C.template store_whole<S>(grp, copy_chunk, p, word, TB);
          } else if (copies) {
#pragma unroll
            for (int i = 0; i < S; ++i)
              if (p + i < length) C.store(grp, copy_chunk, p + i, word(i), TB);
          }
        }
        __syncthreads();  // the stage read out before tile k + Stages is copied into it
      }
      // A sequence of no steps: its carry out is its carry in.
      if (scans && lane == 0) C.write_carry(scan_s, carry);
    });
  }
}

}  // namespace parscan::cuda_detail
