// parscan/cuda/agent/chained_chunk_tiles.cuh — the chunk loop's tiles (agent/chunk_loop.cuh)
// spread over every block of the device, each tile's carry from a look-back over the tiles
// before it in its sequence instead of from the tile before it in the same block.
//
// Why. The chunk loop gives a job (a group of chunks of one batch row) to one block for its whole
// length. Where the jobs are few, the device is not filled: bf16 (8, T, 1536) in 256-byte rows is
// 96 jobs, a block an SM, so 36 of an H200's 132 SMs have nothing to do, and at T = 1024 each
// job's first copy-in and last copy-out overlap nothing (docs/performance.md, "What bounds
// T = 1024", "Tiles by each SM's share of the bandwidth"). Here the jobs' tiles are the work:
// (8, 4096, 1536) bf16 is 3,072 tiles of 128 steps for 132 blocks.
//
// Each block of a persistent, co-resident grid (a cooperative launch) takes tiles b, b + G,
// b + 2G, … of the tiles numbered time first (tile k of job j is k·jobs + j), staging the next
// one with cp.async while it scans the current one, as the chunk loop does. Time first, the
// tiles in flight together cover whole rows of steps, as the chunk loop's blocks do: numbered
// job by job, those of a round were one job's column of 256 bytes a step, and the forward of
// bf16 (8, 4096, 1536) ran at 21.6% of copy against the chunk loop's 68.1% (H200). Warp w
// scans its chunk of the tile: its lanes fold their runs and scan them across the warp, which
// gives the chunk's map over the tile (y_end = A·y_start + B, channel by channel); the warp's
// chunk, over the job's tiles, is one sequence of the window chain (agent/window_chain.cuh),
// which gives the state before the tile from the maps of the tiles before it in one fixed
// formula (bitwise the same results run to run), waiting only for their maps, never for their
// look-backs. From that state the lanes walk their runs again and the block copies the outputs
// out, as in the chunk loop. No tile waits on a tile of a larger number, and every block takes
// its tiles in increasing order, so the smallest unfinished tile always has a block on it.
//
// What Chunks gives, besides the chunk loop's layout(), length(), group_at(s), carry_type,
// read_carry, write_carry, stage, stage_whole, store, store_whole, lookahead:
//   map_type, map_op: a chunk's map over a tile and its composition (earlier, later);
//   carry_map(s) → maybe<map_type>: the carry in of the chunk from sequence s on, as a map;
//   fold_runs<Steps>(word, tensor_bytes, runs): each lane's run, scanned across the lanes;
//   walk_runs<Steps>(word, tensor_bytes, runs, carry): from the state before the tile (carry),
//     the outputs over the staged words; carry becomes the state after the tile.
#pragma once

#include <cstdint>

#include "../../layout.hpp"
#include "../runtime.cuh"
#include "../thread/run_io.cuh"
#include "../warp/warp_shuffle.cuh"
#include "chunk_loop.cuh"
#include "window_chain.cuh"

namespace parscan::cuda_detail {

/// The tiles of a batch in the chained chunk tiles: `jobs` (batch row, group of chunks) pairs,
/// `per_row` groups a row, each of `tiles_per_job` tiles; each warp's chunk is a sequence of
/// the window chain with `windows_per_job` windows.
struct chunk_tile_grid {
  index_t jobs, per_row, tiles_per_job, windows_per_job;
  __host__ __device__ PARSCAN_INLINE index_t tiles() const { return jobs * tiles_per_job; }
};

template <class shape, class Chunks>
__global__ void __launch_bounds__(shape::threads)
    chained_chunk_tiles_kernel(Chunks C, window_chain_state<typename Chunks::map_type> st, chunk_tile_grid grid) {
  extern __shared__ uint4 chunk_smem[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(chunk_smem);
  static_assert(shape::stages == 2, "one tile scanned while the next loads");
  constexpr int K = shape::channels, S = shape::steps, TB = shape::tensor_bytes;
  using map = typename Chunks::map_type;
  const sequence_layout& l = C.layout();
  const index_t length = C.length(), tiles = grid.tiles();
  const int copy_chunk = static_cast<int>(threadIdx.x % shape::chunks),
            copy_run = static_cast<int>(threadIdx.x / shape::chunks);
  const int scan_chunk = static_cast<int>(threadIdx.x / warp_threads),
            lane = static_cast<int>(threadIdx.x % warp_threads);
  if (static_cast<index_t>(blockIdx.x) >= tiles) return;
  const index_t count = (tiles - 1 - blockIdx.x) / gridDim.x + 1;  // this block's tiles

  // Tile n of this block: its job, its number k within the job, its group's first channel in
  // the batch row and as a sequence index, the group's tensors, its stage.
  struct place {
    index_t job, k, within, first;
    typename Chunks::group grp;
    unsigned char* stage;
  };
  const auto place_of = [&](index_t n) {
    const index_t tile = blockIdx.x + n * static_cast<index_t>(gridDim.x);
    const index_t k = tile / grid.jobs, job = tile - k * grid.jobs, batch = job / grid.per_row;
    const index_t within = (job - batch * grid.per_row) * shape::group_channels, first = batch * l.count + within;
    return place{job, k, within, first, C.group_at(first), smem + (n % 2) * shape::stage_bytes};
  };
  // The words of the run that this thread copies in and out of tile t's stage.
  const auto copy_words = [&](const place& t) {
    return [stage = t.stage, copy_run, copy_chunk](int i) { return stage + shape::word_of(copy_run, i, copy_chunk); };
  };
  const auto stage_tile = [&](const place& t) {
    const index_t p = t.k * shape::rows + copy_run * S;
    if (t.within + copy_chunk * K >= l.count) return;  // a chunk past the row's channels
    if (p + S + Chunks::lookahead <= length) {
      C.template stage_whole<S>(t.grp, copy_chunk, p, copy_words(t), TB);
    } else {  // the job's last tile
#pragma unroll
      for (int i = 0; i < S; ++i) C.stage(t.grp, copy_chunk, p + i, t.first + copy_chunk * K, copy_words(t)(i), TB);
    }
  };

  place next = place_of(0);
  stage_tile(next);
  async_commit();
  for (index_t n = 0; n < count; ++n) {
    const place t = next;
    if (n + 1 < count) {
      next = place_of(n + 1);
      stage_tile(next);
    }
    async_commit();  // a group each round, empty or not, so that the wait below counts the same
    async_wait<1>();
    __syncthreads();  // tile n staged by every thread
    if (t.within + scan_chunk * K < l.count) {
      const auto word = [&](int j) { return t.stage + shape::word_of(lane, j, scan_chunk); };
      const index_t s = t.first + scan_chunk * K;  // the chunk's first sequence
      const index_t chain = t.job * shape::chunks + scan_chunk;  // the chunk as a sequence of the chain
      typename Chunks::runs_type runs;
      const map total = C.template fold_runs<S>(word, TB, runs);
      const maybe<map> before =
          window_chain_prefix(st, chain * grid.tiles_per_job, chain * grid.windows_per_job, t.k, total,
                              [&] { return C.carry_map(s); }, typename Chunks::map_op{});
      typename Chunks::carry_type carry;
      Chunks::state_of(before, carry);
      C.template walk_runs<S>(word, TB, runs, carry);
      if (t.k == grid.tiles_per_job - 1 && lane == 0) C.write_carry(s, carry);
    }
    __syncthreads();  // tile n's outputs written by every warp
    const index_t p = t.k * shape::rows + copy_run * S;
    if (t.within + copy_chunk * K < l.count) {
      if (p + S <= length) {
        C.template store_whole<S>(t.grp, copy_chunk, p, copy_words(t), TB);
      } else {
#pragma unroll
        for (int i = 0; i < S; ++i)
          if (p + i < length) C.store(t.grp, copy_chunk, p + i, copy_words(t)(i), TB);
      }
    }
    __syncthreads();  // the stage read out before tile n + 2 is copied into it
  }
  async_wait<0>();
}

}  // namespace parscan::cuda_detail
