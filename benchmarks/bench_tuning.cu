// benchmarks/bench_tuning.cu — times alternative tile shapes of the shared scan kernels in one
// run, so a single lease on the GPU machine can choose the library's defaults
// (tile_shape_of in include/parscan/cuda/device/dispatch_scan.cuh). Every variant's output
// is checked against a float64 loop on two sequences before it is timed.
//   usage: bench_tuning [--json out.json] [--bulk: only the bulk tiles' shapes, int32 sum and affine<float>]
//                       [--short: grid tiles against bulk tiles and CUB, 2^13 … 2^23 steps]
//                       [--few-long: the forward's few long sequences on bulk tiles; --few-long-tail: with a
//                        tail of shorter tiles]
//                       [--phases: the bulk tiles' phases with and without the look-back's wait: int32, affine, argmax]
//                       [--bulk-mid: the bulk tiles' shapes against CUB at 2^22, 2^24, 2^26]
//                       [--bulk-tail: the bulk tiles with their last tiles cut shorter, 32-256 MB, against CUB]
//                       [--eight-mb: int64 sum of 2^20 and int32 sum of 2^21, library and CUB (for ncu)]
//                       [--grid-bulk: the grid bulk tiles' shapes against the library and CUB, 4-16 MB each way]
//                       [--channel-last: the generic channel-last sum, one sequence a lane against lane packs]
//                       [--chunk-stages: the chunk loop's tiles against deeper ones (generic sum, recurrence)]
//                       [--wide-rows: the chunk loop's tiles against rows of 256 bytes (generic sum, recurrence)]
//                       [--lengths: the recurrence's channel-last rows at T = 1024, 4096, 16384, the
//                        library against the chunk loop's tiles in rows of 64, 128 and 256 bytes;
//                        --lengths-narrow: the same at D = 256, float]
//                       [--packs: the recurrence's channel-last forward in lane packs of 1 … 8 channels]
//                       [--lane-loop: the channel-last forward and backward, staged lane tiles against the lane loop]
//                       [--reduce-shapes [--ncu]: the tile-blocks reduce's shapes (sums) and the bulk
//                        reduce's shapes and finishes against CUB, 2^20 … 2^28 steps (--ncu: 2^24
//                        only); --reduce-spans: spans of 1 … 32 tiles]
//                       [--argmax-reduce: the 12-byte argmax's bulk reduce shapes against CUB, 2^20 … 2^24]
//                       [--in-order [--ncu]: the in-order tile-blocks reduce's shapes, affine<float>,
//                        against CUB and the library, 2^24 and 2^28 steps (--ncu: 2^24 only)]
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <parscan/parscan.cuh>
#include <parscan/cuda/agent/lane_loop.cuh>
#include <parscan/cuda/generic/generic_lane_packs.cuh>
#include <parscan/cuda/recurrence/channel_last_chunks.cuh>
#include <parscan/cuda/recurrence/recurrence_lane_packs.cuh>
#include <parscan/cuda/recurrence/recurrence_problems.cuh>

#include "bench_common.cuh"

namespace {

using parscan::index_t;
namespace cd = parscan::cuda_detail;

__device__ inline float unit(std::uint64_t i, std::uint32_t seed) {
  std::uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<float>((z ^ (z >> 31)) >> 40) * (1.0f / 16777216.0f);
}
template <class T>
__global__ void fill(T* p, index_t n, std::uint32_t seed, float lo, float hi) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(gridDim.x) * blockDim.x)
    p[i] = T(lo + (hi - lo) * unit(i, seed));
}

// A backend with 256 MB of workspace, allocated once: every variant gets its workspace from the
// caller, as a framework would pass it, not from the library's pool.
parscan::cuda_backend workspace_backend() {
  static void* ws = [] {
    void* p = nullptr;
    BENCH_CHECK(cudaMalloc(&p, std::size_t(256) << 20));
    return p;
  }();
  return parscan::cuda_backend{nullptr, ws, std::size_t(256) << 20, nullptr};
}

// One gated-recurrence forward problem: a, b, x with layout `l` (sequences × T).
template <class T>
struct forward_case {
  std::string name;
  parscan::sequence_layout l;
  T *a = nullptr, *b = nullptr, *x = nullptr;
  size_t bytes() const { return size_t(l.num_sequences()) * l.length * sizeof(T); }
  void alloc() {
    const index_t n = l.num_sequences() * l.length;
    BENCH_CHECK(cudaMalloc(&a, bytes()));
    BENCH_CHECK(cudaMalloc(&b, bytes()));
    BENCH_CHECK(cudaMalloc(&x, bytes()));
    fill<<<2048, 256>>>(a, n, 1u, 0.9f, 1.0f);
    fill<<<2048, 256>>>(b, n, 2u, -1.0f, 1.0f);
    BENCH_CHECK(cudaDeviceSynchronize());
  }
  void release() {
    for (T* p : {a, b, x}) BENCH_CHECK(cudaFree(p));
  }
  // What time_call needs: the outputs to poison, the tensors moved and the direction.
  void poison() const { BENCH_CHECK(cudaMemset(x, 0xff, bytes())); }
  static constexpr int tensors = 3;  // a, b in; x out
  static constexpr const char* direction = "fwd";
  cd::recurrence_forward_problem<T> problem() const {
    return {a, b, x, nullptr, nullptr, l, l, l, l.length, false, false, cd::is_lane_major(l)};
  }
  std::vector<T> sequence(const T* p, index_t s) const {
    std::vector<T> h(l.length);
    if (l.step_stride == 1)
      BENCH_CHECK(cudaMemcpy(h.data(), p + l.sequence_offset(s), l.length * sizeof(T), cudaMemcpyDeviceToHost));
    else
      BENCH_CHECK(cudaMemcpy2D(h.data(), sizeof(T), p + l.sequence_offset(s), l.step_stride * sizeof(T), sizeof(T),
                               l.length, cudaMemcpyDeviceToHost));
    return h;
  }
  double check() const {  // max over two sequences of max|x - ref| / max|ref|
    double worst = 0;
    std::vector<index_t> checked{0};
    if (l.num_sequences() > 1) checked.push_back(l.num_sequences() - 1);
    for (index_t s : checked) {
      const auto ha = sequence(a, s), hb = sequence(b, s), hx = sequence(x, s);
      double st = 0, err = 0, scale = 0;
      for (index_t t = 0; t < l.length; ++t) {
        st = double(float(ha[t])) * st + double(float(hb[t]));
        err = std::max(err, std::fabs(double(float(hx[t])) - st));
        scale = std::max(scale, std::fabs(st));
      }
      worst = std::max(worst, err / scale);
    }
    return worst;
  }
};

struct result_sink {
  double copy;
  std::vector<bench::row> rows;
  int failures = 0;
};

/// Times `call` (which runs case c, a forward_case or a backward_case of element type T, and
/// returns a status) as one row, after checking its result against c's float64 reference.
template <class T, class Case, class Call>
void time_call(const Case& c, const std::string& variant, double tol, result_sink& out, Call&& call) {
  auto run = [&](int) {
    const auto s = call();
    if (s != parscan::status::success) std::printf("%s: %s\n", variant.c_str(), parscan::to_string(s)), std::exit(1);
  };
  c.poison();
  run(0);
  BENCH_CHECK(cudaDeviceSynchronize());
  const double err = c.check();
  if (!(err <= tol)) ++out.failures, std::printf("FAILED %s %s: error %.3g\n", c.name.c_str(), variant.c_str(), err);
  const double us = bench::median_us(run, 15, 2);
  const double gbs = double(Case::tensors) * c.bytes() / us / 1e3;
  out.rows.push_back({c.name + " " + variant, sizeof(T) == 2 ? "bf16" : "f32", c.l.step_stride == 1 ? "(B,D,T)" : "(B,T,D)",
                      Case::direction, std::to_string(c.l.num_sequences()) + "x" + std::to_string(c.l.length), us, gbs,
                      100 * gbs / out.copy, err});
}


template <class Shape, class T>
void time_forward(const forward_case<T>& c, const std::string& variant, double tol, result_sink& out) {
  const auto P = c.problem();
  time_call<T>(c, variant, tol, out, [&] {
    return cd::dispatch_scan<Shape>(P, parscan::affine_op<T>{}, c.l.num_sequences(), workspace_backend());
  });
}

// Channel-last forward or backward (Lanes: recurrence_forward_lanes or recurrence_backward_lanes)
// through lane packs of K channels (recurrence_lane_packs.cuh): the library's staged lane tiles
// (dispatch_lane_tiles) against the lane loop (agent/lane_loop.cuh), a block per group of 32
// packs for the whole length, Steps steps per thread.
template <template <class, int> class Lanes, int Steps, class T, class Case>
void lane_loop_against_staged(const Case& c, double tol, result_sink& out) {
  constexpr int K = cd::channels_per_lane<T>;
  using lanes = Lanes<T, K>;
  using op_t = cd::lanewise_op<parscan::affine_op<T>, K>;
  const lanes L(c.problem());
  const index_t packs = c.l.num_sequences() / K;
  time_call<T>(c, "staged lane tiles (library)", tol, out,
               [&] { return cd::dispatch_lane_tiles(L, op_t{}, packs, workspace_backend()); });
  time_call<T>(c, "lane loop " + std::to_string(Steps) + " steps", tol, out, [&] {
    return cd::launch(cd::scan_lane_loop_kernel<8, Steps, lanes, op_t>, (packs + 31) / 32, 8 * 32, 0,
                      workspace_backend(), L, op_t{}, packs);
  });
}
template <class T, int Steps>
void lane_loop_against_staged(const forward_case<T>& c, double tol, result_sink& out) {
  lane_loop_against_staged<cd::recurrence_forward_lanes, Steps, T>(c, tol, out);
}

// One channel-last gated-recurrence backward: a, x (the forward of a, b) and dx in, da and db
// out, layout `l` (sequences × T); checked on two sequences against a float64 loop.
template <class T>
struct backward_case {
  std::string name;
  parscan::sequence_layout l;
  forward_case<T> fwd;  // a, b and x
  T *dx = nullptr, *da = nullptr, *db = nullptr;
  backward_case(std::string n, parscan::sequence_layout layout) : name(n), l(layout), fwd{n, layout} {}
  size_t bytes() const { return fwd.bytes(); }
  void alloc() {
    fwd.alloc();
    const index_t n = l.num_sequences() * l.length;
    BENCH_CHECK(cudaMalloc(&dx, bytes()));
    BENCH_CHECK(cudaMalloc(&da, bytes()));
    BENCH_CHECK(cudaMalloc(&db, bytes()));
    fill<<<2048, 256>>>(dx, n, 3u, -1.0f, 1.0f);
    const auto F = fwd.problem();
    if (cd::dispatch_scan(F, parscan::affine_op<T>{}, l.num_sequences(), workspace_backend()) !=
        parscan::status::success)
      std::exit(1);
    BENCH_CHECK(cudaDeviceSynchronize());
  }
  void release() {
    fwd.release();
    for (T* p : {dx, da, db}) BENCH_CHECK(cudaFree(p));
  }
  void poison() const {
    BENCH_CHECK(cudaMemset(da, 0xff, bytes()));
    BENCH_CHECK(cudaMemset(db, 0xff, bytes()));
  }
  static constexpr int tensors = 5;  // a, x, dx in; da, db out
  static constexpr const char* direction = "bwd";
  cd::recurrence_backward_problem<T> problem() const {
    return {fwd.a, fwd.x, dx, nullptr, nullptr, da, db, nullptr, l, l, l, l, l, l.length, false, false,
            cd::is_lane_major(l)};
  }
  double check() const {  // max over two sequences of the da and db errors, relative to their largest
    double worst = 0;
    for (index_t s : {index_t(0), l.num_sequences() - 1}) {
      const auto ha = fwd.sequence(fwd.a, s), hx = fwd.sequence(fwd.x, s), hdx = fwd.sequence(dx, s);
      const auto hda = fwd.sequence(da, s), hdb = fwd.sequence(db, s);
      double y = 0, err = 0, scale = 0;
      for (index_t t = l.length - 1; t >= 0; --t) {
        const double g = double(float(hdx[t])) + y;
        const double ga = t > 0 ? g * double(float(hx[t - 1])) : 0.0;
        err = std::max({err, std::fabs(double(float(hdb[t])) - g), std::fabs(double(float(hda[t])) - ga)});
        scale = std::max({scale, std::fabs(g), std::fabs(ga)});
        y = double(float(ha[t])) * g;
      }
      worst = std::max(worst, err / scale);
    }
    return worst;
  }
};

// The channel-last (8, 4096, 1536) forward or backward of T, lane loops of 16 and 8 steps a
// thread against the staged lane tiles.
template <class T>
void forward_lane_loops(const std::string& name, double tol, result_sink& out) {
  forward_case<T> c{name, parscan::sequence_layout::channel_last(8, 4096, 1536)};
  c.alloc();
  lane_loop_against_staged<T, 16>(c, tol, out);
  lane_loop_against_staged<T, 8>(c, tol, out);
  c.release();
}
template <class T>
void backward_lane_loops(const std::string& name, double tol, result_sink& out) {
  backward_case<T> c{name, parscan::sequence_layout::channel_last(8, 4096, 1536)};
  c.alloc();
  lane_loop_against_staged<cd::recurrence_backward_lanes, 16, T>(c, tol, out);
  lane_loop_against_staged<cd::recurrence_backward_lanes, 8, T>(c, tol, out);
  c.release();
}

// The bulk tiles' kernel of `shape` for problem and op_t, given the SM's largest shared-memory
// share, named by its warps, tile bytes, blocks per SM and registers.
template <class problem, class op_t, class shape>
std::string bulk_variant_name(const cd::device_facts& dev) {
  constexpr auto kernel = cd::bulk_tiles_kernel<problem, op_t, shape>;
  cd::prefer_shared_memory<kernel>();
  cudaFuncAttributes attr{};
  BENCH_CHECK(cudaFuncGetAttributes(&attr, kernel));
  const int per_sm = cd::blocks_per_multiprocessor<kernel>(shape::warps * 32, dev.device, shape::smem);
  return "bulk tiles " + std::to_string(shape::warps) + "w " + std::to_string(shape::smem / 1024) + " KB, " +
         std::to_string(per_sm) + "/SM, " + std::to_string(attr.numRegs) + " regs";
}

// `eighths` eighths of one wave of the bulk shape's grid on this device, in tiles (the library's
// tails are 82 tiles long, an eighth of the 660 blocks an H200 holds).
template <class problem, class op_t, class shape>
index_t wave_eighths(const cd::device_facts& dev, int eighths) {
  constexpr auto kernel = cd::bulk_tiles_kernel<problem, op_t, shape>;
  const int per_sm = cd::blocks_per_multiprocessor<kernel>(shape::warps * 32, dev.device, shape::smem);
  return static_cast<index_t>(per_sm) * dev.multiprocessors * eighths / 8;
}

// Few long time-contiguous sequences of the forward: the library's dispatch (bulk tiles, a and b
// staged whole) against the persistent staged window chain it had before, and bulk tiles of
// Warps warps, about TileBytes bytes over both inputs, registers for MinBlocks blocks per SM.
template <class T>
void recurrence_chained(const forward_case<T>& c, double tol, result_sink& out) {
  using P = cd::recurrence_forward_problem<T>;
  using Acc = typename P::acc_type;
  using before = cd::tile_shape_of<P, cd::default_per_lane<Acc>, 4, cd::default_chained_warps<Acc>, 8, 2,
                                   cd::default_chained_stages<P>, cd::default_lane_steps<P>, false,
                                   cd::default_window_chain<P>, false>;
  time_forward<cd::tile_shape<P>>(c, "library", tol, out);
  time_forward<before>(c, "staged window chain (before bulk tiles)", tol, out);
}
template <int Warps, int TileBytes, int MinBlocks, class T>
void recurrence_bulk(const forward_case<T>& c, double tol, result_sink& out) {
  using problem = cd::recurrence_forward_problem<T>;
  using shape = cd::bulk_shape_of<problem, Warps, TileBytes, MinBlocks>;
  using op_t = parscan::affine_op<T>;
  const cd::device_facts dev = cd::current_device();
  const auto P = c.problem();
  time_call<T>(c, bulk_variant_name<problem, op_t, shape>(dev), tol, out, [&] {
    return cd::launch_bulk_tiles<problem, op_t, shape>(P, op_t{}, c.l.num_sequences(), dev, workspace_backend());
  });
}
// The same with its sequences' last tiles cut to about TailTileBytes, the tail `eighths` eighths of
// a wave of the grid's tiles long over all sequences (cd::bulk_tiling).
template <int Warps, int TileBytes, int MinBlocks, int TailTileBytes, class T>
void recurrence_bulk_tail(const forward_case<T>& c, int eighths, double tol, result_sink& out) {
  using problem = cd::recurrence_forward_problem<T>;
  using shape = cd::bulk_shape_of<problem, Warps, TileBytes, MinBlocks, false, cd::bulk_start::early, TailTileBytes>;
  using op_t = parscan::affine_op<T>;
  const cd::device_facts dev = cd::current_device();
  const auto P = c.problem();
  const std::string name = bulk_variant_name<problem, op_t, shape>(dev) + ", tail " + std::to_string(eighths) +
                           "/8 wave of " + std::to_string(TailTileBytes / 1024) + " KB tiles";
  time_call<T>(c, name, tol, out, [&] {
    return cd::launch_bulk_tiles<problem, op_t, shape>(P, op_t{}, c.l.num_sequences(), dev, workspace_backend(),
                                                       wave_eighths<problem, op_t, shape>(dev, eighths));
  });
}

// Channel-last forward in lane packs of K channels on the staged lane tiles (the library packs
// 2-byte types two to a lane: channels_per_lane).
template <class T, int K>
void lane_packs_forward(const forward_case<T>& c, double tol, result_sink& out) {
  using lanes = cd::recurrence_forward_lanes<T, K>;
  using op_t = cd::lanewise_op<parscan::affine_op<T>, K>;
  const lanes L(c.problem());
  time_call<T>(c, "staged lane tiles, packs of " + std::to_string(K), tol, out, [&] {
    return cd::dispatch_lane_tiles(L, op_t{}, c.l.num_sequences() / K, workspace_backend());
  });
}

// Bulk tiles of more than the 48 KB a block takes without opting in: the shape bulk_shape_of
// would give without its limit, launched after raising the kernel's dynamic shared memory.
template <class Problem, int Warps, int TileBytes, int MinBlocks>
struct large_bulk_shape {
  using element = typename Problem::bulk_element;
  using chain_state = cd::first_ready_state<typename Problem::acc_type>;
  static constexpr cd::bulk_start start = cd::bulk_start::early;
  static constexpr int warps = Warps;
  static constexpr int min_blocks = MinBlocks;
  static constexpr int chunks = cd::bulk_chunks_for<element, warps, TileBytes / Problem::bulk_tensors>;
  static constexpr index_t tile = cd::bulk_tile_steps<element, warps, chunks>;
  static constexpr int tail_chunks = 0;
  static constexpr index_t tail_tile = 0, tail_tiles = 0;
  static constexpr int smem = static_cast<int>(Problem::bulk_tensors * cd::bulk_tensor_bytes<Problem, tile>);
};
template <int Warps, int TileBytes, int MinBlocks, class T>
void recurrence_large_bulk(const forward_case<T>& c, double tol, result_sink& out) {
  using problem = cd::recurrence_forward_problem<T>;
  using shape = large_bulk_shape<problem, Warps, TileBytes, MinBlocks>;
  using op_t = parscan::affine_op<T>;
  constexpr auto kernel = cd::bulk_tiles_kernel<problem, op_t, shape>;
  BENCH_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shape::smem));
  const cd::device_facts dev = cd::current_device();
  const auto P = c.problem();
  time_call<T>(c, bulk_variant_name<problem, op_t, shape>(dev) + " (opted in)", tol, out, [&] {
    return cd::launch_bulk_tiles<problem, op_t, shape>(P, op_t{}, c.l.num_sequences(), dev, workspace_backend());
  });
}

// The forward over 16 sequences of 2^22 steps: the library, the path before bulk tiles, and
// bulk tiles of the shapes around the library's (8 warps, 40 KB, five per SM; for 16-bit
// inputs 24 KB, six per SM).
template <class T>
void few_long(const std::string& name, double tol, result_sink& out) {
  forward_case<T> c{name, parscan::sequence_layout::time_contiguous(16, index_t(1) << 22)};
  c.alloc();
  recurrence_chained(c, tol, out);
  recurrence_bulk<8, 32 * 1024, 4>(c, tol, out);
  recurrence_bulk<8, 32 * 1024, 5>(c, tol, out);
  recurrence_bulk<8, 24 * 1024, 5>(c, tol, out);
  recurrence_bulk<8, 24 * 1024, 6>(c, tol, out);
  recurrence_bulk<8, 16 * 1024, 8>(c, tol, out);
  recurrence_bulk<4, 16 * 1024, 10>(c, tol, out);
  recurrence_large_bulk<8, 56 * 1024, 4>(c, tol, out);
  recurrence_large_bulk<8, 72 * 1024, 3>(c, tol, out);
  recurrence_large_bulk<8, 104 * 1024, 2>(c, tol, out);
  recurrence_large_bulk<16, 104 * 1024, 2>(c, tol, out);
  c.release();
}

// PerLane steps per lane (and per thread of a lane tile); LoopWarps, ChainedWarps, LaneWarps warps per block of each kernel;
// LoopStages, ChainedStages: tiles in flight through shared memory (0: loads into registers).
// WarpTiles: chained tiles of one warp each (scan_chained_staged_kernel<..., WarpTiles>) instead of one block.
// WindowChain: chained tiles of one block each with the window chain (scan_window_chain_kernel).
template <class T, int PerLane, int LoopWarps, int ChainedWarps, int LaneWarps, int LoopStages = 2, int ChainedStages = 2,
          bool WarpTiles = false, bool WindowChain = false>
void variant(const forward_case<T>& c, double tol, result_sink& out) {
  using S = cd::tile_shape_of<cd::recurrence_forward_problem<T>, PerLane, LoopWarps, ChainedWarps, LaneWarps, LoopStages,
                              ChainedStages, PerLane, WarpTiles, WindowChain>;
  const std::string name = "lane" + std::to_string(PerLane) + "/loop" + std::to_string(LoopWarps) + "w" +
                           (LoopStages ? "s" + std::to_string(LoopStages) : "") + "/chain" +
                           std::to_string(ChainedWarps) + "w" + (ChainedStages ? "s" + std::to_string(ChainedStages) : "") +
                           (WarpTiles ? "(warp tiles)" : "") + (WindowChain ? "(window chain)" : "") +
                           "/lanes" + std::to_string(LaneWarps) + "w";
  time_forward<S>(c, name, tol, out);
}

// The generic inclusive scan of one long sequence (the chained kernels), against CUB in the
// same run: int32 sums (values in {-1, 0, 1}, checked exactly) and affine<float> pairs
// (checked against a float64 loop at every 4096th step).
template <class T>
__global__ void fill_generic(T* p, index_t n, std::uint32_t seed) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(gridDim.x) * blockDim.x) {
    if constexpr (std::is_integral_v<T>) p[i] = static_cast<T>(unit(i, seed) * 3.0f) - 1;
    else p[i] = T(0.5f + 0.5f * unit(2 * i, seed), 2.0f * unit(2 * i + 1, seed) - 1.0f);
  }
}

template <class T>
struct generic_case {
  std::string name;
  index_t n;
  T *in = nullptr, *out = nullptr;
  std::vector<double> ref;  // the scan (int) or the state (affine) at every 4096th step
  static constexpr index_t stride = 4096;
  using op_t = std::conditional_t<std::is_integral_v<T>, parscan::sum_op<T>, parscan::affine_op<float>>;
  static constexpr const char* label = std::is_same_v<T, int> ? "int32 sum" : std::is_integral_v<T> ? "int64 sum" : "affine scan";
  static constexpr const char* dtype = std::is_same_v<T, int> ? "i32" : std::is_integral_v<T> ? "i64" : "affine<f32>";
  void alloc() {
    BENCH_CHECK(cudaMalloc(&in, n * sizeof(T)));
    BENCH_CHECK(cudaMalloc(&out, n * sizeof(T)));
    fill_generic<<<2048, 256>>>(in, n, 7u);
    BENCH_CHECK(cudaDeviceSynchronize());
    std::vector<T> h(static_cast<size_t>(n));
    BENCH_CHECK(cudaMemcpy(h.data(), in, n * sizeof(T), cudaMemcpyDeviceToHost));
    double r = 0;
    for (index_t i = 0; i < n; ++i) {
      if constexpr (std::is_integral_v<T>) r += h[static_cast<size_t>(i)];
      else r = double(h[static_cast<size_t>(i)].a) * r + double(h[static_cast<size_t>(i)].b);
      if (i % stride == 0) ref.push_back(r);
    }
  }
  void release() {
    BENCH_CHECK(cudaFree(in));
    BENCH_CHECK(cudaFree(out));
  }
  double check() const {
    double worst = 0;
    for (size_t j = 0; j < ref.size(); ++j) {
      T got;
      BENCH_CHECK(cudaMemcpy(&got, out + static_cast<index_t>(j) * stride, sizeof(T), cudaMemcpyDeviceToHost));
      double v;
      if constexpr (std::is_integral_v<T>) v = got;
      else v = got.b;
      worst = std::max(worst, std::fabs(v - ref[j]));
    }
    return worst;
  }
  void record(const std::string& variant, double us, double err, result_sink& sink) const {
    const double gbs = 2.0 * n * sizeof(T) / us / 1e3;
    sink.rows.push_back({name + " " + variant, dtype, "contiguous", "fwd",
                         "2^" + std::to_string(static_cast<int>(std::log2(double(n)))), us, gbs, 100 * gbs / sink.copy,
                         err});
  }
};

// bench_scan's 12-byte argmax struct (value, first index, count), for --phases: element i made on
// the device and on the host from the same hash, the scan checked exactly at every 4096th step.
__host__ __device__ inline bench::argmax_count argmax_element(index_t i) {
  return {static_cast<float>(bench::mix(std::uint64_t(i) * 0x9e3779b97f4a7c15ull + 7u) >> 40),
          static_cast<int>(i & 0x7fffffff), 1};
}
__global__ void fill_argmax(bench::argmax_count* p, index_t n) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(gridDim.x) * blockDim.x)
    p[i] = argmax_element(i);
}
struct argmax_case {
  index_t n;
  bench::argmax_count *in = nullptr, *out = nullptr;
  std::vector<bench::argmax_count> ref;  // the inclusive scan at every 4096th step
  static constexpr index_t stride = 4096;
  using op_t = bench::argmax_count_op;
  static constexpr const char* label = "argmax struct";
  void alloc() {
    BENCH_CHECK(cudaMalloc(&in, n * sizeof(*in)));
    BENCH_CHECK(cudaMalloc(&out, n * sizeof(*out)));
    fill_argmax<<<2048, 256>>>(in, n);
    BENCH_CHECK(cudaDeviceSynchronize());
    bench::argmax_count r = argmax_element(0);
    for (index_t i = 0; i < n; ++i) {
      if (i > 0) r = op_t{}(r, argmax_element(i));
      if (i % stride == 0) ref.push_back(r);
    }
  }
  void release() {
    BENCH_CHECK(cudaFree(in));
    BENCH_CHECK(cudaFree(out));
  }
  double check() const {  // the number of sampled steps that differ
    double wrong = 0;
    for (size_t j = 0; j < ref.size(); ++j) {
      bench::argmax_count got;
      BENCH_CHECK(cudaMemcpy(&got, out + static_cast<index_t>(j) * stride, sizeof(got), cudaMemcpyDeviceToHost));
      wrong += got.value != ref[j].value || got.index != ref[j].index || got.count != ref[j].count;
    }
    return wrong;
  }
};

// One way of scanning c (launch(problem) returns a status), checked and timed as `variant`.
template <class T, class Launch>
void generic_timed(const generic_case<T>& c, const std::string& variant, double tol, result_sink& sink,
                   Launch&& launch) {
  using problem = cd::generic_problem<T, T, T>;
  const parscan::scan_problem<T, T, T> sp{parscan::scan_kind::inclusive, c.in, parscan::sequence_layout::contiguous(c.n),
                                          c.out, parscan::sequence_layout::contiguous(c.n), {}, T{}, false};
  const problem P = problem::from(sp);
  auto run = [&](int) {
    const parscan::status s = launch(P);
    if (s != parscan::status::success) std::printf("%s: %s\n", variant.c_str(), parscan::to_string(s)), std::exit(1);
  };
  BENCH_CHECK(cudaMemset(c.out, 0xff, c.n * sizeof(T)));
  run(0);
  BENCH_CHECK(cudaDeviceSynchronize());
  const double err = c.check();
  if (!(err <= tol)) ++sink.failures, std::printf("FAILED %s %s: error %.3g\n", c.name.c_str(), variant.c_str(), err);
  c.record(variant, bench::median_us(run, 15, 2), err, sink);
}

template <class Shape, class T>
void generic_variant(const generic_case<T>& c, const std::string& variant, double tol, result_sink& sink) {
  generic_timed(c, variant, tol, sink, [](const auto& P) {
    return cd::dispatch_scan<Shape>(P, typename generic_case<T>::op_t{}, 1, workspace_backend());
  });
}

// Bulk tiles (agent/bulk_tiles.cuh) of Warps warps and about TileBytes bytes, registers for at
// least MinBlocks blocks per SM; the row names the blocks per SM and registers it got.
template <int Warps, int TileBytes, int MinBlocks, class T>
void generic_bulk(const generic_case<T>& c, double tol, result_sink& sink) {
  using problem = cd::generic_problem<T, T, T>;
  using shape = cd::bulk_shape_of<problem, Warps, TileBytes, MinBlocks>;
  using op_t = typename generic_case<T>::op_t;
  const cd::device_facts dev = cd::current_device();
  generic_timed(c, bulk_variant_name<problem, op_t, shape>(dev), tol, sink, [&](const auto& P) {
    return cd::launch_bulk_tiles<problem, op_t, shape>(P, op_t{}, 1, dev, workspace_backend());
  });
}

// The library's bulk tiles shape for T, started as Start says (after a memset of the look-back
// state, or launched early after a grid that zeroes it: cd::bulk_start).
template <cd::bulk_start Start, class T>
void generic_bulk_start(const generic_case<T>& c, double tol, result_sink& sink) {
  using problem = cd::generic_problem<T, T, T>;
  using library = cd::bulk_shape<problem>;
  using shape = cd::bulk_shape_of<problem, library::warps, library::smem, library::min_blocks, false, Start>;
  static_assert(shape::tile == library::tile, "the library's tile");
  using op_t = typename generic_case<T>::op_t;
  const cd::device_facts dev = cd::current_device();
  const char* start = Start == cd::bulk_start::after_memset ? "after a memset" : "launched early";
  generic_timed(c, bulk_variant_name<problem, op_t, shape>(dev) + ", " + start, tol, sink, [&](const auto& P) {
    return cd::launch_bulk_tiles<problem, op_t, shape>(P, op_t{}, 1, dev, workspace_backend());
  });
}

// The library's bulk tiles shape for T with its last tiles cut to about TailTileBytes, the tail
// `eighths` eighths of a wave of the grid's tiles long (cd::bulk_tiling).
template <int TailTileBytes, class T>
void generic_bulk_tail(const generic_case<T>& c, int eighths, double tol, result_sink& sink) {
  using problem = cd::generic_problem<T, T, T>;
  using library = cd::bulk_shape<problem>;
  using shape = cd::bulk_shape_of<problem, library::warps, library::smem, library::min_blocks, false,
                                  cd::bulk_start::early, TailTileBytes>;
  static_assert(shape::tile == library::tile, "the library's tile");
  using op_t = typename generic_case<T>::op_t;
  const cd::device_facts dev = cd::current_device();
  const std::string name = bulk_variant_name<problem, op_t, shape>(dev) + ", tail " + std::to_string(eighths) +
                           "/8 wave of " + std::to_string(shape::tail_tile * sizeof(T) / 1024) + " KB tiles";
  generic_timed(c, name, tol, sink, [&](const auto& P) {
    return cd::launch_bulk_tiles<problem, op_t, shape>(P, op_t{}, 1, dev, workspace_backend(),
                                                       wave_eighths<problem, op_t, shape>(dev, eighths));
  });
}

/// Which chunk loop shapes to time beside the library's: none, more steps in flight in 128-byte
/// rows (--chunk-stages), or rows of 256 bytes (--wide-rows).
enum class chunk_sweep { none, stages, wide };
chunk_sweep chunk_variants = chunk_sweep::none;

/// A chunk loop shape as "chunk loop [<bytes>-byte rows, ]<steps a tile> steps, <stages> stages,
/// <KB> KB" (the row width named where it is not 128 bytes).
template <class Shape>
std::string chunk_shape_name() {
  const std::string rows = Shape::row_bytes == 128 ? "" : std::to_string(Shape::row_bytes) + "-byte rows, ";
  return "chunk loop " + rows + std::to_string(Shape::rows) + " steps, " + std::to_string(Shape::stages) +
         " stages, " + std::to_string(Shape::smem_bytes / 1024) + " KB";
}

// The generic channel-last float sum (8, 4096, D): the library's dispatch (the chunk loop,
// generic/generic_chunks.cuh, where its jobs fill the device) against the staged lane tiles
// with one sequence a lane and in packs of 2 and 4 (generic/generic_lane_packs.cuh), and the
// lane loop (agent/lane_loop.cuh), scans and reduces, each checked on its first and last channel
// against a float64 loop.
void lane_loop_generic(index_t D, result_sink& sink) {
  using problem = cd::generic_problem<float, float, float>;
  using op_t = parscan::sum_op<float>;
  const auto l = parscan::sequence_layout::channel_last(8, 4096, D);
  const index_t n = 8 * 4096 * D, S = l.num_sequences();
  float *in = nullptr, *out = nullptr, *totals = nullptr;
  BENCH_CHECK(cudaMalloc(&in, n * sizeof(float)));
  BENCH_CHECK(cudaMalloc(&out, n * sizeof(float)));
  BENCH_CHECK(cudaMalloc(&totals, S * sizeof(float)));
  fill<<<2048, 256>>>(in, n, 5u, -1.0f, 1.0f);
  BENCH_CHECK(cudaDeviceSynchronize());
  const std::string shape = "8x4096x" + std::to_string(D);
  for (bool reduce : {false, true}) {
    parscan::scan_options<float> opts;
    opts.carry_out = totals;
    const problem P = problem::from({reduce ? parscan::scan_kind::reduce : parscan::scan_kind::inclusive, in, l,
                                     reduce ? nullptr : out, l, opts, 0.0f, false});
    auto timed = [&](const std::string& variant, auto&& launch) {
      auto run = [&](int) {
        if (launch() != parscan::status::success) std::printf("%s failed\n", variant.c_str()), std::exit(1);
      };
      BENCH_CHECK(cudaMemset(out, 0xff, n * sizeof(float)));
      BENCH_CHECK(cudaMemset(totals, 0xff, S * sizeof(float)));
      run(0);
      BENCH_CHECK(cudaDeviceSynchronize());
      double worst = 0;
      for (index_t s : {index_t(0), S - 1}) {
        std::vector<float> hi(4096), ho(4096);
        const size_t pitch = size_t(l.step_stride) * sizeof(float);
        BENCH_CHECK(cudaMemcpy2D(hi.data(), sizeof(float), in + l.sequence_offset(s), pitch, sizeof(float), 4096,
                                 cudaMemcpyDeviceToHost));
        BENCH_CHECK(cudaMemcpy2D(ho.data(), sizeof(float), out + l.sequence_offset(s), pitch, sizeof(float), 4096,
                                 cudaMemcpyDeviceToHost));
        float total = 0;
        BENCH_CHECK(cudaMemcpy(&total, totals + s, sizeof(float), cudaMemcpyDeviceToHost));
        double r = 0, scale = 1, err = 0;
        for (index_t t = 0; t < 4096; ++t) {
          r += hi[t];
          scale = std::max(scale, std::fabs(r));
          if (!reduce) err = std::max(err, std::fabs(ho[t] - r));
        }
        worst = std::max(worst, std::max(err, std::fabs(total - r)) / scale);
      }
      if (!(worst <= 1e-5)) ++sink.failures, std::printf("FAILED channel-last %s: error %.3g\n", variant.c_str(), worst);
      const double us = bench::median_us(run, 15, 2);
      const double gbs = (reduce ? 1.0 : 2.0) * n * sizeof(float) / us / 1e3;
      sink.rows.push_back({std::string("channel-last float ") + (reduce ? "reduce " : "scan ") + variant, "f32",
                           "(B,T,D)", reduce ? "reduce" : "fwd", shape, us, gbs, 100 * gbs / sink.copy, worst});
    };
    timed("library", [&] { return cd::dispatch_generic(P, op_t{}, S, workspace_backend()); });
    timed("staged lane tiles, one sequence a lane", [&] {
      return cd::launch_staged_lane_tiles<cd::staged_lane_shape<problem>>(P, op_t{}, S, workspace_backend());
    });
    timed("staged lane tiles, packs of 2", [&] {
      return cd::dispatch_lane_tiles(cd::generic_lane_packs<problem, 2>(P), cd::lanewise_op<op_t, 2>{}, S / 2,
                                     workspace_backend());
    });
    timed("staged lane tiles, packs of 4", [&] {
      return cd::dispatch_lane_tiles(cd::generic_lane_packs<problem, 4>(P), cd::lanewise_op<op_t, 4>{}, S / 4,
                                     workspace_backend());
    });
    timed("lane loop 8w x16, one sequence a lane", [&] {
      return cd::launch(cd::scan_lane_loop_kernel<8, 16, problem, op_t>, (S + 31) / 32, 8 * 32, 0,
                        workspace_backend(), P, op_t{}, S);
    });
    // The chunk loop in 128-byte rows with more steps in flight a block (--chunk-stages).
    const auto chunk_variant = [&](auto shape) {
      using Shape = decltype(shape);
      const cd::device_facts dev = cd::current_device();
      const index_t jobs = 8 * ((D + Shape::group_channels - 1) / Shape::group_channels);
      timed(chunk_shape_name<Shape>(), [&] {
        using reduce_chunks = cd::generic_chunks<problem, op_t, parscan::scan_kind::reduce>;
        using scan_chunks = cd::generic_chunks<problem, op_t, parscan::scan_kind::inclusive>;
        const auto be = workspace_backend();
        return reduce ? cd::launch_batch_chunk_loop<Shape>(reduce_chunks{P, op_t{}}, jobs, dev, be)
                      : cd::launch_batch_chunk_loop<Shape>(scan_chunks{P, op_t{}}, jobs, dev, be);
      });
    };
    if (chunk_variants == chunk_sweep::stages) {
      chunk_variant(cd::chunk_loop_shape<float, 1, 8, 8, 3>{});
      chunk_variant(cd::chunk_loop_shape<float, 1, 12, 8, 2>{});
      chunk_variant(cd::chunk_loop_shape<float, 1, 6, 8, 3>{});
      chunk_variant(cd::chunk_loop_shape<float, 1, 4, 8, 4>{});
    } else if (chunk_variants == chunk_sweep::wide) {  // the library's first (256-byte rows, 256 steps)
      chunk_variant(cd::generic_chunk_shape<float, 8>{});
      chunk_variant(cd::chunk_loop_shape<float, 1, 4, 16, 2>{});
      chunk_variant(cd::chunk_loop_shape<float, 1, 4, 16, 3>{});
      chunk_variant(cd::chunk_loop_shape<float, 1, 8, 16, 3>{});
    }
  }
  for (float* p : {in, out, totals}) BENCH_CHECK(cudaFree(p));
}

// The recurrence's channel-last forward and backward (8, 4096, 1536) in the chunk loop: the
// library's tiles against more steps in flight a block in 128-byte rows (--chunk-stages), or
// rows of 256 bytes against 128 (--wide-rows; there the float forward too, whose library path
// is the lane loop).
template <class T>
void recurrence_chunk_variants(result_sink& out) {
  const auto l = parscan::sequence_layout::channel_last(8, 4096, 1536);
  const double tol = sizeof(T) == 2 ? 3e-2 : 1e-4;
  const std::string type = sizeof(T) == 2 ? "bf16" : "f32";
  const bool wide = chunk_variants == chunk_sweep::wide;
  const auto run = [&](const auto& c, const auto& chunks, auto shape) {
    using Shape = decltype(shape);
    const cd::device_facts dev = cd::current_device();
    const index_t jobs = 8 * ((1536 + Shape::group_channels - 1) / Shape::group_channels);
    time_call<T>(c, chunk_shape_name<Shape>(), tol, out,
                 [&] { return cd::launch_batch_chunk_loop<Shape>(chunks, jobs, dev, workspace_backend()); });
  };
  // Each Case's rows, the 128-byte rows' tiles first.
  const auto sweep = [&](auto& c, auto make_chunks, auto... shapes) {
    c.alloc();
    const auto chunks = make_chunks(c);
    (run(c, chunks, shapes), ...);
    c.release();
  };
  if (sizeof(T) == 2 || wide) {
    forward_case<T> c{"fwd " + type + " (8,4096,1536)", l};
    const auto chunks = [](const auto& c) { return cd::forward_chunks<T, false>{{c.problem()}}; };
    if (wide) {
      sweep(c, chunks, cd::forward_chunk_shape<T, 8>{}, cd::chunk_loop_shape<T, 2, 2, 16, 2>{},
            cd::chunk_loop_shape<T, 2, 4, 16, 2>{}, cd::chunk_loop_shape<T, 2, 2, 16, 3>{},
            cd::chunk_loop_shape<T, 2, 4, 16, 3>{});
    } else {
      sweep(c, chunks, cd::forward_chunk_shape<T, 8>{}, cd::chunk_loop_shape<T, 2, 4, 8, 3>{},
            cd::chunk_loop_shape<T, 2, 6, 8, 2>{}, cd::chunk_loop_shape<T, 2, 2, 8, 4>{});
    }
  }
  backward_case<T> c{"bwd " + type + " (8,4096,1536)", l};
  const auto chunks = [](const auto& c) { return cd::backward_chunks<T, false>{{c.problem()}}; };
  if (wide) {
    sweep(c, chunks, cd::backward_chunk_shape<T, 8>{}, cd::chunk_loop_shape<T, 3, 2, 16, 2>{},
          cd::chunk_loop_shape<T, 3, 2, 16, 3>{}, cd::chunk_loop_shape<T, 3, 3, 16, 2>{},
          cd::chunk_loop_shape<T, 3, 1, 16, 4>{});
  } else {
    sweep(c, chunks, cd::backward_chunk_shape<T, 8>{}, cd::chunk_loop_shape<T, 3, 3, 8, 3>{},
          cd::chunk_loop_shape<T, 3, 4, 8, 2>{}, cd::chunk_loop_shape<T, 3, 2, 8, 4>{});
  }
}

// The recurrence's channel-last forward and backward (8, T, D) at T = 1024, 4096 and 16384
// (--lengths: D = 1536; --lengths-narrow: D = 256, float): the library's call (the public API,
// as bench_recurrence makes it) against the chunk loop's tiles (Forward... and Backward...
// shapes), to choose between them by what the GPUs differ in.
template <class T, class... Forward>
struct forward_shapes {};
template <class T, class... Backward>
struct backward_shapes {};
template <class T, class... Forward, class... Backward>
void recurrence_lengths(result_sink& out, index_t D, forward_shapes<T, Forward...>, backward_shapes<T, Backward...>) {
  const double tol = sizeof(T) == 2 ? 3e-2 : 1e-4;
  const std::string type = sizeof(T) == 2 ? "bf16" : "f32";
  const auto chunk_run = [&](const auto& c, const auto& chunks, auto shape) {
    using Shape = decltype(shape);
    const cd::device_facts dev = cd::current_device();
    const index_t jobs = 8 * ((D + Shape::group_channels - 1) / Shape::group_channels);
    time_call<T>(c, chunk_shape_name<Shape>() + ", " + std::to_string(jobs) + " jobs", tol, out,
                 [&] { return cd::launch_batch_chunk_loop<Shape>(chunks, jobs, dev, workspace_backend()); });
  };
  for (index_t t : {index_t(1024), index_t(4096), index_t(16384)}) {
    const auto l = parscan::sequence_layout::channel_last(8, t, D);
    const parscan::recurrence_shape sh{8, D, t, parscan::recurrence_layout::channel_last};
    const std::string at = " (8," + std::to_string(t) + "," + std::to_string(D) + ")";
    {
      forward_case<T> c{"fwd " + type + at, l};
      c.alloc();
      time_call<T>(c, "library", tol, out, [&] {
        parscan::gated_forward_args<T> f{};
        f.shape = sh, f.a = c.a, f.b = c.b, f.x = c.x;
        return parscan::gated_recurrence_forward(workspace_backend(), f);
      });
      const cd::forward_chunks<T, false> chunks{{c.problem()}};
      (chunk_run(c, chunks, Forward{}), ...);
      c.release();
    }
    backward_case<T> c{"bwd " + type + at, l};
    c.alloc();
    time_call<T>(c, "library", tol, out, [&] {
      parscan::gated_backward_args<T> g{};
      g.shape = sh, g.a = c.fwd.a, g.x = c.fwd.x, g.dx = c.dx, g.da = c.da, g.db = c.db;
      return parscan::gated_recurrence_backward(workspace_backend(), g);
    });
    const cd::backward_chunks<T, false> chunks{{c.problem()}};
    (chunk_run(c, chunks, Backward{}), ...);
    c.release();
  }
}
template <class T>
void recurrence_lengths(result_sink& out) {
  recurrence_lengths(out, 1536,
                     forward_shapes<T, cd::forward_chunk_shape<T, 8>, cd::forward_chunk_shape<T, 4>,
                                    cd::chunk_loop_shape<T, 2, 4, 16, 2>, cd::chunk_loop_shape<T, 2, 2, 16, 3>>{},
                     backward_shapes<T, cd::backward_chunk_shape<T, 8>, cd::backward_chunk_shape<T, 4>,
                                     cd::chunk_loop_shape<T, 3, 2, 16, 2>, cd::chunk_loop_shape<T, 3, 3, 16, 2>>{});
}

// The bulk tiles' shapes around the library's (docs/performance.md, "First-ready tiles").
template <class T>
void bulk_shapes(const generic_case<T>& c, double tol, result_sink& out) {
  generic_bulk<8, 44 * 1024, 5>(c, tol, out);  // the library's default
  generic_bulk<8, 40 * 1024, 5>(c, tol, out);
  generic_bulk<8, 36 * 1024, 6>(c, tol, out);
  generic_bulk<8, 40 * 1024, 2>(c, tol, out);
  generic_bulk<4, 44 * 1024, 5>(c, tol, out);
  generic_bulk<4, 36 * 1024, 6>(c, tol, out);
  generic_bulk<4, 24 * 1024, 9>(c, tol, out);
  generic_bulk<4, 16 * 1024, 12>(c, tol, out);
}

// Mode 0: the library's phases; 1: no look-back (each tile's prefix is its own aggregate, so the
// results are wrong: a tile waits for nothing); 2: a copy through the same staging (each lane
// stores its runs of the landed tile; no reduce, no look-back, no scan).
template <int Warps, int Chunks, int MinBlocks, int Mode, class Problem, class Op, class Chain>
__global__ void __launch_bounds__(Warps * 32, MinBlocks)
    bulk_phase_probe_kernel(Problem P, Op op, Chain st, unsigned* tile_counter, index_t tiles_per_sequence,
                            index_t windows_per_sequence, index_t total_tiles, long long* probe) {
  using Acc = typename Problem::acc_type;
  constexpr index_t tile_steps = cd::bulk_tile_steps<typename Problem::bulk_element, Warps, Chunks>;
  constexpr index_t tensor_bytes = cd::bulk_tensor_bytes<Problem, tile_steps>;
  extern __shared__ __align__(128) unsigned char tile[];
  __shared__ cd::bulk_tile_smem<Acc, Warps> storage;
  auto& sm = storage.get();
  const cd::bulk_barrier loaded{&sm.loaded};
  if (threadIdx.x == 0) loaded.init();
  for (unsigned parity = 0;; parity ^= 1u) {
    const long long t0 = clock64();
    if (threadIdx.x == 0) sm.claimed = atomicAdd(tile_counter, 1u);
    __syncthreads();
    const index_t t = sm.claimed;
    if (t >= total_tiles) return;
    const cd::bulk_tile_place w = cd::place_bulk_tile(P, t, tiles_per_sequence, tile_steps);
    const auto src = cd::bulk_sources_of(P, w);
    if (threadIdx.x == 0) cd::stage_bulk_tile(src, w, tile, tensor_bytes, loaded);
    cd::land_bulk_tile(src, w, tile, tensor_bytes, loaded, parity);
    const long long t1 = clock64();
    const bool full = w.count == tile_steps;
    if constexpr (Mode == 2) {
      constexpr int V = cd::bulk_run<typename Problem::bulk_element>;
      constexpr index_t chunk = 32 * V;
      auto* const o = P.bulk_out(w.s) + w.begin;
      const index_t segment = static_cast<index_t>(threadIdx.x / 32) * Chunks * chunk;
      for (int j = 0; j < Chunks; ++j) {
        const index_t p = segment + j * chunk + cd::lane_id() * V;
        if (p + V <= w.count)
          *reinterpret_cast<uint4*>(o + p) = *reinterpret_cast<const uint4*>(tile + p * sizeof(*o));
      }
      if (threadIdx.x == 0) {
        long long* r = probe + 5 * t;
        r[0] = t1 - t0, r[1] = 0, r[2] = 0, r[3] = clock64() - t1;
        r[4] = static_cast<long long>(blockIdx.x);
      }
      continue;
    }
    const Acc aggregate = full ? cd::reduce_bulk_tile<true, Warps, Chunks>(P, op, tile, w.count, sm)
                               : cd::reduce_bulk_tile<false, Warps, Chunks>(P, op, tile, w.count, sm);
    const long long t2 = clock64();
    if (threadIdx.x < 32) {
      const auto carry_in = [&] { return P.initial(w.s); };
      const cd::maybe<Acc> prefix = Mode == 1 ? cd::maybe<Acc>{aggregate, true}
                                              : cd::bulk_tile_prefix(st, w, t, windows_per_sequence, aggregate,
                                                                     carry_in, op);
      cd::spread_bulk_prefix(prefix, op, sm);
    }
    const long long t3 = clock64();
    __syncthreads();
    auto* const out = P.bulk_out(w.s) + w.begin;
    const bool last_tile = w.k == tiles_per_sequence - 1;
    if (full) cd::scan_bulk_runs<true, Warps, Chunks>(P, op, w.s, last_tile, tile, out, w.count, sm);
    else cd::scan_bulk_runs<false, Warps, Chunks>(P, op, w.s, last_tile, tile, out, w.count, sm);
    if (threadIdx.x == 0) {
      const long long t4 = clock64();
      long long* r = probe + 5 * t;
      r[0] = t1 - t0, r[1] = t2 - t1, r[2] = t3 - t2, r[3] = t4 - t3;
      r[4] = static_cast<long long>(blockIdx.x);
    }
  }
}

// The phases of the library's bulk tiles (in Mode), averaged over the tiles of one launch, three
// launches (µs at the SM clock), printed: claim and load, reduce, look-back, scan and store; and
// the launch's time. docs/performance.md, "Where the bulk tiles' time goes".
template <int Mode, class Case>
void bulk_phases(const Case& c, double tol, result_sink& sink) {
  using T = std::remove_pointer_t<decltype(c.in)>;
  using problem = cd::generic_problem<T, T, T>;
  using shape = cd::bulk_shape<problem>;
  using op_t = typename Case::op_t;
  constexpr auto kernel = bulk_phase_probe_kernel<shape::warps, shape::chunks, shape::min_blocks, Mode, problem, op_t,
                                                  typename shape::chain_state>;
  cd::prefer_shared_memory<kernel>();
  const cd::device_facts dev = cd::current_device();
  const int per_sm = cd::blocks_per_multiprocessor<kernel>(shape::warps * 32, dev.device, shape::smem);
  int khz = 0;
  BENCH_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev.device));
  const auto l = parscan::sequence_layout::contiguous(c.n);
  const problem P = problem::from(parscan::scan_problem<T, T, T>{parscan::scan_kind::inclusive, c.in, l, c.out, l, {},
                                                                 T{}, false});
  const parscan::cuda_backend be = workspace_backend();
  cudaEvent_t e0, e1;
  BENCH_CHECK(cudaEventCreate(&e0));
  BENCH_CHECK(cudaEventCreate(&e1));
  for (int round = 0; round < 3; ++round) {
    cd::workspace_lease ws(be);
    cd::claimed_chain<typename shape::chain_state> ch;
    if (ch.prepare(ws, 1, (c.n + shape::tile - 1) / shape::tile, be) != parscan::status::success) std::exit(1);
    long long* probe = nullptr;
    BENCH_CHECK(cudaMalloc(&probe, ch.total_tiles * 5 * sizeof(long long)));
    const index_t blocks = std::min<index_t>(index_t(per_sm) * dev.multiprocessors, ch.total_tiles);
    BENCH_CHECK(cudaEventRecord(e0));
    kernel<<<unsigned(blocks), shape::warps * 32, shape::smem>>>(P, op_t{}, ch.st, ch.counter, ch.tiles_per_sequence,
                                                                ch.windows_per_sequence, ch.total_tiles, probe);
    BENCH_CHECK(cudaEventRecord(e1));
    BENCH_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    std::vector<long long> h(size_t(ch.total_tiles) * 5);
    BENCH_CHECK(cudaMemcpy(h.data(), probe, h.size() * sizeof(long long), cudaMemcpyDeviceToHost));
    BENCH_CHECK(cudaFree(probe));
    double sum[4] = {0, 0, 0, 0};
    for (index_t t = 0; t < ch.total_tiles; ++t)
      for (int i = 0; i < 4; ++i) sum[i] += double(h[size_t(t) * 5 + i]);
    const double us = 1e3 / khz / double(ch.total_tiles);
    std::printf("%s mode %d phases: %lld tiles, %lld blocks, %.1f us; per tile (us at %d MHz): claim+load %.2f, "
                "reduce %.2f, look-back %.2f, scan+store %.2f\n",
                c.label, Mode, (long long)ch.total_tiles, (long long)blocks, ms * 1e3, khz / 1000, sum[0] * us,
                sum[1] * us, sum[2] * us, sum[3] * us);
    // Mode 0 is the library's kernel, so its scan must be right.
    const double err = Mode == 0 ? c.check() : 0;
    if (!(err <= tol)) ++sink.failures, std::printf("FAILED %s phases: error %.3g\n", c.label, err);
  }
  BENCH_CHECK(cudaEventDestroy(e0));
  BENCH_CHECK(cudaEventDestroy(e1));
}

// CUB, then `variants(c)`, on a fresh case of 2^log2n steps.
template <class T, class Variants>
void against_cub(const char* name, int log2n, double tol, result_sink& out, Variants&& variants) {
  generic_case<T> c{name, index_t(1) << log2n};
  c.alloc();
  generic_cub(c, tol, out);
  variants(c);
  c.release();
}

// The library's bulk tiles and the other shapes of bulk_shapes against CUB, at 2^log2n steps.
template <class T>
void bulk_against_cub(const char* name, int log2n, double tol, result_sink& out) {
  against_cub<T>(name, log2n, tol, out, [&](const generic_case<T>& c) { bulk_shapes(c, tol, out); });
}

// The library's dispatch against CUB, at 2^log2n steps.
template <class T>
void library_against_cub(const char* name, int log2n, result_sink& out) {
  against_cub<T>(name, log2n, 0, out, [&](const generic_case<T>& c) {
    generic_variant<cd::tile_shape<cd::generic_problem<T, T, T>>>(c, "library", 0, out);
  });
}

template <class T>
void generic_cub(const generic_case<T>& c, double tol, result_sink& sink) {
  std::size_t bytes = 0;
  const typename generic_case<T>::op_t op{};
  BENCH_CHECK(cub::DeviceScan::InclusiveScan(nullptr, bytes, c.in, c.out, op, c.n));
  void* tmp = nullptr;
  BENCH_CHECK(cudaMalloc(&tmp, bytes));
  auto run = [&](int) { BENCH_CHECK(cub::DeviceScan::InclusiveScan(tmp, bytes, c.in, c.out, op, c.n)); };
  BENCH_CHECK(cudaMemset(c.out, 0xff, c.n * sizeof(T)));
  run(0);
  BENCH_CHECK(cudaDeviceSynchronize());
  const double err = c.check();
  if (!(err <= tol)) ++sink.failures, std::printf("FAILED %s cub: error %.3g\n", c.name.c_str(), err);
  c.record("cub", bench::median_us(run, 15, 2), err, sink);
  BENCH_CHECK(cudaFree(tmp));
}

// The two-pass reduce of the same int32 input (reduce_spans_kernel, reduce_partials_kernel) with
// PerLane accumulators per lane and Warps warps per block, against CUB's reduce; as % of a kernel
// that only reads the input.
template <int PerLane, int Warps>
void generic_reduce(const generic_case<int>& c, long long want, double read_gbs, result_sink& sink) {
  using problem = cd::generic_problem<int, int, int>;
  using S = cd::tile_shape_of<problem, PerLane, 4, Warps, 8, 2, 2, 8, false, true>;
  int* total = nullptr;
  BENCH_CHECK(cudaMalloc(&total, sizeof(int)));
  parscan::scan_options<int> opts;
  opts.carry_out = total;
  const problem P = problem::from({parscan::scan_kind::reduce, c.in, parscan::sequence_layout::contiguous(c.n), nullptr,
                                   parscan::sequence_layout::contiguous(c.n), opts, 0, true});
  const std::string name = "reduce lane" + std::to_string(PerLane) + "/" + std::to_string(Warps) + "w";
  auto run = [&](int) {
    if (cd::dispatch_scan<S>(P, parscan::sum_op<int>{}, 1, workspace_backend()) != parscan::status::success)
      std::printf("%s failed\n", name.c_str()), std::exit(1);
  };
  run(0);
  int got = 0;
  BENCH_CHECK(cudaMemcpy(&got, total, sizeof(int), cudaMemcpyDeviceToHost));
  if (got != want) ++sink.failures, std::printf("FAILED %s: %d, want %lld\n", name.c_str(), got, want);
  const double us = bench::median_us(run, 15, 2), gbs = double(c.n) * sizeof(int) / us / 1e3;
  sink.rows.push_back({"int32 " + name, "i32", "contiguous", "fwd", "2^28", us, gbs, 100 * gbs / read_gbs, 0});
  BENCH_CHECK(cudaFree(total));
}

__global__ void read_only(const int4* p, index_t n4, int* sink) {
  int acc = 0;
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n4; i += index_t(gridDim.x) * blockDim.x) {
    const int4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7fffffff) *sink = acc;  // keeps the loads
}

void reduces(const generic_case<int>& c, result_sink& sink) {
  int* scratch = nullptr;
  BENCH_CHECK(cudaMalloc(&scratch, sizeof(int)));
  int sms = 0;
  BENCH_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double read_us = bench::median_us([&](int) { read_only<<<sms * 8, 256>>>(reinterpret_cast<const int4*>(c.in), c.n / 4, scratch); }, 15, 2);
  const double read_gbs = double(c.n) * sizeof(int) / read_us / 1e3;
  sink.rows.push_back({"int32 read-only kernel", "i32", "contiguous", "fwd", "2^28", read_us, read_gbs, 100.0, 0});
  long long exact = 0;
  {
    std::vector<int> h(static_cast<size_t>(c.n));
    BENCH_CHECK(cudaMemcpy(h.data(), c.in, c.n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int v : h) exact += v;
  }
  std::size_t bytes = 0;
  BENCH_CHECK(cub::DeviceReduce::Sum(nullptr, bytes, c.in, scratch, c.n));
  void* tmp = nullptr;
  BENCH_CHECK(cudaMalloc(&tmp, bytes));
  const double cub_us = bench::median_us([&](int) { BENCH_CHECK(cub::DeviceReduce::Sum(tmp, bytes, c.in, scratch, c.n)); }, 15, 2);
  const double cub_gbs = double(c.n) * sizeof(int) / cub_us / 1e3;
  sink.rows.push_back({"int32 reduce cub", "i32", "contiguous", "fwd", "2^28", cub_us, cub_gbs, 100 * cub_gbs / read_gbs, 0});
  BENCH_CHECK(cudaFree(tmp));
  generic_reduce<16, 8>(c, exact, read_gbs, sink);
  generic_reduce<32, 8>(c, exact, read_gbs, sink);
  generic_reduce<16, 4>(c, exact, read_gbs, sink);
  generic_reduce<32, 4>(c, exact, read_gbs, sink);
  generic_reduce<64, 4>(c, exact, read_gbs, sink);
  generic_reduce<16, 16>(c, exact, read_gbs, sink);
  BENCH_CHECK(cudaFree(scratch));
}

// PerLane accumulators per lane, ChainedWarps warps per tile, ChainedStages tiles in flight (0: the
// one-tile-per-block kernel), WindowChain: the window chain (else the persistent hierarchical grid).
template <class T, int PerLane, int ChainedWarps, int ChainedStages, bool WindowChain = true>
void generic_shape(const generic_case<T>& c, double tol, result_sink& sink) {
  using S = cd::tile_shape_of<cd::generic_problem<T, T, T>, PerLane, 4, ChainedWarps, 8, 2, ChainedStages, 8, false,
                              WindowChain, false>;
  const std::string name = "lane" + std::to_string(PerLane) + "/chain" + std::to_string(ChainedWarps) + "w" +
                           (ChainedStages ? "s" + std::to_string(ChainedStages) : "") +
                           (WindowChain ? "(window chain)" : "(hierarchical)");
  generic_variant<S>(c, name, tol, sink);
}

// The library's shape with grid tiles of GridWarps warps and GridRuns runs a lane for inputs of
// at most GridTiles tiles (0: none).
template <class problem, int GridTiles, int GridWarps = 8, int GridRuns = 2>
using grid_shape = cd::tile_shape_of<problem, cd::default_per_lane<typename problem::acc_type>, 4,
                                     cd::default_chained_warps<typename problem::acc_type>, 8, 2,
                                     cd::default_chained_stages<problem>, cd::default_lane_steps<problem>, false,
                                     cd::default_window_chain<problem>, true, GridTiles, GridWarps, GridRuns>;

// Short inputs: the library's dispatch (grid tiles wherever every tile fits on the device at
// once) against the same shape without grid tiles (the bulk tiles) and CUB, scans and sums, with
// a workspace passed in as bench_scan does (docs/performance.md, "Grid tiles").
template <class T>
void short_inputs(int log2n, double tol, result_sink& sink) {
  using problem = cd::generic_problem<T, T, T>;
  using op_t = typename generic_case<T>::op_t;
  generic_case<T> c{generic_case<T>::label, index_t(1) << log2n};
  c.alloc();
  const std::size_t ws_bytes = cd::scan_workspace_bytes<problem, grid_shape<problem, 256, 8, 1>>(1, c.n) + (1 << 20);
  void* ws = nullptr;
  BENCH_CHECK(cudaMalloc(&ws, ws_bytes));
  const parscan::cuda_backend be{nullptr, ws, ws_bytes, nullptr};
  // Each variant's name, and its dispatch (scan or reduce of problem P).
  auto variants = [&](auto&& each) {
    each("grid tiles (library)", [&](const problem& P) { return cd::dispatch_scan<cd::tile_shape<problem>>(P, op_t{}, 1, be); });
    each("grid 8w x1 run", [&](const problem& P) { return cd::dispatch_scan<grid_shape<problem, 256, 8, 1>>(P, op_t{}, 1, be); });
    each("grid 8w x4 runs to 512", [&](const problem& P) { return cd::dispatch_scan<grid_shape<problem, 512, 8, 4>>(P, op_t{}, 1, be); });
    each("grid 16w x2 runs to 512", [&](const problem& P) { return cd::dispatch_scan<grid_shape<problem, 512, 16, 2>>(P, op_t{}, 1, be); });
    each("grid 8w x2 runs to 1024", [&](const problem& P) { return cd::dispatch_scan<grid_shape<problem, 1024, 8, 2>>(P, op_t{}, 1, be); });
    each("no grid tiles", [&](const problem& P) { return cd::dispatch_scan<grid_shape<problem, 0>>(P, op_t{}, 1, be); });
  };
  generic_cub(c, tol, sink);
  variants([&](const char* name, auto&& run) { generic_timed(c, name, tol, sink, run); });
  if constexpr (std::is_integral_v<T>) {
    T want = 0;
    std::vector<T> h(static_cast<size_t>(c.n));
    BENCH_CHECK(cudaMemcpy(h.data(), c.in, c.n * sizeof(T), cudaMemcpyDeviceToHost));
    for (T v : h) want += v;
    T* total = nullptr;
    BENCH_CHECK(cudaMalloc(&total, sizeof(T)));
    parscan::scan_options<T> opts;
    opts.carry_out = total;
    const problem P = problem::from({parscan::scan_kind::reduce, c.in, parscan::sequence_layout::contiguous(c.n), nullptr,
                                     parscan::sequence_layout::contiguous(c.n), opts, 0, true});
    std::size_t cub_bytes = 0;
    BENCH_CHECK(cub::DeviceReduce::Sum(nullptr, cub_bytes, c.in, total, c.n));
    void* tmp = nullptr;
    BENCH_CHECK(cudaMalloc(&tmp, cub_bytes));
    auto timed = [&](const std::string& name, auto&& run) {
      BENCH_CHECK(cudaMemset(total, 0xff, sizeof(T)));
      run(0);
      T got = 0;
      BENCH_CHECK(cudaMemcpy(&got, total, sizeof(T), cudaMemcpyDeviceToHost));
      if (got != want) ++sink.failures, std::printf("FAILED reduce %s\n", name.c_str());
      const double us = bench::median_us(run, 15, 2), gbs = double(c.n) * sizeof(T) / us / 1e3;
      sink.rows.push_back({c.name + " reduce " + name, generic_case<T>::dtype, "contiguous", "fwd",
                           "2^" + std::to_string(log2n), us, gbs, 100 * gbs / sink.copy, double(got - want)});
    };
    timed("cub", [&](int) { BENCH_CHECK(cub::DeviceReduce::Sum(tmp, cub_bytes, c.in, total, c.n)); });
    variants([&](const char* name, auto&& launch) {
      timed(name, [&](int) {
        if (launch(P) != parscan::status::success) std::exit(1);
      });
    });
    BENCH_CHECK(cudaFree(tmp));
    BENCH_CHECK(cudaFree(total));
  }
  BENCH_CHECK(cudaFree(ws));
  c.release();
}

// The init of the reduces below: zero, or the identity map of affine pairs.
template <class T>
T reduce_identity() {
  if constexpr (std::is_integral_v<T>) return T{0};
  else return T(1.0f, 0.0f);
}

// One reduce input of 2^log2n elements (--reduce-shapes, --reduce-spans): its problem, its exact
// (integer sums) or float64 (affine pairs) total, and time(name, run) for a row checked against it.
template <class T>
struct reduce_case {
  using problem = cd::generic_problem<T, T, T>;
  using op_t = typename generic_case<T>::op_t;
  generic_case<T> c;
  double tol;
  result_sink& sink;
  std::string size;
  T* total = nullptr;
  problem P;
  T want{};

  reduce_case(int log2n, double tol_, result_sink& sink_)
      : c{generic_case<T>::label, index_t(1) << log2n}, tol(tol_), sink(sink_), size("2^" + std::to_string(log2n)) {
    c.alloc();
    BENCH_CHECK(cudaMalloc(&total, sizeof(T)));
    parscan::scan_options<T> opts;
    opts.carry_out = total;
    P = problem::from({parscan::scan_kind::reduce, c.in, parscan::sequence_layout::contiguous(c.n), nullptr,
                       parscan::sequence_layout::contiguous(c.n), opts, reduce_identity<T>(), true});
    std::vector<T> h(static_cast<size_t>(c.n));
    BENCH_CHECK(cudaMemcpy(h.data(), c.in, c.n * sizeof(T), cudaMemcpyDeviceToHost));
    if constexpr (std::is_integral_v<T>) {
      for (T v : h) want += v;
    } else {
      double a = 1, b = 0;  // later ∘ earlier: x -> a·x + b
      for (const T& v : h) a = double(v.a) * a, b = double(v.a) * b + double(v.b);
      want = T(static_cast<float>(a), static_cast<float>(b));
    }
  }
  ~reduce_case() {
    BENCH_CHECK(cudaFree(total));
    c.release();
  }
  // A row "<case> <name>": run(i) once and checked (a failure counts only when `checked`), then timed.
  template <class Run>
  void time(const std::string& name, Run&& run, bool checked = true) {
    run(0);
    T got{};
    BENCH_CHECK(cudaMemcpy(&got, total, sizeof(T), cudaMemcpyDeviceToHost));
    double err;
    if constexpr (std::is_integral_v<T>) err = got == want ? 0 : 1;
    else err = std::fabs(double(got.a) - want.a) + std::fabs(double(got.b) - want.b);
    if (checked && !(err <= tol))
      ++sink.failures, std::printf("FAILED %s %s: error %.3g\n", c.name.c_str(), name.c_str(), err);
    const double us = bench::median_us(run, 15, 2), gbs = double(c.n) * sizeof(T) / us / 1e3;
    sink.rows.push_back({c.name + " " + name, generic_case<T>::dtype, "contiguous", "reduce", size, us, gbs,
                         100 * gbs / sink.copy, err});
  }
};

// The row name of the bulk reduce (agent/bulk_reduce_spans.cuh) in `shape` launched directly,
// finished in the same launch or a second one, over spans of tiles_per_span tiles (0: the
// library's); its kernel is opted in for its shared memory here.
template <class Problem, class Op, class shape, bool SameLaunch>
std::string bulk_reduce_name(const cd::device_facts& dev, index_t tiles_per_span) {
  constexpr auto kernel = cd::bulk_reduce_kernel<Problem, Op, shape, SameLaunch>;
  cd::prefer_shared_memory<kernel>();
  const int per_sm = cd::blocks_per_multiprocessor<kernel>(shape::warps * 32, dev.device, 2 * shape::smem);
  return "bulk reduce " + std::to_string(shape::warps) + "w " + std::to_string(shape::smem / 1024) + " KB " +
         std::to_string(per_sm) + "/SM" +
         (tiles_per_span ? ", spans of " + std::to_string(tiles_per_span) : std::string()) +
         (SameLaunch ? "" : ", 2 launches");
}
constexpr cd::bulk_reduce_finish bulk_reduce_finish_of(bool same_launch) {
  return same_launch ? cd::bulk_reduce_finish::same_launch : cd::bulk_reduce_finish::second_launch;
}

// The bulk reduce of rc in tiles of Warps warps and about TileBytes bytes, registers for
// MinBlocks blocks per SM, finished in the same launch or a second one, over the library's spans
// or spans of tiles_per_span tiles.
template <int Warps, int TileBytes, int MinBlocks, bool SameLaunch = true, class T>
void bulk_reduce_row(reduce_case<T>& rc, index_t tiles_per_span = 0) {
  using problem = typename reduce_case<T>::problem;
  using op_t = typename reduce_case<T>::op_t;
  using shape = cd::bulk_shape_of<problem, Warps, TileBytes, MinBlocks>;
  const cd::device_facts dev = cd::current_device();
  const std::string name = bulk_reduce_name<problem, op_t, shape, SameLaunch>(dev, tiles_per_span);
  rc.time(name, [&](int) {
    if (cd::launch_bulk_reduce<problem, op_t, shape>(rc.P, op_t{}, 1, dev, workspace_backend(), tiles_per_span,
                                                     bulk_reduce_finish_of(SameLaunch)) != parscan::status::success)
      std::printf("%s failed\n", name.c_str()), std::exit(1);
  });
}

// The tile-blocks reduce (agent/tile_blocks_reduce.cuh) of rc in tiles of Threads × Loads
// 16-byte accesses; operators whose operands may not be swapped take the in-order kernel, whose
// lanes fold their runs in Chains parts, with registers for MinBlocks blocks an SM.
template <int Threads, int Loads, int Chains = 2, int MinBlocks = 4, class T>
void tile_blocks_row(reduce_case<T>& rc, bool programmatic = false) {
  using problem = typename reduce_case<T>::problem;
  using op_t = typename reduce_case<T>::op_t;
  const bool in_order = !cd::swaps_operands<op_t, T>;
  const std::string name =
      std::string(in_order ? "tile blocks in order " : "tile blocks ") + std::to_string(Threads) + "t x " +
      std::to_string(Loads) + " (" + std::to_string(Threads * Loads * 16 / 1024) + " KB)" +
      (in_order ? ", " + std::to_string(Chains) + " chains, " + std::to_string(MinBlocks) + "/SM" : std::string()) +
      (programmatic ? ", fold launched early" : "");
  const cd::device_facts dev = cd::current_device();
  rc.time(name, [&](int) {
    if (cd::launch_tile_blocks_reduce<problem, op_t, Threads, Loads, Chains, MinBlocks>(
            rc.P, op_t{}, 1, dev, workspace_backend(), programmatic) != parscan::status::success)
      std::printf("%s failed\n", name.c_str()), std::exit(1);
  });
}

// Reduces of 2^log2n elements: CUB, the library's dispatch, for sums the tile-blocks reduce in
// several shapes with and without the fold started early (docs/performance.md, "Blocks of one
// tile for the sums"), for affine pairs its in-order kernel in several shapes, chains and
// registers ("Blocks of one tile in order"; in_order_only: only these), and the bulk reduce in
// several tile shapes and both finishes, or (spans) over spans of 1 … 32 tiles
// (docs/performance.md, "Lane runs and one launch for the bulk reduce"). CUB's DeviceReduce
// takes its operator to be commutative, which affine pairs are not: its affine row is timed, its
// error shown, not counted.
template <class T>
void reduce_shapes(int log2n, double tol, result_sink& sink, bool spans = false, bool in_order_only = false) {
  using op_t = typename reduce_case<T>::op_t;
  reduce_case<T> rc(log2n, tol, sink);
  std::size_t cub_bytes = 0;
  BENCH_CHECK(cub::DeviceReduce::Reduce(nullptr, cub_bytes, rc.c.in, rc.total, rc.c.n, op_t{}, reduce_identity<T>()));
  void* tmp = nullptr;
  BENCH_CHECK(cudaMalloc(&tmp, cub_bytes));
  rc.time(
      "reduce cub",
      [&](int) {
        BENCH_CHECK(cub::DeviceReduce::Reduce(tmp, cub_bytes, rc.c.in, rc.total, rc.c.n, op_t{}, reduce_identity<T>()));
      },
      std::is_integral_v<T>);
  BENCH_CHECK(cudaFree(tmp));
  rc.time("reduce (library)", [&](int) {
    if (cd::dispatch_scan(rc.P, op_t{}, 1, workspace_backend()) != parscan::status::success) std::exit(1);
  });
  if (spans) {
    for (index_t per_span : {1, 2, 4, 8, 16, 32}) bulk_reduce_row<8, 40 * 1024, 2>(rc, per_span);
    return;
  }
  if constexpr (cd::swaps_operands<op_t, T>) {
    tile_blocks_row<512, 8>(rc);
    tile_blocks_row<512, 8>(rc, true);
    tile_blocks_row<256, 16>(rc);
    tile_blocks_row<256, 16>(rc, true);
    tile_blocks_row<1024, 4>(rc);
    tile_blocks_row<512, 16>(rc);
  } else {
    tile_blocks_row<256, 8, 2, 3>(rc, true);
    tile_blocks_row<256, 8, 2, 4>(rc, true);
    tile_blocks_row<256, 8, 1, 4>(rc, true);
    tile_blocks_row<256, 8, 4, 4>(rc, true);
    tile_blocks_row<128, 8, 2, 8>(rc, true);
    tile_blocks_row<512, 8, 2, 2>(rc, true);
    tile_blocks_row<256, 4, 2, 6>(rc, true);
    tile_blocks_row<256, 16, 2, 2>(rc, true);
  }
  if (in_order_only) return;
  bulk_reduce_row<8, 40 * 1024, 2, false>(rc);
  bulk_reduce_row<8, 40 * 1024, 2>(rc);
  bulk_reduce_row<8, 24 * 1024, 3>(rc);
  bulk_reduce_row<4, 16 * 1024, 6>(rc);
  // CUB's shape: a block per tile of the scan's chained shape (no persistent grid), then the
  // partials; the library's path where bulk copies do not apply.
  using shape = cd::tile_shape<typename reduce_case<T>::problem>;
  const index_t tiles = (rc.P.length + shape::chained_tile - 1) / shape::chained_tile;
  rc.time("two-pass reduce, " + std::to_string(shape::chained_tile * sizeof(T) / 1024) + " KB tiles", [&](int) {
    if (cd::launch_reduce<shape>(rc.P, op_t{}, 1, tiles, workspace_backend()) != parscan::status::success)
      std::exit(1);
  });
}

// The 12-byte argmax's reduce of 2^log2n elements (--argmax-reduce): CUB, the library's dispatch
// and the bulk reduce in several tile shapes and both finishes, each call on the next of enough
// copies of the input to start cold in L2, as bench_scan's calls do; every row checked exactly.
template <int Warps, int TileBytes, int MinBlocks, bool SameLaunch, class Problem, class Time>
void argmax_bulk_reduce_row(const std::vector<Problem>& problems, Time&& time) {
  using op_t = bench::argmax_count_op;
  using shape = cd::bulk_shape_of<Problem, Warps, TileBytes, MinBlocks>;
  const cd::device_facts dev = cd::current_device();
  time(bulk_reduce_name<Problem, op_t, shape, SameLaunch>(dev, 0), [&](int i) {
    const Problem& P = problems[size_t(i) % problems.size()];
    return cd::launch_bulk_reduce<Problem, op_t, shape>(P, op_t{}, 1, dev, workspace_backend(), 0,
                                                         bulk_reduce_finish_of(SameLaunch));
  });
}

void argmax_reduce_shapes(int log2n, result_sink& sink) {
  using T = bench::argmax_count;
  using op_t = bench::argmax_count_op;
  using problem = cd::generic_problem<T, T, T>;
  const index_t n = index_t(1) << log2n;
  const std::size_t bytes = std::size_t(n) * sizeof(T);
  const int copies = bench::rotation_for(bytes);
  const T init{-1.0f, -1, 0};  // values are at least 0, so init is the identity here
  T want = init;
  for (index_t i = 0; i < n; ++i) want = op_t{}(want, argmax_element(i));
  std::vector<T*> in(size_t(copies), nullptr);
  T* total = nullptr;
  BENCH_CHECK(cudaMalloc(&total, sizeof(T)));
  std::vector<problem> problems;
  parscan::scan_options<T> opts;
  opts.carry_out = total;
  for (T*& p : in) {
    BENCH_CHECK(cudaMalloc(&p, bytes));
    fill_argmax<<<2048, 256>>>(p, n);
    problems.push_back(problem::from({parscan::scan_kind::reduce, p, parscan::sequence_layout::contiguous(n), nullptr,
                                      parscan::sequence_layout::contiguous(n), opts, init, true}));
  }
  BENCH_CHECK(cudaDeviceSynchronize());
  const auto time = [&](const std::string& name, auto&& run) {
    BENCH_CHECK(cudaMemset(total, 0, sizeof(T)));
    if (run(0) != parscan::status::success) std::printf("%s failed\n", name.c_str()), std::exit(1);
    T got{};
    BENCH_CHECK(cudaMemcpy(&got, total, sizeof(T), cudaMemcpyDeviceToHost));
    const double err = got.value == want.value && got.index == want.index && got.count == want.count ? 0 : 1;
    if (err != 0) ++sink.failures, std::printf("FAILED argmax reduce %s at 2^%d\n", name.c_str(), log2n);
    const double us = bench::median_us([&](int i) { run(i); }, 25, 3), gbs = double(bytes) / us / 1e3;
    sink.rows.push_back({"argmax reduce " + name, "12B", "contiguous", "reduce", "2^" + std::to_string(log2n), us, gbs,
                         100 * gbs / sink.copy, err});
  };
  std::size_t cub_bytes = 0;
  BENCH_CHECK(cub::DeviceReduce::Reduce(nullptr, cub_bytes, in[0], total, n, op_t{}, init));
  void* tmp = nullptr;
  BENCH_CHECK(cudaMalloc(&tmp, cub_bytes));
  time("cub", [&](int i) {
    std::size_t b = cub_bytes;
    return cub::DeviceReduce::Reduce(tmp, b, in[size_t(i) % in.size()], total, n, op_t{}, init) == cudaSuccess
               ? parscan::status::success
               : parscan::status::exceeds_device_limits;
  });
  time("(library)", [&](int i) { return cd::dispatch_scan(problems[size_t(i) % problems.size()], op_t{}, 1,
                                                          workspace_backend()); });
  argmax_bulk_reduce_row<8, 40 * 1024, 2, true>(problems, time);
  argmax_bulk_reduce_row<8, 40 * 1024, 2, false>(problems, time);
  argmax_bulk_reduce_row<8, 24 * 1024, 3, true>(problems, time);
  argmax_bulk_reduce_row<8, 20 * 1024, 4, true>(problems, time);
  argmax_bulk_reduce_row<8, 16 * 1024, 5, true>(problems, time);
  argmax_bulk_reduce_row<4, 20 * 1024, 5, true>(problems, time);
  argmax_bulk_reduce_row<4, 16 * 1024, 6, true>(problems, time);
  argmax_bulk_reduce_row<4, 12 * 1024, 8, true>(problems, time);
  argmax_bulk_reduce_row<4, 8 * 1024, 8, true>(problems, time);
  BENCH_CHECK(cudaFree(tmp));
  BENCH_CHECK(cudaFree(total));
  for (T* p : in) BENCH_CHECK(cudaFree(p));
}

}  // namespace

// Inclusive scans of 2^log2n steps through the grid bulk tiles (agent/grid_bulk_tiles.cuh) in
// several shapes, launched directly, against the library's dispatch and CUB, each call rotating
// over enough buffer pairs to start cold in L2 as bench_scan's calls do (docs/performance.md,
// "Grid bulk tiles").
template <class T>
void grid_bulk_shapes(int log2n, double tol, result_sink& sink) {
  using problem = cd::generic_problem<T, T, T>;
  using op_t = typename generic_case<T>::op_t;
  const index_t n = index_t(1) << log2n;
  int l2 = 0;
  BENCH_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  const int rotation = 2 + static_cast<int>(3 * static_cast<double>(l2) / (2.0 * n * sizeof(T)));
  std::vector<generic_case<T>> cases(static_cast<std::size_t>(rotation), generic_case<T>{generic_case<T>::label, n});
  std::vector<problem> problems;
  for (auto& c : cases) {
    c.alloc();
    problems.push_back(problem::from({parscan::scan_kind::inclusive, c.in, parscan::sequence_layout::contiguous(n),
                                      c.out, parscan::sequence_layout::contiguous(n), {}, T{}, false}));
  }
  const auto timed = [&](const std::string& name, auto&& launch) {  // launch(problem, case) -> success
    BENCH_CHECK(cudaMemset(cases[0].out, 0xff, n * sizeof(T)));
    if (!launch(problems[0], cases[0])) return;
    BENCH_CHECK(cudaDeviceSynchronize());
    const double err = cases[0].check();
    if (!(err <= tol))
      ++sink.failures, std::printf("FAILED %s %s: error %.3g\n", cases[0].name.c_str(), name.c_str(), err);
    const double us = bench::median_us([&](int i) {
      const std::size_t k = static_cast<std::size_t>(i % rotation);
      if (!launch(problems[k], cases[k])) std::exit(1);
    }, 15, 2);
    cases[0].record(name, us, err, sink);
  };
  std::size_t cub_bytes = 0;
  BENCH_CHECK(cub::DeviceScan::InclusiveScan(nullptr, cub_bytes, cases[0].in, cases[0].out, op_t{}, n));
  void* tmp = nullptr;
  BENCH_CHECK(cudaMalloc(&tmp, cub_bytes));
  timed("cub", [&](const problem&, const generic_case<T>& c) {
    BENCH_CHECK(cub::DeviceScan::InclusiveScan(tmp, cub_bytes, c.in, c.out, op_t{}, n));
    return true;
  });
  timed("library", [&](const problem& P, const generic_case<T>&) {
    return cd::dispatch_scan(P, op_t{}, 1, workspace_backend()) == parscan::status::success;
  });
  const cd::device_facts dev = cd::current_device();
  const auto shape = [&](auto tiles, const std::string& name) {
    using tiles_t = decltype(tiles);
    if (!tiles_t::takes(problems[0], dev) || !tiles_t::fits(problems[0], 1, dev)) {
      std::printf("%s: not resident at 2^%d\n", name.c_str(), log2n);
      return;
    }
    timed(name, [&](const problem& P, const generic_case<T>&) {
      return tiles_t::launch(P, op_t{}, 1, workspace_backend()) == parscan::status::success;
    });
  };
  using small = cd::bulk_shape_of<problem, 8, 16 * 1024, 4>;
  using narrow = cd::bulk_shape_of<problem, 4, 16 * 1024, 8>;
  using narrow_small = cd::bulk_shape_of<problem, 4, 8 * 1024, 12>;
  using middle = cd::bulk_shape_of<problem, 8, 32 * 1024, 5>;
  using large = cd::bulk_shape_of<problem, 8, 44 * 1024, 5>;
  shape(cd::grid_bulk_tiles_of<small, problem, op_t>{}, "grid bulk 8w 16KB (4/SM)");
  shape(cd::grid_bulk_tiles_of<narrow, problem, op_t>{}, "grid bulk 4w 16KB (8/SM)");
  shape(cd::grid_bulk_tiles_of<narrow_small, problem, op_t>{}, "grid bulk 4w 8KB (12/SM)");
  shape(cd::grid_bulk_tiles_of<middle, problem, op_t>{}, "grid bulk 8w 32KB (5/SM)");
  shape(cd::grid_bulk_tiles_of<large, problem, op_t>{}, "grid bulk 8w 44KB (5/SM)");
  BENCH_CHECK(cudaFree(tmp));
  for (auto& c : cases) c.release();
}

int main(int argc, char** argv) {
  result_sink out{bench::copy_bandwidth_gbs()};
  using L = parscan::sequence_layout;
  const bool bulk_only = bench::has_flag(argc, argv, "--bulk");
  const auto report = [&] {  // the table, the JSON, and the exit status
    bench::print_table(out.rows, out.copy);
    bench::write_json(bench::json_arg(argc, argv), "bench_tuning", out.rows, out.copy);
    return out.failures ? 1 : 0;
  };
  if (bench::has_flag(argc, argv, "--short")) {
    for (int log2n = 13; log2n <= 23; ++log2n) {
      short_inputs<int>(log2n, 0, out);
      short_inputs<long long>(log2n, 0, out);
      short_inputs<parscan::affine<float>>(log2n, 1e-4, out);
    }
    return report();
  }
  if (bench::has_flag(argc, argv, "--reduce-spans")) {  // 2^26 first: an ncu run profiles its first launches
    for (int log2n : {26, 24, 28}) {
      reduce_shapes<int>(log2n, 0, out, true);
      reduce_shapes<long long>(log2n, 0, out, true);
    }
    return report();
  }
  if (bench::has_flag(argc, argv, "--in-order")) {  // affine pairs' reduce shapes at 2^24 (with --ncu) and 2^28
    const bool ncu = bench::has_flag(argc, argv, "--ncu");
    for (int log2n : {24, 28})
      if (!ncu || log2n == 24) reduce_shapes<parscan::affine<float>>(log2n, 1e-3, out, false, true);
    return report();
  }
  if (bench::has_flag(argc, argv, "--argmax-reduce")) {  // the 12-byte argmax's reduce shapes, cold in L2
    for (int log2n : {20, 21, 22, 24}) argmax_reduce_shapes(log2n, out);
    return report();
  }
  if (bench::has_flag(argc, argv, "--reduce-shapes")) {
    const bool ncu = bench::has_flag(argc, argv, "--ncu");  // 2^24 only
    for (int log2n = ncu ? 24 : 20; log2n <= (ncu ? 24 : 28); log2n += 2) {
      reduce_shapes<int>(log2n, 0, out);
      reduce_shapes<long long>(log2n, 0, out);
      reduce_shapes<parscan::affine<float>>(log2n, 1e-3, out);
    }
    return report();
  }
  if (bench::has_flag(argc, argv, "--bulk-mid")) {  // the bulk tiles' shapes at 2^22 … 2^26, against CUB
    for (int log2n : {22, 24, 26}) {
      bulk_against_cub<int>("int32 sum", log2n, 0, out);
      bulk_against_cub<long long>("int64 sum", log2n, 0, out);
      bulk_against_cub<parscan::affine<float>>("affine scan", log2n, 1e-4, out);
    }
    return report();
  }
  if (bench::has_flag(argc, argv, "--bulk-start")) {  // how the bulk tiles start, 16-256 MB, against CUB
    const auto starts = [&](const auto& c, double tol) {
      generic_bulk_start<cd::bulk_start::after_memset>(c, tol, out);
      generic_bulk_start<cd::bulk_start::early>(c, tol, out);
      generic_bulk_start<cd::bulk_start::after_memset>(c, tol, out);  // again: the spread within the run
      generic_bulk_start<cd::bulk_start::early>(c, tol, out);
    };
    for (int log2n : {22, 23, 24, 25, 26}) {
      against_cub<int>("int32 sum", log2n, 0, out, [&](const auto& c) { starts(c, 0); });
      against_cub<long long>("int64 sum", log2n - 1, 0, out, [&](const auto& c) { starts(c, 0); });
      against_cub<parscan::affine<float>>("affine scan", log2n - 1, 1e-4, out,
                                          [&](const auto& c) { starts(c, 1e-4); });
    }
    return report();
  }
  if (bench::has_flag(argc, argv, "--bulk-tail")) {  // the bulk tiles' last tiles cut shorter, 32-256 MB
    const auto tails = [&](const auto& c, double tol) {
      using T = std::remove_pointer_t<decltype(c.in)>;
      generic_bulk_start<cd::bulk_start::early>(c, tol, out);
      for (int eighths : {1, 2, 3}) {
        generic_bulk_tail<16 * 1024, T>(c, eighths, tol, out);
        generic_bulk_tail<20 * 1024, T>(c, eighths, tol, out);
        generic_bulk_tail<24 * 1024, T>(c, eighths, tol, out);
        generic_bulk_tail<32 * 1024, T>(c, eighths, tol, out);
        generic_bulk_start<cd::bulk_start::early>(c, tol, out);  // again: the spread within the run
      }
    };
    for (int log2n : {23, 24, 25, 26}) {
      against_cub<int>("int32 sum", log2n, 0, out, [&](const auto& c) { tails(c, 0); });
      against_cub<long long>("int64 sum", log2n - 1, 0, out, [&](const auto& c) { tails(c, 0); });
      against_cub<parscan::affine<float>>("affine scan", log2n - 1, 1e-4, out,
                                          [&](const auto& c) { tails(c, 1e-4); });
    }
    return report();
  }
  if (bench::has_flag(argc, argv, "--grid-bulk")) {  // the grid bulk tiles' shapes, 4-16 MB each way
    for (int log2n : {20, 21}) grid_bulk_shapes<int>(log2n, 0, out);
    for (int log2n : {19, 20}) grid_bulk_shapes<long long>(log2n, 0, out);
    grid_bulk_shapes<parscan::affine<float>>(20, 1e-4, out);
    grid_bulk_shapes<int>(22, 0, out);
    return report();
  }
  if (bench::has_flag(argc, argv, "--eight-mb")) {  // 8 MB each way, the library against CUB (for ncu)
    library_against_cub<long long>("int64 sum", 20, out);
    library_against_cub<int>("int32 sum", 21, out);
    return report();
  }
  if (bench::has_flag(argc, argv, "--phases")) {  // 2^28: where the bulk tiles' time goes
    {
      generic_case<int> c{"int32 sum", index_t(1) << 28};
      c.alloc();
      bulk_phases<0>(c, 0, out);
      bulk_phases<1>(c, 0, out);
      bulk_phases<2>(c, 0, out);
      c.release();
    }
    {
      generic_case<parscan::affine<float>> c{"affine scan", index_t(1) << 28};
      c.alloc();
      bulk_phases<0>(c, 1e-4, out);
      bulk_phases<1>(c, 1e-4, out);
      c.release();
    }
    {  // (no copy mode: its 16-byte stores take elements that divide 16 bytes)
      argmax_case c{index_t(1) << 28};
      c.alloc();
      bulk_phases<0>(c, 0, out);
      bulk_phases<1>(c, 0, out);
      c.release();
    }
    return report();
  }
  if (bench::has_flag(argc, argv, "--few-long-tail")) {  // the forward's few long sequences with a tail of short tiles
    const auto tails = [&](auto& c, double tol) {
      using T = std::remove_pointer_t<decltype(c.a)>;
      using shape = cd::bulk_shape<cd::recurrence_forward_problem<T>>;
      constexpr int tile_bytes = shape::smem, half = tile_bytes / 2, three_quarters = tile_bytes * 3 / 4;
      for (int round = 0; round < 2; ++round) {
        time_forward<cd::tile_shape<cd::recurrence_forward_problem<T>>>(c, "library", tol, out);
        for (int eighths : {1, 4, 16}) {
          recurrence_bulk_tail<shape::warps, tile_bytes, shape::min_blocks, half, T>(c, eighths, tol, out);
          recurrence_bulk_tail<shape::warps, tile_bytes, shape::min_blocks, three_quarters, T>(c, eighths, tol, out);
        }
      }
    };
    {
      forward_case<float> c{"fwd (1,16,2^22)", L::time_contiguous(16, index_t(1) << 22)};
      c.alloc();
      tails(c, 1e-5);
      c.release();
    }
    {
      forward_case<parscan::bfloat16> c{"fwd bf16 (1,16,2^22)", L::time_contiguous(16, index_t(1) << 22)};
      c.alloc();
      tails(c, 1e-2);
      c.release();
    }
    return report();
  }
  if (bench::has_flag(argc, argv, "--few-long")) {
    few_long<float>("fwd (1,16,2^22)", 1e-5, out);
    few_long<parscan::bfloat16>("fwd bf16 (1,16,2^22)", 1e-2, out);
    {
      forward_case<float> c{"fwd (1,256,65536)", L::time_contiguous(256, 65536)};
      c.alloc();
      recurrence_chained(c, 1e-5, out);
      c.release();
    }
  }
  if (bench::has_flag(argc, argv, "--packs")) {
    {
      forward_case<parscan::bfloat16> c{"fwd bf16 (8,4096,1536)", L::channel_last(8, 4096, 1536)};
      c.alloc();
      lane_packs_forward<parscan::bfloat16, 2>(c, 1e-2, out);
      lane_packs_forward<parscan::bfloat16, 4>(c, 1e-2, out);
      lane_packs_forward<parscan::bfloat16, 8>(c, 1e-2, out);
      c.release();
    }
    {
      forward_case<float> c{"fwd (8,4096,1536)", L::channel_last(8, 4096, 1536)};
      c.alloc();
      lane_packs_forward<float, 1>(c, 1e-5, out);
      lane_packs_forward<float, 2>(c, 1e-5, out);
      lane_packs_forward<float, 4>(c, 1e-5, out);
      c.release();
    }
  }
  if (bench::has_flag(argc, argv, "--chunk-stages") || bench::has_flag(argc, argv, "--wide-rows")) {
    chunk_variants = bench::has_flag(argc, argv, "--wide-rows") ? chunk_sweep::wide : chunk_sweep::stages;
    lane_loop_generic(1024, out);
    if (chunk_variants == chunk_sweep::wide) lane_loop_generic(2048, out);
    recurrence_chunk_variants<parscan::bfloat16>(out);
    recurrence_chunk_variants<float>(out);
    return report();
  }
  if (bench::has_flag(argc, argv, "--lengths")) {
    recurrence_lengths<parscan::bfloat16>(out);
    recurrence_lengths<float>(out);
    return report();
  }
  if (bench::has_flag(argc, argv, "--lengths-narrow")) {  // D = 256: 64 jobs of 128-byte rows, 128 of 64-byte
    recurrence_lengths(out, 256,
                       forward_shapes<float, cd::forward_chunk_shape<float, 4>, cd::forward_chunk_shape<float, 8>,
                                      cd::chunk_loop_shape<float, 2, 4, 4, 3>>{},
                       backward_shapes<float, cd::backward_chunk_shape<float, 4>, cd::backward_chunk_shape<float, 8>,
                                       cd::chunk_loop_shape<float, 3, 3, 4, 3>>{});
    return report();
  }
  if (bench::has_flag(argc, argv, "--channel-last")) {
    for (index_t D : {index_t(1024), index_t(512), index_t(2048)}) lane_loop_generic(D, out);
  }
  if (bench::has_flag(argc, argv, "--lane-loop")) {
    forward_lane_loops<parscan::bfloat16>("fwd bf16 (8,4096,1536)", 1e-2, out);
    backward_lane_loops<float>("bwd (8,4096,1536)", 1e-4, out);
    backward_lane_loops<parscan::bfloat16>("bwd bf16 (8,4096,1536)", 3e-2, out);
    return report();
  }
  if (bench::has_flag(argc, argv, "--few-long") || bench::has_flag(argc, argv, "--channel-last") ||
      bench::has_flag(argc, argv, "--packs")) {
    return report();
  }
  if (!bench::has_flag(argc, argv, "--skip-generic")) {
    {
      generic_case<int> c{"int32 sum", index_t(1) << 28};
      c.alloc();
      generic_cub(c, 0, out);
      bulk_shapes(c, 0, out);
      generic_cub(c, 0, out);
      if (!bulk_only) {
        generic_shape<int, 16, 8, 0>(c, 0, out);  // the one-tile-per-block window chain
        generic_shape<int, 16, 8, 2, false>(c, 0, out);  // the persistent hierarchical grid
        generic_shape<int, 16, 16, 2>(c, 0, out);  // persistent, staged, window chain
        generic_shape<int, 16, 8, 3>(c, 0, out);   // ... reducing ahead
        generic_shape<int, 16, 16, 3>(c, 0, out);  // ... reducing ahead (the library's default before bulk tiles)
        generic_shape<int, 32, 8, 3>(c, 0, out);
        reduces(c, out);
      }
      c.release();
    }
    {
      generic_case<parscan::affine<float>> c{"affine scan", index_t(1) << 28};
      c.alloc();
      generic_cub(c, 1e-4, out);
      bulk_shapes(c, 1e-4, out);
      if (!bulk_only) {
        generic_shape<parscan::affine<float>, 16, 8, 2, false>(c, 1e-4, out);  // the persistent hierarchical grid
        generic_shape<parscan::affine<float>, 16, 8, 2>(c, 1e-4, out);
        generic_shape<parscan::affine<float>, 16, 8, 3>(c, 1e-4, out);  // the library's default before bulk tiles
        generic_shape<parscan::affine<float>, 16, 16, 3>(c, 1e-4, out);
      }
      c.release();
    }
    if (bulk_only || bench::has_flag(argc, argv, "--only-generic")) return report();
  }
  {  // many time-contiguous sequences: the warp loop
    forward_case<float> c{"fwd (8,1536,4096)", L::time_contiguous(8 * 1536, 4096)};
    c.alloc();
    variant<float, 16, 4, 8, 8>(c, 1e-5, out);  // the library's default
    variant<float, 16, 4, 8, 8, 0>(c, 1e-5, out);
    variant<float, 16, 2, 8, 8, 3>(c, 1e-5, out);
    variant<float, 16, 4, 8, 8, 3>(c, 1e-5, out);
    variant<float, 8, 4, 8, 8, 3>(c, 1e-5, out);
    variant<float, 32, 2, 8, 8, 2>(c, 1e-5, out);
    c.release();
  }
  {
    forward_case<float> c{"fwd (8,1536,1024)", L::time_contiguous(8 * 1536, 1024)};
    c.alloc();
    variant<float, 16, 4, 8, 8>(c, 1e-5, out);
    variant<float, 8, 4, 8, 8>(c, 1e-5, out);
    variant<float, 8, 4, 8, 8, 3>(c, 1e-5, out);
    variant<float, 4, 4, 8, 8, 4>(c, 1e-5, out);
    c.release();
  }
  {
    forward_case<parscan::bfloat16> c{"fwd bf16 (8,1536,4096)", L::time_contiguous(8 * 1536, 4096)};
    c.alloc();
    variant<parscan::bfloat16, 16, 4, 8, 8>(c, 1e-2, out);
    variant<parscan::bfloat16, 16, 4, 8, 8, 3>(c, 1e-2, out);
    variant<parscan::bfloat16, 32, 4, 8, 8, 2>(c, 1e-2, out);
    variant<parscan::bfloat16, 32, 2, 8, 8, 3>(c, 1e-2, out);
    c.release();
  }
  {  // few long sequences: chained tiles
    forward_case<float> c{"fwd (1,16,2^22)", L::time_contiguous(16, index_t(1) << 22)};
    c.alloc();
    variant<float, 16, 4, 8, 8>(c, 1e-5, out);
    variant<float, 16, 4, 8, 8, 2, 3>(c, 1e-5, out);
    variant<float, 16, 4, 8, 8, 2, 0, false, true>(c, 1e-5, out);
    variant<float, 16, 4, 8, 8, 2, 2, false, true>(c, 1e-5, out);
    c.release();
  }
  {
    forward_case<parscan::bfloat16> c{"fwd bf16 (1,16,2^22)", L::time_contiguous(16, index_t(1) << 22)};
    c.alloc();
    variant<parscan::bfloat16, 16, 4, 8, 8>(c, 1e-2, out);
    variant<parscan::bfloat16, 32, 4, 8, 8, 2, 2, false, true>(c, 1e-2, out);
    c.release();
  }
  {  // one long sequence: chained tiles, 2^28 steps (the generic scan's case)
    forward_case<float> c{"fwd (1,1,2^28)", L::time_contiguous(1, index_t(1) << 28)};
    c.alloc();
    variant<float, 16, 4, 8, 8>(c, 1e-5, out);
    variant<float, 16, 4, 8, 8, 2, 3>(c, 1e-5, out);
    variant<float, 16, 4, 4, 8, 2, 3>(c, 1e-5, out);
    variant<float, 16, 4, 4, 8, 2, 2, true>(c, 1e-5, out);
    variant<float, 16, 4, 4, 8, 2, 3, true>(c, 1e-5, out);
    variant<float, 32, 4, 4, 8, 2, 2, true>(c, 1e-5, out);
    variant<float, 16, 4, 8, 8, 2, 0, false, true>(c, 1e-5, out);
    variant<float, 16, 4, 8, 8, 2, 3, false, true>(c, 1e-5, out);
    c.release();
  }
  {  // channel-last: lane tiles
    forward_case<float> c{"fwd (8,4096,1536)", L::channel_last(8, 4096, 1536)};
    c.alloc();
    variant<float, 16, 4, 8, 8>(c, 1e-5, out);
    variant<float, 32, 4, 8, 4>(c, 1e-5, out);
    variant<float, 32, 4, 8, 8>(c, 1e-5, out);
    variant<float, 64, 4, 8, 4>(c, 1e-5, out);
    lane_loop_against_staged<float, 32>(c, 1e-5, out);
    lane_loop_against_staged<float, 16>(c, 1e-5, out);
    c.release();
  }
  forward_lane_loops<parscan::bfloat16>("fwd bf16 (8,4096,1536)", 1e-2, out);
  const int rc = report();
  if (out.failures) std::printf("FAILED: %d variant(s) above tolerance\n", out.failures);
  return rc;
}
