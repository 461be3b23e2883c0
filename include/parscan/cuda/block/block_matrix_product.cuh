// parscan/cuda/block/block_matrix_product.cuh — one block of 256 threads multiplies square
// matrices held whole in shared memory: the step of the matrix-chain chunk engine, totals and
// prefixes (matrix/chain_kernels.cuh), where a block walks a run of a chain one factor after
// another.
//
// Matrices are dim × dim (dim = 16·RT), row-major with rows of ld = dim + 4 elements, and zero
// past the caller's d, so products of them stay zero there and no loop needs a bound. Thread
// (tx, ty) owns rows ty + 16·r and columns RT·tx + c (r, c < RT); a warp holds 8 tx by 4 ty.
// Per 4 steps of k a thread reads RT 4-wide rows of X (4 distinct rows per warp, ld ≡ 4 mod 32
// banks apart: one wavefront each) and 4 RT-wide rows of Y (8 distinct vectors: one wavefront
// each), against 4·RT² fused multiply-adds: 8 wavefronts per 64 FMA for RT = 4, where 16 tx by
// 2 ty per warp and unpadded rows took 12 (L1 at 81% of peak in ncu, H100).
#pragma once

namespace parscan::cuda_detail {

inline constexpr int block_matrix_threads = 256;

/// N consecutive values as one vector access (16-byte aligned at most).
template <class C, int N>
struct alignas(sizeof(C) * N < 16 ? sizeof(C) * N : 16) packed_vec {
  C v[N];
};

template <int RT>
struct block_matrix_shape {
  static_assert(RT == 2 || RT == 4, "micro-tiles of 2×2 or 4×4 (dim 32 or 64)");
  static constexpr int dim = 16 * RT;                              // rows and columns held
  static constexpr int ld = dim + 4;                               // row stride in shared memory
  static constexpr int elems = dim * ld;                           // elements of one matrix
  static constexpr int quads = dim * dim / 4 / block_matrix_threads;  // 4-wide pieces per thread
};

/// The thread's tile coordinates (see the file comment).
struct block_matrix_thread {
  int tx, ty;
  __device__ __forceinline__ block_matrix_thread() {
    const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
    tx = warp % 2 * 8 + lane % 8;
    ty = warp / 2 * 4 + lane / 8;
  }
};

/// acc = X·Y for shared matrices; every thread of the block calls it (no barrier).
template <int RT, class C>
__device__ __forceinline__ void block_matrix_product(const C* X, const C* Y, C (&acc)[RT][RT]) {
  using shape = block_matrix_shape<RT>;
  const block_matrix_thread t;
  const C* xr = X + t.ty * shape::ld;
  const C* yc = Y + RT * t.tx;
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int c = 0; c < RT; ++c) acc[r][c] = C(0);
#pragma unroll 2
  for (int k0 = 0; k0 < shape::dim; k0 += 4) {
    packed_vec<C, 4> a[RT];
    packed_vec<C, RT> b[4];
#pragma unroll
    for (int r = 0; r < RT; ++r) a[r] = *reinterpret_cast<const packed_vec<C, 4>*>(xr + 16 * r * shape::ld + k0);
#pragma unroll
    for (int k = 0; k < 4; ++k) b[k] = *reinterpret_cast<const packed_vec<C, RT>*>(yc + (k0 + k) * shape::ld);
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int c = 0; c < RT; ++c) acc[r][c] += a[r].v[k] * b[k].v[c];
  }
}

/// Z = acc (the thread's micro-tile of block_matrix_product).
template <int RT, class C>
__device__ __forceinline__ void block_matrix_store(const C (&acc)[RT][RT], C* Z) {
  using shape = block_matrix_shape<RT>;
  const block_matrix_thread t;
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    packed_vec<C, RT> row;
#pragma unroll
    for (int c = 0; c < RT; ++c) row.v[c] = acc[r][c];
    *reinterpret_cast<packed_vec<C, RT>*>(Z + (t.ty + 16 * r) * shape::ld + RT * t.tx) = row;
  }
}

/// Writes the thread's micro-tile entries inside d × d to the row-major d × d matrix O,
/// converted by `cvt`: whole rows of RT as one vector where `vec` (d a multiple of 4 and O
/// aligned to 4 elements), else element by element.
template <int RT, class T, class C, class Cvt>
__device__ __forceinline__ void block_matrix_write(const C (&acc)[RT][RT], T* O, int d, bool vec, Cvt cvt) {
  const block_matrix_thread t;
  const int j0 = RT * t.tx;
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const int i = t.ty + 16 * r;
    if (i >= d || j0 >= d) continue;
    if (vec) {
      packed_vec<T, RT> row;
#pragma unroll
      for (int c = 0; c < RT; ++c) row.v[c] = cvt(acc[r][c]);
      *reinterpret_cast<packed_vec<T, RT>*>(O + i * d + j0) = row;
    } else {
#pragma unroll
      for (int c = 0; c < RT; ++c)
        if (j0 + c < d) O[i * d + j0 + c] = cvt(acc[r][c]);
    }
  }
}

/// A d × d matrix staged in registers on its way to shared memory, so that its global loads are
/// in flight while the block multiplies. fetch(src, d, vec) reads the row-major d × d matrix at
/// src (zero past d) in pieces of 4 consecutive columns, each one vector load where `vec` (d a
/// multiple of 4 and src aligned to 4 elements), through `load` (of a packed_vec<T, 4> or a T),
/// converting with `cvt`; put(Z) writes the
/// padded shared matrix.
template <int RT, class C>
struct block_matrix_stage {
  using shape = block_matrix_shape<RT>;
  static constexpr int per_row = shape::dim / 4;  // pieces per row
  packed_vec<C, 4> v[shape::quads];

  template <class T, class Load, class Cvt>
  __device__ __forceinline__ void fetch(const T* src, int d, bool vec, Load load, Cvt cvt) {
#pragma unroll
    for (int s = 0; s < shape::quads; ++s) {
      const int q = static_cast<int>(threadIdx.x) + s * block_matrix_threads, i = q / per_row, j = 4 * (q % per_row);
      if (vec && i < d && j < d) {
        const packed_vec<T, 4> x = load(reinterpret_cast<const packed_vec<T, 4>*>(src + i * d + j));
#pragma unroll
        for (int c = 0; c < 4; ++c) v[s].v[c] = cvt(x.v[c]);
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c) v[s].v[c] = (i < d && j + c < d) ? cvt(load(src + i * d + j + c)) : C(0);
      }
    }
  }
  __device__ __forceinline__ void put(C* Z) const {
#pragma unroll
    for (int s = 0; s < shape::quads; ++s) {
      const int q = static_cast<int>(threadIdx.x) + s * block_matrix_threads;
      *reinterpret_cast<packed_vec<C, 4>*>(Z + q / per_row * shape::ld + 4 * (q % per_row)) = v[s];
    }
  }
};

}  // namespace parscan::cuda_detail
