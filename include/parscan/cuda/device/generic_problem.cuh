// parscan/cuda/device/generic_problem.cuh — the generic algorithms (inclusive, exclusive,
// reduce over any operator and strided batch) as a Problem for the shared kernels.
#pragma once

#include "../../scan.hpp"
#include "../block/lane_tile_scan.cuh"
#include "../thread/run_io.cuh"
#include "../warp/warp_shuffle.cuh"

namespace parscan::cuda_detail {

template <class In, class Out, class Acc>
struct generic_problem {
  using acc_type = Acc;
  const In* in;
  Out* out;  // null for reduce
  sequence_layout in_layout, out_layout;
  index_t length;
  bool reverse, exclusive;
  bool lane_major;  // adjacent sequences are adjacent in memory, steps are not
  const Acc* carry_in;
  Acc* carry_out;
  Acc init;
  bool has_init;

  struct cursor {
    const In* in;
    Out* out;
  };
  __device__ PARSCAN_INLINE cursor at(index_t s) const {
    return {in + in_layout.sequence_offset(s), out ? out + out_layout.sequence_offset(s) : nullptr};
  }
  static constexpr int run = run_length<In>;
  __device__ PARSCAN_INLINE index_t step(index_t pos) const { return reverse ? length - 1 - pos : pos; }
  __device__ PARSCAN_INLINE int count(index_t pos) const { return steps_in_run<run>(length, pos); }
  __device__ PARSCAN_INLINE void load_run(const cursor& c, index_t pos, Acc (&items)[run]) const {
    In raw[run];
    const int n = count(pos);
    read_steps(c.in, in_layout.step_stride, step(pos), reverse ? -1 : 1, n, raw);
#pragma unroll
    for (int v = 0; v < run; ++v) items[v] = v < n ? static_cast<Acc>(raw[v]) : Acc{};
  }
  // Staging through shared memory (the staged kernels): the input's 16-byte run at slot.
  static constexpr int staged_tensors = 1;
  __device__ PARSCAN_INLINE bool stage_run(const cursor& c, index_t pos, unsigned char* slot, int) const {
    return stage_steps<run>(slot, c.in, in_layout.step_stride, step(pos), reverse ? -1 : 1, count(pos));
  }
  __device__ PARSCAN_INLINE void load_staged(const cursor& c, index_t pos, const unsigned char* slot, int, bool staged,
                                             Acc (&items)[run]) const {
    if constexpr (sizeof(In) * run == 16) {
      if (staged) {
        In raw[run];
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
    if (c.out) c.out[step(pos) * out_layout.step_stride] = static_cast<Out>(v);
  }
  __device__ PARSCAN_INLINE void store_run(const cursor& c, index_t pos, const Acc (&items)[run]) const {
    if (!c.out) return;
    Out raw[run];
#pragma unroll
    for (int v = 0; v < run; ++v) raw[v] = static_cast<Out>(items[v]);
    write_steps(c.out, out_layout.step_stride, step(pos), reverse ? -1 : 1, count(pos), raw);
  }
  /// A reduce writes no scan: dispatch_scan then runs its two-pass reduce.
  bool reduce_only() const { return out == nullptr; }
  __device__ PARSCAN_INLINE maybe<Acc> initial(index_t s) const {
    if (carry_in) return {carry_in[s], true};
    return {init, has_init};
  }
  __device__ PARSCAN_INLINE void finish(index_t s, const Acc& total) const {
    if (carry_out) carry_out[s] = total;
  }

  static generic_problem from(const scan_problem<In, Out, Acc>& p) {
    return {p.in,
            p.kind == scan_kind::reduce ? nullptr : p.out,
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
