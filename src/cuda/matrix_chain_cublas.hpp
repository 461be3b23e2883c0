// src/cuda/matrix_chain_cublas.hpp — the matrix chain's wide GEMM levels on cuBLAS: float
// products of d×d matrices, batched (cublasGemmStridedBatchedEx), with the arithmetic that
// chain_math names. Host code only; matrix_cuda.cuh's chain tree calls it for d ≥
// chain_cublas_min_d, where a level is arithmetic, not launches (docs/performance.md).
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include <parscan/cuda/matrix/chain_kernels.cuh>
#include <parscan/matrix_recurrence.hpp>
#include <parscan/status.hpp>

namespace parscan {
namespace cuda_detail {

/// The smallest d whose chain totals (float) take cuBLAS for their levels. Below it the
/// library's own kernels: the chunk engine for d ≤ 64, the GEMM tree between. Measured
/// (H200, 5a87ff7, n = 1000): at d = 64 cuBLAS's levels took 139.5 µs against the GEMM tree's
/// 108–121 µs; at d = 128 and 256 they took 189 and 902 µs against 344 and 1992 µs.
#ifndef PARSCAN_CHAIN_CUBLAS_MIN_D  // a build-time override, only for measuring the crossover
inline constexpr index_t chain_cublas_min_d = 128;
#else
inline constexpr index_t chain_cublas_min_d = PARSCAN_CHAIN_CUBLAS_MIN_D;
#endif

/// Bytes of the call's workspace handed to cuBLAS (cublasSetWorkspace), so that cuBLAS itself
/// allocates nothing: the caller's workspace is all the call uses, also inside a captured graph.
/// 32 MiB is cuBLAS's recommendation for Hopper (4 MiB before it).
inline constexpr std::size_t chain_cublas_workspace_bytes = std::size_t(32) << 20;

/// o[q] = a[q]·b[q] for q < count: row-major d×d float matrices, in the arithmetic `math` names
/// (exact: pedantic fp32; tf32 / bf16: fp32 operands rounded for the tensor cores, fp32 sums),
/// on `stream`, with `workspace` (chain_cublas_workspace_bytes, 256-byte aligned) for cuBLAS.
/// The three lists must share their grouping (per) and have div = 1: the chain tree's do. A
/// list that is uniform over all of `count` goes to cuBLAS in one batched call; otherwise one
/// call per group. cuBLAS failures come back as status::cuda_error (allocation: status::
/// allocation_failed); nothing is launched after one.
status cublas_chain_products(mat_list<const float> a, mat_list<const float> b, mat_list<float> o, index_t count,
                             index_t d, chain_math math, void* workspace, cudaStream_t stream);

}  // namespace cuda_detail
}  // namespace parscan
