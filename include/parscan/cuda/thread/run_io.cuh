// parscan/cuda/thread/run_io.cuh — a thread reads or writes a run of V consecutive steps of
// one strided sequence. When the steps are adjacent in memory and the run is aligned, it is
// one vector access (16 bytes for the common types); otherwise V scalar accesses, which stay
// correct for any stride, direction and alignment.
//
// Each reader writes out its own loop that puts a run's steps in processing order: a shared
// helper taking the word by reference turned the vector loads into byte loads (91
// ld.global.v4 became 1456 ld.global.u8; docs/performance.md). Check the PTX after changes.
#pragma once

#include <cstdint>
#include <cstring>

#include "../../config.hpp"

namespace parscan::cuda_detail {

template <int Bytes> struct vector_word;
template <> struct vector_word<4> { using type = unsigned; };
template <> struct vector_word<8> { using type = uint2; };
template <> struct vector_word<16> { using type = uint4; };

/// Whether p may start a 16-byte vector access or cp.async.
__device__ PARSCAN_INLINE bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

template <class T, int V>
constexpr bool vectorizable = (sizeof(T) * V == 4 || sizeof(T) * V == 8 || sizeof(T) * V == 16);

/// Elements a whole number of which fill one 16-byte access (agent/segment_warps.cuh's vector
/// path), and whether in and out (null: none) cross 16-byte boundaries at the same elements,
/// in at element boundaries, as that path's accesses need.
template <class T>
constexpr bool vector_element = vectorizable<T, 1>;
template <class T>
inline bool vectors_align(const T* in, const T* out) {
  const auto a = reinterpret_cast<std::uintptr_t>(in), b = reinterpret_cast<std::uintptr_t>(out);
  return a % sizeof(T) == 0 && (out == nullptr || b % 16 == a % 16);
}

/// out[v] = seq[(t0 + v·dir)·stride] for v < count (count ≤ V; the rest are left alone).
/// dir is +1 or -1: the run's steps in processing order.
template <int V, class T>
__device__ PARSCAN_INLINE void read_steps(const T* seq, index_t stride, index_t t0, int dir, int count, T (&out)[V]) {
  if constexpr (vectorizable<T, V>) {
    if (count == V && stride == 1) {
      const T* lo = seq + (dir > 0 ? t0 : t0 - (V - 1));
      if ((reinterpret_cast<std::uintptr_t>(lo) % (sizeof(T) * V)) == 0) {
        using W = typename vector_word<sizeof(T) * V>::type;
        const W w = *reinterpret_cast<const W*>(lo);
        T tmp[V];
        memcpy(tmp, &w, sizeof(W));
        if (dir > 0) {  // two loops, not a computed index, so tmp stays in registers
#pragma unroll
          for (int v = 0; v < V; ++v) out[v] = tmp[v];
        } else {
#pragma unroll
          for (int v = 0; v < V; ++v) out[v] = tmp[V - 1 - v];
        }
        return;
      }
    }
  }
#pragma unroll
  for (int v = 0; v < V; ++v)
    if (v < count) out[v] = seq[(t0 + v * dir) * stride];
}

/// seq[(t0 + v·dir)·stride] = in[v] for v < count.
template <int V, class T>
__device__ PARSCAN_INLINE void write_steps(T* seq, index_t stride, index_t t0, int dir, int count, const T (&in)[V]) {
  if constexpr (vectorizable<T, V>) {
    if (count == V && stride == 1) {
      T* lo = seq + (dir > 0 ? t0 : t0 - (V - 1));
      if ((reinterpret_cast<std::uintptr_t>(lo) % (sizeof(T) * V)) == 0) {
        using W = typename vector_word<sizeof(T) * V>::type;
        T tmp[V];
        if (dir > 0) {
#pragma unroll
          for (int v = 0; v < V; ++v) tmp[v] = in[v];
        } else {
#pragma unroll
          for (int v = 0; v < V; ++v) tmp[v] = in[V - 1 - v];
        }
        W w;
        memcpy(&w, tmp, sizeof(W));
        *reinterpret_cast<W*>(lo) = w;
        return;
      }
    }
  }
#pragma unroll
  for (int v = 0; v < V; ++v)
    if (v < count) seq[(t0 + v * dir) * stride] = in[v];
}

/// read_steps and write_steps of a run of W 16-byte words (V·sizeof(T) = 16·W), a word at a
/// time in processing order, so that each word is one vector access where it is aligned (a
/// single access of 32 bytes or more has no vector form: read_steps would take it step by step).
template <int V, class T>
constexpr int words_of_run = static_cast<int>(sizeof(T)) * V / 16;
/// Steps of word w of a run of `count` steps (0 … V/W).
template <int PerWord>
__device__ PARSCAN_INLINE int steps_in_word(int count, int w) {
  const int n = count - w * PerWord;
  return n < 0 ? 0 : (n > PerWord ? PerWord : n);
}
template <int V, class T>
__device__ PARSCAN_INLINE void read_steps_by_word(const T* seq, index_t stride, index_t t0, int dir, int count,
                                                  T (&out)[V]) {
  constexpr int W = words_of_run<V, T>, per = V / W;
  static_assert(W >= 1 && per * W == V && sizeof(T) * per == 16, "whole 16-byte words");
  if constexpr (W == 1) {
    read_steps(seq, stride, t0, dir, count, out);
  } else {
#pragma unroll
    for (int w = 0; w < W; ++w) {
      T word[per];
      const int n = steps_in_word<per>(count, w);
      read_steps(seq, stride, t0 + w * per * dir, dir, n, word);
#pragma unroll
      for (int v = 0; v < per; ++v)
        if (v < n) out[w * per + v] = word[v];
    }
  }
}
template <int V, class T>
__device__ PARSCAN_INLINE void write_steps_by_word(T* seq, index_t stride, index_t t0, int dir, int count,
                                                   const T (&in)[V]) {
  constexpr int W = words_of_run<V, T>, per = V / W;
  static_assert(W >= 1 && per * W == V && sizeof(T) * per == 16, "whole 16-byte words");
  if constexpr (W == 1) {
    write_steps(seq, stride, t0, dir, count, in);
  } else {
#pragma unroll
    for (int w = 0; w < W; ++w) {
      T word[per];
#pragma unroll
      for (int v = 0; v < per; ++v) word[v] = in[w * per + v];
      write_steps(seq, stride, t0 + w * per * dir, dir, steps_in_word<per>(count, w), word);
    }
  }
}

/// Starts an asynchronous 16-byte copy of a run of V steps into shared memory (cp.async, to be
/// completed with cp.async.wait_group) when the run is whole, adjacent in memory and aligned;
/// dir < 0 copies steps t0-V+1 … t0, which read_staged then reverses. Returns false, having
/// issued nothing, otherwise; the caller then reads directly.
template <int V, class T>
__device__ PARSCAN_INLINE bool stage_steps(void* dst, const T* seq, index_t stride, index_t t0, int dir, int count) {
  if constexpr (sizeof(T) * V != 16) {
    return false;
  } else {
    const T* src = seq + (dir > 0 ? t0 : t0 - (V - 1));
    if (count != V || stride != 1 || reinterpret_cast<std::uintptr_t>(src) % 16 != 0) return false;
    const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(src) : "memory");
    return true;
  }
}

/// Starts an asynchronous copy of Bytes (4, 8 or 16) bytes, both ends aligned to Bytes, into
/// shared memory: the small tensors of a run (a run of V one-byte signs is V bytes).
template <int Bytes>
__device__ PARSCAN_INLINE void stage_bytes(void* dst, const void* src) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(to), "l"(src), "n"(Bytes) : "memory");
}

/// Starts an asynchronous copy of one 16-byte word (both ends aligned) into shared memory,
/// bypassing L1: a streamed input read once.
__device__ PARSCAN_INLINE void stage_word(void* dst, const void* src) {
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(src) : "memory");
}

/// Reads back, in processing order, V steps of T copied by stage_bytes (sizeof(T)·V bytes) from
/// the run's lowest address; dir < 0 reverses them.
template <int V, class T>
__device__ PARSCAN_INLINE void read_staged_bytes(const void* src, int dir, T (&out)[V]) {
  using W = typename vector_word<sizeof(T) * V>::type;
  const W w = *static_cast<const W*>(src);
  T tmp[V];
  memcpy(tmp, &w, sizeof(W));
  if (dir > 0) {
#pragma unroll
    for (int v = 0; v < V; ++v) out[v] = tmp[v];
  } else {
#pragma unroll
    for (int v = 0; v < V; ++v) out[v] = tmp[V - 1 - v];
  }
}

/// Reads back, in processing order, a run staged by stage_steps with the same dir (after this
/// thread's cp.async.wait_group).
template <int V, class T>
__device__ PARSCAN_INLINE void read_staged(const void* src, int dir, T (&out)[V]) {
  static_assert(sizeof(T) * V == 16, "staged runs are 16 bytes");
  read_staged_bytes(src, dir, out);
}

__device__ PARSCAN_INLINE void async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int Pending>
__device__ PARSCAN_INLINE void async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory"); }

/// How many of the V steps pos … pos+V-1 lie before `length`.
template <int V>
__device__ PARSCAN_INLINE int steps_in_run(index_t length, index_t pos) {
  return pos >= length ? 0 : (length - pos < V ? static_cast<int>(length - pos) : V);
}

/// Run length that makes one 16-byte access of T (at least 1).
template <class T>
constexpr int run_length = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));

}  // namespace parscan::cuda_detail
