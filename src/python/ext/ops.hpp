// src/python/ext/ops.hpp — the operations the Python bindings expose, in terms of array_arg:
// every front end (the nanobind module for NumPy and PyTorch, the XLA FFI handlers for JAX)
// calls these. Outputs are allocated by the caller (each framework allocates its own), and
// every call checks all of its arguments before anything runs: on any error it raises
// argument_error and has written nothing.
#pragma once

#include <cstdint>

#include <parscan/recurrence.hpp>

#include "array_args.hpp"

namespace parscan::python {

/// x[t] = a[t]·x[t-1] + b[t] along dimension `dim` of a, b and x (one shape, any strides);
/// x0 and x_final (optional) have that shape without `dim`, dense.
struct gated_forward_call {
  const array_arg* a = nullptr;
  const array_arg* b = nullptr;
  const array_arg* x = nullptr;
  const array_arg* x0 = nullptr;       // optional
  const array_arg* x_final = nullptr;  // optional
  std::int64_t dim = -1;
  bool reverse = false;
  gate_form gate = gate_form::linear;
  std::uintptr_t stream = 0;
};
void gated_forward(const gated_forward_call& c);

/// The backward of gated_forward (parscan::gated_recurrence_backward): da, db and, with x0,
/// dx0. x is the forward's output; without it, it is recomputed from b (and x0).
struct gated_backward_call {
  const array_arg* a = nullptr;
  const array_arg* x = nullptr;         // forward output, or null: then b is required
  const array_arg* b = nullptr;         // only read when x is null
  const array_arg* x0 = nullptr;        // optional, as given to forward
  const array_arg* dx = nullptr;
  const array_arg* dx_final = nullptr;  // optional
  const array_arg* da = nullptr;
  const array_arg* db = nullptr;
  const array_arg* dx0 = nullptr;       // required with x0, ignored without
  std::int64_t dim = -1;
  bool reverse = false;
  gate_form gate = gate_form::linear;
  std::uintptr_t stream = 0;
};
void gated_backward(const gated_backward_call& c);

enum class scan_operator : int { sum, max, min };

/// Inclusive (or exclusive) scan of x along `dim` with a built-in operator into out (x's
/// shape). 16-bit floats accumulate in float32; integers in their own type.
struct cumulative_call {
  const array_arg* x = nullptr;
  const array_arg* out = nullptr;
  scan_operator op = scan_operator::sum;
  std::int64_t dim = -1;
  bool reverse = false;
  bool exclusive = false;
  std::uintptr_t stream = 0;
};
void cumulative(const cumulative_call& c);

/// Reduction of x along `dim` into out: x's shape without `dim`, dense, in the accumulator
/// type (accumulator_type_of).
struct reduce_call {
  const array_arg* x = nullptr;
  const array_arg* out = nullptr;
  scan_operator op = scan_operator::sum;
  std::int64_t dim = -1;
  std::uintptr_t stream = 0;
};
void reduce(const reduce_call& c);

/// The type a scan of `t` accumulates in (and reduce writes): float32 for the 16-bit floats.
element_type accumulator_type_of(element_type t);

}  // namespace parscan::python
