// parscan/cuda/agent/window_chain.cuh — how one tile of a long sequence learns everything
// before it: a decoupled look-back (Merrill & Garland 2016) whose every prefix has one fixed
// formula, so results are bitwise identical from run to run.
//
// The tiles of a sequence form windows of 32. With A_k the aggregate of tile k,
//   W_j = A_{32j} ⊕ … ⊕ A_{32j+31}           (warp_ordered_reduce over 32 lanes: one tree)
//   C_j = C_{j-1} ⊕ W_j,  C_{-1} = the sequence's carry in (or nothing)
//   prefix of tile k = C_{w-1} ⊕ (A_{32w} ⊕ … ⊕ A_{k-1})   with w = k / 32 (the same tree, k mod 32 lanes)
// A tile publishes A_k as soon as it has reduced its own elements, and never waits before
// that; the last tile of a window, which gathers the 31 aggregates before its own anyway, also
// publishes W_j. For C_{w-1} a tile takes the newest C_m already published (m < w) and computes
// the rest, C_{m+1} … C_{w-1}, from the window totals (32 of them in one round trip), publishing
// each. Since C_j has one formula, every tile that computes it gets the same bits, and whichever
// tile publishes first saves the others the work. A tile therefore waits only for aggregates
// and window totals, never for another tile's look-back: there is no chain of dependent hops,
// and a look-back costs about three L2 round trips however many tiles are in flight. (A first
// version computed each missing W_j from its 32 aggregates, 4 windows a round trip: with ~1000
// tiles in flight its look-backs grew deeper the longer they took, and held a 2^28-element int32
// sum at 15% of copy on an H100.) (The hierarchical windows it replaces waited
// three dependent rounds per tile and held a 2^28-element sum at 43% of copy on an H100.)
//
// Tiles must start in index order (the kernel claims them from a counter), so a tile's
// predecessors are running or done and will publish: the look-back cannot deadlock, and the
// grid needs no co-residency (plain launches, graph capture).
//
// A record is published without a separate flag, as tagged words (agent/tagged_record.cuh): a
// reader that sees every word tagged has the whole value, in one L2 round trip, for a value of
// any size. The state is zeroed before each launch.
#pragma once

#include <cstddef>

#include "../../config.hpp"
#include "../warp/warp_shuffle.cuh"
#include "tagged_record.cuh"

namespace parscan::cuda_detail {

constexpr int chain_window = 32;

/// Tagged words holding values of type Acc: aggregates per tile, chained prefixes per window.
template <class Acc>
struct window_chain_state {
  using record_type = tagged_record<Acc>;
  using word = typename record_type::word;
  static constexpr int words = record_type::words;

  word* aggregates;  // [tiles][words]: A_k
  word* totals;      // [windows][words]: W_j, published by the window's last tile
  word* prefixes;    // [windows][words]: C_j, published by any tile that computed it

  static constexpr std::size_t align(std::size_t b) { return (b + 255) / 256 * 256; }
  static std::size_t record_bytes(index_t n) { return align(static_cast<std::size_t>(n) * words * sizeof(word)); }
  static std::size_t bytes(index_t tiles, index_t window_count) { return record_bytes(tiles) + 2 * record_bytes(window_count); }
  static window_chain_state carve(void* base, index_t tiles, index_t window_count) {
    char* p = static_cast<char*>(base);
    return {reinterpret_cast<word*>(p), reinterpret_cast<word*>(p + record_bytes(tiles)),
            reinterpret_cast<word*>(p + record_bytes(tiles) + record_bytes(window_count))};
  }

  __device__ static PARSCAN_INLINE void store(word* record, const Acc& v) { record_type::store(record, v, 1); }
  /// One poll: true, with the value, when every word of the record has been published.
  __device__ static PARSCAN_INLINE bool try_load(word* record, Acc& v) { return record_type::try_load(record, v) != 0; }
  __device__ static PARSCAN_INLINE Acc wait(word* record) {
    Acc v;
    while (!try_load(record, v)) {
    }
    return v;
  }
  __device__ PARSCAN_INLINE word* aggregate(index_t tile) const { return aggregates + tile * words; }
  __device__ PARSCAN_INLINE word* total(index_t w) const { return totals + w * words; }
  __device__ PARSCAN_INLINE word* prefix(index_t w) const { return prefixes + w * words; }
};

/// Everything before tile k of a sequence whose tiles start at `first_tile` and whose windows
/// start at `first_window`, run by one whole warp with the tile's aggregate; the same in every
/// lane. `carry_in()` gives the sequence's carry in (maybe<Acc>); it is read only by a tile that
/// has to chain from the sequence's first window. With `aggregate_published` the caller has
/// already published the tile's aggregate (a block that reduces ahead).
///
/// The carry in is read before the tile's aggregate goes out, and only then: carry in and carry
/// out may be one array (chunks chained in place), and the sequence's last tile, which writes
/// the carry out, finishes as soon as every aggregate before it is out. So a tile of the first
/// 32 windows (the only ones that may chain from the carry in) reads it first, and a tile whose
/// aggregate went out before its look-back (aggregate_published) never reads it: if it finds
/// no window prefix at all it polls again, until a tile of the first 32 windows publishes one.
template <class Acc, class Op, class CarryIn>
__device__ PARSCAN_INLINE maybe<Acc> window_chain_prefix(const window_chain_state<Acc>& st, index_t first_tile,
                                                         index_t first_window, index_t k, const Acc& aggregate,
                                                         CarryIn&& carry_in, const Op& op,
                                                         bool aggregate_published = false) {
  using state = window_chain_state<Acc>;
  const int lane = lane_id();
  const index_t w = k / chain_window;
  const int before = static_cast<int>(k % chain_window);
  const bool reads_carry = !aggregate_published && w < chain_window;
  maybe<Acc> carry{Acc{}, false};
  if (reads_carry) {
    carry = carry_in();
    // Lane 0's read is bound before its store below: the shuffles consume it.
    carry = {shfl_idx(carry.value, 0), shfl_idx(static_cast<int>(carry.has), 0) != 0};
  }
  if (lane == 0 && !aggregate_published) state::store(st.aggregate(first_tile + k), aggregate);

  // One round trip for both questions: the aggregates of this window's earlier tiles (lane i
  // takes tile 32w + i), and which of the 32 previous windows have published C (lane i polls
  // window w-1-i).
  Acc mine = aggregate;
  bool mine_ready = lane >= before || state::try_load(st.aggregate(first_tile + w * chain_window + lane), mine);
  Acc chained{};
  bool chained_ready = lane < w && state::try_load(st.prefix(first_window + w - 1 - lane), chained);
  while (!mine_ready) mine_ready = state::try_load(st.aggregate(first_tile + w * chain_window + lane), mine);
  maybe<Acc> in_window{Acc{}, false};
  if (before > 0) in_window = {shfl_idx(warp_ordered_reduce(mine, before, op), 0), true};
  // The window's last tile holds all 32 aggregates (its own in lane 31): it publishes W_w.
  if (before == chain_window - 1) {
    const Acc total = warp_ordered_reduce(mine, chain_window, op);
    if (lane == 0) state::store(st.total(first_window + w), total);
  }
  if (w == 0) return combine(carry, in_window, op);

  // The newest published C_m, m < w: the lowest polling lane that found one, 32 windows a round.
  maybe<Acc> start{Acc{}, false};
  index_t m = -1, newest_polled = w - 1;
  for (;;) {
    const unsigned found = __ballot_sync(full_mask, chained_ready);
    if (found) {
      const int l = __ffs(found) - 1;
      m = newest_polled - l;
      start = {shfl_idx(chained, l), true};
      break;
    }
    if (newest_polled < chain_window) {  // polled down to window 0: chain from the carry in
      if (reads_carry) {
        start = carry;
        break;
      }
      newest_polled = w - 1 + chain_window;  // or poll again from the newest window
    }
    newest_polled -= chain_window;
    chained_ready = lane <= newest_polled && state::try_load(st.prefix(first_window + newest_polled - lane), chained);
  }

  // C_{m+1} … C_{w-1} from the window totals, 32 windows a round: lane i loads W_{j0+i} (all in
  // one round trip), then the chain passes from lane to lane in order, and every lane publishes
  // its C.
  for (index_t j0 = m + 1; j0 < w; j0 += warp_threads) {
    const int count = w - j0 < warp_threads ? static_cast<int>(w - j0) : warp_threads;
    Acc total{};
    if (lane < count) total = state::wait(st.total(first_window + j0 + lane));
    Acc mine_prefix{};
    for (int i = 0; i < count; ++i) {
      start = combine(start, maybe<Acc>{shfl_idx(total, i), true}, op);
      if (lane == i) mine_prefix = start.value;
    }
    if (lane < count) state::store(st.prefix(first_window + j0 + lane), mine_prefix);
  }
  return combine(start, in_window, op);
}

}  // namespace parscan::cuda_detail
