// parscan/cuda/device/dispatch_scan.cuh — picks the tile shape and the way to cover the
// batch (carry loop or chained tiles), sizes and zeroes the workspace, launches, and checks.
// Every Problem (generic scans, gated recurrence) goes through here.
#pragma once

#include <cstddef>
#include <type_traits>

#include "../runtime.cuh"
#include "scan_kernels.cuh"

namespace parscan::cuda_detail {

/// Default accumulators per lane: about 128 bytes (16 affine pairs of float), at most 16.
template <class Acc>
constexpr int default_per_lane = sizeof(Acc) >= 128 ? 1 : (128 / sizeof(Acc) > 16 ? 16 : int(128 / sizeof(Acc)));

/// A tile-shape policy. PerLane accumulators per lane, in chunks of Problem::run steps; warps
/// that loop over whole sequences come LoopWarps to a block, chained tiles are ChainedWarps
/// warps, lane tiles are 32 sequences × LaneWarps·PerLane steps. dispatch_scan takes the policy
/// as a template argument so that benchmarks/bench_tuning.cu can time alternatives in one run.
template <class Problem, int PerLane = default_per_lane<typename Problem::acc_type>, int LoopWarps = 4,
          int ChainedWarps = 8, int LaneWarps = 8, int Stages = 0>
struct tile_shape_of {
  static constexpr int stages = Stages;  // > 0: the warp loop stages tiles through shared memory
  static constexpr int per_lane = PerLane;
  static constexpr int chunks = per_lane / Problem::run > 0 ? per_lane / Problem::run : 1;
  static constexpr int loop_warps = LoopWarps;
  static constexpr int chained_warps = ChainedWarps;
  static constexpr index_t chained_tile = tile_steps<Problem, chained_warps, chunks>;
  static constexpr int lane_steps = per_lane;
  static constexpr int lane_warps = LaneWarps;
  static constexpr index_t lane_tile = static_cast<index_t>(lane_warps) * lane_steps;
};

/// The shape the library uses.
template <class Problem>
using tile_shape = tile_shape_of<Problem>;

/// Workspace bytes for `sequences` × `length` steps of Problem (an upper bound over the modes).
template <class Problem, class shape = tile_shape<Problem>>
std::size_t scan_workspace_bytes(index_t sequences, index_t length) {
  using Acc = typename Problem::acc_type;
  if (sequences <= 0 || length <= 0) return 0;
  const index_t tiles = sequences * ((length + shape::chained_tile - 1) / shape::chained_tile);
  const index_t lane_tiles = (sequences + 31) / 32 * ((length + shape::lane_tile - 1) / shape::lane_tile);
  const std::size_t a = tile_state<Acc>::bytes(tiles), b = tile_state<Acc, warp_threads>::bytes(lane_tiles);
  return (a > b ? a : b) + 256;
}

/// Claims workspace for the tile state and the tile counter, and zeroes both on the stream.
template <class State>
status prepare_tiles(workspace_lease& ws, index_t tiles, State& st, unsigned*& counter, const cuda_backend& be) {
  const std::size_t state_bytes = State::bytes(tiles);
  if (status s = ws.acquire(state_bytes + 256); s != status::success) return s;
  st = State::carve(ws.get(), tiles);
  counter = reinterpret_cast<unsigned*>(static_cast<char*>(ws.get()) + state_bytes);
  if (status s = report(cudaMemsetAsync(st.status, 0, State::status_bytes(tiles), be.stream)); s != status::success)
    return s;
  return report(cudaMemsetAsync(counter, 0, sizeof(unsigned), be.stream));
}

constexpr index_t max_grid = 0x7fffffff;

template <class shape, class Problem, class Op>
status launch_lane_tiles(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  using Acc = typename Problem::acc_type;
  using state = tile_state<Acc, warp_threads>;
  const index_t groups = (sequences + warp_threads - 1) / warp_threads;
  const index_t tiles_per_group = (P.length + shape::lane_tile - 1) / shape::lane_tile;
  index_t tiles;
  if (__builtin_mul_overflow(groups, tiles_per_group, &tiles) || tiles > max_grid) return status::exceeds_device_limits;
  workspace_lease ws(be);
  state st;
  unsigned* counter;
  if (status s = prepare_tiles(ws, tiles, st, counter, be); s != status::success) return s;
  scan_lane_chained_kernel<shape::lane_warps, shape::lane_steps, Problem, Op>
      <<<static_cast<unsigned>(tiles), shape::lane_warps * warp_threads, 0, be.stream>>>(P, op, st, counter,
                                                                                        tiles_per_group, sequences);
  return check_launch();
}

/// Runs a validated Problem over `sequences` sequences of P.length steps with tile shape
/// `shape` (tile_shape<Problem> unless a benchmark asks for another).
template <class shape, class Problem, class Op>
status dispatch_with(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  using Acc = typename Problem::acc_type;
  if (sequences == 0) return status::success;
  if (P.length == 0) {
    const index_t blocks = (sequences + 255) / 256;
    empty_sequences_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), 256, 0, be.stream>>>(P, sequences);
    return check_launch();
  }
  const device_facts dev = current_device();
  if (dev.st != status::success) return dev.st;
  if (P.lane_major) return launch_lane_tiles<shape>(P, op, sequences, be);

  // Enough sequences to give every resident warp its own: warps loop over whole sequences.
  constexpr auto warp_kernel = scan_warp_loop_kernel<shape::loop_warps, shape::chunks, Problem, Op>;
  const index_t resident_warps = static_cast<index_t>(blocks_per_multiprocessor<warp_kernel>(shape::loop_warps * 32)) *
                                 shape::loop_warps * dev.multiprocessors;
  const index_t tiles_per_sequence = (P.length + shape::chained_tile - 1) / shape::chained_tile;
  if (sequences >= resident_warps || tiles_per_sequence == 1) {
    const index_t blocks = (sequences + shape::loop_warps - 1) / shape::loop_warps;
    if constexpr (shape::stages > 0 && has_staging<Problem>) {
      scan_warp_loop_staged_kernel<shape::loop_warps, shape::chunks, shape::stages, Problem, Op>
          <<<static_cast<unsigned>(blocks < max_grid ? blocks : max_grid), shape::loop_warps * 32, 0, be.stream>>>(
              P, op, sequences);
      return check_launch();
    }
    warp_kernel<<<static_cast<unsigned>(blocks < max_grid ? blocks : max_grid), shape::loop_warps * 32, 0, be.stream>>>(
        P, op, sequences);
    return check_launch();
  }

  // Otherwise a persistent grid of chained tiles.
  index_t total_tiles;
  if (__builtin_mul_overflow(sequences, tiles_per_sequence, &total_tiles) || total_tiles > max_grid)
    return status::exceeds_device_limits;
  workspace_lease ws(be);
  tile_state<Acc> st;
  unsigned* counter;
  if (status s = prepare_tiles(ws, total_tiles, st, counter, be); s != status::success) return s;
  constexpr auto chained = scan_chained_kernel<shape::chained_warps, shape::chunks, Problem, Op>;
  const index_t resident = static_cast<index_t>(blocks_per_multiprocessor<chained>(shape::chained_warps * 32)) *
                           dev.multiprocessors;
  chained<<<static_cast<unsigned>(resident < total_tiles ? resident : total_tiles), shape::chained_warps * 32, 0,
            be.stream>>>(P, op, st, counter, tiles_per_sequence, total_tiles);
  return check_launch();
}

/// Runs a validated Problem with the library's tile shape, or with `shape` when given.
template <class shape = void, class Problem, class Op>
status dispatch_scan(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  if constexpr (std::is_void_v<shape>) return dispatch_with<tile_shape<Problem>>(P, op, sequences, be);
  else return dispatch_with<shape>(P, op, sequences, be);
}

}  // namespace parscan::cuda_detail
