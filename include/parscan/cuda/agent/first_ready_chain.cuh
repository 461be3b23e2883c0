// parscan/cuda/agent/first_ready_chain.cuh — how one tile of a long sequence learns everything
// before it: a decoupled look-back (Merrill & Garland 2016) that takes the nearest inclusive
// prefix already published behind the tile, and still gives bitwise the same result on every
// run.
//
// With A_k the aggregate of tile k, the inclusive prefix of tile k is defined as a strict left
// fold over tiles:
//   I_0 = carry in ⊕ A_0 (or A_0),   I_k = I_{k-1} ⊕ A_k.
// Each tile publishes A_k as soon as it has reduced its elements, and I_k as soon as it knows it.
// Tile k's warp 0 reads the 32 tiles behind it in one round trip (lane 0 the nearest), waits
// until one of them, tile j, has published I_j and every tile between has published at least
// its aggregate, and computes
//   I_{k-1} = (…((I_j ⊕ A_{j+1}) ⊕ A_{j+2}) ⊕ …) ⊕ A_{k-1}
// in exactly that order. Since I_j was computed the same way, the bits do not depend on which j
// the tile found: timing decides how far back the tile looks, never how the terms associate.
// (CUB's look-back combines the aggregates it passes in a tree ahead of the prefix it finds, so
// its floating-point results vary from run to run; an unordered form of this chain measured the
// same speed as this one, docs/performance.md, "First-ready tiles".) A tile never looks further
// than 32 tiles back: while none of them has an inclusive prefix it polls them again.
//
// Tiles must start in index order (the kernels claim them from a counter), so a tile's
// predecessors are running or done and will publish: the look-back cannot deadlock, and the
// grid needs no co-residency.
//
// Records are tagged words (agent/tagged_record.cuh) whose tag says what they hold (1:
// aggregate, 2: inclusive prefix); a reader takes a value only when all its words carry the
// same tag. The state is zeroed before each launch.
//
// Carry in and out may be one array (chunks chained in place): only a sequence's first tile
// reads the carry in, and the value it publishes depends on it; the last tile, which writes the
// carry out, does so with a value that depends on that one through every tile in between, so
// the write cannot come before the read.
#pragma once

#include <cstddef>

#include "../../config.hpp"
#include "../warp/warp_shuffle.cuh"
#include "tagged_record.cuh"

namespace parscan::cuda_detail {

template <class Acc>
struct first_ready_state {
  using record_type = tagged_record<Acc>;
  using word = typename record_type::word;
  static constexpr unsigned aggregate_tag = 1, inclusive_tag = 2;

  word* records;  // [tiles][words]

  // The window chain's interface (it keeps no window records: window_count is unused).
  static std::size_t bytes(index_t tiles, index_t /*window_count*/) {
    return (static_cast<std::size_t>(tiles) * record_type::words * sizeof(word) + 255) / 256 * 256;
  }
  static first_ready_state carve(void* base, index_t, index_t) { return {static_cast<word*>(base)}; }
  __device__ PARSCAN_INLINE word* record(index_t tile) const { return records + tile * record_type::words; }
  __device__ static PARSCAN_INLINE void store(word* r, const Acc& v, unsigned tag) { record_type::store(r, v, tag); }
  __device__ static PARSCAN_INLINE unsigned try_load(word* r, Acc& v) { return record_type::try_load(r, v); }
};

/// Everything before tile k of a sequence whose tiles start at `first_tile` (I_{k-1}, or the
/// carry in for k = 0), run by one whole warp with the tile's aggregate; the same in every lane.
/// `carry_in()` gives the sequence's carry in (maybe<Acc>); only the sequence's first tile reads
/// it. Publishes the tile's aggregate, then its inclusive prefix.
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

  // Lane l polls tile k − 1 − l. Lanes before the sequence's first tile never count: tile 0
  // publishes only its inclusive prefix, so a lane nearer than them always has one to wait for.
  const index_t j = k - 1 - lane;
  Acc v{};
  unsigned tag = state::inclusive_tag;
  if (j >= 0) tag = state::try_load(st.record(first_tile + j), v);
  for (;;) {
    const unsigned inclusive = __ballot_sync(full_mask, tag == state::inclusive_tag);
    const unsigned missing = __ballot_sync(full_mask, tag == 0);
    // Lanes 0..f, f the nearest lane with an inclusive prefix.
    const unsigned needed = (inclusive & (0u - inclusive)) * 2u - 1u;
    if (inclusive != 0 && (missing & needed) == 0) break;
    // An aggregate may still turn into an inclusive prefix: poll it again too.
    if (j >= 0 && tag != state::inclusive_tag) tag = state::try_load(st.record(first_tile + j), v);
  }
  const int f = __ffs(__ballot_sync(full_mask, tag == state::inclusive_tag)) - 1;
  // I_{k-1-f} ⊕ A_{k-f} ⊕ … ⊕ A_{k-1}, strictly left to right (every lane).
  Acc prefix = shfl_idx(v, f);
#pragma unroll
  for (int i = warp_threads - 2; i >= 0; --i) {
    const Acc next = shfl_idx(v, i);
    if (i < f) prefix = op(prefix, next);
  }
  if (lane == 0) state::store(st.record(first_tile + k), op(prefix, aggregate), state::inclusive_tag);
  return {prefix, true};
}

}  // namespace parscan::cuda_detail
