// parscan/cuda/agent/segment_warps.cuh — the segments of a packed array (segmented_scan.hpp),
// one warp each: the warp reads its segment's offsets, narrows the Problem to the segment, and
// runs the warp loop's scan of one whole sequence (warp_loop.cuh) over it. No workspace, no
// barriers, no inter-block traffic; a segment's elements are combined in the same order as one
// sequence of its length in the warp loop.
//
// A segment starts wherever its offset puts it, so its runs of 16 bytes are mostly misaligned,
// and misaligned runs are read and written an element at a time. So lane 0 first steps through
// the few elements (fewer than a run) before the first 16-byte boundary in processing order,
// and the warp loop takes the rest from there, aligned, so its runs can be staged whole.
//
// One warp per segment suits many short and medium segments (the benchmark's 10^5 segments of
// 2^28 elements); a single very long segment runs on one warp, at a warp's speed.
//
// Two kernels: scan_segments_kernel, for any generic Problem, and scan_segment_vectors_kernel,
// for the common case (one element type of 4, 8 or 16 bytes, the output aligned like the
// input), which reads whole 16-byte accesses straight into registers. The second also serves
// batches of many contiguous sequences (device/dispatch_scan.cuh): its places type says where
// each warp's sequence lies, by offsets or by layout.
#pragma once

#include <cstdint>
#include <cstring>

#include "../../layout.hpp"
#include "../thread/step_scan.cuh"
#include "warp_loop.cuh"

namespace parscan::cuda_detail {

/// Stages > 0: the warp keeps its segment's next Stages-1 tiles in flight (staging_ring), as
/// the batched warp loop does (without, the segmented float sum ran at 47% of copy on an H100).
/// Segment s of P is P narrowed to elements [offsets[s], offsets[s+1]) (Problem::segment), its
/// carries at s. A segment of no elements passes its carry in (or init) to its carry out.
template <int Warps, int Chunks, int Stages, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_segments_kernel(Problem P, Op op, const std::int64_t* offsets, index_t segments) {
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  const index_t first_warp = static_cast<index_t>(blockIdx.x) * Warps + threadIdx.x / warp_threads;
  const index_t all_warps = static_cast<index_t>(gridDim.x) * Warps;
  for (index_t s = first_warp; s < segments; s += all_warps) {
    using Acc = typename Problem::acc_type;
    const index_t begin = offsets[s], length = offsets[s + 1] - begin;
    const Problem segment = P.segment(begin, length);
    maybe<Acc> running = segment.initial(s);
    const index_t head = segment.misaligned_head() < length ? segment.misaligned_head() : length;
    if (head > 0) {
      if (lane_id() == 0) scan_steps_in_thread(segment, op, segment.at(s), 0, head, running);
      running = {shfl_idx(running.value, 0), shfl_idx(static_cast<int>(running.has), 0) != 0};
    }
    // The rest: after the head in processing order (before it in memory, reversed).
    if (length > head) {
      const Problem rest = segment.segment(segment.reverse ? 0 : head, length - head);
      if constexpr (Stages > 0)
        scan_sequence_in_warp_staged<Chunks, Stages>(rest, op, s, staging_ring<Warps, Chunks, Stages, Problem>{dynamic_smem},
                                                     running);
      else
        scan_sequence_in_warp<Chunks>(rest, op, s, running);
    } else if (lane_id() == 0 && running.has) {
      segment.finish(s, running.value);
    }
  }
}

/// Segments (or a batch's sequences) of one element type T (input, output, carries and init
/// alike) of 4, 8 or 16 bytes, with the output laid out like the input (the same address modulo
/// 16 bytes): the common case, for which the warp loop's general tile scan (runtime direction,
/// kinds and strides, staging masks and bounds a run) issued about 175 instructions for every
/// 128 floats where a scan needs about 30, and bounded the float sum over 10^5 random segments
/// at 84% of copy (ncu, H200; docs/performance.md).
template <class T>
struct segment_vectors {
  const T* in;
  T* out;  // null: a reduce (only the totals are written)
  const T* carry_in;
  T* carry_out;
  T init;
  bool has_init;
  bool exclusive;  // then every segment has init or its carry in (checked by the dispatch)
  bool reverse;    // each segment from its last element to its first
};

/// The elements of a segment a warp holds in registers at once: V consecutive ones a lane (one
/// 16-byte access), lane after lane; `valid` of them from the first are the segment's (all, in
/// Full). Turns them into their results in place: inclusive or exclusive prefixes after
/// `running`, which then takes in their total. The order of combination is fixed (lane runs,
/// then the warp's shuffle tree, then the carry), so results do not depend on timing.
template <bool Full, int V, class T, class Op>
__device__ PARSCAN_INLINE void scan_warp_items(T (&v)[V], int valid, bool exclusive, maybe<T>& running, const Op& op) {
  const int lane = lane_id();
#pragma unroll
  for (int k = 1; k < V; ++k) v[k] = op(v[k - 1], v[k]);
  const T lanes_through = warp_inclusive_scan(v[V - 1], op);
  const T lanes_before = shfl_up(lanes_through, 1);
  const maybe<T> before = lane == 0 ? running : combine(running, maybe<T>{lanes_before, true}, op);
  T total;
  if constexpr (Full) {
    total = shfl_idx(lanes_through, warp_threads - 1);
  } else {  // the last valid item's lane forms the total: its prefix and its run up to that item
    const int last = valid - 1;
    T through = v[0];
#pragma unroll
    for (int k = 1; k < V; ++k)
      if (k == last % V) through = v[k];
    total = shfl_idx(lane == 0 ? through : op(lanes_before, through), last / V);
  }
  if (exclusive) {
#pragma unroll
    for (int k = V - 1; k > 0; --k) v[k] = op(before.value, v[k - 1]);
    v[0] = before.value;
  } else if (before.has) {
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = op(before.value, v[k]);
  }
  running = {running.has ? op(running.value, total) : total, true};
}

/// The V elements of one 16-byte access at p, in processing order (reversed: the last first).
template <bool Reverse, int V, class T>
__device__ PARSCAN_INLINE void load_vector(const T* p, T (&v)[V]) {
  static_assert(sizeof(T) * V == 16, "one 16-byte access");
  const uint4 w = *reinterpret_cast<const uint4*>(p);
  T m[V];
  memcpy(m, &w, 16);
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = m[Reverse ? V - 1 - k : k];
}
template <bool Reverse, int V, class T>
__device__ PARSCAN_INLINE void store_vector(T* p, const T (&v)[V]) {
  T m[V];
#pragma unroll
  for (int k = 0; k < V; ++k) m[k] = v[Reverse ? V - 1 - k : k];
  uint4 w;
  memcpy(&w, m, 16);
  *reinterpret_cast<uint4*>(p) = w;
}

/// One segment of `length` elements at in (its results at out, or none), by the calling warp,
/// from `running` (then its total).
/// The segment's elements before the input's first 16-byte boundary in processing order take one
/// pass of an element a lane; then whole warp-wide accesses of 16 bytes a lane, Unroll of them
/// loaded before any is scanned (the bytes in flight come from the resident warps and these
/// loads, not from a staging ring: nothing is copied twice, and the registers leave the SM full
/// of warps); then the last partial access, with bounds. Reversed, the same from the end down:
/// lane 0 takes the highest access of each, and each access's elements last first.
template <bool Reverse, int Unroll, class T, class Op>
__device__ PARSCAN_INLINE void scan_segment_vectors(const T* in, T* out, index_t length, bool exclusive, const Op& op,
                                                    maybe<T>& running) {
  constexpr int V = 16 / static_cast<int>(sizeof(T)), size = static_cast<int>(sizeof(T));
  constexpr index_t span = static_cast<index_t>(warp_threads) * V;  // elements of one warp-wide access
  const int lane = lane_id();
  index_t pos = Reverse ? length : 0;  // the next element in processing order: pos, or pos - 1 reversed
  const auto left = [&] { return Reverse ? pos : length - pos; };
  const auto ahead = [&](index_t n) { return Reverse ? pos - n : pos + n; };  // pos, n elements on
  // The address of the k-th element from pos in processing order, and the lowest address of this
  // lane's access among those from pos.
  const auto element = [&](index_t k) { return Reverse ? pos - 1 - k : pos + k; };
  const auto lane_access = [&](index_t from) { return Reverse ? from - (lane + 1) * V : from + lane * V; };
  const int past = static_cast<int>(reinterpret_cast<std::uintptr_t>(in + pos) % 16) / size;  // past a boundary
  const index_t head = Reverse ? past : (V - past) % V;
  if (head > 0 && left() > 0) {  // fewer than V elements, one a lane
    const int n = static_cast<int>(left() < head ? left() : head);
    const index_t at = element(lane);
    T one[1] = {lane < n ? in[at] : T{}};
    scan_warp_items<false>(one, n, exclusive, running, op);
    if (out && lane < n) out[at] = one[0];
    pos = ahead(n);
  }
  for (; left() >= Unroll * span; pos = ahead(Unroll * span)) {
    T v[Unroll][V];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) load_vector<Reverse>(in + lane_access(ahead(u * span)), v[u]);
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      scan_warp_items<true>(v[u], static_cast<int>(span), exclusive, running, op);
      if (out) store_vector<Reverse>(out + lane_access(ahead(u * span)), v[u]);
    }
  }
  for (; left() >= span; pos = ahead(span)) {
    T v[V];
    load_vector<Reverse>(in + lane_access(pos), v);
    scan_warp_items<true>(v, static_cast<int>(span), exclusive, running, op);
    if (out) store_vector<Reverse>(out + lane_access(pos), v);
  }
  if (left() > 0) {  // the last partial access: whole runs by vector, the one cut short by element
    const int n = static_cast<int>(left()), mine = n - lane * V;
    T v[V];
    if (mine >= V) {
      load_vector<Reverse>(in + lane_access(pos), v);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = k < mine ? in[element(lane * V + k)] : T{};
    }
    scan_warp_items<false>(v, n, exclusive, running, op);
    if (out) {
      if (mine >= V) {
        store_vector<Reverse>(out + lane_access(pos), v);
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k)
          if (k < mine) out[element(lane * V + k)] = v[k];
      }
    }
  }
}

/// Where each warp finds its segment: packed segments at offsets (the same in input and output).
struct packed_segment_places {
  const std::int64_t* offsets;
  struct place {
    index_t in, out, length;
  };
  __device__ PARSCAN_INLINE place at(index_t s) const {
    const index_t begin = offsets[s];
    return {begin, begin, offsets[s + 1] - begin};
  }
};

/// Sequence s of a strided batch as a segment, each tensor at its own layout's offset
/// (dispatch_scan's batches of contiguous sequences).
struct batch_sequence_places {
  sequence_layout in, out;
  index_t length;
  using place = packed_segment_places::place;
  __device__ PARSCAN_INLINE place at(index_t s) const {
    const sequence_layout::place q = in.place_of(s);  // the layouts share their shape
    return {in.offset_of(q), out.offset_of(q), length};
  }
};

/// Segments of P, a warp each (grid-stride), in either direction (scan_segment_vectors), where
/// `places` puts them.
template <int Warps, int Unroll, class T, class Op, class Places>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_segment_vectors_kernel(segment_vectors<T> P, Op op, Places places, index_t segments) {
  const index_t first_warp = static_cast<index_t>(blockIdx.x) * Warps + threadIdx.x / warp_threads;
  const index_t all_warps = static_cast<index_t>(gridDim.x) * Warps;
  for (index_t s = first_warp; s < segments; s += all_warps) {
    const typename Places::place q = places.at(s);
    const T* in = P.in + q.in;
    T* out = P.out ? P.out + q.out : nullptr;
    maybe<T> running = P.carry_in ? maybe<T>{P.carry_in[s], true} : maybe<T>{P.init, P.has_init};
    if (P.reverse) scan_segment_vectors<true, Unroll>(in, out, q.length, P.exclusive, op, running);
    else scan_segment_vectors<false, Unroll>(in, out, q.length, P.exclusive, op, running);
    if (lane_id() == 0 && running.has && P.carry_out) P.carry_out[s] = running.value;
  }
}

}  // namespace parscan::cuda_detail
