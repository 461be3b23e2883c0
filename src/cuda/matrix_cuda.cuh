// src/cuda/matrix_cuda.cuh — the matrix recurrence and matrix chains on the CUDA backend:
// validate with the same planner as the host, size and lease the workspace, launch the kernels
// of parscan/cuda/device/{matrix,chain}_kernels.cuh on be.stream. Nothing here synchronises; every
// launch is checked. Instantiated per dtype by matrix_<dtype>.cu so the dtypes compile in
// parallel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <parscan/cuda/matrix/chain_kernels.cuh>
#include <parscan/cuda/matrix/chain_thread_engine.cuh>
#include <parscan/cuda/matrix/matrix_kernels.cuh>
#include <parscan/cuda/matrix/matrix_tensor_engine.cuh>
#include <parscan/cuda/matrix/matrix_thread_engine.cuh>
#include <parscan/cuda/runtime.cuh>
#include <parscan/matrix_recurrence.hpp>

#include "../common/matrix_args.hpp"
#include "matrix_chain_cublas.hpp"

namespace parscan {
namespace cuda_detail {

inline std::size_t align256(std::size_t b) { return (b + 255) / 256 * 256; }

/// Saturating size arithmetic for workspace sizes (a saturated size is refused at acquire).
inline std::size_t sat_mul(std::size_t a, std::size_t b) {
  if (a != 0 && b > static_cast<std::size_t>(-1) / a) return static_cast<std::size_t>(-1);
  return a * b;
}
inline std::size_t sat_add(std::size_t a, std::size_t b) {
  return a > static_cast<std::size_t>(-1) - b ? static_cast<std::size_t>(-1) : a + b;
}
inline std::size_t ws_bytes(std::size_t elems, std::size_t elem_bytes) {
  const std::size_t b = sat_mul(elems, elem_bytes);
  return b > static_cast<std::size_t>(-1) - 256 ? static_cast<std::size_t>(-1) : align256(b);
}
inline constexpr std::size_t ws_saturated = static_cast<std::size_t>(-1);

inline strided_blocks blocks_of(const detail::block_tensor& t) { return {t.batch_stride, t.step_stride}; }

inline unsigned grid_for(index_t work, index_t cap = index_t(1) << 20) {
  return static_cast<unsigned>(std::max<index_t>(1, std::min(work, cap)));
}

// ---------------------------------------------------------------------------------------
// The recurrence engine: chunking (a function of the shapes only, so the workspace size is).

/// Steps per chunk of the block engine (N > tensor_engine_max_n): one chunk (phase c alone) for
/// short sequences or batches large enough to fill the device on their own; else about 4096
/// (sequence, chunk) tasks in all, ≥ 32 steps each.
inline index_t block_engine_chunk(index_t B, index_t L) {
  constexpr index_t target_tasks = 4096, min_chunk = 32;
  if (L <= 2 * min_chunk || B >= target_tasks) return std::max<index_t>(L, 1);
  const index_t chunks = (target_tasks + B - 1) / B;
  return std::max<index_t>(min_chunk, (L + chunks - 1) / chunks);
}

/// Steps per chunk of the tensor engine (thread_engine_max_n < N ≤ tensor_engine_max_n). One
/// chunk (phase c alone) for short sequences, or when the batch alone gives tensor_engine_tasks
/// tasks; otherwise about that many (phase a takes a warp a task: at (64, 65536) some 60 warps
/// a multiprocessor of an H200, in several waves of blocks), at most 256 chunks a sequence,
/// since phase b walks a sequence's chunks one after another, and at least 64 steps a chunk.
#ifndef PARSCAN_TENSOR_ENGINE_TASKS  // a build-time override, only for measuring
#define PARSCAN_TENSOR_ENGINE_TASKS 8192
#endif
inline constexpr index_t tensor_engine_tasks = PARSCAN_TENSOR_ENGINE_TASKS;
inline index_t tensor_engine_chunk(index_t B, index_t L) {
  constexpr index_t min_chunk = 64, max_chunks = 256;
  if (L <= 2 * min_chunk || B >= tensor_engine_tasks) return std::max<index_t>(L, 1);
  const index_t chunks = std::min<index_t>(max_chunks, (tensor_engine_tasks + B - 1) / B);
  return std::max<index_t>(min_chunk, (L + chunks - 1) / chunks);
}

/// Steps per chunk of the thread engine (N ≤ thread_engine_max_n), one task per thread. One
/// chunk for short sequences or when the batch alone gives `fill` tasks; otherwise about that
/// many tasks, at least 32 steps each and a multiple of 8 (so a forward run's stages start
/// 16-byte aligned wherever a sequence does), and at most 2048 chunks per sequence (8 per
/// thread of phase b, which composes them one after another). The workspace is sized for
/// fill = thread_engine_fill; a run takes as many tasks as the device holds at once, if fewer
/// (run_thread_engine), and so never more chunks.
inline constexpr index_t thread_engine_fill = 65536;  // 16 warps per SM of a 132-SM GPU
inline index_t thread_engine_chunk(index_t B, index_t L, index_t fill = thread_engine_fill) {
  constexpr index_t min_chunk = 32, max_chunks = 8 * thread_carry_threads;
  if (L <= 2 * min_chunk || B >= fill) return std::max<index_t>(L, 1);
  const index_t chunks = std::min<index_t>(max_chunks, (fill + B - 1) / B);
  return std::max<index_t>(min_chunk, ((L + chunks - 1) / chunks + 7) / 8 * 8);
}

/// Steps per chunk (a function of the shapes only, so the workspace size is).
inline index_t engine_chunk(index_t B, index_t L, index_t N) {
  if (N <= thread_engine_max_n) return thread_engine_chunk(B, L);
  return N <= tensor_engine_max_n ? tensor_engine_chunk(B, L) : block_engine_chunk(B, L);
}

#ifndef PARSCAN_THREAD_SINGLE_PASS  // a build-time override, only for measuring against phases a, b and c
#define PARSCAN_THREAD_SINGLE_PASS 1
#endif
inline constexpr bool thread_single_pass = PARSCAN_THREAD_SINGLE_PASS;
/// The single pass serves N ≤ 2. At N = 4 its warp scan of 4×4 maps in double spilled (255
/// registers, 312 bytes of stack) and it ran at 21% of copy against phases a, b and c's 34%
/// (docs/performance.md, "A single pass for N ≤ 2"); N = 3 was not measured.
inline constexpr int thread_single_pass_max_n = 2;

/// Steps of a tile of the thread engine's single pass for state size N ≤ thread_single_pass_max_n:
/// a block's chunks (one a thread) of two stages each.
inline int thread_pass_tile_steps(index_t N) {
  constexpr int chunks = 32 * thread_engine_warps;
  return chunks * 2 * (N == 1 ? thread_layout<1, float, float>::steps : thread_layout<2, float, float>::steps);
}

template <class C>
std::size_t engine_workspace(index_t B, index_t L, index_t N) {
  const index_t chunk = engine_chunk(B, L, N), chunks = (L + chunk - 1) / chunk;
  if (chunks <= 1) return 0;
  if (N <= thread_single_pass_max_n && thread_single_pass) {  // the single pass: its look-back records
    const int tile = thread_pass_tile_steps(N);
    return N == 1 ? thread_pass_state<1, aggregate_t<C>>::bytes(B, L, tile)
                  : thread_pass_state<2, aggregate_t<C>>::bytes(B, L, tile);
  }
  const std::size_t tasks = sat_mul(static_cast<std::size_t>(B), static_cast<std::size_t>(chunks));
  const std::size_t n = static_cast<std::size_t>(N), elem = sizeof(aggregate_t<C>);
  return sat_add(sat_add(ws_bytes(sat_mul(tasks, n * n), elem), ws_bytes(sat_mul(tasks, n), elem)),
                 ws_bytes(sat_mul(tasks, n), elem));
}

/// Tasks of a run: (sequence, chunk) pairs of a batch, or the slots of packed sequences.
template <class T, class XO, class FO, class C>
index_t engine_tasks(const engine_problem<T, XO, FO, C>& p) {
  return p.offsets ? p.tasks : p.batch * p.chunks;
}

template <bool Aggregate, class T, class XO, class FO, class C>
status launch_chunks(const engine_problem<T, XO, FO, C>& p, cudaStream_t stream) {
  const std::size_t smem = engine_smem<C>(p.n, Aggregate);
  auto kernel = chunk_kernel<Aggregate, T, XO, FO, C>;
  if (smem > 48 * 1024)
    if (status st = report(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
        st != status::success)
      return st;
  kernel<<<grid_for(engine_tasks(p)), engine_threads(p.n), smem, stream>>>(p);
  return check_launch();
}

/// Whether a strided tensor's rows of n elements (of W, dW) are whole 16-byte units at 16-byte
/// aligned addresses: n and the strides (in elements of T) multiples of 16 bytes, the base aligned.
template <class T>
bool rows_on16(const T* base, index_t n, index_t batch_stride, index_t step_stride) {
  auto on16 = [](index_t elems) { return static_cast<std::size_t>(elems) * sizeof(T) % 16 == 0; };
  return on16(n) && on16(batch_stride) && on16(step_stride) && reinterpret_cast<std::uintptr_t>(base) % 16 == 0;
}

/// Phase a of the tensor engine (thread_engine_max_n < p.n ≤ tensor_engine_max_n): a warp a task.
template <class T, class XO, class FO, class C>
status launch_tensor_aggregate(const engine_problem<T, XO, FO, C>& p, cudaStream_t stream) {
  const int np = tensor_engine_np(p.n);
  const int shape = (np == 16 ? 4 : 0) + (p.n == np ? 2 : 0) + (p.w_shift ? 1 : 0);
  constexpr void (*kernels[8])(engine_problem<T, XO, FO, C>) = {
      tensor_aggregate_kernel<8, false, false, T, XO, FO, C>,  tensor_aggregate_kernel<8, false, true, T, XO, FO, C>,
      tensor_aggregate_kernel<8, true, false, T, XO, FO, C>,   tensor_aggregate_kernel<8, true, true, T, XO, FO, C>,
      tensor_aggregate_kernel<16, false, false, T, XO, FO, C>, tensor_aggregate_kernel<16, false, true, T, XO, FO, C>,
      tensor_aggregate_kernel<16, true, false, T, XO, FO, C>,  tensor_aggregate_kernel<16, true, true, T, XO, FO, C>};
  const index_t blocks = (engine_tasks(p) + tensor_engine_warps - 1) / tensor_engine_warps;
  kernels[shape]<<<grid_for(blocks), 32 * tensor_engine_warps, 0, stream>>>(p);
  return check_launch();
}

/// Phase c of the tensor engine: 32 / NP tasks a warp; the forward's rows of W 16 bytes at a time
/// where they are whole 16-byte units.
template <class T, class XO, class FO, class C>
status launch_row_rerun(const engine_problem<T, XO, FO, C>& p, cudaStream_t stream) {
  using R = row_reads;
  const int np = tensor_engine_np(p.n);
  const R reads = p.w_shift != 0                                     ? R::transposed
                  : rows_on16(p.W, p.n, p.lW.batch, p.lW.step) ? R::rows16
                                                                     : R::elements;
  const int shape = (np == 16 ? 6 : 0) + (p.n == np ? 3 : 0) + static_cast<int>(reads);
  constexpr void (*kernels[12])(engine_problem<T, XO, FO, C>) = {
      row_rerun_kernel<8, false, R::rows16, T, XO, FO, C>,  row_rerun_kernel<8, false, R::elements, T, XO, FO, C>,
      row_rerun_kernel<8, false, R::transposed, T, XO, FO, C>,  row_rerun_kernel<8, true, R::rows16, T, XO, FO, C>,
      row_rerun_kernel<8, true, R::elements, T, XO, FO, C>,   row_rerun_kernel<8, true, R::transposed, T, XO, FO, C>,
      row_rerun_kernel<16, false, R::rows16, T, XO, FO, C>, row_rerun_kernel<16, false, R::elements, T, XO, FO, C>,
      row_rerun_kernel<16, false, R::transposed, T, XO, FO, C>, row_rerun_kernel<16, true, R::rows16, T, XO, FO, C>,
      row_rerun_kernel<16, true, R::elements, T, XO, FO, C>,  row_rerun_kernel<16, true, R::transposed, T, XO, FO, C>};
  const index_t warps = (engine_tasks(p) + 32 / np - 1) / (32 / np);
  kernels[shape]<<<grid_for((warps + tensor_engine_warps - 1) / tensor_engine_warps), 32 * tensor_engine_warps, 0,
                   stream>>>(p);
  return check_launch();
}

/// Phase b of the tensor engine: a warp a sequence.
template <class T, class XO, class FO, class C>
status launch_tensor_carry(const engine_problem<T, XO, FO, C>& p, cudaStream_t stream) {
  const int np = tensor_engine_np(p.n);
  const int shape = (np == 16 ? 2 : 0) + (p.n == np ? 1 : 0);
  constexpr void (*kernels[4])(engine_problem<T, XO, FO, C>) = {
      tensor_carry_kernel<8, false, T, XO, FO, C>, tensor_carry_kernel<8, true, T, XO, FO, C>,
      tensor_carry_kernel<16, false, T, XO, FO, C>, tensor_carry_kernel<16, true, T, XO, FO, C>};
  kernels[shape]<<<grid_for((p.batch + tensor_carry_warps - 1) / tensor_carry_warps), 32 * tensor_carry_warps, 0,
                   stream>>>(p);
  return check_launch();
}

/// Phases a, b (where chunked) and c of the engine for thread_engine_max_n < p.n ≤ tensor_engine_max_n.
template <class T, class XO, class FO, class C>
status run_tensor_engine(const engine_problem<T, XO, FO, C>& p, bool chunked, cudaStream_t stream) {
  if (chunked) {
    if (status st = launch_tensor_aggregate(p, stream); st != status::success) return st;
    if (status st = launch_tensor_carry(p, stream); st != status::success) return st;
  }
  return launch_row_rerun(p, stream);
}

/// Phase a, phase c or the single pass (Pass) of the thread engine for state size N, on `warps`
/// warps (0: one a round of 32 tasks); `single` is the single pass's state.
template <thread_pass Pass, int N, class T, class XO, class FO, class C>
status launch_thread_chunks(const engine_problem<T, XO, FO, C>& p, cudaStream_t stream,
                            const thread_pass_state<N, aggregate_t<C>>& single = {}, index_t warps = 0) {
  constexpr std::size_t smem = thread_block_bytes<N, T, XO>(Pass == thread_pass::single);
  auto kernel = thread_chunk_kernel<Pass, N, T, XO, FO, C>;
  if (smem > 48 * 1024)
    if (status st = report(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
        st != status::success)
      return st;
  if (warps == 0) warps = (engine_tasks(p) + 31) / 32;  // a round of tasks a warp
  kernel<<<grid_for((warps + thread_engine_warps - 1) / thread_engine_warps), 32 * thread_engine_warps, smem, stream>>>(
      p, single);
  return check_launch();
}

/// Threads of the thread engine's chunk kernel (state size N) that the current device holds
/// at once: where that is below thread_engine_fill, a run takes that many tasks instead, with
/// longer chunks, so every warp of the chunk kernels takes one round of tasks (with 1.3 rounds
/// per warp, the second ran on a quarter of the SMs). Never more chunks than the workspace,
/// sized for thread_engine_fill, allows for.
template <int N, class T, class XO, class FO, class C>
status thread_engine_fill_for_device(index_t& fill) {
  fill = thread_engine_fill;
  const device_facts dev = current_device();
  if (dev.st != status::success) return dev.st;
  constexpr auto rerun = thread_chunk_kernel<thread_pass::rerun, N, T, XO, FO, C>;
  const int per_sm = blocks_per_multiprocessor<rerun>(32 * thread_engine_warps, dev.device,
                                                      static_cast<int>(thread_layout<N, T, XO>::block_bytes));
  const index_t resident = static_cast<index_t>(per_sm) * thread_engine_warps * 32 * dev.multiprocessors;
  if (resident > 0 && resident < fill) fill = resident;
  return status::success;
}

/// The three phases of the thread engine (p chunked, workspace carved), or phase c alone.
template <int N, class T, class XO, class FO, class C>
status launch_thread_engine(const engine_problem<T, XO, FO, C>& p, bool chunked, cudaStream_t stream) {
  if (chunked) {
    if (status st = launch_thread_chunks<thread_pass::aggregate, N>(p, stream); st != status::success) return st;
    thread_carry_kernel<N><<<grid_for(p.batch), thread_carry_threads, 0, stream>>>(p);
    if (status st = check_launch(); st != status::success) return st;
  }
  return launch_thread_chunks<thread_pass::rerun, N>(p, stream);
}

/// The thread engine over a batch: phase c alone where engine_chunk gives one chunk; else for
/// N ≤ thread_single_pass_max_n the single pass (thread_pass::single) over tiles of
/// thread_pass_tile_steps(N), which reads W' and b' once where phases a, b and c read them
/// twice (docs/design.md, "the thread engine"), and phases a, b and c for larger N; `ws` holds
/// engine_workspace<C>(B, L, N) bytes.
template <int N, class T, class XO, class FO, class C>
status run_thread_engine(engine_problem<T, XO, FO, C> p, void* ws, cudaStream_t stream) {
  if (p.chunks <= 1) return launch_thread_chunks<thread_pass::rerun, N>(p, stream);
  if constexpr (!thread_single_pass || N > thread_single_pass_max_n) {
    // Phases a, b and c, the chunks as long as the device's tasks need.
    index_t fill = thread_engine_fill;
    if (status st = thread_engine_fill_for_device<N, T, XO, FO, C>(fill); st != status::success) return st;
    if (fill < thread_engine_fill) {
      p.chunk = thread_engine_chunk(p.batch, p.length, fill);
      p.chunks = (p.length + p.chunk - 1) / p.chunk;
    }
    return launch_thread_engine<N>(p, p.chunks > 1, stream);
  } else {
    using state = thread_pass_state<N, aggregate_t<C>>;
    const int tile = thread_pass_tile_steps(N);
    const std::size_t bytes = state::bytes(p.batch, p.length, tile);
    if (status st = report(cudaMemsetAsync(ws, 0, bytes, stream)); st != status::success) return st;
    const state single = state::carve(ws, p.batch, p.length, tile);
    // As many blocks as the device holds at once, at most one a tile: each claims tiles until
    // none is left.
    const device_facts dev = current_device();
    if (dev.st != status::success) return dev.st;
    constexpr auto kernel = thread_chunk_kernel<thread_pass::single, N, T, XO, FO, C>;
    const int per_sm = blocks_per_multiprocessor<kernel>(32 * thread_engine_warps, dev.device,
                                                         static_cast<int>(thread_block_bytes<N, T, XO>(true)));
    if (per_sm == 0) return status::exceeds_device_limits;
    const index_t tiles = p.batch * single.tiles_per_sequence;
    const index_t blocks = std::min(tiles, static_cast<index_t>(per_sm) * dev.multiprocessors);
    return launch_thread_chunks<thread_pass::single, N>(p, stream, single, blocks * thread_engine_warps);
  }
}

/// Runs the engine over every sequence of `p` (length ≥ 1), with `ws` holding
/// engine_workspace<C>(B, L, N) bytes when chunked: the thread engine for
/// N ≤ thread_engine_max_n, the tensor engine up to tensor_engine_max_n, the block engine above.
template <class T, class XO, class FO, class C>
status run_engine(engine_problem<T, XO, FO, C> p, void* ws, cudaStream_t stream) {
  p.chunk = engine_chunk(p.batch, p.length, p.n);
  p.chunks = (p.length + p.chunk - 1) / p.chunk;
  p.stage_steps = engine_stage_steps(p.n);
  if (p.n > tensor_engine_max_n && static_cast<index_t>(p.stage_steps) * (p.n * p.n + p.n) >
                   static_cast<index_t>(engine_threads(p.n)) * engine_max_slots)
    return status::unsupported;  // cannot happen for N ≤ 64: the staging fits the registers
  if (p.chunks > 1) {  // the three phases' storage (the single pass lays out ws its own way)
    using D = aggregate_t<C>;
    const std::size_t tasks = static_cast<std::size_t>(p.batch * p.chunks), n = static_cast<std::size_t>(p.n);
    char* w = static_cast<char*>(ws);
    p.agg_A = reinterpret_cast<D*>(w);
    p.agg_v = reinterpret_cast<D*>(w + ws_bytes(tasks * n * n, sizeof(D)));
    p.carry = reinterpret_cast<D*>(w + ws_bytes(tasks * n * n, sizeof(D)) + ws_bytes(tasks * n, sizeof(D)));
  }
  static_assert(thread_engine_max_n == 4, "the thread engine is instantiated for N = 1..4");
  switch (p.n) {
    case 1: return run_thread_engine<1>(p, ws, stream);
    case 2: return run_thread_engine<2>(p, ws, stream);
    case 3: return run_thread_engine<3>(p, ws, stream);
    case 4: return run_thread_engine<4>(p, ws, stream);
    default: break;
  }
  if (p.n <= tensor_engine_max_n) return run_tensor_engine(p, p.chunks > 1, stream);
  if (p.chunks > 1) {
    if (status st = launch_chunks<true>(p, stream); st != status::success) return st;
    carry_kernel<<<grid_for(p.batch), 64, 0, stream>>>(p);
    if (status st = check_launch(); st != status::success) return st;
  }
  return launch_chunks<false>(p, stream);
}

// ---------------------------------------------------------------------------------------
// The engine over packed sequences (cu_seqlens): chunks of one length for every sequence, a
// function of the total length and N only (so is the workspace); a sequence's chunks are the
// slots from ⌊cu_seqlens[s] / chunk⌋ + s (engine_problem), so the slot count is known on the
// host. Every packed run is chunked (phases a, b and c), on the engine the batch would take.

/// Steps per chunk of a packed run: about as many tasks as each engine's batch chunks aim for
/// (the thread engine's fill, at least 32 steps and a multiple of 8; the tensor engine's
/// tensor_engine_tasks, at least 64; the block engine's 4096, at least 32). A thread-engine run may
/// pass a smaller fill (thread_engine_fill_for_device): longer chunks, fewer slots than the
/// workspace holds.
inline index_t packed_engine_chunk(index_t total, index_t N, index_t fill = thread_engine_fill) {
  if (N <= thread_engine_max_n) return std::max<index_t>(32, ((total + fill - 1) / fill + 7) / 8 * 8);
  if (N <= tensor_engine_max_n) return std::max<index_t>(64, (total + tensor_engine_tasks - 1) / tensor_engine_tasks);
  return std::max<index_t>(32, (total + 4095) / 4096);
}

/// Slots of a packed run of chunks of `chunk` steps: ⌊total / chunk⌋ + sequences bounds every
/// sequence's last slot. The workspace holds those of packed_engine_chunk(total, N).
inline index_t packed_engine_slots(index_t sequences, index_t total, index_t chunk) {
  return total / chunk + sequences;
}

/// Workspace of a packed run: the slot table, then each slot's aggregate and carry. Saturated
/// (refused at acquire) where a slot's sequence or chunk would not fit the table's 32 bits.
template <class C>
std::size_t packed_engine_workspace(index_t sequences, index_t total, index_t N) {
  if (total == 0 || sequences == 0) return 0;
  const index_t slots = packed_engine_slots(sequences, total, packed_engine_chunk(total, N));
  if (slots > 0x7fffffff) return ws_saturated;
  const std::size_t tasks = static_cast<std::size_t>(slots);
  const std::size_t n = static_cast<std::size_t>(N), elem = sizeof(aggregate_t<C>);
  return sat_add(sat_add(ws_bytes(tasks, sizeof(int2)), ws_bytes(sat_mul(tasks, n * n), elem)),
                 sat_add(ws_bytes(sat_mul(tasks, n), elem), ws_bytes(sat_mul(tasks, n), elem)));
}

/// Runs the engine over packed sequences (p.offsets, p.batch sequences, p.length the total
/// length ≥ 1), `ws` holding packed_engine_workspace<C> bytes.
template <class T, class XO, class FO, class C>
status run_packed_engine(engine_problem<T, XO, FO, C> p, void* ws, cudaStream_t stream) {
  using D = aggregate_t<C>;
  index_t fill = thread_engine_fill;
  const auto device_fill = [&](auto n_tag) {
    return thread_engine_fill_for_device<decltype(n_tag)::value, T, XO, FO, C>(fill);
  };
  status fill_st = status::success;
  switch (p.n) {
    case 1: fill_st = device_fill(std::integral_constant<int, 1>{}); break;
    case 2: fill_st = device_fill(std::integral_constant<int, 2>{}); break;
    case 3: fill_st = device_fill(std::integral_constant<int, 3>{}); break;
    case 4: fill_st = device_fill(std::integral_constant<int, 4>{}); break;
    default: break;
  }
  if (fill_st != status::success) return fill_st;
  p.chunk = packed_engine_chunk(p.length, p.n, fill);
  p.tasks = packed_engine_slots(p.batch, p.length, p.chunk);  // no more than the workspace's: fill ≤ its fill
  p.chunks = 0;  // per sequence (engine_problem::sequence_at)
  p.stage_steps = engine_stage_steps(p.n);
  const std::size_t tasks = static_cast<std::size_t>(p.tasks), n = static_cast<std::size_t>(p.n);
  char* w = static_cast<char*>(ws);
  int2* table = reinterpret_cast<int2*>(w);
  w += ws_bytes(tasks, sizeof(int2));
  p.slots = table;
  p.agg_A = reinterpret_cast<D*>(w);
  p.agg_v = reinterpret_cast<D*>(w + ws_bytes(tasks * n * n, sizeof(D)));
  p.carry = reinterpret_cast<D*>(w + ws_bytes(tasks * n * n, sizeof(D)) + ws_bytes(tasks * n, sizeof(D)));
  packed_slots_kernel<<<grid_for((p.tasks + 255) / 256, 65535), 256, 0, stream>>>(p.offsets, p.batch, p.chunk, p.tasks,
                                                                                    table);
  if (status st = check_launch(); st != status::success) return st;
  auto thread_engine = [&](auto n_tag) { return launch_thread_engine<decltype(n_tag)::value>(p, true, stream); };
  switch (p.n) {
    case 1: return thread_engine(std::integral_constant<int, 1>{});
    case 2: return thread_engine(std::integral_constant<int, 2>{});
    case 3: return thread_engine(std::integral_constant<int, 3>{});
    case 4: return thread_engine(std::integral_constant<int, 4>{});
    default: break;
  }
  if (p.n <= tensor_engine_max_n) return run_tensor_engine(p, true, stream);
  const index_t stage_elems = static_cast<index_t>(p.stage_steps) * (p.n * p.n + p.n);
  if (stage_elems > static_cast<index_t>(engine_threads(p.n)) * engine_max_slots)
    return status::unsupported;  // cannot happen for N ≤ 64: the staging fits the registers
  if (status st = launch_chunks<true>(p, stream); st != status::success) return st;
  carry_kernel<<<grid_for(p.batch), 64, 0, stream>>>(p);
  if (status st = check_launch(); st != status::success) return st;
  return launch_chunks<false>(p, stream);
}

/// The engine's run over packed sequences `s`: W' from W (step stride sW), b' from b, the
/// states to x (each a step stride; batch strides 0), z[-1] from z0, the last states to z_final.
template <class C, class T, class XO, class FO>
engine_problem<T, XO, FO, C> packed_problem(const T* W, index_t sW, const T* b, index_t sb, XO* x, index_t sx,
                                            const T* z0, FO* z_final, const matrix_varlen_shape& s, bool descending,
                                            int w_shift) {
  engine_problem<T, XO, FO, C> e;
  e.W = W, e.lW = {0, sW}, e.b = b, e.lb = {0, sb}, e.x = x, e.lx = {0, sx};
  e.z0 = z0, e.z_final = z_final;
  e.batch = s.sequences, e.length = s.total_length, e.n = s.n;
  e.descending = descending, e.w_shift = w_shift;
  e.offsets = s.cu_seqlens;
  return e;
}

template <class In, class Out>
status launch_state_copy(const In* z0, Out* z_final, index_t count, cudaStream_t stream) {
  if (!z_final || count == 0) return status::success;
  state_copy_kernel<<<grid_for((count + 255) / 256), 256, 0, stream>>>(z0, z_final, count);
  return check_launch();
}

// Bytes of the recomputed x (dense (B, T, N) in compute precision) when backward is not given x.
template <class T>
std::size_t recompute_bytes(const matrix_backward_args<T>& g) {
  if (g.x) return 0;
  return ws_bytes(sat_mul(static_cast<std::size_t>(g.batch) * static_cast<std::size_t>(g.length),
                          static_cast<std::size_t>(g.n)),
                  sizeof(compute_t<T>));
}

// ---------------------------------------------------------------------------------------
// Chains.

/// Chain positions per chunk of the prefix scan of d > chunk_engine_max_d: about √n, so the
/// sequential launches of the local prefixes (chunk) and of the carries (n / chunk) balance.
inline index_t chain_chunk(index_t n) {
  index_t c = 1;
  while (c * c < n) ++c;
  return std::max<index_t>(c, 1);
}

/// Whether a chain's products go to cuBLAS: float totals with d ≥ chain_cublas_min_d (the
/// prefixes' lists group by chunk, which one stride per call does not describe).
template <class T>
constexpr bool chain_on_cublas(index_t d, bool prefixes) {
  return std::is_same<T, float>::value && !prefixes && d >= chain_cublas_min_d;
}

/// The part of a chain's workspace that cuBLAS gets: its recommended size, plus room to align
/// a caller's workspace to the 256 bytes cublasSetWorkspace needs.
inline constexpr std::size_t chain_cublas_reserve = chain_cublas_workspace_bytes + 256;

/// Chains of d ≤ chunk_engine_max_d, totals and prefixes, take the chunk engine (chain_chunks):
/// three such matrices fit one block's shared memory, so a block walks a chunk of a chain
/// without a launch per position, and one launch does the rest. It replaced (an H100, at
/// 3e4a9ed beside dbc0f31's binary) the single-launch tree of d ≤ 32 (1000 × 32²: 47–52 →
/// 21–22 µs), the GEMM tree of d = 33…64 (1000 × 64²: 106–112 → 52–54 µs) and a launch per
/// position for prefixes (8192 × 64²: 1874–1910 → 335–341 µs).
inline constexpr index_t chunk_engine_max_d = 64;

/// The chunk engine's positions per chunk, a function of B and n only (so the workspace size
/// is): chunks of at least 4 positions, about 256 (chain, chunk) tasks in all (two blocks per SM
/// of an H100) for prefixes, whose phases are throughput-bound, and for totals of many factors
/// (B·n ≥ 32768: 64 chains of 1000 × 32² took 256 µs, 316 µs with 128 tasks), but 128 (one
/// block per SM) for totals of fewer, which are bound by the latency of the tree levels
/// (1000 × 64²: 64.5 µs with 256 chunks of 4, 54–57 µs with 125 of 8).
inline index_t chunk_engine_len(index_t B, index_t n, bool prefixes) {
  constexpr index_t min_len = 4;
  const index_t target_tasks = prefixes || B * n >= 32768 ? 256 : 128;
  const index_t most = std::max<index_t>(1, (n + min_len - 1) / min_len);
  const index_t chunks = std::min(most, std::max<index_t>(1, (target_tasks + B - 1) / B));
  return std::max<index_t>(1, (n + chunks - 1) / chunks);
}

/// Threads per task of the chain thread engine at d (padded to 4, 8 or 16).
template <class C>
int chain_thread_group_at(index_t d) {
  return d <= 4 ? chain_thread_group<4, C> : d <= 8 ? chain_thread_group<8, C> : chain_thread_group<16, C>;
}

/// Chunks per chain of one thread-engine launch over B chains of n factors (a function of the
/// shapes only, so the workspace size is): about 2^17 threads in all (about four waves of the
/// H100's 34k resident threads at 255 registers), chunks of at least 16 factors, and
/// for prefixes at most 64 chunks, whose carries one thread per chain walks in sequence.
inline index_t chain_thread_chunks(index_t B, index_t n, int group, bool prefixes) {
  constexpr index_t target_threads = index_t(1) << 17, min_len = 16, max_prefix_chunks = 64;
  index_t most = std::max<index_t>(1, (n + min_len - 1) / min_len);
  if (prefixes) most = std::min(most, max_prefix_chunks);
  const index_t want = std::max<index_t>(1, target_threads / group / std::max<index_t>(B, 1));
  const index_t chunks = std::min(most, want), len = (n + chunks - 1) / chunks;
  return (n + len - 1) / len;
}

/// Factors (B·n) from which chains of d ≤ chain_thread_max_d take the thread engine rather
/// than the chunk engine. A build-time override, for measuring.
#ifndef PARSCAN_CHAIN_THREAD_MIN_FACTORS
inline constexpr index_t chain_thread_min_factors = 16384;
#else
inline constexpr index_t chain_thread_min_factors = PARSCAN_CHAIN_THREAD_MIN_FACTORS;
#endif

/// The thread engine's plan for B chains of n factors of d × d, a function of the shapes only,
/// so that the workspace size and the launches agree. It applies where d ≤ chain_thread_max_d,
/// there are factors enough to fill the device with tasks, and, for prefixes, (chain, chunk)
/// tasks enough, since each chain's chunks are at most 64 (a few long chains stay with the
/// chunk engine's carry levels).
struct chain_thread_plan {
  bool applies = false;
  index_t first_chunks = 0;   // chunks per chain of the first launch (1: that launch does it all)
  index_t second_chunks = 0;  // what the workspace keeps next: the carries of prefixes
                              // (first_chunks − 1), or the chunks of the totals' second level
};
template <class C>
chain_thread_plan plan_chain_threads(index_t B, index_t n, index_t d, bool prefixes) {
  chain_thread_plan t;
  if (d > chain_thread_max_d || B * n < chain_thread_min_factors) return t;
  const int group = chain_thread_group_at<C>(d);  // threads per task
  t.first_chunks = chain_thread_chunks(B, n, group, prefixes);
  if (prefixes && B * t.first_chunks * group < 8192) return t;
  t.applies = true;
  t.second_chunks = prefixes ? t.first_chunks - 1 : chain_thread_chunks(B, t.first_chunks, group, false);
  return t;
}

template <class C>
std::size_t chain_workspace(index_t B, index_t n, index_t d, bool prefixes) {
  const std::size_t dd = static_cast<std::size_t>(d) * static_cast<std::size_t>(d), b = static_cast<std::size_t>(B);
  if (n <= 1 || B == 0) return 0;
  if (const chain_thread_plan t = plan_chain_threads<C>(B, n, d, prefixes); t.applies) {
    // Totals: two ping-pong buffers, the first two levels' chunk totals. Prefixes: the chunk
    // totals and the carries.
    const index_t c0 = t.first_chunks, c1 = t.second_chunks;
    if (c0 == 1) return 0;
    return sat_add(ws_bytes(sat_mul(sat_mul(b, static_cast<std::size_t>(c0)), dd), sizeof(C)),
                   c1 > 1 || prefixes ? ws_bytes(sat_mul(sat_mul(b, static_cast<std::size_t>(c1)), dd), sizeof(C)) : 0);
  }
  if (d <= chunk_engine_max_d) {  // chunk totals (and, for prefixes, their prefixes: ping-pong)
    const index_t len = chunk_engine_len(B, n, prefixes), chunks = (n + len - 1) / len;
    const std::size_t kept = static_cast<std::size_t>(prefixes ? chunks - 1 : chunks);
    if (!prefixes) return chunks > 1 ? ws_bytes(sat_mul(sat_mul(b, kept), dd), sizeof(C)) : 0;
    return 2 * ws_bytes(sat_mul(sat_mul(b, kept), dd), sizeof(C));
  }
  if (!prefixes) {
    const std::size_t half = static_cast<std::size_t>((n + 1) / 2), quarter = static_cast<std::size_t>((n + 3) / 4);
    return sat_add(ws_bytes(sat_mul(sat_mul(b, half), dd), sizeof(C)),
                   ws_bytes(sat_mul(sat_mul(b, quarter), dd), sizeof(C)));
  }
  const index_t L = chain_chunk(n), chunks = (n + L - 1) / L;
  return sat_add(ws_bytes(sat_mul(sat_mul(b, static_cast<std::size_t>(n)), dd), sizeof(C)),
                 ws_bytes(sat_mul(sat_mul(b, static_cast<std::size_t>(chunks)), dd), sizeof(C)));
}

/// Whether a (B, n, d, d) tensor's matrices allow 4-element vector access: d % 4 == 0 and the
/// base and strides aligned to a packed_vec<X, 4>.
template <class X>
bool vector_matrices(const X* base, index_t batch_stride, index_t step_stride, index_t d) {
  constexpr std::size_t align = alignof(packed_vec<X, 4>);
  auto aligned = [&](std::size_t bytes) { return bytes % align == 0; };
  return d % 4 == 0 && aligned(reinterpret_cast<std::uintptr_t>(base)) &&
         aligned(static_cast<std::size_t>(batch_stride) * sizeof(X)) &&
         aligned(static_cast<std::size_t>(step_stride) * sizeof(X));
}

/// The totals (Prefixes = false) or prefixes of every chain by the chunk engine (chain_chunks,
/// d ≤ 16·RT) in one cooperative launch; `ws` holds chain_workspace bytes.
template <int RT, bool Prefixes, class T, class C>
status chain_chunked(chain_chunks<T, C> c, void* ws, cudaStream_t stream) {
  constexpr std::size_t smem = chain_chunk_smem<RT, C>;
  const device_facts dev = current_device();
  if (dev.st != status::success) return dev.st;
  constexpr auto kernel = chain_chunk_kernel<RT, Prefixes, T, C>;
  const int per_sm = blocks_per_multiprocessor<kernel>(block_matrix_threads, dev.device, static_cast<int>(smem));
  if (per_sm == 0) return status::exceeds_device_limits;
  // All blocks resident at once (the phases meet at grid-wide barriers); more tasks loop, but
  // the totals' tree takes a block per (chain, chunk): fewer, longer chunks where they do not
  // fit (the workspace is sized for more).
  const index_t resident = static_cast<index_t>(per_sm) * dev.multiprocessors;
  if (!Prefixes && c.chunks > 1 && c.B * c.chunks > resident) {
    const index_t chunks = std::max<index_t>(1, resident / c.B);
    c.len = (c.n + chunks - 1) / chunks, c.chunks = (c.n + c.len - 1) / c.len;
  }
  const index_t dd = static_cast<index_t>(c.d) * c.d;
  c.slots = Prefixes ? c.chunks - 1 : c.chunks;
  c.buf[0] = static_cast<C*>(ws);
  c.buf[1] = reinterpret_cast<C*>(static_cast<char*>(ws) +
                                  ws_bytes(static_cast<std::size_t>(c.B * c.slots * dd), sizeof(C)));
  c.vec_M = vector_matrices(c.M, c.Mb, c.Ms, c.d);
  c.vec_out = vector_matrices(c.out, c.Ob, c.Os, c.d);
  const index_t blocks = std::min<index_t>(c.B * c.chunks, resident);
  void* params[] = {&c};
  if (status st = report(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel),
                                                     dim3(static_cast<unsigned>(blocks)), dim3(block_matrix_threads),
                                                     params, smem, stream));
      st != status::success)
    return st;
  return check_launch();
}

/// One launch of the chain thread engine: the staged kernel where d = D and every factor (and
/// prefix) starts on 16 bytes, else the one for any d and alignment.
template <int D, class X, class Y, class C>
status chain_thread_launch(const chain_thread_walk<X, Y, C>& w, cudaStream_t stream) {
  const index_t threads = w.B * w.chunks * chain_thread_group<D, C>;
  auto on16 = [](const void* base, index_t batch, index_t step, std::size_t bytes) {
    return reinterpret_cast<std::uintptr_t>(base) % 16 == 0 && static_cast<std::size_t>(batch) * bytes % 16 == 0 &&
           static_cast<std::size_t>(step) * bytes % 16 == 0;
  };
  if (w.d == D && on16(w.in, w.in_batch, w.in_step, sizeof(X)) &&
      (!w.prefixes || on16(w.out, w.out_batch, w.out_step, sizeof(Y)))) {
    constexpr auto kernel = chain_thread_staged_kernel<D, X, Y, C>;
    const std::size_t smem = chain_staged_layout<D, X, Y, C>::warp_bytes(w.prefixes) * (chain_staged_block / 32);
    const int smem_bytes = static_cast<int>(smem);
    if (status st = report(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
        st != status::success)
      return st;
    const index_t warps = (threads + 31) / 32;
    kernel<<<grid_for((warps + chain_staged_block / 32 - 1) / (chain_staged_block / 32)), chain_staged_block, smem,
             stream>>>(w);
    return check_launch();
  }
  chain_thread_kernel<D><<<grid_for((threads + chain_thread_block - 1) / chain_thread_block), chain_thread_block, 0,
                           stream>>>(w);
  return check_launch();
}

/// Totals or prefixes of every chain by the thread engine, as `plan` (plan_chain_threads) says;
/// `ws` holds chain_workspace bytes. Totals: levels of chunk totals until one is left per
/// chain, the last written to out. Prefixes: chunk totals, their prefixes (the carries, one
/// thread per chain), then every chunk again from its carry, each prefix written.
template <int D, class T, class C = compute_t<T>>
status chain_threads(const matrix_chain_args<T>& g, const detail::matrix_chain_plan& p, const chain_thread_plan& plan,
                     void* ws, cudaStream_t stream) {
  const index_t B = p.batch, n = p.count, d = p.d, dd = d * d;
  const bool prefixes = g.output == chain_output::prefixes, rtl = g.order == chain_order::right_to_left;
  constexpr int G = chain_thread_group<D, C>;
  const bool vec_M = !rtl && vector_matrices(g.M, p.M.batch_stride, p.M.step_stride, d);
  // A walk over B chains of `count` factors (the caller's M, or chunk totals in ws).
  auto walk = [&](auto in, index_t in_batch, index_t in_step, bool from_M, index_t count, index_t chunks, auto out,
                  index_t out_batch, index_t out_step, bool to_out, const C* carry, bool each) {
    using X = std::remove_const_t<std::remove_pointer_t<decltype(in)>>;
    using Y = std::remove_pointer_t<decltype(out)>;
    chain_thread_walk<X, Y, C> w;
    w.in = in, w.in_batch = in_batch, w.in_step = in_step, w.carry = carry;
    w.out = out, w.out_batch = out_batch, w.out_step = out_step;
    w.B = B, w.n = count, w.chunks = chunks, w.len = (count + chunks - 1) / chunks, w.d = static_cast<int>(d);
    w.in_transposed = from_M && rtl, w.out_transposed = to_out && rtl;
    w.vec_in = from_M ? vec_M : d % 4 == 0;
    w.prefixes = each;
    return chain_thread_launch<D>(w, stream);
  };
  const index_t c0 = plan.first_chunks;  // planned with G threads a task: D is d padded to 4, 8 or 16
  C* const buf0 = static_cast<C*>(ws);
  C* const buf1 = reinterpret_cast<C*>(static_cast<char*>(ws) +
                                       ws_bytes(static_cast<std::size_t>(B * c0 * dd), sizeof(C)));
  const T* M = g.M;
  const index_t Mb = p.M.batch_stride, Ms = p.M.step_stride, Ob = p.out.batch_stride, Os = p.out.step_stride;
  if (c0 == 1) return walk(M, Mb, Ms, true, n, 1, g.out, Ob, Os, true, nullptr, prefixes);
  if (status st = walk(M, Mb, Ms, true, n, c0, buf0, c0 * dd, dd, false, nullptr, false); st != status::success)
    return st;
  if (prefixes) {
    if (status st = walk(static_cast<const C*>(buf0), c0 * dd, dd, false, c0 - 1, 1, buf1, (c0 - 1) * dd, dd, false,
                         nullptr, true);
        st != status::success)
      return st;
    return walk(M, Mb, Ms, true, n, c0, g.out, Ob, Os, true, buf1, true);
  }
  // Totals: level by level, ping-ponging between buf0 and buf1, until one chunk is left.
  index_t count = c0;
  const C* src = buf0;
  for (int level = 1;; ++level) {
    const index_t chunks = chain_thread_chunks(B, count, G, false);
    if (chunks == 1) return walk(src, count * dd, dd, false, count, 1, g.out, Ob, 0, true, nullptr, false);
    C* const dst = level % 2 ? buf1 : buf0;
    if (status st = walk(src, count * dd, dd, false, count, chunks, dst, chunks * dd, dd, false, nullptr, false);
        st != status::success)
      return st;
    src = dst, count = chunks;
  }
}

/// Launches a batched GEMM kernel (gemm_kernel or mma_gemm_kernel) with Tile×Tile output
/// tiles over blockIdx.x and the matrices over blockIdx.y.
template <int Tile, int Threads, class Kernel, class TA, class TB, class TO>
status launch_gemm(Kernel kernel, mat_list<const TA> a, mat_list<const TB> b, mat_list<TO> o, index_t count, index_t d,
                   cudaStream_t stream) {
  if (count == 0) return status::success;
  const index_t tiles = (d + Tile - 1) / Tile;
  const dim3 grid(static_cast<unsigned>(tiles * tiles), grid_for(count, 65535));
  kernel<<<grid, Threads, 0, stream>>>(a, b, o, count, static_cast<int>(d));
  return check_launch();
}

/// o[q] = a[q]·b[q] in compute precision C (exact).
template <class TA, class TB, class TO, class C>
status gemm(mat_list<const TA> a, mat_list<const TB> b, mat_list<TO> o, index_t count, index_t d, cudaStream_t stream) {
  return launch_gemm<gemm_tile, gemm_threads>(gemm_kernel<TA, TB, TO, C>, a, b, o, count, d, stream);
}

/// o[q] = a[q]·b[q] on tensor cores (chain_math::tf32 / bf16; float compute).
template <mma_kind K, class TA, class TB, class TO>
status mma_gemm(mat_list<const TA> a, mat_list<const TB> b, mat_list<TO> o, index_t count, index_t d, cudaStream_t stream) {
  return launch_gemm<mma_tile, mma_threads>(mma_gemm_kernel<K, TA, TB, TO>, a, b, o, count, d, stream);
}

template <class TA, class TO>
status mat_copy(mat_list<const TA> a, mat_list<TO> o, index_t count, index_t d, cudaStream_t stream) {
  if (count == 0) return status::success;
  const dim3 grid(static_cast<unsigned>((d * d + 255) / 256), grid_for(count, 65535));
  mat_copy_kernel<TA, TO><<<grid, 256, 0, stream>>>(a, o, count, static_cast<int>(d));
  return check_launch();
}

/// A list over a (B, n, d, d) tensor: matrix q = s·per + k is position first + k·step_mul of
/// sequence s (k / div for div > 1).
template <class X>
mat_list<X> list_of(X* base, index_t batch_stride, index_t step_stride, index_t per, index_t first = 0,
                    index_t step_mul = 1, index_t div = 1) {
  mat_list<X> l;
  l.ptr = base + first * step_stride;
  l.per = std::max<index_t>(per, 1);
  l.div = div;
  l.outer = batch_stride;
  l.inner = step_stride * step_mul;
  return l;
}

/// The dW pass a 16-byte word a thread (outer_words_kernel, packed_outer_words_kernel) where N
/// is 4, 8 or 16 and each step of dW is whole aligned 16-byte words (outer_word_shape: N = 4 in
/// the 16-bit types is two rows a word): calls launch(std::integral_constant<int, N>) then and
/// returns true; else false. (N = 4 in bfloat16 took the element a thread kernel until the
/// word kernel took whole rows: its backward ran slower than float's, docs/performance.md.)
template <class T, class F>
bool outer_by_words(index_t N, const T* dW, index_t batch_stride, index_t step_stride, F&& launch) {
  if (!rows_on16(dW, N * N, batch_stride, step_stride)) return false;  // a step of dW as one row of N² elements
  if (N == 16) return launch(std::integral_constant<int, 16>{}), true;
  if (N == 8) return launch(std::integral_constant<int, 8>{}), true;
  if (N == 4) return launch(std::integral_constant<int, 4>{}), true;
  return false;
}

}  // namespace cuda_detail

// ---------------------------------------------------------------------------------------
// The matrix recurrence.

template <class T>
std::size_t matrix_recurrence_workspace_size(const matrix_forward_args<T>& g) {
  detail::matrix_forward_plan p;
  if (detail::plan_matrix_forward(g, p) != status::success) return 0;
  return cuda_detail::engine_workspace<compute_t<T>>(g.batch, g.length, g.n);
}

template <class T>
std::size_t matrix_recurrence_workspace_size(const matrix_backward_args<T>& g) {
  detail::matrix_backward_plan p;
  if (detail::plan_matrix_backward(g, p) != status::success) return 0;
  using namespace cuda_detail;
  using C = compute_t<T>;
  // x (recomputed), db[first] in compute precision, then the engine's chunk storage (shared by
  // the recompute and the db run, which follow each other on the stream).
  return sat_add(sat_add(recompute_bytes(g), ws_bytes(static_cast<std::size_t>(g.batch * g.n), sizeof(C))),
                 engine_workspace<C>(g.batch, g.length, g.n));
}

template <class T>
status matrix_recurrence_forward(const cuda_backend& be, const matrix_forward_args<T>& g) {
  detail::matrix_forward_plan p;
  if (status st = detail::plan_matrix_forward(g, p); st != status::success) return st;
  using namespace cuda_detail;
  using C = compute_t<T>;
  cudaStream_t stream = be.stream;
  if (p.batch == 0) return status::success;
  if (p.length == 0) return launch_state_copy(g.x0, g.x_final, p.batch * p.n, stream);
  const std::size_t bytes = matrix_recurrence_workspace_size(g);
  if (bytes == ws_saturated) return status::exceeds_device_limits;
  workspace_lease ws(be);
  if (status st = ws.acquire(bytes); st != status::success) return st;
  engine_problem<T, T, T, C> e;
  e.W = g.W, e.lW = blocks_of(p.W), e.b = g.b, e.lb = blocks_of(p.b), e.x = g.x, e.lx = blocks_of(p.x);
  e.z0 = g.x0, e.z_final = g.x_final;
  e.batch = p.batch, e.length = p.length, e.n = p.n;
  e.descending = g.reverse;
  e.w_shift = 0;
  return run_engine(e, ws.get(), stream);
}

template <class T>
status matrix_recurrence_backward(const cuda_backend& be, const matrix_backward_args<T>& g) {
  detail::matrix_backward_plan p;
  if (status st = detail::plan_matrix_backward(g, p); st != status::success) return st;
  using namespace cuda_detail;
  using C = compute_t<T>;
  cudaStream_t stream = be.stream;
  const index_t B = p.batch, L = p.length, N = p.n;
  T* const dx0 = g.x0 ? g.dx0 : nullptr;
  if (B == 0) return status::success;
  if (L == 0) return launch_state_copy(g.dx_final, dx0, B * N, stream);
  const std::size_t bytes = matrix_recurrence_workspace_size(g);
  if (bytes == ws_saturated) return status::exceeds_device_limits;
  workspace_lease ws(be);
  if (status st = ws.acquire(bytes); st != status::success) return st;
  char* w = static_cast<char*>(ws.get());
  C* const x_tmp = g.x ? nullptr : reinterpret_cast<C*>(w);
  C* const dbf = reinterpret_cast<C*>(w + recompute_bytes(g));
  void* const engine_ws = w + recompute_bytes(g) + ws_bytes(static_cast<std::size_t>(B * N), sizeof(C));
  const strided_blocks x_dense{L * N, N};

  if (!g.x) {  // recompute the forward states, in compute precision, into the workspace
    engine_problem<T, C, T, C> f;
    f.W = g.W, f.lW = blocks_of(p.W), f.b = g.b, f.lb = blocks_of(p.b), f.x = x_tmp, f.lx = x_dense;
    f.z0 = g.x0, f.z_final = nullptr;
    f.batch = B, f.length = L, f.n = N;
    f.descending = g.reverse, f.w_shift = 0;
    if (status st = run_engine(f, engine_ws, stream); st != status::success) return st;
  }
  // db: the engine run backwards over the forward's steps, on the next step's Wᵀ, from
  // dx_final; db may be exactly dx (each element of dx is read before its db is written).
  engine_problem<T, T, C, C> r;
  r.W = g.W, r.lW = blocks_of(p.W), r.b = g.dx, r.lb = blocks_of(p.dx), r.x = g.db, r.lx = blocks_of(p.db);
  r.z0 = g.dx_final, r.z_final = dbf;
  r.batch = B, r.length = L, r.n = N;
  r.descending = !g.reverse;
  r.w_shift = g.reverse ? -1 : 1;
  if (status st = run_engine(r, engine_ws, stream); st != status::success) return st;

  // dW: for N ≤ 2 a thread a step; for N = 4, 8, 16 with 16-byte steps a thread a 16-byte word,
  // the words of a block's steps in order; else groups of steps of about 2048 elements, 256
  // threads each (a thread a step measured 1.7× slower at N = 4: its 16 stores a step, 64 bytes
  // apart from the next thread's, each touch 32 sectors; docs/performance.md).
  const auto outer = [&](const auto* xs, strided_blocks lxs) {
    using X = std::remove_cv_t<std::remove_pointer_t<decltype(xs)>>;
    const unsigned steps_grid = grid_for((B * L + 255) / 256);
    const auto by_step = [&](auto n_tag) {
      outer_steps_kernel<decltype(n_tag)::value, T, X, C><<<steps_grid, 256, 0, stream>>>(
          g.dW, blocks_of(p.dW), g.db, blocks_of(p.db), xs, lxs, g.x0, B, L, g.reverse);
    };
    if (N == 1) return by_step(std::integral_constant<int, 1>{});
    if (N == 2) return by_step(std::integral_constant<int, 2>{});
    const auto by_word = [&](auto n_tag) {
      constexpr int n = decltype(n_tag)::value;
      constexpr int steps = outer_word_shape<n, T>::steps;
      outer_words_kernel<n, T, X, C><<<grid_for(B * ((L + steps - 1) / steps)), 256, 0, stream>>>(
          g.dW, blocks_of(p.dW), g.db, blocks_of(p.db), xs, lxs, g.x0, B, L, g.reverse);
    };
    if (outer_by_words(N, g.dW, p.dW.batch_stride, p.dW.step_stride, by_word)) return;
    const int group = static_cast<int>(std::max<index_t>(1, 2048 / (N * N)));
    outer_kernel<T, X, C><<<grid_for(B * ((L + group - 1) / group)), 256, 0, stream>>>(
        g.dW, blocks_of(p.dW), g.db, blocks_of(p.db), xs, lxs, g.x0, B, L, N, g.reverse, group);
  };
  if (g.x) outer(g.x, blocks_of(p.x));
  else outer(x_tmp, x_dense);
  if (status st = check_launch(); st != status::success) return st;
  if (dx0) {  // dx0 = W[first]ᵀ·db[first]; dx_final (which dx0 may be) was read by the db run
    dx0_kernel<T, C><<<grid_for((B * N + 255) / 256), 256, 0, stream>>>(dx0, g.W, blocks_of(p.W), dbf, B, L, N,
                                                                          g.reverse);
    if (status st = check_launch(); st != status::success) return st;
  }
  return status::success;
}

// ---------------------------------------------------------------------------------------
// The matrix recurrence over packed sequences (cu_seqlens, in device memory, not read here).

template <class T>
std::size_t matrix_recurrence_workspace_size(const matrix_varlen_forward_args<T>& g) {
  detail::matrix_forward_plan p;
  if (detail::plan_matrix_varlen_forward(g, false, p) != status::success) return 0;
  const matrix_varlen_shape& s = g.shape;
  return cuda_detail::packed_engine_workspace<compute_t<T>>(s.sequences, s.total_length, s.n);
}

template <class T>
std::size_t matrix_recurrence_workspace_size(const matrix_varlen_backward_args<T>& g) {
  detail::matrix_backward_plan p;
  if (detail::plan_matrix_varlen_backward(g, false, p) != status::success) return 0;
  using namespace cuda_detail;
  using C = compute_t<T>;
  const matrix_varlen_shape& s = g.shape;
  // x (recomputed, dense (total, N)), db at each sequence's first step, the engine's storage.
  return sat_add(sat_add(recompute_bytes(detail::packed_matrix_backward(g)),
                         ws_bytes(static_cast<std::size_t>(s.sequences * s.n), sizeof(C))),
                 packed_engine_workspace<C>(s.sequences, s.total_length, s.n));
}

template <class T>
status matrix_recurrence_forward(const cuda_backend& be, const matrix_varlen_forward_args<T>& g) {
  detail::matrix_forward_plan p;
  if (status st = detail::plan_matrix_varlen_forward(g, false, p); st != status::success) return st;
  using namespace cuda_detail;
  using C = compute_t<T>;
  const matrix_varlen_shape& s = g.shape;
  const index_t S = s.sequences, N = s.n;
  cudaStream_t stream = be.stream;
  if (S == 0) return status::success;
  const std::size_t bytes = matrix_recurrence_workspace_size(g);
  if (bytes == ws_saturated) return status::exceeds_device_limits;
  workspace_lease ws(be);
  if (status st = ws.acquire(bytes); st != status::success) return st;
  if (s.total_length > 0) {
    const auto e = packed_problem<C>(g.W, p.W.step_stride, g.b, p.b.step_stride, g.x, p.x.step_stride, g.x0,
                                     g.x_final, s, g.reverse, 0);
    if (status st = run_packed_engine(e, ws.get(), stream); st != status::success) return st;
  }
  if (!g.x_final) return status::success;  // else the sequences of no steps: x_final = x0
  packed_states_kernel<T, C><<<grid_for((S * N + 255) / 256), 256, 0, stream>>>(
      g.x_final, g.x0, static_cast<const T*>(nullptr), 0, static_cast<const C*>(nullptr), s.cu_seqlens, S, N, false);
  return check_launch();
}

template <class T>
status matrix_recurrence_backward(const cuda_backend& be, const matrix_varlen_backward_args<T>& g) {
  detail::matrix_backward_plan p;
  if (status st = detail::plan_matrix_varlen_backward(g, false, p); st != status::success) return st;
  using namespace cuda_detail;
  using C = compute_t<T>;
  const matrix_varlen_shape& s = g.shape;
  const index_t S = s.sequences, L = s.total_length, N = s.n;
  T* const dx0 = g.x0 ? g.dx0 : nullptr;
  cudaStream_t stream = be.stream;
  if (S == 0) return status::success;
  const std::size_t bytes = matrix_recurrence_workspace_size(g);
  if (bytes == ws_saturated) return status::exceeds_device_limits;
  workspace_lease ws(be);
  if (status st = ws.acquire(bytes); st != status::success) return st;
  const std::size_t x_bytes = recompute_bytes(detail::packed_matrix_backward(g));
  char* w = static_cast<char*>(ws.get());
  C* const x_tmp = g.x ? nullptr : reinterpret_cast<C*>(w);
  C* const dbf = reinterpret_cast<C*>(w + x_bytes);
  void* const engine_ws = w + x_bytes + ws_bytes(static_cast<std::size_t>(S * N), sizeof(C));
  if (L > 0) {
    if (!g.x) {  // recompute the forward states, in compute precision, into the workspace
      const auto f = packed_problem<C>(g.W, p.W.step_stride, g.b, p.b.step_stride, x_tmp, N, g.x0,
                                       static_cast<T*>(nullptr), s, g.reverse, 0);
      if (status st = run_packed_engine(f, engine_ws, stream); st != status::success) return st;
    }
    // db: the engine backwards over each sequence's steps, on the next step's Wᵀ, from dx_final.
    const auto r = packed_problem<C>(g.W, p.W.step_stride, g.dx, p.dx.step_stride, g.db, p.db.step_stride,
                                     g.dx_final, dbf, s, !g.reverse, g.reverse ? -1 : 1);
    if (status st = run_packed_engine(r, engine_ws, stream); st != status::success) return st;
    // dW: a thread a 16-byte word where steps are whole aligned 16-byte words (N = 4, 8, 16), as
    // for a batch; else an element a thread.
    const auto outer = [&](const auto* xs, index_t sxs) {
      using X = std::remove_cv_t<std::remove_pointer_t<decltype(xs)>>;
      const auto by_word = [&](auto n_tag) {
        constexpr int n = decltype(n_tag)::value;
        constexpr int steps = outer_word_shape<n, T>::steps;
        packed_outer_words_kernel<n, T, X, C><<<grid_for((L + steps - 1) / steps), 256, 0, stream>>>(
            g.dW, p.dW.step_stride, g.db, p.db.step_stride, xs, sxs, g.x0, s.cu_seqlens, S, L, g.reverse);
      };
      if (outer_by_words(N, g.dW, 0, p.dW.step_stride, by_word)) return;
      const int group = static_cast<int>(std::max<index_t>(1, 2048 / (N * N)));
      packed_outer_kernel<T, X, C><<<grid_for((L + group - 1) / group), 256, 0, stream>>>(
          g.dW, p.dW.step_stride, g.db, p.db.step_stride, xs, sxs, g.x0, s.cu_seqlens, S, L, N, g.reverse, group);
    };
    if (g.x) outer(g.x, p.x.step_stride);
    else outer(x_tmp, N);
    if (status st = check_launch(); st != status::success) return st;
  }
  if (!dx0) return status::success;  // dx0 = W[first]ᵀ·db[first], or dx_final with no steps
  packed_states_kernel<T, C><<<grid_for((S * N + 255) / 256), 256, 0, stream>>>(
      dx0, g.dx_final, g.W, p.W.step_stride, dbf, s.cu_seqlens, S, N, g.reverse);
  return check_launch();
}

// ---------------------------------------------------------------------------------------
// Matrix chains.

template <class T>
std::size_t matrix_chain_workspace_size(const matrix_chain_args<T>& g) {
  detail::matrix_chain_plan p;
  if (detail::plan_matrix_chain(g, p) != status::success) return 0;
  using namespace cuda_detail;
  const bool prefixes = g.output == chain_output::prefixes;
  const std::size_t levels = chain_workspace<compute_t<T>>(g.batch, g.count, g.d, prefixes);
  if (levels == 0 || !chain_on_cublas<T>(g.d, prefixes)) return levels;
  return sat_add(levels, chain_cublas_reserve);
}

template <class T>
status matrix_chain(const cuda_backend& be, const matrix_chain_args<T>& g) {
  detail::matrix_chain_plan p;
  if (status st = detail::plan_matrix_chain(g, p); st != status::success) return st;
  using namespace cuda_detail;
  using C = compute_t<T>;
  cudaStream_t stream = be.stream;
  const index_t B = p.batch, n = p.count, d = p.d, dd = d * d;
  const bool ltr = g.order == chain_order::left_to_right, prefixes = g.output == chain_output::prefixes;
  if (B == 0 || (prefixes && n == 0)) return status::success;
  const index_t Mb = p.M.batch_stride, Ms = p.M.step_stride, Ob = p.out.batch_stride, Os = p.out.step_stride;
  if (n == 0)  // the empty product: the identity
    return mat_copy<T, T>(mat_list<const T>{}, list_of(g.out, Ob, 0, 1), B, d, stream);
  if (n == 1)  // P_0 = M_0 in either order
    return mat_copy<T, T>(list_of<const T>(g.M, Mb, Ms, 1), list_of(g.out, Ob, Os, 1), B, d, stream);

  const std::size_t bytes = matrix_chain_workspace_size(g);
  if (bytes == ws_saturated) return status::exceeds_device_limits;
  workspace_lease ws(be);
  if (status st = ws.acquire(bytes); st != status::success) return st;
  char* w = static_cast<char*>(ws.get());

  if (const chain_thread_plan t = plan_chain_threads<C>(B, n, d, prefixes); t.applies) {
    // Many small chains: exact, whatever g.math.
    if (d <= 4) return chain_threads<4>(g, p, t, w, stream);
    if (d <= 8) return chain_threads<8>(g, p, t, w, stream);
    return chain_threads<16>(g, p, t, w, stream);
  }
  if (d <= chunk_engine_max_d) {
    // Whatever g.math: at d ≤ 64 the chain is bound by latency, not arithmetic, so exact
    // products in shared memory are as fast as tensor cores would be (the opt-in is a permission).
    chain_chunks<T, C> c;
    c.M = g.M, c.Mb = Mb, c.Ms = Ms, c.out = g.out, c.Ob = Ob, c.Os = Os, c.B = B, c.n = n, c.d = static_cast<int>(d);
    c.ltr = ltr;
    c.len = chunk_engine_len(B, n, prefixes), c.chunks = (n + c.len - 1) / c.len;
    if (prefixes) return d <= 32 ? chain_chunked<2, true>(c, w, stream) : chain_chunked<4, true>(c, w, stream);
    return d <= 32 ? chain_chunked<2, false>(c, w, stream) : chain_chunked<4, false>(c, w, stream);
  }

  // Two factors in chain order: P = X·Y (left to right) or Y·X (right to left) for X earlier.
  // chain_math::tf32 / bf16 take the tensor-core GEMM (float compute only; T = double is exact).
  const bool tensor = std::is_same<C, float>::value && g.math != chain_math::exact;
  const mma_kind kind = g.math == chain_math::bf16 ? mma_kind::bf16 : mma_kind::tf32;
  (void)tensor, (void)kind;  // unused for T = double
  // Float totals of d ≥ chain_cublas_min_d: every level on cuBLAS, with the end of the
  // workspace (aligned) for its own.
  const bool on_cublas = chain_on_cublas<T>(d, prefixes);
  void* const cublas_ws = on_cublas ? reinterpret_cast<void*>(
      (reinterpret_cast<std::uintptr_t>(w + bytes - chain_cublas_reserve) + 255) / 256 * 256) : nullptr;
  auto mul = [&](auto x, auto y, auto o, index_t count) {
    using TX = std::remove_const_t<std::remove_pointer_t<decltype(x.ptr)>>;
    using TY = std::remove_const_t<std::remove_pointer_t<decltype(y.ptr)>>;
    using TO = std::remove_pointer_t<decltype(o.ptr)>;
    if constexpr (std::is_same<TX, float>::value && std::is_same<TY, float>::value && std::is_same<TO, float>::value) {
      if (on_cublas)
        return ltr ? cublas_chain_products(x, y, o, count, d, g.math, cublas_ws, stream)
                   : cublas_chain_products(y, x, o, count, d, g.math, cublas_ws, stream);
    }
    if constexpr (std::is_same<C, float>::value) {
      if (tensor) {
        if (kind == mma_kind::tf32)
          return ltr ? mma_gemm<mma_kind::tf32, TX, TY, TO>(x, y, o, count, d, stream)
                     : mma_gemm<mma_kind::tf32, TY, TX, TO>(y, x, o, count, d, stream);
        return ltr ? mma_gemm<mma_kind::bf16, TX, TY, TO>(x, y, o, count, d, stream)
                   : mma_gemm<mma_kind::bf16, TY, TX, TO>(y, x, o, count, d, stream);
      }
    }
    return ltr ? gemm<TX, TY, TO, C>(x, y, o, count, d, stream) : gemm<TY, TX, TO, C>(y, x, o, count, d, stream);
  };

  if (!prefixes) {
    // A tree: level by level, adjacent pairs multiply in chain order (an odd last one moves up
    // as is), ping-ponging between two workspace buffers; the last level writes `out`.
    const std::size_t half = static_cast<std::size_t>((n + 1) / 2);
    C* buf[2] = {reinterpret_cast<C*>(w),
                 reinterpret_cast<C*>(w + ws_bytes(static_cast<std::size_t>(B) * half * static_cast<std::size_t>(dd), sizeof(C)))};
    index_t count = n;
    int level = 0;
    const C* src = nullptr;  // the previous level's output (dense (B, count, d, d)); null: M
    while (count > 1) {
      const index_t pairs = count / 2, next = (count + 1) / 2;
      const bool last = next == 1;
      C* dst = buf[level % 2];
      status st;
      if (last) {  // count == 2: one product per chain, straight into out
        auto o = list_of(g.out, Ob, 0, 1);
        if (!src) st = mul(list_of<const T>(g.M, Mb, Ms, 1, 0), list_of<const T>(g.M, Mb, Ms, 1, 1), o, B);
        else st = mul(list_of<const C>(src, 2 * dd, dd, 1, 0), list_of<const C>(src, 2 * dd, dd, 1, 1), o, B);
      } else {
        auto o = list_of(dst, next * dd, dd, pairs);
        if (!src) {
          st = mul(list_of<const T>(g.M, Mb, Ms, pairs, 0, 2), list_of<const T>(g.M, Mb, Ms, pairs, 1, 2), o,
                   B * pairs);
          if (st == status::success && count % 2)
            st = mat_copy<T, C>(list_of<const T>(g.M, Mb, Ms, 1, count - 1), list_of(dst, next * dd, dd, 1, pairs), B,
                                d, stream);
        } else {
          st = mul(list_of<const C>(src, count * dd, dd, pairs, 0, 2), list_of<const C>(src, count * dd, dd, pairs, 1, 2),
                   o, B * pairs);
          if (st == status::success && count % 2)
            st = mat_copy<C, C>(list_of<const C>(src, count * dd, dd, 1, count - 1),
                                list_of(dst, next * dd, dd, 1, pairs), B, d, stream);
        }
      }
      if (st != status::success) return st;
      src = dst;
      count = next;
      ++level;
    }
    return status::success;
  }

  // Prefixes of d > chunk_engine_max_d: chunks of L positions. (1) local prefixes within each
  // chunk, sequentially over the positions, in parallel over (chain, chunk), into workspace;
  // (2) the carries (the product of all earlier chunks), sequentially over chunks; (3) out =
  // local·carry in chain order (chunk 0: the local prefixes themselves).
  const index_t L = chain_chunk(n), chunks = (n + L - 1) / L;
  C* loc = reinterpret_cast<C*>(w);
  C* car = reinterpret_cast<C*>(w + ws_bytes(static_cast<std::size_t>(B * n * dd), sizeof(C)));
  const index_t Lb = n * dd;  // loc: dense (B, n, d, d)
  for (index_t j = 0; j < L; ++j) {
    const index_t with_j = (n - j + L - 1) / L;  // chunks that have a position j
    auto o = list_of(loc, Lb, dd, with_j, j, L);
    status st;
    if (j == 0) st = mat_copy<T, C>(list_of<const T>(g.M, Mb, Ms, with_j, 0, L), o, B * with_j, d, stream);
    else
      st = mul(list_of<const C>(loc, Lb, dd, with_j, j - 1, L), list_of<const T>(g.M, Mb, Ms, with_j, j, L), o,
               B * with_j);
    if (st != status::success) return st;
  }
  // car[c] (c = 0..chunks-2): the product of chunks 0..c, i.e. the carry into chunk c+1.
  const index_t Cb = chunks * dd;
  if (chunks > 1) {
    if (status st = mat_copy<C, C>(list_of<const C>(loc, Lb, dd, 1, L - 1), list_of(car, Cb, dd, 1), B, d, stream);
        st != status::success)
      return st;
    for (index_t c = 1; c + 1 < chunks; ++c) {
      const index_t end = std::min(n, (c + 1) * L) - 1;  // the chunk's last position (a full chunk here)
      if (status st = mul(list_of<const C>(car, Cb, dd, 1, c - 1), list_of<const C>(loc, Lb, dd, 1, end),
                          list_of(car, Cb, dd, 1, c), B);
          st != status::success)
        return st;
    }
  }
  // out: chunk 0 converts; positions k ≥ L multiply by car[k / L - 1].
  if (status st = mat_copy<C, T>(list_of<const C>(loc, Lb, dd, std::min(n, L)), list_of(g.out, Ob, Os, std::min(n, L)),
                                 B * std::min(n, L), d, stream);
      st != status::success)
    return st;
  if (n > L) {
    const index_t rest = n - L;
    return mul(list_of<const C>(car, Cb, dd, rest, 0, 1, L), list_of<const C>(loc, Lb, dd, rest, L),
               list_of(g.out, Ob, Os, rest, L), B * rest);
  }
  return status::success;
}

}  // namespace parscan

#define PARSCAN_INSTANTIATE_MATRIX_CUDA(T)                                                              \
  template status matrix_recurrence_forward<T>(const cuda_backend&, const matrix_forward_args<T>&);    \
  template status matrix_recurrence_backward<T>(const cuda_backend&, const matrix_backward_args<T>&);  \
  template status matrix_chain<T>(const cuda_backend&, const matrix_chain_args<T>&);                   \
  template std::size_t matrix_recurrence_workspace_size<T>(const matrix_forward_args<T>&);             \
  template std::size_t matrix_recurrence_workspace_size<T>(const matrix_backward_args<T>&);            \
  template std::size_t matrix_chain_workspace_size<T>(const matrix_chain_args<T>&);                  \
  template status matrix_recurrence_forward<T>(const cuda_backend&, const matrix_varlen_forward_args<T>&);   \
  template status matrix_recurrence_backward<T>(const cuda_backend&, const matrix_varlen_backward_args<T>&); \
  template std::size_t matrix_recurrence_workspace_size<T>(const matrix_varlen_forward_args<T>&);            \
  template std::size_t matrix_recurrence_workspace_size<T>(const matrix_varlen_backward_args<T>&);
