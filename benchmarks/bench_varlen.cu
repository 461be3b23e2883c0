// benchmarks/bench_varlen.cu — the packed variable-length gated recurrence (cu_seqlens) on the
// CUDA backend, against the equal-length batch of the same total size in the same run (issue
// 15's target: the packed rows at ≥ 95% of the equal-length rows' throughput).
//
// Rows, for f32 and bf16, forward and backward (x given), channel-last (total_T, D) and
// time-contiguous (D, total_T):
//   "varlen random"  64 sequences of random lengths in [1, 16384], mean about 4096, D = 1536;
//   "varlen equal"   the packed path on 64 equal sequences of the same total (how much of the
//                    gap is the packed kernel, how much the raggedness);
//   "batch equal"    the fixed-length API on (64, D, T) with 64·T the same total.
// Effective bandwidth counts each tensor once (forward: a, b read, x written; backward: a, x,
// dx read, da, db written), as bench_recurrence does. Sequence 0 of every packed row is checked
// against a float64 host loop.
//
// Then one sequence of every length from 1 to 8192, D = 64 (the pathological mix), against the
// batch of 8192 sequences of 4097 steps, both layouts.
//
// Then the log-space recurrence (parscan/log_recurrence.hpp, log form, positive inputs: no
// sign arrays), f32, the random lengths against the equal-length batch, both layouts (forward:
// log|a|, log|b| read, log|x| written; backward, x given: log|a|, log|b|, log|x|, dlog|x| read,
// dlog|a|, dlog|b| written). Sequence 0 of the forward is checked against a float64 loop.
//
// Then the generic segmented scan (parscan/segmented_scan.hpp): a float sum over 10^5 segments
// of 2^28 elements in all, cut at uniformly random points, against cub::DeviceScan::
// InclusiveSumByKey over the same data with a segment id per element (CUB's nearest
// algorithm), in the same run. Both rows count the task's bytes (the values read and written
// once; CUB also reads its keys, which the task does not need). The first 2000 segments and the
// last are checked against a float64 host loop.
// --segment-shapes adds the general segment kernel in its last two shapes (warps a block, staged
// tiles a warp) and the vector path in several (warps a block, accesses in flight a lane), each
// checked as the library's row is.
//   usage: bench_varlen [--json out.json] [--filter <part of a row name>] [--segment-shapes]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <cub/device/device_scan.cuh>
#include <parscan/parscan.cuh>

#include "bench_common.cuh"

namespace {

using parscan::index_t;
using bench::unit;

// Gates in (0.9, 1), values in (-1, 1).
template <class T>
__global__ void fill(T* p, index_t n, std::uint32_t seed, bool gate) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(gridDim.x) * blockDim.x) {
    const float u = unit(i, seed);
    p[i] = T(gate ? 0.9f + 0.1f * u : 2 * u - 1);
  }
}

/// 64 lengths in [1, 16384] with mean about 4096: 1 + ⌊16383·u³⌋ has mean 1 + 16383/4.
std::vector<index_t> random_lengths(int n) {
  std::vector<index_t> v(n);
  for (int i = 0; i < n; ++i) {
    const double u = static_cast<double>(bench::mix(0x5eedull + i) >> 11) * (1.0 / 9007199254740992.0);
    v[i] = 1 + static_cast<index_t>(16383.0 * u * u * u);
  }
  return v;
}

struct spec {
  std::string name;
  std::vector<index_t> lengths;  // empty: the fixed-length batch
  index_t B = 0, T = 0;          // the fixed-length batch
  index_t D = 1536;
  parscan::recurrence_layout layout;
  bool backward;
};

template <class T>
double check_sequence0(const spec& c, const T* a, const T* b, const T* x) {
  // Sequence 0, channel 0: its steps are [0, lengths[0]) of channel 0.
  const index_t len = c.lengths[0];
  const bool cl = c.layout == parscan::recurrence_layout::channel_last;
  const index_t stride = cl ? c.D : 1;
  std::vector<T> ha(len), hb(len), hx(len);
  auto column = [&](std::vector<T>& dst, const T* src) {
    BENCH_CHECK(cudaMemcpy2D(dst.data(), sizeof(T), src, stride * sizeof(T), sizeof(T), len, cudaMemcpyDeviceToHost));
  };
  column(ha, a), column(hb, b), column(hx, x);
  double st = 0, err = 0, scale = 0;
  for (index_t t = 0; t < len; ++t) {
    st = double(float(ha[t])) * st + double(float(hb[t]));
    err = std::max(err, std::fabs(double(float(hx[t])) - st));
    scale = std::max(scale, std::fabs(st));
  }
  return scale > 0 ? err / scale : err;
}

/// The row of a timed case: its layout and shape named as packed or batch.
bench::row row_of(const spec& c, const char* dtype, index_t total, double us, double gbs, double copy) {
  const bool packed = !c.lengths.empty(), cl = c.layout == parscan::recurrence_layout::channel_last;
  const std::string shape = packed ? std::to_string(c.lengths.size()) + " seqs x" + std::to_string(c.D) + " total " +
                                         std::to_string(total)
                                   : std::to_string(c.B) + "x" + std::to_string(c.D) + "x" + std::to_string(c.T);
  return {c.name, dtype, packed ? (cl ? "(total,D)" : "(D,total)") : (cl ? "(B,T,D)" : "(B,D,T)"),
          c.backward ? "bwd" : "fwd", shape, us, gbs, 100 * gbs / copy, 0.0};
}

/// A case's packed offsets in device memory (null for the batch); sets its total steps.
std::int64_t* device_offsets(const spec& c, index_t& total) {
  total = c.B * c.T;
  if (c.lengths.empty()) return nullptr;
  std::vector<std::int64_t> offsets(1, 0);
  for (index_t l : c.lengths) offsets.push_back(offsets.back() + l);
  total = offsets.back();
  std::int64_t* cu;
  BENCH_CHECK(cudaMalloc(&cu, offsets.size() * sizeof(std::int64_t)));
  BENCH_CHECK(cudaMemcpy(cu, offsets.data(), offsets.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice));
  return cu;
}

/// One forward, finished, for the caller to check its result.
template <class Forward>
void forward_once(const spec& c, const Forward& forward) {
  if (forward() != parscan::status::success) std::printf("%s: forward failed\n", c.name.c_str()), std::exit(1);
  BENCH_CHECK(cudaDeviceSynchronize());
}

/// Median µs of the call the row measures (its backward, or its forward), 15 runs.
template <class Forward, class Backward>
double time_case(const spec& c, const Forward& forward, const Backward& backward) {
  auto call = [&](int) {
    const parscan::status s = c.backward ? backward() : forward();
    if (s != parscan::status::success) std::printf("%s: %s\n", c.name.c_str(), parscan::to_string(s)), std::exit(1);
  };
  return bench::median_us(call, 15, 2);
}

template <class T>
bench::row run(const spec& c, double copy, double& max_err) {
  const bool packed = !c.lengths.empty();
  index_t total;
  std::int64_t* const cu = device_offsets(c, total);
  const index_t n = total * c.D, N = static_cast<index_t>(c.lengths.size());
  const size_t bytes = size_t(n) * sizeof(T);
  T *a, *b, *x, *dx = nullptr, *da = nullptr, *db = nullptr;
  BENCH_CHECK(cudaMalloc(&a, bytes));
  BENCH_CHECK(cudaMalloc(&b, bytes));
  BENCH_CHECK(cudaMalloc(&x, bytes));
  fill<<<2048, 256>>>(a, n, 11u, true);
  fill<<<2048, 256>>>(b, n, 101u, false);
  if (c.backward) {
    BENCH_CHECK(cudaMalloc(&dx, bytes));
    BENCH_CHECK(cudaMalloc(&da, bytes));
    BENCH_CHECK(cudaMalloc(&db, bytes));
    fill<<<2048, 256>>>(dx, n, 1001u, false);
  }

  const parscan::varlen_shape vs{N, c.D, total, cu, c.layout};
  const parscan::recurrence_shape fs{c.B, c.D, c.T, c.layout};
  parscan::cuda_backend be{};
  auto forward = [&] {
    if (packed) {
      parscan::gated_varlen_forward_args<T> f{};
      f.shape = vs, f.a = a, f.b = b, f.x = x;
      return parscan::gated_recurrence_forward(be, f);
    }
    parscan::gated_forward_args<T> f{};
    f.shape = fs, f.a = a, f.b = b, f.x = x;
    return parscan::gated_recurrence_forward(be, f);
  };
  auto backward = [&] {
    if (packed) {
      parscan::gated_varlen_backward_args<T> g{};
      g.shape = vs, g.a = a, g.x = x, g.dx = dx, g.da = da, g.db = db;
      return parscan::gated_recurrence_backward(be, g);
    }
    parscan::gated_backward_args<T> g{};
    g.shape = fs, g.a = a, g.x = x, g.dx = dx, g.da = da, g.db = db;
    return parscan::gated_recurrence_backward(be, g);
  };
  forward_once(c, forward);
  if (packed) max_err = std::max(max_err, check_sequence0<T>(c, a, b, x));
  const double us = time_case(c, forward, backward);
  for (void* p : {(void*)a, (void*)b, (void*)x, (void*)dx, (void*)da, (void*)db, (void*)cu})
    if (p) BENCH_CHECK(cudaFree(p));
  const int tensors = c.backward ? 5 : 3;
  const double gbs = double(tensors) * bytes / us / 1e3;
  return row_of(c, bench::dtype_name<T>::v, total, us, gbs, copy);
}

// log|gate| for gates in (0.9, 1), log|b| for b in (0.1, 1).
__global__ void fill_log(float* p, index_t n, std::uint32_t seed, bool gate) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(gridDim.x) * blockDim.x) {
    const float u = unit(i, seed);
    p[i] = logf(gate ? 0.9f + 0.1f * u : 0.1f + 0.9f * u);
  }
}

/// A log-space row: the packed call on c.lengths, or the fixed-length batch (c.B, c.D, c.T).
bench::row run_log(const spec& c, double copy, double& max_err) {
  const bool packed = !c.lengths.empty();
  index_t total;
  std::int64_t* const cu = device_offsets(c, total);
  const index_t n = total * c.D, N = static_cast<index_t>(c.lengths.size());
  const size_t bytes = size_t(n) * sizeof(float);
  float *la, *lb, *lx, *g = nullptr, *ga = nullptr, *gb = nullptr;
  for (float** p : {&la, &lb, &lx}) BENCH_CHECK(cudaMalloc(p, bytes));
  fill_log<<<2048, 256>>>(la, n, 17u, true);
  fill_log<<<2048, 256>>>(lb, n, 107u, false);
  if (c.backward) {
    for (float** p : {&g, &ga, &gb}) BENCH_CHECK(cudaMalloc(p, bytes));
    fill<<<2048, 256>>>(g, n, 1009u, false);
  }
  const parscan::varlen_shape vs{N, c.D, total, cu, c.layout};
  const parscan::recurrence_shape fs{c.B, c.D, c.T, c.layout};
  parscan::cuda_backend be{};
  auto set_forward = [&](parscan::log_forward_tensors<float>& f) { f.log_a = la, f.log_b = lb, f.log_x = lx; };
  auto set_backward = [&](parscan::log_backward_tensors<float>& k) {
    k.log_a = la, k.log_b = lb, k.log_x = lx, k.dlog_x = g, k.dlog_a = ga, k.dlog_b = gb;
  };
  auto forward = [&] {
    if (packed) {
      parscan::log_varlen_forward_args<float> f{};
      f.shape = vs, set_forward(f);
      return parscan::log_recurrence_forward(be, f);
    }
    parscan::log_forward_args<float> f{};
    f.shape = fs, set_forward(f);
    return parscan::log_recurrence_forward(be, f);
  };
  auto backward = [&] {
    if (packed) {
      parscan::log_varlen_backward_args<float> k{};
      k.shape = vs, set_backward(k);
      return parscan::log_recurrence_backward(be, k);
    }
    parscan::log_backward_args<float> k{};
    k.shape = fs, set_backward(k);
    return parscan::log_recurrence_backward(be, k);
  };
  forward_once(c, forward);
  if (packed) {  // sequence 0, channel 0, in float64: x = a·x_prev + b from the stored logs
    const index_t len = c.lengths[0], stride = c.layout == parscan::recurrence_layout::channel_last ? c.D : 1;
    std::vector<float> ha(len), hb(len), hx(len);
    for (auto [dst, src] : {std::pair{&ha, la}, std::pair{&hb, lb}, std::pair{&hx, lx}})
      BENCH_CHECK(cudaMemcpy2D(dst->data(), sizeof(float), src, stride * sizeof(float), sizeof(float), len,
                               cudaMemcpyDeviceToHost));
    double st = 0, err = 0;
    for (index_t t = 0; t < len; ++t) {
      st = std::exp(double(ha[t])) * st + std::exp(double(hb[t]));
      err = std::max(err, std::fabs(std::exp(double(hx[t])) - st) / st);
    }
    max_err = std::max(max_err, err);
  }
  const double us = time_case(c, forward, backward);
  for (void* p : {(void*)la, (void*)lb, (void*)lx, (void*)g, (void*)ga, (void*)gb, (void*)cu})
    if (p) BENCH_CHECK(cudaFree(p));
  const int tensors = c.backward ? 6 : 3;
  const double gbs = double(tensors) * bytes / us / 1e3;
  return row_of(c, "f32", total, us, gbs, copy);
}

__global__ void segment_keys(const std::int64_t* offsets, index_t segments, int* keys) {
  for (index_t s = blockIdx.x; s < segments; s += gridDim.x)
    for (index_t i = offsets[s] + threadIdx.x; i < offsets[s + 1]; i += blockDim.x) keys[i] = static_cast<int>(s);
}

/// The generic segmented float sum and CUB's scan by key, same data, same run.
void segmented_rows(double copy, const std::string& filter, bool shapes, std::vector<bench::row>& rows,
                    double& max_err) {
  const std::string name = "segmented float sum, 1e5 random segments";
  if ((name + " (parscan)").find(filter) == std::string::npos && (name + " (cub by key)").find(filter) == std::string::npos)
    return;
  const index_t n = index_t(1) << 28, N = 100000;
  std::vector<std::int64_t> offsets(static_cast<size_t>(N) + 1);
  offsets[0] = 0, offsets[static_cast<size_t>(N)] = n;
  for (index_t s = 1; s < N; ++s)
    offsets[static_cast<size_t>(s)] = static_cast<std::int64_t>(bench::mix(0xc0ffeeull + s) % static_cast<std::uint64_t>(n));
  std::sort(offsets.begin(), offsets.end());
  float *x, *out;
  int* keys;
  std::int64_t* off;
  BENCH_CHECK(cudaMalloc(&x, n * sizeof(float)));
  BENCH_CHECK(cudaMalloc(&out, n * sizeof(float)));
  BENCH_CHECK(cudaMalloc(&keys, n * sizeof(int)));
  BENCH_CHECK(cudaMalloc(&off, offsets.size() * sizeof(std::int64_t)));
  BENCH_CHECK(cudaMemcpy(off, offsets.data(), offsets.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice));
  fill<<<2048, 256>>>(x, n, 77u, false);
  segment_keys<<<4096, 256>>>(off, N, keys);
  const parscan::segments seg{N, off, n};
  const parscan::cuda_backend be{};
  auto check = [&](const char* who, bool reverse = false) {
    BENCH_CHECK(cudaDeviceSynchronize());
    const index_t upto = offsets[2000];
    std::vector<float> hx(static_cast<size_t>(upto)), ho(static_cast<size_t>(upto));
    BENCH_CHECK(cudaMemcpy(hx.data(), x, upto * sizeof(float), cudaMemcpyDeviceToHost));
    BENCH_CHECK(cudaMemcpy(ho.data(), out, upto * sizeof(float), cudaMemcpyDeviceToHost));
    double err = 0;
    for (index_t s = 0; s < 2000; ++s) {
      double run = 0, scale = 1;
      const index_t b = offsets[static_cast<size_t>(s)], e = offsets[static_cast<size_t>(s) + 1];
      for (index_t k = 0; k < e - b; ++k) {
        const size_t i = static_cast<size_t>(reverse ? e - 1 - k : b + k);
        run += hx[i];
        scale = std::max(scale, std::fabs(run));
        err = std::max(err, std::fabs(double(ho[i]) - run) / scale);
      }
    }
    if (err > 1e-5) std::printf("%s: segmented sum off by %.3g\n", who, err);
    return err;
  };
  auto parscan_call = [&](int) {
    const parscan::status st = parscan::segmented_inclusive_scan(be, x, out, seg, parscan::sum_op<float>{});
    if (st != parscan::status::success) std::printf("segmented scan: %s\n", parscan::to_string(st)), std::exit(1);
  };
  parscan_call(0);
  max_err = std::max(max_err, check("parscan"));
  const double us = bench::median_us(parscan_call, 15, 2);
  const double moved = 2.0 * n * sizeof(float);
  const std::string shape = "1e5 segs, total 2^28";
  parscan::scan_options<float> backwards;
  backwards.dir = parscan::direction::reverse;
  auto reverse_call = [&](int) {
    const parscan::status st = parscan::segmented_inclusive_scan(be, x, out, seg, parscan::sum_op<float>{}, backwards);
    if (st != parscan::status::success) std::printf("segmented scan: %s\n", parscan::to_string(st)), std::exit(1);
  };
  reverse_call(0);
  max_err = std::max(max_err, check("parscan reverse", true));
  const double reverse_us = bench::median_us(reverse_call, 15, 2);
  rows.push_back({name + ", reverse (parscan)", "f32", "packed", "rev", shape, reverse_us, moved / reverse_us / 1e3,
                  100 * moved / reverse_us / 1e3 / copy, 0.0});
  if (shapes) {  // the segment kernel's other shapes, each checked, then timed beside the library's
    namespace cd = parscan::cuda_detail;
    using problem = cd::generic_problem<float, float, float>;
    // Poisons the output, runs one shape's launch once and checks it, then times it as a row.
    auto timed_shape = [&](const std::string& who, bool reverse, auto&& launch) {
      auto call = [&](int) {
        const parscan::status st = launch();
        if (st != parscan::status::success) std::printf("%s: %s\n", who.c_str(), parscan::to_string(st)), std::exit(1);
      };
      BENCH_CHECK(cudaMemset(out, 0xff, n * sizeof(float)));
      call(0);
      max_err = std::max(max_err, check(who.c_str(), reverse));
      const double t = bench::median_us(call, 15, 2);
      rows.push_back({who, "f32", "packed", reverse ? "rev" : "fwd", shape, t, moved / t / 1e3,
                      100 * moved / t / 1e3 / copy, 0.0});
    };
    // The general segment kernel (warps a block, staged tiles a warp), forward or reversed.
    auto shaped = [&](auto warps, auto stages, bool reverse) {
      constexpr int W = decltype(warps)::value, S = decltype(stages)::value;
      const parscan::segmented_problem<float, float, float> sp{
          parscan::scan_kind::inclusive, x, out, seg, reverse ? backwards : parscan::scan_options<float>{}, 0.f, false};
      const problem P = problem::from(sp.segment(0, 0, 0));
      timed_shape(name + (reverse ? ", reverse" : "") + " (parscan, " + std::to_string(W) + " warps a block, " +
                      std::to_string(S) + " stages)",
                  reverse, [&] {
                    return cd::launch_segments_shaped<W, S, cd::tile_shape<problem>::chunks>(
                        P, parscan::sum_op<float>{}, off, N, be);
                  });
    };
    using c1 = std::integral_constant<int, 1>;
    using c2 = std::integral_constant<int, 2>;
    using c3 = std::integral_constant<int, 3>;
    using c4 = std::integral_constant<int, 4>;
    shaped(c1{}, c3{}, false), shaped(c1{}, c4{}, false);
    shaped(c1{}, c3{}, true);  // the library's only reverse path until the vector path took it
    // The vector path (what the library takes for this input) in other shapes.
    const cd::segment_vectors<float> V{x, out, nullptr, nullptr, 0.f, false, false, false};
    auto vectored = [&](auto warps, auto unroll) {
      constexpr int W = decltype(warps)::value, U = decltype(unroll)::value;
      timed_shape(name + " (parscan vectors, " + std::to_string(W) + " warps a block, " + std::to_string(U) +
                      " accesses in flight a lane)",
                  false, [&] {
                    return cd::launch_segment_vectors_shaped<W, U>(V, parscan::sum_op<float>{},
                                                                   cd::packed_segment_places{off}, N, be);
                  });
    };
    using c8 = std::integral_constant<int, 8>;
    using c16 = std::integral_constant<int, 16>;
    vectored(c1{}, c4{}), vectored(c2{}, c4{}), vectored(c1{}, c8{}), vectored(c2{}, c8{}), vectored(c4{}, c8{});
    vectored(c1{}, c16{}), vectored(c2{}, c16{});
  }
  std::size_t tmp_bytes = 0;
  BENCH_CHECK(cub::DeviceScan::InclusiveSumByKey(nullptr, tmp_bytes, keys, x, out, static_cast<int>(n)));
  void* tmp;
  BENCH_CHECK(cudaMalloc(&tmp, tmp_bytes));
  auto cub_call = [&](int) {
    BENCH_CHECK(cub::DeviceScan::InclusiveSumByKey(tmp, tmp_bytes, keys, x, out, static_cast<int>(n)));
  };
  cub_call(0);
  check("cub");
  const double cub_us = bench::median_us(cub_call, 15, 2);
  rows.push_back({name + " (parscan)", "f32", "packed", "fwd", shape, us, moved / us / 1e3, 100 * moved / us / 1e3 / copy, 0.0});
  rows.push_back({name + " (cub by key)", "f32", "packed", "fwd", shape, cub_us, moved / cub_us / 1e3,
                  100 * moved / cub_us / 1e3 / copy, 0.0});
  for (void* p : {(void*)x, (void*)out, (void*)keys, (void*)off, tmp}) BENCH_CHECK(cudaFree(p));
}

}  // namespace

int main(int argc, char** argv) {
  const double copy = bench::copy_bandwidth_gbs();
  const std::string filter = bench::filter_arg(argc, argv);
  std::vector<bench::row> rows;
  double max_err = 0, max_err_16 = 0;
  const std::vector<index_t> lengths = random_lengths(64);
  index_t total = 0;
  for (index_t l : lengths) total += l;
  const index_t T_equal = (total + 63) / 64;  // the batch of (about) the same total
  using L = parscan::recurrence_layout;
  // The rows that the filter keeps, for each layout, direction and dtype: cases(tag, layout,
  // backward) names them, tag being "fwd f32 channel-last" and so on.
  auto sweep = [&](std::initializer_list<L> layouts, auto cases) {
    for (L layout : layouts)
      for (bool bwd : {false, true})
        for (bool bf16 : {false, true}) {
          const std::string tag = std::string(bwd ? "bwd " : "fwd ") + (bf16 ? "bf16 " : "f32 ") +
                                  (layout == L::channel_last ? "channel-last" : "time-contiguous");
          for (const spec& c : cases(tag, layout, bwd)) {
            if (c.name.find(filter) == std::string::npos) continue;
            rows.push_back(bf16 ? run<parscan::bfloat16>(c, copy, max_err_16) : run<float>(c, copy, max_err));
          }
        }
  };
  sweep({L::channel_last, L::time_contiguous}, [&](const std::string& tag, L layout, bool bwd) {
    return std::vector<spec>{
        {"varlen random " + tag, lengths, 0, 0, 1536, layout, bwd},
        {"varlen equal " + tag, std::vector<index_t>(64, T_equal), 0, 0, 1536, layout, bwd},
        {"batch equal " + tag, {}, 64, T_equal, 1536, layout, bwd},
    };
  });
  // The training shape of bench_recurrence, (8, 4096, 1536) channel-last, packed as 8 equal
  // sequences, against the fixed-length call: the packed kernels against the fixed-length
  // channel-last ones at few sequences.
  sweep({L::channel_last}, [&](const std::string& tag, L layout, bool bwd) {
    return std::vector<spec>{
        {"varlen 8 equal " + tag, std::vector<index_t>(8, 4096), 0, 0, 1536, layout, bwd},
        {"batch 8 equal " + tag, {}, 8, 4096, 1536, layout, bwd},
    };
  });
  // Issue 15's pathological mix: one sequence of every length from 1 to 8192 (33.6 M steps),
  // D = 64, against the equal-length batch of about the same total (8192 × 4097 steps).
  std::vector<index_t> every(8192);
  for (index_t i = 0; i < 8192; ++i) every[static_cast<std::size_t>(i)] = i + 1;
  sweep({L::channel_last, L::time_contiguous}, [&](const std::string& tag, L layout, bool bwd) {
    return std::vector<spec>{
        {"varlen every length 1..8192 " + tag, every, 0, 0, 64, layout, bwd},
        {"batch 8192 x 4097 " + tag, {}, 8192, 4097, 64, layout, bwd},
    };
  });
  // The log-space recurrence, f32: the random lengths against the equal-length batch.
  double max_err_log = 0;
  for (L layout : {L::channel_last, L::time_contiguous})
    for (bool bwd : {false, true}) {
      const std::string tag = std::string(bwd ? "bwd" : "fwd") + " log f32 " +
                              (layout == L::channel_last ? "channel-last" : "time-contiguous");
      for (const spec& c : {spec{"varlen random " + tag, lengths, 0, 0, 1536, layout, bwd},
                            spec{"batch equal " + tag, {}, 64, T_equal, 1536, layout, bwd}})
        if (c.name.find(filter) != std::string::npos) rows.push_back(run_log(c, copy, max_err_log));
    }
  double max_err_segmented = 0;
  segmented_rows(copy, filter, bench::has_flag(argc, argv, "--segment-shapes"), rows, max_err_segmented);
  bench::print_table(rows, copy);
  bench::write_json(bench::json_arg(argc, argv), "bench_varlen", rows, copy);
  std::printf("random lengths: 64 sequences, total %lld steps (mean %.1f)\n", static_cast<long long>(total),
              double(total) / 64);
  std::printf("max relative error of checked sequences: f32 %.3g, bf16 %.3g\n", max_err, max_err_16);
  std::printf("max relative error of the segmented sum's checked segments: %.3g\n", max_err_segmented);
  std::printf("max relative error of the checked log-space sequence: %.3g\n", max_err_log);
  const bool ok = max_err <= 1e-5 && max_err_16 <= 1e-2 && max_err_segmented <= 1e-5 && max_err_log <= 1e-4;
  if (!ok) std::printf("FAILED: checked sequences above tolerance\n");
  return ok ? 0 : 1;
}
