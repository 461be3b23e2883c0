// parscan/matrix_recurrence.hpp — the non-diagonal recurrence
//     x[t] = W[t]·x[t-1] + b[t]          (W[t] an N×N matrix, N = 1..64)
// forward and backward, and batched matrix-chain products P = M[0]·M[1]·…·M[n-1] (the total,
// or every prefix; d×d with d = 1..1024), for many independent sequences or chains at once.
//
// The host and CUDA backends take the same arguments; the library is compiled for T = float,
// double, bfloat16 and float16. The 16-bit types are storage only: every product, sum and
// carried state (x, db, the running chain product) is float, and only the values written are
// rounded to T.
//
// Layout. Every tensor is a batch of sequences of dense blocks: an N-vector, or an N×N / d×d
// matrix stored row-major (element (i, j) at i·N + j). Only the batch and step (time, or chain
// position) dimensions may be strided, through batch_strides. The state vectors x0, x_final,
// dx_final and dx0 are always dense (B, N): element b·N + i.
//
// Plain C++: this header needs no CUDA headers. Every call validates its arguments first and
// returns a status; on any error nothing is written.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend.hpp"
#include "config.hpp"
#include "numeric.hpp"
#include "status.hpp"

namespace parscan {

/// Element strides of the batch and step dimensions of a tensor whose innermost block is
/// dense. -1 (the default) means dense: the stride a packed tensor of the call's shape has
/// (step = block size, batch = steps · block size). Any other negative value is
/// status::invalid_stride. An input may use a step stride of 0 (one W for every step, say) and
/// may overlap itself; an output's strides must map every element to its own memory
/// (status::overlapping_output otherwise: a step stride of 0, or one smaller than the block).
struct batch_strides {
  index_t batch = -1;  // elements between sequence (or chain) b and b+1
  index_t step = -1;   // elements between step (or chain position) t and t+1
};

// ---------------------------------------------------------------------------------------
// The matrix recurrence.

/// Forward: x[t] = W[t]·x[t-1] + b[t] with x[-1] = x0 (or 0), for t = 0..T-1; with `reverse`,
/// x[t] = W[t]·x[t+1] + b[t] with x[T] = x0, for t = T-1..0.
/// W is (B, T, N, N), b and x are (B, T, N); x0 and x_final are dense (B, N).
/// x may be exactly b (in place: same pointer and strides). x_final receives the last state
/// computed (x[T-1], or x[0] with `reverse`), so consecutive chunks chain through x0 = the
/// previous chunk's x_final; x_final may be exactly x0 (the state is updated in place). No other
/// output may overlap an input or another output. With B = 0 nothing is written; with T = 0
/// nothing is read from W or b and x_final receives x0 (or zero).
template <class T>
struct matrix_forward_args {
  index_t batch = 0;       // B: independent sequences
  index_t length = 0;      // T: steps per sequence
  index_t n = 0;           // N: state size, 1..64 (status::unsupported otherwise)
  const T* W = nullptr;    // (B, T, N, N) transition matrices, row-major per step
  const T* b = nullptr;    // (B, T, N) inputs
  T* x = nullptr;          // (B, T, N) output states
  const T* x0 = nullptr;   // optional (B, N) state before the first step computed
  T* x_final = nullptr;    // optional (B, N) state after the last step computed
  bool reverse = false;    // run from t = T-1 down to 0
  batch_strides W_strides{}, b_strides{}, x_strides{};
};

/// Backward of the forward above. With g[t] = dx[t] (+ dx_final on the last step computed):
///   db[t] = g[t] + W[t+1]ᵀ·db[t+1]          (a reverse scan; db after the last step is 0)
///   dW[t] = db[t]·x[t-1]ᵀ                   (an outer product; x[-1] = x0, or 0 without x0)
///   dx0   = W[0]ᵀ·db[0]                     (written only when x0 is given; required then)
/// where "t+1" is the step computed after t and "t-1" the one before, in the forward's
/// direction (with `reverse`, t-1 and t+1 trade places, and step 0 is t = T-1).
/// x is the forward output; if it is null, x is recomputed from W, b and x0 (b is then
/// required; the host keeps it in compute precision, the CUDA backend in workspace).
/// db may be exactly dx (in place); dx0 may be exactly dx_final; no other output may overlap
/// an input or another output. With T = 0, dx0 (when x0 is given) receives dx_final (or zero).
/// Backward over consecutive chunks, last chunk first, chains through dx_final = the later
/// chunk's dx0 (each chunk given its own x0 from the forward).
template <class T>
struct matrix_backward_args {
  index_t batch = 0, length = 0, n = 0;  // B, T, N as given to forward
  const T* W = nullptr;         // (B, T, N, N), as given to forward
  const T* x = nullptr;         // (B, T, N) forward output, or null to recompute it from b and x0
  const T* b = nullptr;         // (B, T, N) forward input; needed only when x is null
  const T* x0 = nullptr;        // optional (B, N), as given to forward
  const T* dx = nullptr;        // (B, T, N) dL/dx
  const T* dx_final = nullptr;  // optional (B, N) dL/dx_final
  T* dW = nullptr;              // (B, T, N, N) dL/dW
  T* db = nullptr;              // (B, T, N) dL/db
  T* dx0 = nullptr;             // (B, N) dL/dx0; required, and written, only with x0
  bool reverse = false;         // as given to forward
  batch_strides W_strides{}, x_strides{}, b_strides{}, dx_strides{}, dW_strides{}, db_strides{};
};

template <class T>
status matrix_recurrence_forward(const host_backend&, const matrix_forward_args<T>& args);
template <class T>
status matrix_recurrence_forward(const cuda_backend&, const matrix_forward_args<T>& args);
template <class T>
status matrix_recurrence_backward(const host_backend&, const matrix_backward_args<T>& args);
template <class T>
status matrix_recurrence_backward(const cuda_backend&, const matrix_backward_args<T>& args);

/// Bytes of temporary device storage the CUDA backend needs for these arguments (the host
/// backend needs none). Depends only on shapes and options, not on data; 0 for invalid ones.
template <class T>
std::size_t matrix_recurrence_workspace_size(const matrix_forward_args<T>& args);
template <class T>
std::size_t matrix_recurrence_workspace_size(const matrix_backward_args<T>& args);

/// Packed variable-length sequences (cu_seqlens, as recurrence.hpp's varlen_shape): `sequences`
/// sequences of different lengths concatenated along the step axis of W (total_length, N, N),
/// b and x (total_length, N); sequence s is steps [cu_seqlens[s], cu_seqlens[s+1]). Each runs
/// on its own, from its own x0[s] to its own x_final[s] (and backward to its own dx0[s]), with
/// `reverse` per sequence; nothing passes between sequences. States are dense (sequences, N).
/// Offsets: cu_seqlens[0] = 0, non-decreasing, cu_seqlens[sequences] ≤ total_length (steps past
/// it are neither read nor written); host memory for host_backend, which checks all of this
/// (status::invalid_offsets), device memory for cuda_backend, which checks only the pointer and
/// sequences ≥ 0 (offsets that break the rule are the caller's error). A sequence of no steps
/// has x_final[s] = x0[s] (or 0) and dx0[s] = dx_final[s] (or 0).
struct matrix_varlen_shape {
  index_t sequences = 0;                     // number of packed sequences
  index_t total_length = 0;                  // steps of the packed step axis
  index_t n = 0;                             // N: state size, 1..64
  const std::int64_t* cu_seqlens = nullptr;  // sequences + 1 offsets
};

/// The forward of matrix_forward_args over each packed sequence: the same tensors, aliasing
/// rules and options; only the step strides are used (the batch strides are not).
template <class T>
struct matrix_varlen_forward_args {
  matrix_varlen_shape shape;
  const T* W = nullptr;    // (total_length, N, N)
  const T* b = nullptr;    // (total_length, N)
  T* x = nullptr;          // (total_length, N)
  const T* x0 = nullptr;   // optional (sequences, N)
  T* x_final = nullptr;    // optional (sequences, N)
  bool reverse = false;
  batch_strides W_strides{}, b_strides{}, x_strides{};  // .step only
};

/// The backward of matrix_backward_args over each packed sequence (states (sequences, N)).
template <class T>
struct matrix_varlen_backward_args {
  matrix_varlen_shape shape;
  const T* W = nullptr;
  const T* x = nullptr;         // forward output, or null to recompute it from b and x0
  const T* b = nullptr;         // needed only when x is null
  const T* x0 = nullptr;
  const T* dx = nullptr;
  const T* dx_final = nullptr;
  T* dW = nullptr;
  T* db = nullptr;
  T* dx0 = nullptr;             // required, and written, only with x0
  bool reverse = false;
  batch_strides W_strides{}, x_strides{}, b_strides{}, dx_strides{}, dW_strides{}, db_strides{};  // .step only
};

template <class T>
status matrix_recurrence_forward(const host_backend&, const matrix_varlen_forward_args<T>& args);
template <class T>
status matrix_recurrence_forward(const cuda_backend&, const matrix_varlen_forward_args<T>& args);
template <class T>
status matrix_recurrence_backward(const host_backend&, const matrix_varlen_backward_args<T>& args);
template <class T>
status matrix_recurrence_backward(const cuda_backend&, const matrix_varlen_backward_args<T>& args);
template <class T>
std::size_t matrix_recurrence_workspace_size(const matrix_varlen_forward_args<T>& args);
template <class T>
std::size_t matrix_recurrence_workspace_size(const matrix_varlen_backward_args<T>& args);

// ---------------------------------------------------------------------------------------
// Matrix-chain products.

enum class chain_order {
  left_to_right,  // P_k = M_0·M_1·…·M_k
  right_to_left,  // P_k = M_k·…·M_1·M_0 (what the matrix recurrence's W's compose to)
};

/// The arithmetic a chain may use. The tensor-core modes are a permission, not a demand: a
/// backend uses them where it has such a kernel (the CUDA backend, for float and the 16-bit
/// types); elsewhere — the host backend, and T = double — the product is computed as with
/// `exact`. docs/api.md states the error each mode brings.
enum class chain_math {
  exact,  // products and sums in compute precision (float, or double for T = double)
  tf32,   // multiplies with TF32 operands (10-bit mantissa), sums in float
  bf16,   // multiplies with bfloat16 operands (7-bit mantissa), sums in float
};

enum class chain_output {
  total,     // out is (B, d, d): P_{n-1} of every chain (a reduce)
  prefixes,  // out is (B, n, d, d): every P_k (a scan)
};

/// P_k as chain_order says, for each of B chains of n d×d matrices (row-major).
/// M is (B, n, d, d); out is (B, d, d) for chain_output::total (out_strides.step is then
/// unused) or (B, n, d, d) for chain_output::prefixes. With n = 0, total writes the identity
/// and prefixes write nothing. out may not overlap M. The running product is carried in
/// compute precision; only the values written are rounded to T.
template <class T>
struct matrix_chain_args {
  index_t batch = 0;     // B: independent chains
  index_t count = 0;     // n: matrices per chain
  index_t d = 0;         // matrix size, 1..1024 (status::unsupported otherwise)
  const T* M = nullptr;  // (B, n, d, d) the factors
  T* out = nullptr;      // (B, d, d) or (B, n, d, d), by `output`
  chain_output output = chain_output::total;
  chain_order order = chain_order::left_to_right;
  chain_math math = chain_math::exact;
  batch_strides M_strides{}, out_strides{};
};

template <class T>
status matrix_chain(const host_backend&, const matrix_chain_args<T>& args);
template <class T>
status matrix_chain(const cuda_backend&, const matrix_chain_args<T>& args);

/// Bytes of temporary device storage the CUDA backend needs (0 for the host backend, and for
/// invalid arguments).
template <class T>
std::size_t matrix_chain_workspace_size(const matrix_chain_args<T>& args);

}  // namespace parscan
