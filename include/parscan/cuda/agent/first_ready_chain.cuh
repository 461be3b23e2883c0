// parscan/cuda/agent/first_ready_chain.cuh — how one tile of a long sequence learns everything
// before it by the classic decoupled look-back (Merrill & Garland 2016): each tile publishes its
// aggregate as soon as it has reduced its elements, and its inclusive prefix as soon as it knows
// it; a tile's look-back takes the *first ready* inclusive prefix behind it and the aggregates
// in between, 32 tiles a round trip.
//
// Unlike the window chain (agent/window_chain.cuh) a prefix has no fixed formula: which
// inclusive prefix a tile finds depends on timing, so the association of a floating-point sum
// may differ from run to run in the last bits. Operators whose combination is exact whatever
// the association (integer sums, min and max: `exact_association` in device/dispatch_scan.cuh)
// give bitwise the same result either way; for the others it runs only when the caller asks
// for scan_determinism::run_to_run_free.
//
// Tiles must start in index order (the kernels claim them from a counter), so a tile's
// predecessors are running or done and will publish: the look-back cannot deadlock, and the
// grid needs no co-residency.
//
// Records are tagged words, as in the window chain: each 4-byte word of the value travels in an
// 8-byte word whose upper half says what it holds (1: aggregate, 2: inclusive prefix), stored
// and loaded as one relaxed atomic, so a whole record is read in one round trip and a reader
// takes a value only when all its words carry the same tag. The state is zeroed before each
// launch.
//
// Carry in and out may be one array (chunks chained in place): only a sequence's first tile
// reads the carry in, and the value it publishes depends on it; the last tile, which writes the
// carry out, does so with a value that depends on that one through every tile in between, so
// the write cannot come before the read.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

#include <cuda/atomic>

#include "../../config.hpp"
#include "../warp/warp_shuffle.cuh"

namespace parscan::cuda_detail {

template <class Acc>
struct first_ready_state {
  using word = unsigned long long;
  static_assert(std::is_trivially_copyable_v<Acc>, "scan values must be trivially copyable");
  static constexpr int words = static_cast<int>((sizeof(Acc) + 3) / 4);
  static constexpr unsigned aggregate_tag = 1, inclusive_tag = 2;

  word* records;  // [tiles][words]

  static std::size_t bytes(index_t tiles) { return (static_cast<std::size_t>(tiles) * words * sizeof(word) + 255) / 256 * 256; }
  static first_ready_state carve(void* base, index_t tiles) {
    (void)tiles;
    return {static_cast<word*>(base)};
  }

  __device__ PARSCAN_INLINE word* record(index_t tile) const { return records + tile * words; }
  __device__ static PARSCAN_INLINE void store(word* r, const Acc& v, unsigned tag) {
    unsigned w[words] = {};
    memcpy(w, &v, sizeof(Acc));
#pragma unroll
    for (int i = 0; i < words; ++i)
      cuda::atomic_ref<word, cuda::thread_scope_device>(r[i]).store((word(tag) << 32) | w[i], cuda::memory_order_relaxed);
  }
  /// One poll: the record's tag (0 while any word is missing or the words disagree), and its
  /// value when the tag is not 0.
  __device__ static PARSCAN_INLINE unsigned try_load(word* r, Acc& v) {
    unsigned w[words];
    unsigned tag = 0;
#pragma unroll
    for (int i = 0; i < words; ++i) {
      const word x = cuda::atomic_ref<word, cuda::thread_scope_device>(r[i]).load(cuda::memory_order_relaxed);
      const unsigned t = static_cast<unsigned>(x >> 32);
      tag = i == 0 ? t : (tag == t ? tag : 0u);
      w[i] = static_cast<unsigned>(x);
    }
    if (tag != 0) memcpy(&v, w, sizeof(Acc));
    return tag;
  }
};

/// Everything before tile k of a sequence whose tiles start at `first_tile`, run by one whole
/// warp with the tile's aggregate; the same in every lane. `carry_in()` gives the sequence's
/// carry in (maybe<Acc>); only the sequence's first tile reads it. Publishes the tile's
/// aggregate, then its inclusive prefix.
template <class Acc, class Op, class CarryIn>
__device__ PARSCAN_INLINE maybe<Acc> first_ready_prefix(const first_ready_state<Acc>& st, index_t first_tile, index_t k,
                                                        const Acc& aggregate, CarryIn&& carry_in, const Op& op) {
  using state = first_ready_state<Acc>;
  const int lane = lane_id();
  if (k == 0) {
    maybe<Acc> carry = carry_in();
    carry = {shfl_idx(carry.value, 0), shfl_idx(static_cast<int>(carry.has), 0) != 0};
    if (lane == 0) state::store(st.record(first_tile), combine(carry, maybe<Acc>{aggregate, true}, op).value, state::inclusive_tag);
    return carry;
  }
  if (lane == 0) state::store(st.record(first_tile + k), aggregate, state::aggregate_tag);

  // Lane l polls tile newest − l (lane 0 the nearest). `later` holds the tiles already passed,
  // which come after every tile still to be read.
  maybe<Acc> later{Acc{}, false};
  for (index_t newest = k - 1;;) {
    const index_t j = newest - lane;
    Acc v{};
    unsigned tag = state::inclusive_tag;  // lanes past the sequence's first tile: never reached
    if (j >= 0) tag = state::try_load(st.record(first_tile + j), v);
    // The nearest inclusive prefix (lane f) and every tile before it must be ready; a tile
    // further back may still be missing.
    for (;;) {
      const unsigned inclusive = __ballot_sync(full_mask, tag == state::inclusive_tag);
      const unsigned missing = __ballot_sync(full_mask, tag == 0);
      const unsigned needed = inclusive ? (inclusive & (0u - inclusive)) * 2u - 1u : full_mask;  // lanes 0..f
      if ((missing & needed) == 0) break;
      if (j >= 0 && tag == 0) tag = state::try_load(st.record(first_tile + j), v);
    }
    const unsigned inclusive = __ballot_sync(full_mask, tag == state::inclusive_tag);
    const int f = inclusive ? __ffs(inclusive) - 1 : warp_threads - 1;
    // Tiles in order: lane i of the reduce takes tile newest − (f − i), i = 0..f.
    const Acc ordered = shfl_idx(v, f - lane >= 0 ? f - lane : 0);
    const Acc window = shfl_idx(warp_ordered_reduce(ordered, f + 1, op), 0);
    later = combine(maybe<Acc>{window, true}, later, op);
    if (inclusive) break;
    newest -= warp_threads;
  }
  if (lane == 0) state::store(st.record(first_tile + k), op(later.value, aggregate), state::inclusive_tag);
  return later;
}

}  // namespace parscan::cuda_detail
