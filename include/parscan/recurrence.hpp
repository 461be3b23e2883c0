// parscan/recurrence.hpp — the first-order gated recurrence
//     x[t] = a[t]·x[t-1] + b[t]
// over B·D independent channels of T steps: the core of linear-RNN and state-space layers.
// Forward and backward, with state in (x0) and out (x_final), for both tensor layouts and
// explicit strides. The host and CUDA backends take the same arguments; the library is
// compiled for T = float, double, bfloat16, float16 and complex<float>. 16-bit types are
// storage only: arithmetic and the carried state are float.
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

enum class recurrence_layout {
  time_contiguous,  // (B, D, T): each channel's steps are adjacent
  channel_last,     // (B, T, D): each step's channels are adjacent
  strided,          // each tensor's strides given explicitly
};

enum class gate_form {
  linear,  // `a` holds the gates a[t]
  log,     // `a` holds log a[t]; a[t] = exp(log a[t]) (complex exp for complex<float>)
};

/// Element strides of a (batch, channel, time) tensor; used with recurrence_layout::strided.
struct recurrence_strides {
  index_t batch = 0, channel = 0, time = 0;
};

struct recurrence_shape {
  index_t batch = 0, channels = 0, length = 0;
  recurrence_layout layout = recurrence_layout::time_contiguous;
};

/// Strides of a dense tensor of `shape` in its layout (not for recurrence_layout::strided).
constexpr recurrence_strides dense_strides(const recurrence_shape& s) {
  return s.layout == recurrence_layout::channel_last
             ? recurrence_strides{s.length * s.channels, 1, s.channels}
             : recurrence_strides{s.channels * s.length, s.length, 1};
}

/// Forward: x[t] = a[t]·x[t-1] + b[t] with x[-1] = x0 (or 0), for t = 0..T-1; with
/// `reverse`, x[t] = a[t]·x[t+1] + b[t] with x[T] = x0, for t = T-1..0.
/// a, b and x have shape (B, D, T) in the chosen layout; x0 and x_final are dense (B, D)
/// (index b·D + d). x may be exactly a or b (in place). x_final receives the last state
/// computed (x[T-1], or x[0] with `reverse`), so consecutive chunks chain through
/// x0 = previous x_final. x_final may be exactly x0 (the state is updated in place). With
/// T = 0 nothing is read from a or b and x_final receives x0 (or zero).
template <class T>
struct gated_forward_args {
  recurrence_shape shape;
  const T* a = nullptr;         // gates (or log gates, see gate)
  const T* b = nullptr;         // inputs
  T* x = nullptr;               // output states
  const T* x0 = nullptr;        // optional state before the first step
  T* x_final = nullptr;         // optional state after the last step
  bool reverse = false;
  gate_form gate = gate_form::linear;
  recurrence_strides a_strides{}, b_strides{}, x_strides{};  // recurrence_layout::strided only
};

/// Backward of the forward above. With g[t] = dx[t] (+ dx_final on the last step computed):
///   db[t]  = g[t] + a[t+1]*·db[t+1]          (a reverse scan; db[T] = 0)
///   da[t]  = db[t]·x[t-1]*                   (x[-1] = x0, or 0 without x0)
///   dx0    = a[0]*·db[0]                     (written only when x0 is given; required then)
/// where * is the complex conjugate (PyTorch's convention; a no-op for real types), and
/// "next"/"previous" follow the forward's direction. With gate_form::log, `da` receives the
/// gradient with respect to log a, i.e. da·a*.
/// x is the forward output; if it is null, x is recomputed from a, b and x0 into temporary
/// storage (b is then required). db may be exactly dx (in place), or da may be exactly dx;
/// dx0 may be exactly dx_final; no other output may overlap an input or another output.
/// With T = 0, dx0 (when x0 is given) receives dx_final (or zero). Backward over consecutive chunks, last chunk
/// first, chains through dx_final = the later chunk's dx0.
template <class T>
struct gated_backward_args {
  recurrence_shape shape;
  const T* a = nullptr;         // gates (or log gates), as given to forward
  const T* x = nullptr;         // forward output, or null to recompute it from b and x0
  const T* b = nullptr;         // forward input; needed only when x is null
  const T* x0 = nullptr;        // optional, as given to forward
  const T* dx = nullptr;        // dL/dx
  const T* dx_final = nullptr;  // optional dL/dx_final, dense (B, D)
  T* da = nullptr;              // dL/da (or dL/dlog a)
  T* db = nullptr;              // dL/db
  T* dx0 = nullptr;             // dL/dx0, dense (B, D); required, and written, only with x0
  bool reverse = false;
  gate_form gate = gate_form::linear;
  recurrence_strides a_strides{}, x_strides{}, b_strides{}, dx_strides{}, da_strides{}, db_strides{};
};

template <class T>
status gated_recurrence_forward(const host_backend&, const gated_forward_args<T>& args);
template <class T>
status gated_recurrence_forward(const cuda_backend&, const gated_forward_args<T>& args);
template <class T>
status gated_recurrence_backward(const host_backend&, const gated_backward_args<T>& args);
template <class T>
status gated_recurrence_backward(const cuda_backend&, const gated_backward_args<T>& args);

/// Bytes of temporary device storage the CUDA backend needs for these arguments (0 for the
/// host backend, which needs none). Depends only on shapes and options, not on data.
template <class T>
std::size_t gated_recurrence_workspace_size(const gated_forward_args<T>& args);
template <class T>
std::size_t gated_recurrence_workspace_size(const gated_backward_args<T>& args);

// ---------------------------------------------------------------------------------------------
// Variable-length packed sequences (cu_seqlens). N sequences of different lengths are
// concatenated along time into one tensor of total_length steps and D channels; sequence n
// occupies steps [cu_seqlens[n], cu_seqlens[n+1]) (N + 1 int64 offsets, as FlashAttention and
// flash-linear-attention define them). Every sequence is its own recurrence: it starts from its
// own x0[n] (dense (N, D), element n·D + d), ends in its own x_final[n], runs backwards on its
// own with `reverse`; nothing passes from one sequence to the next.
//
// Offsets: cu_seqlens[0] = 0, non-decreasing, cu_seqlens[N] ≤ total_length (steps past it are
// neither read nor written). Zero-length sequences are valid (x_final[n] = x0[n], or 0). The host
// backend reads cu_seqlens from host memory and checks all of this (status::invalid_offsets);
// the CUDA backend reads it from device memory, where checking it would cost a synchronisation,
// so it checks only that the pointer is non-null and N ≥ 0: offsets that break the rule are the
// caller's error, and make the call read and write out of bounds.

/// A packed (total_length, D) tensor (recurrence_layout::channel_last, the common packed
/// layout), a (D, total_length) tensor (time_contiguous), or explicit channel and time strides
/// (strided; the batch stride is not used).
struct varlen_shape {
  index_t sequences = 0;                     // N
  index_t channels = 0;                      // D
  index_t total_length = 0;                  // steps of the packed time axis
  const std::int64_t* cu_seqlens = nullptr;  // N + 1 offsets (host memory for host_backend, device memory for cuda_backend)
  recurrence_layout layout = recurrence_layout::channel_last;
};

/// Strides of a dense packed tensor of `shape` (not for recurrence_layout::strided).
constexpr recurrence_strides dense_strides(const varlen_shape& s) {
  return s.layout == recurrence_layout::channel_last ? recurrence_strides{0, 1, s.channels}
                                                     : recurrence_strides{0, s.total_length, 1};
}

/// The forward of gated_forward_args over each packed sequence: the same tensors, aliasing
/// rules and options, with x0 and x_final dense (N, D).
template <class T>
struct gated_varlen_forward_args {
  varlen_shape shape;
  const T* a = nullptr;
  const T* b = nullptr;
  T* x = nullptr;
  const T* x0 = nullptr;   // optional (N, D)
  T* x_final = nullptr;    // optional (N, D)
  bool reverse = false;
  gate_form gate = gate_form::linear;
  recurrence_strides a_strides{}, b_strides{}, x_strides{};  // recurrence_layout::strided only
};

/// The backward of gated_backward_args over each packed sequence; x0, dx_final and dx0 dense
/// (N, D).
template <class T>
struct gated_varlen_backward_args {
  varlen_shape shape;
  const T* a = nullptr;
  const T* x = nullptr;         // forward output, or null to recompute it from b and x0
  const T* b = nullptr;
  const T* x0 = nullptr;
  const T* dx = nullptr;
  const T* dx_final = nullptr;
  T* da = nullptr;
  T* db = nullptr;
  T* dx0 = nullptr;             // required, and written, only with x0
  bool reverse = false;
  gate_form gate = gate_form::linear;
  recurrence_strides a_strides{}, x_strides{}, b_strides{}, dx_strides{}, da_strides{}, db_strides{};
};

template <class T>
status gated_recurrence_forward(const host_backend&, const gated_varlen_forward_args<T>& args);
template <class T>
status gated_recurrence_forward(const cuda_backend&, const gated_varlen_forward_args<T>& args);
template <class T>
status gated_recurrence_backward(const host_backend&, const gated_varlen_backward_args<T>& args);
template <class T>
status gated_recurrence_backward(const cuda_backend&, const gated_varlen_backward_args<T>& args);
template <class T>
std::size_t gated_recurrence_workspace_size(const gated_varlen_forward_args<T>& args);
template <class T>
std::size_t gated_recurrence_workspace_size(const gated_varlen_backward_args<T>& args);

/// True when the library was built with CUDA and a device is visible.
bool cuda_available();

}  // namespace parscan
