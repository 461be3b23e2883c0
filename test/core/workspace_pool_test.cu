// test/core/workspace_pool_test.cu — where a CUDA call given neither a workspace nor an
// allocator takes its temporary storage: the library's pool of the device
// (parscan::cuda_workspace_pool), which keeps what it reserved across synchronisations, so a
// second call reserves nothing new (the calls' results checked against host sums too); and that
// making the pool inside a stream capture leaves the capture valid.
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include <parscan/cuda/scan.cuh>
#include <parscan/ops/basic.hpp>

#include "support/env.hpp"
#include "support/random.hpp"

namespace {

using parscan::index_t;

std::uint64_t pool_attribute(cudaMemPool_t pool, cudaMemPoolAttr attr) {
  std::uint64_t v = 0;
  REQUIRE(cudaMemPoolGetAttribute(pool, attr, &v) == cudaSuccess);
  return v;
}

}  // namespace

TEST_CASE(PARSCAN_TEST_NAME("workspace pool: calls without a workspace take the library's pool, which keeps it"),
          PARSCAN_TEST_TAGS("[workspace][scan]")) {
  int device = -1;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  cudaMemPool_t pool = parscan::cuda_workspace_pool();
  REQUIRE(pool != nullptr);
  CHECK(parscan::cuda_workspace_pool(device) == pool);
  cudaMemPool_t default_pool = nullptr;
  REQUIRE(cudaDeviceGetDefaultMemPool(&default_pool, device) == cudaSuccess);
  CHECK(pool != default_pool);
  CHECK(pool_attribute(pool, cudaMemPoolAttrReleaseThreshold) == UINT64_MAX);

  // Long enough for the chained tiles, whose tile states are the workspace.
  const index_t n = (index_t(1) << 22) + 77;
  const std::size_t need = parscan::scan_workspace_size<std::int32_t>(parscan::sequence_layout::contiguous(n),
                                                                      parscan::sum_op<std::int32_t>{});
  REQUIRE(need > 0);
  PARSCAN_TEST_RNG(rng, "workspace pool");
  std::vector<std::int32_t> in(static_cast<std::size_t>(n));
  for (auto& v : in) v = static_cast<std::int32_t>(rng.small_int(-1000, 1000));
  std::int32_t *din = nullptr, *dout = nullptr;
  REQUIRE(cudaMalloc(&din, sizeof(std::int32_t) * in.size()) == cudaSuccess);
  REQUIRE(cudaMalloc(&dout, sizeof(std::int32_t) * in.size()) == cudaSuccess);
  REQUIRE(cudaMemcpy(din, in.data(), sizeof(std::int32_t) * in.size(), cudaMemcpyHostToDevice) == cudaSuccess);

  std::vector<std::uint64_t> reserved;
  for (int call = 0; call < 2; ++call) {
    REQUIRE(cudaMemset(dout, 0xA5, sizeof(std::int32_t) * in.size()) == cudaSuccess);
    REQUIRE(parscan::inclusive_scan(parscan::cuda_backend{}, din, dout, n, parscan::sum_op<std::int32_t>{}) ==
            parscan::status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    std::vector<std::int32_t> out(in.size());
    REQUIRE(cudaMemcpy(out.data(), dout, sizeof(std::int32_t) * out.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    std::int64_t sum = 0, wrong = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      sum += in[i];
      wrong += out[i] != static_cast<std::int32_t>(sum);
    }
    CHECK(wrong == 0);
    // The call's storage went back to the pool, which kept it.
    CHECK(pool_attribute(pool, cudaMemPoolAttrUsedMemCurrent) == 0);
    reserved.push_back(pool_attribute(pool, cudaMemPoolAttrReservedMemCurrent));
    CHECK(reserved.back() >= need);
  }
  CHECK(reserved[1] == reserved[0]);
  cudaFree(din);
  cudaFree(dout);
}

TEST_CASE(PARSCAN_TEST_NAME("workspace pool: made while a stream is captured, it leaves the capture valid"),
          PARSCAN_TEST_TAGS("[workspace][graph]")) {
  // A process's first call without a workspace may come inside a capture (the library's pool is
  // made on first use); in the global capture mode cudaMemPoolCreate is refused and the refusal
  // invalidates the capture, so the pool is made in the relaxed mode.
  int device = -1;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaMemPool_t pool = parscan::cuda_detail::create_workspace_pool(device);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(s, &graph);
  CHECK(pool != nullptr);
  CHECK(ended == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);
  if (graph) cudaGraphDestroy(graph);
  if (pool) {
    CHECK(pool_attribute(pool, cudaMemPoolAttrReleaseThreshold) == UINT64_MAX);
    cudaMemPoolDestroy(pool);
  }
  cudaStreamDestroy(s);
}
