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
// returned, so one handler serves every call.
template <device_kind D>
ffi::Error gated_forward_ffi(CUstream_st* stream, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer x0,
                             ffi::Result<ffi::AnyBuffer> x, ffi::Result<ffi::AnyBuffer> x_final, std::int64_t dim,
                             std::int64_t reverse, std::int64_t gate) {
  return guarded([&] {
    const char* op = "gated_recurrence";
    const array_arg a_ = arg_of(op, "a", a, D), b_ = arg_of(op, "b", b, D), x0_ = arg_of(op, "x0", x0, D),
                    x_ = arg_of(op, "x", *x, D), xf_ = arg_of(op, "x_final", *x_final, D);
    gated_forward_call c;
    c.a = &a_;
    c.b = &b_;
    c.x = &x_;
    c.x0 = &x0_;
    c.x_final = &xf_;
    c.dim = dim;
    c.reverse = reverse != 0;
    c.gate = gate_of(op, gate);
    c.stream = reinterpret_cast<std::uintptr_t>(stream);
    gated_forward(c);
  });
}

template <device_kind D>
ffi::Error gated_backward_ffi(CUstream_st* stream, ffi::AnyBuffer a, ffi::AnyBuffer x, ffi::AnyBuffer x0,
                              ffi::AnyBuffer dx, ffi::AnyBuffer dx_final, ffi::Result<ffi::AnyBuffer> da,
                              ffi::Result<ffi::AnyBuffer> db, ffi::Result<ffi::AnyBuffer> dx0, std::int64_t dim,
                              std::int64_t reverse, std::int64_t gate) {
  return guarded([&] {
    const char* op = "gated_recurrence_backward";
    const array_arg a_ = arg_of(op, "a", a, D), x_ = arg_of(op, "x", x, D), x0_ = arg_of(op, "x0", x0, D),
                    dx_ = arg_of(op, "dx", dx, D), dxf_ = arg_of(op, "dx_final", dx_final, D),
                    da_ = arg_of(op, "da", *da, D), db_ = arg_of(op, "db", *db, D), dx0_ = arg_of(op, "dx0", *dx0, D);
    gated_backward_call c;
    c.a = &a_;
    c.x = &x_;
    c.x0 = &x0_;
    c.dx = &dx_;
    c.dx_final = &dxf_;
    c.da = &da_;
    c.db = &db_;
    c.dx0 = &dx0_;
    c.dim = dim;
    c.reverse = reverse != 0;
    c.gate = gate_of(op, gate);
    c.stream = reinterpret_cast<std::uintptr_t>(stream);
    gated_backward(c);
  });
}

template <device_kind D>
ffi::Error cumulative_ffi(CUstream_st* stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> out, std::int64_t op_code,
                          std::int64_t dim, std::int64_t reverse, std::int64_t exclusive) {
  return guarded([&] {
    const char* op = "cumulative";
    const array_arg x_ = arg_of(op, "x", x, D), out_ = arg_of(op, "out", *out, D);
    cumulative_call c;
    c.x = &x_;
    c.out = &out_;
    c.op = operator_of(op, op_code);
    c.dim = dim;
    c.reverse = reverse != 0;
    c.exclusive = exclusive != 0;
    c.stream = reinterpret_cast<std::uintptr_t>(stream);
    cumulative(c);
  });
}

template <device_kind D>
ffi::Error reduce_ffi(CUstream_st* stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> out, std::int64_t op_code,
                      std::int64_t dim) {
  return guarded([&] {
    const char* op = "reduce";
    const array_arg x_ = arg_of(op, "x", x, D), out_ = arg_of(op, "out", *out, D);
    reduce_call c;
    c.x = &x_;
    c.out = &out_;
    c.op = operator_of(op, op_code);
    c.dim = dim;
    c.stream = reinterpret_cast<std::uintptr_t>(stream);
    reduce(c);
  });
}

// The CPU handlers have no stream: they pass a null one to the shared implementations.
ffi::Error gated_forward_cpu_impl(ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer x0, ffi::Result<ffi::AnyBuffer> x,
                                  ffi::Result<ffi::AnyBuffer> x_final, std::int64_t dim, std::int64_t reverse,
                                  std::int64_t gate) {
  return gated_forward_ffi<device_kind::cpu>(nullptr, a, b, x0, x, x_final, dim, reverse, gate);
}
ffi::Error gated_backward_cpu_impl(ffi::AnyBuffer a, ffi::AnyBuffer x, ffi::AnyBuffer x0, ffi::AnyBuffer dx,
                                   ffi::AnyBuffer dx_final, ffi::Result<ffi::AnyBuffer> da,
                                   ffi::Result<ffi::AnyBuffer> db, ffi::Result<ffi::AnyBuffer> dx0, std::int64_t dim,
                                   std::int64_t reverse, std::int64_t gate) {
  return gated_backward_ffi<device_kind::cpu>(nullptr, a, x, x0, dx, dx_final, da, db, dx0, dim, reverse, gate);
}
ffi::Error cumulative_cpu_impl(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> out, std::int64_t op, std::int64_t dim,
                               std::int64_t reverse, std::int64_t exclusive) {
  return cumulative_ffi<device_kind::cpu>(nullptr, x, out, op, dim, reverse, exclusive);
}
ffi::Error reduce_cpu_impl(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> out, std::int64_t op, std::int64_t dim) {
  return reduce_ffi<device_kind::cpu>(nullptr, x, out, op, dim);
}

}  // namespace
}  // namespace parscan::python

using parscan::python::device_kind;
namespace py = parscan::python;

#define PARSCAN_GATED_ATTRS .Attr<std::int64_t>("dim").Attr<std::int64_t>("reverse").Attr<std::int64_t>("gate")
#define PARSCAN_GATED_FORWARD_BUFFERS \
  .Arg<ffi::AnyBuffer>().Arg<ffi::AnyBuffer>().Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>()
#define PARSCAN_GATED_BACKWARD_BUFFERS                                                                         \
  .Arg<ffi::AnyBuffer>().Arg<ffi::AnyBuffer>().Arg<ffi::AnyBuffer>().Arg<ffi::AnyBuffer>().Arg<ffi::AnyBuffer>() \
      .Ret<ffi::AnyBuffer>()                                                                                   \
      .Ret<ffi::AnyBuffer>()                                                                                   \
      .Ret<ffi::AnyBuffer>()
#define PARSCAN_CUMULATIVE_SIGNATURE                                                                           \
  .Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>().Attr<std::int64_t>("op").Attr<std::int64_t>("dim").Attr<std::int64_t>( \
      "reverse").Attr<std::int64_t>("exclusive")
#define PARSCAN_REDUCE_SIGNATURE .Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>().Attr<std::int64_t>("op").Attr<std::int64_t>("dim")

XLA_FFI_DEFINE_HANDLER_SYMBOL(parscan_gated_forward_cpu, py::gated_forward_cpu_impl,
                              ffi::Ffi::Bind() PARSCAN_GATED_FORWARD_BUFFERS PARSCAN_GATED_ATTRS);
XLA_FFI_DEFINE_HANDLER_SYMBOL(parscan_gated_backward_cpu, py::gated_backward_cpu_impl,
                              ffi::Ffi::Bind() PARSCAN_GATED_BACKWARD_BUFFERS PARSCAN_GATED_ATTRS);
XLA_FFI_DEFINE_HANDLER_SYMBOL(parscan_cumulative_cpu, py::cumulative_cpu_impl,
                              ffi::Ffi::Bind() PARSCAN_CUMULATIVE_SIGNATURE);
XLA_FFI_DEFINE_HANDLER_SYMBOL(parscan_reduce_cpu, py::reduce_cpu_impl, ffi::Ffi::Bind() PARSCAN_REDUCE_SIGNATURE);

#if PARSCAN_HAS_CUDA
// cudaStream_t is CUstream_st*; naming it so keeps the CUDA headers out of this file.
XLA_FFI_DEFINE_HANDLER_SYMBOL(parscan_gated_forward_cuda, py::gated_forward_ffi<device_kind::cuda>,
                              ffi::Ffi::Bind().Ctx<ffi::PlatformStream<CUstream_st*>>()
                                  PARSCAN_GATED_FORWARD_BUFFERS PARSCAN_GATED_ATTRS);
XLA_FFI_DEFINE_HANDLER_SYMBOL(parscan_gated_backward_cuda, py::gated_backward_ffi<device_kind::cuda>,
                              ffi::Ffi::Bind().Ctx<ffi::PlatformStream<CUstream_st*>>()
                                  PARSCAN_GATED_BACKWARD_BUFFERS PARSCAN_GATED_ATTRS);
XLA_FFI_DEFINE_HANDLER_SYMBOL(parscan_cumulative_cuda, py::cumulative_ffi<device_kind::cuda>,
                              ffi::Ffi::Bind().Ctx<ffi::PlatformStream<CUstream_st*>>() PARSCAN_CUMULATIVE_SIGNATURE);
XLA_FFI_DEFINE_HANDLER_SYMBOL(parscan_reduce_cuda, py::reduce_ffi<device_kind::cuda>,
                              ffi::Ffi::Bind().Ctx<ffi::PlatformStream<CUstream_st*>>() PARSCAN_REDUCE_SIGNATURE);
#endif

namespace parscan::python {

std::vector<jax_handler> jax_handlers() {
  std::vector<jax_handler> h = {
      {"parscan_gated_forward", "cpu", reinterpret_cast<void*>(&parscan_gated_forward_cpu)},
      {"parscan_gated_backward", "cpu", reinterpret_cast<void*>(&parscan_gated_backward_cpu)},
      {"parscan_cumulative", "cpu", reinterpret_cast<void*>(&parscan_cumulative_cpu)},
      {"parscan_reduce", "cpu", reinterpret_cast<void*>(&parscan_reduce_cpu)},
  };
#if PARSCAN_HAS_CUDA
  h.push_back({"parscan_gated_forward", "CUDA", reinterpret_cast<void*>(&parscan_gated_forward_cuda)});
  h.push_back({"parscan_gated_backward", "CUDA", reinterpret_cast<void*>(&parscan_gated_backward_cuda)});
  h.push_back({"parscan_cumulative", "CUDA", reinterpret_cast<void*>(&parscan_cumulative_cuda)});
  h.push_back({"parscan_reduce", "CUDA", reinterpret_cast<void*>(&parscan_reduce_cuda)});
#endif
  return h;
}

}  // namespace parscan::python

#else  // built without jaxlib's FFI headers

namespace parscan::python {
std::vector<jax_handler> jax_handlers() { return {}; }
}  // namespace parscan::python

#endif
