// parscan/cuda/matrix/chain_kernels.cuh — the kernels behind the CUDA matrix-chain products
// (src/cuda/matrix_cuda.cuh drives them; docs/design.md explains the plan):
//   - chain_tree_kernel: the whole total product of chains of d ≤ 32 in one launch;
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
// The total product of chains of small matrices (d ≤ 32) in one launch.

inline constexpr int tree_threads = 256, tree_max_levels = 64;

/// A fixed tree over each chain: leaves are groups of `group` consecutive factors, and each
/// node above has up to `fan` consecutive children. Each block takes a leaf, multiplies its
/// factors in order in shared memory and writes the partial; the last of a node's children to
/// arrive (an atomic counter per node) multiplies the node's partials in order and goes on up;
/// the root writes `out`. Who multiplies depends on timing, the association never does, so
/// the result is deterministic. Nobody waits on anybody, so any grid size is safe.
struct tree_shape {
  index_t group = 1, slots = 0, nodes = 0;  // factors per leaf; partials and counters per chain
  int fan = 2, levels = 0;                  // levels above the leaves (0: one leaf is the chain)
  index_t width[tree_max_levels + 1] = {};  // nodes per level; level 0: the leaves
  index_t slot0[tree_max_levels + 1] = {};  // first partial slot of each level below the root
  index_t node0[tree_max_levels + 1] = {};  // first counter of each level above the leaves
};

template <class T, class C>
struct chain_tree {
  const T* M = nullptr;
  index_t Mb = 0, Ms = 0;  // M's batch and step strides
  T* out = nullptr;
  index_t Ob = 0;               // out's batch stride
  C* part = nullptr;            // partials: (B, slots, d, d) dense
  unsigned* arrived = nullptr;  // counters: (B, nodes), zero at launch
  index_t B = 0, n = 0;
  int d = 1;
  bool ltr = true;
  tree_shape s;
};

/// Shared memory of chain_tree_kernel: three d×(d+1) matrices (rows padded against conflicts).
template <class C>
inline std::size_t chain_tree_smem(int d) {
  return 3 * static_cast<std::size_t>(d) * static_cast<std::size_t>(d + 1) * sizeof(C);
}

/// Z = X·Y for d×d matrices in shared memory (row stride ld), d ≤ 16·RT: thread (tx, ty) of
/// 16×16 owns rows ty + 16r and columns tx + 16c. Rows and columns past d are clamped on read
/// (computed but not stored), so every loop is uniform.
template <int RT, class C>
__device__ __forceinline__ void tree_mul(const C* X, const C* Y, C* Z, int d, int ld) {
  const int tx = static_cast<int>(threadIdx.x) % 16, ty = static_cast<int>(threadIdx.x) / 16;
  int ri[RT], cj[RT];
#pragma unroll
  for (int r = 0; r < RT; ++r) ri[r] = min(ty + 16 * r, d - 1) * ld, cj[r] = min(tx + 16 * r, d - 1);
  C acc[RT][RT];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int c = 0; c < RT; ++c) acc[r][c] = C(0);
#pragma unroll 4
  for (int k = 0; k < d; ++k) {
    C av[RT], bv[RT];
#pragma unroll
    for (int r = 0; r < RT; ++r) av[r] = X[ri[r] + k], bv[r] = Y[k * ld + cj[r]];
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int c = 0; c < RT; ++c) acc[r][c] += av[r] * bv[c];
  }
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int c = 0; c < RT; ++c) {
      const int i = ty + 16 * r, j = tx + 16 * c;
      if (i < d && j < d) Z[i * ld + j] = acc[r][c];
    }
}

/// The ordered product of `count` ≥ 1 matrices src(0..count-1) (earliest first) into cur,
/// using nxt and tmp (the pointers are swapped). The next factor is prefetched into registers
/// while the current product runs. Ends with a barrier.
template <int RT, class C, class Src>
__device__ void tree_group(Src src, index_t count, C*& cur, C*& nxt, C*& tmp, int d, bool ltr) {
  constexpr int slots = RT * RT;  // (16·RT)² / 256 elements per thread
  const int tid = static_cast<int>(threadIdx.x), dd = d * d, ld = d + 1;
  C stage[slots];
  auto fetch = [&](index_t j) {
#pragma unroll
    for (int s = 0; s < slots; ++s) {
      const int e = tid + s * tree_threads;
      if (e < dd) stage[s] = src(j, e);
    }
  };
  auto put = [&](C* X) {
#pragma unroll
    for (int s = 0; s < slots; ++s) {
      const int e = tid + s * tree_threads;
      if (e < dd) X[e / d * ld + e % d] = stage[s];
    }
  };
  fetch(0);
  put(cur);
  if (count > 1) fetch(1);
  for (index_t j = 1; j < count; ++j) {
    __syncthreads();  // cur is complete; the last product has finished reading nxt
    put(nxt);         // factor j
    if (j + 1 < count) fetch(j + 1);  // in flight during the product
    __syncthreads();
    if (ltr) tree_mul<RT>(cur, nxt, tmp, d, ld);  // the earlier factor on the left
    else tree_mul<RT>(nxt, cur, tmp, d, ld);
    C* f = cur;
    cur = tmp, tmp = f;
  }
  __syncthreads();
}

/// The chain's total product for every chain: see chain_tree. Tasks (chain, leaf) over the
/// grid (grid-stride); dynamic shared memory chain_tree_smem<C>(d).
template <int RT, class T, class C>
__global__ void __launch_bounds__(tree_threads) chain_tree_kernel(const chain_tree<T, C> p) {
  extern __shared__ __align__(16) unsigned char tree_smem[];
  __shared__ int last;
  C* const base = reinterpret_cast<C*>(tree_smem);
  const int d = p.d, dd = d * d, ld = d + 1, tid = static_cast<int>(threadIdx.x);
  const index_t msz = static_cast<index_t>(d) * ld, leaves = p.s.width[0];
  for (index_t task = blockIdx.x; task < p.B * leaves; task += gridDim.x) {
    C *cur = base, *nxt = base + msz, *tmp = base + 2 * msz;
    const index_t b = task / leaves;
    index_t node = task % leaves;
    const index_t first = node * p.s.group, cnt = min(p.s.group, p.n - first);
    const T* Mc = p.M + b * p.Mb + first * p.Ms;
    const index_t Ms = p.Ms;
    tree_group<RT, C>([=](index_t j, int e) { return to_c<C>(Mc[j * Ms + e]); }, cnt, cur, nxt, tmp, d, p.ltr);
    C* const part = p.part + b * p.s.slots * dd;
    for (int level = 0;; ++level) {
      if (level == p.s.levels) {  // the root
        T* O = p.out + b * p.Ob;
        for (int e = tid; e < dd; e += tree_threads) O[e] = from_c<T>(cur[e / d * ld + e % d]);
        break;
      }
      C* mine = part + (p.s.slot0[level] + node) * dd;
      for (int e = tid; e < dd; e += tree_threads) mine[e] = cur[e / d * ld + e % d];
      __threadfence();  // the partial is visible before the arrival is counted
      __syncthreads();
      const index_t parent = node / p.s.fan, kids = min(static_cast<index_t>(p.s.fan), p.s.width[level] - parent * p.s.fan);
      if (tid == 0) {
        const unsigned before = atomicAdd(p.arrived + b * p.s.nodes + p.s.node0[level + 1] + parent, 1u);
        last = before + 1 == static_cast<unsigned>(kids);
        __threadfence();
      }
      __syncthreads();
      if (!last) break;  // a sibling still runs: it will carry the node
      const C* kid = part + (p.s.slot0[level] + parent * p.s.fan) * dd;
      // L2 reads (__ldcg): the siblings' partials were written by other SMs during this launch.
      tree_group<RT, C>([=](index_t j, int e) { return __ldcg(kid + j * dd + e); }, kids, cur, nxt, tmp, d, p.ltr);
      node = parent;
    }
    __syncthreads();  // shared memory and `last` are reused by the next task
  }
}

// ---------------------------------------------------------------------------------------
// Chains of d ≤ 64: chunks walked by blocks in shared memory, combined across the grid.

/// Each chain splits into `chunks` chunks of `len` positions (the last may be shorter), and
/// one cooperative launch (chain_chunk_kernel) runs phases a grid-wide barrier apart. Totals:
///   (1) every chunk is multiplied out into buf[0] (or straight into `out` if it is the chain);
///   (2) a binary tree over the chunk totals, in place: level s sets x[i] = x[i] ⊗ x[i + s]
///       for i a multiple of 2s; the last level writes `out`.
/// Prefixes:
///   (1) each chunk but the last is multiplied out into buf[0];
///   (2) the totals become inclusive prefixes over the chunks, Hillis–Steele: level s sets
///       y[c] = x[c - s] ⊗ x[c] for c ≥ s, ping-ponging between buf[0] and buf[1];
///   (3) every chunk is walked again from its carry, the product of all earlier chunks, and
///       each prefix is written from registers as it is formed.
/// A block keeps the running product, the next factor and the product being formed in shared
/// memory, and the factor after that in registers, in flight while it multiplies. One launch,
/// not one per phase and level: the 8 levels of 256 chunks took 12 µs a launch (ncu, H100).
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

/// X ⊗ Y for X earlier in the chain: X·Y (left to right) or Y·X (right to left).
template <int RT, class C>
__device__ __forceinline__ void chain_step(const C* earlier, const C* later, bool ltr, C (&acc)[RT][RT]) {
  block_matrix_product<RT>(ltr ? earlier : later, ltr ? later : earlier, acc);
}

/// Chunks of every chain, `per` of them from each chain's first, over the grid. Prefixes: from
/// the carries `carry` (buf layout), writing every prefix. Else each chunk's total goes to
/// buf[0], or to `out` where the chunk is the whole chain. `p` by value: a reference to the
/// kernel's parameter would copy it to the stack.
template <int RT, bool Prefixes, class T, class C>
__device__ __forceinline__ void chain_walk_chunks(const chain_chunks<T, C> p, index_t per, const C* carry, C* cur,
                                                  C* next, C* factor) {
  const int d = p.d, dd = d * d;
  auto as_c = [](auto x) { return to_c<C>(x); };
  auto same = [](C x) { return x; };
  for (index_t task = blockIdx.x; task < p.B * per; task += gridDim.x) {
    const index_t b = task / per, c = task % per, first = c * p.len, len = min(p.len, p.n - first);
    const T* Mc = p.M + b * p.Mb + first * p.Ms;
    T* Oc = p.out + b * p.Ob + first * p.Os;
    block_matrix_stage<RT, C> stage;
    index_t j = 0;  // the next factor to multiply in
    if (Prefixes && c > 0) {
      stage.fetch(carry + (b * p.slots + c - 1) * dd, d, d % 4 == 0, l2_loads{}, same);
    } else {
      stage.fetch(Mc, d, p.vec_M, plain_loads{}, as_c);
      if (Prefixes)  // the chain's first prefix is its first factor
        for (int e = static_cast<int>(threadIdx.x); e < dd; e += block_matrix_threads) Oc[e] = Mc[e];
      j = 1;
    }
    __syncthreads();  // the previous task is done with shared memory
    stage.put(cur);
    if (j < len) stage.fetch(Mc + j * p.Ms, d, p.vec_M, plain_loads{}, as_c);
    for (; j < len; ++j) {
      __syncthreads();  // cur is complete; the last product is done reading factor
      stage.put(factor);
      if (j + 1 < len) stage.fetch(Mc + (j + 1) * p.Ms, d, p.vec_M, plain_loads{}, as_c);  // in flight during the product
      __syncthreads();
      C acc[RT][RT];
      chain_step<RT>(cur, factor, p.ltr, acc);
      block_matrix_store<RT>(acc, next);
      if constexpr (Prefixes) block_matrix_write<RT>(acc, Oc + j * p.Os, d, p.vec_out, [](C v) { return from_c<T>(v); });
      C* const done = cur;
      cur = next, next = done;
    }
    if constexpr (!Prefixes) {
      __syncthreads();  // cur is complete
      constexpr int ld = block_matrix_shape<RT>::ld;
      if (p.chunks == 1) {
        T* const o = p.out + b * p.Ob;
        for (int e = static_cast<int>(threadIdx.x); e < dd; e += block_matrix_threads) o[e] = from_c<T>(cur[e / d * ld + e % d]);
      } else {
        C* const t = p.buf[0] + (b * p.slots + c) * dd;
        for (int e = static_cast<int>(threadIdx.x); e < dd; e += block_matrix_threads) t[e] = cur[e / d * ld + e % d];
      }
    }
  }
}

/// y = x[first] ⊗ x[second] (chunk totals of the workspace) through shared memory, written from
/// registers by `write(acc)`.
template <int RT, class C, class Write>
__device__ __forceinline__ void chain_pair(const C* first, const C* second, int d, bool ltr, C* earlier, C* later,
                                           Write write) {
  auto same = [](C v) { return v; };
  block_matrix_stage<RT, C> a, b;
  a.fetch(first, d, d % 4 == 0, l2_loads{}, same);
  b.fetch(second, d, d % 4 == 0, l2_loads{}, same);
  __syncthreads();  // the previous task is done with shared memory
  a.put(earlier);
  b.put(later);
  __syncthreads();
  C acc[RT][RT];
  chain_step<RT>(earlier, later, ltr, acc);
  write(acc);
}

/// Prefixes, phase (2), one level: y[c] = x[c - s] ⊗ x[c] for c ≥ s, y[c] = x[c] below.
template <int RT, class T, class C>
__device__ __forceinline__ void chain_carry_level(const chain_chunks<T, C> p, const C* x, C* y, index_t s, C* earlier,
                                                  C* later) {
  const int d = p.d, dd = d * d;
  for (index_t task = blockIdx.x; task < p.B * p.slots; task += gridDim.x) {
    const C* src = x + task * dd;
    C* dst = y + task * dd;
    if (task % p.slots < s) {  // already an inclusive prefix
      for (int e = static_cast<int>(threadIdx.x); e < dd; e += block_matrix_threads) dst[e] = __ldcg(src + e);
      continue;
    }
    chain_pair<RT>(src - s * dd, src, d, p.ltr, earlier, later,
                   [=](const C(&acc)[RT][RT]) { block_matrix_write<RT>(acc, dst, d, d % 4 == 0, [](C v) { return v; }); });
  }
}

/// Totals, phase (2), one level: x[i] = x[i] ⊗ x[i + s] for i a multiple of 2s (and i + s <
/// chunks), in place; the last level (2s ≥ chunks) writes the chain's total to `out`.
template <int RT, class T, class C>
__device__ __forceinline__ void chain_total_level(const chain_chunks<T, C> p, index_t s, C* earlier, C* later) {
  const int d = p.d, dd = d * d;
  const index_t pairs = (p.chunks - s + 2 * s - 1) / (2 * s);  // the i with i + s < chunks
  const bool last = 2 * s >= p.chunks;
  for (index_t task = blockIdx.x; task < p.B * pairs; task += gridDim.x) {
    const index_t b = task / pairs;
    C* const x = p.buf[0] + (b * p.slots + task % pairs * 2 * s) * dd;
    T* const o = p.out + b * p.Ob;
    chain_pair<RT>(x, x + s * dd, d, p.ltr, earlier, later, [=](const C(&acc)[RT][RT]) {
      if (last) block_matrix_write<RT>(acc, o, d, p.vec_out, [](C v) { return from_c<T>(v); });
      else block_matrix_write<RT>(acc, x, d, d % 4 == 0, [](C v) { return v; });
    });
  }
}

/// The totals (Prefixes = false) or prefixes of every chain (chain_chunks), launched
/// cooperatively on at most as many blocks as fit the device at once; dynamic shared memory
/// chain_chunk_smem<RT, C>. Two blocks per SM in float (128 registers: 157 without the
/// bound, one block per SM); double takes more.
template <int RT, bool Prefixes, class T, class C>
__global__ void __launch_bounds__(block_matrix_threads, sizeof(C) == 4 ? 2 : 1) chain_chunk_kernel(const chain_chunks<T, C> p) {
  extern __shared__ __align__(16) unsigned char chunk_smem[];
  constexpr int elems = block_matrix_shape<RT>::elems;
  C* const m0 = reinterpret_cast<C*>(chunk_smem);
  C* const m1 = m0 + elems;
  C* const m2 = m1 + elems;
  if constexpr (Prefixes) {
    const C* carry = nullptr;
    if (p.slots > 0) {
      chain_walk_chunks<RT, false>(p, p.slots, carry, m0, m1, m2);
      C *x = p.buf[0], *y = p.buf[1];  // not p.buf[at]: a variable index would copy p to the stack
      for (index_t s = 1; s < p.slots; s *= 2) {
        cooperative_groups::this_grid().sync();
        chain_carry_level<RT>(p, x, y, s, m0, m1);
        C* const t = x;
        x = y, y = t;
      }
      cooperative_groups::this_grid().sync();
      carry = x;
    }
    chain_walk_chunks<RT, true>(p, p.chunks, carry, m0, m1, m2);
  } else {
    chain_walk_chunks<RT, false>(p, p.chunks, static_cast<const C*>(nullptr), m0, m1, m2);
    for (index_t s = 1; s < p.chunks; s *= 2) {
      cooperative_groups::this_grid().sync();
      chain_total_level<RT>(p, s, m0, m1);
    }
  }
}

}  // namespace parscan::cuda_detail
