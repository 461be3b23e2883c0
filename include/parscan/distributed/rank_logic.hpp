// parscan/distributed/rank_logic.hpp — the per-rank arithmetic of a sequence-parallel scan,
// shared word for word by the NCCL path and the host simulation (plain C++; PARSCAN_HD where a
// kernel calls it).
//
// R ranks each hold one contiguous slice of every sequence's time axis: rank r's slice follows
// rank r − 1's in time. In processing order (see parscan::direction) the slices come rank 0
// first for a forward scan and rank R − 1 first for a reverse one; "position" below is a rank's
// place in processing order.
//
// Every rank sends one block to an all-gather: a flag word saying whether its contribution is
// present, then one accumulator per sequence, its contribution (the slice's total, with the
// sequence's seed folded in on the first position). After the exchange each rank folds the blocks
// of the positions before its own, in position order, into its carry. The order is fixed, so the
// carry is bitwise the same on every run and on every machine that computes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>

#include <cuda/std/cmath>
#include <cuda/std/complex>

#include "../config.hpp"
#include "../layout.hpp"
#include "../numeric.hpp"
#include "../ops/affine.hpp"
#include "../status.hpp"

namespace parscan::distributed {

/// Where a rank's slice sits in processing order.
struct rank_place {
  int rank = 0;
  int ranks = 1;
  direction dir = direction::forward;

  PARSCAN_HD constexpr int position() const { return dir == direction::forward ? rank : ranks - 1 - rank; }
  PARSCAN_HD constexpr int rank_at(int position) const { return dir == direction::forward ? position : ranks - 1 - position; }
  PARSCAN_HD constexpr bool first() const { return position() == 0; }
  PARSCAN_HD constexpr bool last() const { return position() == ranks - 1; }
};

/// One rank's block in the all-gather buffer: a 64-bit flag (nonzero: contribution present),
/// then `sequences` accumulators. Blocks are padded to 256 bytes so that every block, and the
/// accumulators in it, are aligned for any Acc and for NCCL's fastest copies.
template <class Acc>
struct rank_blocks {
  static_assert(std::is_trivially_copyable_v<Acc>, "distributed scans move accumulators as bytes");
  static constexpr std::size_t header_bytes = alignof(Acc) > 16 ? alignof(Acc) : 16;

  unsigned char* base = nullptr;
  std::size_t block_bytes = 0;

  static constexpr std::size_t bytes_per_block(index_t sequences) {
    const std::size_t raw = header_bytes + static_cast<std::size_t>(sequences) * sizeof(Acc);
    return (raw + 255) / 256 * 256;
  }
  PARSCAN_HD std::uint64_t* flag(int rank) const {
    return reinterpret_cast<std::uint64_t*>(base + static_cast<std::size_t>(rank) * block_bytes);
  }
  PARSCAN_HD Acc* values(int rank) const {
    return reinterpret_cast<Acc*>(base + static_cast<std::size_t>(rank) * block_bytes + header_bytes);
  }
};

/// Folds, onto (c, present), the contributions of sequence s from the positions
/// [from, to) in processing order: c = op(c, contribution) for each present one, earliest first.
/// Returns whether c is present afterwards. An absent contribution (an empty slice with nothing
/// to seed it) is skipped, so no operator needs an identity.
template <class Acc, class Op>
PARSCAN_HD bool fold_positions(const rank_blocks<Acc>& blocks, const rank_place& place, int from, int to, index_t s,
                               const Op& op, Acc& c, bool present) {
  for (int pos = from; pos < to; ++pos) {
    const int r = place.rank_at(pos);
    if (*blocks.flag(r) == 0) continue;
    const Acc v = blocks.values(r)[s];
    c = present ? static_cast<Acc>(op(c, v)) : v;
    present = true;
  }
  return present;
}

/// The step a slice's processing starts at, and the layout and offset of the steps after it:
/// what is left once the first step is peeled off.
struct peeled_slice {
  index_t first_step = 0;      // 0 forward, length - 1 reverse
  index_t rest_offset = 0;     // element offset of the rest's step 0 from the slice's step 0
  sequence_layout rest;        // the slice's layout with length - 1 steps

  static peeled_slice of(const sequence_layout& l, direction dir) {
    peeled_slice p;
    p.rest = l;
    p.rest.length = l.length > 0 ? l.length - 1 : 0;
    p.first_step = dir == direction::forward ? 0 : l.length - 1;
    p.rest_offset = dir == direction::forward ? l.step_stride : 0;
    return p;
  }
};

// ---------------------------------------------------------------------------------------------
// The per-sequence steps. Each is a functor called once per sequence s: a loop on the host, a
// kernel on the device (Exec::for_each). Members are what the step reads and writes.

/// values[s] = the first element of sequence s in processing order (the start of a slice total
/// for an operator with no identity).
template <class InIt, class Acc>
struct load_first {
  InIt in;
  sequence_layout layout;
  index_t step;
  Acc* values;
  PARSCAN_HD void operator()(index_t s) const { values[s] = static_cast<Acc>(in[layout.offset(s, step)]); }
};

/// Writes a flag word (the present flag of this rank's block).
struct set_flag {
  std::uint64_t* flag;
  std::uint64_t value;
  PARSCAN_HD void operator()(index_t) const { *flag = value; }
};

/// After the exchange, for sequence s: the carry into this rank's slice (the seed on the first
/// position, then the earlier positions folded in), and the whole sequence's total.
///   carry[s]     the carry the local scan starts from; for an inclusive scan the slice's first
///                element is folded in as well and written to out (peel), since the carry may
///                be absent and the operator may have no identity
///   carry_out[s] the total over every rank (the seed and all contributions), where non-null
template <class InIt, class OutIt, class Acc, class Op>
struct fold_carry {
  rank_blocks<Acc> blocks;
  rank_place place;
  Op op;
  const Acc* seed;      // the first position's carry in, or null
  Acc init;             // used when has_init and no seed
  bool has_init;
  Acc* carry;           // [sequences]
  Acc* carry_out;       // [sequences] or null
  // peel (inclusive scans with a non-empty slice): out[first] = carry ⊕ in[first]
  bool peel;
  InIt in;
  sequence_layout in_layout;
  OutIt out;
  sequence_layout out_layout;
  index_t first_step;

  PARSCAN_HD void operator()(index_t s) const {
    Acc c{};
    bool present = false;
    if (place.first()) {
      if (seed) c = seed[s], present = true;
      else if (has_init) c = init, present = true;
    } else {
      present = fold_positions(blocks, place, 0, place.position(), s, op, c, false);
    }
    if (carry_out) {
      Acc total = c;
      // The first position's block already holds its seed, so the total restarts from it.
      if (fold_positions(blocks, place, 0, place.ranks, s, op, total, false)) carry_out[s] = total;
    }
    if (peel) {
      const Acc v = static_cast<Acc>(in[in_layout.offset(s, first_step)]);
      c = present ? static_cast<Acc>(op(c, v)) : v;
      present = true;
      out[out_layout.offset(s, first_step)] = c;
    }
    if (present) carry[s] = c;
  }
};

// ---------------------------------------------------------------------------------------------
// The gated recurrence as affine maps (parscan/ops/affine.hpp). A slice's composition is the
// map x ↦ A·x + X with A = ∏ a and X its state from x0 = 0; the backward's is the same for
// z ↦ a*·(z + dx[t]), where z is the gradient flowing back into the state before step t.

PARSCAN_HD PARSCAN_INLINE float conj_of(float v) { return v; }
PARSCAN_HD PARSCAN_INLINE double conj_of(double v) { return v; }
PARSCAN_HD PARSCAN_INLINE complex<float> conj_of(const complex<float>& v) { return cuda::std::conj(v); }
PARSCAN_HD PARSCAN_INLINE float exp_of(float v) { return cuda::std::exp(v); }
PARSCAN_HD PARSCAN_INLINE double exp_of(double v) { return cuda::std::exp(v); }
PARSCAN_HD PARSCAN_INLINE complex<float> exp_of(const complex<float>& v) { return cuda::std::exp(v); }

/// The gate a[t] in compute type, from its storage (a itself, or log a with gate_form::log).
template <class T>
PARSCAN_HD PARSCAN_INLINE compute_t<T> load_gate(const T& stored, bool log_gate) {
  const compute_t<T> v = static_cast<compute_t<T>>(stored);
  return log_gate ? exp_of(v) : v;
}

/// Reads step i of two tensors that share one layout as the affine map of that step:
///   forward:   (a[i], b[i])               the map x ↦ a·x + b
///   backward:  (a[i]*, a[i]*·dx[i])       the map z ↦ a*·(z + dx)
/// A random-access iterator (read only) so that the core reduce runs over it on either backend.
template <class T>
struct affine_step_iterator {
  using compute = compute_t<T>;
  using value_type = affine<compute>;
  using difference_type = std::ptrdiff_t;
  using reference = value_type;
  using pointer = void;
  using iterator_category = std::random_access_iterator_tag;

  const T* gate = nullptr;
  const T* other = nullptr;  // b (forward) or dx (backward)
  bool log_gate = false;
  bool backward = false;

  PARSCAN_HD value_type operator[](difference_type i) const {
    const compute a = load_gate(gate[i], log_gate);
    const compute o = static_cast<compute>(other[i]);
    if (!backward) return value_type(a, o);
    const compute ac = conj_of(a);
    return value_type(ac, product(ac, o));
  }
  PARSCAN_HD value_type operator*() const { return (*this)[0]; }
  PARSCAN_HD affine_step_iterator operator+(difference_type d) const {
    affine_step_iterator r = *this;
    r.gate += d;
    r.other += d;
    return r;
  }
};

/// values[s] = the map x ↦ x + state[s]: a seed that, composed before a slice's map and applied
/// to 0, starts the slice from state[s] (x0 forward, dx_final backward).
template <class T>
struct seed_from_state {
  const T* state;
  affine<compute_t<T>>* values;
  PARSCAN_HD void operator()(index_t s) const {
    using C = compute_t<T>;
    values[s] = affine<C>(C(1), static_cast<C>(state[s]));
  }
};

/// After the exchange of slice maps, for channel s: the state entering this rank's slice
/// (x0 forward, dx_final backward), and, where wanted, the state after the whole sequence.
template <class T>
struct fold_state {
  rank_blocks<affine<compute_t<T>>> blocks;
  rank_place place;
  const T* first_state;  // on the first position: the sequence's own starting state, or null
  T* entry;              // [sequences] the state entering this slice
  T* entry_copy;         // [sequences] a second copy of it for the caller, or null
  T* total;              // [sequences] the state after every slice, or null

  PARSCAN_HD void operator()(index_t s) const {
    using C = compute_t<T>;
    using A = affine<C>;
    const affine_op<C> op;
    C state = C(0);
    if (place.first()) {
      if (first_state) state = static_cast<C>(first_state[s]);
    } else {
      A c{};
      if (fold_positions(blocks, place, 0, place.position(), s, op, c, false)) state = c.b;
    }
    entry[s] = static_cast<T>(state);
    if (entry_copy) entry_copy[s] = static_cast<T>(state);
    if (total) {
      A c{};
      total[s] = fold_positions(blocks, place, 0, place.ranks, s, op, c, false) ? static_cast<T>(c.b) : static_cast<T>(C(0));
    }
  }
};

}  // namespace parscan::distributed
