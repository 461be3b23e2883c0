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
    case code::UInt:
      return d.bits == 16 ? element_type::bfloat16 : d.bits == 8 ? element_type::uint8 : element_type::other;
    case code::Bool: return d.bits == 8 ? element_type::boolean : element_type::other;
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
                      std::uintptr_t stream, const optional_input& cu_seqlens) {
  const char* op = "gated_recurrence";
  const array_arg a_ = arg_of(op, "a", a), b_ = arg_of(op, "b", b), x_ = arg_of(op, "x", x);
  const auto x0_ = optional_arg_of(op, "x0", x0);
  const auto xf_ = optional_arg_of(op, "x_final", x_final);
  const auto cu_ = optional_arg_of(op, "cu_seqlens", cu_seqlens);
  gated_forward_call c;
  c.a = &a_;
  c.b = &b_;
  c.x = &x_;
  c.x0 = pointer(x0_);
  c.x_final = pointer(xf_);
  c.cu_seqlens = pointer(cu_);
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
                       bool reverse, const std::string& gate, std::uintptr_t stream, const optional_input& cu_seqlens) {
  const char* op = "gated_recurrence_backward";
  const array_arg a_ = arg_of(op, "a", a), dx_ = arg_of(op, "dx", dx), da_ = arg_of(op, "da", da),
                  db_ = arg_of(op, "db", db);
  const auto x_ = optional_arg_of(op, "x", x), b_ = optional_arg_of(op, "b", b), x0_ = optional_arg_of(op, "x0", x0),
             dxf_ = optional_arg_of(op, "dx_final", dx_final), dx0_ = optional_arg_of(op, "dx0", dx0),
             cu_ = optional_arg_of(op, "cu_seqlens", cu_seqlens);
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
  c.cu_seqlens = pointer(cu_);
  c.dim = dim;
  c.reverse = reverse;
  c.gate = gate_of(op, gate);
  c.stream = stream;
  nb::gil_scoped_release unlocked;
  gated_backward(c);
}

void cumulative_py(const input_array& x, const output_array& out, const std::string& op_name, std::int64_t dim,
                   bool reverse, bool exclusive, std::uintptr_t stream, const optional_input& cu_seqlens) {
  const char* op = "cumulative";
  const array_arg x_ = arg_of(op, "x", x), out_ = arg_of(op, "out", out);
  const auto cu_ = optional_arg_of(op, "cu_seqlens", cu_seqlens);
  cumulative_call c;
  c.x = &x_;
  c.out = &out_;
  c.cu_seqlens = pointer(cu_);
  c.op = operator_of(op, op_name);
  c.dim = dim;
  c.reverse = reverse;
  c.exclusive = exclusive;
  c.stream = stream;
  nb::gil_scoped_release unlocked;
  cumulative(c);
}

void reduce_py(const input_array& x, const output_array& out, const std::string& op_name, std::int64_t dim,
               std::uintptr_t stream, const optional_input& cu_seqlens) {
  const char* op = "reduce";
  const array_arg x_ = arg_of(op, "x", x), out_ = arg_of(op, "out", out);
  const auto cu_ = optional_arg_of(op, "cu_seqlens", cu_seqlens);
  reduce_call c;
  c.x = &x_;
  c.out = &out_;
  c.cu_seqlens = pointer(cu_);
  c.op = operator_of(op, op_name);
  c.dim = dim;
  c.stream = stream;
  nb::gil_scoped_release unlocked;
  reduce(c);
}

bool value_form(const char* op, const char* what, const std::string& form) {
  if (form == "log") return false;
  if (form == "value") return true;
  fail(argument_error::value_error, op, std::string(what) + " must be \"log\" or \"value\", not \"" + form + "\"");
}

void log_forward_py(const input_array& a, const input_array& b, const optional_output& log_x,
                    const optional_output& x_negative, const optional_output& x, const optional_input& x0,
                    const optional_input& a_negative, const optional_input& b_negative,
                    const optional_input& x0_negative, const optional_output& log_x_final,
                    const optional_output& x_final_negative, const std::string& a_form, const std::string& b_form,
                    const std::string& x0_form, std::int64_t dim, bool reverse, std::uintptr_t stream,
                    const optional_input& cu_seqlens) {
  const char* op = "log_recurrence";
  const array_arg a_ = arg_of(op, "a", a), b_ = arg_of(op, "b", b);
  const auto lx_ = optional_arg_of(op, "log_x", log_x), xn_ = optional_arg_of(op, "x_negative", x_negative),
             x_ = optional_arg_of(op, "x", x), x0_ = optional_arg_of(op, "x0", x0),
             an_ = optional_arg_of(op, "a_negative", a_negative), bn_ = optional_arg_of(op, "b_negative", b_negative),
             x0n_ = optional_arg_of(op, "x0_negative", x0_negative),
             lxf_ = optional_arg_of(op, "log_x_final", log_x_final),
             xfn_ = optional_arg_of(op, "x_final_negative", x_final_negative),
             cu_ = optional_arg_of(op, "cu_seqlens", cu_seqlens);
  log_forward_call c;
  c.a = {&a_, pointer(an_), value_form(op, "a_form", a_form)};
  c.b = {&b_, pointer(bn_), value_form(op, "b_form", b_form)};
  c.x0 = {pointer(x0_), pointer(x0n_), value_form(op, "x0_form", x0_form)};
  c.log_x = pointer(lx_);
  c.x_negative = pointer(xn_);
  c.x = pointer(x_);
  c.log_x_final = pointer(lxf_);
  c.x_final_negative = pointer(xfn_);
  c.cu_seqlens = pointer(cu_);
  c.dim = dim;
  c.reverse = reverse;
  c.stream = stream;
  nb::gil_scoped_release unlocked;
  log_forward(c);
}

void log_backward_py(const input_array& a, const input_array& b, const input_array& dx, const output_array& da,
                     const output_array& db, const optional_input& x0, const optional_input& a_negative,
                     const optional_input& b_negative, const optional_input& x0_negative, const optional_input& log_x,
                     const optional_input& x_negative, const optional_input& dlog_x_final, const optional_output& dx0,
                     const std::string& a_form, const std::string& b_form, const std::string& x0_form,
                     const std::string& dx_form, std::int64_t dim, bool reverse, std::uintptr_t stream,
                     const optional_input& cu_seqlens) {
  const char* op = "log_recurrence_backward";
  const array_arg a_ = arg_of(op, "a", a), b_ = arg_of(op, "b", b), dx_ = arg_of(op, "dx", dx),
                  da_ = arg_of(op, "da", da), db_ = arg_of(op, "db", db);
  const auto x0_ = optional_arg_of(op, "x0", x0), an_ = optional_arg_of(op, "a_negative", a_negative),
             bn_ = optional_arg_of(op, "b_negative", b_negative),
             x0n_ = optional_arg_of(op, "x0_negative", x0_negative), lx_ = optional_arg_of(op, "log_x", log_x),
             xn_ = optional_arg_of(op, "x_negative", x_negative),
             dlxf_ = optional_arg_of(op, "dlog_x_final", dlog_x_final), dx0_ = optional_arg_of(op, "dx0", dx0),
             cu_ = optional_arg_of(op, "cu_seqlens", cu_seqlens);
  log_backward_call c;
  c.a = {&a_, pointer(an_), value_form(op, "a_form", a_form)};
  c.b = {&b_, pointer(bn_), value_form(op, "b_form", b_form)};
  c.x0 = {pointer(x0_), pointer(x0n_), value_form(op, "x0_form", x0_form)};
  c.log_x = pointer(lx_);
  c.x_negative = pointer(xn_);
  c.dx = &dx_;
  c.dx_value = value_form(op, "dx_form", dx_form);
  c.dlog_x_final = pointer(dlxf_);
  c.da = &da_;
  c.db = &db_;
  c.dx0 = pointer(dx0_);
  c.cu_seqlens = pointer(cu_);
  c.dim = dim;
  c.reverse = reverse;
  c.stream = stream;
  nb::gil_scoped_release unlocked;
  log_backward(c);
}

void matrix_forward_py(const input_array& W, const input_array& b, const output_array& x, const optional_input& x0,
                       const optional_output& x_final, std::int64_t dim, bool reverse, std::uintptr_t stream,
                       const optional_input& cu_seqlens) {
  const char* op = "matrix_recurrence";
  const array_arg W_ = arg_of(op, "W", W), b_ = arg_of(op, "b", b), x_ = arg_of(op, "x", x);
  const auto x0_ = optional_arg_of(op, "x0", x0), xf_ = optional_arg_of(op, "x_final", x_final),
             cu_ = optional_arg_of(op, "cu_seqlens", cu_seqlens);
  matrix_forward_call c;
  c.W = &W_;
  c.b = &b_;
  c.x = &x_;
  c.x0 = pointer(x0_);
  c.x_final = pointer(xf_);
  c.cu_seqlens = pointer(cu_);
  c.dim = dim;
  c.reverse = reverse;
  c.stream = stream;
  nb::gil_scoped_release unlocked;
  matrix_forward(c);
}

void matrix_backward_py(const input_array& W, const optional_input& x, const optional_input& b,
                        const optional_input& x0, const input_array& dx, const optional_input& dx_final,
                        const output_array& dW, const output_array& db, const optional_output& dx0, std::int64_t dim,
                        bool reverse, std::uintptr_t stream, const optional_input& cu_seqlens) {
  const char* op = "matrix_recurrence_backward";
  const array_arg W_ = arg_of(op, "W", W), dx_ = arg_of(op, "dx", dx), dW_ = arg_of(op, "dW", dW),
                  db_ = arg_of(op, "db", db);
  const auto x_ = optional_arg_of(op, "x", x), b_ = optional_arg_of(op, "b", b), x0_ = optional_arg_of(op, "x0", x0),
             dxf_ = optional_arg_of(op, "dx_final", dx_final), dx0_ = optional_arg_of(op, "dx0", dx0),
             cu_ = optional_arg_of(op, "cu_seqlens", cu_seqlens);
  matrix_backward_call c;
  c.W = &W_;
  c.x = pointer(x_);
  c.b = pointer(b_);
  c.x0 = pointer(x0_);
  c.dx = &dx_;
  c.dx_final = pointer(dxf_);
  c.dW = &dW_;
  c.db = &db_;
  c.dx0 = pointer(dx0_);
  c.cu_seqlens = pointer(cu_);
  c.dim = dim;
  c.reverse = reverse;
  c.stream = stream;
  nb::gil_scoped_release unlocked;
  matrix_backward(c);
}

void matrix_chain_py(const input_array& M, const output_array& out, std::int64_t dim, bool prefixes,
                     const std::string& order, const std::string& math, std::uintptr_t stream) {
  const char* op = "matrix_chain";
  const array_arg M_ = arg_of(op, "M", M), out_ = arg_of(op, "out", out);
  matrix_chain_call c;
  c.M = &M_;
  c.out = &out_;
  c.dim = dim;
  c.prefixes = prefixes;
  if (order == "left_to_right") c.order = 0;
  else if (order == "right_to_left") c.order = 1;
  else fail(argument_error::value_error, op, "order must be \"left_to_right\" or \"right_to_left\", not \"" + order + "\"");
  if (math == "exact") c.math = 0;
  else if (math == "tf32") c.math = 1;
  else if (math == "bf16") c.math = 2;
  else fail(argument_error::value_error, op, "math must be \"exact\", \"tf32\" or \"bf16\", not \"" + math + "\"");
  c.stream = stream;
  nb::gil_scoped_release unlocked;
  matrix_chain(c);
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
        "cu_seqlens"_a.none() = nb::none(),
        "x[t] = a[t]*x[t-1] + b[t] along dim (per packed sequence with cu_seqlens), written to x (and the last "
        "states to x_final).");
  m.def("gated_backward", &gated_backward_py, "a"_a, "x"_a.none(), "b"_a.none(), "x0"_a.none(), "dx"_a,
        "dx_final"_a.none(), "da"_a, "db"_a, "dx0"_a.none(), "dim"_a = -1, "reverse"_a = false, "gate"_a = "linear",
        "stream"_a = 0, "cu_seqlens"_a.none() = nb::none(),
        "The gradients of gated_forward: da, db and (with x0) dx0.");
  m.def("cumulative", &cumulative_py, "x"_a, "out"_a, "op"_a = "sum", "dim"_a = -1, "reverse"_a = false,
        "exclusive"_a = false, "stream"_a = 0, "cu_seqlens"_a.none() = nb::none(),
        "Inclusive or exclusive scan of x along dim (per packed segment with cu_seqlens) into out.");
  m.def("reduce", &reduce_py, "x"_a, "out"_a, "op"_a = "sum", "dim"_a = -1, "stream"_a = 0,
        "cu_seqlens"_a.none() = nb::none(),
        "Reduction of x along dim (per packed segment with cu_seqlens) into out (the accumulator dtype: float32 "
        "for 16-bit floats).");
  m.def("log_forward", &log_forward_py, "a"_a, "b"_a, "log_x"_a.none(), "x_negative"_a.none(), "x"_a.none(),
        "x0"_a.none() = nb::none(), "a_negative"_a.none() = nb::none(), "b_negative"_a.none() = nb::none(),
        "x0_negative"_a.none() = nb::none(), "log_x_final"_a.none() = nb::none(),
        "x_final_negative"_a.none() = nb::none(), "a_form"_a = "log", "b_form"_a = "log", "x0_form"_a = "log",
        "dim"_a = -1, "reverse"_a = false, "stream"_a = 0, "cu_seqlens"_a.none() = nb::none(),
        "x[t] = a[t]*x[t-1] + b[t] in log space along dim (per packed sequence with cu_seqlens): log|x| and its "
        "sign, and/or x itself.");
  m.def("log_backward", &log_backward_py, "a"_a, "b"_a, "dx"_a, "da"_a, "db"_a, "x0"_a.none() = nb::none(),
        "a_negative"_a.none() = nb::none(), "b_negative"_a.none() = nb::none(), "x0_negative"_a.none() = nb::none(),
        "log_x"_a.none() = nb::none(), "x_negative"_a.none() = nb::none(), "dlog_x_final"_a.none() = nb::none(),
        "dx0"_a.none() = nb::none(), "a_form"_a = "log", "b_form"_a = "log", "x0_form"_a = "log", "dx_form"_a = "log",
        "dim"_a = -1, "reverse"_a = false, "stream"_a = 0, "cu_seqlens"_a.none() = nb::none(),
        "The gradients of log_forward with respect to each input in its own form.");
  m.def("matrix_forward", &matrix_forward_py, "W"_a, "b"_a, "x"_a, "x0"_a.none() = nb::none(),
        "x_final"_a.none() = nb::none(), "dim"_a = -2, "reverse"_a = false, "stream"_a = 0,
        "cu_seqlens"_a.none() = nb::none(),
        "x[t] = W[t] @ x[t-1] + b[t] along dim of b (W: b's shape + (N,); per packed sequence with cu_seqlens).");
  m.def("matrix_backward", &matrix_backward_py, "W"_a, "x"_a.none(), "b"_a.none(), "x0"_a.none(), "dx"_a,
        "dx_final"_a.none(), "dW"_a, "db"_a, "dx0"_a.none(), "dim"_a = -2, "reverse"_a = false, "stream"_a = 0,
        "cu_seqlens"_a.none() = nb::none(), "The gradients of matrix_forward: dW, db and (with x0) dx0.");
  m.def("matrix_chain", &matrix_chain_py, "M"_a, "out"_a, "dim"_a = -3, "prefixes"_a = false,
        "order"_a = "left_to_right", "math"_a = "exact", "stream"_a = 0,
        "Products of the square matrices of M along dim: the total, or every prefix.");
  m.def("cuda_available", &parscan::cuda_available, "True when parscan was built with CUDA and a GPU is visible.");
  m.attr("built_with_cuda") = bool(PARSCAN_HAS_CUDA);
  m.def("jax_targets", &jax_targets, "XLA FFI handlers: {target name: {platform: capsule}} (empty without JAX support).");
}
