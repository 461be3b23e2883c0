// src/python/ext/log.cpp — the log-space recurrence for the bindings: checks (forms, sign
// arrays, shapes), the mapping of the arrays onto recurrence_layout::strided, and the call on
// the arrays' backend.
#include <parscan/log_recurrence.hpp>
#include <parscan/numeric.hpp>

#include "backends.hpp"
#include "dispatch.hpp"
#include "ops.hpp"

namespace parscan::python {

namespace {

constexpr const char* forward_name = "log_recurrence";
constexpr const char* backward_name = "log_recurrence_backward";

const std::initializer_list<element_type> log_types = {element_type::float32, element_type::bfloat16};

template <class T>
const T* input(const array_arg* a) { return a ? static_cast<const T*>(a->data) : nullptr; }
template <class T>
T* output(const array_arg* a) { return a ? static_cast<T*>(a->data) : nullptr; }
const std::uint8_t* input_sign(const array_arg* a) { return a ? static_cast<const std::uint8_t*>(a->data) : nullptr; }
std::uint8_t* output_sign(const array_arg* a) { return a ? static_cast<std::uint8_t*>(a->data) : nullptr; }

// A value v carries its own sign: a sign array beside it would say it twice, and parscan
// refuses the pair, so it is refused here first, by name.
void require_form(const char* op, const log_input& in) {
  if (in.value && in.negative)
    fail(argument_error::value_error, op,
         std::string(in.negative->name) + " is given, but " + in.magnitude->name +
             " is in value form: a sign array goes with a log magnitude only");
}

// The state inputs (x0) and outputs (x_final) are dense, of the shape without dim (after N when
// packed).
void require_state_input(const char* op, const log_input& in, const scan_axis& axis) {
  if (!in.magnitude) return;
  require_form(op, in);
  axis.require_state_of(*in.magnitude);
  if (in.negative) require_sign(op, *in.negative, *in.magnitude);
}

/// a, b and x0 of a forward or backward call into its arguments g, each in its form (the value
/// itself, or log|·| and its signs).
template <class T, class Call, class Args>
void set_inputs(const Call& c, Args& g) {
  (c.a.value ? g.a : g.log_a) = input<T>(c.a.magnitude);
  g.a_negative = input_sign(c.a.negative);
  (c.b.value ? g.b : g.log_b) = input<T>(c.b.magnitude);
  g.b_negative = input_sign(c.b.negative);
  (c.x0.value ? g.x0 : g.log_x0) = input<T>(c.x0.magnitude);
  g.x0_negative = input_sign(c.x0.negative);
}

bool same_strides(const recurrence_strides& p, const recurrence_strides& q) {
  return p.batch == q.batch && p.channel == q.channel && p.time == q.time;
}

}  // namespace

void log_forward(const log_forward_call& c) {
  const char* op = forward_name;
  require_type(op, *c.a.magnitude, log_types);
  const int dim = normalize_dim(op, *c.a.magnitude, c.dim);
  require_form(op, c.a);
  require_form(op, c.b);
  if (!c.log_x && !c.x) fail(argument_error::value_error, op, "needs an output: log_x (with x_negative), or x");
  if (c.log_x && !c.x_negative) fail(argument_error::value_error, op, "x_negative is required with log_x");
  if (!c.log_x && c.x_negative) fail(argument_error::value_error, op, "x_negative is given without log_x");
  if (c.log_x_final && !c.x_final_negative)
    fail(argument_error::value_error, op, "x_final_negative is required with log_x_final");

  // The plan names log_x before x, so x's strides are checked against log_x's below.
  const array_arg* outputs[2] = {c.log_x ? c.log_x : c.x, c.log_x && c.x ? c.x : nullptr};
  const scan_axis axis =
      outputs[1] ? plan_scan_axis(op, {c.a.magnitude, c.b.magnitude, outputs[0], outputs[1]}, dim, c.cu_seqlens)
                 : plan_scan_axis(op, {c.a.magnitude, c.b.magnitude, outputs[0]}, dim, c.cu_seqlens);
  const time_axis_plan& plan = axis.plan;
  if (outputs[1] && !same_strides(plan.strides[2], plan.strides[3]))
    fail(argument_error::value_error, op, "x must have the strides of log_x: parscan writes both through one set of strides");
  if (c.a.negative) require_sign(op, *c.a.negative, *c.a.magnitude);
  if (c.b.negative) require_sign(op, *c.b.negative, *c.b.magnitude);
  if (c.x_negative) require_sign(op, *c.x_negative, *c.log_x);
  require_state_input(op, c.x0, axis);
  if (c.log_x_final) {
    axis.require_state_of(*c.log_x_final);
    require_sign(op, *c.x_final_negative, *c.log_x_final);
  }

  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto fill = [&](auto& g) {
      set_inputs<T>(c, g);
      g.log_x = output<T>(c.log_x);
      g.x_negative = output_sign(c.x_negative);
      g.x = output<T>(c.x);
      g.log_x_final = output<T>(c.log_x_final);
      g.x_final_negative = output_sign(c.x_final_negative);
      g.reverse = c.reverse;
      g.a_strides = plan.strides[0];
      g.b_strides = plan.strides[1];
      g.x_strides = plan.strides[2];
    };
    const auto call = [](const auto& backend, const auto& g) { return log_recurrence_forward(backend, g); };
    return run_batch_or_packed<log_forward_args<T>, log_varlen_forward_args<T>>(*c.a.magnitude, c.stream, axis, fill,
                                                                                 call);
  };
  const status s = c.a.magnitude->type == element_type::bfloat16 ? run(type_tag<bfloat16>{}) : run(type_tag<float>{});
  check_status(s, op, "a, b, x0 -> log_x, x_negative, x, log_x_final, x_final_negative");
}

void log_backward(const log_backward_call& c) {
  const char* op = backward_name;
  require_type(op, *c.a.magnitude, log_types);
  const int dim = normalize_dim(op, *c.a.magnitude, c.dim);
  require_form(op, c.a);
  require_form(op, c.b);
  if (c.log_x && !c.x_negative && (c.a.negative || c.b.negative || c.x0.negative || c.a.value || c.b.value || c.x0.value))
    fail(argument_error::value_error, op, "x_negative is required with log_x where x can be negative");

  // Index 2 is log_x when it is given, else the upstream gradient again (a harmless repeat).
  const array_arg* x_or_dx = c.log_x ? c.log_x : c.dx;
  const scan_axis axis = plan_scan_axis(op, {c.a.magnitude, c.b.magnitude, x_or_dx, c.dx, c.da, c.db}, dim, c.cu_seqlens);
  const time_axis_plan& plan = axis.plan;
  if (c.a.negative) require_sign(op, *c.a.negative, *c.a.magnitude);
  if (c.b.negative) require_sign(op, *c.b.negative, *c.b.magnitude);
  if (c.log_x && c.x_negative) require_sign(op, *c.x_negative, *c.log_x);
  require_state_input(op, c.x0, axis);
  if (c.x0.magnitude) {
    if (!c.dx0) fail(argument_error::value_error, op, "dx0 is required when x0 is given");
    axis.require_state_of(*c.dx0);
  }
  if (c.dlog_x_final) axis.require_state_of(*c.dlog_x_final);

  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto fill = [&](auto& g) {
      set_inputs<T>(c, g);
      g.log_x = input<T>(c.log_x);
      g.x_negative = c.log_x ? input_sign(c.x_negative) : nullptr;
      (c.dx_value ? g.dx : g.dlog_x) = input<T>(c.dx);
      g.dlog_x_final = input<T>(c.dlog_x_final);
      (c.a.value ? g.da : g.dlog_a) = output<T>(c.da);
      (c.b.value ? g.db : g.dlog_b) = output<T>(c.db);
      if (c.x0.magnitude) (c.x0.value ? g.dx0 : g.dlog_x0) = output<T>(c.dx0);
      g.reverse = c.reverse;
      g.a_strides = plan.strides[0];
      g.b_strides = plan.strides[1];
      g.x_strides = plan.strides[2];
      g.dx_strides = plan.strides[3];
      g.da_strides = plan.strides[4];
      g.db_strides = plan.strides[5];
    };
    const auto call = [](const auto& backend, const auto& g) { return log_recurrence_backward(backend, g); };
    return run_batch_or_packed<log_backward_args<T>, log_varlen_backward_args<T>>(*c.a.magnitude, c.stream, axis, fill,
                                                                                   call);
  };
  const status s = c.a.magnitude->type == element_type::bfloat16 ? run(type_tag<bfloat16>{}) : run(type_tag<float>{});
  check_status(s, op, "a, b, x0, log_x, x_negative, dx, dlog_x_final -> da, db, dx0");
}

}  // namespace parscan::python
