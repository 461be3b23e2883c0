// src/python/ext/module.cpp — parscan._core, the nanobind extension module. Arrays arrive as
// DLPack tensors (nb::ndarray: NumPy, PyTorch, JAX, CuPy, ... without a copy); the functions
// take their outputs from the caller, so each framework allocates its own memory, and they run
// on the arrays' device: the host backend for CPU arrays, the CUDA backend on `stream` for CUDA
// arrays. The Python package (parscan/*.py) builds the user-facing API on these. uint16 arrays
// are read as bfloat16 bit patterns (how NumPy passes bfloat16).
#include <cstdint>
#include <optional>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <parscan/recurrence.hpp>

#include "array_args.hpp"
#include "jax_ffi.hpp"
#include "ops.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace parscan::python {
namespace {

using input_array = nb::ndarray<nb::ro>;  // read-only views (broadcast NumPy arrays) are fine
using output_array = nb::ndarray<>;
using optional_input = std::optional<input_array>;
using optional_output = std::optional<output_array>;

element_type type_of(nb::dlpack::dtype d) {
  using code = nb::dlpack::dtype_code;
  if (d.lanes != 1) return element_type::other;
  switch (static_cast<code>(d.code)) {
    case code::Float:
      return d.bits == 32 ? element_type::float32
           : d.bits == 64 ? element_type::float64
           : d.bits == 16 ? element_type::float16
                          : element_type::other;
    case code::Bfloat: return d.bits == 16 ? element_type::bfloat16 : element_type::other;
    case code::Complex: return d.bits == 64 ? element_type::complex64 : element_type::other;
    case code::Int: return d.bits == 32 ? element_type::int32 : d.bits == 64 ? element_type::int64 : element_type::other;
    // NumPy has no bfloat16 of its own, and nanobind cannot import ml_dtypes' through DLPack:
    // the NumPy front end passes bfloat16 arrays as uint16 views of their bits.
    case code::UInt: return d.bits == 16 ? element_type::bfloat16 : element_type::other;
    default: return element_type::other;
  }
}

template <class... Ts>
array_arg arg_of(const char* op, const char* name, const nb::ndarray<Ts...>& t) {
  array_arg a;
  a.name = name;
  a.data = const_cast<void*>(static_cast<const void*>(t.data()));
  a.type = type_of(t.dtype());
  const int device = t.device_type();
  if (device == nb::device::cpu::value || device == nb::device::cuda_host::value) {
    a.device = device_kind::cpu;
  } else if (device == nb::device::cuda::value || device == nb::device::cuda_managed::value) {
    a.device = device_kind::cuda;
    a.device_id = t.device_id();
  } else {
    fail(argument_error::value_error, op,
         std::string(name) + " is on a device parscan does not run on (DLPack device type " + std::to_string(device) +
             "); pass CPU or CUDA arrays");
  }
  if (t.ndim() > static_cast<std::size_t>(max_rank))
    fail(argument_error::value_error, op, std::string(name) + " has more than " + std::to_string(max_rank) + " dimensions");
  a.rank = static_cast<int>(t.ndim());
  for (int i = 0; i < a.rank; ++i) {
    a.shape[i] = static_cast<std::int64_t>(t.shape(i));
    a.strides[i] = t.stride(i);
  }
  return a;
}

template <class T>
std::optional<array_arg> optional_arg_of(const char* op, const char* name, const std::optional<T>& t) {
  if (!t) return std::nullopt;
  return arg_of(op, name, *t);
}

template <class T>
const array_arg* pointer(const std::optional<T>& a) { return a ? &*a : nullptr; }

gate_form gate_of(const char* op, const std::string& gate) {
  if (gate == "linear") return gate_form::linear;
  if (gate == "log") return gate_form::log;
  fail(argument_error::value_error, op, "gate must be \"linear\" or \"log\", not \"" + gate + "\"");
}

scan_operator operator_of(const char* op, const std::string& name) {
  if (name == "sum") return scan_operator::sum;
  if (name == "max") return scan_operator::max;
  if (name == "min") return scan_operator::min;
  fail(argument_error::value_error, op, "op must be \"sum\", \"max\" or \"min\", not \"" + name + "\"");
}

void gated_forward_py(const input_array& a, const input_array& b, const output_array& x, const optional_input& x0,
                      const optional_output& x_final, std::int64_t dim, bool reverse, const std::string& gate,
                      std::uintptr_t stream) {
  const char* op = "gated_recurrence";
  const array_arg a_ = arg_of(op, "a", a), b_ = arg_of(op, "b", b), x_ = arg_of(op, "x", x);
  const auto x0_ = optional_arg_of(op, "x0", x0);
  const auto xf_ = optional_arg_of(op, "x_final", x_final);
  gated_forward_call c;
  c.a = &a_;
  c.b = &b_;
  c.x = &x_;
  c.x0 = pointer(x0_);
  c.x_final = pointer(xf_);
  c.dim = dim;
  c.reverse = reverse;
  c.gate = gate_of(op, gate);
  c.stream = stream;
  nb::gil_scoped_release unlocked;
  gated_forward(c);
}

void gated_backward_py(const input_array& a, const optional_input& x, const optional_input& b,
                       const optional_input& x0, const input_array& dx, const optional_input& dx_final,
                       const output_array& da, const output_array& db, const optional_output& dx0, std::int64_t dim,
                       bool reverse, const std::string& gate, std::uintptr_t stream) {
  const char* op = "gated_recurrence_backward";
  const array_arg a_ = arg_of(op, "a", a), dx_ = arg_of(op, "dx", dx), da_ = arg_of(op, "da", da),
                  db_ = arg_of(op, "db", db);
  const auto x_ = optional_arg_of(op, "x", x), b_ = optional_arg_of(op, "b", b), x0_ = optional_arg_of(op, "x0", x0),
             dxf_ = optional_arg_of(op, "dx_final", dx_final), dx0_ = optional_arg_of(op, "dx0", dx0);
  gated_backward_call c;
  c.a = &a_;
  c.x = pointer(x_);
  c.b = pointer(b_);
  c.x0 = pointer(x0_);
  c.dx = &dx_;
  c.dx_final = pointer(dxf_);
  c.da = &da_;
  c.db = &db_;
  c.dx0 = pointer(dx0_);
  c.dim = dim;
  c.reverse = reverse;
  c.gate = gate_of(op, gate);
  c.stream = stream;
  nb::gil_scoped_release unlocked;
  gated_backward(c);
}

void cumulative_py(const input_array& x, const output_array& out, const std::string& op_name, std::int64_t dim,
                   bool reverse, bool exclusive, std::uintptr_t stream) {
  const char* op = "cumulative";
  const array_arg x_ = arg_of(op, "x", x), out_ = arg_of(op, "out", out);
  cumulative_call c;
  c.x = &x_;
  c.out = &out_;
  c.op = operator_of(op, op_name);
  c.dim = dim;
  c.reverse = reverse;
  c.exclusive = exclusive;
  c.stream = stream;
  nb::gil_scoped_release unlocked;
  cumulative(c);
}

void reduce_py(const input_array& x, const output_array& out, const std::string& op_name, std::int64_t dim,
               std::uintptr_t stream) {
  const char* op = "reduce";
  const array_arg x_ = arg_of(op, "x", x), out_ = arg_of(op, "out", out);
  reduce_call c;
  c.x = &x_;
  c.out = &out_;
  c.op = operator_of(op, op_name);
  c.dim = dim;
  c.stream = stream;
  nb::gil_scoped_release unlocked;
  reduce(c);
}

nb::dict jax_targets() {
  nb::dict targets;
  for (const jax_handler& h : jax_handlers()) {
    nb::dict per_platform = targets.contains(h.name) ? nb::dict(targets[h.name]) : nb::dict();
    per_platform[h.platform] = nb::capsule(h.function);
    targets[h.name] = per_platform;
  }
  return targets;
}

}  // namespace
}  // namespace parscan::python

NB_MODULE(_core, m) {
  using namespace parscan::python;
  m.doc() = "parscan's extension module: the low-level calls the parscan package builds on (outputs given by the caller)";

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const argument_error& e) {
      PyObject* kind = e.kind == argument_error::type_error    ? PyExc_TypeError
                       : e.kind == argument_error::value_error ? PyExc_ValueError
                                                               : PyExc_RuntimeError;
      PyErr_SetString(kind, e.what());
    }
  });

  m.def("gated_forward", &gated_forward_py, "a"_a, "b"_a, "x"_a, "x0"_a.none() = nb::none(),
        "x_final"_a.none() = nb::none(), "dim"_a = -1, "reverse"_a = false, "gate"_a = "linear", "stream"_a = 0,
        "x[t] = a[t]*x[t-1] + b[t] along dim, written to x (and the last state to x_final).");
  m.def("gated_backward", &gated_backward_py, "a"_a, "x"_a.none(), "b"_a.none(), "x0"_a.none(), "dx"_a,
        "dx_final"_a.none(), "da"_a, "db"_a, "dx0"_a.none(), "dim"_a = -1, "reverse"_a = false, "gate"_a = "linear",
        "stream"_a = 0, "The gradients of gated_forward: da, db and (with x0) dx0.");
  m.def("cumulative", &cumulative_py, "x"_a, "out"_a, "op"_a = "sum", "dim"_a = -1, "reverse"_a = false,
        "exclusive"_a = false, "stream"_a = 0, "Inclusive or exclusive scan of x along dim into out.");
  m.def("reduce", &reduce_py, "x"_a, "out"_a, "op"_a = "sum", "dim"_a = -1, "stream"_a = 0,
        "Reduction of x along dim into out (the accumulator dtype: float32 for 16-bit floats).");
  m.def("cuda_available", &parscan::cuda_available, "True when parscan was built with CUDA and a GPU is visible.");
  m.attr("built_with_cuda") = bool(PARSCAN_HAS_CUDA);
  m.def("jax_targets", &jax_targets, "XLA FFI handlers: {target name: {platform: capsule}} (empty without JAX support).");
}
