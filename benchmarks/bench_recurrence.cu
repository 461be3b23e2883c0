// benchmarks/bench_recurrence.cu — the gated recurrence x[t] = a[t]·x[t-1] + b[t] on the
// CUDA backend, over the cases of the speed table in docs/benchmarks.md. Effective bandwidth
// counts each tensor once: forward reads a, b and writes x; backward reads a, x, dx and writes
// da, db. A few sequences of every case are checked against a float64 host loop.
// A backward with x = null recomputes x from b (and x0) first; its bytes are counted as the
// call's own: a, b, dx read, da, db written.
//   usage: bench_recurrence [--json out.json] [--quick] [--filter <part of a row name>]
//                           [--calls-per-sample N]  (bench_common.cuh: time N calls or more a sample)
#include <cmath>
#include <complex>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <parscan/log_recurrence.hpp>
#include <parscan/parscan.hpp>

#include "bench_common.cuh"

namespace {

using parscan::index_t;

using bench::mix;
using bench::unit;

using bench::dtype_name;

template <class T>
__device__ T make_value(float u, float v) { return T(u); }
template <>
__device__ parscan::complex<float> make_value<parscan::complex<float>>(float u, float v) { return {u, v}; }

// Gates with magnitude in (0.9, 1) (random phase for complex), values in (-1, 1).
template <class T>
__global__ void fill(T* p, index_t n, std::uint32_t seed, bool gate) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(gridDim.x) * blockDim.x) {
    const float u = unit(2 * i, seed), v = unit(2 * i + 1, seed);
    if (gate) {
      const float mag = 0.9f + 0.1f * u, ph = 0.2f * (v - 0.5f);
      p[i] = make_value<T>(mag * cosf(ph), mag * sinf(ph));
    } else {
      p[i] = make_value<T>(2 * u - 1, 2 * v - 1);
    }
  }
}

template <class T> std::complex<double> to_c(const T& v) { return {double(float(v)), 0.0}; }
template <> std::complex<double> to_c(const parscan::complex<float>& v) { return {v.real(), v.imag()}; }

struct tensor {
  void* p = nullptr;
  size_t bytes = 0;
};

struct case_spec {
  std::string name;
  index_t B, D, T;
  parscan::recurrence_layout layout;
  bool backward = false;
  bool state = false;      // x0 and x_final
  bool recompute = false;  // backward given b instead of x
};

template <class T>
std::vector<T> download_sequence(const T* base, const parscan::recurrence_shape& sh, index_t s) {
  const auto st = parscan::dense_strides(sh);
  const index_t b = s / sh.channels, d = s % sh.channels;
  std::vector<T> h(sh.length);
  BENCH_CHECK(cudaMemcpy2D(h.data(), sizeof(T), base + b * st.batch + d * st.channel, st.time * sizeof(T), sizeof(T),
                           sh.length, cudaMemcpyDeviceToHost));
  return h;
}

// Checks forward x (and backward db, da) of a few sequences against float64 loops.
template <class T>
double check_sequences(const parscan::recurrence_shape& sh, const T* a, const T* b, const T* x, const T* dx,
                       const T* da, const T* db, bool backward) {
  double worst = 0;
  const index_t S = sh.batch * sh.channels;
  for (index_t s : {index_t(0), S / 2, S - 1}) {
    const auto ha = download_sequence(a, sh, s), hb = download_sequence(b, sh, s), hx = download_sequence(x, sh, s);
    std::vector<std::complex<double>> ref(sh.length);
    std::complex<double> st = 0;
    double scale = 0, err = 0;
    for (index_t t = 0; t < sh.length; ++t) {
      st = to_c(ha[t]) * st + to_c(hb[t]);
      ref[t] = st;
      scale = std::max(scale, std::abs(st));
      err = std::max(err, std::abs(to_c(hx[t]) - st));
    }
    worst = std::max(worst, err / scale);
    if (!backward) continue;
    const auto hdx = download_sequence(dx, sh, s), hda = download_sequence(da, sh, s), hdb = download_sequence(db, sh, s);
    std::complex<double> g = 0, a_next = 1;
    double gscale = 0, gerr = 0, ascale = 0, aerr = 0;
    for (index_t t = sh.length - 1; t >= 0; --t) {
      g = to_c(hdx[t]) + std::conj(a_next) * g;
      const std::complex<double> ga = g * std::conj(t > 0 ? to_c(hx[t - 1]) : std::complex<double>(0));
      gscale = std::max(gscale, std::abs(g));
      gerr = std::max(gerr, std::abs(to_c(hdb[t]) - g));
      ascale = std::max(ascale, std::abs(ga));
      aerr = std::max(aerr, std::abs(to_c(hda[t]) - ga));
      a_next = to_c(ha[t]);
    }
    worst = std::max({worst, gerr / gscale, aerr / ascale});
  }
  return worst;
}

template <class T>
bench::row run_case(const case_spec& c, double copy, double& max_err) {
  const parscan::recurrence_shape sh{c.B, c.D, c.T, c.layout};
  const index_t n = c.B * c.D * c.T, S = c.B * c.D;
  const size_t bytes = size_t(n) * sizeof(T);
  const int tensors = c.backward ? 5 : 3;
  const int rot = bench::rotation_for(size_t(tensors) * bytes);
  struct set {
    T *a, *b, *x, *dx, *da, *db, *x0, *xf, *dx0;
  };
  std::vector<set> sets(rot);
  for (int r = 0; r < rot; ++r) {
    set& z = sets[r];
    z = {};
    BENCH_CHECK(cudaMalloc(&z.a, bytes));
    BENCH_CHECK(cudaMalloc(&z.b, bytes));
    BENCH_CHECK(cudaMalloc(&z.x, bytes));
    fill<<<2048, 256>>>(z.a, n, 11u + r, true);
    fill<<<2048, 256>>>(z.b, n, 101u + r, false);
    if (c.backward) {
      BENCH_CHECK(cudaMalloc(&z.dx, bytes));
      BENCH_CHECK(cudaMalloc(&z.da, bytes));
      BENCH_CHECK(cudaMalloc(&z.db, bytes));
      fill<<<2048, 256>>>(z.dx, n, 1001u + r, false);
    }
    if (c.state) {
      BENCH_CHECK(cudaMalloc(&z.x0, S * sizeof(T)));
      BENCH_CHECK(cudaMalloc(&z.xf, S * sizeof(T)));
      fill<<<64, 256>>>(z.x0, S, 7u + r, false);
    }
    // The forward output feeds the backward.
    parscan::gated_forward_args<T> f{};
    f.shape = sh, f.a = z.a, f.b = z.b, f.x = z.x;
    if (parscan::gated_recurrence_forward(parscan::cuda_backend{}, f) != parscan::status::success) std::exit(1);
  }
  BENCH_CHECK(cudaDeviceSynchronize());
  parscan::cuda_backend be{};
  size_t ws_bytes = 0;
  auto call = [&](int i) {
    const set& z = sets[i % rot];
    parscan::status s;
    if (c.backward) {
      parscan::gated_backward_args<T> g{};
      g.shape = sh, g.a = z.a, g.dx = z.dx, g.da = z.da, g.db = z.db;
      if (c.recompute) g.b = z.b;
      else g.x = z.x;
      if (!ws_bytes) ws_bytes = parscan::gated_recurrence_workspace_size(g) + 1;
      s = parscan::gated_recurrence_backward(be, g);
    } else {
      parscan::gated_forward_args<T> f{};
      f.shape = sh, f.a = z.a, f.b = z.b, f.x = z.x, f.x0 = z.x0, f.x_final = z.xf;
      if (!ws_bytes) ws_bytes = parscan::gated_recurrence_workspace_size(f) + 1;
      s = parscan::gated_recurrence_forward(be, f);
    }
    if (s != parscan::status::success) std::printf("%s: %s\n", c.name.c_str(), parscan::to_string(s)), std::exit(1);
  };
  // Time with caller-provided workspace, as a framework would pass it.
  call(0);
  void* ws = nullptr;
  BENCH_CHECK(cudaMalloc(&ws, ws_bytes));
  be.workspace = ws, be.workspace_bytes = ws_bytes;
  call(0);
  BENCH_CHECK(cudaDeviceSynchronize());
  const double err = c.state ? 0.0
                             : check_sequences<T>(sh, sets[0].a, sets[0].b, sets[0].x, sets[0].dx, sets[0].da,
                                                  sets[0].db, c.backward);
  max_err = std::max(max_err, err);
  const double us = bench::median_us(call, 25, 3);
  for (set& z : sets)
    for (T* p : {z.a, z.b, z.x, z.dx, z.da, z.db, z.x0, z.xf})
      if (p) BENCH_CHECK(cudaFree(p));
  BENCH_CHECK(cudaFree(ws));
  const double gbs = double(tensors) * bytes / us / 1e3;
  const char* lay = c.layout == parscan::recurrence_layout::channel_last ? "(B,T,D)" : "(B,D,T)";
  return {c.name, dtype_name<T>::v, lay, c.backward ? "bwd" : "fwd",
          std::to_string(c.B) + "x" + std::to_string(c.D) + "x" + std::to_string(c.T), us, gbs, 100 * gbs / copy, err};
}

// Log-space recurrence (log_recurrence.hpp), signed inputs: log|a| in (log 0.9, 0), log|b| in
// (-2, 0), signs random. Bytes count each tensor once, a sign byte with its value: forward reads
// (log a, sign), (log b, sign) and writes (log x, sign); backward reads those three and dlog x
// and writes dlog a, dlog b. Sequence 0's forward is checked against a float64 loop.
template <class T>
__global__ void fill_log(T* logv, std::uint8_t* neg, index_t n, std::uint32_t seed, float lo, float hi) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(gridDim.x) * blockDim.x) {
    logv[i] = T(lo + (hi - lo) * unit(2 * i, seed));
    if (neg) neg[i] = unit(2 * i + 1, seed) < 0.5f;
  }
}

/// The log-space recurrence over (B, D, T) steps. Time-contiguous: everything in log form with
/// sign arrays (signed a and b). Channel-last: the form gated layers use, log a of positive
/// gates (no sign array) and b as signed values; the results in log form (log|x| and signs).
template <class T>
bench::row run_log_case(const std::string& name, index_t B, index_t D, index_t T_len, bool backward,
                        parscan::recurrence_layout layout, double copy, double& max_err) {
  const bool lanes = layout == parscan::recurrence_layout::channel_last;
  const parscan::recurrence_shape sh{B, D, T_len, layout};
  const index_t n = B * D * T_len, step = lanes ? D : 1;  // sequence 0's step stride
  const size_t vb = size_t(n) * sizeof(T), sb = size_t(n);
  T *la, *lb, *lx, *dlx = nullptr, *dla = nullptr, *dlb = nullptr;
  std::uint8_t *na = nullptr, *nb = nullptr, *nx;
  BENCH_CHECK(cudaMalloc(&la, vb));
  BENCH_CHECK(cudaMalloc(&lb, vb));
  BENCH_CHECK(cudaMalloc(&lx, vb));
  BENCH_CHECK(cudaMalloc(&nx, sb));
  if (!lanes) {
    BENCH_CHECK(cudaMalloc(&na, sb));
    BENCH_CHECK(cudaMalloc(&nb, sb));
  }
  fill_log<<<2048, 256>>>(la, na, n, 5u, std::log(0.9f), 0.0f);
  if (lanes) fill<<<2048, 256>>>(lb, n, 6u, false);  // b in (-1, 1)
  else fill_log<<<2048, 256>>>(lb, nb, n, 6u, -2.0f, 0.0f);
  if (backward) {
    BENCH_CHECK(cudaMalloc(&dlx, vb));
    BENCH_CHECK(cudaMalloc(&dla, vb));
    BENCH_CHECK(cudaMalloc(&dlb, vb));
    fill_log<<<2048, 256>>>(dlx, static_cast<std::uint8_t*>(nullptr), n, 7u, -1.0f, 1.0f);
  }
  parscan::log_forward_args<T> f{};
  f.shape = sh, f.log_a = la, f.a_negative = na, f.log_x = lx, f.x_negative = nx;
  (lanes ? f.b : f.log_b) = lb, f.b_negative = nb;
  parscan::log_backward_args<T> g{};
  g.shape = sh, g.log_a = la, g.a_negative = na, g.log_x = lx, g.x_negative = nx;
  (lanes ? g.b : g.log_b) = lb, g.b_negative = nb;
  g.dlog_x = dlx, g.dlog_a = dla, (lanes ? g.db : g.dlog_b) = dlb;
  const parscan::cuda_backend be{};
  if (parscan::log_recurrence_forward(be, f) != parscan::status::success) std::exit(1);
  BENCH_CHECK(cudaDeviceSynchronize());
  {  // sequence 0 against a float64 loop in linear space (|x| stays within a few units)
    std::vector<T> ha(T_len), hb(T_len), hx(T_len);
    std::vector<std::uint8_t> sa(T_len), sbn(T_len), sx(T_len);
    auto fetch = [&](void* dst, const void* src, size_t size) {  // T_len elements `step` apart
      BENCH_CHECK(cudaMemcpy2D(dst, size, src, size * step, size, T_len, cudaMemcpyDeviceToHost));
    };
    fetch(ha.data(), la, sizeof(T)), fetch(hb.data(), lb, sizeof(T)), fetch(hx.data(), lx, sizeof(T));
    fetch(sx.data(), nx, 1);
    if (!lanes) fetch(sa.data(), na, 1), fetch(sbn.data(), nb, 1);
    double st = 0, err = 0, scale = 0;
    for (index_t t = 0; t < T_len; ++t) {
      const double a = (sa[t] ? -1 : 1) * std::exp(double(float(ha[t])));
      const double b = lanes ? double(float(hb[t])) : (sbn[t] ? -1 : 1) * std::exp(double(float(hb[t])));
      st = a * st + b;
      const double got = (sx[t] ? -1 : 1) * std::exp(double(float(hx[t])));
      err = std::max(err, std::fabs(got - st));
      scale = std::max(scale, std::fabs(st));
    }
    max_err = std::max(max_err, err / scale);
  }
  auto call = [&](int) {
    const auto s = backward ? parscan::log_recurrence_backward(be, g) : parscan::log_recurrence_forward(be, f);
    if (s != parscan::status::success) std::printf("%s: %s\n", name.c_str(), parscan::to_string(s)), std::exit(1);
  };
  const double us = bench::median_us(call, 25, 3);
  for (void* p : {(void*)la, (void*)lb, (void*)lx, (void*)na, (void*)nb, (void*)nx, (void*)dlx, (void*)dla, (void*)dlb})
    if (p) BENCH_CHECK(cudaFree(p));
  // Each tensor read or written once: values, and a byte a step per sign array.
  const double signs = lanes ? 1.0 : 3.0, bytes = backward ? 3.0 * (vb + sb) + 3.0 * vb : 3.0 * vb + signs * sb;
  const double gbs = bytes / us / 1e3;
  return {name, sizeof(T) == 2 ? "bf16" : "f32", lanes ? "(B,T,D)" : "(B,D,T)", backward ? "bwd" : "fwd",
          std::to_string(B) + "x" + std::to_string(D) + "x" + std::to_string(T_len), us, gbs, 100 * gbs / copy, 0.0};
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench::has_flag(argc, argv, "--quick");
  bench::calls_per_sample_arg(argc, argv);
  const double copy = bench::copy_bandwidth_gbs();
  using L = parscan::recurrence_layout;
  const auto tc = L::time_contiguous, cl = L::channel_last;
  std::vector<bench::row> rows;
  double max_err = 0, max_err_16 = 0, max_err_log = 0;
  const std::string filter = bench::filter_arg(argc, argv);
  auto wanted = [&](const std::string& name) { return name.find(filter) != std::string::npos; };
  auto f32 = [&](case_spec c) { if (wanted(c.name)) rows.push_back(run_case<float>(c, copy, max_err)); };
  auto bf16 = [&](case_spec c) { if (wanted(c.name)) rows.push_back(run_case<parscan::bfloat16>(c, copy, max_err_16)); };
  auto f16 = [&](case_spec c) { if (wanted(c.name)) rows.push_back(run_case<parscan::float16>(c, copy, max_err_16)); };
  auto c64 = [&](case_spec c) { if (wanted(c.name)) rows.push_back(run_case<parscan::complex<float>>(c, copy, max_err)); };

  // The floor for the T = 128 rows: a copy of as many bytes (read a, b; write x), as cold.
  auto copy_of_t128 = [&](const char* dtype, size_t element_bytes) {
    const std::string name = std::string("copy, fwd ") + dtype + " T=128's bytes";
    if (!wanted(name)) return;
    const size_t moved = size_t(3) * 8 * 1536 * 128 * element_bytes;
    const double us = bench::copy_us(moved);
    char mb[32];
    std::snprintf(mb, sizeof mb, "%.1f MB", moved / 1e6);
    rows.push_back({name, dtype, "-", "copy", mb, us, moved / us / 1e3, 100 * (moved / us / 1e3) / copy});
  };
  std::vector<index_t> pow2 = {128, 1024, 4096, 16384, 65536};
  if (quick) pow2 = {128, 1024, 4096};
  for (index_t T : pow2) f32({"fwd f32 T=" + std::to_string(T), 8, 1536, T, tc});
  copy_of_t128("f32", sizeof(float));
  for (index_t T : {index_t(1000), index_t(10000), index_t(50000), index_t(100003), index_t(8192), index_t(32768),
                    index_t(131072)}) {
    if (quick && T > 10000) continue;
    f32({"fwd f32 T=" + std::to_string(T), 8, 1536, T, tc});
  }
  for (index_t T : pow2) bf16({"fwd bf16 T=" + std::to_string(T), 8, 1536, T, tc});
  copy_of_t128("bf16", sizeof(parscan::bfloat16));
  for (index_t T : {index_t(128), index_t(4096), index_t(16384)})
    f16({"fwd f16 T=" + std::to_string(T), 8, 1536, T, tc});
  for (index_t T : {index_t(1024), index_t(4096), index_t(16384)}) {
    const std::string t = " T=" + std::to_string(T);
    f32({"fwd f32 channel-last" + t, 8, 1536, T, cl});
    bf16({"fwd bf16 channel-last" + t, 8, 1536, T, cl});
    f16({"fwd f16 channel-last" + t, 8, 1536, T, cl});
    f32({"fwd f32 D=256 channel-last" + t, 8, 256, T, cl});
  }
  f32({"fwd f32 few long", 1, 16, index_t(1) << 22, tc});
  bf16({"fwd bf16 few long", 1, 16, index_t(1) << 22, tc});
  for (index_t T : {index_t(1024), index_t(4096), index_t(16384)}) {
    const std::string t = " T=" + std::to_string(T);
    f32({"bwd f32" + t, 8, 1536, T, tc, true});  // issue 13: the backward in both layouts from T = 1024
    bf16({"bwd bf16" + t, 8, 1536, T, tc, true});
    f16({"bwd f16" + t, 8, 1536, T, tc, true});
    f32({"bwd f32 channel-last" + t, 8, 1536, T, cl, true});
    bf16({"bwd bf16 channel-last" + t, 8, 1536, T, cl, true});
    f16({"bwd f16 channel-last" + t, 8, 1536, T, cl, true});
  }
  // (B, D, T) up to 8192 steps recompute x in a block a sequence (whole_sequence_backward.cuh);
  // T = 16384 and channel-last recompute x into the workspace first.
  for (index_t T : {index_t(1024), index_t(4096), index_t(8192), index_t(16384)}) {
    const std::string t = " T=" + std::to_string(T);
    f32({"bwd f32 recomputed x" + t, 8, 1536, T, tc, true, false, true});
    bf16({"bwd bf16 recomputed x" + t, 8, 1536, T, tc, true, false, true});
  }
  f16({"bwd f16 recomputed x T=4096", 8, 1536, 4096, tc, true, false, true});
  c64({"bwd c64 recomputed x T=4096", 8, 1536, 4096, tc, true, false, true});
  f32({"bwd f32 recomputed x channel-last T=4096", 8, 1536, 4096, cl, true, false, true});
  bf16({"bwd bf16 recomputed x channel-last T=4096", 8, 1536, 4096, cl, true, false, true});
  f32({"fwd f32 x0+x_final T=16384", 8, 1536, 16384, tc, false, true});
  for (index_t T : {index_t(4096), index_t(16384)}) {
    const std::string t = " T=" + std::to_string(T);
    c64({"fwd c64" + t, 8, 1536, T, tc});
    c64({"bwd c64" + t, 8, 1536, T, tc, true});
    c64({"fwd c64 channel-last" + t, 8, 1536, T, cl});
    c64({"bwd c64 channel-last" + t, 8, 1536, T, cl, true});
  }
  auto log_f32 = [&](const std::string& name, L lay, bool bwd) {
    if (wanted(name)) rows.push_back(run_log_case<float>(name, 8, 1536, 4096, bwd, lay, copy, max_err_log));
  };
  auto log_bf16 = [&](const std::string& name, L lay, bool bwd) {
    if (wanted(name)) rows.push_back(run_log_case<parscan::bfloat16>(name, 8, 1536, 4096, bwd, lay, copy, max_err_16));
  };
  for (bool bwd : {false, true}) {
    const std::string dir = bwd ? "bwd" : "fwd";
    log_f32("log " + dir + " f32 T=4096", tc, bwd);
    log_bf16("log " + dir + " bf16 T=4096", tc, bwd);
  }
  log_f32("log fwd f32 channel-last T=4096", cl, false);
  log_bf16("log fwd bf16 channel-last T=4096", cl, false);
  // The float backward's other tile shapes: short sequences (segment tiles up to one warp-loop
  // tile, 128 steps since that tile is one run a lane) and few long ones (chained tiles).
  using log_shape = std::tuple<const char*, index_t, index_t, index_t>;
  for (const auto& [name, B, D, T] :
       {log_shape{"log bwd f32 T=200", 8, 1536, 200}, log_shape{"log bwd f32 T=120", 8, 1536, 120},
        log_shape{"log bwd f32 few long", 1, 16, index_t(1) << 22}})
    if (wanted(name)) rows.push_back(run_log_case<float>(name, B, D, T, true, tc, copy, max_err_log));
  // Odd T: every sequence but the first starts off a 16-byte boundary (head pads). Last: its
  // 17 ms calls, timed before the x0 + x_final row, left that row 10 points lower on an H100.
  if (!quick) f32({"bwd f32 T=100003", 8, 1536, 100003, tc, true});

  bench::print_table(rows, copy);
  bench::write_json(bench::json_arg(argc, argv), "bench_recurrence", rows, copy);
  std::printf("max relative error of checked sequences: f32/c64 %.3g, bf16 %.3g, log f32 %.3g\n", max_err, max_err_16,
              max_err_log);
  const bool ok = max_err <= 1e-5 && max_err_16 <= 1e-2 && max_err_log <= 1e-5;
  if (!ok) std::printf("FAILED: checked sequences above tolerance\n");
  return ok ? 0 : 1;
}
