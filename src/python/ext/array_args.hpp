// src/python/ext/array_args.hpp — what the Python bindings (nanobind and XLA FFI alike) know
// about an array argument, and how an array of any rank scanned along one named dimension
// becomes parscan's (batch, channel, time) strides without a copy or a transpose.
//
// The bindings turn each framework's array (a DLPack tensor through nanobind, an XLA buffer
// through the FFI) into an array_arg; everything after that is shared, so every front end
// refuses exactly the same inputs with exactly the same messages. Plain C++: no Python, no
// CUDA headers.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include <parscan/config.hpp>
#include <parscan/recurrence.hpp>
#include <parscan/status.hpp>

namespace parscan::python {

/// The element types the bindings know. `other` is anything else: it is refused by name.
enum class element_type : int { float32, float64, bfloat16, float16, complex64, int32, int64, uint8, boolean, other };

const char* name_of(element_type t);

enum class device_kind : int { cpu, cuda };

/// Ranks above this are refused: the shape and strides are kept inline, with no allocation.
inline constexpr int max_rank = 16;

/// One array argument: where its data is, its element type and device, and its shape and
/// strides in elements (never bytes).
struct array_arg {
  const char* name = "";
  void* data = nullptr;
  element_type type = element_type::other;
  device_kind device = device_kind::cpu;
  int device_id = 0;  // CUDA: the device ordinal, or -1 for "whichever is current"
  int rank = 0;
  std::int64_t shape[max_rank] = {};
  std::int64_t strides[max_rank] = {};

  std::int64_t size() const;
  std::string describe_shape() const;    // Python's tuple notation
  std::string describe_strides() const;  // the same, of the strides
};

/// Sets a's strides to those of a dense row-major (C-order) array of its shape.
void set_dense_strides(array_arg& a);

/// Why an argument was refused; the bindings raise the Python exception `kind` names, with
/// `what()` as its message.
struct argument_error : std::runtime_error {
  enum kind_t { type_error, value_error, runtime_error } kind;
  argument_error(kind_t k, const std::string& message) : std::runtime_error(message), kind(k) {}
};

/// Every message starts with the operation's public name, so a user sees which call refused.
[[noreturn]] void fail(argument_error::kind_t kind, const char* op, const std::string& message);

/// Raises unless s is success: ValueError for bad arguments, RuntimeError for CUDA failures or
/// failed allocations. `arguments` lists the arrays the failing call was given, since the
/// status itself cannot say which one it refused.
void check_status(status s, const char* op, const char* arguments);

/// Raises TypeError unless a's element type is one of `allowed`.
void require_type(const char* op, const array_arg& a, std::initializer_list<element_type> allowed);

/// Raises unless `other` has the element type (TypeError) and the device (ValueError) of `ref`.
void require_like(const char* op, const array_arg& ref, const array_arg& other);

/// Where the computation runs: every array of the call is on this device.
struct execution {
  device_kind device = device_kind::cpu;
  int device_id = 0;
  std::uintptr_t stream = 0;  // a cudaStream_t as an integer (0: the legacy default stream)
};

/// Normalises dim (negative counts from the end) against a's rank; raises ValueError if a has
/// rank 0 or dim is out of range.
int normalize_dim(const char* op, const array_arg& a, std::int64_t dim);

/// A (batch, channels, length) shape for arrays of one shape scanned along one dimension, and
/// each array's strides in it.
struct time_axis_plan {
  index_t batch = 0, channels = 0, length = 0;
  recurrence_strides strides[8];  // in the order the arrays were given
};

/// Splits the dimensions other than `dim` of same-shaped arrays into at most two strided
/// dimensions shared by all of them: adjacent dimensions merge where every array steps over
/// the inner one exactly (stride of the outer = size · stride of the inner), and dimensions of
/// size 1 drop out. Sequences are then numbered in row-major order of the remaining dimensions,
/// which is how the dense per-sequence state arrays (x0, x_final) are indexed. Raises
/// ValueError naming the array whose layout needs a third stride (make that one contiguous),
/// an array of another shape, or negative strides. At most 8 arrays.
time_axis_plan plan_time_axis(const char* op, std::initializer_list<const array_arg*> arrays, int dim);
time_axis_plan plan_time_axis(const char* op, const array_arg* const* arrays, int count, int dim);

/// Checks a per-sequence state array (x0, x_final, their gradients): the shape of `ref` without
/// `dim`, dense row-major, the type and device of `ref`. Raises naming the array otherwise.
void require_state(const char* op, const array_arg& state, const array_arg& ref, int dim);

/// Checks a per-sequence state array of packed sequences: (sequences,) followed by the shape of
/// `ref` without `dim`, dense row-major, the type and device of `ref`.
void require_packed_state(const char* op, const array_arg& state, const array_arg& ref, int dim,
                          std::int64_t sequences);

/// Checks cu_seqlens (the N + 1 offsets of packed sequences) against the packed array `ref`:
/// int64 or int32 (TypeError otherwise), one dense dimension of at least one element, on the
/// device of `ref` (ValueError otherwise). Returns N. The values are the library's to check.
std::int64_t require_offsets(const char* op, const array_arg& offsets, const array_arg& ref);

/// plan_time_axis for packed sequences: the dimensions other than `dim` must collapse into one
/// strided (channel) dimension, since the packed layouts have a channel and a time stride only.
/// The plan's batch is 1, or 0 when a dimension other than `dim` is empty.
time_axis_plan plan_packed_time_axis(const char* op, std::initializer_list<const array_arg*> arrays, int dim);

/// The time axis of a recurrence call: a batch of sequences along `dim` or, with cu_seqlens,
/// packed sequences along it. Holds the plan of the call's arrays (plan_time_axis, or
/// plan_packed_time_axis) and checks the per-sequence states against it.
struct scan_axis {
  const char* op = "";
  const array_arg* ref = nullptr;         // the first array of the plan
  int dim = 0;
  const array_arg* cu_seqlens = nullptr;  // null: a batch
  std::int64_t sequences = 0;             // packed: N
  time_axis_plan plan;

  bool packed() const { return cu_seqlens != nullptr; }
  /// require_state, or require_packed_state when packed.
  void require_state_of(const array_arg& state) const;
  /// The packed shape (layout strided, cu_seqlens left for the caller): N, the channels (0 when a
  /// dimension other than dim is empty), the packed length.
  varlen_shape packed_shape() const;
};

/// Checks cu_seqlens (when given) against `ref`: the axis without a plan, for calls that plan
/// their arrays otherwise (the matrix recurrence's blocks) and check only their states with it.
scan_axis states_axis(const char* op, const array_arg& ref, int dim, const array_arg* cu_seqlens);

/// Checks cu_seqlens (when given) and plans the arrays along `dim` (normalised).
scan_axis plan_scan_axis(const char* op, std::initializer_list<const array_arg*> arrays, int dim,
                         const array_arg* cu_seqlens);

/// Checks an array of the shape of `ref` (type, device, shape); raises naming the array.
void require_same_shape(const char* op, const array_arg& a, const array_arg& ref);

/// Checks a sign array (log_recurrence: one byte per element, nonzero = negative) against the
/// array of magnitudes it goes with: uint8 or bool, the device and shape of `magnitude`, and
/// the same element strides, since parscan addresses both through one set of strides.
void require_sign(const char* op, const array_arg& sign, const array_arg& magnitude);

}  // namespace parscan::python
