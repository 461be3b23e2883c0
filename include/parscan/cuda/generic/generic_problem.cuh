// parscan/cuda/generic/generic_problem.cuh — the generic algorithms (inclusive, exclusive,
// reduce over any operator and strided batch) as a Problem for the shared kernels.
//
// In and Out are as in scan_problem: element types (raw pointers) or iterator types. A raw
// pointer input keeps the vector loads and the cp.async staging of thread/run_io.cuh, a raw
// pointer output the vector stores; any other iterator is read and written one element at a
// time (it[i]) and never staged, so the kernels see no staged_tensors for it.
// (cuda/scan.cuh hands thrust::device_ptr and device_vector iterators over as raw pointers.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../scan.hpp"
#include "../block/lane_tile_scan.cuh"
#include "../thread/bulk_copy.cuh"
#include "../thread/run_io.cuh"
#include "../warp/warp_shuffle.cuh"

namespace parscan::cuda_detail {

/// staged_tensors, the member that makes the kernels stage a Problem (has_staging), for a raw
/// pointer input only. An empty base, so the Problem's layout is its members'.
template <bool Staged>
struct generic_staging {};
template <>
struct generic_staging<true> {
  static constexpr int staged_tensors = 1;
};

/// staged_lane_tensors / staged_lane_bytes, the members that let channel-last batches run as
/// staged lane tiles (agent/staged_lane_tiles.cuh): a raw pointer input whose element is one
/// cp.async word (4, 8 or 16 bytes). An empty base otherwise.
template <bool Staged, int Bytes>
struct generic_lane_staging {};
template <int Bytes>
struct generic_lane_staging<true, Bytes> {
  static constexpr int staged_lane_tensors = 1;
  static constexpr int staged_lane_bytes = Bytes;
};
template <class In>
constexpr bool is_lane_stageable = std::is_pointer_v<In> && (sizeof(iterator_value_t<In>) == 4 ||
                                                             sizeof(iterator_value_t<In>) == 8 ||
                                                             sizeof(iterator_value_t<In>) == 16);

/// Whether the Problem writes its output, for an output that is not a raw pointer (false for a
/// reduce; a raw pointer output is null instead). An empty base for raw pointers.
template <bool Flag>
struct generic_output_use {};
template <>
struct generic_output_use<true> {
  bool writes_out;
};

/// sizeof(T), or 0 for void.
template <class T>
constexpr std::size_t sizeof_or_zero = sizeof(T);
template <>
constexpr std::size_t sizeof_or_zero<void> = 0;

template <class In, class Out, class Acc>
struct generic_problem : generic_staging<std::is_pointer_v<input_iterator_t<In>>>,
                         generic_lane_staging<is_lane_stageable<input_iterator_t<In>>,
                                              static_cast<int>(sizeof(iterator_value_t<input_iterator_t<In>>))>,
                         generic_output_use<!std::is_pointer_v<output_iterator_t<Out>>> {
  using acc_type = Acc;
  using in_iterator = input_iterator_t<In>;
  using out_iterator = output_iterator_t<Out>;
  using in_value = iterator_value_t<in_iterator>;  // In itself for a raw pointer
  static constexpr bool pointer_in = std::is_pointer_v<in_iterator>;
  static constexpr bool pointer_out = std::is_pointer_v<out_iterator>;

  in_iterator in;
  out_iterator out;  // a raw pointer: null for reduce; any other iterator: see writes_out
  sequence_layout in_layout, out_layout;
  index_t length;
  bool reverse, exclusive;
  bool lane_major;  // adjacent sequences are adjacent in memory, steps are not
  const Acc* carry_in;
  Acc* carry_out;
  Acc init;
  bool has_init;

  struct cursor {
    in_iterator in;
    out_iterator out;
  };
  __device__ PARSCAN_INLINE cursor at(index_t s) const {
    if constexpr (pointer_out)
      return {in + in_layout.sequence_offset(s), out ? out + out_layout.sequence_offset(s) : nullptr};
    else
      return {in + in_layout.sequence_offset(s), out + out_layout.sequence_offset(s)};
  }
  static constexpr int run = run_length<in_value>;
  // A run is one 16-byte cp.async only when the element divides 16 bytes (not a 12-byte struct).
  static constexpr bool stages_runs = pointer_in && sizeof(in_value) * run == 16;
  __device__ PARSCAN_INLINE index_t step(index_t pos) const { return reverse ? length - 1 - pos : pos; }
  __device__ PARSCAN_INLINE int count(index_t pos) const { return steps_in_run<run>(length, pos); }
  __device__ PARSCAN_INLINE void load_run(const cursor& c, index_t pos, Acc (&items)[run]) const {
    const int n = count(pos);
    if constexpr (pointer_in) {
      in_value raw[run];
      read_steps(c.in, in_layout.step_stride, step(pos), reverse ? -1 : 1, n, raw);
#pragma unroll
      for (int v = 0; v < run; ++v) items[v] = v < n ? static_cast<Acc>(raw[v]) : Acc{};
    } else {
      const index_t t0 = step(pos), dir = reverse ? -1 : 1;
#pragma unroll
      for (int v = 0; v < run; ++v) items[v] = v < n ? static_cast<Acc>(c.in[(t0 + v * dir) * in_layout.step_stride]) : Acc{};
    }
  }
  // Staging through shared memory (the staged kernels, raw pointer inputs only): the input's
  // 16-byte run at slot.
  __device__ PARSCAN_INLINE bool stage_run(const cursor& c, index_t pos, unsigned char* slot, int) const {
    if constexpr (pointer_in)
      return stage_steps<run>(slot, c.in, in_layout.step_stride, step(pos), reverse ? -1 : 1, count(pos));
    else
      return false;
  }
  __device__ PARSCAN_INLINE void load_staged(const cursor& c, index_t pos, const unsigned char* slot, int, bool staged,
                                             Acc (&items)[run]) const {
    if constexpr (pointer_in && sizeof(in_value) * run == 16) {
      if (staged) {
        in_value raw[run];
        read_staged(slot, reverse ? -1 : 1, raw);
#pragma unroll
        for (int v = 0; v < run; ++v) items[v] = static_cast<Acc>(raw[v]);
        return;
      }
    }
    load_run(c, pos, items);
  }
  __device__ PARSCAN_INLINE Acc load_at(const cursor& c, index_t pos) const {
    return static_cast<Acc>(c.in[step(pos) * in_layout.step_stride]);
  }
  __device__ PARSCAN_INLINE void store_at(const cursor& c, index_t pos, const Acc& v) const {
    if constexpr (pointer_out) {
      if (c.out) c.out[step(pos) * out_layout.step_stride] = static_cast<std::remove_pointer_t<out_iterator>>(v);
    } else {
      if (this->writes_out) c.out[step(pos) * out_layout.step_stride] = v;
    }
  }
  __device__ PARSCAN_INLINE void store_run(const cursor& c, index_t pos, const Acc (&items)[run]) const {
    if constexpr (pointer_out) {
      if (!c.out) return;
      out_value raw[run];
#pragma unroll
      for (int v = 0; v < run; ++v) raw[v] = static_cast<out_value>(items[v]);
      write_steps(c.out, out_layout.step_stride, step(pos), reverse ? -1 : 1, count(pos), raw);
    } else {
      if (!this->writes_out) return;
      const int n = count(pos);
      const index_t t0 = step(pos), dir = reverse ? -1 : 1;
#pragma unroll
      for (int v = 0; v < run; ++v)
        if (v < n) c.out[(t0 + v * dir) * out_layout.step_stride] = items[v];
    }
  }
  // Staged lane tiles (agent/staged_lane_tiles.cuh; a raw pointer input of 4, 8 or 16 bytes):
  // the input's element of a step. The lane cursor is the sequence's cursor, the thread's first
  // step, and the input at that step with its element stride in processing order.
  bool stages_lanes() const {
    if constexpr (is_lane_stageable<in_iterator>) return reinterpret_cast<std::uintptr_t>(in) % sizeof(in_value) == 0;
    else return false;
  }
  struct lane_cursor {
    cursor c;
    index_t first;
    in_iterator in;
    index_t d_in;
  };
  __device__ PARSCAN_INLINE lane_cursor lane_at(index_t s, index_t first) const {
    const cursor c = at(s);
    return {c, first, c.in + step(first) * in_layout.step_stride, (reverse ? -1 : 1) * in_layout.step_stride};
  }
  __device__ PARSCAN_INLINE void stage_lane_step(const lane_cursor& c, int i, unsigned char* slot, int) const {
    if constexpr (is_lane_stageable<in_iterator>) stage_bytes<static_cast<int>(sizeof(in_value))>(slot, c.in + i * c.d_in);
  }
  __device__ PARSCAN_INLINE Acc staged_element(const unsigned char* slot, int) const {
    in_value raw[1];
    read_staged_bytes(slot, 1, raw);
    return static_cast<Acc>(raw[0]);
  }
  __device__ PARSCAN_INLINE void store_staged(const lane_cursor& c, int i, const unsigned char*, int,
                                              const Acc& v) const {
    store_at(c.c, c.first + i, v);
  }

  /// The problem of a segment of a packed array (agent/segment_warps.cuh): a one-sequence
  /// problem narrowed to elements [begin, begin + n); its carries stay indexed by segment.
  __device__ PARSCAN_INLINE generic_problem segment(index_t begin, index_t n) const {
    generic_problem q = *this;
    q.in += begin;
    if constexpr (pointer_out) {
      if (q.out) q.out += begin;
    } else {
      q.out += begin;
    }
    q.length = q.in_layout.length = q.out_layout.length = n;
    return q;
  }

  /// Steps before the first run whose 16-byte access is aligned, in processing order (0 when
  /// runs are never one access): the steps before the first boundary, or reversed, those
  /// after the last. Only for a contiguous sequence (a segment).
  __device__ PARSCAN_INLINE int misaligned_head() const {
    if constexpr (stages_runs) {
      constexpr int bytes = static_cast<int>(sizeof(in_value));
      const int past = static_cast<int>(reinterpret_cast<std::uintptr_t>(reverse ? in + length : in) % 16) / bytes;
      return reverse ? past : (run - past) % run;
    } else {
      return 0;
    }
  }

  // Bulk tiles (agent/bulk_tiles.cuh): a raw pointer input of elements of at most 128 bytes (a
  // 256-lane tile of them fits the tile's 40 KB), each sequence contiguous and starting on a
  // 16-byte boundary; for a scan, a raw pointer output of elements of the same size, laid out
  // alike. bulk_element (bulk_output) is void where the input (output) cannot be.
  using out_value = std::conditional_t<pointer_out, std::remove_pointer_t<out_iterator>, void>;
  static constexpr bool bulk_input = pointer_in && sizeof(in_value) <= 128;
  static constexpr bool bulk_capable = bulk_input && pointer_out && sizeof(in_value) == sizeof_or_zero<out_value>;
  using bulk_element = std::conditional_t<bulk_input, in_value, void>;
  using bulk_output = std::conditional_t<bulk_capable, out_value, void>;
  static constexpr int bulk_tensors = 1;
  /// A reduce (no output) whose input bulk tiles can stage.
  bool stages_bulk_input() const {
    if constexpr (bulk_input) {
      return !lane_major && in_layout.step_stride == 1 && bulk_aligned(in, in_layout, sizeof(in_value));
    } else {
      return false;
    }
  }
  /// A scan whose input and output bulk tiles can stage.
  bool stages_bulk() const {
    if constexpr (bulk_capable) {
      return out != nullptr && stages_bulk_input() && out_layout.step_stride == 1 &&
             bulk_aligned(out, out_layout, sizeof(in_value));
    } else {
      return false;
    }
  }
  __device__ PARSCAN_INLINE const in_value* bulk_in(index_t s, int) const { return in + in_layout.sequence_offset(s); }
  __device__ PARSCAN_INLINE out_value* bulk_out(index_t s) const { return out + out_layout.sequence_offset(s); }
  template <int V>
  __device__ PARSCAN_INLINE void bulk_items(const in_value (&e)[1][V], Acc (&items)[V]) const {
#pragma unroll
    for (int v = 0; v < V; ++v) items[v] = static_cast<Acc>(e[0][v]);
  }
  __device__ PARSCAN_INLINE out_value bulk_result(const Acc& v) const { return static_cast<out_value>(v); }

  /// The vector path (agent/segment_warps.cuh: a warp a sequence, whole 16-byte accesses) takes
  /// one element type of 4, 8 or 16 bytes throughout, over raw pointers, where steps are adjacent
  /// and every sequence's output sits like its input modulo 16 bytes (or there is none).
  static constexpr bool vector_capable =
      pointer_in && pointer_out && std::is_same_v<in_value, Acc> && std::is_same_v<out_value, Acc> && vector_element<Acc>;
  bool takes_vectors() const {
    if constexpr (vector_capable) {
      constexpr index_t V = 16 / static_cast<index_t>(sizeof(Acc));
      const bool out_alike = out == nullptr || (out_layout.step_stride == 1 &&
                                                (in_layout.sequence_stride - out_layout.sequence_stride) % V == 0 &&
                                                (in_layout.group_stride - out_layout.group_stride) % V == 0);
      return !lane_major && in_layout.step_stride == 1 && vectors_align(in, out) && out_alike &&
             (!exclusive || has_init || carry_in != nullptr);
    } else {
      return false;
    }
  }

  /// A reduce writes no scan: dispatch_scan then runs its two-pass reduce.
  bool reduce_only() const {
    if constexpr (pointer_out) return out == nullptr;
    else return !this->writes_out;
  }
  __device__ PARSCAN_INLINE maybe<Acc> initial(index_t s) const {
    if (carry_in) return {carry_in[s], true};
    return {init, has_init};
  }
  __device__ PARSCAN_INLINE void finish(index_t s, const Acc& total) const {
    if (carry_out) carry_out[s] = total;
  }

  static generic_problem from(const scan_problem<In, Out, Acc>& p) {
    const bool writes = p.kind != scan_kind::reduce;
    out_iterator out = p.out;
    generic_output_use<!pointer_out> use{};
    if constexpr (pointer_out) {
      if (!writes) out = nullptr;
    } else {
      use.writes_out = writes;
    }
    return {{},
            {},
            use,
            p.in,
            out,
            p.in_layout,
            p.out_layout,
            p.in_layout.length,
            p.opts.dir == direction::reverse,
            p.kind == scan_kind::exclusive,
            is_lane_major(p.in_layout) && (p.kind == scan_kind::reduce || is_lane_major(p.out_layout)),
            p.opts.carry_in,
            p.opts.carry_out,
            p.init,
            p.has_init};
  }
};

}  // namespace parscan::cuda_detail
