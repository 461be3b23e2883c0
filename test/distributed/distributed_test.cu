// test/distributed/distributed_test.cu — the NCCL path of parscan/distributed.hpp on 2 GPUs:
// one process, one thread per GPU (ncclCommInitAll), each rank holding one slice; results equal
// one single-GPU call, bitwise for exact operators and within the recurrence tests' tolerances.
// Skipped (with a warning) where fewer than 2 GPUs are visible or parscan::distributed is not
// built. Run with NCCL_NVLS_ENABLE=0 (NVLink multicast off) on machines that need it.
#include "support/catch.hpp"

#if PARSCAN_TEST_NCCL

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include <parscan/distributed.cuh>
#include <parscan/parscan.cuh>

namespace {

using parscan::direction;
using parscan::index_t;
using parscan::status;
namespace dist = parscan::distributed;

struct affine_u64 {
  std::uint64_t a, b;
};
// Exact and non-commutative: a wrong fold order changes bits.
struct affine_u64_op {
  PARSCAN_HD affine_u64 operator()(const affine_u64& e, const affine_u64& l) const { return {l.a * e.a, l.a * e.b + l.b}; }
};

template <class V>
V* to_device(int dev, const std::vector<V>& h) {
  cudaSetDevice(dev);
  V* d = nullptr;
  REQUIRE(cudaMalloc(&d, sizeof(V) * (h.size() ? h.size() : 1)) == cudaSuccess);
  if (!h.empty()) REQUIRE(cudaMemcpy(d, h.data(), sizeof(V) * h.size(), cudaMemcpyHostToDevice) == cudaSuccess);
  return d;
}
template <class V>
std::vector<V> to_host(int dev, const V* d, std::size_t n) {
  cudaSetDevice(dev);
  std::vector<V> h(n);
  if (n) REQUIRE(cudaMemcpy(h.data(), d, sizeof(V) * n, cudaMemcpyDeviceToHost) == cudaSuccess);
  return h;
}

struct two_gpus {
  ncclComm_t comms[2] = {nullptr, nullptr};
  cudaStream_t streams[2] = {nullptr, nullptr};
  bool ok = false;
  two_gpus() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) return;
    const int devs[2] = {0, 1};
    if (ncclCommInitAll(comms, 2, devs) != ncclSuccess) return;
    for (int r = 0; r < 2; ++r) {
      cudaSetDevice(r);
      cudaStreamCreate(&streams[r]);
    }
    ok = true;
  }
  ~two_gpus() {
    for (int r = 0; r < 2; ++r) {
      if (comms[r]) ncclCommDestroy(comms[r]);
      if (streams[r]) cudaStreamDestroy(streams[r]);
    }
  }
  /// body(rank) on one thread per GPU, that GPU current; then every stream synchronised.
  std::vector<status> run(const std::function<status(int)>& body) {
    std::vector<status> st(2, status::success);
    std::thread t[2];
    for (int r = 0; r < 2; ++r)
      t[r] = std::thread([&, r] {
        cudaSetDevice(r);
        st[r] = body(r);
        cudaStreamSynchronize(streams[r]);
      });
    for (auto& th : t) th.join();
    return st;
  }
};

}  // namespace

TEST_CASE("distributed generic scans on 2 GPUs equal one GPU (exact affine)", "[distributed][gpu]") {
  two_gpus g;
  if (!g.ok) {
    WARN("fewer than 2 GPUs (or NCCL failed): skipped");
    return;
  }
  const index_t seqs = 3;
  for (const auto& lengths : std::vector<std::vector<index_t>>{{5, 8}, {0, 9}, {11, 0}, {100003, 77}, {4096, 4096}})
    for (int k = 0; k < 3; ++k)
      for (direction dir : {direction::forward, direction::reverse})
        for (bool with_carry : {false, true}) {
          CAPTURE(lengths[0], lengths[1], k, dir == direction::reverse, with_carry);
          const index_t T = lengths[0] + lengths[1];
          std::vector<affine_u64> in(static_cast<std::size_t>(seqs * T)), carry(static_cast<std::size_t>(seqs));
          std::uint64_t x = 0x9e3779b97f4a7c15ull;
          auto next = [&] { return x = x * 6364136223846793005ull + 1442695040888963407ull; };
          for (auto& v : in) v = {next() | 1u, next()};
          for (auto& v : carry) v = {next() | 1u, next()};
          const affine_u64 init{next() | 1u, next()};
          const affine_u64_op op;

          // One GPU, whole sequences.
          affine_u64* d_in = to_device(0, in);
          affine_u64* d_out = to_device(0, std::vector<affine_u64>(in.size()));
          affine_u64* d_carry = to_device(0, carry);
          affine_u64* d_total = to_device(0, std::vector<affine_u64>(static_cast<std::size_t>(seqs)));
          const parscan::cuda_backend one{g.streams[0]};
          const parscan::sequence_layout whole = parscan::sequence_layout::time_contiguous(seqs, T);
          parscan::scan_options<affine_u64> o{dir, with_carry ? d_carry : nullptr, d_total};
          status st = k == 0   ? parscan::inclusive_scan(one, d_in, d_out, whole, op, o)
                      : k == 1 ? parscan::exclusive_scan(one, d_in, d_out, whole, op, init, o)
                               : parscan::reduce(one, d_in, whole, op, init, d_total, o);
          REQUIRE(st == status::success);
          REQUIRE(cudaStreamSynchronize(g.streams[0]) == cudaSuccess);
          const auto want = to_host(0, d_out, in.size());
          const auto want_total = to_host(0, d_total, static_cast<std::size_t>(seqs));

          // Two GPUs, one slice each: rows of each slice copied out densely.
          affine_u64 *r_in[2], *r_out[2], *r_carry[2], *r_total[2];
          for (int r = 0; r < 2; ++r) {
            const index_t len = lengths[r], t0 = r == 0 ? 0 : lengths[0];
            std::vector<affine_u64> s(static_cast<std::size_t>(seqs * len));
            for (index_t q = 0; q < seqs; ++q)
              for (index_t t = 0; t < len; ++t) s[static_cast<std::size_t>(q * len + t)] = in[static_cast<std::size_t>(q * T + t0 + t)];
            r_in[r] = to_device(r, s);
            r_out[r] = to_device(r, std::vector<affine_u64>(s.size()));
            r_carry[r] = to_device(r, carry);
            r_total[r] = to_device(r, std::vector<affine_u64>(static_cast<std::size_t>(seqs)));
          }
          const auto sts = g.run([&](int r) {
            const parscan::cuda_backend be{g.streams[r]};
            const parscan::sequence_layout slice = parscan::sequence_layout::time_contiguous(seqs, lengths[r]);
            parscan::scan_options<affine_u64> ro{dir, with_carry ? r_carry[r] : nullptr, r_total[r]};
            if (k == 0) return dist::inclusive_scan(be, g.comms[r], r_in[r], r_out[r], slice, op, ro);
            if (k == 1) return dist::exclusive_scan(be, g.comms[r], r_in[r], r_out[r], slice, op, init, ro);
            return dist::reduce(be, g.comms[r], r_in[r], slice, op, init, r_total[r], ro);
          });
          for (status s : sts) REQUIRE(s == status::success);
          for (int r = 0; r < 2; ++r) {
            const index_t len = lengths[r], t0 = r == 0 ? 0 : lengths[0];
            const auto got = to_host(r, r_out[r], static_cast<std::size_t>(seqs * len));
            const auto total = to_host(r, r_total[r], static_cast<std::size_t>(seqs));
            if (k != 2)
              for (index_t q = 0; q < seqs; ++q)
                for (index_t t = 0; t < len; ++t) {
                  const auto& a = got[static_cast<std::size_t>(q * len + t)];
                  const auto& b = want[static_cast<std::size_t>(q * T + t0 + t)];
                  REQUIRE((a.a == b.a && a.b == b.b));
                }
            for (index_t q = 0; q < seqs; ++q)
              REQUIRE((total[q].a == want_total[q].a && total[q].b == want_total[q].b));
            cudaSetDevice(r);
            cudaFree(r_in[r]), cudaFree(r_out[r]), cudaFree(r_carry[r]), cudaFree(r_total[r]);
          }
          cudaSetDevice(0);
          cudaFree(d_in), cudaFree(d_out), cudaFree(d_carry), cudaFree(d_total);
        }
}

TEST_CASE("distributed gated recurrence on 2 GPUs equals one GPU (float)", "[distributed][gpu]") {
  two_gpus g;
  if (!g.ok) {
    WARN("fewer than 2 GPUs (or NCCL failed): skipped");
    return;
  }
  using parscan::recurrence_layout;
  const index_t B = 2, D = 33;
  for (recurrence_layout layout : {recurrence_layout::time_contiguous, recurrence_layout::channel_last})
    for (bool reverse : {false, true})
      for (const auto& lengths : std::vector<std::vector<index_t>>{{7, 1000}, {0, 33}, {4097, 0}}) {
        CAPTURE(layout == recurrence_layout::channel_last, reverse, lengths[0], lengths[1]);
        const index_t T = lengths[0] + lengths[1], S = B * D;
        auto at = [&](index_t len, index_t b, index_t d, index_t t) {
          return layout == recurrence_layout::channel_last ? (b * len + t) * D + d : (b * D + d) * len + t;
        };
        std::vector<float> a(static_cast<std::size_t>(S * T)), b(a.size()), dx(a.size()), x0(static_cast<std::size_t>(S)),
            dxf(x0.size());
        std::uint64_t r64 = 12345;
        auto u = [&] { r64 = r64 * 6364136223846793005ull + 1442695040888963407ull; return double(r64 >> 11) * 0x1p-53; };
        for (auto& v : a) v = float(0.6 + 0.39 * u());
        for (auto& v : b) v = float(2 * u() - 1);
        for (auto& v : dx) v = float(2 * u() - 1);
        for (auto& v : x0) v = float(2 * u() - 1);
        for (auto& v : dxf) v = float(2 * u() - 1);
        // One GPU.
        float *da_ = to_device(0, a), *db_ = to_device(0, b), *ddx = to_device(0, dx), *dx0 = to_device(0, x0),
              *ddxf = to_device(0, dxf);
        float *dxo = to_device(0, std::vector<float>(a.size())), *dxfin = to_device(0, std::vector<float>(x0.size()));
        float *dga = to_device(0, std::vector<float>(a.size())), *dgb = to_device(0, std::vector<float>(a.size()));
        float* dgx0 = to_device(0, std::vector<float>(x0.size()));
        parscan::gated_forward_args<float> f;
        f.shape = {B, D, T, layout};
        f.a = da_, f.b = db_, f.x = dxo, f.x0 = dx0, f.x_final = dxfin, f.reverse = reverse;
        const parscan::cuda_backend one{g.streams[0]};
        REQUIRE(parscan::gated_recurrence_forward(one, f) == status::success);
        parscan::gated_backward_args<float> bw;
        bw.shape = f.shape;
        bw.a = da_, bw.x = dxo, bw.x0 = dx0, bw.dx = ddx, bw.dx_final = ddxf, bw.da = dga, bw.db = dgb, bw.dx0 = dgx0;
        bw.reverse = reverse;
        REQUIRE(parscan::gated_recurrence_backward(one, bw) == status::success);
        REQUIRE(cudaStreamSynchronize(g.streams[0]) == cudaSuccess);
        const auto want_x = to_host(0, dxo, a.size()), want_da = to_host(0, dga, a.size()), want_db = to_host(0, dgb, a.size());
        const auto want_xf = to_host(0, dxfin, x0.size()), want_dx0 = to_host(0, dgx0, x0.size());

        // Two GPUs.
        struct rank_bufs { float *a, *b, *dx, *x, *da, *db, *entry, *xf, *dx0, *x0, *dxf; };
        rank_bufs rb[2];
        const int first = reverse ? 1 : 0, last = reverse ? 0 : 1;
        for (int r = 0; r < 2; ++r) {
          const index_t len = lengths[r], t0 = r == 0 ? 0 : lengths[0];
          auto slice = [&](const std::vector<float>& w) {
            std::vector<float> s(static_cast<std::size_t>(S * len));
            for (index_t bb = 0; bb < B; ++bb)
              for (index_t d = 0; d < D; ++d)
                for (index_t t = 0; t < len; ++t) s[at(len, bb, d, t)] = w[at(T, bb, d, t0 + t)];
            return s;
          };
          const std::vector<float> zs(static_cast<std::size_t>(S * len)), zc(static_cast<std::size_t>(S));
          rb[r] = {to_device(r, slice(a)), to_device(r, slice(b)), to_device(r, slice(dx)), to_device(r, zs), to_device(r, zs),
                   to_device(r, zs), to_device(r, zc), to_device(r, zc), to_device(r, zc), to_device(r, x0), to_device(r, dxf)};
        }
        auto sts = g.run([&](int r) {
          parscan::gated_forward_args<float> fr = f;
          fr.shape.length = lengths[r];
          fr.a = rb[r].a, fr.b = rb[r].b, fr.x = rb[r].x, fr.x0 = r == first ? rb[r].x0 : nullptr, fr.x_final = rb[r].xf;
          const parscan::cuda_backend be{g.streams[r]};
          if (status s = dist::gated_recurrence_forward(be, g.comms[r], fr, rb[r].entry); s != status::success) return s;
          parscan::gated_backward_args<float> br = bw;
          br.shape.length = lengths[r];
          br.a = rb[r].a, br.x = rb[r].x, br.dx = rb[r].dx, br.da = rb[r].da, br.db = rb[r].db;
          br.x0 = r == first ? rb[r].x0 : rb[r].entry;
          br.dx_final = r == last ? rb[r].dxf : nullptr;
          br.dx0 = r == first ? rb[r].dx0 : nullptr;
          return dist::gated_recurrence_backward(be, g.comms[r], br);
        });
        for (status s : sts) REQUIRE(s == status::success);
        auto close = [](float got, float want) { return std::fabs(got - want) <= 2e-5f * (1.0f + std::fabs(want)); };
        for (int r = 0; r < 2; ++r) {
          const index_t len = lengths[r], t0 = r == 0 ? 0 : lengths[0];
          const auto x = to_host(r, rb[r].x, static_cast<std::size_t>(S * len));
          const auto ga = to_host(r, rb[r].da, x.size()), gb = to_host(r, rb[r].db, x.size());
          const auto xf = to_host(r, rb[r].xf, static_cast<std::size_t>(S));
          for (index_t bb = 0; bb < B; ++bb)
            for (index_t d = 0; d < D; ++d)
              for (index_t t = 0; t < len; ++t) {
                REQUIRE(close(x[at(len, bb, d, t)], want_x[at(T, bb, d, t0 + t)]));
                REQUIRE(close(ga[at(len, bb, d, t)], want_da[at(T, bb, d, t0 + t)]));
                REQUIRE(close(gb[at(len, bb, d, t)], want_db[at(T, bb, d, t0 + t)]));
              }
          for (index_t s = 0; s < S; ++s) REQUIRE(close(xf[s], want_xf[s]));
          if (r == first) {
            const auto g0 = to_host(r, rb[r].dx0, static_cast<std::size_t>(S));
            for (index_t s = 0; s < S; ++s) REQUIRE(close(g0[s], want_dx0[s]));
          }
          cudaSetDevice(r);
          for (float* p : {rb[r].a, rb[r].b, rb[r].dx, rb[r].x, rb[r].da, rb[r].db, rb[r].entry, rb[r].xf, rb[r].dx0, rb[r].x0, rb[r].dxf})
            cudaFree(p);
        }
        cudaSetDevice(0);
        for (float* p : {da_, db_, ddx, dx0, ddxf, dxo, dxfin, dga, dgb, dgx0}) cudaFree(p);
      }
}

#endif  // PARSCAN_TEST_NCCL
