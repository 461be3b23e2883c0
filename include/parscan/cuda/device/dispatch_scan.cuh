// parscan/cuda/device/dispatch_scan.cuh — picks the tile shape and the way to cover the
// batch (carry loop or chained tiles), sizes and zeroes the workspace, launches, and checks.
// Every Problem (generic scans, gated recurrence) goes through here.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "../runtime.cuh"
#include "../agent/bulk_reduce_spans.cuh"
#include "../agent/bulk_tiles.cuh"
#include "../agent/grid_bulk_tiles.cuh"
#include "../agent/chained_tiles.cuh"
#include "../agent/clear_state.cuh"
#include "../agent/grid_tiles.cuh"
#include "../agent/lane_loop.cuh"
#include "../agent/lane_tiles.cuh"
#include "../agent/reduce_spans.cuh"
#include "../agent/segment_warps.cuh"
#include "../agent/staged_lane_tiles.cuh"
#include "../agent/thread_span_reduce.cuh"
#include "../agent/thread_span_scan.cuh"
#include "../agent/tile_blocks_reduce.cuh"
#include "../agent/warp_loop.cuh"

namespace parscan::cuda_detail {

/// Sequences of length 0: their carry out is their carry in (or init), if they have one.
template <class Problem>
__global__ void empty_sequences_kernel(Problem P, index_t sequences) {
  for (index_t s = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; s < sequences;
       s += static_cast<index_t>(gridDim.x) * blockDim.x) {
    const auto c = P.initial(s);
    if (c.has) P.finish(s, c.value);
  }
}

/// Default accumulators per lane: about 128 bytes (16 affine pairs of float), at most 16.
template <class Acc>
constexpr int default_per_lane = sizeof(Acc) >= 128 ? 1 : (128 / sizeof(Acc) > 16 ? 16 : int(128 / sizeof(Acc)));

/// Accumulators per lane of a Problem's tiles: Problem::per_lane if it says, otherwise the
/// default for its accumulator.
template <class Problem, class = void>
constexpr int problem_per_lane = default_per_lane<typename Problem::acc_type>;
template <class Problem>
constexpr int problem_per_lane<Problem, std::void_t<decltype(Problem::per_lane)>> = Problem::per_lane;

/// Default steps per thread of a lane tile: Problem::lane_steps if it says, otherwise about 256
/// bytes of accumulators, at most 32 (on an H100 the f32 channel-last forward went from 40% to
/// 56% of copy from 16 steps to 32).
template <class Problem, class = void>
constexpr int default_lane_steps = sizeof(typename Problem::acc_type) >= 256 ? 1
                                   : (256 / sizeof(typename Problem::acc_type) > 32 ? 32
                                                                                   : int(256 / sizeof(typename Problem::acc_type)));
template <class Problem>
constexpr int default_lane_steps<Problem, std::void_t<decltype(Problem::lane_steps)>> = Problem::lane_steps;

/// Whether a Problem may be a pure reduce (no scan written): then it says so in reduce_only().
template <class Problem, class = void>
constexpr bool can_reduce_only = false;
template <class Problem>
constexpr bool can_reduce_only<Problem, std::void_t<decltype(std::declval<const Problem&>().reduce_only())>> = true;

/// Whether a Problem's runs can go through the staging ring whole (a Problem whose element is
/// not 16 bytes a run, such as a 12-byte struct, says so in stages_runs): the staged window
/// chain would read the runs it cannot stage straight from global memory twice, once to reduce
/// ahead and once to scan, so such shapes keep the hierarchical grid. (A 12-byte argmax scan
/// measured 18.7% of copy on an H100 with the window chain, 19.5% with the hierarchical grid.)
template <class Problem, class = void>
constexpr bool stages_whole_runs = true;
template <class Problem>
constexpr bool stages_whole_runs<Problem, std::void_t<decltype(Problem::stages_runs)>> = Problem::stages_runs;

/// Which chained kernel a shape uses by default: the window chain wherever runs stage whole
/// (otherwise the persistent grid with the hierarchical look-back, as before). Measured on an
/// H100 at 2^28 steps in one run at f87de05 (docs/performance.md), the persistent staged grid
/// with the window chain ran an int32 sum at 54.6% of copy (the one-tile-per-block kernel 45.4%,
/// the hierarchical grid 40.9%) and affine<float> at 59.3% (hierarchical 44.8%); the gated
/// recurrence's 16 × 2^22 f32 rows measured 48% against 41% (558553c).
template <class Problem>
constexpr bool default_window_chain = stages_whole_runs<Problem>;

/// Tiles in flight per block of the chained grid: 3 for the generic algorithms, so that a
/// block reduces its next tile ahead of each look-back (at f87de05: int32 sum 54.6% against
/// 52.5% with 2, affine 59.3% against 55.5%), 2 for the recurrences' Problems, whose larger registers and two input
/// tensors measured 46–48% either way (f32) and lost to spills at 3 (bf16, 18%).
template <class Problem>
constexpr int default_chained_stages = can_reduce_only<Problem> && stages_whole_runs<Problem> ? 3 : 2;

/// Warps of a chained tile: 16 for 4-byte accumulators (int32 sum 54.6% against 49.9% with 8 at
/// f87de05), else 8.
template <class Acc>
constexpr int default_chained_warps = sizeof(Acc) <= 4 ? 16 : 8;

/// Grid tiles take inputs of at most this many tiles of their small and large shapes, and twice
/// as many of the middle one (GridTiles in tile_shape_of): 8 KB tiles up to 2 MB, 16 KB tiles
/// up to 8 MB where 512 of them fit on the device, else the 32 KB chained tiles up to 8 MB.
/// Measured on an H100 (bench_tuning --short; docs/performance.md, "Grid tiles and costly
/// reduces"): an int32 sum of 2^16 steps in 6.5 µs (4 KB tiles 5.7, 32 KB 8.7; bulk tiles 13.0,
/// CUB 10.6); at 2 MB 8 KB tiles 7.3 µs, 32 KB 8.7; at 4 MB an int64 sum in 9.0 µs on 16 KB
/// tiles, 11.2 on 32 KB (CUB 9.3).
constexpr index_t grid_tiles_max = 256;

/// A tile-shape policy. PerLane accumulators per lane, in chunks of Problem::run steps; warps
/// that loop over whole sequences come LoopWarps to a block, chained tiles are ChainedWarps
/// warps, lane tiles are 32 sequences × LaneWarps·LaneSteps steps. A Problem that can stage its
/// loads (has_staging) keeps LoopStages (warp loop) or ChainedStages (chained tiles) tiles in
/// flight through shared memory; 0 turns staging off. dispatch_scan takes the policy as a
/// template argument so that benchmarks/bench_tuning.cu can time alternatives in one run.
/// WindowChain picks the look-back of the chained kernels: the window chain
/// (agent/window_chain.cuh) — on a persistent staged grid, or with ChainedStages = 0 one tile
/// per block — or the hierarchical windows of tile_state.cuh; warp tiles apply to the latter.
/// BulkTiles lets a Problem that can (generic scans and reduces of contiguous, aligned sequences
/// on sm_90) run as bulk tiles instead (agent/bulk_tiles.cuh, agent/bulk_reduce_spans.cuh),
/// whose shape is bulk_shape below. GridTiles lets inputs of at most that many tiles that all
/// fit on the device at once run as grid tiles (agent/grid_tiles.cuh: one launch, no memset)
/// before any of those, in tiles of GridWarps warps × GridRuns runs a lane, or failing that of
/// twice the warps, or of the chained tile; 0 turns them off.
template <class Problem, int PerLane = problem_per_lane<Problem>, int LoopWarps = 4,
          int ChainedWarps = default_chained_warps<typename Problem::acc_type>, int LaneWarps = 8, int LoopStages = 2,
          int ChainedStages = default_chained_stages<Problem>,
          int LaneSteps = default_lane_steps<Problem>, bool ChainedWarpTiles = false,
          bool WindowChain = default_window_chain<Problem>, bool BulkTiles = true, int GridTiles = grid_tiles_max,
          int GridWarps = 8, int GridRuns = 2>
struct tile_shape_of {
  static constexpr index_t grid_tiles = GridTiles;
  static constexpr int grid_warps = GridWarps;
  static constexpr int grid_chunks = GridRuns;
  static constexpr index_t grid_tile = tile_steps<Problem, GridWarps, GridRuns>;
  static constexpr bool window_chain = WindowChain;
  static constexpr bool bulk_tiles = BulkTiles && has_bulk_tiles<Problem>;
  static constexpr bool bulk_reduce = BulkTiles && has_bulk_input<Problem>;
  static constexpr bool staged = has_staging<Problem>;
  static constexpr int loop_stages = staged ? LoopStages : 0;
  static constexpr int chained_stages = staged ? ChainedStages : 0;
  static constexpr int per_lane = PerLane;
  static constexpr int chunks = per_lane / Problem::run > 0 ? per_lane / Problem::run : 1;
  static constexpr int loop_warps = LoopWarps;
  static constexpr index_t loop_tile = tile_steps<Problem, 1, chunks>;
  static constexpr int chained_warps = ChainedWarps;
  // Chained tiles of one warp each (staged Problems only), or of the whole block
  // (scan_chained_staged_kernel; scan_chained_kernel when not staged).
  static constexpr bool chained_warp_tiles = ChainedWarpTiles && chained_stages > 0 && !WindowChain;
  static constexpr index_t chained_tile =
      tile_steps<Problem, chained_warp_tiles ? 1 : chained_warps, chunks>;
  static constexpr int lane_steps = LaneSteps;
  static constexpr int lane_warps = LaneWarps;
  static constexpr index_t lane_tile = static_cast<index_t>(lane_warps) * lane_steps;
};

/// The shape the library uses (chosen with benchmarks/bench_tuning.cu; docs/performance.md).
template <class Problem>
using tile_shape = tile_shape_of<Problem>;

/// Whether a Problem's combine costs more than moving its operands, so that the kernels keep
/// its combines few rather than its bytes in flight many: accumulators over 16 bytes (small
/// matrices; no arithmetic type or affine pair of double is that large).
template <class Problem>
constexpr bool costly_combine = sizeof(typename Problem::acc_type) > 16;

/// Scans of costly combines at least this long take the thread spans (shorter ones a tile scan):
/// measured on an H200 (bench_scan --every-size, 2×2 int64 matrices mod p), the tile scans took
/// 39 µs at 2^16 steps against the spans' 44, and 48 µs at 2^17 against 45.
#ifndef PARSCAN_THREAD_SPAN_SCAN_MIN_LENGTH
#define PARSCAN_THREAD_SPAN_SCAN_MIN_LENGTH (index_t(1) << 17)
#endif
constexpr index_t thread_span_scan_min_length = PARSCAN_THREAD_SPAN_SCAN_MIN_LENGTH;

/// How a bulk tiles' launch starts: after a memset of the look-back's state, or `early`, after a
/// grid that zeroes it and lets the scan's grid start at once (agent/clear_state.cuh): its
/// blocks wait for that grid before their first claim. Measured on an H200 (bench_tuning
/// --bulk-start, two calls of three or four runs, medians): early took about 1 µs off a call
/// from 8 to 128 MB (−0.3 to 3.1 µs by size and call), the int32 sum of 2^24 steps 59.1–59.4 µs
/// → 57.6–58.0 (CUB 60.6–60.7). A block that takes tile blockIdx.x first and waits only before
/// its look-back gained up to 1.8 µs more at 16 MB, but is safe only where every block is
/// resident at once, and launched cooperatively to ensure that it lost up to 10.8 µs
/// (docs/performance.md, "The look-back state zeroed by a grid that lets the scan start").
enum class bulk_start { after_memset, early };

/// A bulk tiles' shape: Warps warps and about TileBytes bytes of elements a tile (over all the
/// Problem's inputs), within the 48 KB a block may take without opting in (with the kernel's
/// own 1 KB or less), and at least MinBlocks blocks per SM allowed by the kernel's registers
/// (the grid is as many blocks as are resident at once, so this bounds the registers and sets
/// the blocks per SM). Start: how its launch starts (bulk_start; the library's shapes start early).
/// TailTileBytes (0: none): the tail tiles' bytes (bulk_tiling), and TailTiles the tail's length
/// over all sequences, in tiles of TileBytes: a number the shape fixes, not the device, so that
/// where the tiles are cut, and so every result's bits, depend on the problem alone.
template <class Problem, int Warps, int TileBytes, int MinBlocks, bool WindowChain = false,
          bulk_start Start = bulk_start::early, int TailTileBytes = 0, int TailTiles = 0>
struct bulk_shape_of {
  static constexpr bulk_start start = Start;
  using element = typename Problem::bulk_element;
  using chain_state = std::conditional_t<WindowChain, window_chain_state<typename Problem::acc_type>,
                                         first_ready_state<typename Problem::acc_type>>;
  static constexpr int warps = Warps;
  static constexpr int min_blocks = MinBlocks;
  static constexpr int chunks = bulk_chunks_for<element, warps, TileBytes / Problem::bulk_tensors>;
  static constexpr index_t tile = bulk_tile_steps<element, warps, chunks>;
  static constexpr int tail_chunks =
      TailTileBytes > 0 ? bulk_chunks_for<element, warps, TailTileBytes / Problem::bulk_tensors> : 0;
  static constexpr index_t tail_tile = tail_chunks > 0 ? bulk_tile_steps<element, warps, tail_chunks> : 0;
  static constexpr index_t tail_tiles = TailTiles;
  static constexpr int smem = static_cast<int>(Problem::bulk_tensors * bulk_tensor_bytes<Problem, tile>);
  static_assert(smem <= 47 * 1024, "bulk tiles fit the default shared memory");
};

/// The shape the library uses: 8 warps, 44 KB tiles, registers for five blocks per SM (as many
/// as shared memory holds). Measured on an H200 (benchmarks/bench_tuning.cu, int32 sum /
/// affine<float> at 2^28, % of copy, CUB 59.7–60.0% / 31.3% in the same run): 71.1 / 74.3%; 8
/// warps with 36–40 KB tiles 69.4–70.7 / 71.8–71.9%, 4 warps with 24–44 KB tiles 63–72 / 56–75%,
/// 16 KB tiles 45–55%, with 8-warp 40 KB tiles two per SM 50.5 / 58.1%
/// (docs/performance.md, "First-ready tiles").
///
/// Values over 16 bytes (small matrices) keep the window chain's shape instead (8 warps, 40 KB,
/// two blocks per SM): the first-ready chain folds up to 31 aggregates one after another in each
/// look-back, and a 2×2 int64 matrix product mod a prime made that fold the bound (1.8% of copy
/// against 4.2% with the window chain, H200, 2^28; CUB 3.6%).
///
/// The gated recurrence's forward (two inputs, a and b) keeps the 44 KB shape where a run's
/// accumulators take at most 32 bytes (f32, f64, complex64). With 16-bit inputs a run is 8
/// steps, 64 bytes of float pairs, and that shape spilled (48 registers). On an H100 at
/// 16 × 2^22 steps (bench_tuning --few-long): f32 345 µs (78.0% of copy) against 363–481 µs
/// for 16–32 KB tiles; bf16 225 µs with 24 KB tiles and six blocks per SM against 316 µs with
/// 40 KB. Once a run took one gate-form test and bf16 pairs one instruction each to widen
/// (2f27fee), 32 KB tiles with five blocks per SM led for 16-bit inputs: 191.1–191.9 µs against
/// 200.4–201.9 for 24 KB and six, two rounds in one H100 call (f32 kept 44 KB: 344 µs against
/// 352–359 for the next shapes).
template <class Problem>
constexpr bool wide_bulk_runs =
    Problem::bulk_tensors > 1 && sizeof(typename Problem::acc_type) * bulk_run<typename Problem::bulk_element> > 32;
///
/// Shapes whose elements divide 16 bytes end in a tail of shorter tiles (bulk_tiling), 82 of the
/// shape's tiles long over all sequences (an eighth of the 660 blocks an H200 holds): 24 KB tiles
/// for the generic scans, half tiles for the recurrence. Measured on an H200 (bench_tuning
/// --bulk-tail and --few-long-tail, µs, medians of 15 calls, against the same shape without a
/// tail in the same runs): int64 sum 2^24 95.3–98.4 against 102.4–105.7, 2^25 177.3–178.1
/// against 182.4–187.0; int32 sum 2^25 90.4–90.7 against 95.6–99.7; affine<float> 2^24 93.5–93.7
/// against 94.7–98.5; rows of 32 MB within −1.9 to +1.1; the recurrence's 16 × 2^22 forward f32
/// 267.5 against 282.9–286.3, bf16 154.6–155.0 against 161.9–163.0. Tails of 8 KB tiles or of a
/// wave or more lost: each tail tile costs the look-back a step. bench_scan with and without
/// (alternating): int64 sums at 2^28 1242.9–1246.9 against 1314.1–1315.6, int32 636.2–639.6
/// against 657.4–668.5. The 12-byte argmax struct's scans ran 3–4% slower with a tail (its
/// kernel took a stack frame), so elements of one a run take none (performance.md, "A tail of
/// shorter tiles").
template <class Problem, int TileBytes, int TailBytes>
using bulk_shape_with_tail =
    bulk_shape_of<Problem, 8, TileBytes, 5, false, bulk_start::early,
                  (bulk_run<typename Problem::bulk_element> > 1 ? TailBytes : 0),
                  (bulk_run<typename Problem::bulk_element> > 1 ? 82 : 0)>;
template <class Problem>
using bulk_shape = std::conditional_t<
    costly_combine<Problem>, bulk_shape_of<Problem, 8, 40 * 1024, 2, true>,
    std::conditional_t<wide_bulk_runs<Problem>, bulk_shape_with_tail<Problem, 32 * 1024, 16 * 1024>,
                       bulk_shape_with_tail<Problem, 44 * 1024, Problem::bulk_tensors == 1 ? 24 * 1024 : 20 * 1024>>>;

/// The bulk reduce's shape (agent/bulk_reduce_spans.cuh, two tiles in flight per block): 8 warps,
/// 40 KB tiles, two blocks per SM, as measured in performance.md ("Bulk reduce"). With the scan's
/// shape (two 44 KB tiles a block, registers for five) a 12-byte struct's reduce fell from 71%
/// to 54% of a read-only kernel on an H200.
template <class Problem>
using bulk_reduce_shape = bulk_shape_of<Problem, 8, 40 * 1024, 2>;

/// Grid bulk tiles (agent/grid_bulk_tiles.cuh) take inputs of at least this many bytes (all
/// inputs of all sequences), where the register grid tiles' small shape (up to 2 MB for 4-byte
/// sums) no longer fits. Their two shapes: 16 KB tiles, four blocks an SM (about 8 MB on an H200),
/// else, for scans, 44 KB tiles, five an SM (the bulk tiles' shape, about 29 MB). Measured on an
/// H200 against the paths they replace (bench_scan, µs): scans of 2^20 steps int32 9.2 against
/// 10.1, int64 13.1 against 16.9, affine<float> 12.8 against 16.3, the 12-byte struct 22.6
/// against 29.2; of 2^21 int64 20.3 against 29.0; of 2^22 int32 20.5 against 23.8. Reduces
/// gained only on the small shape (int64 and affine<float> at 2^20: 8.4–8.8 against 10.6); on the
/// large one they lost to the tile-blocks reduce (int32 at 2^22: 11.6 against 9.8).
#ifndef PARSCAN_GRID_BULK_MIN_BYTES
#define PARSCAN_GRID_BULK_MIN_BYTES (std::size_t(2) << 20)
#endif
constexpr std::size_t grid_bulk_min_bytes = PARSCAN_GRID_BULK_MIN_BYTES;
template <class Problem>
using small_grid_bulk_shape = bulk_shape_of<Problem, 8, 16 * 1024, 4>;
template <class Problem>
using large_grid_bulk_shape = bulk_shape_of<Problem, 8, 44 * 1024, 5>;

/// For sequences no longer than one 32-step-per-warp tile: one run per lane, so a short
/// sequence does not leave most of its warp idle (T = 128 ran 2.2× faster so). Problems that
/// stage take these sequences as segment tiles (launch_segment_tiles); the shape's loop_tile
/// bounds them, and the warp loop runs it, without staging, for the rest.
template <class Problem>
using short_tile_shape = tile_shape_of<Problem, Problem::run, 4, 8, 8, 0, 0>;

/// Segment tiles' blocks (4 warps, as the warp loop's) and groups in flight a warp.
constexpr int segment_tile_warps = 4, segment_tile_stages = 3;

/// A reduce of few long sequences folds spans of this many tiles (from the length alone, so
/// the order of combination never depends on the device): at most max_reduce_spans spans.
constexpr index_t max_reduce_spans = 4096;
inline index_t reduce_tiles_per_span(index_t tiles_per_sequence) {
  return (tiles_per_sequence + max_reduce_spans - 1) / max_reduce_spans;
}

/// Which Problems grid tiles take: the generic algorithms (those that can reduce). The
/// recurrences' Problems keep their measured paths: run as grid tiles, the log-space backward's
/// "huge" family (|a| up to e^20, products far beyond float) came out with infinities at
/// T = 4097 (float, time-contiguous), where the look-back's left fold had kept it within 5e-3;
/// the totals' tree order is the suspect, not confirmed.
template <class Problem>
constexpr bool grid_tiles_take = can_reduce_only<Problem>;

/// The tile-blocks reduce's shape (agent/tile_blocks_reduce.cuh): 256 threads × 16 accesses of
/// 16 bytes, 64 KB tiles, the partials' fold launched to start early (programmatic stream
/// serialization). H200, bench_tuning --reduce-shapes, two runs, time against CUB's: int32 sum
/// at 2^24 0.941 / 0.941, int64 0.978 / 0.966; 512 × 8 0.968–0.996, 1024 × 4 and 512 × 16 over
/// 1.0; the fold launched after the first pass ends costs 1–1.5 µs more at every size. The
/// in-order kernel, bench_tuning --in-order (affine<float> at 2^24): 0.99 of CUB's time with
/// registers for two blocks an SM, 1.03 in runs of 8 accesses (32 KB tiles); with registers for
/// three blocks it spilled (1.27 in bench_scan).
constexpr int tile_blocks_threads = 256, tile_blocks_loads = 16, tile_blocks_in_order_min_blocks = 2;

/// Which Problems the tile-blocks reduce takes: raw pointer inputs, with an operator whose
/// operands may be swapped over elements that divide a 16-byte access, or any other operator
/// (the in-order kernel) over elements of whole 4-byte words that divide a lane's 256 bytes. The
/// 12-byte argmax in runs of 6 accesses (192 bytes) measured 1.19 of CUB's time in bench_scan at
/// 2^24, against 1.00 on the bulk reduce, so it stays there.
template <class Problem, class Op, class = void>
constexpr bool takes_tile_blocks = false;
template <class Problem, class Op>
constexpr bool takes_tile_blocks<Problem, Op, std::enable_if_t<has_bulk_input<Problem>>> =
    swaps_operands<Op, typename Problem::acc_type>
        ? 16 % sizeof(typename Problem::bulk_element) == 0
        : sizeof(typename Problem::bulk_element) % 4 == 0 && 256 % sizeof(typename Problem::bulk_element) == 0;

/// The tile-blocks reduce's spans and partials for `sequences` × `length` steps.
template <class Problem, int Threads = tile_blocks_threads, int Loads = tile_blocks_loads>
struct tile_blocks_plan {
  static constexpr index_t tile = tile_block_steps<typename Problem::bulk_element, Threads, Loads>;
  index_t tiles_per_span = 0, spans_per_sequence = 0, blocks = 0;
  bool of(index_t sequences, index_t length, index_t span_tiles = 0) {
    const index_t tiles = (length + tile - 1) / tile;
    tiles_per_span = span_tiles > 0 ? span_tiles : (tiles + max_tile_block_spans - 1) / max_tile_block_spans;
    spans_per_sequence = (tiles + tiles_per_span - 1) / tiles_per_span;
    return !__builtin_mul_overflow(sequences, spans_per_sequence, &blocks) && blocks <= max_grid &&
           sequences <= max_grid;
  }
  std::size_t bytes() const { return static_cast<std::size_t>(blocks) * sizeof(typename Problem::acc_type); }
};

/// Workspace bytes for `sequences` × `length` steps of Problem (an upper bound over the modes).
template <class Problem, class shape = tile_shape<Problem>>
std::size_t scan_workspace_bytes(index_t sequences, index_t length) {
  using Acc = typename Problem::acc_type;
  if (sequences <= 0 || length <= 0) return 0;
  const index_t tiles_per_sequence = (length + shape::chained_tile - 1) / shape::chained_tile;
  const index_t tiles = sequences * tiles_per_sequence;
  const index_t windows = sequences * ((tiles_per_sequence + chain_window - 1) / chain_window);
  const index_t lane_tiles = (sequences + 31) / 32 * ((length + shape::lane_tile - 1) / shape::lane_tile);
  const index_t spans = sequences * ((tiles_per_sequence + reduce_tiles_per_span(tiles_per_sequence) - 1) /
                                     reduce_tiles_per_span(tiles_per_sequence));
  const std::size_t chained = shape::window_chain ? window_chain_state<Acc>::bytes(tiles, windows) : tile_state<Acc>::bytes(tiles);
  std::size_t lanes = tile_state<Acc, warp_threads>::bytes(lane_tiles);
  if constexpr (has_staged_lanes<Problem>) {
    const std::size_t staged = staged_lane_workspace_bytes<Problem>(sequences, length);
    if (staged > lanes) lanes = staged;
  }
  std::size_t partials = static_cast<std::size_t>(spans) * sizeof(Acc);
  // Grid tiles: a total per tile, or a window chain for costly combines; the small shape has
  // the more tiles.
  if constexpr (shape::grid_tiles > 0 && grid_tiles_take<Problem>) {
    const index_t grid_per_sequence = (length + shape::grid_tile - 1) / shape::grid_tile;
    const index_t grid_tiles = sequences * grid_per_sequence;
    const std::size_t totals = static_cast<std::size_t>(grid_tiles) * sizeof(Acc);
    const std::size_t chain = window_chain_state<Acc>::bytes(
        grid_tiles, sequences * ((grid_per_sequence + chain_window - 1) / chain_window));
    partials = partials > totals ? partials : totals;
    if constexpr (costly_combine<Problem>) partials = partials > chain ? partials : chain;
  }
  if constexpr (costly_combine<Problem>) {  // the thread-span reduce's partials, and the scan's
    const index_t spans_of_one = (length + thread_span_steps(length, Problem::run) - 1) / thread_span_steps(length, Problem::run);
    const std::size_t thread_partials =
        static_cast<std::size_t>(sequences) * ((spans_of_one + thread_span_block - 1) / thread_span_block) * sizeof(Acc);
    partials = partials > thread_partials ? partials : thread_partials;
    thread_span_scan_plan<Acc> spans;
    if (length >= thread_span_scan_min_length && spans.of(sequences, length, Problem::run) && spans.bytes() > partials)
      partials = spans.bytes();
  }
  std::size_t most = chained > lanes ? (chained > partials ? chained : partials) : (lanes > partials ? lanes : partials);
  if constexpr (shape::bulk_reduce && has_bulk_input<Problem>) {
    const index_t reduce_per_sequence = (length + bulk_reduce_shape<Problem>::tile - 1) / bulk_reduce_shape<Problem>::tile;
    const std::size_t bulk_partials =
        static_cast<std::size_t>(sequences) *
        (reduce_per_sequence < max_reduce_spans ? reduce_per_sequence : max_reduce_spans) * sizeof(Acc);
    if (bulk_partials > most) most = bulk_partials;
    if constexpr (256 % sizeof(typename Problem::bulk_element) == 0) {  // the tile-blocks reduce's partials
      tile_blocks_plan<Problem> tiles;
      if (tiles.of(sequences, length) && tiles.bytes() > most) most = tiles.bytes();
    }
    if constexpr (!costly_combine<Problem>) {  // the grid bulk tiles' totals (the small shape has more)
      const index_t grid_bulk_per_sequence =
          (length + small_grid_bulk_shape<Problem>::tile - 1) / small_grid_bulk_shape<Problem>::tile;
      const std::size_t grid_bulk = static_cast<std::size_t>(sequences) * grid_bulk_per_sequence * sizeof(Acc);
      if (grid_bulk > most) most = grid_bulk;
    }
    if constexpr (shape::bulk_tiles && has_bulk_tiles<Problem>) {
      const index_t bulk_per_sequence = (length + bulk_shape<Problem>::tile - 1) / bulk_shape<Problem>::tile;
      const std::size_t bulk = bulk_shape<Problem>::chain_state::bytes(
          sequences * bulk_per_sequence, sequences * ((bulk_per_sequence + chain_window - 1) / chain_window));
      if (bulk > most) most = bulk;
    }
  }
  return most + 256;
}

/// Claims workspace for the tile state and the tile counter and zeroes, in one memset, the
/// counter (the first 256 bytes) and the state's status words after it (the values need none).
template <class State>
status prepare_tiles(workspace_lease& ws, index_t tiles, State& st, unsigned*& counter, const cuda_backend& be) {
  if (status s = ws.acquire(State::bytes(tiles) + 256); s != status::success) return s;
  counter = static_cast<unsigned*>(ws.get());
  st = State::carve(static_cast<char*>(ws.get()) + 256, tiles);
  return report(cudaMemsetAsync(ws.get(), 0, 256 + State::status_bytes(tiles), be.stream));
}

/// Launches `kernel` on `blocks` blocks (capped at the grid limit) with `smem` bytes of dynamic
/// shared memory and checks the launch.
template <class Kernel, class... Args>
status launch(Kernel kernel, index_t blocks, int threads, int smem, const cuda_backend& be, const Args&... args) {
  kernel<<<static_cast<unsigned>(blocks < max_grid ? blocks : max_grid), threads, smem, be.stream>>>(args...);
  return check_launch();
}

/// Launches `kernel` like launch(), allowed to start before the grid ahead of it in the stream
/// ends (programmatic stream serialization): its threads must wait for that grid
/// (wait_for_prerequisite_grids) before they touch what it writes.
template <class... Params, class... Args>
status launch_early(void (*kernel)(Params...), index_t blocks, int threads, int smem, const cuda_backend& be,
                    const Args&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(blocks < max_grid ? blocks : max_grid));
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = static_cast<std::size_t>(smem);
  config.stream = be.stream;
  cudaLaunchAttribute early{};
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &early;
  config.numAttrs = 1;
  if (status s = report(cudaLaunchKernelEx(&config, kernel, args...)); s != status::success) return s;
  return check_launch();
}

/// The vector path's shape (agent/segment_warps.cuh, scan_segment_vectors_kernel): warps a block,
/// 16-byte accesses a lane loaded before any is scanned. Set by bench_varlen --segment-shapes
/// (docs/performance.md, "Segments in whole 16-byte accesses").
constexpr int segment_vector_warps = 1;
constexpr int segment_vector_unroll = 8;

template <int Warps, int Unroll, class T, class Op, class Places>
status launch_segment_vectors_shaped(const segment_vectors<T>& P, const Op& op, const Places& places,
                                     index_t segments, const cuda_backend& be) {
  return launch(scan_segment_vectors_kernel<Warps, Unroll, T, Op, Places>, (segments + Warps - 1) / Warps,
                Warps * warp_threads, 0, be, P, op, places, segments);
}
template <class T, class Op, class Places>
status launch_segment_vectors(const segment_vectors<T>& P, const Op& op, const Places& places, index_t segments,
                              const cuda_backend& be) {
  return launch_segment_vectors_shaped<segment_vector_warps, segment_vector_unroll>(P, op, places, segments, be);
}

/// Whether a Problem may take the vector path (generic_problem::vector_capable).
template <class Problem, class = void>
constexpr bool has_vector_path = false;
template <class Problem>
constexpr bool has_vector_path<Problem, std::void_t<decltype(Problem::vector_capable)>> = Problem::vector_capable;

template <class T>
struct same_type {
  using type = T;
};

/// Launches `kernel` cooperatively on `blocks` blocks, which must all fit on the device at once
/// (the persistent chained kernels rely on it), and checks the launch.
template <class... Params>
status launch_cooperative(void (*kernel)(Params...), index_t blocks, int threads, int smem, const cuda_backend& be,
                          typename same_type<Params>::type... args) {
  void* params[] = {static_cast<void*>(&args)...};
  if (status s = report(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), dim3(static_cast<unsigned>(blocks)),
                                                    dim3(threads), params, smem, be.stream));
      s != status::success)
    return s;
  return check_launch();
}

template <class shape, class Problem, class Op>
status launch_lane_tiles(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  using Acc = typename Problem::acc_type;
  using state = tile_state<Acc, warp_threads>;
  lane_tile_grid grid;
  if (!lane_tile_grid_of(sequences, P.length, shape::lane_tile, grid) || grid.tiles > max_grid)
    return status::exceeds_device_limits;
  workspace_lease ws(be);
  state st;
  unsigned* counter;
  if (status s = prepare_tiles(ws, grid.tiles, st, counter, be); s != status::success) return s;
  return launch(scan_lane_chained_kernel<shape::lane_warps, shape::lane_steps, Problem, Op>, grid.tiles,
                shape::lane_warps * warp_threads, 0, be, P, op, st, counter, grid.tiles_per_group, sequences);
}

/// Staged lane tiles (agent/staged_lane_tiles.cuh) of a tile plan with at most `capacity`
/// tiles: a persistent grid, launched cooperatively, as many blocks as fit on the device at once
/// or as there can be tiles.
template <class shape, class Problem, class Op, class Plan>
status launch_staged_lane_plan(const Problem& P, const Op& op, const Plan& plan, index_t capacity,
                               const cuda_backend& be) {
  using state = tile_state<typename Problem::acc_type, warp_threads>;
  if (capacity > max_grid) return status::exceeds_device_limits;
  const device_facts dev = current_device();
  if (dev.st != status::success) return dev.st;
  constexpr auto kernel =
      scan_lane_staged_kernel<shape::lane_warps, shape::lane_steps, shape::lane_stages, Problem, Op, Plan>;
  constexpr int threads = (shape::lane_warps + 1) * warp_threads;  // and the look-back warp
  constexpr int smem = lane_staging_ring<shape::lane_warps, shape::lane_steps, shape::lane_stages, Problem>::bytes;
  const int per_sm = blocks_per_multiprocessor<kernel>(threads, dev.device, smem);
  if (per_sm == 0) return status::exceeds_device_limits;
  workspace_lease ws(be);
  state st;
  unsigned* counter;  // unused: the persistent grid takes its tiles round-robin
  if (status s = prepare_tiles(ws, capacity, st, counter, be); s != status::success) return s;
  const index_t resident = static_cast<index_t>(per_sm) * dev.multiprocessors;
  return launch_cooperative(kernel, resident < capacity ? resident : capacity, threads, smem, be, P, op, st, plan);
}

/// Staged lane tiles over a batch of `sequences` sequences of P.length steps.
template <class shape, class Problem, class Op>
status launch_staged_lane_tiles(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  lane_tile_grid grid;
  if (!lane_tile_grid_of(sequences, P.length, shape::lane_tile, grid)) return status::exceeds_device_limits;
  return launch_staged_lane_plan<shape>(P, op, batch_lane_tiles{grid.groups, grid.tiles_per_group, sequences},
                                        grid.tiles, be);
}

/// The lane loop (agent/lane_loop.cuh) over `sequences` sequences of P, a block per group of
/// 32: no workspace, a plain launch.
template <class Problem, class Op>
status launch_lane_loop(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  return launch(scan_lane_loop_kernel<lane_loop_warps, lane_loop_steps, Problem, Op>,
                (sequences + warp_threads - 1) / warp_threads, lane_loop_warps * warp_threads, 0, be, P, op, sequences);
}

/// Workspace bytes of the lane tiles of `sequences` × `length` steps of Problem.
template <class Problem>
std::size_t lane_tile_workspace_bytes(index_t sequences, index_t length) {
  return staged_lane_workspace_bytes<Problem>(sequences, length);
}

/// Whether the lane loop has groups enough to fill the device: two blocks per multiprocessor
/// or more (it gives a group's whole length to one block; the staged lane tiles spread few
/// groups over many blocks).
inline bool lane_loop_fills(index_t sequences, int multiprocessors) {
  return (sequences + warp_threads - 1) / warp_threads >= 2 * static_cast<index_t>(multiprocessors);
}

/// Runs a Problem that has only the lane-tile interface (the lane packs of
/// recurrence/recurrence_lane_packs.cuh and generic/generic_lane_packs.cuh) over `sequences` of
/// its sequences: the staged lane tiles, or the lane loop for sequences of one staged tile in
/// groups too few to fill the device. There the staged lane tiles would run a tile a group too,
/// with no look-back to overlap, after a workspace lease from the pool, a memset (two when this
/// was measured) and a cooperative launch: host work that a call on a few kilobytes cannot hide. The lane loop runs
/// the same tile a group from one plain launch, with no workspace (a (1, 8, 32) channel-last
/// gated forward on an H200: 10.4–10.9 µs of host time a call before, 4.3 after, an empty launch
/// 3.3–4.4; docs/performance.md, "Tiny calls at the launch floor").
template <class Problem, class Op>
status dispatch_lane_tiles(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  if (sequences == 0) return status::success;
  if (P.length == 0) {
    const index_t blocks = (sequences + 255) / 256;
    return launch(empty_sequences_kernel<Problem>, blocks < 65535 ? blocks : 65535, 256, 0, be, P, sequences);
  }
  using shape = staged_lane_shape<Problem>;
  if constexpr (has_lane_loop<Problem>) {
    static_assert(shape::lane_tile <= static_cast<index_t>(lane_loop_warps) * lane_loop_steps,
                  "a staged lane tile fits one tile of the lane loop");
    if (P.length <= shape::lane_tile) {
      const device_facts dev = current_device();
      if (dev.st != status::success) return dev.st;
      if (!lane_loop_fills(sequences, dev.multiprocessors)) return launch_lane_loop(P, op, sequences, be);
    }
  }
  return launch_staged_lane_tiles<shape>(P, op, sequences, be);
}

/// Segment tiles (scan_segment_tiles_kernel): sequences of at most one run a lane of Lanes lanes,
/// 32 / Lanes of them a warp, segment_tile_stages groups in flight a warp; a persistent grid of
/// at most as many blocks as fit on the device at once. No workspace, no inter-block traffic.
template <int Lanes, class Problem, class Op>
status launch_segment_tiles(const Problem& P, const Op& op, index_t sequences, const device_facts& dev,
                            const cuda_backend& be) {
  constexpr int warps = segment_tile_warps, stages = segment_tile_stages;
  constexpr auto kernel = scan_segment_tiles_kernel<warps, Lanes, stages, Problem, Op>;
  constexpr int threads = warps * warp_threads;
  constexpr int smem = segment_tiles_smem<warps, Lanes, stages, Problem>::bytes;
  const int per_sm = blocks_per_multiprocessor<kernel>(threads, dev.device, smem);
  if (per_sm == 0) return status::exceeds_device_limits;
  constexpr index_t per_block = static_cast<index_t>(warps) * (warp_threads / Lanes);
  const index_t needed = (sequences + per_block - 1) / per_block;
  const index_t resident = static_cast<index_t>(per_sm) * dev.multiprocessors;
  return launch(kernel, needed < resident ? needed : resident, threads, smem, be, P, op, sequences);
}

/// Warps that loop over whole sequences: no workspace, no inter-block traffic.
template <class shape, class Problem, class Op>
status launch_warp_loop(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  const index_t blocks = (sequences + shape::loop_warps - 1) / shape::loop_warps;
  constexpr int threads = shape::loop_warps * warp_threads;
  if constexpr (shape::loop_stages > 0) {
    constexpr auto kernel = scan_warp_loop_staged_kernel<shape::loop_warps, shape::chunks, shape::loop_stages, Problem, Op>;
    constexpr int smem = staging_ring<shape::loop_warps, shape::chunks, shape::loop_stages, Problem>::bytes;
    const device_facts dev = current_device();
    if (dev.st != status::success) return dev.st;
    if (blocks_per_multiprocessor<kernel>(threads, dev.device, smem) == 0) return status::exceeds_device_limits;
    return launch(kernel, blocks, threads, smem, be, P, op, sequences);
  } else {
    return launch(scan_warp_loop_kernel<shape::loop_warps, shape::chunks, Problem, Op>, blocks, threads, 0, be, P, op,
                  sequences);
  }
}

/// A persistent grid of chained tiles: as many blocks as fit on the device at once, launched
/// cooperatively, taking tiles round-robin (agent/chained_tiles.cuh says why).
template <class shape, class Problem, class Op>
status launch_persistent_chained(const Problem& P, const Op& op, index_t sequences, index_t tiles_per_sequence,
                      const device_facts& dev, const cuda_backend& be) {
  using Acc = typename Problem::acc_type;
  index_t total_tiles;
  if (__builtin_mul_overflow(sequences, tiles_per_sequence, &total_tiles) || total_tiles > max_grid)
    return status::exceeds_device_limits;
  workspace_lease ws(be);
  // The look-back: the window chain (zeroed whole) or the hierarchical windows.
  std::conditional_t<shape::window_chain, window_chain_state<Acc>, tile_state<Acc>> st;
  if constexpr (shape::window_chain) {
    const index_t windows = sequences * ((tiles_per_sequence + chain_window - 1) / chain_window);
    const std::size_t bytes = window_chain_state<Acc>::bytes(total_tiles, windows);
    if (status s = ws.acquire(bytes); s != status::success) return s;
    st = window_chain_state<Acc>::carve(ws.get(), total_tiles, windows);
    if (status s = report(cudaMemsetAsync(ws.get(), 0, bytes, be.stream)); s != status::success) return s;
  } else {
    unsigned* counter;  // unused: the persistent grid takes its tiles round-robin
    if (status s = prepare_tiles(ws, total_tiles, st, counter, be); s != status::success) return s;
  }
  constexpr int threads = shape::chained_warps * warp_threads;
  constexpr index_t tiles_per_block = shape::chained_warp_tiles ? shape::chained_warps : 1;
  auto run = [&](auto kernel, int per_sm, int smem) {
    if (per_sm == 0) return status::exceeds_device_limits;
    const index_t resident = static_cast<index_t>(per_sm) * dev.multiprocessors;
    const index_t needed = (total_tiles + tiles_per_block - 1) / tiles_per_block;
    return launch_cooperative(kernel, resident < needed ? resident : needed, threads, smem, be, P, op, st,
                              tiles_per_sequence, total_tiles);
  };
  if constexpr (shape::chained_stages > 0) {
    constexpr auto kernel = scan_chained_staged_kernel<shape::chained_warps, shape::chunks, shape::chained_stages,
                                                       shape::chained_warp_tiles, Problem, Op, decltype(st)>;
    constexpr int smem = staging_ring<shape::chained_warps, shape::chunks, shape::chained_stages, Problem>::bytes;
    return run(kernel, blocks_per_multiprocessor<kernel>(threads, dev.device, smem), smem);
  } else {
    static_assert(!shape::window_chain, "the window chain without staging is launch_window_chain");
    constexpr auto kernel = scan_chained_kernel<shape::chained_warps, shape::chunks, Problem, Op>;
    return run(kernel, blocks_per_multiprocessor<kernel>(threads, dev.device), 0);
  }
}

/// How claimed_chain::prepare zeroes the state: a cudaMemsetAsync, or a grid that lets the next
/// one, launched with launch_early, start before it ends (agent/clear_state.cuh).
enum class zeroed_by { memset, early_grid };

/// The tiles, look-back state (window_chain_state or first_ready_state) and tile counter of a
/// launch of tiles claimed in order (one tile per block, or bulk tiles): counts the tiles and
/// claims and zeroes (the counter in the first 256 bytes, the state after it, in one memset or
/// one clear_state_kernel) workspace for them.
template <class State>
struct claimed_chain {
  index_t tiles_per_sequence = 0, windows_per_sequence = 0, total_tiles = 0;
  State st{};
  unsigned* counter = nullptr;

  status prepare(workspace_lease& ws, index_t sequences, index_t tiles_per_seq, const cuda_backend& be,
                 zeroed_by zeroing = zeroed_by::memset) {
    tiles_per_sequence = tiles_per_seq;
    windows_per_sequence = (tiles_per_sequence + chain_window - 1) / chain_window;
    if (__builtin_mul_overflow(sequences, tiles_per_sequence, &total_tiles) || total_tiles > max_grid)
      return status::exceeds_device_limits;
    const std::size_t state_bytes = State::bytes(total_tiles, sequences * windows_per_sequence);
    if (status s = ws.acquire(state_bytes + 256); s != status::success) return s;
    counter = static_cast<unsigned*>(ws.get());
    st = State::carve(static_cast<char*>(ws.get()) + 256, total_tiles, sequences * windows_per_sequence);
    if (zeroing == zeroed_by::memset) return report(cudaMemsetAsync(ws.get(), 0, state_bytes + 256, be.stream));
    // A few 16-byte words a thread: 12 KB for an int32 sum of 2^24 steps in one block.
    const index_t words = static_cast<index_t>((state_bytes + 256) / 16);
    constexpr index_t per_block = 4 * clear_state_threads;
    const index_t blocks = (words + per_block - 1) / per_block;
    return launch(clear_state_kernel<clear_state_threads>, blocks < 1024 ? blocks : 1024, clear_state_threads, 0, be,
                  static_cast<uint4*>(ws.get()), words);
  }
};

/// Chained tiles: one block per tile, claimed in order from a counter; the grid needs no
/// co-residency, so this is a plain launch (scan_window_chain_kernel says why it is safe).
template <class shape, class Problem, class Op>
status launch_window_chain(const Problem& P, const Op& op, index_t sequences, index_t tiles_per_sequence,
                           const cuda_backend& be) {
  workspace_lease ws(be);
  claimed_chain<window_chain_state<typename Problem::acc_type>> c;
  if (status s = c.prepare(ws, sequences, tiles_per_sequence, be); s != status::success) return s;
  return launch(scan_window_chain_kernel<shape::chained_warps, shape::chunks, Problem, Op>, c.total_tiles,
                shape::chained_warps * warp_threads, 0, be, P, op, c.st, c.counter, c.tiles_per_sequence,
                c.windows_per_sequence);
}

/// Whether the bulk tiles' kernel for Problem was compiled for sm_90 or later and loads on
/// `device` (a build for older targets only, or an older device, keeps the chained kernels).
template <auto Kernel>
bool built_for_bulk_copies(int device) {
  constexpr int max_devices = 64;
  static int cached[max_devices] = {};  // 0 unknown, 1 yes, -1 no
  if (device < 0 || device >= max_devices) device = 0;
  if (cached[device] == 0) {
    cudaFuncAttributes a{};
    int major = 0;
    const bool ok = cudaFuncGetAttributes(&a, Kernel) == cudaSuccess && a.ptxVersion >= 90 &&
                    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
                    major >= 9;
    if (!ok) cudaGetLastError();  // a kernel image missing for this device is not sticky: clear it
    cached[device] = ok ? 1 : -1;
  }
  return cached[device] > 0;
}

/// Asks, once per kernel, for the SM's largest shared-memory share (the bulk kernels' tiles in
/// flight live there). A preference: if it is refused the launch still runs.
template <auto Kernel>
void prefer_shared_memory() {
  static const bool asked = [] {
    if (cudaFuncSetAttribute(Kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared) !=
        cudaSuccess)
      cudaGetLastError();
    return true;
  }();
  (void)asked;
}

template <class Problem, class Op, class shape = bulk_shape<Problem>>
constexpr auto bulk_tiles_kernel = scan_bulk_tiles_kernel<shape::warps, shape::chunks, shape::tail_chunks,
                                                          shape::min_blocks, Problem, Op, typename shape::chain_state>;

/// Cuts sequences of `length` steps into tiles of `tile` steps and a tail of about `tail_length`
/// steps in tiles of `tail` (bulk_tiling: only the last memory tile is partial, so forward the
/// body's tiles are all whole, reverse the tail's).
inline bulk_tiling cut_bulk_tiles(index_t length, index_t tile, index_t tail, index_t tail_length, bool reverse) {
  if (tail == 0 || tail_length <= 0) {
    const index_t tiles = (length + tile - 1) / tile;
    return {tiles, tiles};
  }
  const index_t want = tail_length < length ? tail_length : length;
  index_t body = 0, tail_tiles = 0;
  if (reverse) {
    tail_tiles = want / tail;
    body = (length - tail_tiles * tail + tile - 1) / tile;
  } else {
    body = (length - want) / tile;
    tail_tiles = (length - body * tile + tail - 1) / tail;
  }
  return {body + tail_tiles, body};
}

/// Bulk tiles (agent/bulk_tiles.cuh): a persistent grid of resident blocks claiming tiles in
/// order; shared memory gets its largest share of the SM (the tiles in flight live there). The
/// look-back's state is zeroed as shape::start says, and the last tiles are cut shorter as
/// shape::tail_tile and `tail_tiles` say (bulk_tiling).
template <class Problem, class Op, class shape = bulk_shape<Problem>>
status launch_bulk_tiles(const Problem& P, const Op& op, index_t sequences, const device_facts& dev,
                         const cuda_backend& be, index_t tail_tiles = shape::tail_tiles) {
  constexpr auto kernel = bulk_tiles_kernel<Problem, Op, shape>;
  constexpr int threads = shape::warps * warp_threads;
  constexpr bool early = shape::start != bulk_start::after_memset;
  prefer_shared_memory<kernel>();
  const int per_sm = blocks_per_multiprocessor<kernel>(threads, dev.device, shape::smem);
  if (per_sm == 0) return status::exceeds_device_limits;
  const index_t resident = static_cast<index_t>(per_sm) * dev.multiprocessors;
  const bulk_tiling tiling =
      cut_bulk_tiles(P.length, shape::tile, shape::tail_tile, tail_tiles * shape::tile / sequences, P.reverse);
  workspace_lease ws(be);
  claimed_chain<typename shape::chain_state> c;
  if (status s =
          c.prepare(ws, sequences, tiling.tiles_per_sequence, be, early ? zeroed_by::early_grid : zeroed_by::memset);
      s != status::success)
    return s;
  const index_t blocks = resident < c.total_tiles ? resident : c.total_tiles;
  if constexpr (early)
    return launch_early(kernel, blocks, threads, shape::smem, be, P, op, c.st, c.counter, tiling,
                        c.windows_per_sequence, c.total_tiles);
  return launch(kernel, blocks, threads, shape::smem, be, P, op, c.st, c.counter, tiling, c.windows_per_sequence,
                c.total_tiles);
}

/// The bulk reduce's kernel: with FoldHere, the one that finishes the reduce itself.
template <class Problem, class Op, class shape = bulk_reduce_shape<Problem>, bool FoldHere = true>
constexpr auto bulk_reduce_kernel =
    reduce_bulk_spans_kernel<shape::warps, shape::chunks, shape::min_blocks, FoldHere, Problem, Op>;

/// How launch_bulk_reduce finishes: the library's choice by size, or (for bench_tuning) always
/// in the same cooperative launch after a grid barrier, or always in a second launch.
enum class bulk_reduce_finish { by_size, same_launch, second_launch };

/// A reduce of few long sequences on bulk tiles (agent/bulk_reduce_spans.cuh): spans folded into
/// partials on a persistent grid, two tiles in flight per block, then each sequence's partials.
/// Inputs of at most four tiles per resident block finish in the same, cooperative, launch (one
/// launch fewer: on an H100, 8 MB of int64 in 8.3 µs against 9.3 with two launches, affine pairs
/// 8.3 against 9.7); larger ones in a second launch (reduce_partials_kernel), since there the
/// cooperative launch measured 1–2% slower (2^28 int32 sums 374.0 µs against 367.7, int64 724.0
/// against 716.4; docs/performance.md, "Lane runs and one launch for the bulk reduce"). Both
/// fold the same partials in the same order, so the choice never changes a result.
/// `tiles_per_span` > 0 replaces the library's span length (for benchmarks/bench_tuning.cu).
template <class Problem, class Op, class shape = bulk_reduce_shape<Problem>>
status launch_bulk_reduce(const Problem& P, const Op& op, index_t sequences, const device_facts& dev,
                          const cuda_backend& be, index_t tiles_per_span = 0,
                          bulk_reduce_finish finish = bulk_reduce_finish::by_size) {
  using Acc = typename Problem::acc_type;
  constexpr auto one_launch = bulk_reduce_kernel<Problem, Op, shape, true>;
  constexpr auto first_of_two = bulk_reduce_kernel<Problem, Op, shape, false>;
  constexpr int threads = shape::warps * warp_threads, smem = 2 * shape::smem;
  prefer_shared_memory<one_launch>();
  prefer_shared_memory<first_of_two>();
  // (blocks_per_multiprocessor also opts each kernel in for its dynamic shared memory.)
  const int per_sm = blocks_per_multiprocessor<one_launch>(threads, dev.device, smem);
  if (per_sm == 0 || blocks_per_multiprocessor<first_of_two>(threads, dev.device, smem) == 0)
    return status::exceeds_device_limits;
  const index_t tiles_per_sequence = (P.length + shape::tile - 1) / shape::tile;
  const index_t per_span = tiles_per_span > 0 ? tiles_per_span : reduce_tiles_per_span(tiles_per_sequence);
  const index_t spans_per_sequence = (tiles_per_sequence + per_span - 1) / per_span;
  index_t spans, tiles;
  if (__builtin_mul_overflow(sequences, spans_per_sequence, &spans) || spans > max_grid || sequences > max_grid ||
      __builtin_mul_overflow(sequences, tiles_per_sequence, &tiles))
    return status::exceeds_device_limits;
  workspace_lease ws(be);
  if (status s = ws.acquire(static_cast<std::size_t>(spans) * sizeof(Acc) + 256); s != status::success) return s;
  Acc* partials = static_cast<Acc*>(ws.get());
  const index_t resident = static_cast<index_t>(per_sm) * dev.multiprocessors;
  const index_t blocks = resident < spans ? resident : spans;
  const bool same_launch = finish == bulk_reduce_finish::by_size ? tiles <= 4 * resident
                                                                 : finish == bulk_reduce_finish::same_launch;
  if (same_launch)
    return launch_cooperative(one_launch, blocks, threads, smem, be, P, op, partials, tiles_per_sequence, per_span,
                              spans_per_sequence, spans);
  if (status s = launch(first_of_two, blocks, threads, smem, be, P, op, partials, tiles_per_sequence, per_span,
                        spans_per_sequence, spans);
      s != status::success)
    return s;
  constexpr int partial_threads = 256;
  return launch(reduce_partials_kernel<partial_threads, Problem, Op>, sequences, partial_threads, 0, be, P, op,
                static_cast<const Acc*>(partials), spans_per_sequence);
}

/// The tile-blocks reduce's second launch, started early: it waits for the first on the device.
constexpr int tile_blocks_fold_threads = 512;
template <class Problem, class Op>
constexpr auto tile_blocks_fold_kernel = reduce_partials_kernel<tile_blocks_fold_threads, Problem, Op, true>;

/// The tile-blocks reduce's in-order kernel in each direction (operators whose operands may not
/// be swapped), with the dynamic shared memory it stages its chunks in.
template <class Problem, class Op, int Threads, int Loads, int Chains, int MinBlocks, bool Reverse>
constexpr auto tile_blocks_in_order_kernel =
    reduce_tile_blocks_in_order_kernel<Threads / warp_threads, Loads, Chains, MinBlocks, Reverse, Problem, Op>;
template <int Threads, int Loads>
constexpr int tile_blocks_in_order_smem = in_order_smem_bytes<Threads / warp_threads, Loads>;

/// A reduce of few long sequences in blocks of a span of tiles each (agent/tile_blocks_reduce.cuh),
/// then each sequence's partials folded in a second launch. With `programmatic`, the second
/// launch may start while the first runs and waits for it on the device (griddepcontrol).
/// `tiles_per_span` > 0 replaces the library's span length (for tests and benchmarks). Operators
/// whose operands may not be swapped fold each lane's run in Chains parts, with registers for
/// MinBlocks blocks an SM.
template <class Problem, class Op, int Threads = tile_blocks_threads, int Loads = tile_blocks_loads, int Chains = 2,
          int MinBlocks = tile_blocks_in_order_min_blocks>
status launch_tile_blocks_reduce(const Problem& P, const Op& op, index_t sequences, const device_facts& dev,
                                 const cuda_backend& be, bool programmatic, index_t tiles_per_span = 0) {
  using Acc = typename Problem::acc_type;
  tile_blocks_plan<Problem, Threads, Loads> plan;
  if (!plan.of(sequences, P.length, tiles_per_span)) return status::exceeds_device_limits;
  workspace_lease ws(be);
  if (status s = ws.acquire(plan.bytes()); s != status::success) return s;
  Acc* partials = static_cast<Acc*>(ws.get());
  if constexpr (swaps_operands<Op, Acc>) {
    if (status s = launch(reduce_tile_blocks_kernel<Threads, Loads, Problem, Op>, plan.blocks, Threads, 0, be, P, op,
                          partials, plan.tiles_per_span, plan.spans_per_sequence);
        s != status::success)
      return s;
  } else {
    constexpr auto forward = tile_blocks_in_order_kernel<Problem, Op, Threads, Loads, Chains, MinBlocks, false>;
    constexpr auto reverse = tile_blocks_in_order_kernel<Problem, Op, Threads, Loads, Chains, MinBlocks, true>;
    constexpr int smem = tile_blocks_in_order_smem<Threads, Loads>;
    // (blocks_per_multiprocessor also opts each kernel in for its dynamic shared memory.)
    if (blocks_per_multiprocessor<forward>(Threads, dev.device, smem) == 0 ||
        blocks_per_multiprocessor<reverse>(Threads, dev.device, smem) == 0)
      return status::exceeds_device_limits;
    if (status s = launch(P.reverse ? reverse : forward, plan.blocks, Threads, smem, be, P, op, partials,
                          plan.tiles_per_span, plan.spans_per_sequence);
        s != status::success)
      return s;
  }
  if (!programmatic)
    return launch(reduce_partials_kernel<tile_blocks_fold_threads, Problem, Op>, sequences, tile_blocks_fold_threads,
                  0, be, P, op, static_cast<const Acc*>(partials), plan.spans_per_sequence);
  return launch_early(tile_blocks_fold_kernel<Problem, Op>, sequences, tile_blocks_fold_threads, 0, be, P, op,
                      static_cast<const Acc*>(partials), plan.spans_per_sequence);
}

/// A reduce of few long sequences in two passes over fixed spans of tiles (reduce_spans_kernel,
/// reduce_partials_kernel): the input is read once, and nothing waits on another block.
template <class shape, class Problem, class Op>
status launch_reduce(const Problem& P, const Op& op, index_t sequences, index_t tiles_per_sequence,
                     const cuda_backend& be) {
  using Acc = typename Problem::acc_type;
  const index_t per_span = reduce_tiles_per_span(tiles_per_sequence);
  const index_t spans_per_sequence = (tiles_per_sequence + per_span - 1) / per_span;
  index_t spans;
  if (__builtin_mul_overflow(sequences, spans_per_sequence, &spans) || spans > max_grid || sequences > max_grid)
    return status::exceeds_device_limits;
  workspace_lease ws(be);
  if (status s = ws.acquire(static_cast<std::size_t>(spans) * sizeof(Acc) + 256); s != status::success) return s;
  Acc* partials = static_cast<Acc*>(ws.get());
  if (status s = launch(reduce_spans_kernel<shape::chained_warps, shape::chunks, Problem, Op>, spans,
                        shape::chained_warps * warp_threads, 0, be, P, op, partials, tiles_per_sequence, per_span,
                        spans_per_sequence);
      s != status::success)
    return s;
  constexpr int threads = 256;
  return launch(reduce_partials_kernel<threads, Problem, Op>, sequences, threads, 0, be, P, op,
                static_cast<const Acc*>(partials), spans_per_sequence);
}

/// Grid tiles (agent/grid_tiles.cuh) of Warps × Chunks runs: one block per tile, launched
/// cooperatively, every block resident. Workspace: a total per tile, or for costly combines the
/// window chain's state, which the kernel zeroes itself.
template <int Warps, int Chunks, class Problem, class Op>
struct grid_tiles_of {
  using Acc = typename Problem::acc_type;
  static constexpr int threads = Warps * warp_threads;
  static constexpr index_t tile = tile_steps<Problem, Warps, Chunks>;
  static constexpr auto scan_kernel = [] {
    if constexpr (costly_combine<Problem>)
      return scan_grid_chain_kernel<Warps, Chunks, Problem, Op>;
    else
      return scan_grid_totals_kernel<Warps, Chunks, Problem, Op>;
  }();
  static constexpr auto reduce_kernel = reduce_grid_tiles_kernel<Warps, Chunks, Problem, Op>;

  static bool reduces(const Problem& P) {
    if constexpr (can_reduce_only<Problem>) return P.reduce_only();
    else return false;
  }
  static index_t tiles_per_sequence(const Problem& P) { return (P.length + tile - 1) / tile; }
  /// Whether `sequences` sequences take at most `most` tiles, all resident at once.
  static bool fits(const Problem& P, index_t sequences, index_t most, const device_facts& dev) {
    const index_t tiles = sequences * tiles_per_sequence(P);  // sequences < resident warps: no overflow
    if (tiles > most) return false;
    const int per_sm = reduces(P) ? blocks_per_multiprocessor<reduce_kernel>(threads, dev.device)
                                  : blocks_per_multiprocessor<scan_kernel>(threads, dev.device);
    return per_sm > 0 && tiles <= static_cast<index_t>(per_sm) * dev.multiprocessors;
  }
  static status launch(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
    const index_t per_sequence = tiles_per_sequence(P), tiles = sequences * per_sequence;
    workspace_lease ws(be);
    if constexpr (costly_combine<Problem>) {
      if (!reduces(P)) {
        using State = window_chain_state<Acc>;
        const index_t windows_per_sequence = (per_sequence + chain_window - 1) / chain_window;
        const std::size_t bytes = State::bytes(tiles, sequences * windows_per_sequence);
        if (status s = ws.acquire(bytes); s != status::success) return s;
        const State st = State::carve(ws.get(), tiles, sequences * windows_per_sequence);
        return launch_cooperative(scan_kernel, tiles, threads, 0, be, P, op, st,
                                  static_cast<unsigned long long*>(ws.get()), static_cast<index_t>(bytes / 8),
                                  per_sequence, windows_per_sequence);
      }
    }
    if (status s = ws.acquire(static_cast<std::size_t>(tiles) * sizeof(Acc)); s != status::success) return s;
    Acc* totals = static_cast<Acc*>(ws.get());
    // The totals kernels take the same arguments: the reduce's, or the scan's where it is one.
    auto kernel = reduce_kernel;
    if constexpr (!costly_combine<Problem>) kernel = reduces(P) ? reduce_kernel : scan_kernel;
    return launch_cooperative(kernel, tiles, threads, 0, be, P, op, totals, per_sequence);
  }
};

/// Grid bulk tiles (agent/grid_bulk_tiles.cuh) of `shape` (a bulk_shape_of): one block per
/// tile, staged in shared memory, launched cooperatively, every block resident. Workspace: a
/// total per tile. Contiguous, 16-byte aligned sequences on sm_90 only (takes).
template <class shape, class Problem, class Op>
struct grid_bulk_tiles_of {
  static constexpr int threads = shape::warps * warp_threads;
  static constexpr auto scan_kernel = [] {
    if constexpr (has_bulk_tiles<Problem>)
      return grid_bulk_tiles_kernel<true, shape::warps, shape::chunks, shape::min_blocks, Problem, Op>;
    else
      return nullptr;
  }();
  static constexpr auto reduce_kernel =
      grid_bulk_tiles_kernel<false, shape::warps, shape::chunks, shape::min_blocks, Problem, Op>;

  static bool reduces(const Problem& P) { return P.reduce_only(); }
  /// Whether this call's sequences can be staged by bulk copies and the kernel runs here. Reduces
  /// only of elements that divide 16 bytes: a 12-byte struct's reduce measured 6–11% slower so
  /// than on its other paths (H200, bench_scan, 2^18–2^21 steps).
  static bool takes(const Problem& P, const device_facts& dev) {
    if (reduces(P))
      return 16 % sizeof(typename Problem::bulk_element) == 0 && P.stages_bulk_input() &&
             built_for_bulk_copies<reduce_kernel>(dev.device);
    if constexpr (has_bulk_tiles<Problem>) return P.stages_bulk() && built_for_bulk_copies<scan_kernel>(dev.device);
    return false;
  }
  static index_t tiles_per_sequence(const Problem& P) { return (P.length + shape::tile - 1) / shape::tile; }
  /// Whether `sequences` sequences' tiles are all resident at once.
  static bool fits(const Problem& P, index_t sequences, const device_facts& dev) {
    const index_t tiles = sequences * tiles_per_sequence(P);  // sequences < resident warps: no overflow
    int per_sm = 0;
    if (reduces(P)) {
      prefer_shared_memory<reduce_kernel>();
      per_sm = blocks_per_multiprocessor<reduce_kernel>(threads, dev.device, shape::smem);
    } else if constexpr (has_bulk_tiles<Problem>) {
      prefer_shared_memory<scan_kernel>();
      per_sm = blocks_per_multiprocessor<scan_kernel>(threads, dev.device, shape::smem);
    }
    return per_sm > 0 && tiles <= static_cast<index_t>(per_sm) * dev.multiprocessors;
  }
  static status launch(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
    const index_t per_sequence = tiles_per_sequence(P), tiles = sequences * per_sequence;
    workspace_lease ws(be);
    if (status s = ws.acquire(static_cast<std::size_t>(tiles) * sizeof(typename Problem::acc_type));
        s != status::success)
      return s;
    auto* const totals = static_cast<typename Problem::acc_type*>(ws.get());
    if (reduces(P))
      return launch_cooperative(reduce_kernel, tiles, threads, shape::smem, be, P, op, totals, per_sequence);
    if constexpr (has_bulk_tiles<Problem>)
      return launch_cooperative(scan_kernel, tiles, threads, shape::smem, be, P, op, totals, per_sequence);
    return status::unsupported;  // unreachable: takes() refused
  }
};

/// The three grid tile shapes of `shape`: its own small one (scan_workspace_bytes counts its
/// tiles, the most), the same runs on twice the warps, and the chained tile.
template <class shape, class Problem, class Op>
using small_grid_tiles = grid_tiles_of<shape::grid_warps, shape::grid_chunks, Problem, Op>;
template <class shape, class Problem, class Op>
using middle_grid_tiles = grid_tiles_of<2 * shape::grid_warps, shape::grid_chunks, Problem, Op>;
template <class shape, class Problem, class Op>
using large_grid_tiles = grid_tiles_of<shape::chained_warps, shape::chunks, Problem, Op>;

/// A reduce of costly combines (agent/thread_span_reduce.cuh): each thread folds one contiguous
/// span in order, one partial per block; the second pass as launch_reduce's.
template <class Problem, class Op>
status launch_thread_span_reduce(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  using Acc = typename Problem::acc_type;
  const index_t span_steps = thread_span_steps(P.length, Problem::run);
  const index_t spans_per_sequence = (P.length + span_steps - 1) / span_steps;
  const index_t blocks_per_sequence = (spans_per_sequence + thread_span_block - 1) / thread_span_block;
  index_t blocks;
  if (__builtin_mul_overflow(sequences, blocks_per_sequence, &blocks) || blocks > max_grid || sequences > max_grid)
    return status::exceeds_device_limits;
  workspace_lease ws(be);
  if (status s = ws.acquire(static_cast<std::size_t>(blocks) * sizeof(Acc)); s != status::success) return s;
  Acc* partials = static_cast<Acc*>(ws.get());
  constexpr auto first_pass =
      reduce_thread_spans_kernel<thread_span_block, thread_span_ahead, thread_span_min_blocks<Acc>, Problem, Op>;
  if (status s = launch(first_pass, blocks, thread_span_block, 0, be, P, op, partials, span_steps, blocks_per_sequence);
      s != status::success)
    return s;
  return launch(reduce_partials_kernel<thread_span_block, Problem, Op>, sequences, thread_span_block, 0, be, P, op,
                static_cast<const Acc*>(partials), blocks_per_sequence);
}

/// A scan of costly combines (agent/thread_span_scan.cuh): the three passes over thread spans.
template <class Problem, class Op>
status launch_thread_span_scan(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  using Acc = typename Problem::acc_type;
  thread_span_scan_plan<Acc> plan;
  if (!plan.of(sequences, P.length, Problem::run)) return status::exceeds_device_limits;
  workspace_lease ws(be);
  if (status s = ws.acquire(plan.bytes()); s != status::success) return s;
  char* base = static_cast<char*>(ws.get());
  Acc* prefixes = reinterpret_cast<Acc*>(base);
  Acc* totals = reinterpret_cast<Acc*>(base + plan.prefixes_bytes());
  auto* carries = reinterpret_cast<maybe<Acc>*>(base + plan.prefixes_bytes() + plan.totals_bytes());
  constexpr int min_blocks = thread_span_min_blocks<Acc>;
  if (status s = launch(scan_thread_span_totals_kernel<thread_span_block, min_blocks, Problem, Op>, plan.blocks,
                        thread_span_block, 0, be, P, op, prefixes, totals, plan.span_steps, plan.blocks_per_sequence);
      s != status::success)
    return s;
  if (status s = launch(scan_thread_span_carries_kernel<thread_span_block, Problem, Op>, sequences, thread_span_block,
                        0, be, P, op, static_cast<const Acc*>(totals), carries, plan.blocks_per_sequence);
      s != status::success)
    return s;
  const auto walk = [&](auto kernel) {
    return launch(kernel, plan.blocks, thread_span_block, 0, be, P, op, static_cast<const Acc*>(prefixes),
                  static_cast<const maybe<Acc>*>(carries), plan.span_steps, plan.blocks_per_sequence);
  };
  if constexpr (Problem::run == 1 && has_bulk_tiles<Problem>) {
    if (P.stages_bulk()) return walk(scan_thread_spans_kernel<thread_span_block, min_blocks, true, Problem, Op>);
  }
  return walk(scan_thread_spans_kernel<thread_span_block, min_blocks, false, Problem, Op>);
}

/// Runs a validated Problem over `sequences` sequences of P.length steps with tile shape
/// `shape` (tile_shape<Problem> unless a benchmark asks for another).
template <class shape, class Problem, class Op>
status dispatch_with(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  if (sequences == 0) return status::success;
  if (P.length == 0) {
    const index_t blocks = (sequences + 255) / 256;
    return launch(empty_sequences_kernel<Problem>, blocks < 65535 ? blocks : 65535, 256, 0, be, P, sequences);
  }
  const device_facts dev = current_device();
  if (dev.st != status::success) return dev.st;
  if (P.lane_major) {
    if constexpr (has_staged_lanes<Problem>) {
      if (P.stages_lanes()) return launch_staged_lane_tiles<staged_lane_shape<Problem>>(P, op, sequences, be);
    }
    return launch_lane_tiles<shape>(P, op, sequences, be);
  }

  // Enough sequences to give every resident warp its own: warps loop over whole sequences.
  // (Resident warps of the unstaged loop: the staged one holds as many or fewer.)
  constexpr auto plain_loop = scan_warp_loop_kernel<shape::loop_warps, shape::chunks, Problem, Op>;
  const index_t resident_warps = static_cast<index_t>(blocks_per_multiprocessor<plain_loop>(shape::loop_warps * 32, dev.device)) *
                                 shape::loop_warps * dev.multiprocessors;
  const index_t tiles_per_sequence = (P.length + shape::chained_tile - 1) / shape::chained_tile;
  const auto warp_loop = [&] {
    using short_shape = short_tile_shape<Problem>;
    // Sequences longer than the short shapes' tile, of one element type in 16-byte accesses: a
    // warp each, straight into registers (the float sum batch of 8192 × 4096: see
    // docs/performance.md, "Batches in whole 16-byte accesses").
    if constexpr (has_vector_path<Problem>) {
      if (P.length > short_shape::loop_tile && P.takes_vectors()) {
        const segment_vectors<typename Problem::acc_type> V{P.in,   P.out,      P.carry_in, P.carry_out,
                                                            P.init, P.has_init, P.exclusive, P.reverse};
        return launch_segment_vectors(V, op, batch_sequence_places{P.in_layout, P.out_layout, P.length}, sequences,
                                      be);
      }
    }
    if constexpr (shape::per_lane > short_shape::per_lane) {
      // Sequences of at most 16 runs two to a warp, of at most 32 one (segment tiles); without
      // staging, one to a warp in the warp loop's short shape.
      if constexpr (shape::staged) {
        if (P.length <= tile_steps<Problem, 1, 1, warp_threads / 2>)
          return launch_segment_tiles<warp_threads / 2>(P, op, sequences, dev, be);
        if (P.length <= short_shape::loop_tile) return launch_segment_tiles<warp_threads>(P, op, sequences, dev, be);
      } else {
        if (P.length <= short_shape::loop_tile) return launch_warp_loop<short_shape>(P, op, sequences, be);
      }
    }
    return launch_warp_loop<shape>(P, op, sequences, be);
  };
  if (sequences >= resident_warps) return warp_loop();
  if constexpr (can_reduce_only<Problem> && costly_combine<Problem>) {
    if (P.reduce_only()) return launch_thread_span_reduce(P, op, sequences, be);
    if (P.length >= thread_span_scan_min_length) return launch_thread_span_scan(P, op, sequences, be);
  }
  // Grid tiles for inputs of at most shape::grid_tiles tiles of the small shape; past it, from
  // grid_bulk_min_bytes, grid bulk tiles where the sequences stage whole and every tile fits on
  // the device at once (grid_bulk_tiles_of); or else grid tiles of twice as many of the middle
  // shape, or as many of the large one, that all fit at once (grid_tiles_of::fits); sequences of
  // one chained tile only while there are no more of them than SMs (each one's block then has an
  // SM that would idle; many one-tile sequences keep a warp each). The recurrences' Problems keep
  // their paths (see grid_tiles_take).
  if constexpr (shape::grid_tiles > 0 && grid_tiles_take<Problem>) {
    if (tiles_per_sequence > 1 || sequences <= dev.multiprocessors) {
      using small = small_grid_tiles<shape, Problem, Op>;
      using middle = middle_grid_tiles<shape, Problem, Op>;
      using large = large_grid_tiles<shape, Problem, Op>;
      if (small::fits(P, sequences, shape::grid_tiles, dev)) return small::launch(P, op, sequences, be);
      if constexpr (shape::bulk_reduce && has_bulk_input<Problem> && !costly_combine<Problem>) {
        using small_bulk = grid_bulk_tiles_of<small_grid_bulk_shape<Problem>, Problem, Op>;
        using large_bulk = grid_bulk_tiles_of<large_grid_bulk_shape<Problem>, Problem, Op>;
        const std::size_t bytes = static_cast<std::size_t>(sequences) * static_cast<std::size_t>(P.length) *
                                  Problem::bulk_tensors * sizeof(typename Problem::bulk_element);
        if (bytes >= grid_bulk_min_bytes && small_bulk::takes(P, dev)) {
          if (small_bulk::fits(P, sequences, dev)) return small_bulk::launch(P, op, sequences, be);
          if (!small_bulk::reduces(P) && large_bulk::fits(P, sequences, dev))
            return large_bulk::launch(P, op, sequences, be);
        }
      }
      if (middle::fits(P, sequences, 2 * shape::grid_tiles, dev)) return middle::launch(P, op, sequences, be);
      if (large::fits(P, sequences, shape::grid_tiles, dev)) return large::launch(P, op, sequences, be);
    }
  }
  if (tiles_per_sequence == 1) return warp_loop();
  if constexpr (can_reduce_only<Problem>) {
    if (P.reduce_only()) {
      if constexpr (shape::bulk_reduce) {
        if constexpr (takes_tile_blocks<Problem, Op>) {
          // The fold starts early where griddepcontrol exists (sm_90, a kernel built for it). The
          // in-order kernel takes inputs of two tiles an SM or more, or any where the bulk reduce
          // is not built: with fewer, its one wave measured slower than the bulk reduce's single
          // cooperative launch (H200, bench_scan, affine<float> at 2^20, 128 tiles: 1.24 of CUB's
          // time against 0.82).
          constexpr index_t tile = tile_blocks_plan<Problem>::tile;
          index_t tiles = 0;
          const bool takes = swaps_operands<Op, typename Problem::acc_type> ||
                             __builtin_mul_overflow(sequences, (P.length + tile - 1) / tile, &tiles) ||
                             tiles >= 2 * static_cast<index_t>(dev.multiprocessors) ||
                             !built_for_bulk_copies<bulk_reduce_kernel<Problem, Op>>(dev.device);
          if (takes && P.stages_bulk_input())
            return launch_tile_blocks_reduce(P, op, sequences, dev, be,
                                             built_for_bulk_copies<tile_blocks_fold_kernel<Problem, Op>>(dev.device));
        }
        if (P.stages_bulk_input() && built_for_bulk_copies<bulk_reduce_kernel<Problem, Op>>(dev.device))
          return launch_bulk_reduce(P, op, sequences, dev, be);
      }
      return launch_reduce<shape>(P, op, sequences, tiles_per_sequence, be);
    }
  }
  if constexpr (shape::bulk_tiles && has_bulk_tiles<Problem>) {  // (a shape may be another Problem's)
    if (P.stages_bulk() && built_for_bulk_copies<bulk_tiles_kernel<Problem, Op>>(dev.device))
      return launch_bulk_tiles(P, op, sequences, dev, be);
  }
  if constexpr (shape::window_chain && shape::chained_stages == 0)
    return launch_window_chain<shape>(P, op, sequences, tiles_per_sequence, be);
  else return launch_persistent_chained<shape>(P, op, sequences, tiles_per_sequence, dev, be);
}

/// Runs a validated Problem with the library's tile shape, or with `shape` when given.
template <class shape = void, class Problem, class Op>
status dispatch_scan(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  if constexpr (std::is_void_v<shape>) return dispatch_with<tile_shape<Problem>>(P, op, sequences, be);
  else return dispatch_with<shape>(P, op, sequences, be);
}

}  // namespace parscan::cuda_detail
