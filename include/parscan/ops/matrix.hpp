// parscan/ops/matrix.hpp — small compile-time N×N matrices: the matrix affine map
// x ↦ W·x + b for non-diagonal recurrences, and the plain matrix product for chains.
// Matrices are row-major; storage may be a 16-bit type, arithmetic is then float.
#pragma once

#include "../config.hpp"
#include "../numeric.hpp"

namespace parscan {

template <class T, int N>
struct matrix {
  static_assert(N >= 1 && N <= 32, "parscan::matrix supports N = 1..32");
  T m[N][N];
  matrix() = default;
  template <class U>
  PARSCAN_HD PARSCAN_INLINE matrix(const matrix<U, N>& o) {
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j) m[i][j] = static_cast<T>(o.m[i][j]);
  }
  static PARSCAN_HD PARSCAN_INLINE matrix identity() {
    matrix r;
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j) r.m[i][j] = T(i == j ? 1 : 0);
    return r;
  }
};

/// x ↦ W·x + b with W an N×N matrix and b an N-vector.
template <class T, int N>
struct matrix_affine {
  static_assert(N >= 1 && N <= 32, "parscan::matrix_affine supports N = 1..32");
  T W[N][N];
  T b[N];
  matrix_affine() = default;
  template <class U>
  PARSCAN_HD PARSCAN_INLINE matrix_affine(const matrix_affine<U, N>& o) {
    for (int i = 0; i < N; ++i) {
      b[i] = static_cast<T>(o.b[i]);
      for (int j = 0; j < N; ++j) W[i][j] = static_cast<T>(o.W[i][j]);
    }
  }
};

namespace detail {
// r = l · e, written so r may not alias its inputs.
template <class T, int N>
PARSCAN_HD PARSCAN_INLINE void matmul(T (&r)[N][N], const T (&l)[N][N], const T (&e)[N][N]) {
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      T s = l[i][0] * e[0][j];
      for (int k = 1; k < N; ++k) s = s + l[i][k] * e[k][j];
      r[i][j] = s;
    }
}
}  // namespace detail

/// op(earlier, later) = later ∘ earlier: (later.W·earlier.W, later.W·earlier.b + later.b).
/// Identity: (I, 0). Associative, not commutative.
template <class T, int N>
struct matrix_affine_op {
  using scalar_type = compute_t<T>;
  using value_type = matrix_affine<scalar_type, N>;
  PARSCAN_HD PARSCAN_INLINE value_type operator()(const value_type& earlier, const value_type& later) const {
    value_type r;
    detail::matmul<scalar_type, N>(r.W, later.W, earlier.W);
    for (int i = 0; i < N; ++i) {
      scalar_type s = later.b[i];
      for (int k = 0; k < N; ++k) s = s + later.W[i][k] * earlier.b[k];
      r.b[i] = s;
    }
    return r;
  }
  static PARSCAN_HD PARSCAN_INLINE value_type identity() {
    value_type r;
    for (int i = 0; i < N; ++i) {
      r.b[i] = scalar_type(0);
      for (int j = 0; j < N; ++j) r.W[i][j] = scalar_type(i == j ? 1 : 0);
    }
    return r;
  }
};

/// Matrix-chain product in left-to-right order: op(earlier, later) = earlier · later, so an
/// inclusive scan gives P_k = M_0·M_1·…·M_k. Identity: I.
template <class T, int N>
struct matrix_product_op {
  using scalar_type = compute_t<T>;
  using value_type = matrix<scalar_type, N>;
  PARSCAN_HD PARSCAN_INLINE value_type operator()(const value_type& earlier, const value_type& later) const {
    value_type r;
    detail::matmul<scalar_type, N>(r.m, earlier.m, later.m);
    return r;
  }
  static PARSCAN_HD PARSCAN_INLINE value_type identity() { return value_type::identity(); }
};

}  // namespace parscan
