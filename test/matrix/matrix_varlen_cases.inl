// test/matrix/matrix_varlen_cases.inl — the matrix recurrence over packed variable-length
// sequences (cu_seqlens; matrix_varlen_forward_args / matrix_varlen_backward_args in
// parscan/matrix_recurrence.hpp), backend-neutral. Included by matrix_varlen_test.cpp (host
// backend) and matrix_varlen_test.cu (CUDA backend, PARSCAN_TEST_CUDA=1).
//
// Every packed result is compared, per sequence, with the fixed-length API called on that
// sequence alone (dense tensors of its own, same backend) — bitwise on the host backend, whose
// packed path runs the same loop; on CUDA, whose packed engine chunks every sequence its own
// way, within twice the matrix tests' tolerance of max|reference| — and with the float64
// reference (matrix_reference.hpp) at that tolerance. Outputs are poisoned and guarded: every
// step of every sequence is written, the steps past cu_seqlens[S], the rows' padding and
// everything around the buffers are not, and the inputs stay bit-identical.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <parscan/parscan.hpp>

#include "matrix/matrix_reference.hpp"
#include "support/catch.hpp"
#include "support/env.hpp"
#include "support/random.hpp"

namespace mtx_varlen_test {

using namespace mtx_test;
using parscan::status;
using parscan_test::guarded_buffer;

struct case_opts {
  std::vector<index_t> lengths;
  index_t N = 2, trailing = 0, pad = 0;  // pad: elements after each step's block (a strided step axis)
  bool x0 = false, xfinal = true, reverse = false, in_place = false;
  bool x_given = true, dxfinal = false;  // backward only
  family fam = family::contractive;

  index_t used() const {
    index_t t = 0;
    for (index_t l : lengths) t += l;
    return t;
  }
  index_t total() const { return used() + trailing; }
  index_t S() const { return static_cast<index_t>(lengths.size()); }
  std::vector<std::int64_t> offsets() const {
    std::vector<std::int64_t> o(1, 0);
    for (index_t l : lengths) o.push_back(o.back() + l);
    return o;
  }
  std::string str() const {
    std::ostringstream s;
    s << "S=" << S() << " lengths=[";
    for (std::size_t i = 0; i < lengths.size() && i < 12; ++i) s << (i ? " " : "") << lengths[i];
    s << (lengths.size() > 12 ? " ...]" : "]") << " N=" << N << " trailing=" << trailing << " pad=" << pad
      << " x0=" << x0 << " x_final=" << xfinal << " reverse=" << reverse << " in_place=" << in_place
      << " x=" << (x_given ? "given" : "null") << " dx_final=" << dxfinal << " family=" << name(fam);
    return s.str();
  }
};

/// A packed (total, block) tensor with `pad` elements after each step's block.
struct packed {
  index_t block = 0, step = 0, total = 0;
  index_t size() const { return total * step; }
  index_t at(index_t t) const { return t * step; }
};
inline packed packed_of(const case_opts& o, index_t block) { return {block, block + o.pad, o.total()}; }

/// Positions of a packed buffer that belong to some sequence's steps.
inline std::vector<bool> used_mask(const case_opts& o, const packed& p) {
  std::vector<bool> m(static_cast<std::size_t>(p.size()), false);
  for (index_t t = 0; t < o.used(); ++t)
    for (index_t e = 0; e < p.block; ++e) m[static_cast<std::size_t>(p.at(t) + e)] = true;
  return m;
}

/// Sequence s's steps of a packed buffer, dense (length, block).
template <class V>
std::vector<V> slice(const case_opts& o, const packed& p, const std::vector<V>& v, index_t s) {
  const index_t start = o.offsets()[static_cast<std::size_t>(s)], len = o.lengths[static_cast<std::size_t>(s)];
  std::vector<V> r;
  for (index_t t = 0; t < len; ++t)
    for (index_t e = 0; e < p.block; ++e) r.push_back(v[static_cast<std::size_t>(p.at(start + t) + e)]);
  return r;
}
template <class V>
std::vector<V> states_of(const std::vector<V>& v, index_t s, index_t N) {
  return v.empty() ? v : std::vector<V>(v.begin() + s * N, v.begin() + (s + 1) * N);
}
/// W of every packed step drawn from the case's family (the row padding stays 0).
template <class T>
std::vector<T> draw_packed_W(rng& r, const case_opts& o, const packed& pW) {
  std::vector<T> W(static_cast<std::size_t>(pW.size()), T(0.0f));
  const std::vector<T> drawn = draw_matrices<T>(r, o.fam, o.total(), o.N);
  for (index_t t = 0; t < o.total(); ++t)
    std::copy_n(drawn.begin() + t * pW.block, pW.block, W.begin() + pW.at(t));
  return W;
}

template <class T>
dvec to_dvec(const std::vector<T>& v) {
  dvec d(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) d[i] = to_d(v[i]);
  return d;
}

/// Output buffers of n elements, poisoned with a byte no result can be: 0xFF for float16 (a
/// NaN; the default 0xA5A5 is the ordinary float16 value -0.022, which gradients do hit).
template <class T>
guarded_buffer<T> output(index_t n) {
  const unsigned char poison = std::is_same<T, parscan::float16>::value ? 0xFF : parscan_test::poison_byte;
  return guarded_buffer<T>(static_cast<std::size_t>(n), guarded_buffer<T>::default_guard, poison);
}

template <class V>
void check_written(const char* what, const guarded_buffer<V>& buf, const std::vector<bool>& used,
                   const std::vector<V>* in_place = nullptr) {
  INFO(what << ": every step of every sequence written, nothing else");
  CHECK(buf.guards_intact());
  const std::vector<V> v = buf.download();
  std::size_t unwritten = 0, stray = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (used[i]) unwritten += !in_place && buf.is_poison(v[i]);
    else if (in_place) stray += std::memcmp(&v[i], &(*in_place)[i], sizeof(V)) != 0;
    else stray += !buf.is_poison(v[i]);
  }
  CHECK(unwritten == 0);
  CHECK(stray == 0);
}
template <class V>
void check_unchanged(const char* what, const guarded_buffer<V>& buf, const std::vector<V>& was) {
  INFO(what << ": an input, unchanged");
  const std::vector<V> now = buf.download();
  CHECK(std::memcmp(now.data(), was.data(), was.size() * sizeof(V)) == 0);
  CHECK(buf.guards_intact());
}

/// got (the packed call's) against want (the fixed-length call's) and ref (float64), each one
/// sequence's values: bitwise on the host, within 2·tol of the scale on CUDA; and got against
/// ref within tol of the scale: max|ref|, or `at_least` where that is larger.
template <class T>
void check_sequence(const char* what, const std::vector<T>& got, const std::vector<T>& want, const dvec& ref,
                    index_t N, index_t steps, double at_least = 0) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  REQUIRE(got.size() == ref.size());
  double scale = at_least, vs_api = 0, vs_ref = 0;
  for (double v : ref) scale = std::max(scale, std::fabs(v));
  if (scale == 0) scale = 1;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    differ += std::memcmp(&got[i], &want[i], sizeof(T)) != 0;
    vs_api = std::max(vs_api, std::fabs(to_d(got[i]) - to_d(want[i])) / scale);
    vs_ref = std::max(vs_ref, std::fabs(to_d(got[i]) - ref[i]) / scale);
  }
  const double tol = tolerance<T>(N, steps);
  INFO("against the fixed-length API: " << vs_api << ", against the reference: " << vs_ref << " (tol " << tol << ")");
  if constexpr (!parscan_test::on_device) CHECK(differ == 0);
  else CHECK(vs_api <= 2 * tol);
  CHECK(vs_ref <= tol);
}

/// Chunked results against one call's: bitwise for float and double on the host, else within
/// the matrix tests' tolerance of the largest |want|.
template <class T>
void check_chunks(const char* what, const std::vector<T>& got, const std::vector<T>& want, index_t N) {
  INFO(what << ": the chunked calls against one call");
  REQUIRE(got.size() == want.size());
  double scale = 0, worst = 0;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    scale = std::max(scale, std::fabs(to_d(want[i])));
    differ += std::memcmp(&got[i], &want[i], sizeof(T)) != 0;
  }
  if (scale == 0) scale = 1;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(to_d(got[i]) - to_d(want[i])) / scale);
  INFO("differing " << differ << ", worst relative difference " << worst);
  if (!parscan_test::on_device && (std::is_same<T, float>::value || std::is_same<T, double>::value)) CHECK(differ == 0);
  else CHECK(worst <= tolerance<T>(N, 257));
}

// ---------------------------------------------------------------------------------------
// Forward.

template <class T>
void run_forward(const case_opts& o) {
  INFO("matrix varlen forward <" << dtype_name<T>() << "> " << o.str());
  PARSCAN_TEST_RNG(r, std::string("matrix varlen forward ") + dtype_name<T>() + " " + o.str());
  const index_t N = o.N, S = o.S();
  const packed pW = packed_of(o, N * N), pv = packed_of(o, N);
  const std::vector<T> W = draw_packed_W<T>(r, o, pW);
  std::vector<T> b(static_cast<std::size_t>(pv.size()), T(0.0f)), x0;
  for (T& v : b) v = from_d<T>(r.normal());
  if (o.x0)
    for (index_t i = 0; i < S * N; ++i) x0.push_back(from_d<T>(r.normal()));
  const std::vector<bool> used = used_mask(o, pv);

  guarded_buffer<T> gW(W), gb(b), gx0(x0), gx_own = output<T>(pv.size()), gxf = output<T>(S * N);
  guarded_buffer<T>& gx = o.in_place ? gb : gx_own;
  const guarded_buffer<std::int64_t> cu(o.offsets());
  parscan::matrix_varlen_forward_args<T> f{};
  f.shape = {S, o.total(), N, cu.data()};
  f.W = gW.data(), f.b = gb.data(), f.x = gx.data();
  f.x0 = o.x0 ? gx0.data() : nullptr, f.x_final = o.xfinal ? gxf.data() : nullptr;
  f.reverse = o.reverse;
  f.W_strides = {7, pW.step};  // the batch stride is not used
  f.b_strides = f.x_strides = {-5, pv.step};
  const status st = parscan::matrix_recurrence_forward(parscan_test::backend(), f);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);

  check_written("x", gx, used, o.in_place ? &b : nullptr);
  if (o.xfinal) {
    CHECK(gxf.all_written());
    CHECK(gxf.guards_intact());
  } else {
    CHECK(gxf.untouched());
  }
  check_unchanged("W", gW, W);
  if (!o.in_place) check_unchanged("b", gb, b);
  check_unchanged("x0", gx0, x0);

  const std::vector<T> hx = gx.download(), hxf = gxf.download();
  for (index_t s = 0; s < S; ++s) {
    const index_t len = o.lengths[static_cast<std::size_t>(s)];
    INFO("sequence " << s << " of " << len << " steps");
    const std::vector<T> Ws = slice(o, pW, W, s), bs = slice(o, pv, b, s), x0s = states_of(x0, s, N);
    guarded_buffer<T> oW(Ws), ob(bs), ox0(x0s), ox(bs.size()), oxf(static_cast<std::size_t>(N));
    parscan::matrix_forward_args<T> one{};
    one.batch = 1, one.length = len, one.n = N;
    one.W = oW.data(), one.b = ob.data(), one.x = ox.data(), one.x0 = o.x0 ? ox0.data() : nullptr;
    one.x_final = oxf.data(), one.reverse = o.reverse;
    REQUIRE(parscan::matrix_recurrence_forward(parscan_test::backend(), one) == status::success);
    PARSCAN_TEST_SYNC();
    dvec rx, rxf;
    ref_forward(1, len, N, to_dvec(Ws), to_dvec(bs), to_dvec(x0s), o.reverse, rx, rxf);
    check_sequence<T>("x", slice(o, pv, hx, s), ox.download(), rx, N, len);
    if (o.xfinal) {
      dvec scale_of_x = rx;
      scale_of_x.resize(rx.size() + rxf.size());
      std::copy(rxf.begin(), rxf.end(), scale_of_x.end() - static_cast<std::ptrdiff_t>(rxf.size()));
      std::vector<T> got = slice(o, pv, hx, s), want = ox.download();
      const std::vector<T> gf = states_of(hxf, s, N), wf = oxf.download();
      got.insert(got.end(), gf.begin(), gf.end()), want.insert(want.end(), wf.begin(), wf.end());
      check_sequence<T>("x and x_final", got, want, scale_of_x, N, len);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Backward.

template <class T>
void run_backward(const case_opts& o) {
  INFO("matrix varlen backward <" << dtype_name<T>() << "> " << o.str());
  PARSCAN_TEST_RNG(r, std::string("matrix varlen backward ") + dtype_name<T>() + " " + o.str());
  const index_t N = o.N, S = o.S();
  const packed pW = packed_of(o, N * N), pv = packed_of(o, N);
  const std::vector<T> W = draw_packed_W<T>(r, o, pW);
  std::vector<T> b(static_cast<std::size_t>(pv.size()), T(0.0f)), dx(b.size(), T(0.0f)), x(b.size(), T(0.0f)), x0, dxf;
  for (T& v : b) v = from_d<T>(r.normal());
  for (T& v : dx) v = from_d<T>(r.normal());
  if (o.x0)
    for (index_t i = 0; i < S * N; ++i) x0.push_back(from_d<T>(r.normal()));
  if (o.dxfinal)
    for (index_t i = 0; i < S * N; ++i) dxf.push_back(from_d<T>(r.normal()));
  // x: each sequence's float64 forward, rounded to T. Where x is not given the library
  // recomputes it in compute precision, so the reference then takes the float64 forward itself
  // (exact_x), as the fixed-length tests do: against the rounded x, dW = db·x[prev]ᵀ would be
  // three 16-bit roundings from its reference (db's, the product's and x's), 3 · 2^-8 = 1.2%
  // of max|ref| for bfloat16, beyond tolerance's 1%; two of them are 0.8%.
  const std::vector<std::int64_t> off = o.offsets();
  std::vector<dvec> exact_x(static_cast<std::size_t>(S));
  for (index_t s = 0; s < S; ++s) {
    const index_t len = o.lengths[static_cast<std::size_t>(s)];
    dvec& rx = exact_x[static_cast<std::size_t>(s)];
    dvec rxf;
    ref_forward(1, len, N, to_dvec(slice(o, pW, W, s)), to_dvec(slice(o, pv, b, s)), to_dvec(states_of(x0, s, N)),
                o.reverse, rx, rxf);
    for (index_t t = 0; t < len; ++t)
      for (index_t i = 0; i < N; ++i)
        x[static_cast<std::size_t>(pv.at(off[static_cast<std::size_t>(s)] + t) + i)] =
            from_d<T>(rx[static_cast<std::size_t>(t * N + i)]);
  }
  const std::vector<bool> used_v = used_mask(o, pv), used_W = used_mask(o, pW);

  guarded_buffer<T> gW(W), gb(b), gx(x), gdx(dx), gx0(x0), gdxf(dxf);
  guarded_buffer<T> gdW = output<T>(pW.size()), gdb_own = output<T>(pv.size()), gdx0 = output<T>(S * N);
  guarded_buffer<T>& gdb = o.in_place ? gdx : gdb_own;
  const guarded_buffer<std::int64_t> cu(o.offsets());
  parscan::matrix_varlen_backward_args<T> g{};
  g.shape = {S, o.total(), N, cu.data()};
  g.W = gW.data(), g.x = o.x_given ? gx.data() : nullptr, g.b = o.x_given ? nullptr : gb.data();
  g.x0 = o.x0 ? gx0.data() : nullptr, g.dx = gdx.data(), g.dx_final = o.dxfinal ? gdxf.data() : nullptr;
  g.dW = gdW.data(), g.db = gdb.data(), g.dx0 = o.x0 ? gdx0.data() : nullptr;
  g.reverse = o.reverse;
  g.W_strides = g.dW_strides = {-1, pW.step};
  g.x_strides = g.b_strides = g.dx_strides = g.db_strides = {-1, pv.step};
  const status st = parscan::matrix_recurrence_backward(parscan_test::backend(), g);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);

  check_written("dW", gdW, used_W);
  check_written("db", gdb, used_v, o.in_place ? &dx : nullptr);
  if (o.x0) {
    CHECK(gdx0.all_written());
    CHECK(gdx0.guards_intact());
  } else {
    CHECK(gdx0.untouched());
  }
  check_unchanged("W", gW, W);
  check_unchanged("b", gb, b);
  check_unchanged("x", gx, x);
  check_unchanged("x0", gx0, x0);
  check_unchanged("dx_final", gdxf, dxf);
  if (!o.in_place) check_unchanged("dx", gdx, dx);

  const std::vector<T> hdW = gdW.download(), hdb = gdb.download(), hdx0 = gdx0.download();
  for (index_t s = 0; s < S; ++s) {
    const index_t len = o.lengths[static_cast<std::size_t>(s)];
    INFO("sequence " << s << " of " << len << " steps");
    const std::vector<T> Ws = slice(o, pW, W, s), bs = slice(o, pv, b, s), xs = slice(o, pv, x, s);
    const std::vector<T> dxs = slice(o, pv, dx, s), x0s = states_of(x0, s, N), dxfs = states_of(dxf, s, N);
    guarded_buffer<T> oW(Ws), ob(bs), ox(xs), odx(dxs), ox0(x0s), odxf(dxfs);
    guarded_buffer<T> odW(Ws.size()), odb(bs.size()), odx0(static_cast<std::size_t>(N));
    parscan::matrix_backward_args<T> one{};
    one.batch = 1, one.length = len, one.n = N;
    one.W = oW.data(), one.x = o.x_given ? ox.data() : nullptr, one.b = o.x_given ? nullptr : ob.data();
    one.x0 = o.x0 ? ox0.data() : nullptr, one.dx = odx.data(), one.dx_final = o.dxfinal ? odxf.data() : nullptr;
    one.dW = odW.data(), one.db = odb.data(), one.dx0 = o.x0 ? odx0.data() : nullptr, one.reverse = o.reverse;
    REQUIRE(parscan::matrix_recurrence_backward(parscan_test::backend(), one) == status::success);
    PARSCAN_TEST_SYNC();
    dvec rdW, rdb, rdx0;
    ref_backward(1, len, N, to_dvec(Ws), o.x_given ? to_dvec(xs) : exact_x[static_cast<std::size_t>(s)],
                 to_dvec(x0s), to_dvec(dxs), to_dvec(dxfs), o.reverse, rdW, rdb, rdx0);
    check_sequence<T>("dW", slice(o, pW, hdW, s), odW.download(), rdW, N, len);
    check_sequence<T>("db", slice(o, pv, hdb, s), odb.download(), rdb, N, len);
    // dx0 = W[first]ᵀ·db[first] is measured at db's size, as the terms it sums are (its own
    // two or so values can cancel far below them).
    double db_size = 0;
    for (double v : rdb) db_size = std::max(db_size, std::fabs(v));
    if (o.x0) check_sequence<T>("dx0", states_of(hdx0, s, N), odx0.download(), rdx0, N, len, db_size);
  }
}

// ---------------------------------------------------------------------------------------
// The cases.

/// Empty sequences among others, 1, primes, chunk sizes ± 1, no sequences, only empty ones.
inline std::vector<std::vector<index_t>> length_mixes() {
  std::vector<std::vector<index_t>> v = {
      {0, 1, 7, 0, 31, 32, 33, 1, 0}, {63, 64, 65, 129, 0, 257}, {1000, 13}, {1}, {0, 0}, {},
  };
  if (parscan_test::on_device) v.push_back({5000, 0, 3, 700, 40});
  return v;
}

/// Every length mix for N = 1, 2, 3, 4 (the thread engine on CUDA), 7 (the tensor engine) and
/// 20 (the block engine), the options varied with the case index; the backward also N = 8 (the
/// tensor engine at its exact size, and dW a 16-byte word a thread where its rows are aligned).
template <class T>
void forward_cases() {
  int i = 0;
  for (const std::vector<index_t>& lengths : length_mixes())
    for (index_t N : {index_t(1), index_t(2), index_t(3), index_t(4), index_t(7), index_t(20)}) {
      ++i;
      case_opts o;
      o.lengths = lengths, o.N = N;
      o.trailing = i % 4 == 1 ? 3 : 0, o.pad = i % 3 == 2 ? 1 : 0;
      o.x0 = i % 2 == 0, o.xfinal = i % 5 != 3, o.reverse = (i / 2) % 2 == 1, o.in_place = i % 7 == 4;
      o.fam = i % 3 == 0 ? family::near_orthogonal : family::contractive;
      run_forward<T>(o);
    }
}

template <class T>
void backward_cases() {
  int i = 0;
  for (const std::vector<index_t>& lengths : length_mixes())
    for (index_t N : {index_t(1), index_t(2), index_t(3), index_t(4), index_t(7), index_t(8), index_t(20)}) {
      ++i;
      case_opts o;
      o.lengths = lengths, o.N = N;
      o.trailing = i % 4 == 2 ? 2 : 0, o.pad = i % 3 == 1 ? 2 : 0;
      o.x0 = i % 2 == 1, o.dxfinal = i % 3 != 0, o.x_given = i % 4 < 2, o.reverse = (i / 2) % 3 == 1;
      o.in_place = i % 7 == 3;
      o.fam = i % 3 == 0 ? family::near_orthogonal : family::contractive;
      run_backward<T>(o);
    }
}

/// The packed forward of case `o` (x0 given, x_final written) on packed W, b and x0.
template <class T>
std::pair<std::vector<T>, std::vector<T>> packed_forward(const case_opts& o, const std::vector<T>& W,
                                                         const std::vector<T>& b, const std::vector<T>& x0) {
  const packed pW = packed_of(o, o.N * o.N), pv = packed_of(o, o.N);
  guarded_buffer<T> gW(W), gb(b), gx0(x0), gx = output<T>(pv.size()), gxf = output<T>(o.S() * o.N);
  const guarded_buffer<std::int64_t> cu(o.offsets());
  parscan::matrix_varlen_forward_args<T> f{};
  f.shape = {o.S(), o.total(), o.N, cu.data()};
  f.W = gW.data(), f.b = gb.data(), f.x = gx.data(), f.x0 = gx0.data(), f.x_final = gxf.data();
  f.reverse = o.reverse;
  f.W_strides = {-1, pW.step}, f.b_strides = f.x_strides = {-1, pv.step};
  const status st = parscan::matrix_recurrence_forward(parscan_test::backend(), f);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);
  return {gx.download(), gxf.download()};
}

/// The packed backward of case `o` (x given, x0 and dx_final given, dx0 written): dW, db, dx0.
template <class T>
std::tuple<std::vector<T>, std::vector<T>, std::vector<T>> packed_backward(
    const case_opts& o, const std::vector<T>& W, const std::vector<T>& x, const std::vector<T>& x0,
    const std::vector<T>& dx, const std::vector<T>& dx_final) {
  const packed pW = packed_of(o, o.N * o.N), pv = packed_of(o, o.N);
  guarded_buffer<T> gW(W), gx(x), gx0(x0), gdx(dx), gdxf(dx_final);
  guarded_buffer<T> gdW = output<T>(pW.size()), gdb = output<T>(pv.size()), gdx0 = output<T>(o.S() * o.N);
  const guarded_buffer<std::int64_t> cu(o.offsets());
  parscan::matrix_varlen_backward_args<T> g{};
  g.shape = {o.S(), o.total(), o.N, cu.data()};
  g.W = gW.data(), g.x = gx.data(), g.x0 = gx0.data(), g.dx = gdx.data(), g.dx_final = gdxf.data();
  g.dW = gdW.data(), g.db = gdb.data(), g.dx0 = gdx0.data();
  g.reverse = o.reverse;
  g.W_strides = g.dW_strides = {-1, pW.step};
  g.x_strides = g.dx_strides = g.db_strides = {-1, pv.step};
  const status st = parscan::matrix_recurrence_backward(parscan_test::backend(), g);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);
  return {gdW.download(), gdb.download(), gdx0.download()};
}

/// Every sequence of `o` cut in two where its steps are processed: part 0 (the first third of
/// each sequence's steps in processing order), then part 1; `steps` maps each step of the part
/// to the whole's.
struct step_part {
  case_opts c;
  std::vector<std::pair<index_t, index_t>> steps;  // (in the part, in the whole)

  /// The part's blocks (`block` elements a step) of a packed tensor of the whole.
  template <class T>
  std::vector<T> take(const case_opts& whole, const std::vector<T>& v, index_t block) const {
    const packed pw = packed_of(whole, block), pc = packed_of(c, block);
    std::vector<T> out(static_cast<std::size_t>(pc.size()));
    for (const auto& [to, at] : steps) std::copy_n(v.begin() + pw.at(at), block, out.begin() + pc.at(to));
    return out;
  }
  /// The part's elements of a result of the part's call (part = true) or of the whole's, in
  /// step order.
  template <class T>
  std::vector<T> blocks(const case_opts& whole, const std::vector<T>& v, index_t block, bool part) const {
    const packed p = packed_of(part ? c : whole, block);
    std::vector<T> out;
    for (const auto& [to, at] : steps)
      for (index_t i = 0; i < block; ++i) out.push_back(v[static_cast<std::size_t>(p.at(part ? to : at) + i)]);
    return out;
  }
};

inline step_part step_part_of(const case_opts& o, int k) {
  step_part p;
  p.c = o;
  std::vector<index_t> from(o.lengths.size());
  for (std::size_t s = 0; s < o.lengths.size(); ++s) {
    const index_t len = o.lengths[s], first = len / 3, length = k == 0 ? first : len - first;
    from[s] = (k == 0) != o.reverse ? 0 : len - length;
    p.c.lengths[s] = length;
  }
  for (std::size_t s = 0; s < o.lengths.size(); ++s)
    for (index_t t = 0; t < p.c.lengths[s]; ++t) p.steps.emplace_back(p.c.offsets()[s] + t, o.offsets()[s] + from[s] + t);
  return p;
}

/// The chunked cases: lengths with empty ones, 1 and tile sizes ± 1, N = 2 (thread engine) and
/// 7 (tensor engine), both directions, with x0.
inline std::vector<case_opts> chunked_cases() {
  std::vector<case_opts> v;
  for (index_t N : {index_t(2), index_t(7)})
    for (bool rev : {false, true}) {
      case_opts o;
      o.lengths = {0, 1, 7, 31, 32, 33, 100, 257, 0, 64}, o.N = N, o.reverse = rev, o.x0 = true;
      v.push_back(o);
    }
  return v;
}

/// Chunked use across calls: every sequence cut in two where its steps are processed, the
/// first part's x_final the second part's x0. Both parts' x and the second's x_final equal one
/// call's: bitwise for float and double on the host (the state crosses the cut exactly), within
/// the tolerance of each result's size otherwise.
template <class T>
void chunked_forward() {
  for (const case_opts& o : chunked_cases()) {
    const index_t N = o.N;
    INFO("matrix varlen chunked forward <" << dtype_name<T>() << "> " << o.str());
    PARSCAN_TEST_RNG(r, std::string("matrix varlen chunked ") + dtype_name<T>() + " " + o.str());
    const packed pW = packed_of(o, N * N), pv = packed_of(o, N);
    const std::vector<T> W = draw_packed_W<T>(r, o, pW);
    std::vector<T> b(static_cast<std::size_t>(pv.size())), x0(static_cast<std::size_t>(o.S() * N));
    for (T& v : b) v = from_d<T>(r.normal());
    for (T& v : x0) v = from_d<T>(r.normal());
    const auto whole = packed_forward(o, W, b, x0);
    std::vector<T> state = x0;
    for (int k = 0; k < 2; ++k) {
      const step_part part = step_part_of(o, k);
      const auto got = packed_forward(part.c, part.take(o, W, N * N), part.take(o, b, N), state);
      INFO("part " << k);
      check_chunks("x", part.blocks(o, got.first, N, true), part.blocks(o, whole.first, N, false), N);
      state = got.second;
    }
    check_chunks("x_final", state, whole.second, N);
  }
}

/// Chunked use across calls, backward: the later part first, from the whole's dx_final, its
/// dx0 the earlier part's dx_final; each part reads the forward's x and the state entering it
/// (the earlier part's x_final). Both parts' dW and db and the earlier part's dx0 equal one
/// call's, as the forward's do.
template <class T>
void chunked_backward() {
  for (const case_opts& o : chunked_cases()) {
    const index_t N = o.N;
    INFO("matrix varlen chunked backward <" << dtype_name<T>() << "> " << o.str());
    PARSCAN_TEST_RNG(r, std::string("matrix varlen chunked backward ") + dtype_name<T>() + " " + o.str());
    const packed pW = packed_of(o, N * N), pv = packed_of(o, N);
    const std::vector<T> W = draw_packed_W<T>(r, o, pW);
    std::vector<T> b(static_cast<std::size_t>(pv.size())), dx(b.size());
    std::vector<T> x0(static_cast<std::size_t>(o.S() * N)), dx_final(x0.size());
    for (std::vector<T>* v : {&b, &dx, &x0, &dx_final})
      for (T& e : *v) e = from_d<T>(r.normal());
    const std::vector<T> x = packed_forward(o, W, b, x0).first;
    const auto [dW, db, dx0] = packed_backward(o, W, x, x0, dx, dx_final);
    const step_part first = step_part_of(o, 0), second = step_part_of(o, 1);
    const std::vector<T> between = packed_forward(first.c, first.take(o, W, N * N), first.take(o, b, N), x0).second;
    const auto later =
        packed_backward(second.c, second.take(o, W, N * N), second.take(o, x, N), between, second.take(o, dx, N),
                        dx_final);
    const auto earlier = packed_backward(first.c, first.take(o, W, N * N), first.take(o, x, N), x0,
                                         first.take(o, dx, N), std::get<2>(later));
    for (const step_part* part : {&first, &second}) {
      const auto& got = part == &first ? earlier : later;
      INFO("part " << (part == &first ? 0 : 1));
      check_chunks("dW", part->blocks(o, std::get<0>(got), N * N, true), part->blocks(o, dW, N * N, false), N);
      check_chunks("db", part->blocks(o, std::get<1>(got), N, true), part->blocks(o, db, N, false), N);
    }
    check_chunks("dx0", std::get<2>(earlier), dx0, N);
  }
}

/// Many sequences (more thread-engine tasks than a warp round, slots left unused, long ones
/// late), every option, N = 2 and 16.
template <class T>
void many_sequences() {
  std::vector<index_t> lengths;
  for (index_t i = 0; i < 300; ++i) lengths.push_back(i % 13 == 5 ? 0 : (i * 37) % 71);
  lengths[281] = parscan_test::on_device ? 3000 : 600, lengths[7] = 1;
  for (index_t N : {index_t(2), index_t(16)})
    for (bool x0 : {false, true})
      for (bool rev : {false, true}) {
        case_opts o;
        o.lengths = lengths, o.N = N, o.x0 = x0, o.reverse = rev, o.trailing = x0 ? 0 : 5;
        run_forward<T>(o);
        o.x_given = x0 != rev, o.dxfinal = true;
        run_backward<T>(o);
      }
}

/// Bad shapes, offsets and tensors: the status, and nothing written.
template <class T>
void bad_arguments() {
  const index_t N = 2, total = 10;
  guarded_buffer<T> W(std::vector<T>(static_cast<std::size_t>(total * N * N), T(0.5f)));
  guarded_buffer<T> b(std::vector<T>(static_cast<std::size_t>(total * N), T(0.25f)));
  guarded_buffer<T> x(static_cast<std::size_t>(total * N)), xf(static_cast<std::size_t>(2 * N));
  auto forward = [&](const std::int64_t* cu, index_t S, index_t n, T* x_final) {
    parscan::matrix_varlen_forward_args<T> f{};
    f.shape = {S, total, n, cu};
    f.W = W.data(), f.b = b.data(), f.x = x.data(), f.x_final = x_final;
    const status st = parscan::matrix_recurrence_forward(parscan_test::backend(), f);
    PARSCAN_TEST_SYNC();
    return st;
  };
  struct bad {
    std::vector<std::int64_t> offsets;
    index_t S, n;
    status expected;
    bool host_only;
    const char* what;
  };
  const bad cases[] = {
      {{1, 4, 10}, 2, N, status::invalid_offsets, true, "first offset not 0"},
      {{0, 6, 4}, 2, N, status::invalid_offsets, true, "decreasing offsets"},
      {{0, 4, 11}, 2, N, status::invalid_offsets, true, "last offset past total_length"},
      {{0, 4, 10}, -1, N, status::negative_size, false, "negative sequence count"},
      {{0, 4, 10}, 2, 65, status::unsupported, false, "N = 65"},
  };
  for (const bad& c : cases) {
    if (c.host_only && parscan_test::on_device) continue;
    INFO(c.what);
    const guarded_buffer<std::int64_t> cu(c.offsets);
    CHECK(forward(cu.data(), c.S, c.n, xf.data()) == c.expected);
  }
  const guarded_buffer<std::int64_t> cu(std::vector<std::int64_t>{0, 4, 10});
  CHECK(forward(nullptr, 2, N, xf.data()) == status::null_pointer);
  CHECK(forward(cu.data(), 2, N, x.data() + 1) == status::overlapping_output);
  CHECK(forward(cu.data(), index_t(1) << 62, N, nullptr) == status::size_overflow);
  CHECK(x.untouched());
  CHECK(xf.untouched());
  {
    INFO("backward: x0 without dx0 (2·N states), bad offsets");
    guarded_buffer<T> dx(b.download()), dW = output<T>(total * N * N), db = output<T>(total * N);
    guarded_buffer<T> x0(std::vector<T>(static_cast<std::size_t>(2 * N), T(1.0f))), dx0 = output<T>(2 * N);
    auto backward = [&](const std::int64_t* offsets, T* d0) {
      parscan::matrix_varlen_backward_args<T> g{};
      g.shape = {2, total, N, offsets};
      g.W = W.data(), g.b = b.data(), g.x0 = x0.data(), g.dx = dx.data(), g.dW = dW.data(), g.db = db.data();
      g.dx0 = d0;
      const status st = parscan::matrix_recurrence_backward(parscan_test::backend(), g);
      PARSCAN_TEST_SYNC();
      return st;
    };
    CHECK(backward(cu.data(), nullptr) == status::null_pointer);
    CHECK(backward(nullptr, dx0.data()) == status::null_pointer);
    if (!parscan_test::on_device) {
      const guarded_buffer<std::int64_t> broken(std::vector<std::int64_t>{0, 7, 5});
      CHECK(backward(broken.data(), dx0.data()) == status::invalid_offsets);
    }
    CHECK(dW.untouched());
    CHECK(db.untouched());
    CHECK(dx0.untouched());
  }
}

}  // namespace mtx_varlen_test

#define MTX_VARLEN_NAME(title) PARSCAN_TEST_NAME("matrix varlen recurrence " title)
#define MTX_VARLEN_TAGS(tags) PARSCAN_TEST_TAGS("[matrix][varlen]" tags)
#define MTX_VARLEN_FOR_EACH_DTYPE(title, tags, fn)                                                                 \
  TEST_CASE(MTX_VARLEN_NAME(title " <float>"), MTX_VARLEN_TAGS(tags)) { mtx_varlen_test::fn<float>(); }            \
  TEST_CASE(MTX_VARLEN_NAME(title " <double>"), MTX_VARLEN_TAGS(tags)) { mtx_varlen_test::fn<double>(); }          \
  TEST_CASE(MTX_VARLEN_NAME(title " <bfloat16>"), MTX_VARLEN_TAGS(tags)) {                                         \
    mtx_varlen_test::fn<parscan::bfloat16>();                                                                      \
  }                                                                                                                \
  TEST_CASE(MTX_VARLEN_NAME(title " <float16>"), MTX_VARLEN_TAGS(tags)) { mtx_varlen_test::fn<parscan::float16>(); }

MTX_VARLEN_FOR_EACH_DTYPE("forward: length mixes x state sizes x options", "[forward]", forward_cases)
MTX_VARLEN_FOR_EACH_DTYPE("backward: length mixes x state sizes x options", "[backward]", backward_cases)
MTX_VARLEN_FOR_EACH_DTYPE("many sequences and every option", "[forward][backward]", many_sequences)
MTX_VARLEN_FOR_EACH_DTYPE("chunked forward across calls equals one call", "[forward]", chunked_forward)
MTX_VARLEN_FOR_EACH_DTYPE("chunked backward across calls equals one call", "[backward]", chunked_backward)
MTX_VARLEN_FOR_EACH_DTYPE("bad offsets and arguments return their status and write nothing", "[errors]",
                          bad_arguments)
