// src/host/matrix_host.cpp — the matrix recurrence (a batch, or packed sequences) and matrix
// chains on the host backend: one sequential loop per sequence or chain, in compute precision
// (float for the 16-bit types), in a fixed order, so results are deterministic. It is also what
// CI checks the API against.
#include <algorithm>
#include <vector>

#include <parscan/matrix_recurrence.hpp>

#include "../common/matrix_args.hpp"
#include "varlen_segments.hpp"

namespace parscan {
namespace {

// Position of the i-th step computed, in the forward's processing order.
inline index_t step_at(index_t i, index_t n, bool reverse) { return reverse ? n - 1 - i : i; }

// y = W·v (transposed: y = Wᵀ·v) for one row-major N×N block of storage type T.
template <class C, class T>
void matvec(const T* W, const C* v, C* y, index_t N, bool transposed) {
  for (index_t i = 0; i < N; ++i) y[i] = C(0);
  for (index_t i = 0; i < N; ++i)
    for (index_t j = 0; j < N; ++j) {
      const C w = static_cast<C>(W[i * N + j]);
      if (transposed) y[j] += w * v[i];
      else y[i] += w * v[j];
    }
}

// The forward states of one sequence in processing order, in compute precision, with `write`
// called on each: x[t] = W[t]·x[t-1] + b[t].
template <class T, class C, class Write>
void run_forward(const T* W, const T* b, const detail::block_tensor& lW, const detail::block_tensor& lb,
                 index_t batch_index, index_t length, index_t N, bool reverse, const T* x0, std::vector<C>& state,
                 Write&& write) {
  std::vector<C> next(static_cast<std::size_t>(N));
  for (index_t i = 0; i < N; ++i) state[i] = x0 ? static_cast<C>(x0[batch_index * N + i]) : C(0);
  for (index_t k = 0; k < length; ++k) {
    const index_t t = step_at(k, length, reverse);
    matvec(W + lW.at(batch_index, t), state.data(), next.data(), N, false);
    const T* bt = b + lb.at(batch_index, t);
    for (index_t i = 0; i < N; ++i) state[i] = next[i] + static_cast<C>(bt[i]);
    write(k, t, state);
  }
}

template <class T>
void forward_sequences(const matrix_forward_args<T>& g, const detail::matrix_forward_plan& p) {
  using C = compute_t<T>;
  const index_t N = p.n;
  std::vector<C> state(static_cast<std::size_t>(N));
  for (index_t s = 0; s < p.batch; ++s) {
    run_forward(g.W, g.b, p.W, p.b, s, p.length, N, g.reverse, g.x0, state,
                [&](index_t, index_t t, const std::vector<C>& x) {
                  T* xt = g.x + p.x.at(s, t);  // b[t] was read above: x == b is safe
                  for (index_t i = 0; i < N; ++i) xt[i] = static_cast<T>(x[i]);
                });
    // x_final == x0 is safe: x0[s] was read before the loop.
    if (g.x_final)
      for (index_t i = 0; i < N; ++i) g.x_final[s * N + i] = static_cast<T>(state[i]);
  }
}

template <class T>
void backward_sequences(const matrix_backward_args<T>& g, const detail::matrix_backward_plan& p) {
  using C = compute_t<T>;
  const index_t N = p.n, L = p.length;
  const std::size_t n = static_cast<std::size_t>(N);
  std::vector<C> x_recomputed(g.x ? 0 : static_cast<std::size_t>(L) * n), state(n), grad(n), carried(n), x_before(n);
  for (index_t s = 0; s < p.batch; ++s) {
    if (!g.x)
      run_forward(g.W, g.b, p.W, p.b, s, L, N, g.reverse, g.x0, state, [&](index_t k, index_t, const std::vector<C>& x) {
        std::copy(x.begin(), x.end(), x_recomputed.begin() + static_cast<std::ptrdiff_t>(k) * N);
      });
    // x at processing position k, stored or recomputed; x0 (or 0) before the first.
    auto load_x = [&](index_t k, std::vector<C>& out) {
      for (index_t i = 0; i < N; ++i) {
        if (k < 0) out[i] = g.x0 ? static_cast<C>(g.x0[s * N + i]) : C(0);
        else if (g.x) out[i] = static_cast<C>(g.x[p.x.at(s, step_at(k, L, g.reverse)) + i]);
        else out[i] = x_recomputed[static_cast<std::size_t>(k * N + i)];
      }
    };
    // db after the last step: 0, with dx_final folded into the last step's g.
    for (index_t i = 0; i < N; ++i) carried[i] = g.dx_final ? static_cast<C>(g.dx_final[s * N + i]) : C(0);
    for (index_t k = L - 1; k >= 0; --k) {
      const index_t t = step_at(k, L, g.reverse);
      if (k == L - 1) std::fill(grad.begin(), grad.end(), C(0));
      else matvec(g.W + p.W.at(s, step_at(k + 1, L, g.reverse)), carried.data(), grad.data(), N, true);
      const T* dxt = g.dx + p.dx.at(s, t);
      for (index_t i = 0; i < N; ++i) grad[i] += static_cast<C>(dxt[i]) + (k == L - 1 ? carried[i] : C(0));
      load_x(k - 1, x_before);
      T* dbt = g.db + p.db.at(s, t);  // dx[t] was read above: db == dx is safe
      T* dWt = g.dW + p.dW.at(s, t);
      for (index_t i = 0; i < N; ++i) {
        dbt[i] = static_cast<T>(grad[i]);
        for (index_t j = 0; j < N; ++j) dWt[i * N + j] = static_cast<T>(grad[i] * x_before[j]);
      }
      std::swap(carried, grad);
    }
    if (g.x0) {  // dx0 = W[first]ᵀ·db[first]; with T = 0, dx_final (or 0) passes through
      if (L > 0) matvec(g.W + p.W.at(s, step_at(0, L, g.reverse)), carried.data(), grad.data(), N, true);
      const std::vector<C>& d0 = L > 0 ? grad : carried;
      for (index_t i = 0; i < N; ++i) g.dx0[s * N + i] = static_cast<T>(d0[i]);  // dx_final[s] already read
    }
  }
}

// r = l·e for d×d row-major blocks in compute precision (r must not alias l or e).
template <class C>
void matmul(const C* l, const C* e, C* r, index_t d) {
  std::fill(r, r + d * d, C(0));
  for (index_t i = 0; i < d; ++i)
    for (index_t k = 0; k < d; ++k) {
      const C lik = l[i * d + k];
      const C* ek = e + k * d;
      C* ri = r + i * d;
      for (index_t j = 0; j < d; ++j) ri[j] += lik * ek[j];
    }
}

template <class T>
void chain_products(const matrix_chain_args<T>& g, const detail::matrix_chain_plan& p) {
  using C = compute_t<T>;
  const index_t d = p.d, dd = d * d;
  const bool prefixes = g.output == chain_output::prefixes;
  std::vector<C> product(static_cast<std::size_t>(dd)), factor(product.size()), next(product.size());
  auto store = [&](T* out) {
    for (index_t i = 0; i < dd; ++i) out[i] = static_cast<T>(product[i]);
  };
  for (index_t s = 0; s < p.batch; ++s) {
    for (index_t k = 0; k < p.count; ++k) {
      const T* Mk = g.M + p.M.at(s, k);
      for (index_t i = 0; i < dd; ++i) factor[i] = static_cast<C>(Mk[i]);
      if (k == 0) {
        product.swap(factor);  // P_0 = M_0 in either order
      } else {
        if (g.order == chain_order::left_to_right) matmul(product.data(), factor.data(), next.data(), d);
        else matmul(factor.data(), product.data(), next.data(), d);
        product.swap(next);
      }
      if (prefixes) store(g.out + p.out.at(s, k));
    }
    if (!prefixes) {
      if (p.count == 0)  // the empty product
        for (index_t i = 0; i < dd; ++i) product[i] = C(i % (d + 1) == 0 ? 1 : 0);
      store(g.out + p.out.at(s, 0));
    }
  }
}

}  // namespace

template <class T>
status matrix_recurrence_forward(const host_backend&, const matrix_forward_args<T>& g) {
  detail::matrix_forward_plan p;
  if (status st = detail::plan_matrix_forward(g, p); st != status::success) return st;
  forward_sequences(g, p);
  return status::success;
}

template <class T>
status matrix_recurrence_backward(const host_backend&, const matrix_backward_args<T>& g) {
  detail::matrix_backward_plan p;
  if (status st = detail::plan_matrix_backward(g, p); st != status::success) return st;
  backward_sequences(g, p);
  return status::success;
}

// Packed sequences: each sequence the loops above on a view of its steps (one sequence of its
// length, its states at s·N), the sequences shared out over the threads.
namespace {
template <class Plan>
Plan sequence_view(const Plan& whole, index_t length) {
  Plan p = whole;
  p.batch = 1, p.length = length;
  return p;
}
}  // namespace

template <class T>
status matrix_recurrence_forward(const host_backend& be, const matrix_varlen_forward_args<T>& g) {
  detail::matrix_forward_plan whole;
  if (status st = detail::plan_matrix_varlen_forward(g, true, whole); st != status::success) return st;
  const matrix_varlen_shape& s = g.shape;
  const index_t N = s.n;
  host::detail::parallel_for(s.sequences, host_varlen::threads_for(be, s.total_length * N * N), [&](index_t q) {
    const index_t origin = s.cu_seqlens[q], length = s.cu_seqlens[q + 1] - origin;
    matrix_forward_args<T> one = detail::packed_matrix_forward(g);
    one.length = length;
    one.W = g.W + origin * whole.W.step_stride, one.b = g.b + origin * whole.b.step_stride;
    one.x = g.x + origin * whole.x.step_stride;
    one.x0 = host_varlen::shifted(g.x0, q * N), one.x_final = host_varlen::shifted(g.x_final, q * N);
    forward_sequences(one, sequence_view(whole, length));
  });
  return status::success;
}

template <class T>
status matrix_recurrence_backward(const host_backend& be, const matrix_varlen_backward_args<T>& g) {
  detail::matrix_backward_plan whole;
  if (status st = detail::plan_matrix_varlen_backward(g, true, whole); st != status::success) return st;
  const matrix_varlen_shape& s = g.shape;
  const index_t N = s.n;
  host::detail::parallel_for(s.sequences, host_varlen::threads_for(be, s.total_length * N * N), [&](index_t q) {
    const index_t origin = s.cu_seqlens[q], length = s.cu_seqlens[q + 1] - origin;
    matrix_backward_args<T> one = detail::packed_matrix_backward(g);
    one.length = length;
    one.W = g.W + origin * whole.W.step_stride;
    one.x = host_varlen::shifted(g.x, origin * whole.x.step_stride);
    one.b = host_varlen::shifted(g.b, origin * whole.b.step_stride);
    one.dx = g.dx + origin * whole.dx.step_stride;
    one.dW = g.dW + origin * whole.dW.step_stride, one.db = g.db + origin * whole.db.step_stride;
    one.x0 = host_varlen::shifted(g.x0, q * N), one.dx_final = host_varlen::shifted(g.dx_final, q * N);
    one.dx0 = host_varlen::shifted(g.dx0, q * N);
    backward_sequences(one, sequence_view(whole, length));
  });
  return status::success;
}

template <class T>
status matrix_chain(const host_backend&, const matrix_chain_args<T>& g) {
  detail::matrix_chain_plan p;
  if (status st = detail::plan_matrix_chain(g, p); st != status::success) return st;
  chain_products(g, p);  // chain_math's tensor-core modes are a permission the host does not use
  return status::success;
}

#define PARSCAN_INSTANTIATE_MATRIX_HOST(T)                                                             \
  template status matrix_recurrence_forward<T>(const host_backend&, const matrix_forward_args<T>&);   \
  template status matrix_recurrence_backward<T>(const host_backend&, const matrix_backward_args<T>&); \
  template status matrix_chain<T>(const host_backend&, const matrix_chain_args<T>&);               \
  template status matrix_recurrence_forward<T>(const host_backend&, const matrix_varlen_forward_args<T>&); \
  template status matrix_recurrence_backward<T>(const host_backend&, const matrix_varlen_backward_args<T>&);
PARSCAN_INSTANTIATE_MATRIX_HOST(float)
PARSCAN_INSTANTIATE_MATRIX_HOST(double)
PARSCAN_INSTANTIATE_MATRIX_HOST(bfloat16)
PARSCAN_INSTANTIATE_MATRIX_HOST(float16)
#undef PARSCAN_INSTANTIATE_MATRIX_HOST

}  // namespace parscan
