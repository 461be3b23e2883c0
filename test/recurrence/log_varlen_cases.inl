// test/recurrence/log_varlen_cases.inl — the log-space recurrence over packed variable-length
// sequences (cu_seqlens; log_varlen_forward_args / log_varlen_backward_args in
// parscan/log_recurrence.hpp), backend-neutral. Included by log_varlen_test.cpp (host backend)
// and log_varlen_test.cu (CUDA backend, PARSCAN_TEST_CUDA=1).
//
// Every packed result is compared, per sequence, with the fixed-length API called on that
// sequence alone (its own dense time-contiguous tensors, same backend): bitwise on the host
// backend, whose packed path runs the same per-channel loop; on CUDA, whose packed loops
// associate differently from the fixed-length kernels, within twice the fixed-length tests'
// tolerance (1e-5 for float, 5e-2 for bfloat16 storage) of the values, relative to the
// sequence's scale. The forward is also checked against a long-double loop over the stored
// inputs, at the same tolerance. Outputs are poisoned and guarded: every step of every
// sequence is written, the steps past cu_seqlens[N], the strided layout's row padding and
// everything around the buffers are not, and the inputs stay bit-identical.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <parscan/parscan.hpp>

#include "support/catch.hpp"
#include "support/env.hpp"
#include "support/random.hpp"

namespace log_varlen_test {

using parscan::index_t;
using parscan::status;
using parscan::varlen_shape;
using parscan_test::guarded_buffer;
using ld = long double;
using sign_t = std::uint8_t;

enum class lay { cl, tc, s3 };  // (total_T, D); (D, total_T); strided: time stride 1, rows padded by 3
inline const char* name(lay l) { return l == lay::cl ? "channel-last" : l == lay::tc ? "time-contiguous" : "strided"; }

struct case_opts {
  std::vector<index_t> lengths;
  index_t D = 1, trailing = 0;
  lay layout = lay::cl;
  bool signed_ = false;  // signed a, b and x0 with sign arrays (log form); else a, b, x0 > 0, no signs
  bool values = false;   // a, b and x0 in value form; x written in both forms (forward), dx given (backward)
  bool x0 = false, xfinal = true, reverse = false, in_place = false;
  bool x_given = true, dxfinal = false;  // backward only

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
      << " signed=" << signed_ << " values=" << values << " x0=" << x0 << " x_final=" << xfinal
      << " reverse=" << reverse << " in_place=" << in_place << " x=" << (x_given ? "given" : "null")
      << " dx_final=" << dxfinal;
    return s.str();
  }
};

/// Where element (d, t) of the packed tensor lives, and the buffer's size.
struct geometry {
  index_t channel = 0, time = 0, size = 0;
  index_t at(index_t d, index_t t) const { return d * channel + t * time; }
};
inline geometry packed_geometry(const case_opts& o) {
  const index_t D = o.D, T = o.total();
  switch (o.layout) {
    case lay::cl: return {1, D, D * T};
    case lay::tc: return {T, 1, D * T};
    case lay::s3: break;
  }
  return {T + 3, 1, D * (T + 3)};
}
inline parscan::recurrence_layout api_layout(lay l) {
  return l == lay::cl ? parscan::recurrence_layout::channel_last
         : l == lay::tc ? parscan::recurrence_layout::time_contiguous
                        : parscan::recurrence_layout::strided;
}
inline parscan::recurrence_strides strides_of(const geometry& g) { return {0, g.channel, g.time}; }

/// Buffer positions that belong to some sequence.
inline std::vector<bool> used_mask(const case_opts& o, const geometry& g) {
  std::vector<bool> m(static_cast<std::size_t>(g.size), false);
  for (index_t d = 0; d < o.D; ++d)
    for (index_t t = 0; t < o.used(); ++t) m[static_cast<std::size_t>(g.at(d, t))] = true;
  return m;
}

template <class T>
float stored(double v) {
  return static_cast<float>(static_cast<T>(static_cast<float>(v)));
}
inline ld value(float log_mag, bool neg) { return (neg ? -1.0L : 1.0L) * std::exp(static_cast<ld>(log_mag)); }
template <class T>
ld as_ld(T v) {
  return static_cast<ld>(static_cast<float>(v));
}

/// The drawn inputs, packed (the log form, as stored in T, and the signs) and as the states.
template <class T>
struct inputs {
  std::vector<T> la, lb, lx0;  // log magnitudes (value form: the values, rounded to T)
  std::vector<sign_t> sa, sb, sx0;
  // The value each stored element stands for, for the reference.
  ld a(std::size_t k, bool values) const { return values ? as_ld(la[k]) : value(float(la[k]), sa[k] != 0); }
  ld b(std::size_t k, bool values) const { return values ? as_ld(lb[k]) : value(float(lb[k]), sb[k] != 0); }
  ld x0(std::size_t s, bool values) const { return values ? as_ld(lx0[s]) : value(float(lx0[s]), sx0[s] != 0); }
};

template <class T>
inputs<T> draw(parscan_test::rng& r, const case_opts& o, const geometry& g) {
  inputs<T> in;
  const std::size_t n = static_cast<std::size_t>(g.size), states = static_cast<std::size_t>(o.N() * o.D);
  auto one = [&](double v, std::vector<T>& mag, std::vector<sign_t>& neg) {
    if (o.values) {
      mag.push_back(static_cast<T>(static_cast<float>(v)));
      neg.push_back(0);
    } else {
      mag.push_back(static_cast<T>(static_cast<float>(std::log(std::fabs(v)))));
      neg.push_back(o.signed_ && v < 0 ? 1 : 0);
    }
  };
  for (std::size_t i = 0; i < n; ++i) {
    double a = o.signed_ ? r.signed_unit() : r.uniform(0.05, 1.0);
    if (a == 0) a = 0.5;
    one(a, in.la, in.sa);
    one(o.signed_ ? r.normal() : r.uniform(0.1, 1.0), in.lb, in.sb);
  }
  for (std::size_t s = 0; s < states; ++s) one(o.signed_ ? r.normal() : r.uniform(0.1, 2.0), in.lx0, in.sx0);
  return in;
}

/// Sequence n of a packed vector, as a dense time-contiguous (D, length) vector.
template <class V>
std::vector<V> slice(const case_opts& o, const geometry& g, const std::vector<V>& packed, index_t n) {
  const index_t start = o.offsets()[static_cast<std::size_t>(n)], len = o.lengths[static_cast<std::size_t>(n)];
  std::vector<V> v(static_cast<std::size_t>(o.D * len));
  for (index_t d = 0; d < o.D; ++d)
    for (index_t t = 0; t < len; ++t)
      v[static_cast<std::size_t>(d * len + t)] = packed[static_cast<std::size_t>(g.at(d, start + t))];
  return v;
}
template <class V>
std::vector<V> state_slice(const std::vector<V>& s, index_t n, index_t D) {
  return s.empty() ? s : std::vector<V>(s.begin() + n * D, s.begin() + (n + 1) * D);
}

/// Checks an output buffer after a packed call: guards intact, every used position written,
/// every other position (trailing steps, row padding) untouched; `in_place`: the buffer is an
/// input that was replaced, whose unused positions must still hold the input.
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

/// Tolerances of the fixed-length log tests for these inputs (log_recurrence_cases.inl): the
/// forward's, and the backward's (ten times the forward's for float).
template <class T>
double tolerance() {
  return sizeof(T) == 2 ? 5e-2 : 1e-5;
}
template <class T>
double backward_tolerance() {
  return sizeof(T) == 2 ? 1e-1 : 1e-4;
}

/// got and want (values, laid out alike: `per` consecutive values per channel) agree: bitwise
/// on the host; on CUDA within tol relative to each channel's scale (the largest |want|, or
/// the given scale where that is larger).
template <class T>
void check_agree(const char* what, const std::vector<ld>& got, const std::vector<ld>& want, index_t per,
                 const std::vector<ld>* scale = nullptr, double tol = 2 * tolerance<T>()) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  if constexpr (!parscan_test::on_device) {
    (void)per, (void)scale, (void)tol;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      differ += !(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])));
    CHECK(differ == 0);
  } else {
    double worst = 0;
    for (std::size_t c = 0; per > 0 && c < got.size() / static_cast<std::size_t>(per); ++c) {
      ld s = scale ? (*scale)[c] : 0;
      for (index_t i = 0; i < per; ++i) s = std::max(s, std::fabs(want[c * per + i]));
      if (s == 0) s = 1;
      for (index_t i = 0; i < per; ++i)
        worst = std::max(worst, static_cast<double>(std::fabs(got[c * per + i] - want[c * per + i]) / s));
    }
    INFO("worst relative difference " << worst);
    CHECK(worst <= tol);
  }
}

/// Chunked against one call: within `tol` of the largest |want|; bitwise for float on the host
/// where the cut is `exact` (the forward's state crosses it as log|x| in float, unrounded).
template <class T>
void check_chunks(const char* what, const std::vector<ld>& got, const std::vector<ld>& want, double tol, bool exact) {
  INFO(what << ": the chunked calls against one call");
  REQUIRE(got.size() == want.size());
  ld scale = 0, worst = 0;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    differ += !(got[i] == want[i]);
  }
  if (scale == 0) scale = 1;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]) / scale);
  INFO("differing " << differ << ", worst relative difference " << static_cast<double>(worst));
  if (exact && !parscan_test::on_device && std::is_same<T, float>::value) CHECK(differ == 0);
  else CHECK(worst <= tol);
}

/// A tensor's values from its log magnitudes and signs (null signs: positive).
template <class T>
std::vector<ld> values_of(const std::vector<T>& mag, const std::vector<sign_t>* neg) {
  std::vector<ld> v(mag.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = value(static_cast<float>(mag[i]), neg && (*neg)[i] != 0);
  return v;
}
template <class T>
std::vector<ld> plain(const std::vector<T>& v) {
  std::vector<ld> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = as_ld(v[i]);
  return r;
}

// ---------------------------------------------------------------------------------------
// Forward.

struct forward_out {
  std::vector<ld> x, x_value, x_final;  // per sequence in order, dense (D, length) each; x_final (N, D)
};

/// The fixed-length API on sequence n alone (dense time-contiguous tensors).
template <class T>
void forward_one(const case_opts& o, const geometry& g, const inputs<T>& in, index_t n, forward_out& out) {
  const index_t D = o.D, len = o.lengths[static_cast<std::size_t>(n)];
  guarded_buffer<T> la(slice(o, g, in.la, n)), lb(slice(o, g, in.lb, n)), lx0(state_slice(in.lx0, n, D));
  guarded_buffer<sign_t> sa(slice(o, g, in.sa, n)), sb(slice(o, g, in.sb, n)), sx0(state_slice(in.sx0, n, D));
  const std::size_t elems = static_cast<std::size_t>(D * len);
  guarded_buffer<T> lx(elems), vx(elems), lxf(static_cast<std::size_t>(D));
  guarded_buffer<sign_t> sx(elems), sxf(static_cast<std::size_t>(D));
  parscan::log_forward_args<T> f{};
  f.shape = {1, D, len, parscan::recurrence_layout::time_contiguous};
  (o.values ? f.a : f.log_a) = la.data();
  (o.values ? f.b : f.log_b) = lb.data();
  if (o.x0) (o.values ? f.x0 : f.log_x0) = lx0.data();
  if (o.signed_ && !o.values) {
    f.a_negative = sa.data(), f.b_negative = sb.data();
    if (o.x0) f.x0_negative = sx0.data();
  }
  const bool signs = o.signed_ || o.values;
  f.log_x = lx.data(), f.x_negative = signs ? sx.data() : nullptr;
  if (o.values) f.x = vx.data();
  f.log_x_final = lxf.data(), f.x_final_negative = signs ? sxf.data() : nullptr;
  f.reverse = o.reverse;
  const status st = parscan::log_recurrence_forward(parscan_test::backend(), f);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);
  const std::vector<sign_t> hsx = sx.download(), hsxf = sxf.download();
  const std::vector<ld> x = values_of(lx.download(), signs ? &hsx : nullptr);
  out.x.insert(out.x.end(), x.begin(), x.end());
  if (o.values) {
    const std::vector<ld> xv = plain(vx.download());
    out.x_value.insert(out.x_value.end(), xv.begin(), xv.end());
  }
  const std::vector<ld> xf = values_of(lxf.download(), signs ? &hsxf : nullptr);
  out.x_final.insert(out.x_final.end(), xf.begin(), xf.end());
}

template <class T>
void run_forward(const case_opts& o) {
  INFO("log varlen forward <" << (sizeof(T) == 2 ? "bfloat16" : "float") << "> " << o.str());
  PARSCAN_TEST_RNG(r, std::string("log varlen forward ") + std::to_string(sizeof(T)) + " " + o.str());
  const geometry g = packed_geometry(o);
  const index_t D = o.D, N = o.N();
  const std::size_t states = static_cast<std::size_t>(N * D);
  const inputs<T> in = draw<T>(r, o, g);
  const std::vector<bool> used = used_mask(o, g);
  const bool signs = o.signed_ || o.values;

  guarded_buffer<T> la(in.la), lb(in.lb), lx0(in.lx0), lx_own(static_cast<std::size_t>(g.size));
  guarded_buffer<T> vx(static_cast<std::size_t>(g.size)), lxf(states);
  guarded_buffer<sign_t> sa(in.sa), sb(in.sb), sx0(in.sx0), sx_own(static_cast<std::size_t>(g.size)), sxf(states);
  // In place: log|x| over the b input (log form only), its signs over b's.
  const bool in_place = o.in_place && !o.values;
  guarded_buffer<T>& lx = in_place ? lb : lx_own;
  guarded_buffer<sign_t>& sx = in_place && o.signed_ ? sb : sx_own;
  const auto cu = guarded_buffer<std::int64_t>(o.offsets());

  parscan::log_varlen_forward_args<T> f{};
  f.shape = varlen_shape{N, D, o.total(), cu.data(), api_layout(o.layout)};
  f.a_strides = f.b_strides = f.x_strides = strides_of(g);
  (o.values ? f.a : f.log_a) = la.data();
  (o.values ? f.b : f.log_b) = lb.data();
  if (o.x0) (o.values ? f.x0 : f.log_x0) = lx0.data();
  if (o.signed_ && !o.values) {
    f.a_negative = sa.data(), f.b_negative = sb.data();
    if (o.x0) f.x0_negative = sx0.data();
  }
  f.log_x = lx.data(), f.x_negative = signs ? sx.data() : nullptr;
  if (o.values) f.x = vx.data();
  if (o.xfinal) f.log_x_final = lxf.data(), f.x_final_negative = signs ? sxf.data() : nullptr;
  f.reverse = o.reverse;
  const status st = parscan::log_recurrence_forward(parscan_test::backend(), f);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);

  check_written("log|x|", lx, used, in_place ? &in.lb : nullptr);
  if (signs) check_written("x's signs", sx, used, in_place ? &in.sb : nullptr);
  else CHECK(sx_own.untouched());
  if (o.values) check_written("x", vx, used);
  else CHECK(vx.untouched());
  if (o.xfinal) {
    CHECK(lxf.all_written());
    CHECK(lxf.guards_intact());
    if (signs) CHECK(sxf.all_written());
  } else {
    CHECK(lxf.untouched());
  }
  check_unchanged("log|a|", la, in.la);
  check_unchanged("a's signs", sa, in.sa);
  if (!in_place) check_unchanged("log|b|", lb, in.lb), check_unchanged("b's signs", sb, in.sb);
  check_unchanged("x0", lx0, in.lx0);
  check_unchanged("x0's signs", sx0, in.sx0);

  // The packed results, per sequence in order; the same from the fixed-length API and from
  // the long-double loop (with each step's scale: the largest |x|, |a·x_prev| or |b|).
  const std::vector<T> hx = lx.download(), hvx = vx.download(), hxf = lxf.download();
  const std::vector<sign_t> hsx = sx.download(), hsxf = sxf.download();
  forward_out packed, api;
  std::vector<ld> ref, scale;
  const std::vector<std::int64_t> off = o.offsets();
  for (index_t n = 0; n < N; ++n) {
    const index_t len = o.lengths[static_cast<std::size_t>(n)], start = off[static_cast<std::size_t>(n)];
    for (index_t d = 0; d < D; ++d) {
      const std::size_t s = static_cast<std::size_t>(n * D + d);
      ld state = o.x0 ? in.x0(s, o.values) : 0.0L, sc = std::fabs(state);
      for (index_t t = 0; t < len; ++t) {
        const index_t tt = start + (o.reverse ? len - 1 - t : t);
        const std::size_t k = static_cast<std::size_t>(g.at(d, tt));
        const ld carried = in.a(k, o.values) * state, fresh = in.b(k, o.values);
        state = carried + fresh;
        sc = std::max({sc, std::fabs(state), std::fabs(carried), std::fabs(fresh)});
      }
      for (index_t t = 0; t < len; ++t) {
        const std::size_t k = static_cast<std::size_t>(g.at(d, start + t));
        packed.x.push_back(value(static_cast<float>(hx[k]), signs && hsx[k] != 0));
        if (o.values) packed.x_value.push_back(as_ld(hvx[k]));
      }
      scale.push_back(sc);
    }
    forward_one(o, g, in, n, api);
  }
  // The reference, in the same order.
  for (index_t n = 0; n < N; ++n) {
    const index_t len = o.lengths[static_cast<std::size_t>(n)], start = off[static_cast<std::size_t>(n)];
    for (index_t d = 0; d < D; ++d) {
      const std::size_t s = static_cast<std::size_t>(n * D + d);
      std::vector<ld> xs(static_cast<std::size_t>(len));
      ld state = o.x0 ? in.x0(s, o.values) : 0.0L;
      for (index_t t = 0; t < len; ++t) {
        const index_t i = o.reverse ? len - 1 - t : t;
        const std::size_t k = static_cast<std::size_t>(g.at(d, start + i));
        state = in.a(k, o.values) * state + in.b(k, o.values);
        xs[static_cast<std::size_t>(i)] = state;
      }
      ref.insert(ref.end(), xs.begin(), xs.end());
    }
  }
  // Per (sequence, channel) runs of different lengths: compare run by run.
  std::size_t at = 0;
  for (index_t n = 0; n < N; ++n) {
    const index_t len = o.lengths[static_cast<std::size_t>(n)];
    for (index_t d = 0; d < D; ++d, at += static_cast<std::size_t>(len)) {
      const std::size_t c = static_cast<std::size_t>(n * D + d);
      auto part = [&](const std::vector<ld>& v) {
        return std::vector<ld>(v.begin() + static_cast<std::ptrdiff_t>(at),
                               v.begin() + static_cast<std::ptrdiff_t>(at + static_cast<std::size_t>(len)));
      };
      const std::vector<ld> sc(1, scale[c]), px = part(packed.x), rx = part(ref);
      check_agree<T>("x: packed against the fixed-length API on the sequence alone", px, part(api.x), len, &sc);
      if (o.values)
        check_agree<T>("x (value form): packed against the fixed-length API", part(packed.x_value),
                       part(api.x_value), len, &sc);
      ld worst = 0;  // against the long-double loop, at the fixed-length tests' tolerance
      for (std::size_t t = 0; t < px.size(); ++t) worst = std::max(worst, std::fabs(px[t] - rx[t]) / scale[c]);
      INFO("x against the long-double loop, worst relative difference " << static_cast<double>(worst));
      CHECK(worst <= tolerance<T>());
    }
  }
  if (o.xfinal) {
    std::vector<ld> xf;
    for (std::size_t s = 0; s < states; ++s) xf.push_back(value(static_cast<float>(hxf[s]), signs && hsxf[s] != 0));
    check_agree<T>("x_final: packed against the fixed-length API", xf, api.x_final, 1, &scale);
  }
}

// ---------------------------------------------------------------------------------------
// Backward.

struct backward_out {
  std::vector<ld> da, db, dx0;  // da, db per sequence in order (dense (D, length) each); dx0 (N, D)
};

/// The backward's packed inputs besides the forward's: x (the long-double forward, rounded to
/// T, in log form with signs), the upstream gradient and the final-state gradient.
template <class T>
struct gradient_inputs {
  std::vector<T> lx, dx, dxf;
  std::vector<sign_t> sx;
};

template <class T>
gradient_inputs<T> draw_gradients(parscan_test::rng& r, const case_opts& o, const geometry& g, const inputs<T>& in) {
  gradient_inputs<T> q;
  const std::size_t n = static_cast<std::size_t>(g.size), states = static_cast<std::size_t>(o.N() * o.D);
  q.lx.assign(n, static_cast<T>(0.0f)), q.sx.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) q.dx.push_back(static_cast<T>(static_cast<float>(r.normal())));
  for (std::size_t s = 0; s < states; ++s) q.dxf.push_back(static_cast<T>(static_cast<float>(r.normal())));
  // The upstream gradient meets x as G/x. Where a signed x has nearly cancelled (|x| below 1% of
  // the terms that made it), x recomputed in float by two differently associated scans differs
  // by a large relative amount, and so would G/x: those steps (and x_final's) get G = 0, which
  // contributes exactly nothing on every path, so the comparison stays well conditioned.
  const std::vector<std::int64_t> off = o.offsets();
  for (index_t s = 0; s < o.N(); ++s)
    for (index_t d = 0; d < o.D; ++d) {
      const index_t len = o.lengths[static_cast<std::size_t>(s)];
      const std::size_t state = static_cast<std::size_t>(s * o.D + d);
      ld x = o.x0 ? in.x0(state, o.values) : 0.0L, scale = std::fabs(x);
      for (index_t t = 0; t < len; ++t) {
        const std::size_t k =
            static_cast<std::size_t>(g.at(d, off[static_cast<std::size_t>(s)] + (o.reverse ? len - 1 - t : t)));
        const ld carried = in.a(k, o.values) * x, fresh = in.b(k, o.values);
        x = carried + fresh;
        scale = std::max({scale, std::fabs(x), std::fabs(carried), std::fabs(fresh)});
        q.lx[k] = static_cast<T>(static_cast<float>(std::log(std::fabs(x))));
        q.sx[k] = x < 0 ? 1 : 0;
        const bool cancelled = std::fabs(x) < 0.01L * scale;
        if (cancelled) q.dx[k] = static_cast<T>(0.0f);
        if (cancelled && t == len - 1) q.dxf[state] = static_cast<T>(0.0f);
      }
    }
  return q;
}

/// Per (sequence, channel), the size of the terms its gradients are made of, in long double
/// from the stored inputs (as the fixed-length tests' reference measures it): the upstream
/// term and the carried one of db, times the larger factor of each output.
template <class T>
std::vector<ld> gradient_scales(const case_opts& o, const geometry& g, const inputs<T>& in,
                                const gradient_inputs<T>& q) {
  std::vector<ld> scales;
  const std::vector<std::int64_t> off = o.offsets();
  for (index_t n = 0; n < o.N(); ++n) {
    const index_t len = o.lengths[static_cast<std::size_t>(n)], start = off[static_cast<std::size_t>(n)];
    for (index_t d = 0; d < o.D; ++d) {
      const std::size_t s = static_cast<std::size_t>(n * o.D + d);
      auto k = [&](index_t i) {  // the i-th step computed
        return static_cast<std::size_t>(g.at(d, start + (o.reverse ? len - 1 - i : i)));
      };
      auto X = [&](index_t i) { return value(static_cast<float>(q.lx[k(i)]), q.sx[k(i)] != 0); };
      const ld x0 = o.x0 ? in.x0(s, o.values) : 0.0L, gf = o.dxfinal ? as_ld(q.dxf[s]) : 0.0L;
      ld db_next = 0, a_next = 0, scale = std::fabs(gf) * std::max<ld>(1, std::fabs(x0));
      for (index_t i = len - 1; i >= 0; --i) {
        const ld G = as_ld(q.dx[k(i)]), x = X(i);
        const ld up = o.values ? std::fabs(G) + (i == len - 1 ? std::fabs(gf / x) : 0)
                               : std::fabs((G + (i == len - 1 ? gf : 0)) / x);
        const ld carried = std::fabs(a_next * db_next), a = in.a(k(i), o.values);
        const ld x_prev = i > 0 ? X(i - 1) : x0;
        scale = std::max(scale, std::max(up, carried) *
                                    std::max({ld(1), std::fabs(in.b(k(i), o.values)), std::fabs(a * x_prev)}));
        db_next = up + carried, a_next = std::fabs(a);
      }
      scales.push_back(scale);
    }
  }
  return scales;
}

/// Fills the backward arguments' tensors (pointers of the buffers given) by the case's forms.
template <class T, class Args>
void set_backward(const case_opts& o, Args& g, T* la, sign_t* sa, T* lb, sign_t* sb, T* lx, sign_t* sx, T* lx0,
                  sign_t* sx0, T* dx, T* dxf, T* da, T* db, T* dx0) {
  (o.values ? g.a : g.log_a) = la;
  (o.values ? g.b : g.log_b) = lb;
  (o.values ? g.dx : g.dlog_x) = dx;
  (o.values ? g.da : g.dlog_a) = da;
  (o.values ? g.db : g.dlog_b) = db;
  if (o.x0) (o.values ? g.x0 : g.log_x0) = lx0, (o.values ? g.dx0 : g.dlog_x0) = dx0;
  if (o.signed_ && !o.values) {
    g.a_negative = sa, g.b_negative = sb;
    if (o.x0) g.x0_negative = sx0;
  }
  if (o.x_given) g.log_x = lx, g.x_negative = o.signed_ || o.values ? sx : nullptr;
  if (o.dxfinal) g.dlog_x_final = dxf;
  g.reverse = o.reverse;
}

template <class T>
void backward_one(const case_opts& o, const geometry& g, const inputs<T>& in, const gradient_inputs<T>& q, index_t n,
                  backward_out& out) {
  const index_t D = o.D, len = o.lengths[static_cast<std::size_t>(n)];
  const std::size_t elems = static_cast<std::size_t>(D * len);
  guarded_buffer<T> la(slice(o, g, in.la, n)), lb(slice(o, g, in.lb, n)), lx0(state_slice(in.lx0, n, D));
  guarded_buffer<sign_t> sa(slice(o, g, in.sa, n)), sb(slice(o, g, in.sb, n)), sx0(state_slice(in.sx0, n, D));
  guarded_buffer<T> lx(slice(o, g, q.lx, n)), dx(slice(o, g, q.dx, n)), dxf(state_slice(q.dxf, n, D));
  guarded_buffer<sign_t> sx(slice(o, g, q.sx, n));
  guarded_buffer<T> da(elems), db(elems), dx0(static_cast<std::size_t>(D));
  parscan::log_backward_args<T> b{};
  b.shape = {1, D, len, parscan::recurrence_layout::time_contiguous};
  set_backward(o, b, la.data(), sa.data(), lb.data(), sb.data(), lx.data(), sx.data(), lx0.data(), sx0.data(),
               dx.data(), dxf.data(), da.data(), db.data(), dx0.data());
  const status st = parscan::log_recurrence_backward(parscan_test::backend(), b);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);
  const std::vector<ld> hda = plain(da.download()), hdb = plain(db.download());
  out.da.insert(out.da.end(), hda.begin(), hda.end());
  out.db.insert(out.db.end(), hdb.begin(), hdb.end());
  if (o.x0) {
    const std::vector<ld> h = plain(dx0.download());
    out.dx0.insert(out.dx0.end(), h.begin(), h.end());
  }
}

template <class T>
void run_backward(const case_opts& o) {
  INFO("log varlen backward <" << (sizeof(T) == 2 ? "bfloat16" : "float") << "> " << o.str());
  PARSCAN_TEST_RNG(r, std::string("log varlen backward ") + std::to_string(sizeof(T)) + " " + o.str());
  const geometry g = packed_geometry(o);
  const index_t D = o.D, N = o.N();
  const std::size_t states = static_cast<std::size_t>(N * D), size = static_cast<std::size_t>(g.size);
  const inputs<T> in = draw<T>(r, o, g);
  const gradient_inputs<T> q = draw_gradients(r, o, g, in);
  const std::vector<bool> used = used_mask(o, g);

  guarded_buffer<T> la(in.la), lb(in.lb), lx0(in.lx0), lx(q.lx), dx(q.dx), dxf(q.dxf);
  guarded_buffer<sign_t> sa(in.sa), sb(in.sb), sx0(in.sx0), sx(q.sx);
  guarded_buffer<T> da(size), db_own(size), dx0(states);
  guarded_buffer<T>& db = o.in_place ? dx : db_own;  // the b gradient over the upstream one
  const auto cu = guarded_buffer<std::int64_t>(o.offsets());

  parscan::log_varlen_backward_args<T> b{};
  b.shape = varlen_shape{N, D, o.total(), cu.data(), api_layout(o.layout)};
  b.a_strides = b.b_strides = b.x_strides = b.dx_strides = b.da_strides = b.db_strides = strides_of(g);
  set_backward(o, b, la.data(), sa.data(), lb.data(), sb.data(), lx.data(), sx.data(), lx0.data(), sx0.data(),
               dx.data(), dxf.data(), da.data(), db.data(), dx0.data());
  const status st = parscan::log_recurrence_backward(parscan_test::backend(), b);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);

  check_written("the a gradient", da, used);
  check_written("the b gradient", db, used, o.in_place ? &q.dx : nullptr);
  if (o.x0) {
    CHECK(dx0.all_written());
    CHECK(dx0.guards_intact());
  } else {
    CHECK(dx0.untouched());
  }
  check_unchanged("log|a|", la, in.la);
  check_unchanged("log|b|", lb, in.lb);
  check_unchanged("log|x|", lx, q.lx);
  check_unchanged("x's signs", sx, q.sx);
  check_unchanged("x0", lx0, in.lx0);
  check_unchanged("dlog_x_final", dxf, q.dxf);
  if (!o.in_place) check_unchanged("the upstream gradient", dx, q.dx);

  const std::vector<T> hda = da.download(), hdb = db.download();
  backward_out packed, api;
  const std::vector<std::int64_t> off = o.offsets();
  for (index_t n = 0; n < N; ++n) {
    const index_t len = o.lengths[static_cast<std::size_t>(n)], start = off[static_cast<std::size_t>(n)];
    for (index_t d = 0; d < D; ++d)
      for (index_t t = 0; t < len; ++t) {
        const std::size_t k = static_cast<std::size_t>(g.at(d, start + t));
        packed.da.push_back(as_ld(hda[k])), packed.db.push_back(as_ld(hdb[k]));
      }
    backward_one(o, g, in, q, n, api);
  }
  const std::vector<ld> scales = gradient_scales(o, g, in, q);
  const double tol = 2 * backward_tolerance<T>();
  std::size_t at = 0;
  for (index_t n = 0; n < N; ++n) {
    const index_t len = o.lengths[static_cast<std::size_t>(n)];
    for (index_t d = 0; d < D; ++d, at += static_cast<std::size_t>(len)) {
      auto part = [&](const std::vector<ld>& v) {
        return std::vector<ld>(v.begin() + static_cast<std::ptrdiff_t>(at),
                               v.begin() + static_cast<std::ptrdiff_t>(at + static_cast<std::size_t>(len)));
      };
      const std::vector<ld> sc(1, scales[static_cast<std::size_t>(n * D + d)]);
      check_agree<T>("the a gradient: packed against the fixed-length API", part(packed.da), part(api.da), len, &sc,
                     tol);
      check_agree<T>("the b gradient: packed against the fixed-length API", part(packed.db), part(api.db), len, &sc,
                     tol);
    }
  }
  if (o.x0)
    check_agree<T>("the x0 gradient: packed against the fixed-length API", plain(dx0.download()), api.dx0, 1, &scales,
                   tol);
}

// ---------------------------------------------------------------------------------------
// The cases.

/// Empty sequences among others, 1, primes, tile sizes ± 1, no sequences, only empty ones.
inline std::vector<std::vector<index_t>> length_mixes() {
  std::vector<std::vector<index_t>> v = {
      {0, 1, 7, 0, 31, 32, 33, 1, 0}, {127, 128, 129, 255, 256, 257}, {1023, 0, 1025, 13}, {1}, {0, 0, 0}, {},
  };
  if (parscan_test::on_device) v.push_back({4097, 3, 1000, 0, 2});
  return v;
}

/// Every length mix in every layout, D = 1, 5 and 40, the options varied with the case index.
template <class T>
void forward_cases() {
  int i = 0;
  for (const std::vector<index_t>& lengths : length_mixes())
    for (index_t D : {index_t(1), index_t(5), index_t(40)})
      for (lay l : {lay::cl, lay::tc, lay::s3}) {
        ++i;
        case_opts o;
        o.lengths = lengths, o.D = D, o.layout = l;
        o.trailing = i % 4 == 1 ? 3 : 0;
        o.signed_ = i % 3 != 0, o.values = i % 5 == 2;
        o.x0 = i % 2 == 0, o.xfinal = i % 5 != 3, o.reverse = (i / 2) % 2 == 1, o.in_place = i % 7 == 4;
        run_forward<T>(o);
      }
}

template <class T>
void backward_cases() {
  int i = 0;
  for (const std::vector<index_t>& lengths : length_mixes())
    for (index_t D : {index_t(1), index_t(5), index_t(40)})
      for (lay l : {lay::cl, lay::tc, lay::s3}) {
        ++i;
        case_opts o;
        o.lengths = lengths, o.D = D, o.layout = l;
        o.trailing = i % 4 == 2 ? 2 : 0;
        o.signed_ = i % 3 != 1, o.values = i % 5 == 1;
        o.x0 = i % 2 == 1, o.dxfinal = i % 3 != 0, o.x_given = i % 4 < 2, o.reverse = (i / 2) % 3 == 1;
        o.in_place = i % 7 == 3;
        run_backward<T>(o);
      }
}

/// Every option in both dense layouts, forward and backward.
template <class T>
void every_option() {
  for (lay l : {lay::cl, lay::tc})
    for (bool x0 : {false, true})
      for (bool rev : {false, true})
        for (int form = 0; form < 3; ++form) {  // positive log form, signed log form, value form
          case_opts o;
          o.lengths = {5, 0, 130, 1, 33}, o.D = 7, o.layout = l, o.x0 = x0, o.reverse = rev;
          o.signed_ = form == 1, o.values = form == 2;
          run_forward<T>(o);
          for (bool x_given : {false, true}) {
            o.x_given = x_given, o.dxfinal = x0 != x_given;
            run_backward<T>(o);
          }
        }
}

/// The packed forward of case `o` on `data` (log form, with sign arrays, x0 given): log|x| and
/// its signs, log|x_final| and its signs, downloaded.
template <class T>
struct forward_result {
  std::vector<T> lx, lxf;
  std::vector<sign_t> sx, sxf;
};
template <class T>
forward_result<T> packed_forward(const case_opts& o, const inputs<T>& data) {
  const geometry g = packed_geometry(o);
  const std::size_t states = static_cast<std::size_t>(o.N() * o.D);
  guarded_buffer<T> la(data.la), lb(data.lb), lx0(data.lx0), lx(static_cast<std::size_t>(g.size)), lxf(states);
  guarded_buffer<sign_t> sa(data.sa), sb(data.sb), sx0(data.sx0), sx(static_cast<std::size_t>(g.size)), sxf(states);
  const guarded_buffer<std::int64_t> cu(o.offsets());
  parscan::log_varlen_forward_args<T> f{};
  f.shape = varlen_shape{o.N(), o.D, o.total(), cu.data(), api_layout(o.layout)};
  f.a_strides = f.b_strides = f.x_strides = strides_of(g);
  f.log_a = la.data(), f.a_negative = sa.data(), f.log_b = lb.data(), f.b_negative = sb.data();
  f.log_x0 = lx0.data(), f.x0_negative = sx0.data();
  f.log_x = lx.data(), f.x_negative = sx.data(), f.log_x_final = lxf.data(), f.x_final_negative = sxf.data();
  f.reverse = o.reverse;
  const status st = parscan::log_recurrence_forward(parscan_test::backend(), f);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);
  return {lx.download(), lxf.download(), sx.download(), sxf.download()};
}

/// Chunked use across calls: every sequence of case `o` cut in two where its steps are
/// processed, part 0 the first third of the steps computed, part 1 the rest.
struct chunk_cut {
  const case_opts& o;
  /// The length of part k of sequence n; `from` where it starts in the sequence.
  index_t length(int k, index_t n, index_t& from) const {
    const index_t len = o.lengths[static_cast<std::size_t>(n)], first = len / 3;
    const index_t length = k == 0 ? first : len - first;
    from = (k == 0) != o.reverse ? 0 : len - length;
    return length;
  }
  /// Part k as a case of its own.
  case_opts part(int k) const {
    case_opts c = o;
    index_t from;
    for (index_t n = 0; n < o.N(); ++n) c.lengths[static_cast<std::size_t>(n)] = length(k, n, from);
    return c;
  }
  /// Each element of part k: its position in the part's packed tensor and in the whole's.
  std::vector<std::pair<std::size_t, std::size_t>> positions(int k) const {
    const case_opts c = part(k);
    const geometry g = packed_geometry(o), gc = packed_geometry(c);
    std::vector<std::pair<std::size_t, std::size_t>> at;
    for (index_t n = 0; n < o.N(); ++n) {
      index_t from;
      const index_t len = length(k, n, from);
      for (index_t d = 0; d < o.D; ++d)
        for (index_t t = 0; t < len; ++t)
          at.emplace_back(static_cast<std::size_t>(gc.at(d, c.offsets()[static_cast<std::size_t>(n)] + t)),
                          static_cast<std::size_t>(g.at(d, o.offsets()[static_cast<std::size_t>(n)] + from + t)));
    }
    return at;
  }
  /// Part k's packed tensor, taken from the whole's.
  template <class V>
  std::vector<V> take(int k, const std::vector<V>& whole) const {
    std::vector<V> v(static_cast<std::size_t>(packed_geometry(part(k)).size));
    for (const auto& [in_part, in_whole] : positions(k)) v[in_part] = whole[in_whole];
    return v;
  }
  /// Part k's inputs, its x0 (log magnitudes and signs) given.
  template <class T>
  inputs<T> take(int k, const inputs<T>& whole, const std::vector<T>& lx0, const std::vector<sign_t>& sx0) const {
    inputs<T> d;
    d.la = take(k, whole.la), d.lb = take(k, whole.lb), d.sa = take(k, whole.sa), d.sb = take(k, whole.sb);
    d.lx0 = lx0, d.sx0 = sx0;
    return d;
  }
};

/// Chunked against one call over part k of `cut`: the values of got (the part's packed tensor,
/// log magnitudes and signs, or plain values without signs) at the steps of want (the whole's).
template <class T>
void check_chunk_part(const char* what, const chunk_cut& cut, int k, const std::vector<T>& got,
                      const std::vector<sign_t>* got_neg, const std::vector<T>& want,
                      const std::vector<sign_t>* want_neg, double tol, bool exact) {
  std::vector<ld> g, w;
  for (const auto& [in_part, in_whole] : cut.positions(k)) {
    g.push_back(got_neg ? value(static_cast<float>(got[in_part]), (*got_neg)[in_part] != 0) : as_ld(got[in_part]));
    w.push_back(want_neg ? value(static_cast<float>(want[in_whole]), (*want_neg)[in_whole] != 0)
                         : as_ld(want[in_whole]));
  }
  INFO("part " << k);
  check_chunks<T>(what, g, w, tol, exact);
}

/// Chunked use across calls, forward: the first part's log|x_final| and signs the second
/// part's x0. Both parts' x and the second's x_final equal one call's: bitwise for float on the
/// host (the state crosses the cut exactly, as log|x| in float), within the forward tolerance
/// of each sequence's size otherwise.
template <class T>
void chunked_forward() {
  for (lay l : {lay::cl, lay::tc})
    for (bool rev : {false, true}) {
      case_opts o;
      o.lengths = {0, 1, 7, 31, 32, 33, 100, 257, 0, 64}, o.D = 5, o.layout = l, o.reverse = rev;
      o.signed_ = true, o.x0 = true;
      INFO("log varlen chunked forward " << o.str());
      PARSCAN_TEST_RNG(r, std::string("log varlen chunked ") + std::to_string(sizeof(T)) + " " + o.str());
      const inputs<T> in = draw<T>(r, o, packed_geometry(o));
      const forward_result<T> whole = packed_forward(o, in);
      const chunk_cut cut{o};
      forward_result<T> parts[2];
      for (int k = 0; k < 2; ++k) {
        parts[k] = packed_forward(cut.part(k), cut.take(k, in, k == 0 ? in.lx0 : parts[0].lxf,
                                                        k == 0 ? in.sx0 : parts[0].sxf));
        check_chunk_part<T>("x", cut, k, parts[k].lx, &parts[k].sx, whole.lx, &whole.sx, tolerance<T>(), true);
      }
      std::vector<ld> got, want;
      for (std::size_t e = 0; e < whole.lxf.size(); ++e) {
        got.push_back(value(static_cast<float>(parts[1].lxf[e]), parts[1].sxf[e] != 0));
        want.push_back(value(static_cast<float>(whole.lxf[e]), whole.sxf[e] != 0));
      }
      check_chunks<T>("x_final", got, want, tolerance<T>(), true);
    }
}

/// The packed backward of case `o` (log form, signs given, x0 given) from the forward's log|x|
/// and signs, the upstream gradient dlog|x| and dlog|x_final|: dlog|a|, dlog|b|, dlog|x0|.
template <class T>
struct backward_result {
  std::vector<T> dla, dlb, dlx0;
};
template <class T>
backward_result<T> packed_backward(const case_opts& o, const inputs<T>& data, const std::vector<T>& lx_,
                                   const std::vector<sign_t>& sx_, const std::vector<T>& dx_,
                                   const std::vector<T>& dxf_) {
  const geometry g = packed_geometry(o);
  const std::size_t states = static_cast<std::size_t>(o.N() * o.D);
  guarded_buffer<T> la(data.la), lb(data.lb), lx0(data.lx0), lx(lx_), dx(dx_), dxf(dxf_);
  guarded_buffer<sign_t> sa(data.sa), sb(data.sb), sx0(data.sx0), sx(sx_);
  guarded_buffer<T> da(static_cast<std::size_t>(g.size)), db(static_cast<std::size_t>(g.size)), dx0(states);
  const guarded_buffer<std::int64_t> cu(o.offsets());
  parscan::log_varlen_backward_args<T> b{};
  b.shape = varlen_shape{o.N(), o.D, o.total(), cu.data(), api_layout(o.layout)};
  b.a_strides = b.b_strides = b.x_strides = b.dx_strides = b.da_strides = b.db_strides = strides_of(g);
  b.log_a = la.data(), b.a_negative = sa.data(), b.log_b = lb.data(), b.b_negative = sb.data();
  b.log_x0 = lx0.data(), b.x0_negative = sx0.data(), b.log_x = lx.data(), b.x_negative = sx.data();
  b.dlog_x = dx.data(), b.dlog_x_final = dxf.data(), b.dlog_a = da.data(), b.dlog_b = db.data();
  b.dlog_x0 = dx0.data();
  b.reverse = o.reverse;
  const status st = parscan::log_recurrence_backward(parscan_test::backend(), b);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);
  return {da.download(), db.download(), dx0.download()};
}

/// Chunked use across calls, backward: the later part first, from the whole's dlog|x_final|,
/// its dlog|x0| the earlier part's dlog|x_final|; each part reads the forward's x and the
/// state entering it (the earlier part's x_final). Both parts' gradients and the earlier part's
/// dlog|x0| equal one call's within the backward tolerance of the largest: the gradient crosses
/// the cut as dL/dlog|x| = x·dL/dx, rounded once more than in one call (and the state in T).
/// Positive inputs: a signed x that nearly cancels makes G/x ill-conditioned (draw_gradients).
template <class T>
void chunked_backward() {
  for (lay l : {lay::cl, lay::tc})
    for (bool rev : {false, true}) {
      case_opts o;
      o.lengths = {0, 1, 7, 31, 32, 33, 100, 257, 0, 64}, o.D = 5, o.layout = l, o.reverse = rev, o.x0 = true;
      INFO("log varlen chunked backward " << o.str());
      PARSCAN_TEST_RNG(r, std::string("log varlen chunked backward ") + std::to_string(sizeof(T)) + " " + o.str());
      const geometry g = packed_geometry(o);
      const inputs<T> in = draw<T>(r, o, g);
      std::vector<T> dx, dxf;
      for (index_t i = 0; i < g.size; ++i) dx.push_back(static_cast<T>(static_cast<float>(r.normal())));
      for (index_t s = 0; s < o.N() * o.D; ++s) dxf.push_back(static_cast<T>(static_cast<float>(r.normal())));
      const forward_result<T> x = packed_forward(o, in);
      const backward_result<T> whole = packed_backward(o, in, x.lx, x.sx, dx, dxf);
      const chunk_cut cut{o};
      const inputs<T> first = cut.take(0, in, in.lx0, in.sx0);
      const forward_result<T> between = packed_forward(cut.part(0), first);
      const backward_result<T> later =
          packed_backward(cut.part(1), cut.take(1, in, between.lxf, between.sxf), cut.take(1, x.lx), cut.take(1, x.sx),
                          cut.take(1, dx), dxf);
      const backward_result<T> earlier =
          packed_backward(cut.part(0), first, cut.take(0, x.lx), cut.take(0, x.sx), cut.take(0, dx), later.dlx0);
      const double tol = backward_tolerance<T>();
      for (int k = 0; k < 2; ++k) {
        const backward_result<T>& got = k == 0 ? earlier : later;
        check_chunk_part<T>("dlog|a|", cut, k, got.dla, nullptr, whole.dla, nullptr, tol, false);
        check_chunk_part<T>("dlog|b|", cut, k, got.dlb, nullptr, whole.dlb, nullptr, tol, false);
      }
      check_chunks<T>("dlog|x0|", plain(earlier.dlx0), plain(whole.dlx0), tol, false);
    }
}

/// More blocks than a wave of the device in each loop: 600 sequences of 0–40 steps with long
/// ones late in the index order; channel-last D = 64 with signs (the lane loop's 1200 blocks
/// take the sequences longest first) and without (on CUDA the staged lane tiles in packs over
/// every sequence's tiles), time-contiguous (the warp loop), strided (a thread a channel).
template <class T>
void many_sequences() {
  std::vector<index_t> lengths;
  for (index_t i = 0; i < 600; ++i) lengths.push_back(i % 13 == 5 ? 0 : (i * 37) % 41);
  lengths[581] = 2500, lengths[590] = 700, lengths[7] = 1;
  int i = 0;
  for (lay l : {lay::cl, lay::tc, lay::s3, lay::cl}) {
    ++i;
    case_opts o;
    o.lengths = lengths, o.layout = l, o.D = parscan_test::on_device && l == lay::cl ? 64 : 3;
    o.signed_ = i != 4, o.x0 = i != 2, o.reverse = i == 2;
    run_forward<T>(o);
    o.x_given = i != 1, o.dxfinal = true;
    run_backward<T>(o);
  }
}

/// Channel-last packed sequences in whole 16-byte chunks without sign arrays run in the chunk
/// loop on the CUDA backend (log_channel_last_chunks.cuh), a block a sequence's group of 32
/// channels, where those jobs fill the device: 60 sequences of lengths around its tiles of 128
/// (float) and 256 (bfloat16) steps, and empty ones, D = 128 (240 jobs), both directions.
template <class T>
void chunk_loop_cases() {
  std::vector<index_t> lengths;
  for (index_t i = 0; i < 60; ++i) lengths.push_back(i % 11 == 3 ? 0 : i % 7 == 1 ? 256 : (i * 53) % 600 + 1);
  for (int k = 0; k < 4; ++k) {
    case_opts o;
    o.lengths = lengths, o.D = 128, o.layout = lay::cl;
    o.x0 = k % 2 == 0, o.reverse = k >= 2, o.xfinal = k != 1, o.trailing = k == 3 ? 5 : 0;
    run_forward<T>(o);
  }
}

/// Bad shapes, offsets and tensors: the status, and nothing written. Offsets in host memory
/// (host backend) are checked in full; on CUDA only what is readable without the device.
template <class T>
void bad_arguments() {
  const index_t D = 3, T_ = 10;
  guarded_buffer<T> la(std::vector<T>(static_cast<std::size_t>(D * T_), T(-0.5f))), lb(la.download());
  guarded_buffer<T> lx(static_cast<std::size_t>(D * T_)), lxf(static_cast<std::size_t>(2 * D));
  auto forward = [&](const std::int64_t* cu, index_t N, T* x_final) {
    parscan::log_varlen_forward_args<T> f{};
    f.shape = varlen_shape{N, D, T_, cu, parscan::recurrence_layout::channel_last};
    f.log_a = la.data(), f.log_b = lb.data(), f.log_x = lx.data(), f.log_x_final = x_final;
    const status st = parscan::log_recurrence_forward(parscan_test::backend(), f);
    PARSCAN_TEST_SYNC();
    return st;
  };
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
  for (const bad& c : cases) {
    if (c.host_only && parscan_test::on_device) continue;
    INFO(c.what);
    const guarded_buffer<std::int64_t> cu(c.offsets);
    CHECK(forward(cu.data(), c.N, lxf.data()) == c.expected);
    CHECK(lx.untouched());
    CHECK(lxf.untouched());
  }
  const guarded_buffer<std::int64_t> cu(std::vector<std::int64_t>{0, 4, 10});
  {
    INFO("null cu_seqlens");
    CHECK(forward(nullptr, 2, lxf.data()) == status::null_pointer);
    CHECK(forward(nullptr, 0, nullptr) == status::null_pointer);
  }
  {
    INFO("x_final over x");
    CHECK(forward(cu.data(), 2, lx.data() + 1) == status::overlapping_output);
  }
  {
    INFO("N·D overflows");
    CHECK(forward(cu.data(), index_t(1) << 62, nullptr) == status::size_overflow);
  }
  {
    INFO("signed inputs without x_final's sign array (N·D states)");
    const guarded_buffer<sign_t> sa(std::vector<sign_t>(static_cast<std::size_t>(D * T_), 1));
    guarded_buffer<sign_t> sx(static_cast<std::size_t>(D * T_));
    parscan::log_varlen_forward_args<T> f{};
    f.shape = varlen_shape{2, D, T_, cu.data(), parscan::recurrence_layout::channel_last};
    f.log_a = la.data(), f.a_negative = sa.data(), f.log_b = lb.data(), f.log_x = lx.data(), f.x_negative = sx.data();
    f.log_x_final = lxf.data();
    CHECK(parscan::log_recurrence_forward(parscan_test::backend(), f) == status::null_pointer);
    CHECK(sx.untouched());
  }
  CHECK(lx.untouched());
  CHECK(lxf.untouched());
  {
    INFO("backward: x0 without its gradient, bad offsets");
    guarded_buffer<T> dx(la.download()), da(static_cast<std::size_t>(D * T_)), db(static_cast<std::size_t>(D * T_));
    const std::vector<T> states(static_cast<std::size_t>(2 * D), T(0.25f));
    guarded_buffer<T> x0(states), dx0(states.size());
    auto backward = [&](const std::int64_t* offsets, T* dlog_x0) {
      parscan::log_varlen_backward_args<T> b{};
      b.shape = varlen_shape{2, D, T_, offsets, parscan::recurrence_layout::channel_last};
      b.log_a = la.data(), b.log_b = lb.data(), b.log_x0 = x0.data(), b.dlog_x = dx.data();
      b.dlog_a = da.data(), b.dlog_b = db.data(), b.dlog_x0 = dlog_x0;
      const status st = parscan::log_recurrence_backward(parscan_test::backend(), b);
      PARSCAN_TEST_SYNC();
      return st;
    };
    CHECK(backward(cu.data(), nullptr) == status::null_pointer);
    if (!parscan_test::on_device) {
      const guarded_buffer<std::int64_t> bad(std::vector<std::int64_t>{0, 7, 5});
      CHECK(backward(bad.data(), dx0.data()) == status::invalid_offsets);
    }
    CHECK(backward(nullptr, dx0.data()) == status::null_pointer);
    CHECK(da.untouched());
    CHECK(db.untouched());
    CHECK(dx0.untouched());
  }
}

}  // namespace log_varlen_test

#define LOG_VARLEN_NAME(title) PARSCAN_TEST_NAME("log varlen recurrence " title)
#define LOG_VARLEN_TAGS(tags) PARSCAN_TEST_TAGS("[log][varlen]" tags)
#define LOG_VARLEN_FOR_EACH_DTYPE(title, tags, fn)                                                                 \
  TEST_CASE(LOG_VARLEN_NAME(title " <float>"), LOG_VARLEN_TAGS(tags)) { log_varlen_test::fn<float>(); }            \
  TEST_CASE(LOG_VARLEN_NAME(title " <bfloat16>"), LOG_VARLEN_TAGS(tags)) { log_varlen_test::fn<parscan::bfloat16>(); }

LOG_VARLEN_FOR_EACH_DTYPE("forward: length mixes x layouts x options", "[forward]", forward_cases)
LOG_VARLEN_FOR_EACH_DTYPE("backward: length mixes x layouts x options", "[backward]", backward_cases)
LOG_VARLEN_FOR_EACH_DTYPE("every form and option in both dense layouts", "[forward][backward]", every_option)
LOG_VARLEN_FOR_EACH_DTYPE("many sequences: more blocks than a wave", "[forward][backward]", many_sequences)
LOG_VARLEN_FOR_EACH_DTYPE("chunked forward across calls equals one call", "[forward]", chunked_forward)
LOG_VARLEN_FOR_EACH_DTYPE("channel-last packed sequences in 16-byte chunks", "[forward]", chunk_loop_cases)
LOG_VARLEN_FOR_EACH_DTYPE("chunked backward across calls equals one call", "[backward]", chunked_backward)
LOG_VARLEN_FOR_EACH_DTYPE("bad offsets and arguments return their status and write nothing", "[errors]",
                          bad_arguments)
