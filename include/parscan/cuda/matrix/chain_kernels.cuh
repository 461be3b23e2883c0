// parscan/cuda/matrix/chain_kernels.cuh — the kernels behind the CUDA matrix-chain products
// (src/cuda/matrix_cuda.cuh drives them; docs/design.md explains the plan):
//   - gemm_kernel: a batched SIMT GEMM in compute precision (exact), for d > 32 and prefixes;
//   - mma_gemm_kernel: the same batched GEMM on tensor cores (chain_math::tf32 / bf16);
//   - mat_copy_kernel: copies, conversions and the identity;
//   - chain_chunk_kernel: totals and prefixes of chains of d ≤ 64, each block walking a chunk
//     of a chain in shared memory.
// Indices are 64-bit; every grid loops over its work.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cooperative_groups.h>

#include "../block/block_matrix_product.cuh"
#include "matrix_kernels.cuh"

namespace parscan::cuda_detail {

// ---------------------------------------------------------------------------------------
// Matrix chains: batched d×d products.

/// A list of d×d row-major matrices: matrix q at ptr + (q / per)·outer + ((q % per) / div)·inner.
template <class X>
struct mat_list {
  X* ptr = nullptr;
  index_t per = 1, div = 1, outer = 0, inner = 0;
  __host__ __device__ X* at(index_t q) const { return ptr + (q / per) * outer + ((q % per) / div) * inner; }
};

inline constexpr int gemm_tile = 64, gemm_k = 16, gemm_threads = 256;

/// o[q] = a[q]·b[q] for q < count, in C; 64×64 output tiles over blockIdx.x, the matrices over
/// blockIdx.y (grid-stride). Inputs convert to C on load; the output rounds once on store.
template <class TA, class TB, class TO, class C>
__global__ void __launch_bounds__(gemm_threads) gemm_kernel(mat_list<const TA> a, mat_list<const TB> b,
                                                             mat_list<TO> o, index_t count, int d) {
  __shared__ C As[gemm_k][gemm_tile + 1];
  __shared__ C Bs[gemm_k][gemm_tile + 1];
  const int tid = static_cast<int>(threadIdx.x), tx = tid % 16, ty = tid / 16;
  const int tiles_n = (d + gemm_tile - 1) / gemm_tile;
  const int m0 = static_cast<int>(blockIdx.x) / tiles_n * gemm_tile, n0 = static_cast<int>(blockIdx.x) % tiles_n * gemm_tile;
  for (index_t q = blockIdx.y; q < count; q += gridDim.y) {
    const TA* A = a.at(q);
    const TB* Bm = b.at(q);
    C acc[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[r][c] = C(0);
    for (int k0 = 0; k0 < d; k0 += gemm_k) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int e = tid + r * gemm_threads;
        const int row = e / gemm_k, kk = e % gemm_k;  // A tile: 64 rows × 16
        const int gi = m0 + row, gk = k0 + kk;
        As[kk][row] = (gi < d && gk < d) ? to_c<C>(A[static_cast<index_t>(gi) * d + gk]) : C(0);
        const int kb = e / gemm_tile, col = e % gemm_tile;  // B tile: 16 × 64 columns
        const int gkb = k0 + kb, gj = n0 + col;
        Bs[kb][col] = (gkb < d && gj < d) ? to_c<C>(Bm[static_cast<index_t>(gkb) * d + gj]) : C(0);
      }
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < gemm_k; ++kk) {
        C av[4], bv[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) av[r] = As[kk][ty + 16 * r];
#pragma unroll
        for (int c = 0; c < 4; ++c) bv[c] = Bs[kk][tx + 16 * c];
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[r][c] += av[r] * bv[c];
      }
      __syncthreads();  // the tiles are reloaded next
    }
    TO* O = o.at(q);
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int gi = m0 + ty + 16 * r, gj = n0 + tx + 16 * c;
        if (gi < d && gj < d) O[static_cast<index_t>(gi) * d + gj] = from_c<TO>(acc[r][c]);
      }
  }
}

/// o[q] = a[q] (converted), or the identity when a.ptr is null: the elements of one matrix
/// over blockIdx.x and threads, the matrices over blockIdx.y (grid-stride both).
template <class TA, class TO>
__global__ void mat_copy_kernel(mat_list<const TA> a, mat_list<TO> o, index_t count, int d) {
  const int dd = d * d;
  using C = compute_t<TO>;
  for (index_t q = blockIdx.y; q < count; q += gridDim.y) {
    const TA* A = a.ptr ? a.at(q) : nullptr;
    TO* O = o.at(q);
    for (int r = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); r < dd;
         r += static_cast<int>(gridDim.x * blockDim.x)) {
      const C v = A ? to_c<C>(A[r]) : ((r / d == r % d) ? C(1) : C(0));
      O[r] = from_c<TO>(v);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Tensor-core GEMM for the opt-in modes (float compute only).

enum class mma_kind { tf32, bf16 };

inline constexpr int mma_tile = 64, mma_k = 32, mma_threads = 128;
// Paddings: the tf32 fragment reads are conflict-free; the bf16 ones (pairs of k) are 2-way.
inline constexpr int mma_lda = mma_k + 4, mma_ldb = mma_tile + 8;

__device__ __forceinline__ std::uint32_t to_tf32(float x) {
  std::uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

/// Two floats as bf16x2: `lo` (the smaller k) in the low half, as the mma fragments expect.
__device__ __forceinline__ std::uint32_t to_bf16x2(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));  // first source → upper half
  return r;
}

/// acc[i][j] += A fragment i · B fragment j for a warp's 2×4 m16n8 fragments (one k-step:
/// 8 for tf32, 16 for bf16).
template <mma_kind K>
__device__ __forceinline__ void mma_tile_step(float (&acc)[2][4][4], const std::uint32_t (&af)[2][4],
                                              const std::uint32_t (&bf)[4][2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if constexpr (K == mma_kind::tf32)
        asm volatile(
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
            : "r"(af[i][0]), "r"(af[i][1]), "r"(af[i][2]), "r"(af[i][3]), "r"(bf[j][0]), "r"(bf[j][1]));
      else
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
            : "r"(af[i][0]), "r"(af[i][1]), "r"(af[i][2]), "r"(af[i][3]), "r"(bf[j][0]), "r"(bf[j][1]));
    }
}

/// o[q] = a[q]·b[q] for q < count with tensor cores: 64×64 output tiles over blockIdx.x, the
/// matrices over blockIdx.y (grid-stride). 4 warps in 2×2, each a 32×32 warp tile of 2×4
/// m16n8 fragments. Tiles go through shared memory as float (K-tiles of 32, the next one
/// prefetched into registers while the current one multiplies); operands round to TF32
/// (cvt.rna) or bf16 (cvt.rn) as fragments are read; accumulation is float throughout.
/// Fragment layouts (PTX ISA, mma.m16n8k8 .tf32 and mma.m16n8k16 .bf16), g = lane / 4,
/// t = lane % 4: A (row-major 16×K) a_r at row g + 8·(r%2), k-column t + 4·(r/2) (tf32) or the
/// pair 2t, 2t+1 (+8 for r ≥ 2) (bf16); B (K×8) b_r at k-row t + 4r (tf32) or the pair 2t, 2t+1
/// (+8 for r = 1) (bf16), column g; C c_r at row g + 8·(r/2), column 2t + r%2.
template <mma_kind K, class TA, class TB, class TO>
__global__ void __launch_bounds__(mma_threads, 3) mma_gemm_kernel(mat_list<const TA> a, mat_list<const TB> b,
                                                              mat_list<TO> o, index_t count, int d) {
  __shared__ float As[mma_tile][mma_lda];  // A tile, row-major (m, k)
  __shared__ float Bs[mma_k][mma_ldb];     // B tile, row-major (k, n)
  constexpr int per = mma_tile * mma_k / mma_threads;  // elements of each tile per thread: 16
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4, wm = warp / 2 * 32, wn = warp % 2 * 32;
  const int tiles_n = (d + mma_tile - 1) / mma_tile;
  const int m0 = static_cast<int>(blockIdx.x) / tiles_n * mma_tile, n0 = static_cast<int>(blockIdx.x) % tiles_n * mma_tile;
  for (index_t q = blockIdx.y; q < count; q += gridDim.y) {
    const TA* A = a.at(q);
    const TB* Bm = b.at(q);
    float ra[per], rb[per];
    // Thread tid loads A rows m0 + tid/32 + 4s at column tid%32, and B rows tid/64 + 2s at
    // column tid%64, of each K-tile.
    const int ar = m0 + tid / mma_k, ac = tid % mma_k, br = tid / mma_tile, bc = n0 + tid % mma_tile;
    const TA* pa = A + static_cast<index_t>(min(ar, d - 1)) * d + ac;
    const TB* pb = Bm + static_cast<index_t>(br) * d + min(bc, d - 1);
    auto fetch = [&](int k0) {  // global → registers, zero outside the matrix
#pragma unroll
      for (int s = 0; s < per; ++s) {
        const int r = ar + 4 * s, kb = k0 + br + 2 * s;
        ra[s] = (r < d && k0 + ac < d) ? to_c<float>(pa[static_cast<index_t>(4 * s) * d + k0]) : 0.f;
        rb[s] = (kb < d && bc < d) ? to_c<float>(pb[static_cast<index_t>(k0 + 2 * s) * d]) : 0.f;
      }
    };
    auto stash = [&] {
#pragma unroll
      for (int s = 0; s < per; ++s) {
        As[tid / mma_k + 4 * s][ac] = ra[s];
        Bs[br + 2 * s][tid % mma_tile] = rb[s];
      }
    };
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;
    fetch(0);
    __syncthreads();  // the previous matrix's last tile is read
    stash();
    __syncthreads();
    for (int k0 = 0; k0 < d; k0 += mma_k) {
      const bool more = k0 + mma_k < d;
      if (more) fetch(k0 + mma_k);  // in flight during the multiplies
      if constexpr (K == mma_kind::tf32) {
#pragma unroll
        for (int kk = 0; kk < mma_k; kk += 8) {
          std::uint32_t af[2][4], bf[4][2];
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int r0 = wm + 16 * i + g;
            af[i][0] = to_tf32(As[r0][kk + t]);
            af[i][1] = to_tf32(As[r0 + 8][kk + t]);
            af[i][2] = to_tf32(As[r0][kk + t + 4]);
            af[i][3] = to_tf32(As[r0 + 8][kk + t + 4]);
          }
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int c = wn + 8 * j + g;
            bf[j][0] = to_tf32(Bs[kk + t][c]);
            bf[j][1] = to_tf32(Bs[kk + t + 4][c]);
          }
          mma_tile_step<K>(acc, af, bf);
        }
      } else {
#pragma unroll
        for (int kk = 0; kk < mma_k; kk += 16) {
          std::uint32_t af[2][4], bf[4][2];
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int r0 = wm + 16 * i + g, k = kk + 2 * t;
            af[i][0] = to_bf16x2(As[r0][k], As[r0][k + 1]);
            af[i][1] = to_bf16x2(As[r0 + 8][k], As[r0 + 8][k + 1]);
            af[i][2] = to_bf16x2(As[r0][k + 8], As[r0][k + 9]);
            af[i][3] = to_bf16x2(As[r0 + 8][k + 8], As[r0 + 8][k + 9]);
          }
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int c = wn + 8 * j + g, k = kk + 2 * t;
            bf[j][0] = to_bf16x2(Bs[k][c], Bs[k + 1][c]);
            bf[j][1] = to_bf16x2(Bs[k + 8][c], Bs[k + 9][c]);
          }
          mma_tile_step<K>(acc, af, bf);
        }
      }
      __syncthreads();  // the tile is read
      if (more) {
        stash();
        __syncthreads();
      }
    }
    TO* O = o.at(q);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int gi = m0 + wm + 16 * i + g + 8 * (r / 2), gj = n0 + wn + 8 * j + 2 * t + r % 2;
          if (gi < d && gj < d) O[static_cast<index_t>(gi) * d + gj] = from_c<TO>(acc[i][j][r]);
        }
  }
}

// ---------------------------------------------------------------------------------------
// Chains of d ≤ 64: chunks walked by blocks in shared memory, combined across the grid.

/// Fan-in of the totals' tree over chunk totals: 4 for d ≤ 32, where a level's barrier and cold
/// loads cost more than its products, and 2 for d ≤ 64 (H100, 250 chunks of 4, both operands of
/// a level loaded cold: 1000 × 32² 28 µs against 33–34 with fan-in 2, 1000 × 64² 73–76 µs
/// against 77–78 with fan-in 4). A build-time override, for measuring.
#ifndef PARSCAN_CHAIN_TREE_FAN
template <int RT>
inline constexpr int chain_tree_fan = RT == 2 ? 4 : 2;
#else
template <int RT>
inline constexpr int chain_tree_fan = PARSCAN_CHAIN_TREE_FAN;
#endif

/// Each chain splits into `chunks` chunks of `len` positions (the last may be shorter), and
/// one cooperative launch (chain_chunk_kernel) runs phases a grid-wide barrier apart. Totals:
///   (1) every chunk is multiplied out (straight into `out` if it is the chain);
///   (2) a tree of fan-in F = chain_tree_fan<RT> over the chunk totals: at level s the block
///       of chunk i, a multiple of F·s, walks on from its total in shared memory through the
///       totals of chunks i + s, …, i + (F-1)s (published by their blocks before the level's
///       barrier); chunk 0's block writes `out`. One block per (chain, chunk).
/// Prefixes:
///   (1) each chunk but the last is multiplied out into buf[0];
///   (2) the totals become inclusive prefixes over the chunks, Hillis–Steele: level s sets
///       y[c] = x[c - s] ⊗ x[c] for c ≥ s, ping-ponging between buf[0] and buf[1];
///   (3) every chunk is walked again from its carry, the product of all earlier chunks, and
///       each prefix is written from registers as it is formed.
/// A walk (chain_walk) keeps the running product, the next factor and the product being formed
/// in shared memory, and the factor after that in registers, in flight while it multiplies.
/// One launch, not one per phase and level: the 8 levels of 256 chunks took 12 µs a launch
/// (ncu, H100).
template <class T, class C>
struct chain_chunks {
  const T* M = nullptr;
  index_t Mb = 0, Ms = 0;  // M's batch and step strides
  T* out = nullptr;
  index_t Ob = 0, Os = 0;  // out's batch and step strides
  C* buf[2] = {};          // (B, slots, d, d) dense each
  index_t B = 0, n = 0, len = 1, chunks = 1;
  index_t slots = 0;  // chunk totals kept per chain: chunks (totals), chunks - 1 (prefixes)
  int d = 1;
  bool ltr = true;
  bool vec_M = false, vec_out = false;  // 4-element vector access (d % 4 == 0, aligned)
};

/// Shared memory of chain_chunk_kernel: three padded matrices.
template <int RT, class C>
inline constexpr std::size_t chain_chunk_smem = 3 * block_matrix_shape<RT>::elems * sizeof(C);

/// Four values of C from L2: written during this launch by other blocks, so not from L1.
template <class C>
__device__ __forceinline__ packed_vec<C, 4> load_l2(const packed_vec<C, 4>* p) {
  packed_vec<C, 4> r;
  if constexpr (std::is_same<C, float>::value) {  // the compute types: float and double
    const float4 f = __ldcg(reinterpret_cast<const float4*>(p));
    r.v[0] = f.x, r.v[1] = f.y, r.v[2] = f.z, r.v[3] = f.w;
  } else {
    const double2 a = __ldcg(reinterpret_cast<const double2*>(p)), b = __ldcg(reinterpret_cast<const double2*>(p) + 1);
    r.v[0] = a.x, r.v[1] = a.y, r.v[2] = b.x, r.v[3] = b.y;
  }
  return r;
}

/// Loads for block_matrix_stage: of a read-only input, and of the workspace (from L2).
struct plain_loads {
  template <class X>
  __device__ __forceinline__ X operator()(const X* q) const { return *q; }
};
struct l2_loads {
  template <class C>
  __device__ __forceinline__ packed_vec<C, 4> operator()(const packed_vec<C, 4>* q) const { return load_l2<C>(q); }
  template <class C>
  __device__ __forceinline__ C operator()(const C* q) const { return __ldcg(q); }
};

/// `count` ≥ 1 d × d matrices, matrix j at base + j·step, read through Loads.
template <class X, class Loads>
struct chain_run {
  const X* base;
  index_t step, count;
  bool vec;  // 4-element vector loads
};

/// The product of a run in chain order into shared memory (the returned one of cur / next),
/// after `carry` if non-null or, with Resume, after the product cur already holds (complete
/// behind a barrier); `each(j, acc)` sees the product through factor j in registers. The first
/// two matrices load together (a tree level's runs start cold from L2). Ends with a barrier.
template <int RT, bool Resume = false, class C, class X, class Loads, class Each>
__device__ __forceinline__ C* chain_walk(chain_run<X, Loads> run, const C* carry, int d, bool ltr, C* cur, C* next,
                                         C* factor, Each each) {
  auto as_c = [](X x) { return to_c<C>(x); };
  auto same = [](C x) { return x; };
  block_matrix_stage<RT, C> start, stage;
  index_t j = 0;  // the next factor to multiply in
  if constexpr (!Resume) {
    if (carry) {
      start.fetch(carry, d, d % 4 == 0, l2_loads{}, same);
    } else {
      start.fetch(run.base, d, run.vec, Loads{}, as_c);
      j = 1;
    }
  }
  if (j < run.count) stage.fetch(run.base + j * run.step, d, run.vec, Loads{}, as_c);
  if constexpr (!Resume) {
    __syncthreads();  // the previous task is done with shared memory
    start.put(cur);
    if (j == run.count) __syncthreads();  // no product: cur is complete
  }
  for (; j < run.count; ++j) {
    stage.put(factor);
    if (j + 1 < run.count) stage.fetch(run.base + (j + 1) * run.step, d, run.vec, Loads{}, as_c);  // in flight
    __syncthreads();  // cur and factor are complete
    C acc[RT][RT];
    block_matrix_product<RT>(ltr ? cur : factor, ltr ? factor : cur, acc);  // the earlier factor on the left
    block_matrix_store<RT>(acc, next);
    each(j, acc);
    C* const done = cur;
    cur = next, next = done;
    __syncthreads();  // the product is done reading factor and the old cur; cur is complete
  }
  return cur;
}

/// Copies the d × d part of a shared matrix to the row-major O, converted to Y: each thread its
/// micro-tile, as vectors where `vec` (no division by d per element).
template <int RT, class Y, class C>
__device__ __forceinline__ void chain_copy_out(const C* S, Y* O, int d, bool vec) {
  using shape = block_matrix_shape<RT>;
  const block_matrix_thread t;
  C acc[RT][RT];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int c = 0; c < RT; ++c) acc[r][c] = S[(t.ty + 16 * r) * shape::ld + RT * t.tx + c];
  block_matrix_write<RT>(acc, O, d, vec, [](C v) { return from_c<Y>(v); });
}

/// Prefixes phase (1), and totals of chains of one chunk: chunks 0 … per-1 of every chain
/// multiplied out into buf[0], or into `out` where the chunk is the whole chain, over any grid.
/// `p` by value: a reference to the kernel's parameter would copy it to the stack.
template <int RT, class T, class C>
__device__ __forceinline__ void chain_chunk_totals(const chain_chunks<T, C> p, index_t per, C* m0, C* m1, C* m2) {
  const int dd = p.d * p.d;
  for (index_t task = blockIdx.x; task < p.B * per; task += gridDim.x) {
    const index_t b = task / per, c = task % per, first = c * p.len;
    const chain_run<T, plain_loads> run{p.M + b * p.Mb + first * p.Ms, p.Ms, min(p.len, p.n - first), p.vec_M};
    const C* total = chain_walk<RT>(run, static_cast<const C*>(nullptr), p.d, p.ltr, m0, m1, m2, [](index_t, auto&) {});
    if (p.chunks == 1) chain_copy_out<RT>(total, p.out + b * p.Ob, p.d, p.vec_out);
    else chain_copy_out<RT>(total, p.buf[0] + (b * p.slots + c) * dd, p.d, p.d % 4 == 0);
  }
}

/// Totals phase (2): with one (chain, chunk) per block (the host launches B·chunks blocks),
/// each block keeps its chunk's total in shared memory; at level s the block of every multiple
/// of F·s walks on through the totals of the F - 1 chunks s apart after it, whose blocks
/// published them and retired, so a level loads only those. Chunk 0's block writes `out`.
template <int RT, class T, class C>
__device__ __forceinline__ void chain_total_tree(const chain_chunks<T, C> p, C* m0, C* m1, C* m2) {
  constexpr index_t F = chain_tree_fan<RT>;
  const int d = p.d, dd = d * d;
  const index_t b = blockIdx.x / p.chunks, c = blockIdx.x % p.chunks, first = c * p.len;
  auto none = [](index_t, auto&) {};
  const chain_run<T, plain_loads> run{p.M + b * p.Mb + first * p.Ms, p.Ms, min(p.len, p.n - first), p.vec_M};
  C* cur = chain_walk<RT>(run, static_cast<const C*>(nullptr), d, p.ltr, m0, m1, m2, none);
  C* const x = p.buf[0] + b * p.slots * dd;
  bool leads = true;  // this block still carries a run of the tree
  for (index_t s = 1; s < p.chunks; s *= F) {
    if (leads && c % (F * s) != 0) {
      chain_copy_out<RT>(cur, x + c * dd, d, d % 4 == 0);
      leads = false;
    }
    cooperative_groups::this_grid().sync();
    const index_t after = min(F - 1, (p.chunks - 1 - c) / s);
    if (leads && after > 0) {
      const chain_run<C, l2_loads> totals{x + (c + s) * dd, s * dd, after, d % 4 == 0};
      cur = chain_walk<RT, true>(totals, static_cast<const C*>(nullptr), d, p.ltr, cur, cur == m0 ? m1 : m0, m2, none);
    }
  }
  if (c == 0) chain_copy_out<RT>(cur, p.out + b * p.Ob, d, p.vec_out);
}

/// Prefixes phase (2), one level: y[c] = x[c - s] ⊗ x[c] for c ≥ s, y[c] = x[c] below.
template <int RT, class T, class C>
__device__ __forceinline__ void chain_carry_level(const chain_chunks<T, C> p, const C* x, C* y, index_t s, C* m0, C* m1,
                                                  C* m2) {
  const int d = p.d, dd = d * d;
  for (index_t task = blockIdx.x; task < p.B * p.slots; task += gridDim.x) {
    const C* src = x + task * dd;
    C* dst = y + task * dd;
    if (task % p.slots < s) {  // already an inclusive prefix
      for (int e = static_cast<int>(threadIdx.x); e < dd; e += block_matrix_threads) dst[e] = __ldcg(src + e);
      continue;
    }
    const chain_run<C, l2_loads> run{src - s * dd, s * dd, 2, d % 4 == 0};
    chain_walk<RT>(run, static_cast<const C*>(nullptr), d, p.ltr, m0, m1, m2, [=](index_t, const C(&acc)[RT][RT]) {
      block_matrix_write<RT>(acc, dst, d, d % 4 == 0, [](C v) { return v; });
    });
  }
}

/// Prefixes phase (3): every chunk from its carry (none for chunk 0), each prefix written.
template <int RT, class T, class C>
__device__ __forceinline__ void chain_chunk_prefixes(const chain_chunks<T, C> p, const C* carry, C* m0, C* m1, C* m2) {
  const int d = p.d, dd = d * d;
  for (index_t task = blockIdx.x; task < p.B * p.chunks; task += gridDim.x) {
    const index_t b = task / p.chunks, c = task % p.chunks, first = c * p.len;
    const T* Mc = p.M + b * p.Mb + first * p.Ms;
    T* const Oc = p.out + b * p.Ob + first * p.Os;
    const C* from = c > 0 ? carry + (b * p.slots + c - 1) * dd : nullptr;
    if (!from)  // the chain's first prefix is its first factor
      for (int e = static_cast<int>(threadIdx.x); e < dd; e += block_matrix_threads) Oc[e] = Mc[e];
    const chain_run<T, plain_loads> run{Mc, p.Ms, min(p.len, p.n - first), p.vec_M};
    const index_t Os = p.Os;
    const bool vec_out = p.vec_out;
    chain_walk<RT>(run, from, d, p.ltr, m0, m1, m2, [=](index_t j, const C(&acc)[RT][RT]) {
      block_matrix_write<RT>(acc, Oc + j * Os, d, vec_out, [](C v) { return from_c<T>(v); });
    });
  }
}

/// The totals (Prefixes = false) or prefixes of every chain (chain_chunks), launched
/// cooperatively on at most as many blocks as fit the device at once; dynamic shared memory
/// chain_chunk_smem<RT, C>. Two blocks per SM in float (128 registers: 157 without the
/// bound, one block per SM); double takes more.
template <int RT, bool Prefixes, class T, class C>
__global__ void __launch_bounds__(block_matrix_threads, sizeof(C) == 4 ? 2 : 1)
    chain_chunk_kernel(const chain_chunks<T, C> p) {
  extern __shared__ __align__(16) unsigned char chunk_smem[];
  constexpr int elems = block_matrix_shape<RT>::elems;
  C* const m0 = reinterpret_cast<C*>(chunk_smem);
  C* const m1 = m0 + elems;
  C* const m2 = m1 + elems;
  if constexpr (Prefixes) {
    const C* carry = nullptr;
    if (p.slots > 0) {
      chain_chunk_totals<RT>(p, p.slots, m0, m1, m2);
      C *x = p.buf[0], *y = p.buf[1];  // not p.buf[at]: a variable index would copy p to the stack
      for (index_t s = 1; s < p.slots; s *= 2) {
        cooperative_groups::this_grid().sync();
        chain_carry_level<RT>(p, x, y, s, m0, m1, m2);
        C* const t = x;
        x = y, y = t;
      }
      cooperative_groups::this_grid().sync();
      carry = x;
    }
    chain_chunk_prefixes<RT>(p, carry, m0, m1, m2);
  } else if (p.chunks == 1) {
    chain_chunk_totals<RT>(p, 1, m0, m1, m2);  // each chain by one block, any grid
  } else {
    chain_total_tree<RT>(p, m0, m1, m2);
  }
}

}  // namespace parscan::cuda_detail
