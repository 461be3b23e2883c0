// test/recurrence/recurrence_support.hpp — helpers for the gated-recurrence tests
// (recurrence_cases.inl): storage arrangements, guarded tensors in backend memory, and the
// forward / backward / chunked runners that call the library, check what it wrote, and
// compare it with the float64 reference in recurrence_reference.hpp.
//
// Backend-neutral: memory and the backend come from support/env.hpp, so the same code runs
// on the host backend (g++) and the CUDA backend (nvcc, PARSCAN_TEST_CUDA=1).
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "support/env.hpp"
#include "support/random.hpp"

#include "recurrence/recurrence_reference.hpp"

namespace rec_test {

using parscan::gate_form;
using parscan::recurrence_layout;
using parscan::recurrence_shape;
using parscan::recurrence_strides;
using parscan::status;
using parscan_test::guarded_buffer;

// ---------------------------------------------------------------------------------------
// Storage arrangements of a (B, D, T) tensor.

enum class arrangement {
  tc,      // dense (B, D, T)
  cl,      // dense (B, T, D)
  pad_tc,  // time stride 1, channel stride T+5, batch stride D·(T+5)+7
  pad_cl,  // channel stride 1, time stride D+3, batch stride T·(D+3)+2
  perm,    // batch innermost: batch stride 1, time stride B+2, channel stride (B+2)·T+3
};

struct geometry {
  index_t B = 0, D = 0, T = 0;
  recurrence_strides s{};
  index_t off(index_t b, index_t d, index_t t) const { return b * s.batch + d * s.channel + t * s.time; }
  index_t count() const { return B * D * T; }
  /// One past the largest offset (0 when empty).
  index_t span() const { return count() == 0 ? 0 : off(B - 1, D - 1, T - 1) + 1; }
};

inline geometry make_geometry(arrangement a, index_t B, index_t D, index_t T) {
  geometry g{B, D, T, {}};
  switch (a) {
    case arrangement::tc: g.s = {D * T, T, 1}; break;
    case arrangement::cl: g.s = {T * D, 1, D}; break;
    case arrangement::pad_tc: g.s = {D * (T + 5) + 7, T + 5, 1}; break;
    case arrangement::pad_cl: g.s = {T * (D + 3) + 2, 1, D + 3}; break;
    case arrangement::perm: g.s = {1, (B + 2) * T + 3, B + 2}; break;
  }
  return g;
}
/// A dense (B, D) state vector (x0, x_final, dx_final, dx0): element b·D + d.
inline geometry dense_geometry(index_t n) { return geometry{1, n, 1, {n, 1, 1}}; }

/// How a case lays out its tensors: the two dense layouts, or recurrence_layout::strided
/// with a different padded or permuted arrangement for each tensor (s1, s2), or pad_tc for
/// all (s3: time stride 1, sequences starting at every alignment whatever T).
enum class lay { tc, cl, s1, s2, s3 };
inline const char* name(lay l) {
  return l == lay::tc   ? "time_contiguous"
         : l == lay::cl ? "channel_last"
         : l == lay::s1 ? "strided1"
         : l == lay::s2 ? "strided2"
                        : "strided_time_contiguous";
}
inline recurrence_layout api_layout(lay l) {
  return l == lay::tc ? recurrence_layout::time_contiguous
         : l == lay::cl ? recurrence_layout::channel_last
                        : recurrence_layout::strided;
}
inline arrangement dense_arrangement(lay l) {
  return l == lay::cl ? arrangement::cl : l == lay::s3 ? arrangement::pad_tc : arrangement::tc;
}

struct fwd_arr { arrangement a, b, x; };
inline fwd_arr fwd_arrangements(lay l, bool x_is_b) {
  fwd_arr r{dense_arrangement(l), dense_arrangement(l), dense_arrangement(l)};
  if (l == lay::s1) r = {arrangement::pad_tc, arrangement::pad_cl, arrangement::perm};
  if (l == lay::s2) r = {arrangement::perm, arrangement::pad_tc, arrangement::pad_cl};
  if (x_is_b) r.x = r.b;
  return r;
}
struct bwd_arr { arrangement a, x, b, dx, da, db; };
inline bwd_arr bwd_arrangements(lay l, int in_place /*0, 1: db == dx, 2: da == dx*/) {
  const arrangement d = dense_arrangement(l);
  bwd_arr r{d, d, d, d, d, d};
  if (l == lay::s1)
    r = {arrangement::pad_tc, arrangement::perm, arrangement::pad_cl, arrangement::pad_cl, arrangement::perm,
         arrangement::pad_tc};
  if (l == lay::s2)
    r = {arrangement::perm, arrangement::pad_cl, arrangement::pad_tc, arrangement::perm, arrangement::pad_tc,
         arrangement::pad_cl};
  if (in_place == 1) r.db = r.dx;
  if (in_place == 2) r.da = r.dx;
  return r;
}

// ---------------------------------------------------------------------------------------
// A tensor in backend memory: a guarded_buffer holding `misalign` leading elements and then
// the geometry's span. Inputs: holes (elements the geometry does not address, and the
// misalignment) hold NaN, so reading one shows up in the result. Outputs: everything poison.

/// The poison byte for a dtype: 0xFF (a NaN no arithmetic produces) for float16, where the
/// default 0xA5A5 is the ordinary value -0.0220 that results do hit; the default otherwise.
template <class T> inline unsigned char poison_for() {
  return std::is_same<T, parscan::float16>::value ? 0xFF : parscan_test::poison_byte;
}

template <class T>
T nan_value() {
  const double n = std::numeric_limits<double>::quiet_NaN();
  if constexpr (scalar<T>::is_complex) return from_ref<T>(std::complex<double>(n, n));
  else return from_ref<T>(n);
}

template <class T>
class tensor {
 public:
  tensor() = default;
  /// An input holding `values` (canonical order (b·D + d)·T + t), or a poisoned output
  /// when values is null.
  tensor(const geometry& g, index_t misalign, const std::vector<T>* values)
      : g_(g), mis_(misalign),
        buf_(std::make_unique<guarded_buffer<T>>(static_cast<std::size_t>(misalign + g.span()),
                                                 guarded_buffer<T>::default_guard, poison_for<T>())) {
    const std::size_t n = buf_->size();
    if (values) {
      image_.assign(n, nan_value<T>());
      for (index_t b = 0; b < g.B; ++b)
        for (index_t d = 0; d < g.D; ++d)
          for (index_t t = 0; t < g.T; ++t)
            image_[static_cast<std::size_t>(mis_ + g.off(b, d, t))] =
                (*values)[static_cast<std::size_t>((b * g.D + d) * g.T + t)];
      buf_->upload(image_);
      output_ = false;
    } else {
      image_.resize(n);
      if (n) std::memset(static_cast<void*>(image_.data()), poison_for<T>(), n * sizeof(T));
      output_ = true;
    }
  }
  static tensor dense(index_t n, index_t misalign, const std::vector<T>* values) {
    return tensor(dense_geometry(n), misalign, values);
  }

  explicit operator bool() const { return buf_ != nullptr; }
  T* ptr() const { return buf_ ? buf_->data() + mis_ : nullptr; }
  const geometry& geom() const { return g_; }
  const recurrence_strides& strides() const { return g_.s; }

  /// Downloads the payload; the accessors below read this copy.
  void fetch() { got_ = buf_->download(); }
  const std::vector<T>& payload() const { return got_; }

  /// The addressed elements of the fetched payload, canonical order.
  std::vector<T> values() const {
    std::vector<T> v(static_cast<std::size_t>(g_.count()));
    for (index_t b = 0; b < g_.B; ++b)
      for (index_t d = 0; d < g_.D; ++d)
        for (index_t t = 0; t < g_.T; ++t)
          v[static_cast<std::size_t>((b * g_.D + d) * g_.T + t)] = got_[static_cast<std::size_t>(mis_ + g_.off(b, d, t))];
    return v;
  }
  /// Addressed elements still bit-identical to poison (never written); poisoned outputs only.
  index_t unwritten() const {
    index_t n = 0;
    for (index_t b = 0; b < g_.B; ++b)
      for (index_t d = 0; d < g_.D; ++d)
        for (index_t t = 0; t < g_.T; ++t)
          n += buf_->is_poison(got_[static_cast<std::size_t>(mis_ + g_.off(b, d, t))]) ? 1 : 0;
    return n;
  }
  /// Elements the geometry does not address whose bytes changed (writes outside the tensor).
  index_t stray_writes() const {
    std::vector<char> covered(got_.size(), 0);
    for (index_t b = 0; b < g_.B; ++b)
      for (index_t d = 0; d < g_.D; ++d)
        for (index_t t = 0; t < g_.T; ++t) covered[static_cast<std::size_t>(mis_ + g_.off(b, d, t))] = 1;
    return static_cast<index_t>(parscan_test::stray_changes(got_, image_, covered));
  }
  /// The whole payload is bit-identical to what it held before the call.
  bool unchanged() const { return parscan_test::bit_identical(got_, image_); }
  bool guards_intact() const { return buf_->guards_intact(); }
  bool is_output() const { return output_; }

 private:
  geometry g_{};
  index_t mis_ = 0;
  std::unique_ptr<guarded_buffer<T>> buf_;
  std::vector<T> image_, got_;
  bool output_ = false;
};

/// CHECKs that an output tensor was entirely written, nothing around it was, and its guards
/// hold. `full` is false for an in-place output, whose elements start as the input's.
template <class T>
void check_output_writes(tensor<T>& t, const char* what, bool full = true) {
  t.fetch();
  INFO("output " << what);
  if (full) CHECK(t.unwritten() == 0);
  CHECK(t.stray_writes() == 0);
  CHECK(t.guards_intact());
}
/// CHECKs that an input tensor (and its guards) is bit-identical to before the call.
template <class T>
void check_input_unchanged(tensor<T>& t, const char* what) {
  if (!t) return;
  t.fetch();
  INFO("input " << what << " must not be written");
  CHECK(t.unchanged());
  CHECK(t.guards_intact());
}
/// CHECKs that an output is untouched (an error return, or an output that must not be written).
template <class T>
void check_untouched(tensor<T>& t, const char* what) {
  if (!t) return;
  t.fetch();
  INFO("output " << what << " must be untouched");
  CHECK(t.unchanged());
  CHECK(t.guards_intact());
}

template <class T>
std::vector<ref_t<T>> to_ref_vec(const std::vector<T>& v) {
  std::vector<ref_t<T>> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = to_ref(v[i]);
  return r;
}
template <class T>
std::vector<T> from_ref_vec(const std::vector<ref_t<T>>& v) {
  std::vector<T> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = from_ref<T>(v[i]);
  return r;
}

/// max|ref| over a vector of reference values.
template <class R>
double max_abs(const std::vector<R>& v) {
  double m = 0;
  for (const R& e : v) m = std::max(m, static_cast<double>(std::abs(e)));
  return m;
}

/// CHECKs max|got − ref| / max|ref| ≤ tol; returns the error. With `scale` > 0 the error is
/// relative to max(max|ref|, scale) instead: for a few elements (a state carried between
/// chunks) whose natural scale is that of the whole tensor they came from.
template <class T>
double check_close(const char* what, const std::vector<T>& got, const std::vector<ref_t<T>>& ref,
                   double tol = scalar<T>::tol, double scale = 0) {
  double err = rel_error(got, ref);
  if (scale > 0) {
    const double m = max_abs(ref);
    if (std::isfinite(err) && scale > m) err = m > 0 ? err * m / scale : err / scale;
  }
  INFO(what << ": max|x - ref| / max|ref| = " << err << " (tolerance " << tol << ", " << ref.size()
            << " elements)");
  CHECK(err <= tol);
  return err;
}

/// The first index where two result vectors differ bitwise, or -1.
template <class T>
index_t first_bitwise_difference(const std::vector<T>& x, const std::vector<T>& y) {
  if (x.size() != y.size()) return 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::memcmp(&x[i], &y[i], sizeof(T)) != 0) return static_cast<index_t>(i);
  return -1;
}

// ---------------------------------------------------------------------------------------
// Forward.

struct fwd_opts {
  index_t B = 1, D = 1, T = 1;
  lay layout = lay::tc;
  bool x0 = false, xfinal = true, reverse = false, log = false;
  family fam = family::unit;
  index_t misalign = 0;
  index_t b_misalign = -1;  // b's own misalignment when ≥ 0 (x follows b when in place)
  bool in_place = false;    // x == b
  std::string str() const {
    std::ostringstream s;
    s << "B=" << B << " D=" << D << " T=" << T << " layout=" << name(layout) << " x0=" << x0 << " x_final=" << xfinal
      << " reverse=" << reverse << " gate=" << (log ? "log" : "linear") << " family=" << name(fam)
      << " misalign=" << misalign << " b_misalign=" << b_misalign << " in_place=" << in_place;
    return s.str();
  }
};

template <class T>
struct fwd_inputs {
  std::vector<T> a, b, x0;  // canonical; a as stored (log gates with gate_form::log)
};

template <class T>
fwd_inputs<T> draw_fwd_inputs(rng& r, const fwd_opts& o) {
  const std::size_t n = static_cast<std::size_t>(o.B * o.D * o.T), c = static_cast<std::size_t>(o.B * o.D);
  fwd_inputs<T> in;
  in.a.resize(n);
  in.b.resize(n);
  for (std::size_t i = 0; i < n; ++i) in.a[i] = draw_gate<T>(r, o.fam, o.log);
  fill_normal(r, in.b);
  if (o.x0) {
    in.x0.resize(c);
    fill_normal(r, in.x0);
  }
  return in;
}

template <class T>
std::vector<ref_t<T>> linear_gates(const std::vector<T>& a, bool log_form) {
  std::vector<ref_t<T>> r(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) r[i] = linear_gate(a[i], log_form);
  return r;
}

/// Elementwise magnitudes |v|, kept in the reference type. A linear recurrence run on the
/// magnitudes of its inputs bounds, elementwise, the sizes of the terms each result sums; a
/// rounding error is a small multiple of that bound however much the terms cancel.
template <class R>
std::vector<R> magnitudes(std::vector<R> v) {
  for (R& e : v) e = R(std::abs(e));
  return v;
}

template <class T>
struct fwd_ref {
  std::vector<ref_t<T>> x, xf;
};
/// The float64 reference forward; with `on_magnitudes`, the same run on |a|, |b| and |x0|.
template <class T>
fwd_ref<T> reference_forward(const fwd_opts& o, const fwd_inputs<T>& in, bool on_magnitudes = false) {
  fwd_ref<T> r;
  auto a = linear_gates(in.a, o.log);
  auto b = to_ref_vec(in.b), x0 = to_ref_vec(in.x0);
  if (on_magnitudes) a = magnitudes(a), b = magnitudes(b), x0 = magnitudes(x0);
  ref_forward(o.B * o.D, o.T, a, b, o.x0 ? x0.data() : nullptr, o.reverse, r.x, r.xf);
  return r;
}

template <class T>
struct fwd_out {
  status st = status::success;
  std::vector<T> x, xf;  // canonical
};

/// One forward call on fresh guarded tensors; CHECKs the writes, guards and untouched inputs
/// (all but the status are skipped with checks = false, for repeated calls on large shapes).
template <class T>
fwd_out<T> forward_call(const fwd_opts& o, const fwd_inputs<T>& in, bool checks = true) {
  const fwd_arr arr = fwd_arrangements(o.layout, o.in_place);
  const index_t C = o.B * o.D;
  tensor<T> ta(make_geometry(arr.a, o.B, o.D, o.T), o.misalign, &in.a);
  tensor<T> tb(make_geometry(arr.b, o.B, o.D, o.T), o.b_misalign >= 0 ? o.b_misalign : o.misalign, &in.b);
  tensor<T> tx_own;
  if (!o.in_place) tx_own = tensor<T>(make_geometry(arr.x, o.B, o.D, o.T), o.misalign, nullptr);
  tensor<T>& tx = o.in_place ? tb : tx_own;
  tensor<T> tx0, txf;
  if (o.x0) tx0 = tensor<T>::dense(C, o.misalign, &in.x0);
  if (o.xfinal) txf = tensor<T>::dense(C, o.misalign, nullptr);

  parscan::gated_forward_args<T> args;
  args.shape = recurrence_shape{o.B, o.D, o.T, api_layout(o.layout)};
  args.a = ta.ptr();
  args.b = tb.ptr();
  args.x = tx.ptr();
  args.x0 = tx0.ptr();
  args.x_final = txf.ptr();
  args.reverse = o.reverse;
  args.gate = o.log ? gate_form::log : gate_form::linear;
  args.a_strides = ta.strides();
  args.b_strides = tb.strides();
  args.x_strides = tx.strides();
  if (o.layout == lay::tc || o.layout == lay::cl) {  // the header's helper agrees with ours
    const recurrence_strides ds = parscan::dense_strides(args.shape);
    INFO("parscan::dense_strides disagrees with the layout definition");
    CHECK((ds.batch == ta.strides().batch && ds.channel == ta.strides().channel && ds.time == ta.strides().time));
  }

  fwd_out<T> out;
  out.st = parscan::gated_recurrence_forward(parscan_test::backend(), args);
  PARSCAN_TEST_SYNC();
  CHECK(out.st == status::success);
  if (!checks) {
    tx.fetch(), out.x = tx.values();
    if (txf) txf.fetch(), out.xf = txf.values();
    return out;
  }
  check_output_writes(tx, "x", !o.in_place);
  out.x = tx.values();
  if (txf) {
    check_output_writes(txf, "x_final");
    out.xf = txf.values();
  }
  check_input_unchanged(ta, "a");
  if (!o.in_place) check_input_unchanged(tb, "b");
  check_input_unchanged(tx0, "x0");
  return out;
}

/// Draws a case, runs it, and CHECKs x and x_final against the float64 reference.
template <class T>
fwd_out<T> run_forward(const fwd_opts& o, const std::string& salt = "") {
  INFO(scalar<T>::name() << " forward " << o.str());
  PARSCAN_TEST_RNG(r, std::string("recurrence forward ") + scalar<T>::name() + " " + o.str() + salt);
  const fwd_inputs<T> in = draw_fwd_inputs<T>(r, o);
  const fwd_ref<T> ref = reference_forward(o, in);
  fwd_out<T> out = forward_call(o, in);
  if (out.st == status::success) {
    check_close("x", out.x, ref.x);
    // x_final is the last state of each channel: a slice of x's computation, so its error
    // is measured at x's scale (with few channels, max|x_final| alone can be far below it
    // through cancellation, and no float evaluation order keeps that relative error small).
    if (o.xfinal && o.B * o.D * o.T > 0) check_close("x_final", out.xf, ref.xf, scalar<T>::tol, max_abs(ref.x));
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Backward.

struct bwd_opts {
  index_t B = 1, D = 1, T = 1;
  lay layout = lay::tc;
  bool x0 = false, dxfinal = false, x_given = true, b_given = false, reverse = false, log = false;
  family fam = family::unit;
  index_t misalign = 0;
  index_t dx_misalign = -1;     // dx's own misalignment when ≥ 0 (and da or db's when in place)
  int in_place = 0;             // 1: db == dx; 2: da == dx
  bool dx0_without_x0 = false;  // pass a dx0 buffer although x0 is null: must stay untouched
  std::string str() const {
    std::ostringstream s;
    s << "B=" << B << " D=" << D << " T=" << T << " layout=" << name(layout) << " x0=" << x0 << " dx_final=" << dxfinal
      << " x=" << (x_given ? "given" : "null") << " b=" << ((!x_given || b_given) ? "given" : "null")
      << " reverse=" << reverse << " gate=" << (log ? "log" : "linear") << " family=" << name(fam)
      << " misalign=" << misalign << " dx_misalign=" << dx_misalign << " in_place=" << (in_place == 1 ? "db==dx" : in_place == 2 ? "da==dx" : "no")
      << " dx0_without_x0=" << dx0_without_x0;
    return s.str();
  }
  fwd_opts forward() const {
    fwd_opts f;
    f.B = B, f.D = D, f.T = T, f.layout = layout, f.x0 = x0, f.xfinal = true, f.reverse = reverse, f.log = log;
    f.fam = fam, f.misalign = misalign;
    return f;
  }
};

template <class T>
struct bwd_inputs {
  std::vector<T> a, b, x0, x, dx, dxf;  // canonical; x = the forward output, rounded to T
};

template <class T>
struct bwd_ref {
  std::vector<ref_t<T>> da, db, dx0;
};

template <class T>
bwd_inputs<T> draw_bwd_inputs(rng& r, const bwd_opts& o) {
  const fwd_opts fo = o.forward();
  fwd_inputs<T> f = draw_fwd_inputs<T>(r, fo);
  bwd_inputs<T> in;
  in.x = from_ref_vec<T>(reference_forward(fo, f).x);
  in.a = std::move(f.a), in.b = std::move(f.b), in.x0 = std::move(f.x0);
  in.dx.resize(in.a.size());
  fill_normal(r, in.dx);
  if (o.dxfinal) {
    in.dxf.resize(static_cast<std::size_t>(o.B * o.D));
    fill_normal(r, in.dxf);
  }
  return in;
}

/// The reference backward: from the given (rounded) x when the case passes x, else from x
/// recomputed in float64 from a, b and x0 (what the library must do when x is null). With
/// `on_magnitudes`, the same run on the magnitudes of every input (see `magnitudes`).
template <class T>
bwd_ref<T> reference_backward(const bwd_opts& o, const bwd_inputs<T>& in, bool on_magnitudes = false) {
  const index_t C = o.B * o.D;
  auto a = linear_gates(in.a, o.log);
  auto x0 = to_ref_vec(in.x0), b = to_ref_vec(in.b), dx = to_ref_vec(in.dx), dxf = to_ref_vec(in.dxf);
  std::vector<ref_t<T>> x = to_ref_vec(in.x);
  if (on_magnitudes) {
    a = magnitudes(a), x0 = magnitudes(x0), b = magnitudes(b), x = magnitudes(x);
    dx = magnitudes(dx), dxf = magnitudes(dxf);
  }
  if (!o.x_given) {
    std::vector<ref_t<T>> xf;
    ref_forward(C, o.T, a, b, o.x0 ? x0.data() : nullptr, o.reverse, x, xf);
  }
  bwd_ref<T> r;
  ref_backward(C, o.T, a, x, o.x0 ? x0.data() : nullptr, dx, o.dxfinal ? dxf.data() : nullptr, o.reverse, o.log,
               r.da, r.db, r.dx0);
  return r;
}

template <class T>
struct bwd_out {
  status st = status::success;
  std::vector<T> da, db, dx0;  // canonical
};

/// One backward call on fresh guarded tensors; CHECKs the writes, guards and untouched inputs
/// (all but the status are skipped with checks = false).
template <class T>
bwd_out<T> backward_call(const bwd_opts& o, const bwd_inputs<T>& in, bool checks = true) {
  const bwd_arr arr = bwd_arrangements(o.layout, o.in_place);
  const index_t C = o.B * o.D;
  auto geo = [&](arrangement a) { return make_geometry(a, o.B, o.D, o.T); };
  tensor<T> ta(geo(arr.a), o.misalign, &in.a);
  tensor<T> tx, tb, tx0, tdxf, tda_own, tdb_own, tdx0;
  if (o.x_given) tx = tensor<T>(geo(arr.x), o.misalign, &in.x);
  if (!o.x_given || o.b_given) tb = tensor<T>(geo(arr.b), o.misalign, &in.b);
  if (o.x0) tx0 = tensor<T>::dense(C, o.misalign, &in.x0);
  tensor<T> tdx(geo(arr.dx), o.dx_misalign >= 0 ? o.dx_misalign : o.misalign, &in.dx);
  if (o.dxfinal) tdxf = tensor<T>::dense(C, o.misalign, &in.dxf);
  if (o.in_place != 2) tda_own = tensor<T>(geo(arr.da), o.misalign, nullptr);
  if (o.in_place != 1) tdb_own = tensor<T>(geo(arr.db), o.misalign, nullptr);
  tensor<T>& tda = o.in_place == 2 ? tdx : tda_own;
  tensor<T>& tdb = o.in_place == 1 ? tdx : tdb_own;
  if (o.x0 || o.dx0_without_x0) tdx0 = tensor<T>::dense(C, o.misalign, nullptr);

  parscan::gated_backward_args<T> args;
  args.shape = recurrence_shape{o.B, o.D, o.T, api_layout(o.layout)};
  args.a = ta.ptr();
  args.x = tx.ptr();
  args.b = tb.ptr();
  args.x0 = tx0.ptr();
  args.dx = tdx.ptr();
  args.dx_final = tdxf.ptr();
  args.da = tda.ptr();
  args.db = tdb.ptr();
  args.dx0 = tdx0.ptr();
  args.reverse = o.reverse;
  args.gate = o.log ? gate_form::log : gate_form::linear;
  args.a_strides = geo(arr.a).s;
  args.x_strides = geo(arr.x).s;
  args.b_strides = geo(arr.b).s;
  args.dx_strides = geo(arr.dx).s;
  args.da_strides = geo(arr.da).s;
  args.db_strides = geo(arr.db).s;

  bwd_out<T> out;
  out.st = parscan::gated_recurrence_backward(parscan_test::backend(), args);
  PARSCAN_TEST_SYNC();
  CHECK(out.st == status::success);
  if (!checks) {
    tda.fetch(), out.da = tda.values();
    tdb.fetch(), out.db = tdb.values();
    if (o.x0) tdx0.fetch(), out.dx0 = tdx0.values();
    return out;
  }
  check_output_writes(tda, "da", o.in_place != 2);
  out.da = tda.values();
  check_output_writes(tdb, "db", o.in_place != 1);
  out.db = tdb.values();
  if (o.x0) {
    check_output_writes(tdx0, "dx0");
    out.dx0 = tdx0.values();
  } else {
    check_untouched(tdx0, "dx0 (no x0 given: dx0 is written only when x0 is given)");
  }
  check_input_unchanged(ta, "a");
  check_input_unchanged(tx, "x");
  check_input_unchanged(tb, "b");
  check_input_unchanged(tx0, "x0");
  if (o.in_place == 0) check_input_unchanged(tdx, "dx");
  check_input_unchanged(tdxf, "dx_final");
  return out;
}

template <class T>
bwd_out<T> run_backward(const bwd_opts& o, const std::string& salt = "") {
  INFO(scalar<T>::name() << " backward " << o.str());
  PARSCAN_TEST_RNG(r, std::string("recurrence backward ") + scalar<T>::name() + " " + o.str() + salt);
  const bwd_inputs<T> in = draw_bwd_inputs<T>(r, o);
  const bwd_ref<T> ref = reference_backward(o, in);
  bwd_out<T> out = backward_call(o, in);
  if (out.st == status::success && o.B * o.D * o.T > 0) {
    check_close("da", out.da, ref.da);
    check_close("db", out.db, ref.db);
    if (o.x0) check_close("dx0", out.dx0, ref.dx0, scalar<T>::tol, max_abs(ref.db));  // a slice of db's work
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Chunked use: the time axis cut into 3 uneven consecutive chunks, each a separate call on a
// strided view of the full tensors (same strides, pointers offset by the chunk start).

inline std::vector<index_t> chunk_starts(index_t T) {  // {0, t1, t2, T}
  const index_t l1 = std::max<index_t>(1, T / 7);
  const index_t l2 = std::max<index_t>(1, (T - l1) * 2 / 3);
  return {0, l1, l1 + l2, T};
}

inline recurrence_shape chunk_shape(const geometry& g, index_t len) {
  return recurrence_shape{g.B, g.D, len, recurrence_layout::strided};
}

/// Chunked calls against the float64 reference of the whole sequence: twice the dtype's
/// tolerance, since the states handed from chunk to chunk are rounded to T at each cut (in
/// bfloat16, T = 3 cut into three single steps measured 1.45e-2 against 1e-2 on an H100).
template <class T>
constexpr double chunked_tol = 2 * scalar<T>::tol;
/// Chunked against one whole call: each is within its tolerance of the reference.
template <class T>
constexpr double chunked_vs_whole_tol = chunked_tol<T> + scalar<T>::tol;

/// Forward in 3 chunks (x0 of each = x_final of the one before, in processing order), then
/// backward in 3 chunks, last processed first (dx_final of each = dx0 of the one after).
/// Compares both with one whole call and with the reference. With state_in_place, one state
/// buffer is both x0 and x_final of every forward chunk, and one both dx_final and dx0 of
/// every backward chunk (the header allows exactly these aliases).
template <class T>
void run_chunked(const bwd_opts& o, bool state_in_place = false) {
  INFO(scalar<T>::name() << " chunked " << o.str() << " state_in_place=" << state_in_place);
  PARSCAN_TEST_RNG(r, std::string("recurrence chunked ") + scalar<T>::name() + " " + o.str() +
                          (state_in_place ? " state in place" : ""));
  REQUIRE(o.T >= 3);
  REQUIRE(o.in_place == 0);
  const index_t C = o.B * o.D;
  const bwd_inputs<T> in = draw_bwd_inputs<T>(r, o);
  const fwd_opts fo = o.forward();
  fwd_inputs<T> fin{in.a, in.b, in.x0};
  const fwd_ref<T> fref = reference_forward(fo, fin);
  const bwd_ref<T> bref = reference_backward(o, in);
  // The chunks round every state they hand on to T, and a short sequence's few results can be
  // far smaller than the terms they sum (seen: bfloat16, B = D = 1, T = 3, da at 3.3e-2 of
  // max|da|). So errors are measured against the sizes of those terms: the reference run on
  // magnitudes, where it is the larger.
  const fwd_ref<T> fmag = reference_forward(fo, fin, true);
  const bwd_ref<T> bmag = reference_backward(o, in, true);

  // One whole call each, for comparison.
  const fwd_out<T> whole_f = forward_call(fo, fin);
  const bwd_out<T> whole_b = backward_call(o, in);

  const std::vector<index_t> cut = chunk_starts(o.T);
  INFO("chunks [" << cut[0] << "," << cut[1] << ") [" << cut[1] << "," << cut[2] << ") [" << cut[2] << "," << cut[3]
                  << ")");
  // Processing order of the chunks: time order, or reversed with `reverse`.
  std::vector<int> order = {0, 1, 2};
  if (o.reverse) order = {2, 1, 0};

  const fwd_arr fa = fwd_arrangements(o.layout, false);
  auto geo = [&](arrangement a) { return make_geometry(a, o.B, o.D, o.T); };
  tensor<T> ta(geo(fa.a), o.misalign, &in.a), tb(geo(fa.b), o.misalign, &in.b), tx(geo(fa.x), o.misalign, nullptr);
  tensor<T> tx0;
  if (o.x0) tx0 = tensor<T>::dense(C, o.misalign, &in.x0);
  std::vector<tensor<T>> state(3);  // x_final of each chunk (by processing position)
  const gate_form gate = o.log ? gate_form::log : gate_form::linear;
  tensor<T> shared;  // state_in_place: the one state buffer, starting as x0 (or poison)
  if (state_in_place) shared = tensor<T>::dense(C, 0, o.x0 ? &in.x0 : nullptr);

  for (int k = 0; k < 3; ++k) {
    const int c = order[k];
    const index_t t0 = cut[c], len = cut[c + 1] - cut[c];
    if (!state_in_place) state[k] = tensor<T>::dense(C, 0, nullptr);
    parscan::gated_forward_args<T> args;
    args.shape = chunk_shape(ta.geom(), len);
    args.a = ta.ptr() + t0 * ta.strides().time;
    args.b = tb.ptr() + t0 * tb.strides().time;
    args.x = tx.ptr() + t0 * tx.strides().time;
    args.x0 = k == 0 ? tx0.ptr() : state[k - 1].ptr();
    args.x_final = state[k].ptr();
    if (state_in_place) {
      args.x0 = (k == 0 && !o.x0) ? nullptr : shared.ptr();
      args.x_final = shared.ptr();
    }
    args.reverse = o.reverse;
    args.gate = gate;
    args.a_strides = ta.strides(), args.b_strides = tb.strides(), args.x_strides = tx.strides();
    const status st = parscan::gated_recurrence_forward(parscan_test::backend(), args);
    PARSCAN_TEST_SYNC();
    INFO("forward chunk " << c << " (processing position " << k << ")");
    REQUIRE(st == status::success);
    if (state_in_place) {  // keep a copy of this state: the backward chunks need it as their x0
      shared.fetch();
      const std::vector<T> v = shared.values();
      state[k] = tensor<T>::dense(C, 0, &v);
    }
  }
  check_output_writes(tx, "x (chunked)");
  const std::vector<T> xc = tx.values();
  check_output_writes(state[2], "x_final (chunked)");
  const std::vector<T> xfc = state[2].values();
  const double x_scale = max_abs(fmag.x);
  check_close("chunked forward x vs reference", xc, fref.x, chunked_tol<T>, x_scale);
  // x_final went through 2 intermediate states stored as T: compare at the scale of x
  check_close("chunked forward x_final vs reference", xfc, fref.xf, chunked_tol<T>, x_scale);
  if (whole_f.st == status::success) {
    // within chunked_tol and tol of the reference: within their sum of each other
    check_close("chunked forward x vs one call", xc, to_ref_vec(whole_f.x), chunked_vs_whole_tol<T>, x_scale);
    check_close("chunked forward x_final vs one call", xfc, to_ref_vec(whole_f.xf), chunked_vs_whole_tol<T>,
                x_scale);
  }

  // Backward. The state before chunk k (processing order) is state[k-1] (or x0); it is
  // the chunk's x0, so the chunk writes a dx0 that is the earlier chunk's dx_final.
  const bwd_arr ba = bwd_arrangements(o.layout, 0);
  tensor<T> bx, bb;
  tensor<T> ba_t(geo(ba.a), o.misalign, &in.a);
  if (o.x_given) bx = tensor<T>(geo(ba.x), o.misalign, &in.x);
  if (!o.x_given || o.b_given) bb = tensor<T>(geo(ba.b), o.misalign, &in.b);
  tensor<T> tdx(geo(ba.dx), o.misalign, &in.dx), tda(geo(ba.da), o.misalign, nullptr),
      tdb(geo(ba.db), o.misalign, nullptr);
  tensor<T> tdxf;
  if (o.dxfinal) tdxf = tensor<T>::dense(C, o.misalign, &in.dxf);
  std::vector<tensor<T>> dstate(3);  // dx0 of each chunk (by processing position)
  tensor<T> dshared;                 // state_in_place: the one buffer, starting as dx_final (or poison)
  if (state_in_place) dshared = tensor<T>::dense(C, 0, o.dxfinal ? &in.dxf : nullptr);
  for (int k = 2; k >= 0; --k) {
    const int c = order[k];
    const index_t t0 = cut[c], len = cut[c + 1] - cut[c];
    const bool has_x0 = k > 0 || o.x0;
    if (has_x0) dstate[k] = tensor<T>::dense(C, 0, nullptr);
    parscan::gated_backward_args<T> args;
    args.shape = chunk_shape(ba_t.geom(), len);
    args.a = ba_t.ptr() + t0 * ba_t.strides().time;
    args.x = bx ? bx.ptr() + t0 * bx.strides().time : nullptr;
    args.b = bb ? bb.ptr() + t0 * bb.strides().time : nullptr;
    args.x0 = k == 0 ? tx0.ptr() : state[k - 1].ptr();
    args.dx = tdx.ptr() + t0 * tdx.strides().time;
    args.dx_final = k == 2 ? tdxf.ptr() : dstate[k + 1].ptr();
    args.da = tda.ptr() + t0 * tda.strides().time;
    args.db = tdb.ptr() + t0 * tdb.strides().time;
    args.dx0 = has_x0 ? dstate[k].ptr() : nullptr;
    if (state_in_place) {
      args.dx_final = (k == 2 && !o.dxfinal) ? nullptr : dshared.ptr();
      args.dx0 = has_x0 ? dshared.ptr() : nullptr;
    }
    args.reverse = o.reverse;
    args.gate = gate;
    args.a_strides = ba_t.strides(), args.x_strides = geo(ba.x).s, args.b_strides = geo(ba.b).s;
    args.dx_strides = tdx.strides(), args.da_strides = tda.strides(), args.db_strides = tdb.strides();
    const status st = parscan::gated_recurrence_backward(parscan_test::backend(), args);
    PARSCAN_TEST_SYNC();
    INFO("backward chunk " << c << " (processing position " << k << ")");
    REQUIRE(st == status::success);
  }
  check_output_writes(tda, "da (chunked)");
  check_output_writes(tdb, "db (chunked)");
  const std::vector<T> dac = tda.values(), dbc = tdb.values();
  const double da_scale = max_abs(bmag.da), db_scale = max_abs(bmag.db);
  check_close("chunked backward da vs reference", dac, bref.da, chunked_tol<T>, da_scale);
  check_close("chunked backward db vs reference", dbc, bref.db, chunked_tol<T>, db_scale);
  if (whole_b.st == status::success) {
    check_close("chunked backward da vs one call", dac, to_ref_vec(whole_b.da), chunked_vs_whole_tol<T>, da_scale);
    check_close("chunked backward db vs one call", dbc, to_ref_vec(whole_b.db), chunked_vs_whole_tol<T>, db_scale);
  }
  if (o.x0) {
    tensor<T>& dx0t = state_in_place ? dshared : dstate[0];
    check_output_writes(dx0t, "dx0 (chunked)");
    const std::vector<T> dx0c = dx0t.values();
    // dx0 went through 2 intermediate dx0 stored as T: compare at the scale of db
    check_close("chunked backward dx0 vs reference", dx0c, bref.dx0, chunked_tol<T>, db_scale);
    if (whole_b.st == status::success)
      check_close("chunked backward dx0 vs one call", dx0c, to_ref_vec(whole_b.dx0), chunked_vs_whole_tol<T>,
                  db_scale);
  }
  check_input_unchanged(tdx, "dx");
  check_input_unchanged(tdxf, "dx_final");
  check_input_unchanged(ba_t, "a");
}

// ---------------------------------------------------------------------------------------
// Shapes.

struct shape3 {
  index_t B, D, T;
};

/// The sweep: T over {1,2,3,31,32,33,64,127,128,129,1000,1024,4097,10007,65537} and one
/// T = 200003, B·D over {1,3,32,33,96,1000,3093,12288}, at most ~4M elements on the host.
inline std::vector<shape3> sweep_shapes() {
  std::vector<shape3> v;
  const shape3 bds[] = {{1, 1, 0}, {1, 3, 0}, {2, 16, 0}, {3, 11, 0}, {2, 48, 0}, {8, 125, 0}};  // B·D 1..1000
  for (index_t T : {1, 2, 3, 31, 32, 33, 127, 128, 129})
    for (const shape3& bd : bds) v.push_back({bd.B, bd.D, T});
  const shape3 big[] = {
      {1, 1, 1000},   {3, 11, 1000},   {8, 125, 1000}, {1, 3, 1024},  {2, 16, 1024}, {2, 48, 1024},
      {1, 3, 4097},   {2, 48, 4097},   {8, 125, 2048}, {1, 1, 10007}, {2, 16, 10007}, {2, 48, 10007},
      {1, 1, 65537},  {3, 11, 65537},  {1, 3, 200003}, {4, 3072, 1},  {4, 3072, 32},  {4, 3072, 129},
      // An odd count of sequences of 16 runs or fewer (two to a warp) and of 17–32 (a warp each):
      // more of them than the device keeps resident.
      {3, 1031, 64},  {3, 1031, 128},
  };
  for (const shape3& s : big) v.push_back(s);
#if PARSCAN_TEST_ON_DEVICE
  // The GPU can afford the shapes of real layers, and very long sequences.
  // {13, 3071, 33}: an odd count of short sequences, several groups of them to each resident
  // warp, so the segment tiles' ring of staged groups wraps around.
  const shape3 gpu[] = {{8, 1536, 4096}, {2, 8, index_t(1) << 20}, {4, 3072, 1000}, {1, 1, 1000003}, {13, 3071, 33}};
  for (const shape3& s : gpu) v.push_back(s);
#endif
  return v;
}

}  // namespace rec_test
