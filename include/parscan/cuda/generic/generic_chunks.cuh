// parscan/cuda/generic/generic_chunks.cuh — the generic scans and reduces of channel-last
// batches as the chunk loop (agent/chunk_loop.cuh): a lane owns a 16-byte word of adjacent
// channels (four 4-byte or two 8-byte elements) over a run of consecutive steps, and the rows
// of a step travel whole through shared memory.
//
// Why. The staged lane tiles in lane packs of two (generic_lane_packs.cuh) moved the (8, 4096,
// 1024) float sum at 73% of copy on an H100 (8-byte accesses, a look-back a tile); the gated
// recurrence's float backward reached 85–89% in the chunk loop (docs/performance.md).
//
// The scan of a warp's chunk over a tile, for any operator (no identity assumed): each lane
// folds the steps of its run that lie before the length, a shuffle scan over the lanes (lane
// order is step order) gives each lane the aggregate of the runs before its own, the warp's
// carry goes in front of that, and the lane walks its run again writing each step's prefix over
// its input. Steps past the length are neither staged nor read: lanes past them hold no
// aggregate, and only lanes after the last one that does see theirs.
#pragma once

#include <cstring>
#include <type_traits>

#include "../agent/chunk_loop.cuh"
#include "../device/dispatch_chunk_loop.cuh"
#include "../thread/lane_packs.cuh"
#include "../warp/warp_shuffle.cuh"
#include "generic_problem.cuh"

namespace parscan::cuda_detail {

/// Whether the chunk loop can take Problem's element types: raw pointer input and output (or
/// none, a reduce) of one size that divides a 16-byte word into two or four channels.
template <class Problem, class = void>
constexpr bool generic_chunk_types = false;
template <class Problem>
constexpr bool generic_chunk_types<Problem, std::enable_if_t<Problem::pointer_in && Problem::pointer_out>> =
    (sizeof(typename Problem::in_value) == 4 || sizeof(typename Problem::in_value) == 8) &&
    sizeof(typename Problem::out_value) == sizeof(typename Problem::in_value);

/// The chunk loop's Chunks for a generic Problem (raw pointers; its input and output channel-last
/// in whole, aligned chunks) and operator, as an inclusive or exclusive scan or a reduce (Kind).
template <class Problem, class Op, scan_kind Kind>
struct generic_chunks {
  using in_value = typename Problem::in_value;
  using out_value = typename Problem::out_value;
  using Acc = typename Problem::acc_type;
  static constexpr int K = chunk_channels<in_value>;
  using group = typename Problem::cursor;
  /// The running prefix of a chunk's K sequences, absent (has false) before the first step of
  /// an inclusive scan without a carry in.
  struct carry_type {
    lane_pack<Acc, K> v;
    bool has;
  };
  static constexpr int lookahead = 0;
  static constexpr bool writes = Kind != scan_kind::reduce;

  Problem P;
  Op op;

  __device__ PARSCAN_INLINE const sequence_layout& layout() const { return P.in_layout; }
  __device__ PARSCAN_INLINE index_t length() const { return P.length; }
  __device__ PARSCAN_INLINE group group_at(index_t s) const { return P.at(s); }
  /// A carry in (or an init) is there for every sequence or for none.
  __device__ PARSCAN_INLINE void read_carry(index_t s, carry_type& carry) const {
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const maybe<Acc> c = P.initial(s + i);
      carry.v.v[i] = c.value;
      carry.has = c.has;
    }
  }
  __device__ PARSCAN_INLINE void write_carry(index_t s, const carry_type& carry) const {
    if (!carry.has) return;
#pragma unroll
    for (int i = 0; i < K; ++i) P.finish(s + i, carry.v.v[i]);
  }

  __device__ PARSCAN_INLINE const in_value* input(const group& g, int c, index_t p) const {
    return g.in + c * K + P.step(p) * P.in_layout.step_stride;
  }
  __device__ PARSCAN_INLINE void stage(const group& g, int c, index_t p, index_t, unsigned char* word, int) const {
    if (p < P.length) stage_word(word, input(g, c, p));
  }
  template <int N, class Word>
  __device__ PARSCAN_INLINE void stage_whole(const group& g, int c, index_t p, Word&& word, int) const {
    const index_t d = P.reverse ? -P.in_layout.step_stride : P.in_layout.step_stride;
    const in_value* in = input(g, c, p);
#pragma unroll
    for (int i = 0; i < N; ++i, in += d) stage_word(word(i), in);
  }
  __device__ PARSCAN_INLINE void store(const group& g, int c, index_t p, const unsigned char* word, int) const {
    *reinterpret_cast<uint4*>(g.out + c * K + P.step(p) * P.out_layout.step_stride) =
        *reinterpret_cast<const uint4*>(word);
  }
  template <int N, class Word>
  __device__ PARSCAN_INLINE void store_whole(const group& g, int c, index_t p, Word&& word, int) const {
    const index_t d = P.reverse ? -P.out_layout.step_stride : P.out_layout.step_stride;
    out_value* out = g.out + c * K + P.step(p) * P.out_layout.step_stride;
#pragma unroll
    for (int i = 0; i < N; ++i, out += d) *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(word(i));
  }

  template <int S, class Word>
  __device__ PARSCAN_INLINE void scan(Word&& word, int, index_t valid, carry_type& carry) const {
    if (valid >= static_cast<index_t>(S) * warp_threads) {
      scan_steps<S, true>(word, S, warp_threads - 1, carry);
    } else {  // the last tile: lane l holds `mine` steps, the last lane with any is `last`
      const index_t left = valid - static_cast<index_t>(lane_id()) * S;
      const int mine = left >= S ? S : left > 0 ? static_cast<int>(left) : 0;
      scan_steps<S, false>(word, mine, static_cast<int>((valid - 1) / S), carry);
    }
  }

 private:
  using pack = lane_pack<Acc, K>;
  __device__ PARSCAN_INLINE pack combined(const pack& earlier, const pack& later) const {
    return lanewise_op<Op, K>{op}(earlier, later);
  }
  __device__ PARSCAN_INLINE static pack element(const unsigned char* word) {
    const uint4 w = *reinterpret_cast<const uint4*>(word);
    in_value raw[K];
    memcpy(raw, &w, sizeof(w));
    pack r;
#pragma unroll
    for (int i = 0; i < K; ++i) r.v[i] = static_cast<Acc>(raw[i]);
    return r;
  }
  __device__ PARSCAN_INLINE static void put(unsigned char* word, const pack& v) {
    out_value raw[K];
#pragma unroll
    for (int i = 0; i < K; ++i) raw[i] = static_cast<out_value>(v.v[i]);
    uint4 w;
    memcpy(&w, raw, sizeof(w));
    *reinterpret_cast<uint4*>(word) = w;
  }

  /// Full: every lane holds all S steps. Else the lane's first `mine` steps lie before the length,
  /// and lane `last` is the last lane with any.
  template <int S, bool Full, class Word>
  __device__ PARSCAN_INLINE void scan_steps(Word&& word, int mine, int last, carry_type& carry) const {
    const int lane = lane_id();
    // The lane's run folded (lanes with no steps keep a value no valid lane reads).
    pack run = Full || mine > 0 ? element(word(0)) : pack{};
#pragma unroll
    for (int j = 1; j < S; ++j)
      if (Full || j < mine) run = combined(run, element(word(j)));
    const pack through = warp_inclusive_scan(run, [this](const pack& e, const pack& l) { return combined(e, l); });
    // The prefix before this lane's run: the carry, then the runs of the lanes before it.
    const pack up = shfl_up(through, 1);
    pack before = lane == 0 ? carry.v : carry.has ? combined(carry.v, up) : up;
    bool has = lane > 0 || carry.has;
    const pack end = shfl_idx(through, last);
    carry.v = carry.has ? combined(carry.v, end) : end;
    carry.has = true;
    if constexpr (Kind != scan_kind::reduce) {
#pragma unroll
      for (int j = 0; j < S; ++j) {
        if (Full || j < mine) {
          const pack x = element(word(j));
          if constexpr (Kind == scan_kind::exclusive) put(word(j), before);  // an exclusive scan always has c
          before = has ? combined(before, x) : x;
          has = true;
          if constexpr (Kind == scan_kind::inclusive) put(word(j), before);
        }
      }
    }
  }
};

/// Tiles of the generic chunk loop (one tensor, the output written over the input): 256-byte
/// rows 256 steps (128 KB of shared memory, a block an SM: 83–86% of copy against 81–86% for
/// tiles of 128 steps, bench_tuning --wide-rows on an H100), 128-byte rows 256 steps, 64-byte
/// rows 512 (64 and 72 KB, three blocks an SM). Where the 256-byte rows' jobs are no more than
/// the SMs (OneJobAnSM), three stages of 128 steps (96 KB): each SM then scans one job, and
/// the third tile in flight covers more of its load latency. (8, 4096, 1024) float sums, 128
/// jobs: 86.6–86.7% of copy against 78.7–79.8% on an H200; (8, 4096, 2048), 256 jobs, keeps
/// the 256-step tiles: 85.1–85.3% against 80.3–80.7% (bench_tuning --wide-rows,
/// docs/performance.md, "The generic channel-last batch on an H200").
template <class E, int Chunks, bool OneJobAnSM = false>
using generic_chunk_shape = std::conditional_t<Chunks == 16 && OneJobAnSM, chunk_loop_shape<E, 1, 4, 16, 3>,
                                               chunk_loop_shape<E, 1, Chunks == 4 ? 16 : 8, Chunks>>;

/// Runs P in the chunk loop where it fits (generic_chunk_types, channel-last input and output
/// in whole aligned chunks, a length, jobs enough to fill the device); *taken says whether it did.
template <class Problem, class Op>
status run_generic_chunks(const Problem& P, const Op& op, const cuda_backend& be, bool* taken) {
  *taken = false;
  if constexpr (generic_chunk_types<Problem>) {
    using E = typename Problem::in_value;
    const bool reduce = P.out == nullptr;
    if (P.length == 0 || !chunk_layout_fits(P.in, P.in_layout) ||
        (!reduce && !chunk_layout_fits(P.out, P.out_layout)))
      return status::success;
    const device_facts dev = current_device();
    if (dev.st != status::success) return dev.st;
    const chunk_group g = chunk_group_for<E>(P.in_layout.count, P.in_layout.groups, dev.multiprocessors, true);
    if (g.width == 0) return status::success;
    *taken = true;
    const auto go = [&](auto kind) {
      using C = generic_chunks<Problem, Op, decltype(kind)::value>;
      const C chunks{P, op};
      switch (g.width) {
        case 16:
          if (g.jobs <= dev.multiprocessors)
            return launch_batch_chunk_loop<generic_chunk_shape<E, 16, true>>(chunks, g.jobs, dev, be);
          return launch_batch_chunk_loop<generic_chunk_shape<E, 16>>(chunks, g.jobs, dev, be);
        case 8: return launch_batch_chunk_loop<generic_chunk_shape<E, 8>>(chunks, g.jobs, dev, be);
        default: return launch_batch_chunk_loop<generic_chunk_shape<E, 4>>(chunks, g.jobs, dev, be);
      }
    };
    if (reduce) return go(std::integral_constant<scan_kind, scan_kind::reduce>{});
    if (P.exclusive) return go(std::integral_constant<scan_kind, scan_kind::exclusive>{});
    return go(std::integral_constant<scan_kind, scan_kind::inclusive>{});
  }
  return status::success;
}

}  // namespace parscan::cuda_detail
