// test/recurrence/varlen_cases.inl — the packed variable-length gated recurrence
// (cu_seqlens; parscan/recurrence.hpp), backend-neutral. Included by varlen_test.cpp (host
// backend) and varlen_test.cu (CUDA backend, PARSCAN_TEST_CUDA=1).
//
// Every packed result is compared with two things, per sequence:
//  - the fixed-length API called on that sequence alone (its own dense tensors, same backend):
//    bitwise on the host backend, whose packed path runs the very same per-channel loop; within
//    twice the dtype's tolerance on CUDA (both are within it of the float64 reference), whose
//    packed kernel associates differently from the fixed-length scans;
//  - the float64 sequential reference (recurrence_reference.hpp): max|x − ref| / max|ref| at
//    most 1e-5 for float and complex<float>, 1e-2 for bfloat16, 1e-12 for double.
// Outputs are poisoned and guarded: every element of a sequence is written, the steps past
// cu_seqlens[N] and everything around the tensors are not, inputs stay bit-identical.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/catch.hpp"
#include "support/env.hpp"

#include "recurrence/recurrence_reference.hpp"
#include "recurrence/recurrence_support.hpp"

namespace varlen_test {

using namespace rec_test;
using parscan::varlen_shape;

/// The gate families a dtype is tested with (complex: in and near the unit disk).
template <class T>
std::vector<family> gate_families() {
  if constexpr (scalar<T>::is_complex) return {family::unit, family::near_one};
  else return {family::unit, family::near_one, family::signed_};
}

/// A packed case: the sequence lengths, D channels, `trailing` steps past the last sequence
/// (neither read nor written), the layout and the options.
struct case_opts {
  std::vector<index_t> lengths;
  index_t D = 1, trailing = 0;
  lay layout = lay::cl;  // cl: (total_T, D); tc: (D, total_T); s3: strided, time stride 1, padded rows
  bool x0 = false, xfinal = true, reverse = false, log = false, in_place = false;
  bool x_given = true, dxfinal = false;  // backward only
  family fam = family::unit;

  index_t used() const {
    index_t t = 0;
    for (index_t l : lengths) t += l;
    return t;
  }
  index_t total() const { return used() + trailing; }
  index_t N() const { return static_cast<index_t>(lengths.size()); }
  std::vector<std::int64_t> offsets() const {
    std::vector<std::int64_t> o(1, 0);
    for (index_t l : lengths) o.push_back(o.back() + l);
    return o;
  }
  std::string str() const {
    std::ostringstream s;
    s << "N=" << N() << " lengths=[";
    for (std::size_t i = 0; i < lengths.size() && i < 12; ++i) s << (i ? " " : "") << lengths[i];
    s << (lengths.size() > 12 ? " ...]" : "]") << " D=" << D << " trailing=" << trailing << " layout=" << name(layout)
      << " x0=" << x0 << " x_final=" << xfinal << " reverse=" << reverse << " gate=" << (log ? "log" : "linear")
      << " in_place=" << in_place << " x=" << (x_given ? "given" : "null") << " dx_final=" << dxfinal
      << " family=" << name(fam);
    return s.str();
  }
};

/// The packed tensor as a (1, D, total) geometry; the fixed-length tensors of one sequence are
/// dense (1, D, length) in the matching dense layout.
inline geometry packed_geometry(const case_opts& o) { return make_geometry(dense_arrangement(o.layout), 1, o.D, o.total()); }
inline lay sequence_layout_of(lay l) { return l == lay::cl ? lay::cl : lay::tc; }

/// Canonical packed values (d·total + t) of sequence n, as its own canonical (d·length + t).
template <class V>
std::vector<V> slice(const case_opts& o, const std::vector<V>& packed, index_t n) {
  const std::vector<std::int64_t> off = o.offsets();
  const index_t start = off[n], len = o.lengths[n], T = o.total();
  std::vector<V> v(static_cast<std::size_t>(o.D * len));
  for (index_t d = 0; d < o.D; ++d)
    for (index_t t = 0; t < len; ++t) v[static_cast<std::size_t>(d * len + t)] = packed[static_cast<std::size_t>(d * T + start + t)];
  return v;
}
/// Writes sequence n's canonical values into a canonical packed vector.
template <class V>
void unslice(const case_opts& o, const std::vector<V>& seq, index_t n, std::vector<V>& packed) {
  const std::vector<std::int64_t> off = o.offsets();
  const index_t start = off[n], len = o.lengths[n], T = o.total();
  for (index_t d = 0; d < o.D; ++d)
    for (index_t t = 0; t < len; ++t) packed[static_cast<std::size_t>(d * T + start + t)] = seq[static_cast<std::size_t>(d * len + t)];
}
template <class V>
std::vector<V> state_slice(const std::vector<V>& s, index_t n, index_t D) {
  return s.empty() ? s : std::vector<V>(s.begin() + n * D, s.begin() + (n + 1) * D);
}
/// Only the steps that belong to a sequence (canonical packed order), for comparisons.
template <class V>
std::vector<V> used_steps(const case_opts& o, const std::vector<V>& packed) {
  std::vector<V> v;
  for (index_t n = 0; n < o.N(); ++n) {
    const std::vector<V> s = slice(o, packed, n);
    v.insert(v.end(), s.begin(), s.end());
  }
  return v;
}

/// The packed result equals the per-sequence one: bitwise on the host; on CUDA within 2·tol
/// (each is checked within tol of the float64 reference, at the same `scale`, so they may
/// differ by the sum).
template <class T>
void check_matches_per_sequence(const char* what, const std::vector<T>& packed, const std::vector<T>& per_sequence,
                                double scale = 0) {
  INFO(what << ": packed result against the fixed-length API on each sequence alone");
  if constexpr (!parscan_test::on_device) {
    (void)scale;
    CHECK(first_bitwise_difference(packed, per_sequence) == -1);
  } else {
    check_close(what, packed, to_ref_vec(per_sequence), 2 * scalar<T>::tol, scale);
  }
}

inline parscan_test::guarded_buffer<std::int64_t> offsets_buffer(const std::vector<std::int64_t>& o) {
  return parscan_test::guarded_buffer<std::int64_t>(o);
}

// ---------------------------------------------------------------------------------------
// Forward.

template <class T>
void run_forward(const case_opts& o) {
  INFO(scalar<T>::name() << " varlen forward " << o.str());
  PARSCAN_TEST_RNG(r, std::string("varlen forward ") + scalar<T>::name() + " " + o.str());
  const index_t D = o.D, T_ = o.total(), N = o.N();
  const std::size_t elems = static_cast<std::size_t>(D * T_);
  std::vector<T> a(elems), b(elems), x0;
  for (T& v : a) v = draw_gate<T>(r, o.fam, o.log);
  fill_normal(r, b);
  if (o.x0) x0.resize(static_cast<std::size_t>(N * D)), fill_normal(r, x0);

  const geometry geo = packed_geometry(o);
  tensor<T> ta(geo, 0, &a), tb(geo, 0, &b), tx_own, tx0, txf;
  if (!o.in_place) tx_own = tensor<T>(geo, 0, nullptr);
  tensor<T>& tx = o.in_place ? tb : tx_own;
  if (o.x0) tx0 = tensor<T>::dense(N * D, 0, &x0);
  if (o.xfinal) txf = tensor<T>::dense(N * D, 0, nullptr);
  const auto cu = offsets_buffer(o.offsets());

  parscan::gated_varlen_forward_args<T> args;
  args.shape = varlen_shape{N, D, T_, cu.data(), api_layout(o.layout)};
  args.a = ta.ptr(), args.b = tb.ptr(), args.x = tx.ptr(), args.x0 = tx0.ptr(), args.x_final = txf.ptr();
  args.reverse = o.reverse;
  args.gate = o.log ? gate_form::log : gate_form::linear;
  args.a_strides = args.b_strides = args.x_strides = geo.s;
  if (o.layout != lay::s3) {
    const recurrence_strides ds = parscan::dense_strides(args.shape);
    CHECK((ds.channel == geo.s.channel && ds.time == geo.s.time));
  }
  const status st = parscan::gated_recurrence_forward(parscan_test::backend(), args);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);

  tx.fetch();
  if (!o.in_place) {
    INFO("x: every step of every sequence written, the trailing steps not");
    CHECK(tx.unwritten() == o.trailing * D);
    CHECK(tx.stray_writes() == 0);
    CHECK(tx.guards_intact());
  }
  const std::vector<T> x = tx.values();
  std::vector<T> xf;
  if (o.xfinal) check_output_writes(txf, "x_final"), xf = txf.values();
  check_input_unchanged(ta, "a");
  if (!o.in_place) check_input_unchanged(tb, "b");
  check_input_unchanged(tx0, "x0");
  if (o.in_place) {  // the trailing steps of b stay as they were
    for (index_t d = 0; d < D; ++d)
      for (index_t t = o.used(); t < T_; ++t) {
        const std::size_t i = static_cast<std::size_t>(d * T_ + t);
        CHECK(first_bitwise_difference(std::vector<T>{x[i]}, std::vector<T>{b[i]}) == -1);
      }
  }

  // Per sequence: the fixed-length API, and the float64 reference.
  std::vector<T> x_api(elems), xf_api(static_cast<std::size_t>(N * D));
  std::vector<ref_t<T>> x_ref(elems), xf_ref(static_cast<std::size_t>(N * D));
  for (index_t n = 0; n < N; ++n) {
    const index_t len = o.lengths[static_cast<std::size_t>(n)];
    fwd_opts f;
    f.B = 1, f.D = D, f.T = len, f.layout = sequence_layout_of(o.layout);
    f.x0 = o.x0, f.xfinal = true, f.reverse = o.reverse, f.log = o.log, f.fam = o.fam;
    fwd_inputs<T> in{slice(o, a, n), slice(o, b, n), state_slice(x0, n, D)};
    const fwd_out<T> one = forward_call(f, in);
    unslice(o, one.x, n, x_api);
    std::copy(one.xf.begin(), one.xf.end(), xf_api.begin() + n * D);
    const fwd_ref<T> ref = reference_forward(f, in);
    unslice(o, ref.x, n, x_ref);
    std::copy(ref.xf.begin(), ref.xf.end(), xf_ref.begin() + n * D);
  }
  check_matches_per_sequence("x", used_steps(o, x), used_steps(o, x_api));
  check_close("x", used_steps(o, x), used_steps(o, x_ref));
  if (o.xfinal) {
    check_matches_per_sequence("x_final", xf, xf_api, max_abs(x_ref));
    check_close("x_final", xf, xf_ref, scalar<T>::tol, max_abs(x_ref));
  }
}

// ---------------------------------------------------------------------------------------
// Backward.

template <class T>
void run_backward(const case_opts& o) {
  INFO(scalar<T>::name() << " varlen backward " << o.str());
  PARSCAN_TEST_RNG(r, std::string("varlen backward ") + scalar<T>::name() + " " + o.str());
  const index_t D = o.D, T_ = o.total(), N = o.N();
  const std::size_t elems = static_cast<std::size_t>(D * T_), states = static_cast<std::size_t>(N * D);
  std::vector<T> a(elems), b(elems), dx(elems), x(elems), x0, dxf;
  for (T& v : a) v = draw_gate<T>(r, o.fam, o.log);
  fill_normal(r, b);
  fill_normal(r, dx);
  if (o.x0) x0.resize(states), fill_normal(r, x0);
  if (o.dxfinal) dxf.resize(states), fill_normal(r, dxf);
  // x: the forward of each sequence in float64, rounded to T (the trailing steps: b).
  std::vector<ref_t<T>> x_ref(elems);
  for (index_t n = 0; n < N; ++n) {
    const index_t len = o.lengths[static_cast<std::size_t>(n)];
    std::vector<ref_t<T>> xs, xfs;
    const auto x0s = to_ref_vec(state_slice(x0, n, D));
    ref_forward(D, len, linear_gates(slice(o, a, n), o.log), to_ref_vec(slice(o, b, n)), o.x0 ? x0s.data() : nullptr,
                o.reverse, xs, xfs);
    unslice(o, xs, n, x_ref);
  }
  x = from_ref_vec<T>(x_ref);
  for (index_t d = 0; d < D; ++d)
    for (index_t t = o.used(); t < T_; ++t) x[static_cast<std::size_t>(d * T_ + t)] = b[static_cast<std::size_t>(d * T_ + t)];

  const geometry geo = packed_geometry(o);
  tensor<T> ta(geo, 0, &a), tdx(geo, 0, &dx), tx, tb, tx0, tdxf, tdx0;
  if (o.x_given) tx = tensor<T>(geo, 0, &x);
  else tb = tensor<T>(geo, 0, &b);
  if (o.x0) tx0 = tensor<T>::dense(N * D, 0, &x0), tdx0 = tensor<T>::dense(N * D, 0, nullptr);
  if (o.dxfinal) tdxf = tensor<T>::dense(N * D, 0, &dxf);
  tensor<T> tda(geo, 0, nullptr), tdb_own;
  if (!o.in_place) tdb_own = tensor<T>(geo, 0, nullptr);
  tensor<T>& tdb = o.in_place ? tdx : tdb_own;  // db == dx
  const auto cu = offsets_buffer(o.offsets());

  parscan::gated_varlen_backward_args<T> args;
  args.shape = varlen_shape{N, D, T_, cu.data(), api_layout(o.layout)};
  args.a = ta.ptr(), args.x = tx.ptr(), args.b = tb.ptr(), args.x0 = tx0.ptr(), args.dx = tdx.ptr();
  args.dx_final = tdxf.ptr(), args.da = tda.ptr(), args.db = tdb.ptr(), args.dx0 = tdx0.ptr();
  args.reverse = o.reverse;
  args.gate = o.log ? gate_form::log : gate_form::linear;
  args.a_strides = args.x_strides = args.b_strides = args.dx_strides = args.da_strides = args.db_strides = geo.s;
  const status st = parscan::gated_recurrence_backward(parscan_test::backend(), args);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);

  tda.fetch();
  {
    INFO("da: every step of every sequence written, the trailing steps not");
    CHECK(tda.unwritten() == o.trailing * D);
    CHECK(tda.stray_writes() == 0);
    CHECK(tda.guards_intact());
  }
  tdb.fetch();
  if (!o.in_place) CHECK(tdb.unwritten() == o.trailing * D);
  CHECK(tdb.stray_writes() == 0);
  const std::vector<T> da = tda.values(), db = tdb.values();
  std::vector<T> dx0;
  if (o.x0) check_output_writes(tdx0, "dx0"), dx0 = tdx0.values();
  check_input_unchanged(ta, "a");
  check_input_unchanged(tx, "x");
  check_input_unchanged(tb, "b");
  check_input_unchanged(tx0, "x0");
  check_input_unchanged(tdxf, "dx_final");
  if (!o.in_place) check_input_unchanged(tdx, "dx");

  std::vector<T> da_api(elems), db_api(elems), dx0_api(states);
  std::vector<ref_t<T>> da_ref(elems), db_ref(elems), dx0_ref(states);
  for (index_t n = 0; n < N; ++n) {
    const index_t len = o.lengths[static_cast<std::size_t>(n)];
    bwd_opts f;
    f.B = 1, f.D = D, f.T = len, f.layout = sequence_layout_of(o.layout);
    f.x0 = o.x0, f.dxfinal = o.dxfinal, f.x_given = o.x_given, f.reverse = o.reverse, f.log = o.log, f.fam = o.fam;
    bwd_inputs<T> in;
    in.a = slice(o, a, n), in.b = slice(o, b, n), in.x = slice(o, x, n), in.dx = slice(o, dx, n);
    in.x0 = state_slice(x0, n, D), in.dxf = state_slice(dxf, n, D);
    const bwd_out<T> one = backward_call(f, in);
    unslice(o, one.da, n, da_api);
    unslice(o, one.db, n, db_api);
    if (o.x0) std::copy(one.dx0.begin(), one.dx0.end(), dx0_api.begin() + n * D);
    const bwd_ref<T> ref = reference_backward(f, in);
    unslice(o, ref.da, n, da_ref);
    unslice(o, ref.db, n, db_ref);
    std::copy(ref.dx0.begin(), ref.dx0.end(), dx0_ref.begin() + n * D);
  }
  check_matches_per_sequence("da", used_steps(o, da), used_steps(o, da_api));
  check_matches_per_sequence("db", used_steps(o, db), used_steps(o, db_api));
  check_close("da", used_steps(o, da), used_steps(o, da_ref));
  check_close("db", used_steps(o, db), used_steps(o, db_ref));
  if (o.x0) {
    check_matches_per_sequence("dx0", dx0, dx0_api, max_abs(db_ref));
    check_close("dx0", dx0, dx0_ref, scalar<T>::tol, max_abs(db_ref));
  }
}

// ---------------------------------------------------------------------------------------
// The cases.

/// Length mixes: empty sequences among others, 1, primes, tile sizes ± 1 (32, 128, 256 and
/// 4096 steps bound the fixed-length kernels' tiles), no sequences at all, only empty ones.
inline std::vector<std::vector<index_t>> length_mixes() {
  std::vector<std::vector<index_t>> v = {
      {0, 1, 7, 0, 31, 32, 33, 1, 0},
      {127, 128, 129, 255, 256, 257},
      {4095, 0, 4097, 13},
      {1},
      {0},
      {0, 0, 0},
      {},
      {10007},
  };
  if (parscan_test::on_device) v.push_back({65537, 3, 1000, 16384, 0, 2});
  return v;
}

template <class T>
void forward_cases() {
  const std::vector<family> fams = gate_families<T>();
  int i = 0;
  for (const std::vector<index_t>& lengths : length_mixes())
    for (index_t D : {index_t(1), index_t(5), index_t(48)})
      for (lay l : {lay::cl, lay::tc, lay::s3}) {
        ++i;
        case_opts o;
        o.lengths = lengths, o.D = D, o.layout = l;
        o.trailing = (i % 4) == 1 ? 3 : 0;
        o.x0 = (i % 2) == 0, o.xfinal = (i % 5) != 3, o.reverse = ((i / 2) % 2) == 1;
        o.fam = fams[static_cast<std::size_t>(i / 3) % fams.size()];
        o.log = (i % 3) == 1 && o.fam != family::signed_;
        o.in_place = (i % 7) == 2;
        run_forward<T>(o);
      }
}

template <class T>
void forward_options() {
  for (lay l : {lay::cl, lay::tc})
    for (bool x0 : {false, true})
      for (bool rev : {false, true})
        for (bool log : {false, true}) {
          case_opts o;
          o.lengths = {5, 0, 130, 1, 33}, o.D = 7, o.layout = l, o.x0 = x0, o.reverse = rev, o.log = log;
          run_forward<T>(o);
        }
}

template <class T>
void backward_cases() {
  const std::vector<family> fams = gate_families<T>();
  int i = 0;
  for (const std::vector<index_t>& lengths : length_mixes())
    for (index_t D : {index_t(1), index_t(5), index_t(48)})
      for (lay l : {lay::cl, lay::tc, lay::s3}) {
        ++i;
        case_opts o;
        o.lengths = lengths, o.D = D, o.layout = l;
        o.trailing = (i % 4) == 2 ? 2 : 0;
        o.x0 = (i % 2) == 1, o.dxfinal = (i % 3) != 0, o.x_given = (i % 4) < 2, o.reverse = ((i / 2) % 3) == 1;
        o.fam = fams[static_cast<std::size_t>(i / 3) % fams.size()];
        o.log = (i % 5) == 2 && o.fam != family::signed_;
        o.in_place = (i % 7) == 3;
        run_backward<T>(o);
      }
}

template <class T>
void backward_options() {
  for (lay l : {lay::cl, lay::tc})
    for (bool x0 : {false, true})
      for (bool x_given : {false, true})
        for (bool rev : {false, true})
          for (bool log : {false, true}) {
            case_opts o;
            o.lengths = {5, 0, 130, 1, 33}, o.D = 7, o.layout = l, o.x0 = x0, o.dxfinal = !x0, o.x_given = x_given;
            o.reverse = rev, o.log = log;
            run_backward<T>(o);
          }
}

/// Channel-last with D = 96 (the 16-bit lane packs fit: on CUDA the staged lane tiles of every
/// sequence on one grid, with 2 or 3 groups of lanes, the last one partly used), many sequences
/// of mixed lengths (empty ones, 1, tile sizes ± 1, one of 2049), so that a block's tiles and a
/// role's search cross many sequences, and every option forward and backward.
template <class T>
void lane_pack_options() {
  std::vector<index_t> lengths;
  for (index_t i = 0; i < 60; ++i) lengths.push_back(i % 9 == 4 ? 0 : (i * 53 + 7) % 263);
  lengths.insert(lengths.begin() + 17, {1, 63, 64, 65, 127, 128, 129, 2049});
  for (bool x0 : {false, true})
    for (bool rev : {false, true})
      for (bool log : {false, true}) {
        case_opts o;
        o.lengths = lengths, o.D = 96, o.layout = lay::cl, o.x0 = x0, o.reverse = rev, o.log = log;
        o.trailing = log ? 5 : 0;
        run_forward<T>(o);
        for (bool x_given : {false, true}) {
          o.x_given = x_given, o.dxfinal = x0 != x_given;
          run_backward<T>(o);
        }
      }
}

/// More blocks than one wave of the device in each packed loop: 600 sequences of 0–40 steps
/// with long ones late in the index order. D = 64: the float forward's lane loop has 1200
/// blocks, so on CUDA they take the sequences longest first (varlen_recurrence.cuh's
/// lane_loop_order); the time-contiguous warp loop 38400 warps; strided, D = 512 on the
/// device: the step-by-step kernel has 1200 blocks of 256 threads (a wave is at most 8 · 132
/// on an H100). Channel-last again with D = 128 on the device, reversed: 600 jobs of the 16-bit
/// chunk loop in 256-byte rows (a block an SM), longest first.
template <class T>
void many_sequences() {
  std::vector<index_t> lengths;
  for (index_t i = 0; i < 600; ++i) lengths.push_back(i % 13 == 5 ? 0 : (i * 37) % 41);
  lengths[581] = 2500, lengths[590] = 700, lengths[7] = 1;
  int i = 0;
  for (lay l : {lay::cl, lay::tc, lay::s3, lay::cl}) {
    ++i;
    case_opts o;
    o.lengths = lengths, o.layout = l, o.D = !parscan_test::on_device ? 64 : i == 3 ? 512 : i == 4 ? 128 : 64;
    o.x0 = i != 2, o.reverse = i % 2 == 0, o.trailing = i == 3 ? 4 : 0;
    run_forward<T>(o);
    o.x_given = i != 1, o.dxfinal = true;
    run_backward<T>(o);
  }
}

/// The packed forward of `o` (x0 given, x_final written) on canonical a and b (d·total + t)
/// and x0 (N, D): x (canonical) and x_final.
template <class T>
std::pair<std::vector<T>, std::vector<T>> packed_forward(const case_opts& o, const std::vector<T>& a,
                                                         const std::vector<T>& b, const std::vector<T>& x0) {
  const geometry geo = packed_geometry(o);
  tensor<T> ta(geo, 0, &a), tb(geo, 0, &b), tx(geo, 0, nullptr);
  tensor<T> tx0 = tensor<T>::dense(o.N() * o.D, 0, &x0), txf = tensor<T>::dense(o.N() * o.D, 0, nullptr);
  const auto cu = offsets_buffer(o.offsets());
  parscan::gated_varlen_forward_args<T> args;
  args.shape = varlen_shape{o.N(), o.D, o.total(), cu.data(), api_layout(o.layout)};
  args.a = ta.ptr(), args.b = tb.ptr(), args.x = tx.ptr(), args.x0 = tx0.ptr(), args.x_final = txf.ptr();
  args.reverse = o.reverse;
  args.a_strides = args.b_strides = args.x_strides = geo.s;
  const status st = parscan::gated_recurrence_forward(parscan_test::backend(), args);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);
  tx.fetch(), txf.fetch();
  return {tx.values(), txf.values()};
}

/// The packed backward of `o` (x given, x0 and dx_final given, dx0 written) on canonical a, x,
/// dx (d·total + t) and x0, dx_final (N, D): da, db (canonical) and dx0.
template <class T>
std::tuple<std::vector<T>, std::vector<T>, std::vector<T>> packed_backward(
    const case_opts& o, const std::vector<T>& a, const std::vector<T>& x, const std::vector<T>& x0,
    const std::vector<T>& dx, const std::vector<T>& dx_final) {
  const geometry geo = packed_geometry(o);
  tensor<T> ta(geo, 0, &a), tx(geo, 0, &x), tdx(geo, 0, &dx), tda(geo, 0, nullptr), tdb(geo, 0, nullptr);
  tensor<T> tx0 = tensor<T>::dense(o.N() * o.D, 0, &x0), tdxf = tensor<T>::dense(o.N() * o.D, 0, &dx_final);
  tensor<T> tdx0 = tensor<T>::dense(o.N() * o.D, 0, nullptr);
  const auto cu = offsets_buffer(o.offsets());
  parscan::gated_varlen_backward_args<T> args;
  args.shape = varlen_shape{o.N(), o.D, o.total(), cu.data(), api_layout(o.layout)};
  args.a = ta.ptr(), args.x = tx.ptr(), args.x0 = tx0.ptr(), args.dx = tdx.ptr(), args.dx_final = tdxf.ptr();
  args.da = tda.ptr(), args.db = tdb.ptr(), args.dx0 = tdx0.ptr();
  args.reverse = o.reverse;
  args.a_strides = args.x_strides = args.dx_strides = args.da_strides = args.db_strides = geo.s;
  const status st = parscan::gated_recurrence_backward(parscan_test::backend(), args);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);
  tda.fetch(), tdb.fetch(), tdx0.fetch();
  return {tda.values(), tdb.values(), tdx0.values()};
}

/// Every sequence of `o` cut in two where its steps are processed: part 0 (the first third of
/// each sequence's steps in processing order), then part 1. `at` maps each canonical element
/// of the part (d·total + t) to the whole's.
struct packed_part {
  case_opts c;
  std::vector<std::pair<std::size_t, std::size_t>> at;  // (in the part, in the whole)

  template <class T>
  std::vector<T> take(const std::vector<T>& whole) const {
    std::vector<T> v(static_cast<std::size_t>(c.D * c.total()));
    for (const auto& [to, from] : at) v[to] = whole[from];
    return v;
  }
  /// The part's elements of a result of the part's call, in the order of `at`.
  template <class T>
  std::vector<T> of_part(const std::vector<T>& part) const {
    std::vector<T> v;
    for (const auto& [to, from] : at) v.push_back(part[to]);
    return v;
  }
  /// The part's elements of a result of the whole's call, in the same order.
  template <class T>
  std::vector<T> of_whole(const std::vector<T>& whole) const {
    std::vector<T> v;
    for (const auto& [to, from] : at) v.push_back(whole[from]);
    return v;
  }
};

inline packed_part packed_part_of(const case_opts& o, int k) {
  packed_part p;
  p.c = o;
  std::vector<index_t> from(o.lengths.size());
  for (std::size_t n = 0; n < o.lengths.size(); ++n) {
    const index_t len = o.lengths[n], first = len / 3, length = k == 0 ? first : len - first;
    from[n] = (k == 0) != o.reverse ? 0 : len - length;
    p.c.lengths[n] = length;
  }
  const index_t Tc = p.c.total(), T_ = o.total();
  for (std::size_t n = 0; n < o.lengths.size(); ++n)
    for (index_t d = 0; d < o.D; ++d)
      for (index_t t = 0; t < p.c.lengths[n]; ++t)
        p.at.emplace_back(static_cast<std::size_t>(d * Tc + p.c.offsets()[n] + t),
                          static_cast<std::size_t>(d * T_ + o.offsets()[n] + from[n] + t));
  return p;
}

/// The chunked calls against one call: bitwise on the host where the state is stored as it is
/// carried (float, double, complex<float>), within twice the dtype's tolerance of `scale`
/// otherwise.
template <class T>
void check_chunked(const char* what, const std::vector<T>& got, const std::vector<T>& want, double scale) {
  constexpr bool exact = !parscan_test::on_device && !std::is_same<T, parscan::bfloat16>::value;
  INFO(what << ": the chunked calls against one call");
  if (exact) CHECK(first_bitwise_difference(got, want) == -1);
  else check_close(what, got, to_ref_vec(want), 2 * scalar<T>::tol, scale);
}

inline std::vector<case_opts> chunked_cases() {
  std::vector<case_opts> v;
  for (lay l : {lay::cl, lay::tc})
    for (bool rev : {false, true}) {
      case_opts o;
      o.lengths = {0, 1, 7, 31, 32, 33, 100, 257, 0, 64}, o.D = 5, o.layout = l, o.reverse = rev, o.x0 = true;
      v.push_back(o);
    }
  return v;
}

/// Chunked use across calls, forward: the first part's x_final the second part's x0. Both
/// parts' x and the second's x_final equal one call's.
template <class T>
void chunked_forward() {
  for (const case_opts& o : chunked_cases()) {
    INFO(scalar<T>::name() << " varlen chunked forward " << o.str());
    PARSCAN_TEST_RNG(r, std::string("varlen chunked forward ") + scalar<T>::name() + " " + o.str());
    std::vector<T> a(static_cast<std::size_t>(o.D * o.total())), b(a.size()), x0(static_cast<std::size_t>(o.N() * o.D));
    for (T& v : a) v = draw_gate<T>(r, o.fam, false);
    fill_normal(r, b), fill_normal(r, x0);
    const auto whole = packed_forward(o, a, b, x0);
    const double scale = max_abs(to_ref_vec(whole.first));
    std::vector<T> state = x0;
    for (int k = 0; k < 2; ++k) {
      const packed_part part = packed_part_of(o, k);
      const auto got = packed_forward(part.c, part.take(a), part.take(b), state);
      INFO("part " << k);
      check_chunked("x", part.of_part(got.first), part.of_whole(whole.first), scale);
      state = got.second;
    }
    check_chunked("x_final", state, whole.second, scale);
  }
}

/// Chunked use across calls, backward: the later part first, from the whole's dx_final, its
/// dx0 the earlier part's dx_final; each part reads the forward's x and the state entering it
/// (the earlier part's x_final). Both parts' da and db and the earlier part's dx0 equal one
/// call's.
template <class T>
void chunked_backward() {
  for (const case_opts& o : chunked_cases()) {
    INFO(scalar<T>::name() << " varlen chunked backward " << o.str());
    PARSCAN_TEST_RNG(r, std::string("varlen chunked backward ") + scalar<T>::name() + " " + o.str());
    std::vector<T> a(static_cast<std::size_t>(o.D * o.total())), b(a.size()), dx(a.size());
    std::vector<T> x0(static_cast<std::size_t>(o.N() * o.D)), dx_final(x0.size());
    for (T& v : a) v = draw_gate<T>(r, o.fam, false);
    fill_normal(r, b), fill_normal(r, dx), fill_normal(r, x0), fill_normal(r, dx_final);
    const auto forward = packed_forward(o, a, b, x0);
    const auto [da, db, dx0] = packed_backward(o, a, forward.first, x0, dx, dx_final);
    const double scale = max_abs(to_ref_vec(db));
    const packed_part first = packed_part_of(o, 0), second = packed_part_of(o, 1);
    const std::vector<T> between = packed_forward(first.c, first.take(a), first.take(b), x0).second;
    const auto later = packed_backward(second.c, second.take(a), second.take(forward.first), between,
                                       second.take(dx), dx_final);
    const auto earlier = packed_backward(first.c, first.take(a), first.take(forward.first), x0, first.take(dx),
                                         std::get<2>(later));
    for (const auto* part : {&first, &second}) {
      const auto& got = part == &first ? earlier : later;
      INFO("part " << (part == &first ? 0 : 1));
      check_chunked("da", part->of_part(std::get<0>(got)), part->of_whole(da), scale);
      check_chunked("db", part->of_part(std::get<1>(got)), part->of_whole(db), scale);
    }
    check_chunked("dx0", std::get<2>(earlier), dx0, scale);
  }
}

/// Bad shapes and offsets: the status, and nothing written. Offsets in host memory (host
/// backend) are checked in full; on CUDA only what is readable without the device.
template <class T>
void bad_arguments() {
  const index_t D = 3, T_ = 10;
  std::vector<T> a(static_cast<std::size_t>(D * T_), T(0.5f)), b = a;
  const geometry geo = make_geometry(arrangement::cl, 1, D, T_);
  tensor<T> ta(geo, 0, &a), tb(geo, 0, &b), tx(geo, 0, nullptr), txf = tensor<T>::dense(2 * D, 0, nullptr);
  struct bad {
    std::vector<std::int64_t> offsets;
    index_t N;
    status expected;
    bool host_only;
    const char* what;
  };
  const bad cases[] = {
      {{1, 4, 10}, 2, status::invalid_offsets, true, "first offset not 0"},
      {{0, 6, 4}, 2, status::invalid_offsets, true, "decreasing offsets"},
      {{0, 4, 11}, 2, status::invalid_offsets, true, "last offset past total_length"},
      {{0, 4, 10}, -1, status::negative_size, false, "negative N"},
  };
  auto call = [&](const std::int64_t* cu, index_t N) {
    parscan::gated_varlen_forward_args<T> args;
    args.shape = varlen_shape{N, D, T_, cu, parscan::recurrence_layout::channel_last};
    args.a = ta.ptr(), args.b = tb.ptr(), args.x = tx.ptr(), args.x_final = txf.ptr();
    const status st = parscan::gated_recurrence_forward(parscan_test::backend(), args);
    PARSCAN_TEST_SYNC();
    return st;
  };
  for (const bad& c : cases) {
    if (c.host_only && parscan_test::on_device) continue;
    INFO(c.what);
    const auto cu = offsets_buffer(c.offsets);
    CHECK(call(cu.data(), c.N) == c.expected);
    check_untouched(tx, "x");
    check_untouched(txf, "x_final");
  }
  {
    INFO("null cu_seqlens");
    CHECK(call(nullptr, 2) == status::null_pointer);
    CHECK(call(nullptr, 0) == status::null_pointer);
    check_untouched(tx, "x");
  }
  {
    INFO("N·D overflows");
    const auto cu = offsets_buffer({0});
    parscan::gated_varlen_forward_args<T> args;
    args.shape = varlen_shape{index_t(1) << 62, 4, T_, cu.data(), parscan::recurrence_layout::channel_last};
    args.a = ta.ptr(), args.b = tb.ptr(), args.x = tx.ptr();
    CHECK(parscan::gated_recurrence_forward(parscan_test::backend(), args) == status::size_overflow);
  }
  {
    INFO("x_final overlapping x");
    const auto cu = offsets_buffer({0, 4, 10});
    parscan::gated_varlen_forward_args<T> args;
    args.shape = varlen_shape{2, D, T_, cu.data(), parscan::recurrence_layout::channel_last};
    args.a = ta.ptr(), args.b = tb.ptr(), args.x = tx.ptr(), args.x_final = tx.ptr() + 1;
    CHECK(parscan::gated_recurrence_forward(parscan_test::backend(), args) == status::overlapping_output);
    check_untouched(tx, "x");
  }
  {
    INFO("backward: bad offsets, and x0 without dx0");
    tensor<T> tdx(geo, 0, &b), tda(geo, 0, nullptr), tdb(geo, 0, nullptr);
    std::vector<T> x0(static_cast<std::size_t>(2 * D), T(1.0f));
    tensor<T> tx0 = tensor<T>::dense(2 * D, 0, &x0);
    auto back = [&](const std::vector<std::int64_t>& offsets, bool dx0_missing) {
      const auto cu = offsets_buffer(offsets);
      tensor<T> tdx0 = tensor<T>::dense(2 * D, 0, nullptr);
      parscan::gated_varlen_backward_args<T> args;
      args.shape = varlen_shape{2, D, T_, cu.data(), parscan::recurrence_layout::channel_last};
      args.a = ta.ptr(), args.x = tb.ptr(), args.x0 = tx0.ptr(), args.dx = tdx.ptr();
      args.da = tda.ptr(), args.db = tdb.ptr(), args.dx0 = dx0_missing ? nullptr : tdx0.ptr();
      const status st = parscan::gated_recurrence_backward(parscan_test::backend(), args);
      PARSCAN_TEST_SYNC();
      check_untouched(tdx0, "dx0");
      return st;
    };
    if (!parscan_test::on_device) CHECK(back({0, 7, 5}, false) == status::invalid_offsets);
    CHECK(back({0, 4, 10}, true) == status::null_pointer);
    check_untouched(tda, "da");
    check_untouched(tdb, "db");
  }
}

}  // namespace varlen_test

#define VARLEN_NAME(title) PARSCAN_TEST_NAME("varlen recurrence " title)
#define VARLEN_TAGS(tags) PARSCAN_TEST_TAGS("[recurrence][varlen]" tags)

/// The dtypes of the packed path: the library's, less float16 (its arithmetic is bfloat16's).
#define VARLEN_FOR_EACH_DTYPE(title, tags, fn)                                                          \
  TEST_CASE(VARLEN_NAME(title " <float>"), VARLEN_TAGS(tags)) { varlen_test::fn<float>(); }            \
  TEST_CASE(VARLEN_NAME(title " <double>"), VARLEN_TAGS(tags)) { varlen_test::fn<double>(); }          \
  TEST_CASE(VARLEN_NAME(title " <bfloat16>"), VARLEN_TAGS(tags)) { varlen_test::fn<parscan::bfloat16>(); } \
  TEST_CASE(VARLEN_NAME(title " <complex<float>>"), VARLEN_TAGS(tags)) { varlen_test::fn<rec_test::cfloat>(); }

VARLEN_FOR_EACH_DTYPE("forward: length mixes x layouts x options", "[forward]", forward_cases)
VARLEN_FOR_EACH_DTYPE("forward: every option in both dense layouts", "[forward]", forward_options)
VARLEN_FOR_EACH_DTYPE("backward: length mixes x layouts x options", "[backward]", backward_cases)
VARLEN_FOR_EACH_DTYPE("backward: every option in both dense layouts", "[backward]", backward_options)
VARLEN_FOR_EACH_DTYPE("channel-last lane packs: many sequences and every option", "[forward][backward]",
                      lane_pack_options)
VARLEN_FOR_EACH_DTYPE("many sequences: more blocks than a wave", "[forward][backward]", many_sequences)
VARLEN_FOR_EACH_DTYPE("chunked forward across calls equals one call", "[forward]", chunked_forward)
VARLEN_FOR_EACH_DTYPE("chunked backward across calls equals one call", "[backward]", chunked_backward)
VARLEN_FOR_EACH_DTYPE("bad offsets and arguments return their status and write nothing", "[errors]", bad_arguments)
