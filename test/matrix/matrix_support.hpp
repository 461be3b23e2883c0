// test/matrix/matrix_support.hpp — guarded (B, T, block) tensors in backend memory for the
// matrix-recurrence and matrix-chain tests, in the storage arrangements the cases use, and the
// checks of what a call wrote. Backend-neutral: memory comes from support/env.hpp.
#pragma once

#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/env.hpp"

#include "matrix/matrix_reference.hpp"

namespace mtx_test {

using parscan::batch_strides;
using parscan::status;
using parscan_test::guarded_buffer;

/// How a (B, T, block) tensor sits in memory: always a view of some larger allocation.
enum class arrangement {
  dense,        // packed; strides passed as -1 (the API's "dense")
  dense_given,  // packed; the same strides passed explicitly
  padded,       // step = block + 3, batch = T·(block + 3) + 5: a slice of a wider tensor
  batch_inner,  // batch stride = block + 1, step = B·(block + 1) + 2: a (T, B, block) tensor
  shared_step,  // step stride 0 (one block for every step), batch = block + 2; inputs only
};
inline const char* name(arrangement a) {
  switch (a) {
    case arrangement::dense: return "dense";
    case arrangement::dense_given: return "dense_given";
    case arrangement::padded: return "padded";
    case arrangement::batch_inner: return "batch_inner";
    case arrangement::shared_step: return "shared_step";
  }
  return "?";
}

struct geometry {
  index_t B = 0, T = 0, K = 0;  // K: block size (N, N·N or d·d)
  index_t batch = 0, step = 0;  // resolved element strides
  batch_strides api{};          // what the call is given (-1 for dense)
  index_t off(index_t b, index_t t) const { return b * batch + t * step; }
  /// One past the largest offset (0 when empty).
  index_t span() const { return B * T * K == 0 ? 0 : off(B - 1, T - 1) + K; }
};

inline geometry make_geometry(arrangement a, index_t B, index_t T, index_t K) {
  geometry g{B, T, K, 0, 0, {}};
  switch (a) {
    case arrangement::dense:
    case arrangement::dense_given: g.step = K, g.batch = T * K; break;
    case arrangement::padded: g.step = K + 3, g.batch = T * (K + 3) + 5; break;
    case arrangement::batch_inner: g.batch = K + 1, g.step = B * (K + 1) + 2; break;
    case arrangement::shared_step: g.step = 0, g.batch = K + 2; break;
  }
  g.api = a == arrangement::dense ? batch_strides{} : batch_strides{g.batch, g.step};
  return g;
}
/// A dense (B, K) state array (x0, x_final, dx_final, dx0).
inline geometry state_geometry(index_t B, index_t K) { return make_geometry(arrangement::dense, B, 1, K); }

/// The poison byte: 0xFF for float16 (a NaN; the default 0xA5A5 is the ordinary value -0.022).
template <class T> inline unsigned char poison_for() {
  return std::is_same<T, parscan::float16>::value ? 0xFF : parscan_test::poison_byte;
}

/// A guarded buffer holding `misalign` leading elements and then the geometry's span. An
/// input holds `values` (canonical order (b·T + t)·K + k) with NaN in every element it does
/// not address, so reading a hole shows in the result; an output starts entirely poison.
template <class T>
class tensor {
 public:
  tensor() = default;
  tensor(const geometry& g, const std::vector<T>* values, index_t misalign = 0)
      : g_(g), mis_(misalign),
        buf_(std::make_unique<guarded_buffer<T>>(static_cast<std::size_t>(misalign + g.span()),
                                                 guarded_buffer<T>::default_guard, poison_for<T>())) {
    const std::size_t n = buf_->size();
    if (values) {
      // With a step stride of 0 every step shares one block: the values of step 0 are used.
      image_.assign(n, from_d<T>(std::numeric_limits<double>::quiet_NaN()));
      for (index_t b = g.B - 1; b >= 0; --b)
        for (index_t t = g.T - 1; t >= 0; --t)
          for (index_t k = 0; k < g.K; ++k)
            image_[static_cast<std::size_t>(mis_ + g.off(b, t) + k)] = (*values)[static_cast<std::size_t>((b * g.T + t) * g.K + k)];
      buf_->upload(image_);
    } else {
      image_.resize(n);
      if (n) std::memset(static_cast<void*>(image_.data()), poison_for<T>(), n * sizeof(T));
    }
  }

  explicit operator bool() const { return buf_ != nullptr; }
  T* ptr() const { return buf_ ? buf_->data() + mis_ : nullptr; }
  const geometry& geom() const { return g_; }
  const batch_strides& strides() const { return g_.api; }

  /// Downloads the payload; the accessors below read this copy.
  void fetch() { got_ = buf_->download(); }
  /// The addressed elements of the fetched payload, canonical order.
  std::vector<T> values() const {
    std::vector<T> v(static_cast<std::size_t>(g_.B * g_.T * g_.K));
    for (index_t b = 0; b < g_.B; ++b)
      for (index_t t = 0; t < g_.T; ++t)
        for (index_t k = 0; k < g_.K; ++k)
          v[static_cast<std::size_t>((b * g_.T + t) * g_.K + k)] = got_[static_cast<std::size_t>(mis_ + g_.off(b, t) + k)];
    return v;
  }
  dvec dvalues() const { return to_dvec(values()); }
  /// Addressed elements still bit-identical to poison (never written).
  index_t unwritten() const {
    index_t n = 0;
    for (index_t b = 0; b < g_.B; ++b)
      for (index_t t = 0; t < g_.T; ++t)
        for (index_t k = 0; k < g_.K; ++k) n += buf_->is_poison(got_[static_cast<std::size_t>(mis_ + g_.off(b, t) + k)]);
    return n;
  }
  /// Elements the geometry does not address whose bytes changed (writes outside the tensor).
  index_t stray_writes() const {
    std::vector<char> covered(got_.size(), 0);
    for (index_t b = 0; b < g_.B; ++b)
      for (index_t t = 0; t < g_.T; ++t)
        for (index_t k = 0; k < g_.K; ++k) covered[static_cast<std::size_t>(mis_ + g_.off(b, t) + k)] = 1;
    return static_cast<index_t>(parscan_test::stray_changes(got_, image_, covered));
  }
  /// The whole payload is bit-identical to what it held before the call.
  bool unchanged() const { return parscan_test::bit_identical(got_, image_); }
  bool guards_intact() const { return buf_->guards_intact(); }

 private:
  geometry g_{};
  index_t mis_ = 0;
  std::unique_ptr<guarded_buffer<T>> buf_;
  std::vector<T> image_, got_;
};

/// CHECKs that an output was entirely written (unless `full` is false: in place), nothing
/// around it was, and its guards hold. Returns its values as float64.
template <class T>
dvec check_written(tensor<T>& t, const char* what, bool full = true) {
  t.fetch();
  INFO("output " << what);
  if (full) CHECK(t.unwritten() == 0);
  CHECK(t.stray_writes() == 0);
  CHECK(t.guards_intact());
  return t.dvalues();
}
/// CHECKs that a tensor (an input, or an output that must not be written) is bit-identical
/// to before the call, guards included.
template <class T>
void check_unchanged(tensor<T>& t, const char* what) {
  if (!t) return;
  t.fetch();
  INFO(what << " must be unchanged");
  CHECK(t.unchanged());
  CHECK(t.guards_intact());
}

/// CHECKs max|got − ref| / max|ref| ≤ tol and returns the error. With `scale` > 0 the error is
/// relative to max(max|ref|, scale): for a few elements (a carried state) whose natural scale
/// is that of the tensor they came from.
inline double check_close(const char* what, const dvec& got, const dvec& ref, double tol, double scale = 0) {
  double err = rel_error(got, ref);
  double m = 0;
  for (double r : ref) m = std::max(m, std::abs(r));
  if (scale > m && std::isfinite(err)) err = m > 0 ? err * m / scale : err / scale;
  INFO(what << ": max|got - ref| / max|ref| = " << err << " (tolerance " << tol << ", " << ref.size() << " elements)");
  CHECK(err <= tol);
  return err;
}

inline double max_abs(const dvec& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::abs(e));
  return m;
}

}  // namespace mtx_test
