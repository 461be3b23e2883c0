// parscan/cuda/device/dispatch_scan.cuh — picks the tile shape and the way to cover the
// batch (carry loop or chained tiles), sizes and zeroes the workspace, launches, and checks.
// Every Problem (generic scans, gated recurrence) goes through here.
#pragma once

#include <cstddef>

#include "../runtime.cuh"
#include "scan_kernels.cuh"

namespace parscan::cuda_detail {

/// Tile shapes by accumulator size: about 32 KB of accumulators per tile for small types,
/// one item per thread (no transpose) for large ones.
template <class Acc>
struct tile_shape {
  static constexpr int size = static_cast<int>(sizeof(Acc));
  static constexpr int items = size <= 8 ? 16 : size <= 16 ? 8 : size <= 32 ? 4 : size <= 64 ? 2 : 1;
  static constexpr int block = size <= 64 ? 256 : 128;
  // For sequences shorter than a large tile.
  static constexpr int small_items = items >= 4 ? items / 4 : 1;
  static constexpr int small_block = 128;
};

template <class Acc, int Block, int Items>
constexpr index_t tile_elems = static_cast<index_t>(Block) * Items;

/// Workspace bytes for a problem of `sequences` × `length` (an upper bound over the modes).
template <class Acc>
std::size_t scan_workspace_bytes(index_t sequences, index_t length) {
  using shape = tile_shape<Acc>;
  const index_t tile = tile_elems<Acc, shape::block, shape::items>;
  if (sequences <= 0 || length <= tile) return 0;
  const index_t tiles = sequences * ((length + tile - 1) / tile);
  return tile_state<Acc, 1>::bytes(tiles) + 256;
}

template <int Block, int Items, class Problem, class Op>
status launch_scan(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  using Acc = typename Problem::acc_type;
  constexpr index_t tile = tile_elems<Acc, Block, Items>;
  const device_facts dev = current_device();
  if (dev.st != status::success) return dev.st;
  const index_t tiles_per_sequence = (P.length + tile - 1) / tile;
  auto loop_kernel = scan_carry_loop_kernel<Block, Items, Problem, Op>;
  const index_t resident =
      static_cast<index_t>(blocks_per_multiprocessor(loop_kernel, Block)) * dev.multiprocessors;
  constexpr index_t max_grid = 0x7fffffff;

  if (tiles_per_sequence == 1 || sequences >= 2 * resident) {
    const unsigned grid = static_cast<unsigned>(sequences < max_grid ? sequences : max_grid);
    loop_kernel<<<grid, Block, 0, be.stream>>>(P, op, sequences);
    return check_launch();
  }

  index_t total_tiles;
  if (__builtin_mul_overflow(sequences, tiles_per_sequence, &total_tiles) || total_tiles > max_grid)
    return status::exceeds_device_limits;
  const std::size_t state_bytes = tile_state<Acc, 1>::bytes(total_tiles);
  workspace_lease ws(be);
  if (status s = ws.acquire(state_bytes + 256); s != status::success) return s;
  auto st = tile_state<Acc, 1>::carve(ws.get(), total_tiles);
  unsigned* counter = reinterpret_cast<unsigned*>(static_cast<char*>(ws.get()) + state_bytes);
  if (status s = report(cudaMemsetAsync(st.status, 0, tile_state<Acc, 1>::status_bytes(total_tiles), be.stream));
      s != status::success)
    return s;
  if (status s = report(cudaMemsetAsync(counter, 0, sizeof(unsigned), be.stream)); s != status::success) return s;
  scan_chained_kernel<Block, Items, Problem, Op>
      <<<static_cast<unsigned>(total_tiles), Block, 0, be.stream>>>(P, op, st, counter, tiles_per_sequence);
  return check_launch();
}

/// Runs a validated Problem over `sequences` sequences of P.length steps.
template <class Problem, class Op>
status dispatch_scan(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  using Acc = typename Problem::acc_type;
  using shape = tile_shape<Acc>;
  if (sequences == 0) return status::success;
  if (P.length == 0) {
    const index_t blocks = (sequences + 255) / 256;
    empty_sequences_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), 256, 0, be.stream>>>(P, sequences);
    return check_launch();
  }
  if (P.length <= tile_elems<Acc, shape::small_block, shape::small_items>)
    return launch_scan<shape::small_block, shape::small_items>(P, op, sequences, be);
  return launch_scan<shape::block, shape::items>(P, op, sequences, be);
}

}  // namespace parscan::cuda_detail
