// parscan/distributed/passes.hpp — the pass structure of every sequence-parallel call, written
// once over an executor `Exec` that the host simulation (distributed/host.hpp) and the NCCL path
// (distributed.cuh, src/distributed/) each supply:
//   ex.place(dir)              this rank's rank_place
//   ex.scratch(bytes, p)       temporary storage for the call (device memory on CUDA)
//   ex.for_each(n, f)          f(i) for i in [0, n): a loop, or a kernel on the stream
//   ex.all_gather(base, bytes) in place: block `rank` of `base` to every rank's same block
//   ex.backend()               the core backend the local passes run on
// The structure (docs/design.md): (1) each rank reduces its slice to one contribution per
// sequence, (2) one all-gather of the contributions, (3) each rank folds the positions before
// its own into its carry, (4) the core scan of the slice from that carry. Nothing waits on the
// host: on CUDA every step is ordered on the stream.
#pragma once

#include "../recurrence.hpp"
#include "../scan.hpp"
#include "rank_logic.hpp"

namespace parscan::distributed {

namespace detail_passes {

/// A rank's own contribution for the generic algorithms, into its block: the seed folded with
/// the slice when this is the first position and a seed exists (carry_in, or init for exclusive
/// scan and reduce), else the slice's own total, peeled from its first element so that no
/// identity is needed; absent for an empty slice with no seed.
template <class Exec, class In, class Out, class Acc, class Op>
status contribute(Exec& ex, const scan_problem<In, Out, Acc>& p, const Op& op, const rank_place& place,
                  const rank_blocks<Acc>& blocks) {
  using in_it = input_iterator_t<In>;
  const sequence_layout& l = p.in_layout;
  const index_t seqs = l.num_sequences();
  Acc* mine = blocks.values(place.rank);
  const bool seeded = place.first() && (p.opts.carry_in || p.has_init);
  using reduce_problem = scan_problem<In, Acc, Acc>;
  status st = status::success;
  if (seeded) {
    scan_options<Acc> o{p.opts.dir, p.opts.carry_in, mine};
    st = run_scan(ex.backend(), reduce_problem{scan_kind::reduce, p.in, l, nullptr, l, o, p.init, true}, op);
  } else if (l.length > 0 && seqs > 0) {
    const peeled_slice ps = peeled_slice::of(l, p.opts.dir);
    st = ex.for_each(seqs, load_first<in_it, Acc>{p.in, l, ps.first_step, mine});
    if (st == status::success && ps.rest.length > 0) {
      scan_options<Acc> o{p.opts.dir, mine, mine};
      st = run_scan(ex.backend(),
                    reduce_problem{scan_kind::reduce, p.in + ps.rest_offset, ps.rest, nullptr, ps.rest, o, Acc{}, true}, op);
    }
  }
  if (st != status::success) return st;
  const bool present = seeded || (l.length > 0 && seqs > 0);
  return ex.for_each(1, set_flag{blocks.flag(place.rank), present ? 1u : 0u});
}

}  // namespace detail_passes

/// A generic inclusive scan, exclusive scan or reduce of this rank's slice of a batch, with
/// every rank calling it (see distributed.hpp for the contract).
template <class Exec, class In, class Out, class Acc, class Op>
status scan_passes(Exec& ex, const scan_problem<In, Out, Acc>& p, const Op& op) {
  if (status s = parscan::detail::validate(p); s != status::success) return s;
  const rank_place place = ex.place(p.opts.dir);
  const sequence_layout& l = p.in_layout;
  const index_t seqs = l.num_sequences();

  // Scratch: every rank's block, then the carries.
  rank_blocks<Acc> blocks{nullptr, rank_blocks<Acc>::bytes_per_block(seqs)};
  const std::size_t gathered = blocks.block_bytes * static_cast<std::size_t>(place.ranks);
  void* scratch = nullptr;
  if (status s = ex.scratch(gathered + static_cast<std::size_t>(seqs) * sizeof(Acc), scratch); s != status::success)
    return s;
  blocks.base = static_cast<unsigned char*>(scratch);
  Acc* carry = reinterpret_cast<Acc*>(blocks.base + gathered);

  if (status s = detail_passes::contribute(ex, p, op, place, blocks); s != status::success) return s;
  if (status s = ex.all_gather(blocks.base, blocks.block_bytes); s != status::success) return s;

  const bool peel = p.kind == scan_kind::inclusive && l.length > 0;
  const peeled_slice in_ps = peeled_slice::of(l, p.opts.dir);
  const peeled_slice out_ps = peeled_slice::of(p.out_layout, p.opts.dir);
  using in_it = input_iterator_t<In>;
  using out_it = output_iterator_t<Out>;
  fold_carry<in_it, out_it, Acc, Op> fold{blocks, place, op, place.first() ? p.opts.carry_in : nullptr, p.init,
                                          p.has_init, carry, p.opts.carry_out, peel, p.in, l, p.out, p.out_layout,
                                          in_ps.first_step};
  if (seqs > 0)
    if (status s = ex.for_each(seqs, fold); s != status::success) return s;
  if (p.kind == scan_kind::reduce || l.length == 0) return status::success;

  // The local scan of the slice from the carry; the total went to carry_out above.
  if (p.kind == scan_kind::exclusive) {
    scan_options<Acc> o{p.opts.dir, carry, nullptr};
    return run_scan(ex.backend(),
                    scan_problem<In, Out, Acc>{scan_kind::exclusive, p.in, l, p.out, p.out_layout, o, p.init, true}, op);
  }
  if (in_ps.rest.length == 0) return status::success;
  scan_options<Acc> o{p.opts.dir, carry, nullptr};
  return run_scan(ex.backend(),
                  scan_problem<In, Out, Acc>{scan_kind::inclusive, p.in + in_ps.rest_offset, in_ps.rest,
                                             p.out + out_ps.rest_offset, out_ps.rest, o, Acc{}, false},
                  op);
}

// ---------------------------------------------------------------------------------------------
// The gated recurrence.

/// The (B·D sequences × T steps) layout of one tensor of a recurrence.
inline sequence_layout recurrence_sequences(const recurrence_shape& s, const recurrence_strides& given) {
  const recurrence_strides st = s.layout == recurrence_layout::strided ? given : dense_strides(s);
  return {s.channels, s.length, st.channel, st.time, s.batch, st.batch};
}

inline bool same_strides(const recurrence_strides& x, const recurrence_strides& y) {
  return x.batch == y.batch && x.channel == y.channel && x.time == y.time;
}

namespace detail_passes {

/// Pass 1 and the exchange for a recurrence: this rank's slice as one affine map per channel
/// (seeded on the first position), all-gathered; then the state entering the slice.
/// `step` reads the slice's step maps laid out as `l`; `dir` is the order the maps compose in.
template <class T, class Exec>
status exchange_states(Exec& ex, affine_step_iterator<T> step, const sequence_layout& l, direction dir,
                       const T* first_state, T* entry, T* entry_copy, T* total, index_t seqs, void* scratch,
                       const rank_place& place) {
  using C = compute_t<T>;
  using A = affine<C>;
  rank_blocks<A> blocks{static_cast<unsigned char*>(scratch), rank_blocks<A>::bytes_per_block(seqs)};
  A* mine = blocks.values(place.rank);
  const bool seeded = place.first() && first_state;
  if (seqs > 0) {
    if (seeded)
      if (status s = ex.for_each(seqs, seed_from_state<T>{first_state, mine}); s != status::success) return s;
    // The identity starts an unseeded slice, so an empty slice contributes the identity map.
    scan_options<A> o{dir, seeded ? mine : nullptr, mine};
    using problem = scan_problem<affine_step_iterator<T>, A, A>;
    if (status s = run_scan(ex.backend(), problem{scan_kind::reduce, step, l, nullptr, l, o, affine_op<C>::identity(), true},
                            affine_op<C>{});
        s != status::success)
      return s;
  }
  if (status s = ex.for_each(1, set_flag{blocks.flag(place.rank), 1u}); s != status::success) return s;
  if (status s = ex.all_gather(blocks.base, blocks.block_bytes); s != status::success) return s;
  if (seqs == 0) return status::success;
  return ex.for_each(seqs, fold_state<T>{blocks, place, place.first() ? first_state : nullptr, entry, entry_copy, total});
}

template <class T>
std::size_t recurrence_scratch_bytes(index_t seqs, int ranks) {
  using A = affine<compute_t<T>>;
  const std::size_t gathered = rank_blocks<A>::bytes_per_block(seqs) * static_cast<std::size_t>(ranks);
  const std::size_t states = (static_cast<std::size_t>(seqs) * sizeof(T) + 255) / 256 * 256;
  return gathered + 2 * states;  // the entry state, and a scratch dx0 for the backward
}

}  // namespace detail_passes

/// The forward of the gated recurrence over this rank's slice. x_entry (optional, dense (B, D))
/// receives the state entering the slice: the backward's x0 on every rank after the first.
template <class T, class Exec>
status recurrence_forward_passes(Exec& ex, const gated_forward_args<T>& args, T* x_entry) {
  const recurrence_shape& sh = args.shape;
  if (sh.batch < 0 || sh.channels < 0 || sh.length < 0) return status::negative_size;
  const index_t seqs = sh.batch * sh.channels;
  if (seqs > 0 && sh.length > 0 && (!args.a || !args.b || !args.x)) return status::null_pointer;
  if (sh.layout == recurrence_layout::strided && !same_strides(args.a_strides, args.b_strides))
    return status::unsupported;  // the slice's maps read a and b through one layout
  const direction dir = args.reverse ? direction::reverse : direction::forward;
  const rank_place place = ex.place(dir);

  void* scratch = nullptr;
  const std::size_t bytes = detail_passes::recurrence_scratch_bytes<T>(seqs, place.ranks);
  if (status s = ex.scratch(bytes, scratch); s != status::success) return s;
  using A = affine<compute_t<T>>;
  const std::size_t gathered = rank_blocks<A>::bytes_per_block(seqs) * static_cast<std::size_t>(place.ranks);
  T* entry = reinterpret_cast<T*>(static_cast<unsigned char*>(scratch) + gathered);

  const affine_step_iterator<T> step{args.a, args.b, args.gate == gate_form::log, false};
  // The whole sequence's final state: the last position's local pass writes it itself (it is
  // exactly that pass's last state); every other rank takes it from the exchange.
  T* total = place.last() ? nullptr : args.x_final;
  if (status s = detail_passes::exchange_states<T>(ex, step, recurrence_sequences(sh, args.a_strides), dir,
                                                  place.first() ? args.x0 : nullptr, entry, x_entry, total, seqs,
                                                  scratch, place);
      s != status::success)
    return s;

  gated_forward_args<T> local = args;
  local.x0 = entry;
  local.x_final = place.last() ? args.x_final : nullptr;
  return gated_recurrence_forward(ex.backend(), local);
}

/// The backward of the gated recurrence over this rank's slice. args.x0 is, on the first rank,
/// the sequence's x0 (optional, as for one call) and on every later rank the state entering the
/// slice (the forward's x_entry; required). dx_final is read on the last rank, dx0 written on
/// the first (when it has an x0); elsewhere both are ignored.
template <class T, class Exec>
status recurrence_backward_passes(Exec& ex, const gated_backward_args<T>& args) {
  const recurrence_shape& sh = args.shape;
  if (sh.batch < 0 || sh.channels < 0 || sh.length < 0) return status::negative_size;
  const index_t seqs = sh.batch * sh.channels;
  if (seqs > 0 && sh.length > 0 && (!args.a || !args.dx)) return status::null_pointer;
  if (sh.layout == recurrence_layout::strided && !same_strides(args.a_strides, args.dx_strides))
    return status::unsupported;
  // The gradient flows against the forward's direction: the forward's last rank comes first.
  const direction back = args.reverse ? direction::forward : direction::reverse;
  const rank_place place = ex.place(back);
  const bool forward_first = place.last();
  if (!forward_first && seqs > 0 && !args.x0) return status::null_pointer;  // the forward's x_entry

  void* scratch = nullptr;
  const std::size_t bytes = detail_passes::recurrence_scratch_bytes<T>(seqs, place.ranks);
  if (status s = ex.scratch(bytes, scratch); s != status::success) return s;
  using A = affine<compute_t<T>>;
  const std::size_t gathered = rank_blocks<A>::bytes_per_block(seqs) * static_cast<std::size_t>(place.ranks);
  const std::size_t states = (static_cast<std::size_t>(seqs) * sizeof(T) + 255) / 256 * 256;
  T* entry = reinterpret_cast<T*>(static_cast<unsigned char*>(scratch) + gathered);
  T* dx0_scratch = reinterpret_cast<T*>(static_cast<unsigned char*>(scratch) + gathered + states);

  const affine_step_iterator<T> step{args.a, args.dx, args.gate == gate_form::log, true};
  if (status s = detail_passes::exchange_states<T>(ex, step, recurrence_sequences(sh, args.a_strides), back,
                                                  place.first() ? args.dx_final : nullptr, entry, nullptr, nullptr,
                                                  seqs, scratch, place);
      s != status::success)
    return s;

  gated_backward_args<T> local = args;
  local.dx_final = entry;
  if (forward_first) {
    local.dx0 = args.x0 ? args.dx0 : nullptr;
  } else {
    local.dx0 = dx0_scratch;  // the core writes dx0 whenever x0 is given; nobody reads it here
  }
  return gated_recurrence_backward(ex.backend(), local);
}

}  // namespace parscan::distributed
