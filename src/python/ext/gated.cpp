// src/python/ext/gated.cpp — the gated recurrence for the bindings: checks, the mapping of the
// arrays onto recurrence_layout::strided, and the call on the arrays' backend.
#include <parscan/numeric.hpp>
#include <parscan/recurrence.hpp>

#include "backends.hpp"
#include "dispatch.hpp"
#include "ops.hpp"

namespace parscan::python {

namespace {

constexpr const char* forward_name = "gated_recurrence";
constexpr const char* backward_name = "gated_recurrence_backward";

const std::initializer_list<element_type> gated_types = {element_type::float32, element_type::float64,
                                                         element_type::bfloat16, element_type::float16,
                                                         element_type::complex64};

template <class T>
const T* input(const array_arg* a) { return a ? static_cast<const T*>(a->data) : nullptr; }
template <class T>
T* output(const array_arg* a) { return a ? static_cast<T*>(a->data) : nullptr; }

}  // namespace

void gated_forward(const gated_forward_call& c) {
  const char* op = forward_name;
  require_type(op, *c.a, gated_types);
  const int dim = normalize_dim(op, *c.a, c.dim);
  const time_axis_plan plan = plan_time_axis(op, {c.a, c.b, c.x}, dim);
  if (c.x0) require_state(op, *c.x0, *c.a, dim);
  if (c.x_final) require_state(op, *c.x_final, *c.a, dim);

  const status s = visit_float_type(c.a->type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gated_forward_args<T> g;
    g.shape = {plan.batch, plan.channels, plan.length, recurrence_layout::strided};
    g.a = input<T>(c.a);
    g.b = input<T>(c.b);
    g.x = output<T>(c.x);
    g.x0 = input<T>(c.x0);
    g.x_final = output<T>(c.x_final);
    g.reverse = c.reverse;
    g.gate = c.gate;
    g.a_strides = plan.strides[0];
    g.b_strides = plan.strides[1];
    g.x_strides = plan.strides[2];
    return run_on(*c.a, c.stream, [&](const auto& backend) { return gated_recurrence_forward(backend, g); });
  });
  check_status(s, op, "a, b, x0 -> x, x_final");
}

void gated_backward(const gated_backward_call& c) {
  const char* op = backward_name;
  require_type(op, *c.a, gated_types);
  const int dim = normalize_dim(op, *c.a, c.dim);
  const array_arg* x_or_b = c.x ? c.x : c.b;  // the backward reads x, or recomputes it from b
  if (!x_or_b) fail(argument_error::value_error, op, "needs the forward's output x, or b to recompute it");
  const time_axis_plan plan = plan_time_axis(op, {c.a, x_or_b, c.dx, c.da, c.db}, dim);
  if (c.x0) {
    require_state(op, *c.x0, *c.a, dim);
    if (!c.dx0) fail(argument_error::value_error, op, "dx0 is required when x0 is given");
    require_state(op, *c.dx0, *c.a, dim);
  }
  if (c.dx_final) require_state(op, *c.dx_final, *c.a, dim);

  const status s = visit_float_type(c.a->type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gated_backward_args<T> g;
    g.shape = {plan.batch, plan.channels, plan.length, recurrence_layout::strided};
    g.a = input<T>(c.a);
    g.x = input<T>(c.x);
    g.b = c.x ? nullptr : input<T>(c.b);
    g.x0 = input<T>(c.x0);
    g.dx = input<T>(c.dx);
    g.dx_final = input<T>(c.dx_final);
    g.da = output<T>(c.da);
    g.db = output<T>(c.db);
    g.dx0 = c.x0 ? output<T>(c.dx0) : nullptr;
    g.reverse = c.reverse;
    g.gate = c.gate;
    g.a_strides = plan.strides[0];
    (c.x ? g.x_strides : g.b_strides) = plan.strides[1];
    g.dx_strides = plan.strides[2];
    g.da_strides = plan.strides[3];
    g.db_strides = plan.strides[4];
    return run_on(*c.a, c.stream, [&](const auto& backend) { return gated_recurrence_backward(backend, g); });
  });
  check_status(s, op, "a, x, x0, dx, dx_final -> da, db, dx0");
}

}  // namespace parscan::python
