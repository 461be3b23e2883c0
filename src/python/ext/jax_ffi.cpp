// src/python/ext/jax_ffi.cpp — XLA FFI handlers for the JAX front end. XLA hands over dense
// row-major buffers and the attributes; they become array_args and run through the same
// checks and calls as every other binding (ops.hpp). An argument error becomes an
// InvalidArgument error, which JAX raises as an exception. The CUDA handlers take XLA's stream.
#include "jax_ffi.hpp"

#if PARSCAN_PYTHON_JAX

#include <cstdint>
#include <exception>

#include <xla/ffi/api/ffi.h>

#include "array_args.hpp"
#include "ops.hpp"

namespace ffi = xla::ffi;

namespace parscan::python {
namespace {

element_type type_of(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::F32: return element_type::float32;
    case ffi::DataType::F64: return element_type::float64;
    case ffi::DataType::BF16: return element_type::bfloat16;
    case ffi::DataType::F16: return element_type::float16;
    case ffi::DataType::C64: return element_type::complex64;
    case ffi::DataType::S32: return element_type::int32;
    case ffi::DataType::S64: return element_type::int64;
    case ffi::DataType::U8: return element_type::uint8;
    case ffi::DataType::PRED: return element_type::boolean;  // JAX's bool: one byte, 0 or 1
    default: return element_type::other;
  }
}

array_arg arg_of(const char* op, const char* name, const ffi::AnyBuffer& buffer, device_kind device) {
  array_arg a;
  a.name = name;
  a.data = buffer.untyped_data();
  a.type = type_of(buffer.element_type());
  a.device = device;
  a.device_id = -1;  // XLA runs the handler with the buffers' device current
  const auto dims = buffer.dimensions();
  if (dims.size() > static_cast<std::size_t>(max_rank))
    fail(argument_error::value_error, op, std::string(name) + " has more than " + std::to_string(max_rank) + " dimensions");
  a.rank = static_cast<int>(dims.size());
  for (int i = 0; i < a.rank; ++i) a.shape[i] = dims[i];
  set_dense_strides(a);
  return a;
}

// The shared implementations take the stream as an integer (0 on the host).
std::uintptr_t stream_of(CUstream_st* stream) { return reinterpret_cast<std::uintptr_t>(stream); }

template <class F>
ffi::Error guarded(F&& f) {
  try {
    f();
    return ffi::Error::Success();
  } catch (const argument_error& e) {
    return e.kind == argument_error::runtime_error ? ffi::Error::Internal(e.what()) : ffi::Error::InvalidArgument(e.what());
  } catch (const std::exception& e) {
    return ffi::Error::Internal(e.what());
  }
}

// parscan/jax.py encodes gate and op as small integers; anything else is a caller's bug.
gate_form gate_of(const char* op, std::int64_t gate) {
  if (gate != 0 && gate != 1) fail(argument_error::value_error, op, "gate code " + std::to_string(gate) + " is not 0 or 1");
  return gate == 1 ? gate_form::log : gate_form::linear;
}

scan_operator operator_of(const char* op, std::int64_t code) {
  if (code < 0 || code > 2) fail(argument_error::value_error, op, "op code " + std::to_string(code) + " is not 0, 1 or 2");
  return static_cast<scan_operator>(code);
}

// x0 is always passed (zeros when the caller has none: the same forward) and x_final always
// returned, so one handler serves every call; the packed handlers take cu_seqlens last.
template <device_kind D>
void gated_forward_on(CUstream_st* stream, ffi::AnyBuffer& a, ffi::AnyBuffer& b, ffi::AnyBuffer& x0,
                      const ffi::AnyBuffer* cu_seqlens, ffi::AnyBuffer& x, ffi::AnyBuffer& x_final, std::int64_t dim,
                      std::int64_t reverse, std::int64_t gate) {
  const char* op = "gated_recurrence";
  const array_arg a_ = arg_of(op, "a", a, D), b_ = arg_of(op, "b", b, D), x0_ = arg_of(op, "x0", x0, D),
                  x_ = arg_of(op, "x", x, D), xf_ = arg_of(op, "x_final", x_final, D);
  const array_arg cu_ = cu_seqlens ? arg_of(op, "cu_seqlens", *cu_seqlens, D) : array_arg{};
  gated_forward_call c;
  c.a = &a_;
  c.b = &b_;
  c.x = &x_;
  c.x0 = &x0_;
  c.x_final = &xf_;
  c.cu_seqlens = cu_seqlens ? &cu_ : nullptr;
  c.dim = dim;
  c.reverse = reverse != 0;
  c.gate = gate_of(op, gate);
  c.stream = stream_of(stream);
  gated_forward(c);
}

template <device_kind D>
ffi::Error gated_forward_ffi(CUstream_st* stream, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer x0,
                             ffi::Result<ffi::AnyBuffer> x, ffi::Result<ffi::AnyBuffer> x_final, std::int64_t dim,
                             std::int64_t reverse, std::int64_t gate) {
  return guarded([&] { gated_forward_on<D>(stream, a, b, x0, nullptr, *x, *x_final, dim, reverse, gate); });
}

template <device_kind D>
ffi::Error gated_varlen_forward_ffi(CUstream_st* stream, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer x0,
                                    ffi::AnyBuffer cu_seqlens, ffi::Result<ffi::AnyBuffer> x,
                                    ffi::Result<ffi::AnyBuffer> x_final, std::int64_t dim, std::int64_t reverse,
                                    std::int64_t gate) {
  return guarded([&] { gated_forward_on<D>(stream, a, b, x0, &cu_seqlens, *x, *x_final, dim, reverse, gate); });
}

template <device_kind D>
void gated_backward_on(CUstream_st* stream, ffi::AnyBuffer& a, ffi::AnyBuffer& x, ffi::AnyBuffer& x0,
                       ffi::AnyBuffer& dx, ffi::AnyBuffer& dx_final, const ffi::AnyBuffer* cu_seqlens,
                       ffi::AnyBuffer& da, ffi::AnyBuffer& db, ffi::AnyBuffer& dx0, std::int64_t dim,
                       std::int64_t reverse, std::int64_t gate) {
  const char* op = "gated_recurrence_backward";
  const array_arg a_ = arg_of(op, "a", a, D), x_ = arg_of(op, "x", x, D), x0_ = arg_of(op, "x0", x0, D),
                  dx_ = arg_of(op, "dx", dx, D), dxf_ = arg_of(op, "dx_final", dx_final, D),
                  da_ = arg_of(op, "da", da, D), db_ = arg_of(op, "db", db, D), dx0_ = arg_of(op, "dx0", dx0, D);
  const array_arg cu_ = cu_seqlens ? arg_of(op, "cu_seqlens", *cu_seqlens, D) : array_arg{};
  gated_backward_call c;
  c.a = &a_;
  c.x = &x_;
  c.x0 = &x0_;
  c.dx = &dx_;
  c.dx_final = &dxf_;
  c.da = &da_;
  c.db = &db_;
  c.dx0 = &dx0_;
  c.cu_seqlens = cu_seqlens ? &cu_ : nullptr;
  c.dim = dim;
  c.reverse = reverse != 0;
  c.gate = gate_of(op, gate);
  c.stream = stream_of(stream);
  gated_backward(c);
}

template <device_kind D>
ffi::Error gated_backward_ffi(CUstream_st* stream, ffi::AnyBuffer a, ffi::AnyBuffer x, ffi::AnyBuffer x0,
                              ffi::AnyBuffer dx, ffi::AnyBuffer dx_final, ffi::Result<ffi::AnyBuffer> da,
                              ffi::Result<ffi::AnyBuffer> db, ffi::Result<ffi::AnyBuffer> dx0, std::int64_t dim,
                              std::int64_t reverse, std::int64_t gate) {
  return guarded(
      [&] { gated_backward_on<D>(stream, a, x, x0, dx, dx_final, nullptr, *da, *db, *dx0, dim, reverse, gate); });
}

template <device_kind D>
ffi::Error gated_varlen_backward_ffi(CUstream_st* stream, ffi::AnyBuffer a, ffi::AnyBuffer x, ffi::AnyBuffer x0,
                                     ffi::AnyBuffer dx, ffi::AnyBuffer dx_final, ffi::AnyBuffer cu_seqlens,
                                     ffi::Result<ffi::AnyBuffer> da, ffi::Result<ffi::AnyBuffer> db,
                                     ffi::Result<ffi::AnyBuffer> dx0, std::int64_t dim, std::int64_t reverse,
                                     std::int64_t gate) {
  return guarded(
      [&] { gated_backward_on<D>(stream, a, x, x0, dx, dx_final, &cu_seqlens, *da, *db, *dx0, dim, reverse, gate); });
}

// What cumulative_call and reduce_call share, from the FFI buffers: x, out and the optional
// offsets (the packed targets, parscan_cumulative_varlen and parscan_reduce_varlen, take
// cu_seqlens after x), the operator, the dimension and the stream.
template <device_kind D>
struct scan_buffers {
  array_arg x, out, cu_seqlens;
  bool packed;
  scan_buffers(const char* op, ffi::AnyBuffer& x_, const ffi::AnyBuffer* cu, ffi::AnyBuffer& out_)
      : x(arg_of(op, "x", x_, D)),
        out(arg_of(op, "out", out_, D)),
        cu_seqlens(cu ? arg_of(op, "cu_seqlens", *cu, D) : array_arg{}),
        packed(cu != nullptr) {}

  template <class Call>
  void fill(Call& c, const char* op, std::int64_t op_code, std::int64_t dim, CUstream_st* stream) const {
    c.x = &x;
    c.out = &out;
    c.cu_seqlens = packed ? &cu_seqlens : nullptr;
    c.op = operator_of(op, op_code);
    c.dim = dim;
    c.stream = stream_of(stream);
  }
};

template <device_kind D>
void cumulative_on(CUstream_st* stream, ffi::AnyBuffer& x, const ffi::AnyBuffer* cu_seqlens, ffi::AnyBuffer& out,
                   std::int64_t op_code, std::int64_t dim, std::int64_t reverse, std::int64_t exclusive) {
  const char* op = "cumulative";
  const scan_buffers<D> buffers(op, x, cu_seqlens, out);
  cumulative_call c;
  buffers.fill(c, op, op_code, dim, stream);
  c.reverse = reverse != 0;
  c.exclusive = exclusive != 0;
  cumulative(c);
}

template <device_kind D>
ffi::Error cumulative_ffi(CUstream_st* stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> out, std::int64_t op_code,
                          std::int64_t dim, std::int64_t reverse, std::int64_t exclusive) {
  return guarded([&] { cumulative_on<D>(stream, x, nullptr, *out, op_code, dim, reverse, exclusive); });
}

template <device_kind D>
ffi::Error cumulative_varlen_ffi(CUstream_st* stream, ffi::AnyBuffer x, ffi::AnyBuffer cu_seqlens,
                                 ffi::Result<ffi::AnyBuffer> out, std::int64_t op_code, std::int64_t dim,
                                 std::int64_t reverse, std::int64_t exclusive) {
  return guarded([&] { cumulative_on<D>(stream, x, &cu_seqlens, *out, op_code, dim, reverse, exclusive); });
}

template <device_kind D>
void reduce_on(CUstream_st* stream, ffi::AnyBuffer& x, const ffi::AnyBuffer* cu_seqlens, ffi::AnyBuffer& out,
               std::int64_t op_code, std::int64_t dim) {
  const char* op = "reduce";
  const scan_buffers<D> buffers(op, x, cu_seqlens, out);
  reduce_call c;
  buffers.fill(c, op, op_code, dim, stream);
  reduce(c);
}

template <device_kind D>
ffi::Error reduce_ffi(CUstream_st* stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> out, std::int64_t op_code,
                      std::int64_t dim) {
  return guarded([&] { reduce_on<D>(stream, x, nullptr, *out, op_code, dim); });
}

template <device_kind D>
ffi::Error reduce_varlen_ffi(CUstream_st* stream, ffi::AnyBuffer x, ffi::AnyBuffer cu_seqlens,
                             ffi::Result<ffi::AnyBuffer> out, std::int64_t op_code, std::int64_t dim) {
  return guarded([&] { reduce_on<D>(stream, x, &cu_seqlens, *out, op_code, dim); });
}

// log_recurrence's optional arrays travel as flags: the FFI signature is fixed, so an absent
// sign array is passed as an empty placeholder and `signs` says which ones are real. The bits
// are parscan/jax.py's: forms (set = value form) a 1, b 2, x0 4, the upstream gradient dx 8;
// signs a 1, b 2, x0 4; outputs log|x| with its signs 1, x itself 2.
bool bit(std::int64_t mask, int b) { return (mask >> b) & 1; }

log_input log_input_of(const array_arg& magnitude, const array_arg& negative, std::int64_t forms,
                       std::int64_t signs, int b) {
  return {&magnitude, bit(signs, b) ? &negative : nullptr, bit(forms, b)};
}

// x0 is always passed: zeros in value form when the caller has none, the same forward.
template <device_kind D>
void log_forward_on(CUstream_st* stream, ffi::AnyBuffer& a, ffi::AnyBuffer& b, ffi::AnyBuffer& x0,
                    ffi::AnyBuffer& a_negative, ffi::AnyBuffer& b_negative, ffi::AnyBuffer& x0_negative,
                    const ffi::AnyBuffer* cu_seqlens, ffi::AnyBuffer& log_x, ffi::AnyBuffer& x_negative,
                    ffi::AnyBuffer& x, ffi::AnyBuffer& log_x_final, ffi::AnyBuffer& x_final_negative, std::int64_t dim,
                    std::int64_t reverse, std::int64_t forms, std::int64_t signs, std::int64_t outputs) {
  const char* op = "log_recurrence";
  const array_arg a_ = arg_of(op, "a", a, D), b_ = arg_of(op, "b", b, D), x0_ = arg_of(op, "x0", x0, D),
                  an_ = arg_of(op, "a_negative", a_negative, D), bn_ = arg_of(op, "b_negative", b_negative, D),
                  x0n_ = arg_of(op, "x0_negative", x0_negative, D), lx_ = arg_of(op, "log_x", log_x, D),
                  xn_ = arg_of(op, "x_negative", x_negative, D), x_ = arg_of(op, "x", x, D),
                  lf_ = arg_of(op, "log_x_final", log_x_final, D),
                  fn_ = arg_of(op, "x_final_negative", x_final_negative, D);
  const array_arg cu_ = cu_seqlens ? arg_of(op, "cu_seqlens", *cu_seqlens, D) : array_arg{};
  log_forward_call c;
  c.a = log_input_of(a_, an_, forms, signs, 0);
  c.b = log_input_of(b_, bn_, forms, signs, 1);
  c.x0 = log_input_of(x0_, x0n_, forms, signs, 2);
  c.log_x = bit(outputs, 0) ? &lx_ : nullptr;
  c.x_negative = bit(outputs, 0) ? &xn_ : nullptr;
  c.x = bit(outputs, 1) ? &x_ : nullptr;
  c.log_x_final = &lf_;
  c.x_final_negative = &fn_;
  c.cu_seqlens = cu_seqlens ? &cu_ : nullptr;
  c.dim = dim;
  c.reverse = reverse != 0;
  c.stream = stream_of(stream);
  log_forward(c);
}

template <device_kind D>
ffi::Error log_forward_ffi(CUstream_st* stream, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer x0,
                           ffi::AnyBuffer a_negative, ffi::AnyBuffer b_negative, ffi::AnyBuffer x0_negative,
                           ffi::Result<ffi::AnyBuffer> log_x, ffi::Result<ffi::AnyBuffer> x_negative,
                           ffi::Result<ffi::AnyBuffer> x, ffi::Result<ffi::AnyBuffer> log_x_final,
                           ffi::Result<ffi::AnyBuffer> x_final_negative, std::int64_t dim, std::int64_t reverse,
                           std::int64_t forms, std::int64_t signs, std::int64_t outputs) {
  return guarded([&] {
    log_forward_on<D>(stream, a, b, x0, a_negative, b_negative, x0_negative, nullptr, *log_x, *x_negative, *x,
                      *log_x_final, *x_final_negative, dim, reverse, forms, signs, outputs);
  });
}

template <device_kind D>
ffi::Error log_varlen_forward_ffi(CUstream_st* stream, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer x0,
                                  ffi::AnyBuffer a_negative, ffi::AnyBuffer b_negative, ffi::AnyBuffer x0_negative,
                                  ffi::AnyBuffer cu_seqlens, ffi::Result<ffi::AnyBuffer> log_x,
                                  ffi::Result<ffi::AnyBuffer> x_negative, ffi::Result<ffi::AnyBuffer> x,
                                  ffi::Result<ffi::AnyBuffer> log_x_final, ffi::Result<ffi::AnyBuffer> x_final_negative,
                                  std::int64_t dim, std::int64_t reverse, std::int64_t forms, std::int64_t signs,
                                  std::int64_t outputs) {
  return guarded([&] {
    log_forward_on<D>(stream, a, b, x0, a_negative, b_negative, x0_negative, &cu_seqlens, *log_x, *x_negative, *x,
                      *log_x_final, *x_final_negative, dim, reverse, forms, signs, outputs);
  });
}

// The backward always gets the forward's log|x| and its signs: parscan/jax.py's forward rule
// keeps them, so nothing is recomputed.
template <device_kind D>
void log_backward_on(CUstream_st* stream, ffi::AnyBuffer& a, ffi::AnyBuffer& b, ffi::AnyBuffer& x0,
                     ffi::AnyBuffer& a_negative, ffi::AnyBuffer& b_negative, ffi::AnyBuffer& x0_negative,
                     ffi::AnyBuffer& log_x, ffi::AnyBuffer& x_negative, ffi::AnyBuffer& dx, ffi::AnyBuffer& dlog_x_final,
                     const ffi::AnyBuffer* cu_seqlens, ffi::AnyBuffer& da, ffi::AnyBuffer& db, ffi::AnyBuffer& dx0,
                     std::int64_t dim, std::int64_t reverse, std::int64_t forms, std::int64_t signs) {
  const char* op = "log_recurrence_backward";
  const array_arg a_ = arg_of(op, "a", a, D), b_ = arg_of(op, "b", b, D), x0_ = arg_of(op, "x0", x0, D),
                  an_ = arg_of(op, "a_negative", a_negative, D), bn_ = arg_of(op, "b_negative", b_negative, D),
                  x0n_ = arg_of(op, "x0_negative", x0_negative, D), lx_ = arg_of(op, "log_x", log_x, D),
                  xn_ = arg_of(op, "x_negative", x_negative, D), dx_ = arg_of(op, "dx", dx, D),
                  dlf_ = arg_of(op, "dlog_x_final", dlog_x_final, D), da_ = arg_of(op, "da", da, D),
                  db_ = arg_of(op, "db", db, D), dx0_ = arg_of(op, "dx0", dx0, D);
  const array_arg cu_ = cu_seqlens ? arg_of(op, "cu_seqlens", *cu_seqlens, D) : array_arg{};
  log_backward_call c;
  c.a = log_input_of(a_, an_, forms, signs, 0);
  c.b = log_input_of(b_, bn_, forms, signs, 1);
  c.x0 = log_input_of(x0_, x0n_, forms, signs, 2);
  c.log_x = &lx_;
  c.x_negative = &xn_;
  c.dx = &dx_;
  c.dx_value = bit(forms, 3);
  c.dlog_x_final = &dlf_;
  c.da = &da_;
  c.db = &db_;
  c.dx0 = &dx0_;
  c.cu_seqlens = cu_seqlens ? &cu_ : nullptr;
  c.dim = dim;
  c.reverse = reverse != 0;
  c.stream = stream_of(stream);
  log_backward(c);
}

template <device_kind D>
ffi::Error log_backward_ffi(CUstream_st* stream, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer x0,
                            ffi::AnyBuffer a_negative, ffi::AnyBuffer b_negative, ffi::AnyBuffer x0_negative,
                            ffi::AnyBuffer log_x, ffi::AnyBuffer x_negative, ffi::AnyBuffer dx,
                            ffi::AnyBuffer dlog_x_final, ffi::Result<ffi::AnyBuffer> da,
                            ffi::Result<ffi::AnyBuffer> db, ffi::Result<ffi::AnyBuffer> dx0, std::int64_t dim,
                            std::int64_t reverse, std::int64_t forms, std::int64_t signs) {
  return guarded([&] {
    log_backward_on<D>(stream, a, b, x0, a_negative, b_negative, x0_negative, log_x, x_negative, dx, dlog_x_final,
                       nullptr, *da, *db, *dx0, dim, reverse, forms, signs);
  });
}

template <device_kind D>
ffi::Error log_varlen_backward_ffi(CUstream_st* stream, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer x0,
                                   ffi::AnyBuffer a_negative, ffi::AnyBuffer b_negative, ffi::AnyBuffer x0_negative,
                                   ffi::AnyBuffer log_x, ffi::AnyBuffer x_negative, ffi::AnyBuffer dx,
                                   ffi::AnyBuffer dlog_x_final, ffi::AnyBuffer cu_seqlens,
                                   ffi::Result<ffi::AnyBuffer> da, ffi::Result<ffi::AnyBuffer> db,
                                   ffi::Result<ffi::AnyBuffer> dx0, std::int64_t dim, std::int64_t reverse,
                                   std::int64_t forms, std::int64_t signs) {
  return guarded([&] {
    log_backward_on<D>(stream, a, b, x0, a_negative, b_negative, x0_negative, log_x, x_negative, dx, dlog_x_final,
                       &cu_seqlens, *da, *db, *dx0, dim, reverse, forms, signs);
  });
}

// As for the gated recurrence: x0 is always passed (zeros when the caller has none) and x_final
// always returned.
template <device_kind D>
void matrix_forward_on(CUstream_st* stream, ffi::AnyBuffer& W, ffi::AnyBuffer& b, ffi::AnyBuffer& x0,
                       const ffi::AnyBuffer* cu_seqlens, ffi::AnyBuffer& x, ffi::AnyBuffer& x_final, std::int64_t dim,
                       std::int64_t reverse) {
  const char* op = "matrix_recurrence";
  const array_arg W_ = arg_of(op, "W", W, D), b_ = arg_of(op, "b", b, D), x0_ = arg_of(op, "x0", x0, D),
                  x_ = arg_of(op, "x", x, D), xf_ = arg_of(op, "x_final", x_final, D);
  const array_arg cu_ = cu_seqlens ? arg_of(op, "cu_seqlens", *cu_seqlens, D) : array_arg{};
  matrix_forward_call c;
  c.W = &W_;
  c.b = &b_;
  c.x = &x_;
  c.x0 = &x0_;
  c.x_final = &xf_;
  c.cu_seqlens = cu_seqlens ? &cu_ : nullptr;
  c.dim = dim;
  c.reverse = reverse != 0;
  c.stream = stream_of(stream);
  matrix_forward(c);
}

template <device_kind D>
ffi::Error matrix_forward_ffi(CUstream_st* stream, ffi::AnyBuffer W, ffi::AnyBuffer b, ffi::AnyBuffer x0,
                              ffi::Result<ffi::AnyBuffer> x, ffi::Result<ffi::AnyBuffer> x_final, std::int64_t dim,
                              std::int64_t reverse) {
  return guarded([&] { matrix_forward_on<D>(stream, W, b, x0, nullptr, *x, *x_final, dim, reverse); });
}

template <device_kind D>
ffi::Error matrix_varlen_forward_ffi(CUstream_st* stream, ffi::AnyBuffer W, ffi::AnyBuffer b, ffi::AnyBuffer x0,
                                     ffi::AnyBuffer cu_seqlens, ffi::Result<ffi::AnyBuffer> x,
                                     ffi::Result<ffi::AnyBuffer> x_final, std::int64_t dim, std::int64_t reverse) {
  return guarded([&] { matrix_forward_on<D>(stream, W, b, x0, &cu_seqlens, *x, *x_final, dim, reverse); });
}

template <device_kind D>
void matrix_backward_on(CUstream_st* stream, ffi::AnyBuffer& W, ffi::AnyBuffer& x, ffi::AnyBuffer& x0,
                        ffi::AnyBuffer& dx, ffi::AnyBuffer& dx_final, const ffi::AnyBuffer* cu_seqlens,
                        ffi::AnyBuffer& dW, ffi::AnyBuffer& db, ffi::AnyBuffer& dx0, std::int64_t dim,
                        std::int64_t reverse) {
  const char* op = "matrix_recurrence_backward";
  const array_arg W_ = arg_of(op, "W", W, D), x_ = arg_of(op, "x", x, D), x0_ = arg_of(op, "x0", x0, D),
                  dx_ = arg_of(op, "dx", dx, D), dxf_ = arg_of(op, "dx_final", dx_final, D),
                  dW_ = arg_of(op, "dW", dW, D), db_ = arg_of(op, "db", db, D), dx0_ = arg_of(op, "dx0", dx0, D);
  const array_arg cu_ = cu_seqlens ? arg_of(op, "cu_seqlens", *cu_seqlens, D) : array_arg{};
  matrix_backward_call c;
  c.W = &W_;
  c.x = &x_;
  c.x0 = &x0_;
  c.dx = &dx_;
  c.dx_final = &dxf_;
  c.dW = &dW_;
  c.db = &db_;
  c.dx0 = &dx0_;
  c.cu_seqlens = cu_seqlens ? &cu_ : nullptr;
  c.dim = dim;
  c.reverse = reverse != 0;
  c.stream = stream_of(stream);
  matrix_backward(c);
}

template <device_kind D>
ffi::Error matrix_backward_ffi(CUstream_st* stream, ffi::AnyBuffer W, ffi::AnyBuffer x, ffi::AnyBuffer x0,
                               ffi::AnyBuffer dx, ffi::AnyBuffer dx_final, ffi::Result<ffi::AnyBuffer> dW,
                               ffi::Result<ffi::AnyBuffer> db, ffi::Result<ffi::AnyBuffer> dx0, std::int64_t dim,
                               std::int64_t reverse) {
  return guarded([&] { matrix_backward_on<D>(stream, W, x, x0, dx, dx_final, nullptr, *dW, *db, *dx0, dim, reverse); });
}

template <device_kind D>
ffi::Error matrix_varlen_backward_ffi(CUstream_st* stream, ffi::AnyBuffer W, ffi::AnyBuffer x, ffi::AnyBuffer x0,
                                      ffi::AnyBuffer dx, ffi::AnyBuffer dx_final, ffi::AnyBuffer cu_seqlens,
                                      ffi::Result<ffi::AnyBuffer> dW, ffi::Result<ffi::AnyBuffer> db,
                                      ffi::Result<ffi::AnyBuffer> dx0, std::int64_t dim, std::int64_t reverse) {
  return guarded(
      [&] { matrix_backward_on<D>(stream, W, x, x0, dx, dx_final, &cu_seqlens, *dW, *db, *dx0, dim, reverse); });
}

template <device_kind D>
ffi::Error matrix_chain_ffi(CUstream_st* stream, ffi::AnyBuffer M, ffi::Result<ffi::AnyBuffer> out, std::int64_t dim,
                            std::int64_t prefixes, std::int64_t order, std::int64_t math) {
  return guarded([&] {
    const char* op = "matrix_chain";
    const array_arg M_ = arg_of(op, "M", M, D), out_ = arg_of(op, "out", *out, D);
    matrix_chain_call c;
    c.M = &M_;
    c.out = &out_;
    c.dim = dim;
    c.prefixes = prefixes != 0;
    c.order = static_cast<int>(order);  // range-checked by matrix_chain
    c.math = static_cast<int>(math);
    c.stream = stream_of(stream);
    matrix_chain(c);
  });
}

/// The CPU entry of a handler: XLA's CPU target has no stream, so the shared implementation
/// gets a null one. One adapter serves every operation.
template <auto Handler>
struct on_cpu;
template <class... Args, ffi::Error (*Handler)(CUstream_st*, Args...)>
struct on_cpu<Handler> {
  static ffi::Error call(Args... args) { return Handler(nullptr, args...); }
};

}  // namespace
}  // namespace parscan::python

using parscan::python::device_kind;
namespace py = parscan::python;

// Each operation's FFI signature (buffers, then attributes), written once for both targets.
#define PARSCAN_ARGS_1 .Arg<ffi::AnyBuffer>()
#define PARSCAN_ARGS_2 PARSCAN_ARGS_1 PARSCAN_ARGS_1
#define PARSCAN_ARGS_3 PARSCAN_ARGS_2 PARSCAN_ARGS_1
#define PARSCAN_RETS_1 .Ret<ffi::AnyBuffer>()
#define PARSCAN_RETS_2 PARSCAN_RETS_1 PARSCAN_RETS_1
#define PARSCAN_RETS_3 PARSCAN_RETS_2 PARSCAN_RETS_1
#define PARSCAN_INT_ATTR(name) .Attr<std::int64_t>(name)
#define PARSCAN_SCAN_ATTRS PARSCAN_INT_ATTR("dim") PARSCAN_INT_ATTR("reverse")

#define PARSCAN_GATED_ATTRS PARSCAN_SCAN_ATTRS PARSCAN_INT_ATTR("gate")
#define PARSCAN_GATED_FORWARD_SIGNATURE PARSCAN_ARGS_3 PARSCAN_RETS_2 PARSCAN_GATED_ATTRS
#define PARSCAN_GATED_BACKWARD_SIGNATURE PARSCAN_ARGS_3 PARSCAN_ARGS_2 PARSCAN_RETS_3 PARSCAN_GATED_ATTRS
#define PARSCAN_GATED_VARLEN_FORWARD_SIGNATURE PARSCAN_ARGS_3 PARSCAN_ARGS_1 PARSCAN_RETS_2 PARSCAN_GATED_ATTRS
#define PARSCAN_GATED_VARLEN_BACKWARD_SIGNATURE PARSCAN_ARGS_3 PARSCAN_ARGS_3 PARSCAN_RETS_3 PARSCAN_GATED_ATTRS
#define PARSCAN_CUMULATIVE_ATTRS PARSCAN_INT_ATTR("op") PARSCAN_SCAN_ATTRS PARSCAN_INT_ATTR("exclusive")
#define PARSCAN_CUMULATIVE_SIGNATURE PARSCAN_ARGS_1 PARSCAN_RETS_1 PARSCAN_CUMULATIVE_ATTRS
#define PARSCAN_CUMULATIVE_VARLEN_SIGNATURE PARSCAN_ARGS_2 PARSCAN_RETS_1 PARSCAN_CUMULATIVE_ATTRS
#define PARSCAN_REDUCE_ATTRS PARSCAN_INT_ATTR("op") PARSCAN_INT_ATTR("dim")
#define PARSCAN_REDUCE_SIGNATURE PARSCAN_ARGS_1 PARSCAN_RETS_1 PARSCAN_REDUCE_ATTRS
#define PARSCAN_REDUCE_VARLEN_SIGNATURE PARSCAN_ARGS_2 PARSCAN_RETS_1 PARSCAN_REDUCE_ATTRS
#define PARSCAN_LOG_ATTRS PARSCAN_SCAN_ATTRS PARSCAN_INT_ATTR("forms") PARSCAN_INT_ATTR("signs")
#define PARSCAN_LOG_FORWARD_SIGNATURE \
  PARSCAN_ARGS_3 PARSCAN_ARGS_3 PARSCAN_RETS_3 PARSCAN_RETS_2 PARSCAN_LOG_ATTRS PARSCAN_INT_ATTR("outputs")
#define PARSCAN_LOG_BACKWARD_SIGNATURE PARSCAN_ARGS_3 PARSCAN_ARGS_3 PARSCAN_ARGS_3 PARSCAN_ARGS_1 PARSCAN_RETS_3 PARSCAN_LOG_ATTRS
#define PARSCAN_LOG_VARLEN_FORWARD_SIGNATURE \
  PARSCAN_ARGS_3 PARSCAN_ARGS_3 PARSCAN_ARGS_1 PARSCAN_RETS_3 PARSCAN_RETS_2 PARSCAN_LOG_ATTRS PARSCAN_INT_ATTR("outputs")
#define PARSCAN_LOG_VARLEN_BACKWARD_SIGNATURE \
  PARSCAN_ARGS_3 PARSCAN_ARGS_3 PARSCAN_ARGS_3 PARSCAN_ARGS_2 PARSCAN_RETS_3 PARSCAN_LOG_ATTRS
#define PARSCAN_MATRIX_FORWARD_SIGNATURE PARSCAN_ARGS_3 PARSCAN_RETS_2 PARSCAN_SCAN_ATTRS
#define PARSCAN_MATRIX_BACKWARD_SIGNATURE PARSCAN_ARGS_3 PARSCAN_ARGS_2 PARSCAN_RETS_3 PARSCAN_SCAN_ATTRS
#define PARSCAN_MATRIX_VARLEN_FORWARD_SIGNATURE PARSCAN_ARGS_3 PARSCAN_ARGS_1 PARSCAN_RETS_2 PARSCAN_SCAN_ATTRS
#define PARSCAN_MATRIX_VARLEN_BACKWARD_SIGNATURE PARSCAN_ARGS_3 PARSCAN_ARGS_3 PARSCAN_RETS_3 PARSCAN_SCAN_ATTRS
#define PARSCAN_MATRIX_CHAIN_SIGNATURE \
  PARSCAN_ARGS_1 PARSCAN_RETS_1 PARSCAN_INT_ATTR("dim") PARSCAN_INT_ATTR("prefixes") PARSCAN_INT_ATTR("order") PARSCAN_INT_ATTR("math")

// target_cpu and (in a CUDA build) target_cuda, from one implementation and one signature.
// cudaStream_t is CUstream_st*; naming it so keeps the CUDA headers out of this file.
#if PARSCAN_HAS_CUDA
#define PARSCAN_CUDA_HANDLER(target, impl, signature)                              \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(target##_cuda, py::impl<device_kind::cuda>,          \
                                ffi::Ffi::Bind().Ctx<ffi::PlatformStream<CUstream_st*>>() signature);
#else
#define PARSCAN_CUDA_HANDLER(target, impl, signature)
#endif
#define PARSCAN_HANDLERS(target, impl, signature)                                                                      \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(target##_cpu, py::on_cpu<&py::impl<device_kind::cpu>>::call, ffi::Ffi::Bind() signature); \
  PARSCAN_CUDA_HANDLER(target, impl, signature)

PARSCAN_HANDLERS(parscan_gated_forward, gated_forward_ffi, PARSCAN_GATED_FORWARD_SIGNATURE)
PARSCAN_HANDLERS(parscan_gated_backward, gated_backward_ffi, PARSCAN_GATED_BACKWARD_SIGNATURE)
PARSCAN_HANDLERS(parscan_gated_varlen_forward, gated_varlen_forward_ffi, PARSCAN_GATED_VARLEN_FORWARD_SIGNATURE)
PARSCAN_HANDLERS(parscan_gated_varlen_backward, gated_varlen_backward_ffi, PARSCAN_GATED_VARLEN_BACKWARD_SIGNATURE)
PARSCAN_HANDLERS(parscan_cumulative, cumulative_ffi, PARSCAN_CUMULATIVE_SIGNATURE)
PARSCAN_HANDLERS(parscan_reduce, reduce_ffi, PARSCAN_REDUCE_SIGNATURE)
PARSCAN_HANDLERS(parscan_cumulative_varlen, cumulative_varlen_ffi, PARSCAN_CUMULATIVE_VARLEN_SIGNATURE)
PARSCAN_HANDLERS(parscan_reduce_varlen, reduce_varlen_ffi, PARSCAN_REDUCE_VARLEN_SIGNATURE)
PARSCAN_HANDLERS(parscan_log_forward, log_forward_ffi, PARSCAN_LOG_FORWARD_SIGNATURE)
PARSCAN_HANDLERS(parscan_log_backward, log_backward_ffi, PARSCAN_LOG_BACKWARD_SIGNATURE)
PARSCAN_HANDLERS(parscan_log_varlen_forward, log_varlen_forward_ffi, PARSCAN_LOG_VARLEN_FORWARD_SIGNATURE)
PARSCAN_HANDLERS(parscan_log_varlen_backward, log_varlen_backward_ffi, PARSCAN_LOG_VARLEN_BACKWARD_SIGNATURE)
PARSCAN_HANDLERS(parscan_matrix_forward, matrix_forward_ffi, PARSCAN_MATRIX_FORWARD_SIGNATURE)
PARSCAN_HANDLERS(parscan_matrix_backward, matrix_backward_ffi, PARSCAN_MATRIX_BACKWARD_SIGNATURE)
PARSCAN_HANDLERS(parscan_matrix_varlen_forward, matrix_varlen_forward_ffi, PARSCAN_MATRIX_VARLEN_FORWARD_SIGNATURE)
PARSCAN_HANDLERS(parscan_matrix_varlen_backward, matrix_varlen_backward_ffi, PARSCAN_MATRIX_VARLEN_BACKWARD_SIGNATURE)
PARSCAN_HANDLERS(parscan_matrix_chain, matrix_chain_ffi, PARSCAN_MATRIX_CHAIN_SIGNATURE)

namespace parscan::python {

std::vector<jax_handler> jax_handlers() {
  std::vector<jax_handler> h;
#if PARSCAN_HAS_CUDA
#define PARSCAN_REGISTER(target)                                      \
  h.push_back({#target, "cpu", reinterpret_cast<void*>(&target##_cpu)}); \
  h.push_back({#target, "CUDA", reinterpret_cast<void*>(&target##_cuda)})
#else
#define PARSCAN_REGISTER(target) h.push_back({#target, "cpu", reinterpret_cast<void*>(&target##_cpu)})
#endif
  PARSCAN_REGISTER(parscan_gated_forward);
  PARSCAN_REGISTER(parscan_gated_backward);
  PARSCAN_REGISTER(parscan_gated_varlen_forward);
  PARSCAN_REGISTER(parscan_gated_varlen_backward);
  PARSCAN_REGISTER(parscan_cumulative);
  PARSCAN_REGISTER(parscan_reduce);
  PARSCAN_REGISTER(parscan_cumulative_varlen);
  PARSCAN_REGISTER(parscan_reduce_varlen);
  PARSCAN_REGISTER(parscan_log_forward);
  PARSCAN_REGISTER(parscan_log_backward);
  PARSCAN_REGISTER(parscan_log_varlen_forward);
  PARSCAN_REGISTER(parscan_log_varlen_backward);
  PARSCAN_REGISTER(parscan_matrix_forward);
  PARSCAN_REGISTER(parscan_matrix_backward);
  PARSCAN_REGISTER(parscan_matrix_varlen_forward);
  PARSCAN_REGISTER(parscan_matrix_varlen_backward);
  PARSCAN_REGISTER(parscan_matrix_chain);
#undef PARSCAN_REGISTER
  return h;
}

}  // namespace parscan::python

#else  // built without jaxlib's FFI headers

namespace parscan::python {
std::vector<jax_handler> jax_handlers() { return {}; }
}  // namespace parscan::python

#endif
