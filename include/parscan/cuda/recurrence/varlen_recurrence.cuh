// parscan/cuda/recurrence/varlen_recurrence.cuh — the gated recurrence over packed
// variable-length sequences (cu_seqlens). Each kernel narrows the forward or backward Problem
// of recurrence_problems.cuh (or its lane packs, recurrence_lane_packs.cuh) to one sequence
// (sequence_of), so the step arithmetic (gates, log gates, conjugates, da from x[prev] or x0)
// is the code the fixed-length kernels run, and nothing passes between sequences:
//   * time-contiguous (D, total_T): one warp per (sequence, channel), the warp loop's scan of a
//     whole sequence with its next tiles staged (agent/warp_loop.cuh), through head pads
//     (recurrence_head_pads.cuh) for real types: a sequence starts wherever cu_seqlens puts
//     it, mostly off a 16-byte boundary, and its runs could not be staged whole;
//   * channel-last (total_T, D), D ≥ 32, in lane packs: the staged lane tiles of the batch
//     (agent/staged_lane_tiles.cuh) over a packed tile plan (packed_lane_tiles below): every
//     sequence's tiles on one persistent grid, so that long and short sequences share the
//     device evenly and a tile's sequences are whole 32·K-channel groups of one sequence;
//   * channel-last otherwise (and the float forward, which is faster so): one block per
//     (sequence, 32 channels), lane tiles (block/lane_tile_scan.cuh) walked in order with each
//     lane's running value, the lane loop;
//   * any other strides: one thread per (sequence, channel), step by step.
// The batch's agents otherwise take one length for every sequence of a launch (Problem::length)
// and size their tile states from it; the loops need neither. Where the lane loop's grid takes
// more than one wave, its blocks take the sequences longest first (lane_loop_order), so that the
// grid's last blocks hold the shortest jobs.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../../layout.hpp"
#include "../../recurrence.hpp"
#include "../agent/lane_loop.cuh"
#include "../agent/staged_lane_tiles.cuh"
#include "../agent/warp_loop.cuh"
#include "../device/dispatch_scan.cuh"
#include "../device/longest_first.cuh"
#include "../runtime.cuh"
#include "../thread/step_scan.cuh"
#include "recurrence_head_pads.cuh"
#include "recurrence_lane_packs.cuh"
#include "recurrence_problems.cuh"

namespace parscan::cuda_detail {

/// Threads per block of the step-by-step kernel (layouts neither loop covers).
constexpr int varlen_block_threads = 256;

/// The grid of a packed launch: at most 2^20 blocks, whose grid-stride loops take the rest.
inline index_t varlen_grid(index_t blocks) {
  constexpr index_t most = index_t(1) << 20;
  return blocks < most ? blocks : most;
}

/// Sequence n of a packed Problem: its steps [start, start + length), its states at n·D.
/// Channel d of the result is channel d of sequence n, at step 0 of the sequence.
template <class T>
__device__ PARSCAN_INLINE recurrence_forward_problem<T> sequence_of(recurrence_forward_problem<T> P, index_t n,
                                                                    index_t start, index_t length, index_t channels) {
  P.a += start * P.la.step_stride;
  P.b += start * P.lb.step_stride;
  P.x += start * P.lx.step_stride;
  if (P.x0) P.x0 += n * channels;
  if (P.x_final) P.x_final += n * channels;
  P.la.length = P.lb.length = P.lx.length = P.length = length;
  return P;
}

template <class T>
__device__ PARSCAN_INLINE recurrence_backward_problem<T> sequence_of(recurrence_backward_problem<T> P, index_t n,
                                                                     index_t start, index_t length, index_t channels) {
  P.a += start * P.la.step_stride;
  P.x += start * P.lx.step_stride;
  P.dx += start * P.ldx.step_stride;
  P.da += start * P.lda.step_stride;
  P.db += start * P.ldb.step_stride;
  if (P.x0) P.x0 += n * channels;
  if (P.dx_final) P.dx_final += n * channels;
  if (P.dx0) P.dx0 += n * channels;
  P.la.length = P.lx.length = P.ldx.length = P.lda.length = P.ldb.length = P.length = length;
  return P;
}

/// The same for a lane-pack Problem: its one-channel Problem narrowed, packed again.
template <class Lanes, class = std::void_t<typename Lanes::base_type>>
__device__ PARSCAN_INLINE Lanes sequence_of(const Lanes& P, index_t n, index_t start, index_t length,
                                           index_t channels) {
  return Lanes(sequence_of(P.base, n, start, length, channels));
}

/// The tile plan of packed sequences for the staged lane tiles (agent/staged_lane_tiles.cuh).
/// A tile is a window of Tile steps of 32 lanes (32·K channels) of one sequence. Sequence n
/// owns the tile slots [G·slot(n), G·slot(n+1)) with slot(n) = ⌊cu_seqlens[n] / Tile⌋ + n and
/// G lane groups, in time-major order within the sequence (window k of every group, then
/// window k + 1). slot(n+1) − slot(n) is ⌈length/Tile⌉ windows or one more, so the slot count
/// is known on the host from the total length, and at most one slot per (sequence, group) is
/// left unused. A sequence of no steps has one slot per group, which writes its carry out. The
/// tile state of (sequence, group) is its own run of slots, so each chain's windows sit one
/// after another as the look-back wants.
///
/// Before the scan, a kernel writes each slot's sequence, window and group into a table
/// (packed_lane_slots_kernel: a binary search of the offsets a slot), so that a visit is one
/// 32-byte load. (The kernel's roles had each kept a cursor over the offsets instead, stepped
/// a grid of slots a visit and searching the offsets when it left a sequence: ncu of the bf16
/// forward of bench_varlen's random lengths on an H100 at c49ff7d gave it the batch's issue
/// rate and stalls, but 11% more instructions and 2.9 M local-memory spill requests against
/// the batch's 528, at 90% of the batch's speed.)
struct packed_lane_slot {
  std::int64_t start, end;  // the sequence's steps
  int n, k, g, unused;      // sequence, window, lane group
};
static_assert(sizeof(packed_lane_slot) == 32, "a slot is two 16-byte loads");

template <index_t Tile>
struct packed_lane_tiles {
  const std::int64_t* offsets;    // cu_seqlens, N + 1
  const packed_lane_slot* slots;  // the slot table, `capacity` entries
  index_t sequences;              // N
  index_t channels;               // D: sequence n's states start at n·D
  index_t lanes;                  // lanes of a sequence: D / K
  index_t groups;                 // G = ⌈lanes / 32⌉
  index_t capacity;               // slots the workspace holds (from the total length)

  __device__ PARSCAN_INLINE static index_t slots_before(index_t groups, index_t m, index_t offset) {
    return groups * (offset / Tile + m);
  }
  __device__ PARSCAN_INLINE index_t tiles() const {
    const index_t all = slots_before(groups, sequences, offsets[sequences]);
    return all < capacity ? all : capacity;  // offsets past total_length break the contract; stay inside
  }
  template <int Warps, int Steps, class Problem, class F>
  __device__ PARSCAN_INLINE void visit(const Problem& P, index_t t, F&& f) const {
    const packed_lane_slot e = slots[t];
    const index_t length = e.end - e.start;
    const index_t span = e.end / Tile - e.start / Tile + 1;  // slots per group
    lane_tile_place p =
        place_lane_tile<Warps, Steps>(e.g, e.k, lanes, length, slots_before(groups, e.n, e.start) + e.g * span);
    p.exists = e.k >= 0 && e.g >= 0 && e.k < (length + Tile - 1) / Tile;  // (negative: broken offsets)
    p.empty_sequence = length == 0 && e.k == 0;
    if (!p.exists) p.n = 0;
    f(sequence_of(P, e.n, e.start, length, channels), p);
  }
};

/// Writes the slot table of a packed plan: slot t belongs to the last sequence m whose slots
/// start at or before t (offsets that break the contract still give a sequence in [0, N)).
template <index_t Tile>
__global__ void packed_lane_slots_kernel(const std::int64_t* offsets, index_t sequences, index_t groups,
                                         index_t capacity, packed_lane_slot* slots) {
  using plan = packed_lane_tiles<Tile>;
  const index_t stride = static_cast<index_t>(gridDim.x) * blockDim.x;
  for (index_t t = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < capacity; t += stride) {
    index_t lo = 0, hi = sequences - 1;
    while (lo < hi) {
      const index_t mid = lo + (hi - lo + 1) / 2;
      if (plan::slots_before(groups, mid, offsets[mid]) <= t) lo = mid;
      else hi = mid - 1;
    }
    const std::int64_t start = offsets[lo];
    const index_t r = t - plan::slots_before(groups, lo, start), k = r / groups;
    slots[t] = packed_lane_slot{start, offsets[lo + 1], static_cast<int>(lo), static_cast<int>(k),
                                static_cast<int>(r - k * groups), 0};
  }
}

/// Slots of the packed tile plan for `sequences` sequences of `total_length` steps in all:
/// G·(⌊total_length / tile⌋ + N). False if that overflows, or if a slot's sequence, window or
/// group would not fit the table's 32-bit fields.
inline bool packed_lane_capacity(index_t lanes, index_t total_length, index_t sequences, index_t tile,
                                 index_t& capacity) {
  constexpr index_t most = 0x7fffffff;
  const index_t groups = (lanes + warp_threads - 1) / warp_threads;
  return sequences <= most && total_length / tile + 1 <= most && groups <= most &&
         !__builtin_mul_overflow(groups, total_length / tile + sequences, &capacity);
}

/// Bytes of the slot table of `capacity` slots (whole 256-byte pieces, so that the tile state
/// after it keeps its alignment).
inline std::size_t packed_lane_table_bytes(index_t capacity) {
  return (static_cast<std::size_t>(capacity) * sizeof(packed_lane_slot) + 255) / 256 * 256;
}

/// Workspace bytes of the packed staged lane tiles of Problem (a lane-pack Problem): the slot
/// table, then the tile state.
template <class Problem>
std::size_t packed_lane_workspace_bytes(index_t lanes, index_t total_length, index_t sequences) {
  index_t capacity;
  if (lanes <= 0 || sequences <= 0 ||
      !packed_lane_capacity(lanes, total_length, sequences, staged_lane_shape<Problem>::lane_tile, capacity))
    return 0;
  return packed_lane_table_bytes(capacity) + tile_state<typename Problem::acc_type, warp_threads>::bytes(capacity) +
         256;
}

/// Runs a lane-pack Problem over the whole packed tensor (Problem::length = total_length) as
/// staged lane tiles of each sequence's `lanes` lanes: the slot table, then the scan.
template <class Problem, class Op>
status dispatch_packed_lane_tiles(const Problem& P, const Op& op, const std::int64_t* cu_seqlens, index_t sequences,
                                  index_t channels, index_t lanes, const cuda_backend& be) {
  using shape = staged_lane_shape<Problem>;
  if (sequences == 0 || lanes == 0) return status::success;
  index_t capacity;
  if (!packed_lane_capacity(lanes, P.length, sequences, shape::lane_tile, capacity) || capacity > max_grid)
    return status::exceeds_device_limits;
  const std::size_t table_bytes = packed_lane_table_bytes(capacity);
  const std::size_t bytes = packed_lane_workspace_bytes<Problem>(lanes, P.length, sequences);
  workspace_lease ws(be);
  if (status st = ws.acquire(bytes); st != status::success) return st;
  auto* slots = static_cast<packed_lane_slot*>(ws.get());
  const index_t groups = (lanes + warp_threads - 1) / warp_threads;
  constexpr int threads = 256;
  const index_t blocks = (capacity + threads - 1) / threads;
  if (status st = launch(packed_lane_slots_kernel<shape::lane_tile>, blocks < 65535 ? blocks : 65535, threads, 0, be,
                         cu_seqlens, sequences, groups, capacity, slots);
      st != status::success)
    return st;
  const packed_lane_tiles<shape::lane_tile> plan{cu_seqlens, slots, sequences, channels, lanes, groups, capacity};
  return launch_staged_lane_plan<shape>(P, op, plan, capacity, backend_after(be, ws, table_bytes, bytes));
}

/// Strides neither loop covers: one thread per (sequence, channel), step by step. Problem's
/// `length` and layouts describe the whole packed tensor (D channels × total_T); each thread
/// narrows it to its sequence. Every Problem here has a carry in (initial() always has a
/// value), so the total is always there to finish with.
template <class Problem, class Op>
__global__ void __launch_bounds__(varlen_block_threads)
    varlen_recurrence_kernel(Problem P, Op op, const std::int64_t* cu_seqlens, index_t sequences, index_t channels) {
  const index_t jobs = sequences * channels;
  const index_t stride = static_cast<index_t>(gridDim.x) * varlen_block_threads;
  for (index_t i = static_cast<index_t>(blockIdx.x) * varlen_block_threads + threadIdx.x; i < jobs; i += stride) {
    const index_t n = i / channels, d = i - n * channels;
    const index_t start = cu_seqlens[n];
    const Problem Q = sequence_of(P, n, start, cu_seqlens[n + 1] - start, channels);
    auto running = Q.initial(d);  // always present
    scan_steps_in_thread(Q, op, Q.at(d), 0, Q.length, running);
    Q.finish(d, running.value);
  }
}

/// Whether the warp loop runs a Problem through head pads: the gated recurrence's Problems of
/// real types with runs of several steps (its compute type C). The log-space Problems have no
/// pads and load a run step by step where it is not aligned.
template <class Problem, class = void>
constexpr bool varlen_head_pads = false;
template <class Problem>
constexpr bool varlen_head_pads<Problem, std::void_t<typename Problem::C>> =
    Problem::run > 1 && std::is_floating_point_v<typename Problem::C>;

/// The warp loop's job numbers and sequence lengths: 32-bit for the gated forward where a
/// launch's jobs and every length fit (varlen_narrow_jobs), else 64-bit. A fixed-length batch
/// reads its length from the launch's constant bank, and ptxas folds what derives from it (the
/// padded length, the tile count, the reversed step) into operands; a packed sequence's length
/// comes from memory, and with 64-bit numbers each of those values held a register pair: the
/// float forward at 114 registers, four 4-warp blocks an SM, against the batch loop's 96 and
/// five. In 32 bits it takes 96 and five (bench_varlen on an H200: the random-length forward
/// 0.6–1.7% faster, docs/performance.md). The backward stays 64-bit: its float loop took 142
/// registers in 32 bits against 128, and ran 1.6–2.3% slower.
template <class Problem>
constexpr bool varlen_narrow_takes = false;
template <class T>
constexpr bool varlen_narrow_takes<recurrence_forward_problem<T>> = true;

/// Whether 32-bit job numbers and lengths hold every job and sequence of a launch: a warp's
/// next job number stays below 2^31 (varlen_grid's 2^20 blocks hold at most 2^25 warps), and
/// no sequence is longer than the packed tensor.
inline bool varlen_narrow_jobs(index_t jobs, index_t total_length) {
  return jobs <= (index_t(1) << 31) - (index_t(1) << 25) && total_length <= 0xffffffffLL;
}

/// A sequence's length from its offsets, as the Job type holds it (see varlen_narrow_takes).
template <class Job>
__device__ PARSCAN_INLINE index_t varlen_length(std::int64_t span) {
  if constexpr (sizeof(Job) == 4) return static_cast<std::uint32_t>(span);  // < 2^32: varlen_narrow_jobs
  else return span;
}

/// Time-contiguous: warp w of the grid takes (sequence, channel) pairs w, w + all warps, ...,
/// each with its next Stages-1 tiles in flight (staging_ring), as the batched warp loop.
template <int Warps, int Chunks, int Stages, class Job, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    varlen_warp_loop_kernel(Problem P, Op op, const std::int64_t* cu_seqlens, index_t sequences, index_t channels) {
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  const index_t jobs = sequences * channels;
  const index_t all_warps = static_cast<index_t>(gridDim.x) * Warps;
  for (index_t i = static_cast<index_t>(blockIdx.x) * Warps + threadIdx.x / warp_threads; i < jobs; i += all_warps) {
    // (The loop's own number stays 64-bit: a 32-bit one took the float forward back to a spill.)
    const Job job = static_cast<Job>(i), width = static_cast<Job>(channels), n = job / width, d = job - n * width;
    const std::int64_t start = cu_seqlens[n];
    const Problem Q = sequence_of(P, n, start, varlen_length<Job>(cu_seqlens[n + 1] - start), channels);
    if (Q.length == 0) {
      if (lane_id() == 0) Q.finish(d, Q.initial(d).value);
    } else if constexpr (varlen_head_pads<Problem>) {
      using padded = head_padded<Problem>;
      const padded R(Q);
      scan_sequence_in_warp_staged<Chunks, Stages>(R, op, d, staging_ring<Warps, Chunks, Stages, padded>{dynamic_smem},
                                                   R.initial(d));
    } else {
      scan_sequence_in_warp_staged<Chunks, Stages>(Q, op, d, staging_ring<Warps, Chunks, Stages, Problem>{dynamic_smem},
                                                   Q.initial(d));
    }
  }
}

/// Launches the warp loop with Job numbers over the packed Problem's sequences × channels jobs.
template <class Job, class Problem, class Op>
status launch_varlen_warp_loop(const Problem& P, const Op& op, const std::int64_t* cu_seqlens, index_t sequences,
                               index_t channels, const cuda_backend& be) {
  using shape = tile_shape<Problem>;
  constexpr int warps = shape::loop_warps, stages = shape::loop_stages > 0 ? shape::loop_stages : 2;  // they stage
  constexpr auto kernel = varlen_warp_loop_kernel<warps, shape::chunks, stages, Job, Problem, Op>;
  constexpr int smem = staging_ring<warps, shape::chunks, stages, Problem>::bytes;
  const device_facts dev = current_device();
  if (dev.st != status::success) return dev.st;
  if (blocks_per_multiprocessor<kernel>(warps * warp_threads, dev.device, smem) <= 0)
    return status::exceeds_device_limits;
  return launch(kernel, varlen_grid((sequences * channels + warps - 1) / warps), warps * warp_threads, smem, be, P, op,
                cu_seqlens, sequences, channels);
}

/// Blocks per multiprocessor that the packed lane loop asks registers for: three for a
/// lane-pack Problem, as the batch's lane loop gets at 72 registers (the packed one took 87
/// and ran two: the float forward at 83% of copy against the batch's 93%), none otherwise.
template <class Problem, class = void>
constexpr int varlen_lane_loop_blocks = 1;
template <class Problem>
constexpr int varlen_lane_loop_blocks<Problem, std::void_t<typename Problem::base_type>> = 3;

/// Channel-last: block b takes (sequence, group of 32 lanes) pairs b, b + grid, ... through
/// the lane loop (agent/lane_loop.cuh). A lane is a channel, or a pack of K for a lane-pack
/// Problem (`lanes` = D / K).
template <int Warps, int Steps, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads, varlen_lane_loop_blocks<Problem>)
    varlen_lane_loop_kernel(Problem P, Op op, const std::int64_t* cu_seqlens, const index_t* order, index_t sequences,
                            index_t channels, index_t lanes) {
  __shared__ lane_tile_smem<typename Problem::acc_type, Warps> sm;
  const index_t groups = (lanes + warp_threads - 1) / warp_threads;
  for (index_t job = blockIdx.x; job < sequences * groups; job += gridDim.x) {
    const index_t q = job / groups, g = job - q * groups, n = sequence_at(order, q);
    const index_t start = cu_seqlens[n];
    scan_lane_group_in_block<Warps, Steps>(sequence_of(P, n, start, cu_seqlens[n + 1] - start, channels), op, lanes, g,
                                           sm);
  }
}

/// The order in which the packed lane loop's blocks take their sequences: longest first
/// (device/longest_first.cuh) where the grid takes more than one wave of the device, so that the
/// last blocks to start hold the shortest jobs. A block owns a whole (sequence, 32 lanes) job,
/// so in index order a long sequence late in the batch ran alone at the end: bench_varlen's
/// random lengths, float forward, 85% of the equal-length batch in index order, 95–96% longest
/// first (H100). The warp loop's jobs are a channel each, many waves of them; there longest first
/// was slower (its forwards 95–97% → 90–91% of the batch: the short jobs, latency-bound, all
/// ran together at the end), so it keeps the index order. Where every block starts at once the
/// order changes nothing and nothing is sorted: get() is null, the index order. The workspace
/// holds the order until the loop's launch is queued behind the sort.
class lane_loop_order {
 public:
  explicit lane_loop_order(const cuda_backend& be) : be_(be), ws_(be) {}

  template <auto Kernel>
  status plan(index_t blocks, int threads, int smem, const std::int64_t* cu_seqlens, index_t sequences,
              index_t total_length) {
    const device_facts dev = current_device();
    if (dev.st != status::success) return dev.st;
    const index_t wave =
        static_cast<index_t>(blocks_per_multiprocessor<Kernel>(threads, dev.device, smem)) * dev.multiprocessors;
    if (blocks <= wave) return status::success;
    const std::size_t bytes = longest_first_bytes(sequences, total_length);  // CUB's size query: only where it sorts
    if (bytes == 0) return status::success;
    if (status st = ws_.acquire(bytes); st != status::success) return st;
    return longest_first(cu_seqlens, sequences, total_length, ws_.get(), be_.stream, order_);
  }
  const index_t* get() const { return order_; }

 private:
  const cuda_backend& be_;
  workspace_lease ws_;
  const index_t* order_ = nullptr;
};

/// Workspace bytes of dispatch_varlen's loops for a packed shape: the lane loop's order of the
/// sequences (sorted where its grid takes more than one wave) unless every tensor is
/// time-contiguous, where the warp loop needs none. An upper bound for strided layouts.
inline std::size_t varlen_order_bytes(const varlen_shape& s) {
  return s.layout == recurrence_layout::time_contiguous ? 0 : longest_first_bytes(s.sequences, s.total_length);
}

/// The lane loop over packed sequences of `lanes` lanes each (the launch of dispatch_varlen's
/// channel-last case, for a Problem of either kind).
template <class Problem, class Op>
status launch_varlen_lane_loop(const Problem& P, const Op& op, const std::int64_t* cu_seqlens, index_t sequences,
                               index_t channels, index_t lanes, const cuda_backend& be) {
  const index_t jobs = sequences * ((lanes + warp_threads - 1) / warp_threads);
  if (jobs == 0) return status::success;
  constexpr auto kernel = varlen_lane_loop_kernel<lane_loop_warps, lane_loop_steps, Problem, Op>;
  constexpr int threads = lane_loop_warps * warp_threads;
  lane_loop_order order(be);
  if (status st = order.plan<kernel>(varlen_grid(jobs), threads, 0, cu_seqlens, sequences, P.length);
      st != status::success)
    return st;
  return launch(kernel, varlen_grid(jobs), threads, 0, be, P, op, cu_seqlens, order.get(), sequences, channels, lanes);
}

/// How dispatch_varlen covers a Problem: all of its tensors time-contiguous, all lane-major
/// (channel-last with D ≥ 32), or neither.
enum class varlen_cover { warp_loop, lane_loop, threads };
template <std::size_t N>
inline varlen_cover varlen_cover_for(const sequence_layout* const (&tensors)[N]) {
  bool steps = true, lanes = true;
  for (const sequence_layout* l : tensors) steps &= l->step_stride == 1, lanes &= is_lane_major(*l);
  return steps ? varlen_cover::warp_loop : lanes ? varlen_cover::lane_loop : varlen_cover::threads;
}
template <class T>
inline varlen_cover varlen_cover_of(const recurrence_forward_problem<T>& P) {
  const sequence_layout* all[] = {&P.la, &P.lb, &P.lx};
  return varlen_cover_for(all);
}
template <class T>
inline varlen_cover varlen_cover_of(const recurrence_backward_problem<T>& P) {
  const sequence_layout* all[] = {&P.la, &P.lx, &P.ldx, &P.lda, &P.ldb};
  return varlen_cover_for(all);
}

/// Launches the kernel that suits the layout over N·D (sequence, channel) pairs; grid-stride
/// loops cover any count.
template <class Problem, class Op>
status dispatch_varlen(const Problem& P, Op op, const std::int64_t* cu_seqlens, index_t sequences, index_t channels,
                       const cuda_backend& be) {
  const index_t jobs = sequences * channels;
  if (jobs == 0) return status::success;
  switch (varlen_cover_of(P)) {
    case varlen_cover::warp_loop: {
      if constexpr (varlen_narrow_takes<Problem>)
        if (varlen_narrow_jobs(jobs, P.length))
          return launch_varlen_warp_loop<std::int32_t>(P, op, cu_seqlens, sequences, channels, be);
      return launch_varlen_warp_loop<index_t>(P, op, cu_seqlens, sequences, channels, be);
    }
    case varlen_cover::lane_loop:
      return launch_varlen_lane_loop(P, op, cu_seqlens, sequences, channels, channels, be);
    case varlen_cover::threads: break;
  }
  const index_t blocks = (jobs + varlen_block_threads - 1) / varlen_block_threads;
  return launch(varlen_recurrence_kernel<Problem, Op>, varlen_grid(blocks), varlen_block_threads, 0, be, P, op,
                cu_seqlens, sequences, channels);
}

}  // namespace parscan::cuda_detail
