// src/python/ext/scan.cpp — cumulative and reduce for the bindings: checks, the mapping of the
// arrays onto sequence layouts, and the call on the arrays' backend.
#include "backends.hpp"
#include "ops.hpp"
#include "scan_kernels.hpp"

namespace parscan::python {

namespace {

const std::initializer_list<element_type> scan_types = {
    element_type::float32, element_type::float64, element_type::bfloat16, element_type::float16,
    element_type::complex64, element_type::int32, element_type::int64};

void require_operator(const char* op, const array_arg& x, scan_operator o) {
  if (x.type == element_type::complex64 && o != scan_operator::sum)
    fail(argument_error::type_error, op, std::string(x.name) + " is complex64, which has no order: only op=\"sum\" applies");
}

sequence_layout layout_of(const time_axis_plan& p, int k) {
  const recurrence_strides& s = p.strides[k];
  return {p.channels, p.length, s.channel, s.time, p.batch, s.batch};
}

status run_request(const array_arg& where, std::uintptr_t stream, const scan_request& r) {
  if (where.device == device_kind::cpu) return run_scan_host(r);
#if PARSCAN_HAS_CUDA
  device_guard guard(where.device_id);
  if (!guard.ok()) return status::cuda_error;
  return run_scan_cuda(r, stream);
#else
  (void)stream;
  return status::unsupported;
#endif
}

}  // namespace

element_type accumulator_type_of(element_type t) {
  return t == element_type::bfloat16 || t == element_type::float16 ? element_type::float32 : t;
}

void cumulative(const cumulative_call& c) {
  const char* op = "cumulative";
  require_type(op, *c.x, scan_types);
  require_operator(op, *c.x, c.op);
  const int dim = normalize_dim(op, *c.x, c.dim);
  const time_axis_plan plan = plan_time_axis(op, {c.x, c.out}, dim);
  scan_request r;
  r.type = c.x->type;
  r.op = c.op;
  r.kind = c.exclusive ? scan_kind::exclusive : scan_kind::inclusive;
  r.in = c.x->data;
  r.in_layout = layout_of(plan, 0);
  r.out = c.out->data;
  r.out_layout = layout_of(plan, 1);
  r.dir = c.reverse ? direction::reverse : direction::forward;
  check_status(run_request(*c.x, c.stream, r), op, "x -> out");
}

void reduce(const reduce_call& c) {
  const char* op = "reduce";
  require_type(op, *c.x, scan_types);
  require_operator(op, *c.x, c.op);
  const int dim = normalize_dim(op, *c.x, c.dim);
  const time_axis_plan plan = plan_time_axis(op, {c.x}, dim);
  array_arg expected = *c.x;  // out: x's shape without dim, in the accumulator type
  expected.type = accumulator_type_of(c.x->type);
  if (c.out->type != expected.type)
    fail(argument_error::type_error, op,
         std::string(c.out->name) + " has dtype " + name_of(c.out->type) + "; a reduce of " + name_of(c.x->type) +
             " writes " + name_of(expected.type));
  require_state(op, *c.out, expected, dim);
  scan_request r;
  r.type = c.x->type;
  r.op = c.op;
  r.kind = scan_kind::reduce;
  r.in = c.x->data;
  r.in_layout = layout_of(plan, 0);
  r.out_layout = r.in_layout;
  r.out = c.out->data;
  check_status(run_request(*c.x, c.stream, r), op, "x -> out");
}

}  // namespace parscan::python
