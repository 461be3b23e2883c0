// parscan/cuda/matrix/matrix_thread_engine.cuh — the thread engine: the three phases of the
// matrix recurrence engine (matrix_kernels.cuh) for N ≤ thread_engine_max_n.
//
// For small N a (sequence, chunk) task's whole state fits one thread's registers: A and v
// (N² + N values in aggregate precision) when aggregating, z (N values) when re-running. So
// each thread owns one task, and the step loop neither shuffles nor waits. (The warp engine,
// with N + 1 lanes per task, spent its time staging: N = 2 ran at 10–12% of copy.)
//   - A warp's 32 tasks are staged U steps at a time into the warp's shared memory, two stages
//     deep, with cp.async, so the next stage is in flight while this one computes. A whole
//     stage (U adjacent, 16-byte aligned steps of W' and of b') is copied by the warp
//     together, a few tasks per instruction, so each copy touches a few lines: copied by its
//     own lane, 16 bytes from each of 32 tasks per instruction, the forward at N = 2 reached
//     only 20% of copy. Any other stage (a sequence's end, strided or misaligned steps, the
//     transposed run's first step) is copied by its own lane, as wide as alignment allows.
//   - Each thread reads its own task's steps back 16 bytes at a time (a task's stage is an odd
//     number of 16-byte units, so 8 lanes' reads fall in distinct banks).
//   - The re-run's states go out through shared memory, whole stages by the warp together.
// Phase b (thread_carry_kernel) gives each sequence a block: each thread composes a few
// consecutive chunk maps, a block scan combines the threads, and each thread walks its chunks
// from the state entering them, writing their carries. A sequence costs one round of the block
// instead of chunks / 32 dependent rounds of a warp, so sequences can take many short chunks.
// For N ≤ 2 a batch takes the single pass instead (thread_pass::single): a block stages a tile
// of 128 chunks whole, composes their maps, learns the tile's prefix from a look-back
// (agent/window_chain.cuh) and re-runs the chunks from the staged steps, so W' and b' are read
// once rather than twice.
#pragma once

#include "../agent/window_chain.cuh"
#include "../thread/run_io.cuh"
#include "matrix_kernels.cuh"

namespace parscan::cuda_detail {

inline constexpr int thread_engine_max_n = 4;
inline constexpr int thread_engine_warps = 4;     // warps per block of the chunk kernel
inline constexpr int thread_carry_threads = 256;  // threads per block of phase b

constexpr std::size_t round16c(std::size_t b) { return (b + 15) / 16 * 16; }

/// The shared-memory layout of one warp of thread_chunk_kernel for state size N, storage T and
/// compute C. A task's stage holds U steps of W' (then padding to 16 bytes), then U of b', in
/// memory order (for a descending run, the last step first).
template <int N, class T, class XO>
struct thread_layout {
  static constexpr int per_step = N * N + N;
  // Steps per stage: about 96 elements per task (a few KB per warp in flight), 2 to 8 steps.
  static constexpr int steps = 96 / per_step > 8 ? 8 : (96 / per_step < 2 ? 2 : 96 / per_step);
  static constexpr int vec = 16 / static_cast<int>(sizeof(T));  // elements per 16 bytes
  static constexpr int b_at = (steps * N * N + vec - 1) / vec * vec;  // where b' starts
  // A task's stage is an odd number of 16-byte units, so the 16-byte reads of 8 lanes (a
  // shared-memory wavefront) fall in distinct banks.
  static constexpr int units = ((b_at + steps * N) * static_cast<int>(sizeof(T)) + 15) / 16;
  static constexpr int task_stride = (units | 1) * vec;
  static constexpr std::size_t stage_bytes = 32 * task_stride * sizeof(T);
  // The re-run's states of a stage, in the output type, likewise.
  static constexpr int out_units = (steps * N * static_cast<int>(sizeof(XO)) + 15) / 16;
  static constexpr int out_stride = (out_units | 1) * 16 / static_cast<int>(sizeof(XO));
  static constexpr std::size_t out_bytes = 32 * out_stride * sizeof(XO);
  static constexpr std::size_t warp_bytes = 2 * stage_bytes + out_bytes;
  static constexpr std::size_t block_bytes = thread_engine_warps * warp_bytes;
  // Whole 16-byte units of a task's stage (W', then b') and of its states: the warp copies
  // those of every task whose stage is whole, adjacent and aligned together, `per` tasks at a
  // time, so each copy instruction touches a few lines rather than 32.
  static constexpr bool W_whole = steps * N * N * sizeof(T) % 16 == 0, b_whole = steps * N * sizeof(T) % 16 == 0;
  static constexpr int W_units = static_cast<int>(steps * N * N * sizeof(T) / 16);
  static constexpr int in_units = W_units + static_cast<int>(steps * N * sizeof(T) / 16);
  // The transposed run (the backward) reads W' one step after b': where a step of W is 8 bytes
  // (N = 2, 16-bit), its stages start 8-byte aligned every other chunk, and are copied whole
  // in 8-byte units of W (then b' in 16-byte ones) rather than by their own lane.
  static constexpr int W_units8 = static_cast<int>(steps * N * N * sizeof(T) / 8);
  static constexpr bool W_halves = W_whole && b_whole && N * N * sizeof(T) == 8 && W_units8 + in_units - W_units <= 32;
  static constexpr bool x_whole = steps * N * sizeof(XO) % 16 == 0;
  static constexpr int x_units = static_cast<int>(steps * N * sizeof(XO) / 16);
};

/// Dynamic shared memory of a block of thread_chunk_kernel: the single pass needs no output
/// stage where a state is the size of an input element (it writes states over b').
template <int N, class T, class XO>
constexpr std::size_t thread_block_bytes(bool single) {
  using L = thread_layout<N, T, XO>;
  return single && sizeof(XO) == sizeof(T) ? thread_engine_warps * 2 * L::stage_bytes : L::block_bytes;
}

/// Starts copying `elems` contiguous elements into shared memory with the widest cp.async that
/// both addresses and the length allow (completed by the caller's cp.async.wait_group); a
/// 16-bit run that is not even 4-byte aligned is copied with plain loads and stores.
template <class T>
__device__ PARSCAN_INLINE void stage_block(T* dst, const T* src, int elems) {
  const int bytes = elems * static_cast<int>(sizeof(T));
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const unsigned align = static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(src)) | to | static_cast<unsigned>(bytes);
  const char* from = reinterpret_cast<const char*>(src);
  char* into = reinterpret_cast<char*>(dst);
  if (align % 16 == 0) {
    for (int k = 0; k < bytes; k += 16) stage_bytes<16>(into + k, from + k);
  } else if (align % 8 == 0) {
    for (int k = 0; k < bytes; k += 8) stage_bytes<8>(into + k, from + k);
  } else if (align % 4 == 0) {
    for (int k = 0; k < bytes; k += 4) stage_bytes<4>(into + k, from + k);
  } else {
    for (int k = 0; k < elems; ++k) dst[k] = src[k];
  }
}

/// Starts copying `steps` blocks of `block` elements, `stride` apart in global memory, into
/// consecutive blocks in shared memory: as one run where they are adjacent.
template <class T>
__device__ PARSCAN_INLINE void stage_steps_of(T* dst, const T* src, index_t stride, int steps, int block) {
  if (stride == block || steps == 1) {
    stage_block(dst, src, steps * block);
  } else {
    for (int j = 0; j < steps; ++j) stage_block(dst + j * block, src + j * stride, block);
  }
}

/// Reads K staged elements, 16, 8 or 4 bytes at a time as their size allows (src is aligned to
/// the largest of those that divides K·sizeof(T)).
template <int K, class T>
__device__ PARSCAN_INLINE void read_block(const T* src, T (&out)[K]) {
  constexpr int bytes = K * static_cast<int>(sizeof(T));
  if constexpr (bytes % 16 == 0) {
#pragma unroll
    for (int v = 0; v < bytes / 16; ++v) {
      const uint4 w = reinterpret_cast<const uint4*>(src)[v];
      memcpy(reinterpret_cast<char*>(out) + 16 * v, &w, 16);
    }
  } else if constexpr (bytes % 8 == 0) {
#pragma unroll
    for (int v = 0; v < bytes / 8; ++v) {
      const uint2 w = reinterpret_cast<const uint2*>(src)[v];
      memcpy(reinterpret_cast<char*>(out) + 8 * v, &w, 8);
    }
  } else if constexpr (bytes % 4 == 0) {
#pragma unroll
    for (int v = 0; v < bytes / 4; ++v) {
      const unsigned w = reinterpret_cast<const unsigned*>(src)[v];
      memcpy(reinterpret_cast<char*>(out) + 4 * v, &w, 4);
    }
  } else {
#pragma unroll
    for (int k = 0; k < K; ++k) out[k] = src[k];
  }
}

/// A chunk's affine map z ↦ A·z + v in aggregate precision.
template <int N, class D>
struct chunk_map {
  D A[N][N], v[N];
  __device__ PARSCAN_INLINE static chunk_map identity() {
    chunk_map m;
#pragma unroll
    for (int r = 0; r < N; ++r) {
      m.v[r] = D(0);
#pragma unroll
      for (int c = 0; c < N; ++c) m.A[r][c] = D(r == c ? 1 : 0);
    }
    return m;
  }
  __device__ PARSCAN_INLINE static chunk_map load(const D* agg_A, const D* agg_v, index_t task) {
    chunk_map m;
#pragma unroll
    for (int r = 0; r < N; ++r) {
      m.v[r] = agg_v[task * N + r];
#pragma unroll
      for (int c = 0; c < N; ++c) m.A[r][c] = agg_A[task * N * N + r * N + c];
    }
    return m;
  }
  /// later ∘ earlier.
  __device__ PARSCAN_INLINE friend chunk_map after(const chunk_map& later, const chunk_map& earlier) {
    chunk_map m;
#pragma unroll
    for (int r = 0; r < N; ++r) {
      D a = later.v[r];
#pragma unroll
      for (int k = 0; k < N; ++k) a += later.A[r][k] * earlier.v[k];
      m.v[r] = a;
#pragma unroll
      for (int c = 0; c < N; ++c) {
        D s = D(0);
#pragma unroll
        for (int k = 0; k < N; ++k) s += later.A[r][k] * earlier.A[k][c];
        m.A[r][c] = s;
      }
    }
    return m;
  }
  __device__ PARSCAN_INLINE void apply(D (&z)[N]) const {
    D n[N];
#pragma unroll
    for (int r = 0; r < N; ++r) {
      D a = v[r];
#pragma unroll
      for (int k = 0; k < N; ++k) a += A[r][k] * z[k];
      n[r] = a;
    }
#pragma unroll
    for (int r = 0; r < N; ++r) z[r] = n[r];
  }
  __device__ PARSCAN_INLINE chunk_map shfl_up(int d) const {
    chunk_map m;
#pragma unroll
    for (int r = 0; r < N; ++r) {
      m.v[r] = __shfl_up_sync(0xffffffffu, v[r], d);
#pragma unroll
      for (int c = 0; c < N; ++c) m.A[r][c] = __shfl_up_sync(0xffffffffu, A[r][c], d);
    }
    return m;
  }
};

/// Composition of chunk maps in step order, as the look-backs and warp scans take it:
/// op(earlier, later) = later ∘ earlier.
struct chunk_map_order {
  template <class Map>
  __device__ PARSCAN_INLINE Map operator()(const Map& earlier, const Map& later) const {
    return after(later, earlier);
  }
};

/// What a launch of the thread engine's chunk kernel does: phase a (aggregate each chunk's map),
/// phase c (re-run each chunk from its carry), or the single pass (each block a tile of 128
/// chunks at a time: their maps, a block scan, a look-back over the sequence's earlier tiles,
/// the re-run).
enum class thread_pass { rerun, aggregate, single };

/// The single pass's state: the tiles' look-back records (agent/window_chain.cuh) and the
/// counter tiles are claimed from, in order; zeroed before each launch. A tile is a block's:
/// 32 chunks a warp of two stages (2·thread_layout::steps steps) each.
template <int N, class D>
struct thread_pass_state {
  using chain = window_chain_state<chunk_map<N, D>>;
  chain records;
  unsigned long long* next_tile = nullptr;
  index_t tiles_per_sequence = 0, windows_per_sequence = 0;

  static index_t tiles_for(index_t length, int tile_steps) { return (length + tile_steps - 1) / tile_steps; }
  static index_t windows_for(index_t tiles) { return (tiles + chain_window - 1) / chain_window; }
  static std::size_t bytes(index_t batch, index_t length, int tile_steps) {
    const index_t tiles = tiles_for(length, tile_steps);
    return 256 + chain::bytes(batch * tiles, batch * windows_for(tiles));
  }
  static thread_pass_state carve(void* base, index_t batch, index_t length, int tile_steps) {
    thread_pass_state s;
    s.tiles_per_sequence = tiles_for(length, tile_steps);
    s.windows_per_sequence = windows_for(s.tiles_per_sequence);
    s.next_tile = static_cast<unsigned long long*>(base);
    s.records = chain::carve(static_cast<char*>(base) + 256, batch * s.tiles_per_sequence,
                             batch * s.windows_per_sequence);
    return s;
  }
};

/// Phase a, phase c or the single pass (Pass) of the thread engine for state size N = p.n.
/// Phases a and c take tasks round by round (task = round·32 + lane); in the single pass a block
/// claims tiles in order from a counter and stages each whole (both of a warp's stages).
template <thread_pass Pass, int N, class T, class XO, class FO, class C>
__global__ void __launch_bounds__(32 * thread_engine_warps)
    thread_chunk_kernel(engine_problem<T, XO, FO, C> p, thread_pass_state<N, aggregate_t<C>> single) {
  constexpr bool Aggregate = Pass == thread_pass::aggregate;
  using D = aggregate_t<C>;
  using L = thread_layout<N, T, XO>;
  using map = chunk_map<N, D>;
  constexpr int U = L::steps, NN = N * N;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr unsigned all_lanes = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  // The single pass writes a stage's states over its b' where they are the same size (each
  // step's b' is read before its state is written), so a warp needs no output stage.
  constexpr bool states_over_b = Pass == thread_pass::single && sizeof(XO) == sizeof(T);
  constexpr std::size_t warp_bytes = states_over_b ? 2 * L::stage_bytes : L::warp_bytes;
  unsigned char* mine = smem_raw + warp * warp_bytes;
  T* const stage_base = reinterpret_cast<T*>(mine);
  auto stage_of = [&](int buf) { return stage_base + buf * (32 * L::task_stride); };
  // A task's states of the stage in buffer `buf`, in memory order, and one task's stride there.
  constexpr int out_stride = states_over_b ? L::task_stride : L::out_stride;
  auto outs_of = [&](int buf) {
    if constexpr (states_over_b) return reinterpret_cast<XO*>(stage_of(buf) + L::b_at);
    else return reinterpret_cast<XO*>(mine + 2 * L::stage_bytes);
  };

  const bool transposed = p.w_shift != 0;

  auto count_of = [&](const engine_task& job, index_t q) {
    const index_t left = job.m1 - (job.m0 + q * U);
    return left <= 0 ? 0 : (left < U ? static_cast<int>(left) : U);
  };
  // The lowest time of stage q (its steps are times lo … lo + count - 1 in memory order).
  auto low_time = [&](const engine_task& job, index_t q, int count) {
    const index_t m = job.m0 + q * U;
    return job.origin + (p.descending ? job.length - 1 - m - (count - 1) : m);
  };
  // Starts copying stage q of every task of the warp into buffer `buf`. A whole stage (U
  // adjacent, aligned steps of W' and of b') is copied by the warp together; any other (a
  // sequence's end, strided or misaligned steps, engine step 0 of the transposed run, which
  // reads no W') by its own lane, one run of memory where the steps are adjacent.
  auto issue = [&](const engine_task& job, index_t q, int buf) {
    const int count = count_of(job, q);
    const index_t lo = low_time(job, q, count), m = job.m0 + q * U;
    T* const own = stage_of(buf) + lane * L::task_stride;
    const int skip = transposed && m == 0 ? 1 : 0;  // leading steps without W'
    const int skip_lo = p.descending ? 0 : skip;     // ... at the low end of memory
    const T* const W_lo = count > 0 ? p.W + p.lW.at(job.seq, lo + skip_lo + p.w_shift) : p.W;
    const T* const b_lo = count > 0 ? p.b + p.lb.at(job.seq, lo) : p.b;
    // Whole stages: W' in 16-byte units (whole16), or in 8-byte ones (whole8, L::W_halves).
    bool whole16 = false, whole8 = false;
    if constexpr (L::W_whole && L::b_whole && L::in_units <= 32) {
      const bool dense = count == U && skip == 0 && p.lW.step == NN && p.lb.step == N && aligned16(b_lo);
      whole16 = dense && aligned16(W_lo);
      if constexpr (L::W_halves) whole8 = dense && !whole16 && reinterpret_cast<std::uintptr_t>(W_lo) % 8 == 0;
    }
    if (count > 0 && !whole16 && !whole8) {
      if (count > skip) stage_steps_of(own + skip_lo * NN, W_lo, p.lW.step, count - skip, NN);
      stage_steps_of(own + L::b_at, b_lo, p.lb.step, count, N);
    }
    // The warp copies the whole stages of its tasks, `per` tasks a round: W' in units of WUnit
    // bytes, then b' in 16-byte units.
    auto copy_whole = [&](unsigned whole_tasks, auto w_unit) {
      constexpr int WUnit = decltype(w_unit)::value, W_units = L::W_units * 16 / WUnit;
      constexpr int units = W_units + L::in_units - L::W_units, per = 32 / units;
      const int sub = lane / units, unit = lane % units;
#pragma unroll 4
      for (int i0 = 0; i0 < 32; i0 += per) {
        const int i = i0 + sub < 32 ? i0 + sub : 31;
        const auto* Wi =
            reinterpret_cast<const char*>(__shfl_sync(all_lanes, reinterpret_cast<std::uintptr_t>(W_lo), i));
        const auto* bi =
            reinterpret_cast<const char*>(__shfl_sync(all_lanes, reinterpret_cast<std::uintptr_t>(b_lo), i));
        if (sub < per && i0 + sub < 32 && ((whole_tasks >> i) & 1u)) {
          char* const to = reinterpret_cast<char*>(stage_of(buf) + i * L::task_stride);
          if (unit < W_units) stage_bytes<WUnit>(to + WUnit * unit, Wi + WUnit * unit);
          else stage_bytes<16>(to + L::b_at * sizeof(T) + 16 * (unit - W_units), bi + 16 * (unit - W_units));
        }
      }
    };
    if constexpr (L::W_whole && L::b_whole && L::in_units <= 32)
      copy_whole(__ballot_sync(all_lanes, whole16), std::integral_constant<int, 16>{});
    if constexpr (L::W_halves)
      if (transposed) copy_whole(__ballot_sync(all_lanes, whole8), std::integral_constant<int, 8>{});
  };
  // Writes the re-run's stage q from the output stage to x: whole stages by the warp
  // together, 16 bytes a lane, the others by their own lane.
  auto copy_out = [&](const engine_task& job, index_t q, int buf) {
    XO* const outs = outs_of(buf);
    const int count = count_of(job, q);
    XO* const x_lo = count > 0 ? p.x + p.lx.at(job.seq, low_time(job, q, count)) : p.x;
    bool whole = false;
    if constexpr (L::x_whole && L::x_units <= 32) whole = count == U && p.lx.step == N && aligned16(x_lo);
    if (count > 0 && !whole)
      for (int j = 0; j < count; ++j)
#pragma unroll
        for (int r = 0; r < N; ++r) x_lo[j * p.lx.step + r] = outs[lane * out_stride + j * N + r];
    if constexpr (L::x_whole && L::x_units <= 32) {
      constexpr int per = 32 / L::x_units;
      const unsigned whole_tasks = __ballot_sync(all_lanes, whole);
      const int sub = lane / L::x_units, unit = lane % L::x_units;
#pragma unroll 4
      for (int i0 = 0; i0 < 32; i0 += per) {
        const int i = i0 + sub < 32 ? i0 + sub : 31;
        auto* xi = reinterpret_cast<char*>(__shfl_sync(all_lanes, reinterpret_cast<std::uintptr_t>(x_lo), i));
        if (sub < per && i0 + sub < 32 && ((whole_tasks >> i) & 1u))
          *reinterpret_cast<uint4*>(xi + 16 * unit) = reinterpret_cast<const uint4*>(outs + i * out_stride)[unit];
      }
    }
  };

  // One step: W'[r][k] is the staged W at (r, k), or at (k, r) when transposed. Aggregating: the
  // map (A, v) so far gains the step; re-running: the state z does.
  auto step = [&](const T* Wj, const T* bj, auto transposed_tag, auto aggregate_tag, D (&A)[N][N], D (&v)[N],
                  C (&z)[N]) {
    constexpr bool Tr = decltype(transposed_tag)::value;
    auto w = [&](int r, int k) { return Tr ? Wj[k * N + r] : Wj[r * N + k]; };
    if constexpr (decltype(aggregate_tag)::value) {
      D nA[N][N], nv[N];
#pragma unroll
      for (int r = 0; r < N; ++r) {
        D wr[N];
#pragma unroll
        for (int k = 0; k < N; ++k) wr[k] = static_cast<D>(to_c<C>(w(r, k)));
        D a = static_cast<D>(to_c<C>(bj[r]));
#pragma unroll
        for (int k = 0; k < N; ++k) a += wr[k] * v[k];
        nv[r] = a;
#pragma unroll
        for (int c = 0; c < N; ++c) {
          D s = D(0);
#pragma unroll
          for (int k = 0; k < N; ++k) s += wr[k] * A[k][c];
          nA[r][c] = s;
        }
      }
#pragma unroll
      for (int r = 0; r < N; ++r) {
        v[r] = nv[r];
#pragma unroll
        for (int c = 0; c < N; ++c) A[r][c] = nA[r][c];
      }
    } else {
      C nz[N];
#pragma unroll
      for (int r = 0; r < N; ++r) {
        C a = to_c<C>(bj[r]);
#pragma unroll
        for (int k = 0; k < N; ++k) a += to_c<C>(w(r, k)) * z[k];
        nz[r] = a;
      }
#pragma unroll
      for (int r = 0; r < N; ++r) z[r] = nz[r];
    }
  };
  // Runs this lane's steps of stage q (staged in buffer `buf`): aggregating into (A, v), or
  // re-running z into the output stage (and the final state at the sequence's last step).
  auto run_stage = [&](const engine_task& job, index_t q, int buf, auto aggregate_tag, D (&A)[N][N], D (&v)[N],
                       C (&z)[N]) {
    constexpr bool Agg = decltype(aggregate_tag)::value;
    const int count = count_of(job, q);
    const bool skip0 = transposed && job.m0 + q * U == 0;
    const T* const own = stage_of(buf) + lane * L::task_stride;
    XO* const outs = outs_of(buf);
#pragma unroll
    for (int j = 0; j < U; ++j) {
      if (j < count) {
        const int slot = p.descending ? count - 1 - j : j;  // memory order
        T bj[N];
        read_block(own + L::b_at + slot * N, bj);
        if (j == 0 && skip0) {  // the identity: z (or v) gains b'
#pragma unroll
          for (int r = 0; r < N; ++r) {
            if constexpr (Agg) v[r] += static_cast<D>(to_c<C>(bj[r]));
            else z[r] += to_c<C>(bj[r]);
          }
        } else {
          T Wj[NN];
          read_block(own + slot * NN, Wj);
          if (transposed) step(Wj, bj, std::true_type{}, aggregate_tag, A, v, z);
          else step(Wj, bj, std::false_type{}, aggregate_tag, A, v, z);
        }
        if constexpr (!Agg) {
#pragma unroll
          for (int r = 0; r < N; ++r) outs[lane * out_stride + slot * N + r] = from_c<XO>(z[r]);
          if (job.m0 + q * U + j == job.length - 1 && p.z_final)
#pragma unroll
            for (int r = 0; r < N; ++r) p.z_final[job.seq * N + r] = from_c<FO>(z[r]);
        }
      }
    }
  };

  D A[N][N], v[N];  // aggregating: the chunk's map so far (from the identity and 0)
  C z[N];           // re-running: the state
  auto reset = [&] {
#pragma unroll
    for (int r = 0; r < N; ++r) {
      v[r] = D(0), z[r] = C(0);
#pragma unroll
      for (int c = 0; c < N; ++c) A[r][c] = D(r == c ? 1 : 0);
    }
  };

  if constexpr (Pass != thread_pass::single) {
    const index_t tasks = p.task_count(), rounds = (tasks + 31) / 32;
    const index_t stages = (p.chunk + U - 1) / U;  // no task has more than `chunk` steps
    for (index_t round = static_cast<index_t>(blockIdx.x) * thread_engine_warps + warp; round < rounds;
         round += static_cast<index_t>(gridDim.x) * thread_engine_warps) {
      const index_t task = round * 32 + lane;
      const engine_task job = p.task_at(task);  // past the last task, or an unused slot: no steps
      const bool active = job.m1 > job.m0;
      reset();
      if (!Aggregate && active) {
#pragma unroll
        for (int r = 0; r < N; ++r) {
          if (p.chunked()) z[r] = static_cast<C>(p.carry[task * N + r]);
          else if (p.z0) z[r] = to_c<C>(p.z0[job.seq * N + r]);
        }
      }
      issue(job, 0, 0);
      async_commit();
      for (index_t q = 0; q < stages; ++q) {
        if (q + 1 < stages) issue(job, q + 1, static_cast<int>((q + 1) & 1));
        async_commit();   // one group per stage, empty or not, so the wait below counts stages
        async_wait<1>();  // this lane's copies of stage q are done
        __syncwarp();     // and every lane's, visible to the warp
        run_stage(job, q, static_cast<int>(q & 1), std::integral_constant<bool, Aggregate>{}, A, v, z);
        __syncwarp();  // every lane is done with stage q (and the output stage is complete)
        if constexpr (!Aggregate) {
          copy_out(job, q, 0);
          __syncwarp();  // the output stage is free again
        }
      }
      if (Aggregate && active) {
#pragma unroll
        for (int r = 0; r < N; ++r) {
          p.agg_v[task * N + r] = v[r];
#pragma unroll
          for (int c = 0; c < N; ++c) p.agg_A[task * NN + r * N + c] = A[r][c];
        }
      }
    }
  } else {
    // A warp's 32 chunks of a tile are 64 stages of U consecutive steps: warp_steps steps of a
    // sequence, from engine step warp_m0(t). Where those lie whole in memory (dense, aligned, not
    // past the sequence's end, no step without W'), the warp copies them as one run of W' and
    // one of b', 16 bytes a lane (W' in 8-byte units where it is 8-byte aligned only, as issue()
    // does with L::W_halves), each unit to its task's stage: a third of the instructions of
    // issue()'s copies stage by stage, which took a third of the kernel's (ncu,
    // docs/performance.md, "The single pass's copies, and 16-bit stages").
    constexpr int warp_steps = 64 * U;
    auto warp_m0 = [&](index_t t) { return (t * thread_engine_warps + warp) * static_cast<index_t>(warp_steps); };
    // Where the warp's run of W' and of b' starts in memory (the lowest of its times).
    struct run_start {
      const T* W;
      const T* b;
    };
    auto warp_run = [&](index_t s, index_t t) {
      const index_t m = warp_m0(t), lo = p.descending ? p.length - 1 - m - (warp_steps - 1) : m;
      return run_start{p.W + p.lW.at(s, lo + p.w_shift), p.b + p.lb.at(s, lo)};
    };
    // The bytes of W' a copy of the warp's run takes at once: 16, 8, or 0 where the run is not whole.
    auto warp_run_unit = [&](index_t t, const run_start& run) {
      if constexpr (!L::W_whole || !L::b_whole) {
        return 0;
      } else {
        const index_t m = warp_m0(t);
        if (m + warp_steps > p.length || (transposed && m == 0) || p.lW.step != NN || p.lb.step != N ||
            !aligned16(run.b))
          return 0;
        const auto W_at = reinterpret_cast<std::uintptr_t>(run.W);
        return W_at % 16 == 0 ? 16 : (L::W_halves && W_at % 8 == 0 ? 8 : 0);
      }
    };
    // Starts copying the warp's run: memory step ms of it is slot ms mod U (memory order) of
    // stage group g = ms / U, counted from the other end for a descending run; stage group g is
    // chunk g / 2 (the warp's lane) and stage g mod 2 (the buffer).
    auto copy_warp_run = [&](const run_start& run, int W_unit) {
      auto copy = [&](const T* from, int offset, auto step_bytes_tag, auto unit_tag) {
        constexpr int step_bytes = decltype(step_bytes_tag)::value, unit = decltype(unit_tag)::value;
        constexpr int units = warp_steps * step_bytes / unit;
        const char* const bytes = reinterpret_cast<const char*>(from);
#pragma unroll 4
        for (int i = lane; i < units; i += 32) {
          const int byte = unit * i, ms = byte / step_bytes, group = ms / U;
          const int g = p.descending ? 2 * 32 - 1 - group : group;
          char* const to = reinterpret_cast<char*>(stage_of(g & 1) + (g >> 1) * L::task_stride + offset);
          stage_bytes<unit>(to + (ms % U) * step_bytes + byte % step_bytes, bytes + byte);
        }
      };
      using W_step = std::integral_constant<int, NN * static_cast<int>(sizeof(T))>;
      using b_step = std::integral_constant<int, N * static_cast<int>(sizeof(T))>;
      if (W_unit == 16) copy(run.W, 0, W_step{}, std::integral_constant<int, 16>{});
      if constexpr (L::W_halves)
        if (W_unit == 8) copy(run.W, 0, W_step{}, std::integral_constant<int, 8>{});
      copy(run.b, L::b_at, b_step{}, std::integral_constant<int, 16>{});
    };
    // Tile k: sequence k / tiles_per_sequence and its chunks 128·t … 128·t + 127 (t = k mod
    // tiles_per_sequence) of two stages each, lane l of warp w chunk 128·t + 32·w + l. Tiles are
    // claimed in order as a block starts them, so every tile a look-back waits for is being
    // worked on or done.
    __shared__ index_t claimed;
    __shared__ map warp_maps[thread_engine_warps];  // each warp's chunks composed
    __shared__ maybe<map> tile_prefix;              // every earlier tile of the sequence composed
    constexpr int per_tile = 32 * thread_engine_warps;  // chunks a tile
    const index_t tiles = p.batch * single.tiles_per_sequence;
    for (;;) {
      if (threadIdx.x == 0) claimed = static_cast<index_t>(atomicAdd(single.next_tile, 1ull));
      __syncthreads();
      const index_t k = claimed;
      if (k >= tiles) break;
      const index_t s = k / single.tiles_per_sequence, t = k % single.tiles_per_sequence;
      engine_task job;
      job.seq = s, job.length = p.length;
      job.m0 = (t * per_tile + warp * 32 + lane) * (2 * U);
      job.m1 = job.m0 + 2 * U < p.length ? job.m0 + 2 * U : p.length;
      if (job.m0 >= job.m1) job.m0 = job.m1 = 0;
      const run_start run = warp_run(s, t);
      if (const int W_unit = warp_run_unit(t, run); W_unit != 0) {
        copy_warp_run(run, W_unit);
      } else {
        issue(job, 0, 0);
        issue(job, 1, 1);
      }
      async_commit();
      async_wait<0>();
      __syncwarp();
      reset();
      run_stage(job, 0, 0, std::true_type{}, A, v, z);
      run_stage(job, 1, 1, std::true_type{}, A, v, z);
      // The maps of the block's chunks in order: lane l of warp w through its warp, each warp's
      // composition, and the tile's.
      map m;
#pragma unroll
      for (int r = 0; r < N; ++r) {
        m.v[r] = v[r];
#pragma unroll
        for (int c = 0; c < N; ++c) m.A[r][c] = A[r][c];
      }
      const map through = warp_inclusive_scan(m, chunk_map_order{});
      if (lane == 31) warp_maps[warp] = through;
      __syncthreads();
      if (warp == 0) {
        map tile = warp_maps[0];
#pragma unroll
        for (int w = 1; w < thread_engine_warps; ++w) tile = after(warp_maps[w], tile);
        const maybe<map> before = window_chain_prefix(
            single.records, s * single.tiles_per_sequence, s * single.windows_per_sequence, t, tile,
            [] { return maybe<map>{map{}, false}; }, chunk_map_order{});
        if (lane == 0) tile_prefix = before;
      }
      __syncthreads();
      // The state entering this lane's chunk: z0 through every earlier tile, the warps before
      // this one, then the chunks before this one in the warp.
      D entering[N];
#pragma unroll
      for (int r = 0; r < N; ++r) entering[r] = p.z0 ? static_cast<D>(to_c<C>(p.z0[s * N + r])) : D(0);
      if (tile_prefix.has) tile_prefix.value.apply(entering);
      for (int w = 0; w < warp; ++w) warp_maps[w].apply(entering);
      const map earlier = shfl_up(through, 1);
      if (lane > 0) earlier.apply(entering);
#pragma unroll
      for (int r = 0; r < N; ++r) z[r] = static_cast<C>(entering[r]);
      for (int q = 0; q < 2; ++q) {
        run_stage(job, q, q, std::false_type{}, A, v, z);
        __syncwarp();  // the output stage is complete
        copy_out(job, q, q);
        __syncwarp();  // the output stage (or stage q) is free again
      }
      __syncthreads();  // the tile's shared values read before the next tile's claim
    }
  }
}

/// Phase b of the thread engine: one block per sequence (grid-stride). Thread k owns the
/// consecutive chunks [k·per, (k+1)·per): it composes their maps, a block scan gives it the
/// composition of every earlier thread's, and it walks its chunks from z[-1] through that,
/// writing the state entering each (per ≤ 8 for the chunk counts thread_engine_chunk gives).
template <int N, class T, class XO, class FO, class C>
__global__ void __launch_bounds__(thread_carry_threads) thread_carry_kernel(engine_problem<T, XO, FO, C> p) {
  using D = aggregate_t<C>;
  using map = chunk_map<N, D>;
  constexpr int warps = thread_carry_threads / 32;
  __shared__ map warp_inclusive[warps];  // the composition of warps 0..w
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  for (index_t s = blockIdx.x; s < p.batch; s += gridDim.x) {
    const engine_sequence sq = p.sequence_at(s);
    const index_t per = (sq.count + thread_carry_threads - 1) / thread_carry_threads;
    const index_t first = sq.first, c0 = tid * per, c1 = c0 + per < sq.count ? c0 + per : sq.count;
    map f = map::identity();
    for (index_t c = c0; c < c1; ++c) f = after(map::load(p.agg_A, p.agg_v, first + c), f);
    // Inclusive warp scan: lane l holds f_l ∘ … ∘ f_0 of its warp.
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const map e = f.shfl_up(d);
      if (lane >= d) f = after(f, e);
    }
    const map before_in_warp = f.shfl_up(1);  // lanes 0..l-1 (lane 0: unused)
    if (lane == 31) warp_inclusive[warp] = f;
    __syncthreads();
    if (warp == 0) {
      map t = lane < warps ? warp_inclusive[lane] : map::identity();
#pragma unroll
      for (int d = 1; d < warps; d *= 2) {
        const map e = t.shfl_up(d);
        if (lane >= d) t = after(t, e);
      }
      __syncwarp();
      if (lane < warps) warp_inclusive[lane] = t;
    }
    __syncthreads();
    D z[N];
#pragma unroll
    for (int r = 0; r < N; ++r) z[r] = p.z0 ? static_cast<D>(to_c<C>(p.z0[s * N + r])) : D(0);
    if (warp > 0) warp_inclusive[warp - 1].apply(z);
    if (lane > 0) before_in_warp.apply(z);
    for (index_t c = c0; c < c1; ++c) {
#pragma unroll
      for (int r = 0; r < N; ++r) p.carry[(first + c) * N + r] = z[r];
      map::load(p.agg_A, p.agg_v, first + c).apply(z);
    }
    __syncthreads();  // before the next sequence reuses warp_inclusive
  }
}

}  // namespace parscan::cuda_detail
