// test/matrix/matrix_cases.inl — the matrix-recurrence and matrix-chain tests
// (parscan/matrix_recurrence.hpp), backend-neutral. Included by matrix_test.cpp (host backend)
// and matrix_test.cu (CUDA backend, PARSCAN_TEST_CUDA=1); test names carry the backend.
//
// Every result is compared with a float64 sequential reference (matrix_reference.hpp) computed
// from the same rounded inputs; error max|got − ref| / max|ref| within tolerance<T>(size, steps).
// Every output is poisoned before the call and checked afterwards: each element written,
// nothing written around it (holes of strided views, guard bands), inputs untouched.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/env.hpp"

#include "matrix/matrix_reference.hpp"
#include "matrix/matrix_support.hpp"

namespace mtx_test {

using parscan::chain_math;
using parscan::chain_order;
using parscan::chain_output;

// ---------------------------------------------------------------------------------------
// The recurrence: inputs, reference, one call.

struct rec_opts {
  index_t B = 1, T = 1, N = 1;
  int layout = 0;  // 0: all dense (-1); 1: padded / batch-inner views; 2: W shared across steps; 3: dense given
  bool x0 = false, xfinal = true, reverse = false;
  bool in_place = false;  // forward: x == b; backward: db == dx
  bool x_given = true, dxfinal = true;  // backward only
  family fam = family::contractive;
  index_t misalign = 0;
  std::string str() const {
    std::ostringstream s;
    s << "B=" << B << " T=" << T << " N=" << N << " layout=" << layout << " x0=" << x0 << " x_final=" << xfinal
      << " reverse=" << reverse << " in_place=" << in_place << " x_given=" << x_given << " dx_final=" << dxfinal
      << " family=" << name(fam) << " misalign=" << misalign;
    return s.str();
  }
};

// Arrangements of W, b, x, dx, dW, db for each `layout` value.
struct rec_arr { arrangement W, b, x, dx, dW, db; };
inline rec_arr arrangements(const rec_opts& o) {
  using a = arrangement;
  rec_arr r{a::dense, a::dense, a::dense, a::dense, a::dense, a::dense};
  if (o.layout == 1) r = {a::padded, a::batch_inner, a::padded, a::batch_inner, a::padded, a::padded};
  if (o.layout == 2) r = {a::shared_step, a::padded, a::batch_inner, a::padded, a::batch_inner, a::batch_inner};
  if (o.layout == 3) r = {a::dense_given, a::dense_given, a::dense_given, a::dense_given, a::dense_given, a::dense_given};
  return r;
}

template <class T>
struct rec_inputs {
  std::vector<T> W, b, x0, x, dx, dxf;  // canonical; x = the forward output rounded to T
  dvec x_ref;                           // the forward output in float64
};

template <class T>
rec_inputs<T> draw_inputs(rng& r, const rec_opts& o) {
  rec_inputs<T> in;
  const std::size_t vec = static_cast<std::size_t>(o.B * o.T * o.N), st = static_cast<std::size_t>(o.B * o.N);
  in.W = draw_matrices<T>(r, o.fam, o.B * o.T, o.N);
  if (arrangements(o).W == arrangement::shared_step)  // one W per sequence, used at every step
    for (index_t q = 0; q < o.B; ++q)
      for (index_t t = 1; t < o.T; ++t)
        std::copy_n(in.W.begin() + q * o.T * o.N * o.N, o.N * o.N, in.W.begin() + (q * o.T + t) * o.N * o.N);
  in.b = draw_normal<T>(r, vec);
  if (o.x0) in.x0 = draw_normal<T>(r, st);
  in.dx = draw_normal<T>(r, vec);
  if (o.dxfinal) in.dxf = draw_normal<T>(r, st);
  dvec xf;
  ref_forward(o.B, o.T, o.N, to_dvec(in.W), to_dvec(in.b), to_dvec(in.x0), o.reverse, in.x_ref, xf);
  in.x.resize(vec);
  for (std::size_t i = 0; i < vec; ++i) in.x[i] = from_d<T>(in.x_ref[i]);
  return in;
}

template <class T>
struct fwd_result {
  status st = status::success;
  dvec x, xf;
};

/// One forward call on fresh guarded tensors; CHECKs the writes, guards and untouched inputs.
template <class T>
fwd_result<T> forward_call(const rec_opts& o, const rec_inputs<T>& in) {
  const rec_arr a = arrangements(o);
  const index_t NN = o.N * o.N;
  tensor<T> tW(make_geometry(a.W, o.B, o.T, NN), &in.W, o.misalign);
  tensor<T> tb(make_geometry(a.b, o.B, o.T, o.N), &in.b, o.misalign);
  tensor<T> tx_own, tx0, txf;
  if (!o.in_place) tx_own = tensor<T>(make_geometry(a.x, o.B, o.T, o.N), nullptr, o.misalign);
  tensor<T>& tx = o.in_place ? tb : tx_own;
  if (o.x0) tx0 = tensor<T>(state_geometry(o.B, o.N), &in.x0, o.misalign);
  if (o.xfinal) txf = tensor<T>(state_geometry(o.B, o.N), nullptr, o.misalign);

  parscan::matrix_forward_args<T> g;
  g.batch = o.B, g.length = o.T, g.n = o.N;
  g.W = tW.ptr(), g.b = tb.ptr(), g.x = tx.ptr(), g.x0 = tx0.ptr(), g.x_final = txf.ptr();
  g.reverse = o.reverse;
  g.W_strides = tW.strides(), g.b_strides = tb.strides(), g.x_strides = tx.strides();
  fwd_result<T> out;
  out.st = parscan::matrix_recurrence_forward(parscan_test::backend(), g);
  PARSCAN_TEST_SYNC();
  REQUIRE(out.st == status::success);
  out.x = check_written(tx, "x", !o.in_place);
  if (o.xfinal) out.xf = check_written(txf, "x_final");
  check_unchanged(tW, "input W");
  if (!o.in_place) check_unchanged(tb, "input b");
  check_unchanged(tx0, "input x0");
  return out;
}

template <class T>
void run_forward(const rec_opts& o) {
  INFO(dtype_name<T>() << " forward " << o.str());
  PARSCAN_TEST_RNG(r, std::string("matrix forward ") + dtype_name<T>() + " " + o.str());
  const rec_inputs<T> in = draw_inputs<T>(r, o);
  dvec x, xf;
  ref_forward(o.B, o.T, o.N, to_dvec(in.W), to_dvec(in.b), to_dvec(in.x0), o.reverse, x, xf);
  const fwd_result<T> out = forward_call(o, in);
  const double tol = tolerance<T>(o.N, o.T);
  check_close("x", out.x, x, tol);
  if (o.xfinal) check_close("x_final", out.xf, xf, tol, max_abs(x));
}

template <class T>
struct bwd_result {
  status st = status::success;
  dvec dW, db, dx0;
};

/// The reference backward: from the given (rounded) x, or from x in float64 when the call
/// recomputes it.
template <class T>
bwd_result<T> reference_backward(const rec_opts& o, const rec_inputs<T>& in) {
  bwd_result<T> r;
  ref_backward(o.B, o.T, o.N, to_dvec(in.W), o.x_given ? to_dvec(in.x) : in.x_ref, to_dvec(in.x0), to_dvec(in.dx),
               to_dvec(in.dxf), o.reverse, r.dW, r.db, r.dx0);
  return r;
}

/// One backward call on fresh guarded tensors; CHECKs the writes, guards and untouched inputs.
template <class T>
bwd_result<T> backward_call(const rec_opts& o, const rec_inputs<T>& in) {
  const rec_arr a = arrangements(o);
  const index_t NN = o.N * o.N;
  auto geo = [&](arrangement ar, index_t K) { return make_geometry(ar, o.B, o.T, K); };
  tensor<T> tW(geo(a.W, NN), &in.W, o.misalign), tdx(geo(a.dx, o.N), &in.dx, o.misalign);
  tensor<T> tx, tb, tx0, tdxf, tdx0, tdb_own;
  if (o.x_given) tx = tensor<T>(geo(a.x, o.N), &in.x, o.misalign);
  else tb = tensor<T>(geo(a.b, o.N), &in.b, o.misalign);
  if (o.x0) tx0 = tensor<T>(state_geometry(o.B, o.N), &in.x0, o.misalign);
  if (o.dxfinal) tdxf = tensor<T>(state_geometry(o.B, o.N), &in.dxf, o.misalign);
  tdx0 = tensor<T>(state_geometry(o.B, o.N), nullptr, o.misalign);  // given even without x0: must stay untouched
  tensor<T> tdW(geo(a.dW, NN), nullptr, o.misalign);
  if (!o.in_place) tdb_own = tensor<T>(geo(a.db, o.N), nullptr, o.misalign);
  tensor<T>& tdb = o.in_place ? tdx : tdb_own;

  parscan::matrix_backward_args<T> g;
  g.batch = o.B, g.length = o.T, g.n = o.N;
  g.W = tW.ptr(), g.x = tx.ptr(), g.b = tb.ptr(), g.x0 = tx0.ptr(), g.dx = tdx.ptr(), g.dx_final = tdxf.ptr();
  g.dW = tdW.ptr(), g.db = tdb.ptr(), g.dx0 = tdx0.ptr();
  g.reverse = o.reverse;
  g.W_strides = tW.strides(), g.x_strides = geo(a.x, o.N).api, g.b_strides = geo(a.b, o.N).api;
  g.dx_strides = tdx.strides(), g.dW_strides = tdW.strides(), g.db_strides = tdb.strides();
  bwd_result<T> out;
  out.st = parscan::matrix_recurrence_backward(parscan_test::backend(), g);
  PARSCAN_TEST_SYNC();
  REQUIRE(out.st == status::success);
  out.dW = check_written(tdW, "dW");
  out.db = check_written(tdb, "db", !o.in_place);
  if (o.x0) out.dx0 = check_written(tdx0, "dx0");
  else check_unchanged(tdx0, "dx0 (no x0: written only when x0 is given)");
  check_unchanged(tW, "input W"), check_unchanged(tx, "input x"), check_unchanged(tb, "input b");
  check_unchanged(tx0, "input x0"), check_unchanged(tdxf, "input dx_final");
  if (!o.in_place) check_unchanged(tdx, "input dx");
  return out;
}

template <class T>
void run_backward(const rec_opts& o) {
  INFO(dtype_name<T>() << " backward " << o.str());
  PARSCAN_TEST_RNG(r, std::string("matrix backward ") + dtype_name<T>() + " " + o.str());
  const rec_inputs<T> in = draw_inputs<T>(r, o);
  const bwd_result<T> ref = reference_backward(o, in);
  const bwd_result<T> out = backward_call(o, in);
  const double tol = tolerance<T>(o.N, o.T);
  check_close("dW", out.dW, ref.dW, tol);
  check_close("db", out.db, ref.db, tol);
  if (o.x0) check_close("dx0", out.dx0, ref.dx0, tol, max_abs(ref.db));
}

// ---------------------------------------------------------------------------------------
// The recurrence: sweeps.

inline const std::vector<index_t>& state_sizes() {
  static const std::vector<index_t> v = {1, 2, 3, 4, 8, 16, 33, 64};
  return v;
}
inline const std::vector<index_t>& lengths() {
  static const std::vector<index_t> v = {1, 2, 31, 32, 33, 1000, 1009};  // 1009 is prime
  return v;
}

/// Every N × every T, with B, family and options rotating so each size meets each of them.
template <class T>
void forward_sweep() {
  int i = 0;
  for (index_t N : state_sizes())
    for (index_t L : lengths()) {
      ++i;
      rec_opts o;
      o.B = (i % 3 == 0) ? 3 : (i % 3 == 1 ? 1 : 2), o.T = L, o.N = N;
      if (N >= 33 && L >= 1000) o.B = 1;  // keeps the host run short; B > 1 is covered elsewhere
      o.x0 = i % 2 == 0, o.xfinal = i % 5 != 3, o.reverse = (i / 2) % 2 == 1;
      o.fam = (i % 3 == 2) ? family::near_orthogonal : family::contractive;
      o.layout = i % 4;
      run_forward<T>(o);
    }
}

/// Every option and layout on a few moderate shapes: x0, x_final, reverse, in place, strided
/// views, W shared across steps, misaligned pointers, both families.
template <class T>
void forward_options() {
  int i = 0;
  for (const auto& s : {std::vector<index_t>{3, 37, 5}, std::vector<index_t>{2, 130, 16}})
    for (int layout = 0; layout < 4; ++layout)
      for (bool x0 : {false, true})
        for (bool rev : {false, true})
          for (bool in_place : {false, true}) {
            ++i;
            rec_opts o;
            o.B = s[0], o.T = s[1], o.N = s[2], o.layout = layout;
            o.x0 = x0, o.reverse = rev, o.in_place = in_place, o.xfinal = i % 3 != 0;
            o.fam = i % 2 ? family::near_orthogonal : family::contractive;
            o.misalign = i % 4 == 1 ? 1 : 0;
            run_forward<T>(o);
          }
}

template <class T>
void backward_sweep() {
  int i = 0;
  for (index_t N : state_sizes())
    for (index_t L : lengths()) {
      ++i;
      rec_opts o;
      o.B = (i % 3 == 0) ? 3 : (i % 3 == 1 ? 1 : 2), o.T = L, o.N = N;
      if (N >= 33 && L >= 1000) o.B = 1;
      o.x0 = i % 2 == 1, o.dxfinal = i % 3 != 0, o.x_given = i % 4 < 2, o.reverse = (i / 2) % 3 == 1;
      o.fam = (i % 3 == 1) ? family::near_orthogonal : family::contractive;
      o.layout = (i / 3) % 4;
      run_backward<T>(o);
    }
}

template <class T>
void backward_options() {
  int i = 0;
  for (const auto& s : {std::vector<index_t>{3, 37, 5}, std::vector<index_t>{2, 130, 16}})
    for (int layout = 0; layout < 4; ++layout)
      for (bool x0 : {false, true})
        for (bool rev : {false, true})
          for (int mode = 0; mode < 3; ++mode) {  // x given; x recomputed from b; x given and db == dx
            ++i;
            rec_opts o;
            o.B = s[0], o.T = s[1], o.N = s[2], o.layout = layout;
            o.x0 = x0, o.reverse = rev, o.x_given = mode != 1, o.in_place = mode == 2, o.dxfinal = i % 3 != 0;
            o.fam = i % 2 ? family::near_orthogonal : family::contractive;
            o.misalign = i % 4 == 1 ? 1 : 0;
            run_backward<T>(o);
          }
}

/// The same call twice gives the same bits, and both are right. Long sequences of small N: on
/// CUDA, N = 2 takes the thread engine's single pass, whose tiles (2048 steps) learn their
/// prefix from a look-back over the tiles before them, in whatever order they finish; on the
/// GPU's long shapes (T = 300017: 147 tiles) several windows of 32 tiles, so a look-back also
/// chains window prefixes. N = 4 takes phases a, b and c.
template <class T>
void repeatable() {
  const bool long_shapes = parscan_test::long_shapes_wanted();
  for (index_t N : {2, 4}) {
    rec_opts o;
    o.B = 3, o.N = N, o.x0 = true, o.xfinal = true, o.reverse = N == 4;
    o.T = !long_shapes ? 20000 + 17 : N == 2 ? 300000 + 17 : 140000 + 3;
    o.fam = family::contractive;
    INFO(dtype_name<T>() << " forward twice " << o.str());
    PARSCAN_TEST_RNG(r, std::string("matrix repeat ") + dtype_name<T>() + " " + o.str());
    const rec_inputs<T> in = draw_inputs<T>(r, o);
    dvec x, xf;
    ref_forward(o.B, o.T, o.N, to_dvec(in.W), to_dvec(in.b), to_dvec(in.x0), o.reverse, x, xf);
    const fwd_result<T> first = forward_call(o, in), second = forward_call(o, in);
    const double tol = tolerance<T>(o.N, o.T);
    check_close("x", first.x, x, tol);
    check_close("x_final", first.xf, xf, tol, max_abs(x));
    // Counted rather than compared whole, so that a failure does not print 10^6 values.
    const auto differing = [](const dvec& u, const dvec& w) {
      std::size_t n = u.size() == w.size() ? 0 : 1;
      for (std::size_t i = 0; i < u.size() && i < w.size(); ++i) n += u[i] != w[i];
      return n;
    };
    CHECK(differing(first.x, second.x) == 0);
    CHECK(differing(first.xf, second.xf) == 0);
  }
}

/// The edges of the CUDA engines: the thread engine (N ≤ 4: one task per thread, 32 tasks per
/// warp, stages of 8 steps, 4 for N = 4), the tensor engine (N = 5–16, padded to 8 or 16: N = 8
/// and 16 exact, the others padded; phase a a warp a task, phase c 4 or 2 tasks a warp; rows of
/// W read 16 bytes at a time where aligned, element by element where not or transposed) and the
/// block engine (N = 17). T within one chunk (T ≤ 64 runs phase c alone) and T not a multiple
/// of the chunk (32 steps for the thread engine here, 64 for the tensor engine) or of a stage
/// (129 leaves a last chunk of one step), B = 1 and B not a multiple of the tasks per warp or
/// per block, every layout (step stride 0 for W), reverse, x0 / x_final, in place; the backward
/// with x given and recomputed. The host backend runs the same cases (its own code).
template <class T>
void engine_edges() {
  int i = 0;
  for (index_t N : {1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 15, 16, 17})
    for (index_t L : {1, 63, 129, 300}) {
      ++i;
      rec_opts o;
      o.B = i % 3 == 0 ? 1 : (i % 3 == 1 ? 3 : 17), o.T = L, o.N = N;
      o.layout = i % 4, o.reverse = (i / 2) % 2 == 1, o.x0 = i % 3 != 1, o.xfinal = i % 5 != 4;
      o.in_place = i % 7 == 3;
      o.fam = i % 2 ? family::near_orthogonal : family::contractive;
      run_forward<T>(o);
      o.x_given = i % 4 < 2, o.dxfinal = i % 3 != 2, o.in_place = i % 7 == 5;
      run_backward<T>(o);
    }
  // The thread engine's phase b over many chunks: 141 chunks of 32 steps (the last of 17),
  // fewer than its 256 threads; 601 chunks of 32, 3 per thread (the last thread's 1); and 2041
  // chunks of 40 (the most it takes is 2048), 8 per thread. The two long ones are contractive:
  // over 10^4 near-orthogonal steps the state can grow past float16's range. For float16 the
  // 4497-step ones are contractive too: dW sums db·x over every step, and near-orthogonal
  // draws took it past 65504 (inf with PARSCAN_TEST_SEED=9166567156715723372).
  constexpr bool narrow_range = std::is_same_v<T, parscan::float16>;
  for (index_t N : {1, 2, 3, 4}) {
    rec_opts o;
    o.B = N % 2 ? 2 : 1, o.T = N % 2 ? 140 * 32 + 17 : (N == 2 ? 600 * 32 + 5 : 2040 * 40 + 7), o.N = N;
    o.layout = N == 3 ? 2 : 0, o.x0 = N != 3, o.reverse = N >= 3;
    o.fam = N % 2 && !narrow_range ? family::near_orthogonal : family::contractive;
    run_forward<T>(o);
    o.x_given = N != 1, o.dxfinal = true;
    run_backward<T>(o);
  }
  // The backward's W' one step after b': for N = 2 in a 16-bit type a step of W is 8 bytes, so
  // with T a multiple of 8 every stage of 8 steps starts 8-byte (not 16-byte) aligned, and the
  // warp copies whole stages in 8-byte units. Dense tensors, forward and reverse, x given and
  // recomputed, and a sequence length that ends with a short stage (T = 8·97 + 3).
  for (index_t L : {index_t(8 * 100), index_t(8 * 97 + 3)})
    for (bool reverse : {false, true}) {
      rec_opts o;
      o.B = 5, o.T = L, o.N = 2, o.layout = 0, o.reverse = reverse, o.x0 = reverse, o.dxfinal = !reverse;
      o.x_given = L % 8 == 0;
      o.fam = family::contractive;
      run_backward<T>(o);
    }
  // The tensor engine over many chunks of a few sequences: 113 chunks of 64 steps (N = 6, padded
  // to 8; the last of 39 steps) and 76 of 64 (N = 16; the last of 5), so that phase b
  // (tensor_carry_kernel) walks more chunks than its two prefetch batches hold (16 and 6). (A single pass, 365be8c, ran these as 181 and 401 chunks, its
  // look-backs walking many published maps.)
  for (index_t N : {6, 16}) {
    rec_opts o;
    o.B = N == 6 ? 2 : 3, o.T = N == 6 ? 150 * 48 + 7 : 300 * 16 + 5, o.N = N;
    o.layout = N == 6 ? 2 : 1, o.x0 = true, o.xfinal = true, o.reverse = N == 16;
    o.fam = family::contractive;
    run_forward<T>(o);
    o.x_given = false, o.dxfinal = true;
    run_backward<T>(o);
  }
  // Many tasks: 40 sequences of 200 steps, 4 chunks each (the last of 8 steps), several warps
  // and blocks, and for N = 1 a warp's 16 tasks spanning several sequences.
  for (index_t N : {1, 6, 16}) {
    rec_opts o;
    o.B = 40, o.T = 200, o.N = N, o.layout = N == 6 ? 2 : 1, o.x0 = true, o.reverse = N == 6;
    run_forward<T>(o);
    o.x_given = N != 1;
    run_backward<T>(o);
  }
}

// ---------------------------------------------------------------------------------------
// Chunked use: the time axis in 3 uneven consecutive chunks, each a call on a view of the
// full tensors (explicit strides, pointers offset by the chunk's first step).

template <class T>
void run_chunked(const rec_opts& o, bool state_in_place) {
  INFO(dtype_name<T>() << " chunked " << o.str() << " state_in_place=" << state_in_place);
  PARSCAN_TEST_RNG(r, std::string("matrix chunked ") + dtype_name<T>() + " " + o.str() + (state_in_place ? " sip" : ""));
  REQUIRE(o.T >= 3);
  const rec_inputs<T> in = draw_inputs<T>(r, o);
  const index_t N = o.N, NN = N * N, B = o.B;
  dvec x_ref, xf_ref;
  ref_forward(B, o.T, N, to_dvec(in.W), to_dvec(in.b), to_dvec(in.x0), o.reverse, x_ref, xf_ref);
  const bwd_result<T> bref = reference_backward(o, in);
  const fwd_result<T> whole_f = forward_call(o, in);
  const bwd_result<T> whole_b = backward_call(o, in);
  const double tol = tolerance<T>(N, o.T);

  const index_t l1 = std::max<index_t>(1, o.T / 7), l2 = std::max<index_t>(1, (o.T - l1) * 2 / 3);
  const index_t cut[4] = {0, l1, l1 + l2, o.T};
  const int order[3] = {o.reverse ? 2 : 0, 1, o.reverse ? 0 : 2};  // chunks in processing order
  const rec_arr a = arrangements(o);
  auto geo = [&](arrangement ar, index_t K) {
    geometry g = make_geometry(ar, B, o.T, K);
    g.api = {g.batch, g.step};  // a chunk is a view: its strides are the full tensor's
    return g;
  };
  tensor<T> tW(geo(a.W, NN), &in.W), tb(geo(a.b, N), &in.b), tx(geo(a.x, N), nullptr);
  tensor<T> tx0;
  if (o.x0) tx0 = tensor<T>(state_geometry(B, N), &in.x0);
  std::vector<tensor<T>> state(3);  // state after each chunk (processing position)
  tensor<T> shared;                 // state_in_place: one buffer is x0 and x_final of every chunk
  if (state_in_place) shared = tensor<T>(state_geometry(B, N), o.x0 ? &in.x0 : nullptr);
  for (int k = 0; k < 3; ++k) {
    const index_t t0 = cut[order[k]], len = cut[order[k] + 1] - t0;
    if (!state_in_place) state[k] = tensor<T>(state_geometry(B, N), nullptr);
    parscan::matrix_forward_args<T> g;
    g.batch = B, g.length = len, g.n = N, g.reverse = o.reverse;
    g.W = tW.ptr() + t0 * tW.geom().step, g.b = tb.ptr() + t0 * tb.geom().step, g.x = tx.ptr() + t0 * tx.geom().step;
    g.x0 = k == 0 ? tx0.ptr() : state[k - 1].ptr();
    g.x_final = state[k].ptr();
    if (state_in_place) g.x0 = (k == 0 && !o.x0) ? nullptr : shared.ptr(), g.x_final = shared.ptr();
    g.W_strides = tW.strides(), g.b_strides = tb.strides(), g.x_strides = tx.strides();
    const status st = parscan::matrix_recurrence_forward(parscan_test::backend(), g);
    PARSCAN_TEST_SYNC();
    INFO("forward chunk " << order[k]);
    REQUIRE(st == status::success);
    if (state_in_place) {  // keep this state: the backward chunks need it as their x0
      shared.fetch();
      const std::vector<T> v = shared.values();
      state[k] = tensor<T>(state_geometry(B, N), &v);
    }
  }
  const dvec xc = check_written(tx, "x (chunked)");
  const dvec xfc = check_written(state[2], "x_final (chunked)", true);
  check_close("chunked x vs reference", xc, x_ref, tol);
  check_close("chunked x_final vs reference", xfc, xf_ref, tol, max_abs(x_ref));
  check_close("chunked x vs one call", xc, whole_f.x, 2 * tol);

  tensor<T> bW(geo(a.W, NN), &in.W), bdx(geo(a.dx, N), &in.dx), bdW(geo(a.dW, NN), nullptr), bdb(geo(a.db, N), nullptr);
  tensor<T> bx, bb, bdxf;
  if (o.x_given) bx = tensor<T>(geo(a.x, N), &in.x);
  else bb = tensor<T>(geo(a.b, N), &in.b);
  if (o.dxfinal) bdxf = tensor<T>(state_geometry(B, N), &in.dxf);
  std::vector<tensor<T>> dstate(3);  // dx0 of each chunk
  tensor<T> dshared;
  if (state_in_place) dshared = tensor<T>(state_geometry(B, N), o.dxfinal ? &in.dxf : nullptr);
  for (int k = 2; k >= 0; --k) {
    const index_t t0 = cut[order[k]], len = cut[order[k] + 1] - t0;
    const bool has_x0 = k > 0 || o.x0;
    if (has_x0) dstate[k] = tensor<T>(state_geometry(B, N), nullptr);
    parscan::matrix_backward_args<T> g;
    g.batch = B, g.length = len, g.n = N, g.reverse = o.reverse;
    g.W = bW.ptr() + t0 * bW.geom().step;
    g.x = bx ? bx.ptr() + t0 * bx.geom().step : nullptr;
    g.b = bb ? bb.ptr() + t0 * bb.geom().step : nullptr;
    g.x0 = k == 0 ? tx0.ptr() : state[k - 1].ptr();
    g.dx = bdx.ptr() + t0 * bdx.geom().step;
    g.dx_final = k == 2 ? bdxf.ptr() : dstate[k + 1].ptr();
    g.dW = bdW.ptr() + t0 * bdW.geom().step, g.db = bdb.ptr() + t0 * bdb.geom().step;
    g.dx0 = has_x0 ? dstate[k].ptr() : nullptr;
    if (state_in_place) g.dx_final = (k == 2 && !o.dxfinal) ? nullptr : dshared.ptr(), g.dx0 = has_x0 ? dshared.ptr() : nullptr;
    g.W_strides = bW.strides(), g.x_strides = geo(a.x, N).api, g.b_strides = geo(a.b, N).api;
    g.dx_strides = bdx.strides(), g.dW_strides = bdW.strides(), g.db_strides = bdb.strides();
    const status st = parscan::matrix_recurrence_backward(parscan_test::backend(), g);
    PARSCAN_TEST_SYNC();
    INFO("backward chunk " << order[k]);
    REQUIRE(st == status::success);
  }
  const dvec dWc = check_written(bdW, "dW (chunked)"), dbc = check_written(bdb, "db (chunked)");
  // A chunk's x0 is a state stored as T (and, without x given, its x is recomputed from it).
  check_close("chunked dW vs reference", dWc, bref.dW, tol);
  check_close("chunked db vs reference", dbc, bref.db, tol);
  check_close("chunked dW vs one call", dWc, whole_b.dW, 2 * tol);
  check_close("chunked db vs one call", dbc, whole_b.db, 2 * tol);
  if (o.x0) {
    tensor<T>& d0 = state_in_place ? dshared : dstate[0];
    const dvec dx0c = check_written(d0, "dx0 (chunked)");
    check_close("chunked dx0 vs reference", dx0c, bref.dx0, tol, max_abs(bref.db));
  }
}

template <class T>
void chunked() {
  int i = 0;
  for (int layout = 0; layout < 4; ++layout)
    for (bool rev : {false, true})
      for (bool x_given : {true, false}) {
        ++i;
        rec_opts o;
        o.B = 2, o.T = 100, o.N = i % 2 ? 3 : 8, o.layout = layout == 0 ? 3 : layout;  // views need explicit strides
        o.reverse = rev, o.x_given = x_given, o.x0 = i % 3 != 0, o.dxfinal = i % 4 != 1;
        o.fam = i % 2 ? family::near_orthogonal : family::contractive;
        run_chunked<T>(o, i % 3 == 2);
      }
}

// ---------------------------------------------------------------------------------------
// Chains.

struct chain_opts {
  index_t B = 1, n = 1, d = 1;
  chain_order order = chain_order::left_to_right;
  chain_output output = chain_output::total;
  chain_math math = chain_math::exact;
  arrangement aM = arrangement::dense, aout = arrangement::dense;
  family fam = family::near_orthogonal;
  index_t misalign = 0;
  std::string str() const {
    std::ostringstream s;
    s << "B=" << B << " n=" << n << " d=" << d << " order="
      << (order == chain_order::left_to_right ? "left_to_right" : "right_to_left")
      << " output=" << (output == chain_output::total ? "total" : "prefixes") << " math="
      << (math == chain_math::exact ? "exact" : math == chain_math::tf32 ? "tf32" : "bf16") << " M=" << name(aM)
      << " out=" << name(aout) << " family=" << name(fam) << " misalign=" << misalign;
    return s.str();
  }
};

/// The accepted error of a chain. exact: tolerance<T>(d). The tensor-core modes on the CUDA
/// backend round each product's operands to 10 (TF32) or 7 (bf16) mantissa bits, about 2·u
/// relative per product (u = 2^-11 or 2^-8), adding up like sqrt(n) over near-orthogonal
/// factors: 8·u·sqrt(n), the bound docs/api.md states. The host computes them exactly, which
/// the host test checks bit for bit.
template <class T>
double chain_tolerance(const chain_opts& o) {
  const double exact = tolerance<T>(o.d);
  if (o.math == chain_math::exact || !parscan_test::on_device || std::is_same<T, double>::value) return exact;
  const double u = o.math == chain_math::tf32 ? 0x1p-11 : 0x1p-8;
  return std::max(exact, 8 * u * std::sqrt(static_cast<double>(std::max<index_t>(o.n, 1))));
}

template <class T>
dvec chain_call(const chain_opts& o, const std::vector<T>& M) {
  const index_t dd = o.d * o.d;
  const bool prefixes = o.output == chain_output::prefixes;
  tensor<T> tM(make_geometry(o.aM, o.B, o.n, dd), &M, o.misalign);
  tensor<T> tout(make_geometry(o.aout, o.B, prefixes ? o.n : 1, dd), nullptr, o.misalign);
  parscan::matrix_chain_args<T> g;
  g.batch = o.B, g.count = o.n, g.d = o.d, g.M = tM.ptr(), g.out = tout.ptr();
  g.output = o.output, g.order = o.order, g.math = o.math;
  g.M_strides = tM.strides(), g.out_strides = tout.strides();
  const status st = parscan::matrix_chain(parscan_test::backend(), g);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);
  const dvec out = check_written(tout, prefixes ? "prefixes" : "total");
  check_unchanged(tM, "input M");
  return out;
}

template <class T>
void run_chain(const chain_opts& o) {
  INFO(dtype_name<T>() << " chain " << o.str());
  PARSCAN_TEST_RNG(r, std::string("matrix chain ") + dtype_name<T>() + " " + o.str());
  std::vector<T> M = draw_matrices<T>(r, o.fam, o.B * o.n, o.d);
  const index_t dd = o.d * o.d;
  if (o.aM == arrangement::shared_step)  // one factor per chain, at every position: a power
    for (index_t q = 0; q < o.B; ++q)
      for (index_t k = 1; k < o.n; ++k) std::copy_n(M.begin() + q * o.n * dd, dd, M.begin() + (q * o.n + k) * dd);
  const dvec P = ref_chain_prefixes(o.B, o.n, o.d, to_dvec(M), o.order == chain_order::left_to_right);
  const dvec ref = o.output == chain_output::prefixes ? P : ref_chain_total(o.B, o.n, o.d, P);
  const dvec got = chain_call(o, M);
  check_close(o.output == chain_output::prefixes ? "prefixes" : "total", got, ref, chain_tolerance<T>(o));
  if (!parscan_test::on_device && o.math != chain_math::exact) {
    chain_opts e = o;
    e.math = chain_math::exact;
    INFO("the host computes the tensor-core modes exactly: bitwise equal to chain_math::exact");
    CHECK(chain_call(e, M) == got);
  }
}

struct chain_size { index_t n, d; };

/// d = 1, 2, 5, 32, 64, 100 × n = 0, 1, 2, 7 and long chains of small matrices, both orders,
/// total and prefixes, dense and strided views, both bounded families.
template <class T>
void chain_sweep() {
  std::vector<chain_size> sizes;
  for (index_t d : {1, 2, 5, 32, 64, 100})
    for (index_t n : {0, 1, 2, 7}) sizes.push_back({n, d});
  for (chain_size s : {chain_size{1000, 1}, chain_size{1000, 2}, chain_size{999, 5}, chain_size{1000, 32},
                       chain_size{8191, 2}, chain_size{3, 33}})
    sizes.push_back(s);
  const arrangement arrs[][2] = {{arrangement::dense, arrangement::dense},
                                 {arrangement::padded, arrangement::batch_inner},
                                 {arrangement::batch_inner, arrangement::padded},
                                 {arrangement::dense_given, arrangement::dense_given}};
  int i = 0;
  for (chain_size s : sizes)
    for (chain_output out : {chain_output::total, chain_output::prefixes})
      for (chain_order ord : {chain_order::left_to_right, chain_order::right_to_left}) {
        ++i;
        chain_opts o;
        o.n = s.n, o.d = s.d, o.output = out, o.order = ord;
        o.B = s.n * s.d * s.d * s.d > 2000000 ? 1 : (i % 3 == 0 ? 3 : 2 - i % 2);
        o.aM = arrs[i % 4][0], o.aout = arrs[i % 4][1];
        // Long chains of radius_one matrices drift by e^±10 and more, below float16's normal range.
        o.fam = i % 2 && s.n < 999 ? family::radius_one : family::near_orthogonal;
        o.misalign = i % 5 == 0 ? 1 : 0;
        run_chain<T>(o);
      }
}

/// The tensor-core opt-in: within its documented error on the GPU; on the host, exact.
template <class T>
void chain_math_modes() {
  for (chain_math m : {chain_math::tf32, chain_math::bf16})
    // d > 32: the CUDA total runs the tensor-core GEMM tree; 65, 100, 130 leave tails of the
    // 64×64 tiles and of the K-tiles of 32 (and d = 100, 130 are not multiples of 16).
    for (chain_size s : {chain_size{7, 32}, chain_size{100, 64}, chain_size{1000, 5}, chain_size{3, 100},
                         chain_size{9, 130}, chain_size{2, 65}})
      for (chain_output out : {chain_output::total, chain_output::prefixes}) {
        chain_opts o;
        o.B = 2, o.n = s.n, o.d = s.d, o.output = out, o.math = m, o.fam = family::near_orthogonal;
        o.order = out == chain_output::total ? chain_order::left_to_right : chain_order::right_to_left;
        run_chain<T>(o);
      }
}

/// Totals of small matrices (d ≤ 64; CUDA: chain_chunks, about 128 or 256 (chain, chunk) tasks
/// of at least 4 factors, then a tree of fan-in 4 (d ≤ 32) or 2 over each chain's chunk totals):
/// chains spanning many chunks and tree levels, odd d and n, chunk counts that leave partial
/// runs at some level.
template <class T>
void chain_tree_shapes() {
  struct shape { index_t B, n, d; };
  int i = 0;
  // On CUDA: d = 32 and 64 fill the 2×2 and 4×4 micro-tiles; n = 1000, d = 64 gives 125 chunks
  // of 8 (7 binary levels), B = 3, n = 517 gives 40 of 13 per chain (levels of runs of 4, 4, 2
  // and then 3), n = 4097 125 of 33, B = 40 seven of 143 per chain (B·n ≥ 32768: 256 tasks);
  // n = 3 and B = 260 are one chunk, the chain's total written straight from the walk. B = 33,
  // n = 1000, d = 33: 264 tasks, one block each in float, but more than double's 132 resident
  // blocks (one per SM): there fewer, longer chunks (4 per chain).
  for (shape s : {shape{1, 1000, 64}, shape{3, 517, 17}, shape{2, 33, 48}, shape{40, 1000, 2}, shape{5, 129, 33},
                  shape{1, 4097, 9}, shape{2, 1000, 32}, shape{3, 200, 16}, shape{1, 70, 32}, shape{1, 3, 32},
                  shape{260, 9, 5}, shape{33, 1000, 33}})
    for (chain_order ord : {chain_order::left_to_right, chain_order::right_to_left}) {
      ++i;
      chain_opts o;
      o.B = s.B, o.n = s.n, o.d = s.d, o.order = ord, o.output = chain_output::total;
      o.aM = i % 2 ? arrangement::padded : arrangement::dense, o.aout = i % 3 ? arrangement::dense : arrangement::padded;
      o.fam = family::near_orthogonal;
      run_chain<T>(o);
    }
}

/// Prefixes over many chunks (CUDA, d ≤ 64: chain_chunks, about 256 (chain, chunk) tasks of
/// at least 4 positions): uneven last chunks, chunk counts whose carry levels are not a power of
/// two (n = 1000: 250 chunks of 4; B = 3, n = 517: 74 of 7), d on both sides of the 32 / 64
/// micro-tiles and not a multiple of 4, one chunk per chain (B = 300), strided views,
/// misaligned pointers, both orders.
template <class T>
void chain_chunk_shapes() {
  struct shape { index_t B, n, d; };
  const arrangement arrs[][2] = {{arrangement::dense, arrangement::dense},
                                 {arrangement::padded, arrangement::batch_inner},
                                 {arrangement::batch_inner, arrangement::padded}};
  int i = 0;
  for (shape s : {shape{1, 1000, 7}, shape{3, 517, 17}, shape{2, 300, 64}, shape{1, 1100, 33}, shape{300, 6, 3},
                  shape{5, 61, 32}, shape{1, 9, 50}})
    for (chain_order ord : {chain_order::left_to_right, chain_order::right_to_left}) {
      ++i;
      chain_opts o;
      o.B = s.B, o.n = s.n, o.d = s.d, o.order = ord, o.output = chain_output::prefixes;
      o.aM = arrs[i % 3][0], o.aout = arrs[i % 3][1];
      o.misalign = i % 4 == 1 ? 1 : 0;
      o.fam = family::near_orthogonal;
      run_chain<T>(o);
    }
}

/// Many chains of small matrices (CUDA: the chain thread engine, d ≤ 16 and B·n ≥ 16384; a
/// task of 16 or more factors per 1 to 8 threads, matrices padded to 4, 8 or 16). Totals:
/// B = 2, n = 9000 takes four launches (563, 36, 3 and 1 chunks per chain), B = 64, n = 300
/// three (19, 2, 1), B = 3000, n = 7 one (each chain's walk writes out); d = 13 and 16 split a
/// task's rows over 4 threads (8 in double). Prefixes: chunk totals, one carry walk per chain
/// over up to 63 of them, then every chunk again (B = 160, n = 1100: 62 chunks of 18), and
/// B = 9000, n = 3 in one walk. Dense, 16-byte aligned factors of d = 4, 8, 16 take the staged
/// kernel (the warp copies factors through shared memory; prefixes go out the same way, if
/// they are aligned too); strided views, misaligned pointers, other d and a power (one
/// factor for every position) take the other. Both orders: right to left reads M and writes
/// out transposed.
template <class T>
void chain_thread_shapes() {
  using a = arrangement;
  struct shape {
    index_t B, n, d;
    chain_output out;
    arrangement aM, aout;
    index_t misalign;
  };
  constexpr chain_output total = chain_output::total, prefixes = chain_output::prefixes;
  // Powers (shared_step) only where n ≤ 300: a power repeats one factor's rounding, so its
  // error grows like n rather than √n, past tolerance<T>(d) for long ones.
  for (shape s : {shape{2, 9000, 3, total, a::padded, a::batch_inner, 1},
                  shape{64, 300, 8, total, a::dense, a::dense, 0},
                  shape{64, 300, 8, total, a::shared_step, a::dense, 0},
                  shape{3000, 7, 5, total, a::batch_inner, a::padded, 0},
                  shape{20, 1000, 13, total, a::padded, a::dense, 1},
                  shape{17, 1000, 16, total, a::dense_given, a::dense, 0},
                  shape{17, 1000, 16, total, a::dense, a::dense, 1},
                  shape{4, 4100, 1, total, a::dense, a::dense, 0},
                  shape{160, 1100, 5, prefixes, a::padded, a::batch_inner, 0},
                  shape{34, 1024, 13, prefixes, a::batch_inner, a::padded, 1},
                  shape{300, 600, 8, prefixes, a::dense, a::dense, 0},
                  shape{300, 600, 4, prefixes, a::dense, a::padded, 0},
                  shape{34, 1024, 16, prefixes, a::dense, a::dense_given, 0},
                  shape{9000, 3, 4, prefixes, a::dense, a::dense, 0},
                  shape{9000, 3, 2, prefixes, a::shared_step, a::dense, 0}})
    for (chain_order ord : {chain_order::left_to_right, chain_order::right_to_left}) {
      chain_opts o;
      o.B = s.B, o.n = s.n, o.d = s.d, o.order = ord, o.output = s.out;
      o.aM = s.aM, o.aout = s.aout, o.misalign = s.misalign;
      o.fam = family::near_orthogonal;
      run_chain<T>(o);
    }
}

/// Totals wide enough that the CUDA backend runs every level of a float chain on cuBLAS
/// (d ≥ 128): odd and even n (a level's odd factor moves up, so from then on a batch's chains
/// are no longer one stride apart and cuBLAS is called per chain), batches, strided views,
/// misaligned pointers, both orders, every math mode. The other dtypes keep the GEMM tree here.
template <class T>
void chain_wide_totals() {
  struct shape { index_t B, n, d; };
  const arrangement arrs[][2] = {{arrangement::dense, arrangement::dense},
                                 {arrangement::padded, arrangement::batch_inner},
                                 {arrangement::batch_inner, arrangement::padded}};
  int i = 0;
  for (shape s : {shape{1, 5, 256}, shape{3, 9, 128}, shape{2, 16, 130}, shape{1, 2, 128}, shape{4, 7, 129}})
    for (chain_order ord : {chain_order::left_to_right, chain_order::right_to_left}) {
      ++i;
      chain_opts o;
      o.B = s.B, o.n = s.n, o.d = s.d, o.order = ord, o.output = chain_output::total;
      o.math = i % 3 == 0 ? chain_math::tf32 : i % 5 == 0 ? chain_math::bf16 : chain_math::exact;
      o.aM = arrs[i % 3][0], o.aout = arrs[i % 3][1];
      o.misalign = i % 4 == 1 ? 1 : 0;
      o.fam = family::near_orthogonal;
      run_chain<T>(o);
    }
}

// ---------------------------------------------------------------------------------------
// The backward against finite differences of L = sum(w·x) + sum(v·x_final), in double.

template <class T>
void gradcheck() {
  for (int layout : {0, 1})
    for (bool x0 : {false, true})
      for (bool rev : {false, true})
        for (bool x_given : {true, false}) {
          rec_opts o;
          o.B = 2, o.T = 5, o.N = 3, o.layout = layout, o.x0 = x0, o.reverse = rev, o.x_given = x_given;
          o.dxfinal = true, o.fam = family::radius_one;
          INFO("gradcheck " << o.str());
          PARSCAN_TEST_RNG(r, "matrix gradcheck " + o.str());
          const rec_inputs<T> in = draw_inputs<T>(r, o);
          dvec W = to_dvec(in.W), b = to_dvec(in.b), xs0 = to_dvec(in.x0);
          const dvec w = to_dvec(in.dx), v = to_dvec(in.dxf);
          auto L = [&] {
            dvec x, xf;
            ref_forward(o.B, o.T, o.N, W, b, xs0, rev, x, xf);
            double s = 0;
            for (std::size_t i = 0; i < x.size(); ++i) s += w[i] * x[i];
            for (std::size_t i = 0; i < xf.size(); ++i) s += v[i] * xf[i];
            return s;
          };
          auto fd = [&](dvec& p) {  // central differences: exact for b and x0 (L is linear in them), O(h²) for W
            dvec gr(p.size());
            for (std::size_t i = 0; i < p.size(); ++i) {
              const double keep = p[i], h = 1e-4;
              p[i] = keep + h;
              const double up = L();
              p[i] = keep - h;
              const double dn = L();
              p[i] = keep;
              gr[i] = (up - dn) / (2 * h);
            }
            return gr;
          };
          const dvec gW = fd(W), gb = fd(b), gx0 = x0 ? fd(xs0) : dvec{};
          const bwd_result<T> out = backward_call(o, in);
          CHECK(rel_error(out.dW, gW) <= 1e-7);
          CHECK(rel_error(out.db, gb) <= 1e-7);
          if (x0) CHECK(rel_error(out.dx0, gx0) <= 1e-7);
        }
}

// ---------------------------------------------------------------------------------------
// Zero-sized problems.

/// T = 0: x_final = x0 (or zero), dx0 = dx_final (or zero), nothing else written; B = 0:
/// nothing written at all.
template <class T>
void zero_sized() {
  for (const auto& s : {std::vector<index_t>{2, 0, 3}, std::vector<index_t>{0, 5, 3}, std::vector<index_t>{0, 0, 1}})
    for (bool with_state : {false, true}) {
      const index_t B = s[0], L = s[1], N = s[2];
      INFO(dtype_name<T>() << " zero-sized B=" << B << " T=" << L << " N=" << N << " state=" << with_state);
      PARSCAN_TEST_RNG(r, std::string("matrix zero-sized ") + dtype_name<T>());
      const std::vector<T> none, sv = draw_normal<T>(r, static_cast<std::size_t>(B * N));
      // Every tensor keeps 3 elements of payload, so a stray write has somewhere to land.
      tensor<T> tW(make_geometry(arrangement::dense, B, L, N * N), &none, 3), tb(make_geometry(arrangement::dense, B, L, N), &none, 3);
      tensor<T> tx(make_geometry(arrangement::dense, B, L, N), nullptr, 3);
      tensor<T> ts(state_geometry(B, N), &sv, 3), tout(state_geometry(B, N), nullptr, 3);
      parscan::matrix_forward_args<T> f;
      f.batch = B, f.length = L, f.n = N, f.W = tW.ptr(), f.b = tb.ptr(), f.x = tx.ptr();
      f.x0 = with_state ? ts.ptr() : nullptr, f.x_final = tout.ptr();
      CHECK(parscan::matrix_recurrence_forward(parscan_test::backend(), f) == status::success);
      PARSCAN_TEST_SYNC();
      check_unchanged(tx, "x");
      const dvec want = with_state ? to_dvec(sv) : dvec(sv.size(), 0.0);
      if (B == 0) check_unchanged(tout, "x_final");
      else CHECK(check_written(tout, "x_final") == want);

      tensor<T> tdW(make_geometry(arrangement::dense, B, L, N * N), nullptr, 3), tdb(make_geometry(arrangement::dense, B, L, N), nullptr, 3);
      tensor<T> tdx0(state_geometry(B, N), nullptr, 3), tx0(state_geometry(B, N), &sv, 3);
      parscan::matrix_backward_args<T> g;
      g.batch = B, g.length = L, g.n = N, g.W = tW.ptr(), g.x = tx.ptr(), g.dx = tb.ptr();
      g.x0 = tx0.ptr(), g.dx_final = with_state ? ts.ptr() : nullptr;
      g.dW = tdW.ptr(), g.db = tdb.ptr(), g.dx0 = tdx0.ptr();
      CHECK(parscan::matrix_recurrence_backward(parscan_test::backend(), g) == status::success);
      PARSCAN_TEST_SYNC();
      check_unchanged(tdW, "dW"), check_unchanged(tdb, "db"), check_unchanged(ts, "dx_final");
      if (B == 0) check_unchanged(tdx0, "dx0");
      else CHECK(check_written(tdx0, "dx0") == want);
    }
  // Chains: n = 0 gives the identity (total) or writes nothing (prefixes); B = 0 writes nothing.
  for (index_t B : {0, 2})
    for (index_t d : {1, 3})
      for (chain_output out : {chain_output::total, chain_output::prefixes}) {
        INFO(dtype_name<T>() << " empty chain B=" << B << " d=" << d << " prefixes=" << (out == chain_output::prefixes));
        const std::vector<T> none;
        tensor<T> tM(make_geometry(arrangement::dense, B, 0, d * d), &none, 3);
        tensor<T> tP(make_geometry(arrangement::padded, B, 1, d * d), nullptr, 3);
        parscan::matrix_chain_args<T> g;
        g.batch = B, g.count = 0, g.d = d, g.M = tM.ptr(), g.out = tP.ptr(), g.output = out;
        g.out_strides = tP.strides();
        CHECK(parscan::matrix_chain(parscan_test::backend(), g) == status::success);
        PARSCAN_TEST_SYNC();
        if (B == 0 || out == chain_output::prefixes) {
          check_unchanged(tP, "out");
        } else {
          dvec id(static_cast<std::size_t>(B * d * d), 0.0);
          for (index_t q = 0; q < B; ++q)
            for (index_t i = 0; i < d; ++i) id[static_cast<std::size_t>(q * d * d + i * d + i)] = 1.0;
          CHECK(check_written(tP, "identity") == id);
        }
      }
}

// ---------------------------------------------------------------------------------------
// Bad arguments: each returns its status and writes nothing.

/// One call with one thing wrong; CHECKs the status and that no tensor changed.
template <class Args, class Call, class Fixture>
void expect_refused(const char* what, Fixture& f, const std::function<void(Args&, Fixture&)>& mutate, status want,
                    Call&& call) {
  INFO("bad argument: " << what);
  Args g = f.args;
  mutate(g, f);
  const status st = call(g);
  PARSCAN_TEST_SYNC();
  CHECK(st == want);
  f.check_nothing_written();
}

template <class T>
struct fwd_fixture {
  static constexpr index_t B = 2, L = 5, N = 3, pad = 4;
  tensor<T> W, b, x, x0, xf;
  parscan::matrix_forward_args<T> args;
  explicit fwd_fixture(rng& r) {
    const std::vector<T> Wv = draw_matrices<T>(r, family::contractive, B * L, N), bv = draw_normal<T>(r, B * L * N),
                         sv = draw_normal<T>(r, B * N);
    W = tensor<T>(make_geometry(arrangement::dense, B, L, N * N), &Wv, pad);
    b = tensor<T>(make_geometry(arrangement::dense, B, L, N), &bv, pad);
    x = tensor<T>(make_geometry(arrangement::dense, B, L, N), nullptr, pad);
    x0 = tensor<T>(state_geometry(B, N), &sv, pad), xf = tensor<T>(state_geometry(B, N), nullptr, pad);
    args.batch = B, args.length = L, args.n = N;
    args.W = W.ptr(), args.b = b.ptr(), args.x = x.ptr(), args.x0 = x0.ptr(), args.x_final = xf.ptr();
  }
  void check_nothing_written() {
    check_unchanged(x, "x"), check_unchanged(xf, "x_final");
    check_unchanged(W, "W"), check_unchanged(b, "b"), check_unchanged(x0, "x0");
  }
};

template <class T>
void bad_forward() {
  using A = parscan::matrix_forward_args<T>;
  using F = fwd_fixture<T>;
  struct bad {
    const char* what;
    std::function<void(A&, F&)> mutate;
    status want;
  };
  const index_t big = index_t(1) << 62;
  const std::vector<bad> cases = {
      {"W null", [](A& g, F&) { g.W = nullptr; }, status::null_pointer},
      {"b null", [](A& g, F&) { g.b = nullptr; }, status::null_pointer},
      {"x null", [](A& g, F&) { g.x = nullptr; }, status::null_pointer},
      {"batch -1", [](A& g, F&) { g.batch = -1; }, status::negative_size},
      {"length -1", [](A& g, F&) { g.length = -1; }, status::negative_size},
      {"n -1", [](A& g, F&) { g.n = -1; }, status::negative_size},
      {"n 0", [](A& g, F&) { g.n = 0; }, status::unsupported},
      {"n 65", [](A& g, F&) { g.n = 65; }, status::unsupported},
      {"n 2^40 (n·n would overflow)", [](A& g, F&) { g.n = index_t(1) << 40; }, status::unsupported},
      {"length 2^62", [=](A& g, F&) { g.length = big; }, status::size_overflow},
      {"batch 2^40, length 2^20", [](A& g, F&) { g.batch = index_t(1) << 40, g.length = index_t(1) << 20; },
       status::size_overflow},
      {"W step stride 2^62", [=](A& g, F&) { g.W_strides.step = big; }, status::size_overflow},
      {"b batch stride 2^62 (bytes overflow)", [=](A& g, F&) { g.b_strides.batch = big; }, status::size_overflow},
      {"W step stride -2", [](A& g, F&) { g.W_strides.step = -2; }, status::invalid_stride},
      {"b batch stride -5", [](A& g, F&) { g.b_strides.batch = -5; }, status::invalid_stride},
      {"x step stride -2", [](A& g, F&) { g.x_strides.step = -2; }, status::invalid_stride},
      {"x step stride 0 (steps alias)", [](A& g, F&) { g.x_strides.step = 0; }, status::overlapping_output},
      {"x step stride 2 < N (blocks overlap)", [](A& g, F&) { g.x_strides.step = 2; }, status::overlapping_output},
      {"x batch stride 0", [](A& g, F&) { g.x_strides.batch = 0; }, status::overlapping_output},
      {"x overlaps b, not exactly (x = b + 1)", [](A& g, F& f) { g.x = f.b.ptr() + 1; }, status::overlapping_output},
      {"x at b with other strides", [](A& g, F& f) { g.x = f.b.ptr(), g.x_strides = {F::N, F::B * F::N}; },
       status::overlapping_output},
      {"x overlaps W (x = W + 2)", [](A& g, F& f) { g.x = f.W.ptr() + 2; }, status::overlapping_output},
      {"x_final overlaps x (x_final = x + 3)", [](A& g, F& f) { g.x_final = f.x.ptr() + 3; }, status::overlapping_output},
      {"x_final overlaps b (x_final = b + 1)", [](A& g, F& f) { g.x_final = f.b.ptr() + 1; }, status::overlapping_output},
      {"x_final partly overlaps x0 (x_final = x0 + 1)", [](A& g, F& f) { g.x_final = f.x0.ptr() + 1; },
       status::overlapping_output},
      {"x0 inside x (x0 = x + 1)", [](A& g, F& f) { g.x0 = f.x.ptr() + 1; }, status::overlapping_output},
  };
  for (const bad& c : cases) {
    PARSCAN_TEST_RNG(r, std::string("matrix bad forward ") + dtype_name<T>() + c.what);
    F f(r);
    expect_refused<A>(c.what, f, c.mutate, c.want,
                      [](const A& g) { return parscan::matrix_recurrence_forward(parscan_test::backend(), g); });
  }
}

template <class T>
struct bwd_fixture {
  static constexpr index_t B = 2, L = 5, N = 3, pad = 4;
  tensor<T> W, x, b, x0, dx, dxf, dW, db, dx0;
  parscan::matrix_backward_args<T> args;
  explicit bwd_fixture(rng& r) {
    const std::vector<T> Wv = draw_matrices<T>(r, family::contractive, B * L, N), v1 = draw_normal<T>(r, B * L * N),
                         v2 = draw_normal<T>(r, B * L * N), v3 = draw_normal<T>(r, B * L * N),
                         s1 = draw_normal<T>(r, B * N), s2 = draw_normal<T>(r, B * N);
    const geometry gm = make_geometry(arrangement::dense, B, L, N * N), gv = make_geometry(arrangement::dense, B, L, N);
    W = tensor<T>(gm, &Wv, pad), x = tensor<T>(gv, &v1, pad), b = tensor<T>(gv, &v2, pad), dx = tensor<T>(gv, &v3, pad);
    x0 = tensor<T>(state_geometry(B, N), &s1, pad), dxf = tensor<T>(state_geometry(B, N), &s2, pad);
    dW = tensor<T>(gm, nullptr, pad), db = tensor<T>(gv, nullptr, pad), dx0 = tensor<T>(state_geometry(B, N), nullptr, pad);
    args.batch = B, args.length = L, args.n = N;
    args.W = W.ptr(), args.x = x.ptr(), args.b = b.ptr(), args.x0 = x0.ptr(), args.dx = dx.ptr();
    args.dx_final = dxf.ptr(), args.dW = dW.ptr(), args.db = db.ptr(), args.dx0 = dx0.ptr();
  }
  void check_nothing_written() {
    check_unchanged(dW, "dW"), check_unchanged(db, "db"), check_unchanged(dx0, "dx0");
    check_unchanged(W, "W"), check_unchanged(x, "x"), check_unchanged(b, "b"), check_unchanged(x0, "x0");
    check_unchanged(dx, "dx"), check_unchanged(dxf, "dx_final");
  }
};

template <class T>
void bad_backward() {
  using A = parscan::matrix_backward_args<T>;
  using F = bwd_fixture<T>;
  struct bad {
    const char* what;
    std::function<void(A&, F&)> mutate;
    status want;
  };
  const index_t big = index_t(1) << 62;
  const std::vector<bad> cases = {
      {"W null", [](A& g, F&) { g.W = nullptr; }, status::null_pointer},
      {"dx null", [](A& g, F&) { g.dx = nullptr; }, status::null_pointer},
      {"dW null", [](A& g, F&) { g.dW = nullptr; }, status::null_pointer},
      {"db null", [](A& g, F&) { g.db = nullptr; }, status::null_pointer},
      {"x0 given, dx0 null", [](A& g, F&) { g.dx0 = nullptr; }, status::null_pointer},
      {"x null and b null", [](A& g, F&) { g.x = nullptr, g.b = nullptr; }, status::null_pointer},
      {"batch -1", [](A& g, F&) { g.batch = -1; }, status::negative_size},
      {"length -1", [](A& g, F&) { g.length = -1; }, status::negative_size},
      {"n 0", [](A& g, F&) { g.n = 0; }, status::unsupported},
      {"n 100", [](A& g, F&) { g.n = 100; }, status::unsupported},
      {"length 2^62", [=](A& g, F&) { g.length = big; }, status::size_overflow},
      {"dx step stride 2^62", [=](A& g, F&) { g.dx_strides.step = big; }, status::size_overflow},
      {"W batch stride -3", [](A& g, F&) { g.W_strides.batch = -3; }, status::invalid_stride},
      {"dW step stride -2", [](A& g, F&) { g.dW_strides.step = -2; }, status::invalid_stride},
      {"b step stride -2 (x null)", [](A& g, F&) { g.x = nullptr, g.b_strides.step = -2; }, status::invalid_stride},
      {"dW step stride 0", [](A& g, F&) { g.dW_strides.step = 0; }, status::overlapping_output},
      {"db step stride 1 < N", [](A& g, F&) { g.db_strides.step = 1; }, status::overlapping_output},
      {"dW aliases W exactly", [](A& g, F& f) { g.dW = f.W.ptr(); }, status::overlapping_output},
      {"db aliases x exactly", [](A& g, F& f) { g.db = f.x.ptr(); }, status::overlapping_output},
      {"db overlaps dx, not exactly (db = dx + 1)", [](A& g, F& f) { g.db = f.dx.ptr() + 1; }, status::overlapping_output},
      {"dW overlaps dx (dW = dx)", [](A& g, F& f) { g.dW = f.dx.ptr(); }, status::overlapping_output},
      {"db overlaps dW (db = dW + 1)", [](A& g, F& f) { g.db = f.dW.ptr() + 1; }, status::overlapping_output},
      {"dx0 partly overlaps dx_final (dx0 = dx_final + 1)", [](A& g, F& f) { g.dx0 = f.dxf.ptr() + 1; },
       status::overlapping_output},
      {"dx0 inside db (dx0 = db + 3)", [](A& g, F& f) { g.dx0 = f.db.ptr() + 3; }, status::overlapping_output},
      {"db overlaps b (x null, db = b + 1)", [](A& g, F& f) { g.x = nullptr, g.db = f.b.ptr() + 1; },
       status::overlapping_output},
  };
  for (const bad& c : cases) {
    PARSCAN_TEST_RNG(r, std::string("matrix bad backward ") + dtype_name<T>() + c.what);
    F f(r);
    expect_refused<A>(c.what, f, c.mutate, c.want,
                      [](const A& g) { return parscan::matrix_recurrence_backward(parscan_test::backend(), g); });
  }
}

template <class T>
struct chain_fixture {
  static constexpr index_t B = 2, n = 4, d = 3, pad = 4;
  tensor<T> M, out;
  parscan::matrix_chain_args<T> args;
  explicit chain_fixture(rng& r) {
    const std::vector<T> Mv = draw_matrices<T>(r, family::near_orthogonal, B * n, d);
    M = tensor<T>(make_geometry(arrangement::dense, B, n, d * d), &Mv, pad);
    out = tensor<T>(make_geometry(arrangement::dense, B, n, d * d), nullptr, pad);  // room for prefixes
    args.batch = B, args.count = n, args.d = d, args.M = M.ptr(), args.out = out.ptr();
    args.output = chain_output::prefixes;
  }
  void check_nothing_written() { check_unchanged(out, "out"), check_unchanged(M, "M"); }
};

template <class T>
void bad_chain() {
  using A = parscan::matrix_chain_args<T>;
  using F = chain_fixture<T>;
  struct bad {
    const char* what;
    std::function<void(A&, F&)> mutate;
    status want;
  };
  const std::vector<bad> cases = {
      {"M null", [](A& g, F&) { g.M = nullptr; }, status::null_pointer},
      {"out null", [](A& g, F&) { g.out = nullptr; }, status::null_pointer},
      {"out null, n = 0, total (the identity is written)", [](A& g, F&) { g.out = nullptr, g.count = 0, g.output = chain_output::total; },
       status::null_pointer},
      {"batch -1", [](A& g, F&) { g.batch = -1; }, status::negative_size},
      {"count -1", [](A& g, F&) { g.count = -1; }, status::negative_size},
      {"d -1", [](A& g, F&) { g.d = -1; }, status::negative_size},
      {"d 0", [](A& g, F&) { g.d = 0; }, status::unsupported},
      {"d 1025", [](A& g, F&) { g.d = 1025; }, status::unsupported},
      {"d 2^40 (d·d would overflow)", [](A& g, F&) { g.d = index_t(1) << 40; }, status::unsupported},
      {"count 2^60", [](A& g, F&) { g.count = index_t(1) << 60; }, status::size_overflow},
      {"batch 2^60, n = 0, total", [](A& g, F&) { g.batch = index_t(1) << 60, g.count = 0, g.output = chain_output::total; },
       status::size_overflow},
      {"M step stride 2^62", [](A& g, F&) { g.M_strides.step = index_t(1) << 62; }, status::size_overflow},
      {"M step stride -2", [](A& g, F&) { g.M_strides.step = -2; }, status::invalid_stride},
      {"out batch stride -7", [](A& g, F&) { g.out_strides.batch = -7; }, status::invalid_stride},
      {"prefixes, out step stride 0", [](A& g, F&) { g.out_strides.step = 0; }, status::overlapping_output},
      {"prefixes, out step stride d·d - 1", [](A& g, F&) { g.out_strides.step = F::d * F::d - 1; },
       status::overlapping_output},
      {"total, out batch stride 0", [](A& g, F&) { g.output = chain_output::total, g.out_strides.batch = 0; },
       status::overlapping_output},
      {"out is M (no in-place chains)", [](A& g, F& f) { g.out = f.M.ptr(); }, status::overlapping_output},
      {"out overlaps M (out = M - 1)", [](A& g, F& f) { g.out = f.M.ptr() - 1; }, status::overlapping_output},
      {"bad chain_output", [](A& g, F&) { g.output = static_cast<chain_output>(7); }, status::unsupported},
      {"bad chain_order", [](A& g, F&) { g.order = static_cast<chain_order>(-1); }, status::unsupported},
      {"bad chain_math", [](A& g, F&) { g.math = static_cast<chain_math>(3); }, status::unsupported},
  };
  for (const bad& c : cases) {
    PARSCAN_TEST_RNG(r, std::string("matrix bad chain ") + dtype_name<T>() + c.what);
    F f(r);
    expect_refused<A>(c.what, f, c.mutate, c.want,
                      [](const A& g) { return parscan::matrix_chain(parscan_test::backend(), g); });
  }
}

}  // namespace mtx_test

// =======================================================================================
// The test cases.

#define MTX_NAME(title) PARSCAN_TEST_NAME("matrix " title)
#define MTX_TAGS(tags) PARSCAN_TEST_TAGS("[matrix]" tags)

/// One TEST_CASE per library dtype, each calling fn<dtype>().
#define MTX_FOR_EACH_DTYPE(title, tags, fn)                                                        \
  TEST_CASE(MTX_NAME(title " <float>"), MTX_TAGS(tags)) { mtx_test::fn<float>(); }                 \
  TEST_CASE(MTX_NAME(title " <double>"), MTX_TAGS(tags)) { mtx_test::fn<double>(); }               \
  TEST_CASE(MTX_NAME(title " <bfloat16>"), MTX_TAGS(tags)) { mtx_test::fn<parscan::bfloat16>(); }  \
  TEST_CASE(MTX_NAME(title " <float16>"), MTX_TAGS(tags)) { mtx_test::fn<parscan::float16>(); }

MTX_FOR_EACH_DTYPE("recurrence forward: N x T sweep", "[forward]", forward_sweep)
MTX_FOR_EACH_DTYPE("recurrence forward: options, strided views, x == b", "[forward]", forward_options)
MTX_FOR_EACH_DTYPE("recurrence backward: N x T sweep", "[backward]", backward_sweep)
MTX_FOR_EACH_DTYPE("recurrence backward: options, strided views, db == dx", "[backward]", backward_options)
MTX_FOR_EACH_DTYPE("recurrence: chunked forward and backward equal one call", "[chunked]", chunked)
MTX_FOR_EACH_DTYPE("recurrence: the same call twice gives the same bits", "[forward]", repeatable)
MTX_FOR_EACH_DTYPE("recurrence: engine edges (N and T and B around chunks and stages and tasks per warp)", "[forward][backward]", engine_edges)
MTX_FOR_EACH_DTYPE("chain: d x n sweep, both orders, total and prefixes", "[chain]", chain_sweep)
MTX_FOR_EACH_DTYPE("chain: TF32 and bf16 tensor-core opt-in", "[chain]", chain_math_modes)
MTX_FOR_EACH_DTYPE("chain: totals of small matrices over many chunks and tree levels", "[chain]", chain_tree_shapes)
MTX_FOR_EACH_DTYPE("chain: prefixes over many chunks, uneven chunks and carry levels", "[chain]", chain_chunk_shapes)
MTX_FOR_EACH_DTYPE("chain: many chains of small matrices, totals and prefixes", "[chain]", chain_thread_shapes)
MTX_FOR_EACH_DTYPE("chain: wide totals on cuBLAS for float (batches and strided views)", "[chain]",
                   chain_wide_totals)
MTX_FOR_EACH_DTYPE("zero-sized problems succeed; T = 0 passes the state, n = 0 is the identity", "[errors]", zero_sized)
MTX_FOR_EACH_DTYPE("recurrence forward: bad arguments return their status and write nothing", "[errors]", bad_forward)
MTX_FOR_EACH_DTYPE("recurrence backward: bad arguments return their status and write nothing", "[errors]", bad_backward)
MTX_FOR_EACH_DTYPE("chain: bad arguments return their status and write nothing", "[errors]", bad_chain)

TEST_CASE(MTX_NAME("recurrence backward <double> equals finite differences of the loss"),
          MTX_TAGS("[backward][gradcheck]")) {
  mtx_test::gradcheck<double>();
}
