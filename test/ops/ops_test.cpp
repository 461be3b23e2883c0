// test/ops/ops_test.cpp — the built-in operators of include/parscan/ops/ and the 16-bit storage
// types of parscan/numeric.hpp, on the host (plain C++; the operators are PARSCAN_HD, so the
// same code runs on the device).
//
// For every operator: associativity (exact on integer-valued data where the arithmetic is
// exact, within a stated tolerance on random floats), the identity on both sides, and the
// argument order op(earlier, later) = "later after earlier" on a non-commutative case whose
// swapped order gives a different, hand-computed answer.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <parscan/detail/log_affine_bits.hpp>
#include <parscan/numeric.hpp>
#include <parscan/ops.hpp>

#include "support/catch.hpp"
#include "support/random.hpp"

namespace {

using parscan_test::rng;

// ---------------------------------------------------------------------------------------------
// Scalars: real or complex, built from (re, im).

template <class S>
struct is_complex : std::false_type {};
template <class R>
struct is_complex<parscan::complex<R>> : std::true_type {};

template <class S>
S scalar(double re, double im = 0.0) {
  if constexpr (is_complex<S>::value) return S(static_cast<typename S::value_type>(re), static_cast<typename S::value_type>(im));
  else return static_cast<S>(re);
}

template <class S>
double magnitude(const S& x) {
  if constexpr (is_complex<S>::value) return std::hypot(static_cast<double>(x.real()), static_cast<double>(x.imag()));
  else return std::fabs(static_cast<double>(x));
}

template <class S>
double distance(const S& x, const S& y) {
  if constexpr (is_complex<S>::value)
    return std::hypot(static_cast<double>(x.real()) - static_cast<double>(y.real()),
                      static_cast<double>(x.imag()) - static_cast<double>(y.imag()));
  else return std::fabs(static_cast<double>(x) - static_cast<double>(y));
}

// A small non-zero integer (Gaussian integer for complex scalars).
template <class S>
S small_integer(rng& r, int m = 4) {
  return scalar<S>(static_cast<double>(r.nonzero_int(m)), is_complex<S>::value ? static_cast<double>(r.small_int(-m, m)) : 0.0);
}

template <class S>
struct real_of {
  using type = S;
};
template <class R>
struct real_of<parscan::complex<R>> {
  using type = R;
};

// Relative tolerance for a few operations in the scalar's precision (float or double).
template <class S>
double tolerance_for() {
  return std::is_same<typename real_of<S>::type, float>::value ? 1e-5 : 1e-13;
}

float float_from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

// =============================================================================================
// affine_op

namespace {

template <class S>
bool same(const parscan::affine<S>& x, const parscan::affine<S>& y) {
  return x.a == y.a && x.b == y.b;
}

// Storage T → the operator's value_type, as the scans load it.
template <class T>
typename parscan::affine_op<T>::value_type load_affine(const parscan::affine<T>& stored) {
  return typename parscan::affine_op<T>::value_type(stored);
}

template <class T>
void affine_op_checks(const char* type_name) {
  using op_t = parscan::affine_op<T>;
  using V = typename op_t::value_type;
  using S = typename op_t::scalar_type;
  static_assert(std::is_same<V, parscan::affine<parscan::compute_t<T>>>::value, "value_type is affine<compute_t<T>>");
  const op_t op;
  INFO("affine_op<" << type_name << ">");
  PARSCAN_TEST_RNG(r, std::string("affine_op ") + type_name);

  // Storage: integers round-trip through T exactly, then compose in the compute type.
  const auto draw_int = [&](int m) {
    const parscan::affine<T> stored(static_cast<T>(small_integer<S>(r, m)), static_cast<T>(small_integer<S>(r, m)));
    return load_affine(stored);
  };

  SECTION("associative, exactly, on small integers") {
    for (int rep = 0; rep < 200; ++rep) {
      const V x = draw_int(4), y = draw_int(4), z = draw_int(4);
      CHECK(same(op(op(x, y), z), op(x, op(y, z))));
    }
    // Longer chains: left fold, right fold and a mixed bracketing agree exactly.
    for (int rep = 0; rep < 50; ++rep) {
      std::vector<V> v;
      for (int i = 0; i < 6; ++i) v.push_back(draw_int(2));
      V left = v[0];
      for (int i = 1; i < 6; ++i) left = op(left, v[i]);
      V right = v[5];
      for (int i = 4; i >= 0; --i) right = op(v[i], right);
      const V mixed = op(op(v[0], op(v[1], v[2])), op(op(v[3], v[4]), v[5]));
      CHECK(same(left, right));
      CHECK(same(left, mixed));
    }
  }
  SECTION("associative within tolerance on random values") {
    const double tol = tolerance_for<S>();
    for (int rep = 0; rep < 500; ++rep) {
      const auto draw = [&] {
        return V(scalar<S>(r.uniform(-2, 2), r.uniform(-2, 2)), scalar<S>(r.normal(), r.normal()));
      };
      const V x = draw(), y = draw(), z = draw();
      const V p = op(op(x, y), z), q = op(x, op(y, z));
      const double scale_a = magnitude(x.a) * magnitude(y.a) * magnitude(z.a);
      const double scale_b = scale_a / magnitude(x.a) * magnitude(x.b) + magnitude(z.a) * magnitude(y.b) + magnitude(z.b);
      CHECK(distance(p.a, q.a) <= tol * scale_a);
      CHECK(distance(p.b, q.b) <= tol * scale_b);
    }
  }
  SECTION("identity on both sides, exactly") {
    const V e = op_t::identity();
    CHECK(e.a == scalar<S>(1.0));
    CHECK(e.b == scalar<S>(0.0));
    for (int rep = 0; rep < 200; ++rep) {
      const V x(scalar<S>(r.normal(), r.normal()), scalar<S>(r.normal(), r.normal()));
      CHECK(same(op(e, x), x));
      CHECK(same(op(x, e), x));
    }
  }
  SECTION("argument order: op(earlier, later) is later after earlier") {
    if constexpr (!is_complex<S>::value) {
      // earlier: x ↦ 2x + 3; later: x ↦ 5x + 7. later(earlier(x)) = 5(2x + 3) + 7 = 10x + 22;
      // the swapped order would be 2(5x + 7) + 3 = 10x + 17.
      const V earlier(S(2), S(3)), later(S(5), S(7));
      const V c = op(earlier, later);
      CHECK(c.a == S(10));
      CHECK(c.b == S(22));
      CHECK(c(S(11)) == later(earlier(S(11))));  // 132
      CHECK(c(S(11)) == S(132));
    } else {
      // earlier: x ↦ (1+2i)x + 3; later: x ↦ (2-i)x + (1+i).
      // later∘earlier: a = (2-i)(1+2i) = 4+3i, b = (2-i)·3 + (1+i) = 7-2i;
      // the swapped order would give b = (1+2i)(1+i) + 3 = 2+3i.
      const V earlier(scalar<S>(1, 2), scalar<S>(3, 0)), later(scalar<S>(2, -1), scalar<S>(1, 1));
      const V c = op(earlier, later);
      CHECK(c.a == scalar<S>(4, 3));
      CHECK(c.b == scalar<S>(7, -2));
    }
  }
  SECTION("matches composition computed in double on random values") {
    // Chains of 10 maps with gates in (-1, 1): the scan's running state.
    for (int rep = 0; rep < 50; ++rep) {
      V acc = op_t::identity();
      double ar = 1, ai = 0, br = 0, bi = 0;  // reference composition, complex arithmetic in double
      for (int i = 0; i < 10; ++i) {
        const double gr = r.signed_unit(), gi = is_complex<S>::value ? r.signed_unit() : 0.0;
        const double xr = r.signed_unit(), xi = is_complex<S>::value ? r.signed_unit() : 0.0;
        const parscan::affine<T> stored(static_cast<T>(scalar<S>(gr, gi)), static_cast<T>(scalar<S>(xr, xi)));
        const V step = load_affine(stored);  // rounded to T
        double gr2, gi2, xr2, xi2;
        if constexpr (is_complex<S>::value) gr2 = step.a.real(), gi2 = step.a.imag(), xr2 = step.b.real(), xi2 = step.b.imag();
        else gr2 = step.a, gi2 = 0, xr2 = step.b, xi2 = 0;
        // (a, b) ← (g·a, g·b + x)
        const double nar = gr2 * ar - gi2 * ai, nai = gr2 * ai + gi2 * ar;
        const double nbr = gr2 * br - gi2 * bi + xr2, nbi = gr2 * bi + gi2 * br + xi2;
        ar = nar, ai = nai, br = nbr, bi = nbi;
        acc = op(acc, step);
      }
      CHECK(distance(acc.a, scalar<S>(ar, ai)) <= 1e-5 * (1 + std::hypot(ar, ai)));
      CHECK(distance(acc.b, scalar<S>(br, bi)) <= 1e-5 * (1 + std::hypot(br, bi)));
    }
  }
}

}  // namespace

TEST_CASE("affine_op<float>", "[ops][affine]") { affine_op_checks<float>("float"); }
TEST_CASE("affine_op<double>", "[ops][affine]") { affine_op_checks<double>("double"); }
TEST_CASE("affine_op<complex<float>>", "[ops][affine]") { affine_op_checks<parscan::complex<float>>("complex<float>"); }
TEST_CASE("affine_op<complex<double>>", "[ops][affine]") { affine_op_checks<parscan::complex<double>>("complex<double>"); }
TEST_CASE("affine_op<bfloat16>", "[ops][affine]") { affine_op_checks<parscan::bfloat16>("bfloat16"); }
TEST_CASE("affine_op<float16>", "[ops][affine]") { affine_op_checks<parscan::float16>("float16"); }

TEST_CASE("complex product: each half one fused multiply-add, no Annex G recovery", "[ops][affine][numeric]") {
  // parscan::product (numeric.hpp) is what affine_op and the recurrences multiply complex values
  // with, on both backends: re = fma(a, c, -(b·d)), im = fma(a, d, b·c), bit for bit.
  PARSCAN_TEST_RNG(r, "complex product");
  auto check = [&](auto zero) {
    using R = decltype(zero);
    for (int rep = 0; rep < 500; ++rep) {
      const parscan::complex<R> x(static_cast<R>(r.normal()), static_cast<R>(r.normal()));
      const parscan::complex<R> y(static_cast<R>(r.normal()), static_cast<R>(r.normal()));
      const parscan::complex<R> p = parscan::product(x, y);
      const R re = std::fma(x.real(), y.real(), -(x.imag() * y.imag()));
      const R im = std::fma(x.real(), y.imag(), x.imag() * y.real());
      INFO("x = " << x.real() << " + " << x.imag() << "i, y = " << y.real() << " + " << y.imag() << "i");
      const R got_re = p.real(), got_im = p.imag();
      CHECK(std::memcmp(&re, &got_re, sizeof(R)) == 0);
      CHECK(std::memcmp(&im, &got_im, sizeof(R)) == 0);
      // and the affine composition uses it: later.a·earlier.b + later.b
      const parscan::affine<parscan::complex<R>> earlier(y, x), later(x, y);
      const auto c = parscan::affine_op<parscan::complex<R>>{}(earlier, later);
      CHECK(c.a == p);
      CHECK(c.b == parscan::product(x, x) + y);
    }
    // Annex G would recover (∞ + ∞i)·(1 + 0i) as ∞ + ∞i; the textbook formula gives NaN + NaN i
    // (docs/numerics.md, "Complex products").
    const R inf = std::numeric_limits<R>::infinity();
    const parscan::complex<R> p = parscan::product(parscan::complex<R>(inf, inf), parscan::complex<R>(1, 0));
    CHECK(std::isnan(p.real()));
    CHECK(std::isnan(p.imag()));
  };
  check(0.0f);
  check(0.0);
}

TEST_CASE("affine<16-bit> storage rounds each coefficient to nearest", "[ops][affine][numeric]") {
  // 1 + 2^-8 is a bfloat16 tie (rounds to even, 1); 1 + 3·2^-8 rounds up to 1 + 2^-6.
  const parscan::affine<parscan::bfloat16> b(parscan::affine<float>(1.00390625f, 1.01171875f));
  CHECK(b.a.bits == 0x3F80);
  CHECK(b.b.bits == 0x3F82);
  const parscan::affine<float> back(b);
  CHECK(back.a == 1.0f);
  CHECK(back.b == 1.015625f);
  // float16: 1 + 2^-11 is a tie (to 1), 1 + 3·2^-11 rounds up to 1 + 2^-9.
  const parscan::affine<parscan::float16> h(parscan::affine<float>(1.00048828125f, 1.00146484375f));
  CHECK(h.a.bits == 0x3C00);
  CHECK(h.b.bits == 0x3C02);
}

// =============================================================================================
// matrix_affine_op and matrix_product_op

namespace {

template <class S, int N>
bool same(const parscan::matrix<S, N>& x, const parscan::matrix<S, N>& y) {
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j)
      if (!(x.m[i][j] == y.m[i][j])) return false;
  return true;
}

template <class S, int N>
bool same(const parscan::matrix_affine<S, N>& x, const parscan::matrix_affine<S, N>& y) {
  for (int i = 0; i < N; ++i) {
    if (!(x.b[i] == y.b[i])) return false;
    for (int j = 0; j < N; ++j)
      if (!(x.W[i][j] == y.W[i][j])) return false;
  }
  return true;
}

// Random N×N matrix stored as T: small integers (exact) or uniform in (-1, 1).
template <class T, int N>
parscan::matrix<T, N> random_matrix(rng& r, bool integers) {
  parscan::matrix<T, N> x;
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j)
      x.m[i][j] = static_cast<T>(static_cast<float>(integers ? static_cast<double>(r.small_int(-2, 2)) : r.signed_unit()));
  return x;
}

template <class T, int N>
parscan::matrix_affine<T, N> random_matrix_affine(rng& r, bool integers) {
  parscan::matrix_affine<T, N> x;
  for (int i = 0; i < N; ++i) {
    x.b[i] = static_cast<T>(static_cast<float>(integers ? static_cast<double>(r.small_int(-2, 2)) : r.signed_unit()));
    for (int j = 0; j < N; ++j)
      x.W[i][j] = static_cast<T>(static_cast<float>(integers ? static_cast<double>(r.small_int(-2, 2)) : r.signed_unit()));
  }
  return x;
}

// The test's own matrix arithmetic in double.
template <int N>
struct dmat {
  double m[N][N];
};
template <class S, int N>
dmat<N> to_d(const parscan::matrix<S, N>& x) {
  dmat<N> d;
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) d.m[i][j] = static_cast<double>(x.m[i][j]);
  return d;
}
template <int N>
dmat<N> mul(const dmat<N>& x, const dmat<N>& y, bool absolute = false) {
  dmat<N> z;
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int k = 0; k < N; ++k) s += absolute ? std::fabs(x.m[i][k]) * std::fabs(y.m[k][j]) : x.m[i][k] * y.m[k][j];
      z.m[i][j] = s;
    }
  return z;
}

template <class T, int N>
void matrix_product_checks(const char* type_name) {
  using op_t = parscan::matrix_product_op<T, N>;
  using V = typename op_t::value_type;
  using S = typename op_t::scalar_type;
  static_assert(std::is_same<V, parscan::matrix<parscan::compute_t<T>, N>>::value, "value_type");
  const op_t op;
  INFO("matrix_product_op<" << type_name << ", " << N << ">");
  PARSCAN_TEST_RNG(r, std::string("matrix_product_op ") + type_name + " " + std::to_string(N));

  SECTION("associative, exactly, on small integer matrices") {
    for (int rep = 0; rep < 50; ++rep) {
      const V x(random_matrix<T, N>(r, true)), y(random_matrix<T, N>(r, true)), z(random_matrix<T, N>(r, true));
      CHECK(same(op(op(x, y), z), op(x, op(y, z))));
    }
  }
  SECTION("associative within tolerance on random matrices") {
    for (int rep = 0; rep < 50; ++rep) {
      const V x(random_matrix<T, N>(r, false)), y(random_matrix<T, N>(r, false)), z(random_matrix<T, N>(r, false));
      const V p = op(op(x, y), z), q = op(x, op(y, z));
      const dmat<N> bound = mul(mul(to_d(x), to_d(y), true), to_d(z), true);
      const double tol = std::is_same<S, float>::value ? 1e-5 : 1e-13;
      for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) CHECK(std::fabs(double(p.m[i][j]) - double(q.m[i][j])) <= tol * bound.m[i][j]);
    }
  }
  SECTION("identity on both sides, exactly") {
    const V e = op_t::identity();
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j) CHECK(e.m[i][j] == S(i == j ? 1 : 0));
    for (int rep = 0; rep < 50; ++rep) {
      const V x(random_matrix<T, N>(r, false));
      CHECK(same(op(e, x), x));
      CHECK(same(op(x, e), x));
    }
  }
  SECTION("argument order: op(earlier, later) = earlier · later") {
    if constexpr (N == 2) {
      // E = [[1,2],[3,4]], L = [[0,1],[1,0]] (swaps columns from the right, rows from the left):
      // E·L = [[2,1],[4,3]]; the swapped order L·E = [[3,4],[1,2]].
      V E, L;
      E.m[0][0] = 1, E.m[0][1] = 2, E.m[1][0] = 3, E.m[1][1] = 4;
      L.m[0][0] = 0, L.m[0][1] = 1, L.m[1][0] = 1, L.m[1][1] = 0;
      const V c = op(E, L);
      CHECK(c.m[0][0] == 2);
      CHECK(c.m[0][1] == 1);
      CHECK(c.m[1][0] == 4);
      CHECK(c.m[1][1] == 3);
    }
    for (int rep = 0; rep < 20; ++rep) {
      const V E(random_matrix<T, N>(r, true)), L(random_matrix<T, N>(r, true));
      // The test's own E·L (integers: exact); random pairs almost never commute, so a swapped
      // product fails here too (the 2×2 case above shows it by hand).
      const dmat<N> expected = mul(to_d(E), to_d(L));
      const V c = op(E, L);
      bool matches = true;
      for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) matches = matches && double(c.m[i][j]) == expected.m[i][j];
      CHECK(matches);
    }
  }
}

template <class T, int N>
void matrix_affine_checks(const char* type_name) {
  using op_t = parscan::matrix_affine_op<T, N>;
  using V = typename op_t::value_type;
  using S = typename op_t::scalar_type;
  static_assert(std::is_same<V, parscan::matrix_affine<parscan::compute_t<T>, N>>::value, "value_type");
  const op_t op;
  INFO("matrix_affine_op<" << type_name << ", " << N << ">");
  PARSCAN_TEST_RNG(r, std::string("matrix_affine_op ") + type_name + " " + std::to_string(N));

  // Applies x ↦ W·x + b in double.
  const auto apply = [](const V& f, const std::vector<double>& x) {
    std::vector<double> y(N);
    for (int i = 0; i < N; ++i) {
      double s = static_cast<double>(f.b[i]);
      for (int k = 0; k < N; ++k) s += static_cast<double>(f.W[i][k]) * x[k];
      y[i] = s;
    }
    return y;
  };

  SECTION("associative, exactly, on small integers") {
    for (int rep = 0; rep < 50; ++rep) {
      const V x(random_matrix_affine<T, N>(r, true)), y(random_matrix_affine<T, N>(r, true)),
          z(random_matrix_affine<T, N>(r, true));
      CHECK(same(op(op(x, y), z), op(x, op(y, z))));
    }
  }
  SECTION("associative within tolerance on random values") {
    const double tol = std::is_same<S, float>::value ? 1e-5 : 1e-13;
    for (int rep = 0; rep < 50; ++rep) {
      const V x(random_matrix_affine<T, N>(r, false)), y(random_matrix_affine<T, N>(r, false)),
          z(random_matrix_affine<T, N>(r, false));
      const V p = op(op(x, y), z), q = op(x, op(y, z));
      // Entries are at most N² in magnitude (entries below 1, three factors).
      const double scale = double(N) * N + N + 1;
      for (int i = 0; i < N; ++i) {
        CHECK(std::fabs(double(p.b[i]) - double(q.b[i])) <= tol * scale);
        for (int j = 0; j < N; ++j) CHECK(std::fabs(double(p.W[i][j]) - double(q.W[i][j])) <= tol * scale);
      }
    }
  }
  SECTION("identity on both sides, exactly") {
    const V e = op_t::identity();
    for (int i = 0; i < N; ++i) {
      CHECK(e.b[i] == S(0));
      for (int j = 0; j < N; ++j) CHECK(e.W[i][j] == S(i == j ? 1 : 0));
    }
    for (int rep = 0; rep < 50; ++rep) {
      const V x(random_matrix_affine<T, N>(r, false));
      CHECK(same(op(e, x), x));
      CHECK(same(op(x, e), x));
    }
  }
  SECTION("argument order: op(earlier, later) applies earlier first") {
    if constexpr (N == 2) {
      // earlier: W = [[1,1],[0,1]], b = (1,0); later: W = [[2,0],[0,3]], b = (0,1).
      // later∘earlier: W = [[2,2],[0,3]], b = later.W·(1,0) + (0,1) = (2,1).
      // The swapped order would give W = [[2,3],[0,3]].
      V E, L;
      E.W[0][0] = 1, E.W[0][1] = 1, E.W[1][0] = 0, E.W[1][1] = 1, E.b[0] = 1, E.b[1] = 0;
      L.W[0][0] = 2, L.W[0][1] = 0, L.W[1][0] = 0, L.W[1][1] = 3, L.b[0] = 0, L.b[1] = 1;
      const V c = op(E, L);
      CHECK(c.W[0][0] == 2);
      CHECK(c.W[0][1] == 2);
      CHECK(c.W[1][0] == 0);
      CHECK(c.W[1][1] == 3);
      CHECK(c.b[0] == 2);
      CHECK(c.b[1] == 1);
    }
    // On integer data: op(E, L) applied to x equals L(E(x)), exactly.
    for (int rep = 0; rep < 20; ++rep) {
      const V E(random_matrix_affine<T, N>(r, true)), L(random_matrix_affine<T, N>(r, true));
      std::vector<double> x(N);
      for (double& v : x) v = static_cast<double>(r.small_int(-3, 3));
      CHECK(apply(op(E, L), x) == apply(L, apply(E, x)));
    }
  }
}

}  // namespace

// One test case per instantiation: each runs every SECTION of its checks.
TEST_CASE("matrix_product_op<float, 2>", "[ops][matrix]") { matrix_product_checks<float, 2>("float"); }
TEST_CASE("matrix_product_op<float, 3>", "[ops][matrix]") { matrix_product_checks<float, 3>("float"); }
TEST_CASE("matrix_product_op<float, 4>", "[ops][matrix]") { matrix_product_checks<float, 4>("float"); }
TEST_CASE("matrix_product_op<float, 8>", "[ops][matrix]") { matrix_product_checks<float, 8>("float"); }
TEST_CASE("matrix_product_op<double, 2>", "[ops][matrix]") { matrix_product_checks<double, 2>("double"); }
TEST_CASE("matrix_product_op<double, 3>", "[ops][matrix]") { matrix_product_checks<double, 3>("double"); }
TEST_CASE("matrix_product_op<double, 8>", "[ops][matrix]") { matrix_product_checks<double, 8>("double"); }
TEST_CASE("matrix_product_op<bfloat16, 2>", "[ops][matrix]") { matrix_product_checks<parscan::bfloat16, 2>("bfloat16"); }
TEST_CASE("matrix_product_op<bfloat16, 3>", "[ops][matrix]") { matrix_product_checks<parscan::bfloat16, 3>("bfloat16"); }
TEST_CASE("matrix_product_op<bfloat16, 4>", "[ops][matrix]") { matrix_product_checks<parscan::bfloat16, 4>("bfloat16"); }
TEST_CASE("matrix_product_op<bfloat16, 8>", "[ops][matrix]") { matrix_product_checks<parscan::bfloat16, 8>("bfloat16"); }
TEST_CASE("matrix_affine_op<float, 2>", "[ops][matrix]") { matrix_affine_checks<float, 2>("float"); }
TEST_CASE("matrix_affine_op<float, 3>", "[ops][matrix]") { matrix_affine_checks<float, 3>("float"); }
TEST_CASE("matrix_affine_op<float, 4>", "[ops][matrix]") { matrix_affine_checks<float, 4>("float"); }
TEST_CASE("matrix_affine_op<float, 8>", "[ops][matrix]") { matrix_affine_checks<float, 8>("float"); }
TEST_CASE("matrix_affine_op<double, 2>", "[ops][matrix]") { matrix_affine_checks<double, 2>("double"); }
TEST_CASE("matrix_affine_op<double, 8>", "[ops][matrix]") { matrix_affine_checks<double, 8>("double"); }
TEST_CASE("matrix_affine_op<bfloat16, 2>", "[ops][matrix]") { matrix_affine_checks<parscan::bfloat16, 2>("bfloat16"); }
TEST_CASE("matrix_affine_op<bfloat16, 3>", "[ops][matrix]") { matrix_affine_checks<parscan::bfloat16, 3>("bfloat16"); }
TEST_CASE("matrix_affine_op<bfloat16, 4>", "[ops][matrix]") { matrix_affine_checks<parscan::bfloat16, 4>("bfloat16"); }
TEST_CASE("matrix_affine_op<bfloat16, 8>", "[ops][matrix]") { matrix_affine_checks<parscan::bfloat16, 8>("bfloat16"); }

TEST_CASE("matrix storage converts between bfloat16 and float", "[ops][matrix][numeric]") {
  parscan::matrix<float, 3> f;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) f.m[i][j] = static_cast<float>(3 * i + j) - 4.0f;  // small integers: exact
  f.m[2][2] = 1.00390625f;                                                        // a bfloat16 tie: rounds to 1
  const parscan::matrix<parscan::bfloat16, 3> b(f);
  const parscan::matrix<float, 3> back(b);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) CHECK(back.m[i][j] == (i == 2 && j == 2 ? 1.0f : f.m[i][j]));
}

// =============================================================================================
// log_affine_op

namespace {

template <class T>
bool same_bits(T x, T y) {
  return std::memcmp(&x, &y, sizeof(T)) == 0;
}

template <class T>
bool same(const parscan::log_affine<T>& x, const parscan::log_affine<T>& y) {
  return same_bits(x.log_a, y.log_a) && same_bits(x.log_b, y.log_b) && x.neg_a == y.neg_a && x.neg_b == y.neg_b;
}

template <class T>
void log_affine_checks(const char* type_name) {
  using op_t = parscan::log_affine_op<T>;
  using V = typename op_t::value_type;
  static_assert(std::is_same<V, parscan::log_affine<T>>::value, "value_type");
  const op_t op;
  const T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const bool is_float = std::is_same<T, float>::value;
  INFO("log_affine_op<" << type_name << ">");
  PARSCAN_TEST_RNG(r, std::string("log_affine_op ") + type_name);

  // A random signed map with |a| in (0.5, 1.5), |b| in (0.1, 1).
  const auto draw_linear = [&](double& a, double& b) {
    a = r.uniform(0.5, 1.5) * (r.coin() ? -1 : 1);
    b = r.uniform(0.1, 1.0) * (r.coin() ? -1 : 1);
    return V::from_linear(static_cast<T>(a), static_cast<T>(b));
  };

  SECTION("from_linear and back") {
    for (int rep = 0; rep < 200; ++rep) {
      double a, b;
      const V v = draw_linear(a, b);
      CHECK(v.neg_a == (a < 0));
      CHECK(v.neg_b == (b < 0));
      CHECK(std::fabs(double(v.a()) - double(T(a))) <= (is_float ? 1e-6 : 1e-14) * std::fabs(a));
      CHECK(std::fabs(double(v.b()) - double(T(b))) <= (is_float ? 1e-6 : 1e-14) * std::fabs(b));
    }
    const V z = V::from_linear(T(0), T(0));
    CHECK(z.log_a == -inf);
    CHECK(z.log_b == -inf);
    CHECK(z.a() == T(0));
    CHECK(z.b() == T(0));
  }
  SECTION("matches linear affine composition on signed values") {
    for (int rep = 0; rep < 100; ++rep) {
      V acc = op_t::identity();
      double A = 1, B = 0, B_bound = 0;  // linear composition in double, and Σ|terms| for the tolerance
      for (int i = 0; i < 16; ++i) {
        double a, b;
        const V step = draw_linear(a, b);
        a = double(T(a)), b = double(T(b));
        B = a * B + b;
        B_bound = std::fabs(a) * B_bound + std::fabs(b);
        A = a * A;
        acc = op(acc, step);
      }
      const double tol = is_float ? 2e-5 : 1e-12;
      CHECK(std::fabs(double(acc.a()) - A) <= tol * std::fabs(A));
      CHECK(std::fabs(double(acc.b()) - B) <= tol * B_bound);
      CHECK(acc.neg_a == (A < 0));
    }
  }
  SECTION("associative within tolerance") {
    for (int rep = 0; rep < 300; ++rep) {
      double a, b;
      const V x = draw_linear(a, b), y = draw_linear(a, b), z = draw_linear(a, b);
      const V p = op(op(x, y), z), q = op(x, op(y, z));
      const double tol = is_float ? 1e-5 : 1e-13;
      CHECK(p.neg_a == q.neg_a);
      CHECK(std::fabs(double(p.log_a) - double(q.log_a)) <= tol);
      // b compared in linear space relative to the size of its terms (it may cancel).
      const double bound = std::exp(double(z.log_a) + double(y.log_a) + double(x.log_b)) +
                           std::exp(double(z.log_a) + double(y.log_b)) + std::exp(double(z.log_b));
      CHECK(std::fabs(double(p.b()) - double(q.b())) <= 10 * tol * bound);
    }
  }
  SECTION("identity on both sides, exactly") {
    const V e = op_t::identity();
    CHECK(e.log_a == T(0));
    CHECK(e.log_b == -inf);
    CHECK(e.a() == T(1));
    CHECK(e.b() == T(0));
    for (int rep = 0; rep < 200; ++rep) {
      double a, b;
      const V x = draw_linear(a, b);
      CHECK(same(op(e, x), x));
      CHECK(same(op(x, e), x));
    }
  }
  SECTION("argument order: op(earlier, later) is later after earlier") {
    // earlier: x ↦ 2x + 3; later: x ↦ 5x − 7. later∘earlier = 10x + 8; swapped: 10x − 11.
    const V c = op(V::from_linear(T(2), T(3)), V::from_linear(T(5), T(-7)));
    CHECK(!c.neg_a);
    CHECK(!c.neg_b);
    CHECK(std::fabs(double(c.a()) - 10.0) <= 1e-5);
    CHECK(std::fabs(double(c.b()) - 8.0) <= 1e-5);
    // A negative gate: earlier: x ↦ −2x + 3; later: x ↦ 5x + 7. later∘earlier = −10x + 22;
    // swapped: −2(5x + 7) + 3 = −10x − 11 (b's sign differs).
    const V d = op(V::from_linear(T(-2), T(3)), V::from_linear(T(5), T(7)));
    CHECK(d.neg_a);
    CHECK(!d.neg_b);
    CHECK(std::fabs(double(d.a()) + 10.0) <= 1e-5);
    CHECK(std::fabs(double(d.b()) - 22.0) <= 1e-5);
  }
  SECTION("a zero gate resets the state exactly") {
    for (int rep = 0; rep < 100; ++rep) {
      double a, b;
      V state = draw_linear(a, b);
      state.log_b = static_cast<T>(r.uniform(-50, 50));  // any finite state, however large
      const V reset = V::from_linear(T(0), static_cast<T>(r.signed_unit()));
      REQUIRE(reset.log_a == -inf);
      const V c = op(state, reset);
      CHECK(c.log_a == -inf);
      CHECK(same_bits(c.log_b, reset.log_b));
      CHECK(c.neg_b == reset.neg_b);
      CHECK(c.b() == reset.b());
      // ...and composing further maps after the reset forgets the state entirely (the sign of
      // a zero gate, neg_a, carries no information and is not compared).
      const V later = draw_linear(a, b);
      const V fresh = op(reset, later), after = op(c, later);
      CHECK(after.log_a == -inf);
      CHECK(same_bits(after.log_b, fresh.log_b));
      CHECK(after.neg_b == fresh.neg_b);
    }
  }
  SECTION("equal magnitudes of opposite sign cancel to an exact zero") {
    // earlier: b = 2; later: a = 1, b = −2: B = 1·2 − 2 = 0.
    const V c = op(V::from_linear(T(3), T(2)), V::from_linear(T(1), T(-2)));
    CHECK(c.log_b == -inf);
    CHECK(c.b() == T(0));
    // Any log values: the carried term later.log_a + earlier.log_b against an equal fresh term.
    for (int rep = 0; rep < 100; ++rep) {
      const T la = static_cast<T>(r.uniform(-20, 20)), lb = static_cast<T>(r.uniform(-20, 20));
      const bool sign = r.coin();
      const V earlier(T(0), false, lb, sign);
      const V later(la, false, la + lb, !sign);
      const V z = op(earlier, later);
      CHECK(z.log_b == -inf);
      CHECK(z.b() == T(0));
    }
  }
  SECTION("NaN propagates") {
    const V x = V::from_linear(T(0.5), T(-0.25));
    V nan_b = x;
    nan_b.log_b = nan;
    V nan_a = x;
    nan_a.log_a = nan;
    CHECK(std::isnan(op(nan_b, x).log_b));   // through the carried term
    CHECK(std::isnan(op(x, nan_b).log_b));   // through the fresh term
    CHECK(std::isnan(op(x, nan_a).log_b));   // later.a scales earlier.b
    CHECK(std::isnan(op(x, nan_a).log_a));
    CHECK(std::isnan(op(nan_a, x).log_a));
  }
  SECTION("huge magnitudes stay finite in log form") {
    const T big = is_float ? T(200) : T(700);  // e^200 overflows float, e^700·e^700 overflows double
    // earlier: a = e^big, b = e^big; later: a = e^big, b = −e^(−big).
    // A = e^(2·big); B = e^(2·big) − e^(−big): log B = 2·big (the small term is far below an ulp).
    const V earlier(big, false, big, false), later(big, false, -big, true);
    const V c = op(earlier, later);
    CHECK(std::isfinite(c.log_a));
    CHECK(std::isfinite(c.log_b));
    CHECK(c.log_a == 2 * big);
    CHECK(c.log_b == 2 * big);
    CHECK(!c.neg_b);
    // Near-cancellation at a huge scale: e^(2·big) − e^(2·big − 1) = e^(2·big)·(1 − e^−1).
    const V later2(big, false, 2 * big - 1, true);
    const V d = op(earlier, later2);
    CHECK(std::isfinite(d.log_b));
    CHECK(!d.neg_b);
    const double expected = 2.0 * double(big) + std::log1p(-std::exp(-1.0));
    CHECK(std::fabs(double(d.log_b) - expected) <= (is_float ? 1e-4 : 1e-12) * expected);
    // Tiny magnitudes: a = e^(−big) over 10 steps is e^(−10·big), far below the smallest normal.
    V acc = op_t::identity();
    const V tiny(-big, false, -big, true);
    for (int i = 0; i < 10; ++i) acc = op(acc, tiny);
    CHECK(std::isfinite(acc.log_a));
    CHECK(std::fabs(double(acc.log_a) + 10.0 * double(big)) <= (is_float ? 1e-4 : 1e-12) * 10.0 * double(big));
    CHECK(std::isfinite(acc.log_b));
    CHECK(acc.neg_b);
    // b = −e^−big·(1 + e^−big + …): log b = −big to within rounding.
    CHECK(std::fabs(double(acc.log_b) + double(big)) <= (is_float ? 1e-4 : 1e-12) * double(big));
    // Growth: 20 steps of a = e^big keep log A = 20·big and log B ≈ 19·big + log(…) finite.
    V grow = op_t::identity();
    const V g(big, false, T(0), false);  // a = e^big, b = 1
    for (int i = 0; i < 20; ++i) grow = op(grow, g);
    CHECK(std::isfinite(grow.log_a));
    CHECK(std::isfinite(grow.log_b));
    CHECK(std::fabs(double(grow.log_a) - 20.0 * double(big)) <= (is_float ? 1e-5 : 1e-13) * 20.0 * double(big));
    CHECK(std::fabs(double(grow.log_b) - 19.0 * double(big)) <= (is_float ? 1e-4 : 1e-12) * 20.0 * double(big));
  }
}

}  // namespace

TEST_CASE("log_affine_op<float>", "[ops][log_affine]") { log_affine_checks<float>("float"); }
TEST_CASE("log_affine_op<double>", "[ops][log_affine]") { log_affine_checks<double>("double"); }

TEST_CASE("signed_log_add edge cases", "[ops][log_affine]") {
  using sl = parscan::signed_log<double>;
  const double inf = std::numeric_limits<double>::infinity();
  // 0 + 0 = 0; 0 + x = x; inf − inf = NaN; inf + inf = inf.
  CHECK(parscan::signed_log_add(sl{-inf, false}, sl{-inf, true}).log_mag == -inf);
  const sl x = parscan::signed_log_add(sl{-inf, false}, sl{1.5, true});
  CHECK(x.log_mag == 1.5);
  CHECK(x.neg);
  CHECK(std::isnan(parscan::signed_log_add(sl{inf, false}, sl{inf, true}).log_mag));
  CHECK(parscan::signed_log_add(sl{inf, false}, sl{inf, false}).log_mag == inf);
  // e^1 + e^1 = e^(1 + log 2); e^2 − e^1 = e^1·(e − 1), sign of the larger.
  CHECK(std::fabs(parscan::signed_log_add(sl{1.0, false}, sl{1.0, false}).log_mag - (1.0 + std::log(2.0))) <= 1e-15);
  const sl d = parscan::signed_log_add(sl{1.0, false}, sl{2.0, true});
  CHECK(d.neg);
  CHECK(std::fabs(d.log_mag - (1.0 + std::log(std::exp(1.0) - 1.0))) <= 1e-14);
}

TEST_CASE("log_affine_bits_op equals log_affine_op<float>, chains included", "[ops][log_affine]") {
  // The log-space recurrences' accumulator (signs as bit masks) on the host: the same values as
  // log_affine_op<float>, with b's sign read as log_affine_op gives it (zero and NaN positive),
  // over random maps with zeros, infinities and NaN among them. The GPU test
  // test/ops/signed_log_add_test.cu runs the same comparison on the device's arithmetic.
  using la = parscan::log_affine<float>;
  using bits = parscan::detail::log_affine_bits;
  PARSCAN_TEST_RNG(r, "log_affine_bits host");
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float special[] = {-inf, inf, nan, 0.0f, 1.0f};
  const auto magnitude = [&] {
    return r.unit() < 0.1 ? special[r.small_int(0, 4)] : static_cast<float>(r.uniform(-3.0, 1.0));
  };
  const auto same_value = [](float x, float y) { return (x != x && y != y) || same_bits(x, y); };
  int differ = 0;
  for (int rep = 0; rep < 2000; ++rep) {
    la p(magnitude(), r.coin(), magnitude(), r.coin());
    bits q(p.log_a, p.neg_a, p.log_b, p.neg_b);
    for (int k = 0; k < 40; ++k) {
      const la m(magnitude(), r.coin(), magnitude(), r.coin());
      p = parscan::log_affine_op<float>{}(p, m);
      q = parscan::detail::log_affine_bits_op{}(q, bits(m.log_a, m.neg_a, m.log_b, m.neg_b));
      differ += !same_value(p.log_a, q.log_a) || !same_value(p.log_b, q.log_b) || p.neg_a != (q.sign_a != 0) ||
                p.neg_b != q.neg_b();
    }
  }
  CHECK(differ == 0);
  const bits id = parscan::detail::log_affine_bits_op::identity();
  const la lid = parscan::log_affine_op<float>::identity();
  CHECK((same_bits(id.log_a, lid.log_a) && same_bits(id.log_b, lid.log_b) && id.sign_a == 0 && id.sign_b == 0));
}

// =============================================================================================
// sum_op, max_op, min_op

namespace {

template <class T>
void sum_checks(rng& r) {
  const parscan::sum_op<T> op;
  CHECK(parscan::sum_op<T>::identity() == T(0));
  for (int rep = 0; rep < 500; ++rep) {
    const T x = static_cast<T>(r.small_int(-1000000, 1000000)), y = static_cast<T>(r.small_int(-1000000, 1000000)),
            z = static_cast<T>(r.small_int(-1000000, 1000000));
    CHECK(op(op(x, y), z) == op(x, op(y, z)));  // integer values: exact
    CHECK(op(parscan::sum_op<T>::identity(), x) == x);
    CHECK(op(x, parscan::sum_op<T>::identity()) == x);
    CHECK(op(x, y) == static_cast<T>(x + y));
  }
}

template <class T>
void max_min_checks(rng& r) {
  const parscan::max_op<T> mx;
  const parscan::min_op<T> mn;
  const T lo = parscan::max_op<T>::identity(), hi = parscan::min_op<T>::identity();
  if constexpr (std::numeric_limits<T>::has_infinity) {
    CHECK(lo == -std::numeric_limits<T>::infinity());
    CHECK(hi == std::numeric_limits<T>::infinity());
  } else {
    CHECK(lo == std::numeric_limits<T>::lowest());
    CHECK(hi == std::numeric_limits<T>::max());
  }
  std::vector<T> special{std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max(), T(0), T(1)};
  for (int rep = 0; rep < 500; ++rep) {
    const auto draw = [&] {
      return rep < 4 ? special[rep] : static_cast<T>(std::is_integral<T>::value ? double(r.small_int(-100, 100)) : r.normal(0, 100));
    };
    const T x = draw(), y = static_cast<T>(r.normal(0, 100)), z = static_cast<T>(r.normal(0, 100));
    CHECK(mx(mx(x, y), z) == mx(x, mx(y, z)));
    CHECK(mn(mn(x, y), z) == mn(x, mn(y, z)));
    CHECK(mx(lo, x) == x);
    CHECK(mx(x, lo) == x);
    CHECK(mn(hi, x) == x);
    CHECK(mn(x, hi) == x);
    CHECK(mx(x, y) == (x < y ? y : x));
    CHECK(mn(x, y) == (y < x ? y : x));
  }
}

}  // namespace

TEST_CASE("sum_op max_op min_op", "[ops][basic]") {
  PARSCAN_TEST_RNG(r, "basic ops");
  sum_checks<int>(r);
  sum_checks<std::int64_t>(r);
  sum_checks<float>(r);  // integers below 2^24 stay exact... the triple sums here stay below 2^22
  sum_checks<double>(r);
  max_min_checks<int>(r);
  max_min_checks<std::int64_t>(r);
  max_min_checks<float>(r);
  max_min_checks<double>(r);
}

// =============================================================================================
// bfloat16 and float16 conversions, checked from first principles.

namespace {

// The value of a non-negative bfloat16 / float16 bit pattern (magnitude index m), computed
// from the format's definition: subnormal f·2^(1−bias−p), normal (2^p + f)·2^(e−bias−p).
double bf16_value(std::uint32_t m) {
  const std::uint32_t e = m >> 7, f = m & 0x7fu;
  return e == 0 ? std::ldexp(double(f), -133) : std::ldexp(double(128 + f), int(e) - 134);
}
double fp16_value(std::uint32_t m) {
  const std::uint32_t e = m >> 10, f = m & 0x3ffu;
  return e == 0 ? std::ldexp(double(f), -24) : std::ldexp(double(1024 + f), int(e) - 25);
}

// Checks that magnitude index m is the round-to-nearest-even encoding of |x|: no neighbour
// is closer, a tie goes to the even index, and values from the overflow threshold up give
// the infinity index inf_m (whose value, as if the exponent went on, is value(inf_m)).
template <class Value>
bool is_nearest_even(double x, std::uint32_t m, std::uint32_t inf_m, Value value) {
  x = std::fabs(x);
  const double threshold = (value(inf_m - 1) + value(inf_m)) / 2;  // halfway to the next power of two
  if (x >= threshold) return m == inf_m;  // ties at the threshold round to the even inf index
  if (m >= inf_m) return false;
  const double d = std::fabs(value(m) - x);
  const auto no_better = [&](std::uint32_t n) {
    const double dn = std::fabs(value(n) - x);
    return d < dn || (d == dn && (m & 1u) == 0);
  };
  return (m == 0 || no_better(m - 1)) && no_better(m + 1);
}

}  // namespace

TEST_CASE("bfloat16 conversion", "[numeric][bfloat16]") {
  struct pattern {
    std::uint32_t f;
    std::uint16_t h;
    const char* what;
  };
  // bfloat16 is the top half of a float; rounding looks at the low 16 bits.
  const pattern cases[] = {
      {0x3F800000u, 0x3F80, "1 exactly"},
      {0x3F808000u, 0x3F80, "1 + 2^-8: tie, rounds to even (down)"},
      {0x3F818000u, 0x3F82, "1 + 3·2^-8: tie, rounds to even (up)"},
      {0x3F808001u, 0x3F81, "just above the tie: up"},
      {0x3F807FFFu, 0x3F80, "just below the tie: down"},
      {0xBF818000u, 0xBF82, "negative tie: to even, sign kept"},
      {0x7F7F7FFFu, 0x7F7F, "below the largest bfloat16's upper tie"},
      {0x7F7FFFFFu, 0x7F80, "largest float rounds past the largest bfloat16: +inf"},
      {0xFF7FFFFFu, 0xFF80, "most negative float: -inf"},
      {0x00000001u, 0x0000, "smallest float subnormal rounds to +0"},
      {0x00008000u, 0x0000, "subnormal tie rounds to even 0"},
      {0x00018000u, 0x0002, "subnormal tie rounds to even 2"},
      {0x00010000u, 0x0001, "smallest bfloat16 subnormal exactly"},
      {0x80000000u, 0x8000, "-0"},
      {0x7F800000u, 0x7F80, "+inf"},
      {0xFF800000u, 0xFF80, "-inf"},
      {0x40490FDBu, 0x4049, "pi rounds down (low half 0x0FDB)"},
      {0x3EAAAAABu, 0x3EAB, "1/3 rounds up (low half 0xAAAB)"},
  };
  for (const pattern& p : cases) {
    INFO(p.what);
    CHECK(parscan::bfloat16(float_from_bits(p.f)).bits == p.h);
  }
  // NaN stays NaN, including signalling NaNs whose payload sits in the low bits (plain
  // rounding would turn 0x7F800001 into +inf and 0xFFFFFFFF into +0).
  for (std::uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0xFFFFFFFFu, 0x7FFFFFFFu}) {
    INFO("NaN pattern " << nan);
    const std::uint16_t h = parscan::bfloat16(float_from_bits(nan)).bits;
    CHECK((h & 0x7F80u) == 0x7F80u);
    CHECK((h & 0x007Fu) != 0u);
    CHECK(std::isnan(float(parscan::bfloat16(float_from_bits(nan)))));
  }
  SECTION("every bfloat16 decodes to its value and round-trips") {
    for (std::uint32_t h = 0; h <= 0xFFFFu; ++h) {
      parscan::bfloat16 b;
      b.bits = static_cast<std::uint16_t>(h);
      const float f = b;
      const std::uint32_t m = h & 0x7FFFu;
      if (m > 0x7F80u) {
        CHECK(std::isnan(f));
        CHECK((parscan::bfloat16(f).bits & 0x7FFFu) > 0x7F80u);
        continue;
      }
      const double v = m == 0x7F80u ? std::numeric_limits<double>::infinity() : bf16_value(m);
      if (!(double(f) == ((h & 0x8000u) ? -v : v) && std::signbit(f) == bool(h & 0x8000u))) FAIL("bfloat16 " << h << " decodes to " << f);
      if (parscan::bfloat16(f).bits != h) FAIL("bfloat16 " << h << " does not round-trip");
    }
  }
  SECTION("random floats round to the nearest bfloat16, ties to even") {
    PARSCAN_TEST_RNG(r, "bfloat16 rounding");
    for (int i = 0; i < 200000; ++i) {
      std::uint32_t u = static_cast<std::uint32_t>(r.bits());
      if (i % 4 == 0) u = (u & ~0xFFFFu) | 0x8000u;  // force exact ties too
      const float f = float_from_bits(u);
      if (std::isnan(f)) continue;
      const std::uint16_t h = parscan::bfloat16(f).bits;
      if ((h >> 15) != (u >> 31)) FAIL("sign lost for float bits " << u);
      if (!is_nearest_even(double(f), h & 0x7FFFu, 0x7F80u, bf16_value)) FAIL("float bits " << u << " -> bfloat16 " << h);
    }
  }
}

TEST_CASE("float16 conversion", "[numeric][float16]") {
  struct pattern {
    float f;
    std::uint16_t h;
    const char* what;
  };
  const pattern cases[] = {
      {1.0f, 0x3C00, "1"},
      {-2.0f, 0xC000, "-2"},
      {1.0f + 0x1p-11f, 0x3C00, "1 + 2^-11: tie, to even (down)"},
      {1.0f + 3 * 0x1p-11f, 0x3C02, "1 + 3·2^-11: tie, to even (up)"},
      {1.0f + 0x1p-11f + 0x1p-23f, 0x3C01, "just above the tie: up"},
      {1.0f + 0x1p-11f - 0x1p-23f, 0x3C00, "just below the tie: down"},
      {0.333333343f, 0x3555, "1/3"},
      {65504.0f, 0x7BFF, "largest float16"},
      {65519.99609375f, 0x7BFF, "just below the overflow threshold"},
      {65520.0f, 0x7C00, "overflow threshold: tie, to even = +inf"},
      {1e6f, 0x7C00, "1e6 overflows to +inf"},
      {-1e6f, 0xFC00, "-1e6 overflows to -inf"},
      {0x1p-14f, 0x0400, "smallest normal"},
      {0x1p-24f, 0x0001, "smallest subnormal"},
      {1023 * 0x1p-24f, 0x03FF, "largest subnormal"},
      {1023.5f * 0x1p-24f, 0x0400, "tie between largest subnormal and smallest normal: to even"},
      {0x1p-25f, 0x0000, "half the smallest subnormal: tie, to even 0"},
      {0x1.000002p-25f, 0x0001, "just above that: up to the smallest subnormal"},
      {3 * 0x1p-25f, 0x0002, "1.5 × smallest subnormal: tie, to even 2"},
      {5 * 0x1p-25f, 0x0002, "2.5 × smallest subnormal: tie, to even 2"},
      {0x1p-26f, 0x0000, "quarter of the smallest subnormal: 0"},
      {-0x1p-26f, 0x8000, "negative underflow keeps the sign: -0"},
      {-0.0f, 0x8000, "-0"},
      {std::numeric_limits<float>::infinity(), 0x7C00, "+inf"},
      {-std::numeric_limits<float>::infinity(), 0xFC00, "-inf"},
  };
  for (const pattern& p : cases) {
    INFO(p.what);
    CHECK(parscan::float16(p.f).bits == p.h);
  }
  // NaN stays NaN, even when its payload is only in bits a float16 does not have.
  for (std::uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0xFFFFFFFFu}) {
    INFO("NaN pattern " << nan);
    const std::uint16_t h = parscan::float16(float_from_bits(nan)).bits;
    CHECK((h & 0x7C00u) == 0x7C00u);
    CHECK((h & 0x03FFu) != 0u);
  }
  // Decoding, from the format's definition.
  struct decoded {
    std::uint16_t h;
    float f;
  };
  const decoded dec[] = {{0x0001, 0x1p-24f},     {0x03FF, 1023 * 0x1p-24f}, {0x0400, 0x1p-14f}, {0x7BFF, 65504.0f},
                         {0x3555, 0.333251953125f}, {0x8001, -0x1p-24f},    {0xC000, -2.0f},    {0x3C00, 1.0f}};
  for (const decoded& d : dec) {
    INFO("float16 bits " << d.h);
    parscan::float16 h;
    h.bits = d.h;
    CHECK(float(h) == d.f);
  }
  {
    parscan::float16 h;
    h.bits = 0x8000;
    CHECK(float(h) == 0.0f);
    CHECK(std::signbit(float(h)));
    h.bits = 0x7C00;
    CHECK(float(h) == std::numeric_limits<float>::infinity());
    h.bits = 0xFC00;
    CHECK(float(h) == -std::numeric_limits<float>::infinity());
    h.bits = 0x7E00;
    CHECK(std::isnan(float(h)));
    h.bits = 0xFC01;
    CHECK(std::isnan(float(h)));
  }
  SECTION("every float16 decodes to its value and round-trips") {
    for (std::uint32_t h = 0; h <= 0xFFFFu; ++h) {
      parscan::float16 x;
      x.bits = static_cast<std::uint16_t>(h);
      const float f = x;
      const std::uint32_t m = h & 0x7FFFu;
      if (m > 0x7C00u) {
        CHECK(std::isnan(f));
        CHECK((parscan::float16(f).bits & 0x7FFFu) > 0x7C00u);
        continue;
      }
      const double v = m == 0x7C00u ? std::numeric_limits<double>::infinity() : fp16_value(m);
      if (!(double(f) == ((h & 0x8000u) ? -v : v) && std::signbit(f) == bool(h & 0x8000u))) FAIL("float16 " << h << " decodes to " << f);
      if (parscan::float16(f).bits != h) FAIL("float16 " << h << " does not round-trip");
    }
  }
  SECTION("random floats round to the nearest float16, ties to even") {
    PARSCAN_TEST_RNG(r, "float16 rounding");
    for (int i = 0; i < 200000; ++i) {
      std::uint32_t u = static_cast<std::uint32_t>(r.bits());
      // Mostly exponents in and around float16's range (2^-26 .. 2^17); some anywhere.
      if (i % 8 != 0) u = (u & 0x807FFFFFu) | (static_cast<std::uint32_t>(r.small_int(127 - 26, 127 + 17)) << 23);
      if (i % 4 == 0) u = (u & ~0x1FFFu) | 0x1000u;  // exact ties for normals
      const float f = float_from_bits(u);
      if (std::isnan(f)) continue;
      const std::uint16_t h = parscan::float16(f).bits;
      if ((h >> 15) != (u >> 31)) FAIL("sign lost for float bits " << u);
      if (!is_nearest_even(double(f), h & 0x7FFFu, 0x7C00u, fp16_value)) FAIL("float bits " << u << " -> float16 " << h);
    }
  }
}
