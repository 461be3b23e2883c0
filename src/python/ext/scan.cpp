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

/// The request on the arrays' backend; with cu_seqlens, over its packed segments (the offsets
/// made int64 in the arrays' memory for the call's duration).
status run_request(const char* op, const array_arg& where, std::uintptr_t stream, scan_request r,
                   const array_arg* cu_seqlens) {
  if (where.device == device_kind::cpu) {
    if (!cu_seqlens) return run_scan_host(r);
    const packed_offsets offsets(op, *cu_seqlens, stream);
    r.offsets = offsets.get();
    return run_scan_host(r);
  }
#if PARSCAN_HAS_CUDA
  device_guard guard(where.device_id);
  if (!guard.ok()) return status::cuda_error;
  if (!cu_seqlens) return run_scan_cuda(r, stream);
  const packed_offsets offsets(op, *cu_seqlens, stream);
  r.offsets = offsets.get();
  return run_segmented_scan_cuda(r, stream);
#else
  (void)op, (void)stream, (void)r, (void)cu_seqlens;
  return status::unsupported;
#endif
}

/// With cu_seqlens, the library's segmented scans read one packed array: x must hold a single
/// sequence along dim, every other dimension of size 1. Checked on the shape, before the plan
/// (whose refusals speak of strides, which a contiguous copy would not mend).
void require_one_sequence(const char* op, const array_arg& x, int dim) {
  for (int i = 0; i < x.rank; ++i)
    if (i != dim && x.shape[i] != 1)
      fail(argument_error::value_error, op,
           std::string(x.name) + " has shape " + x.describe_shape() +
               ": with cu_seqlens, the segments are packed along dim=" + std::to_string(dim) +
               " of one sequence, so every other dimension must have size 1");
}

/// The segments of a request whose arrays hold one sequence (require_one_sequence): unit
/// strides along dim, which the library's segmented scans take.
void plan_segments(const scan_axis& axis, std::initializer_list<const array_arg*> arrays, scan_request& r) {
  int k = 0;
  for (const array_arg* a : arrays) {
    if (axis.plan.length > 1 && axis.plan.strides[k].time != 1)
      fail(argument_error::value_error, axis.op,
           std::string(a->name) + " (strides " + a->describe_strides() + ") must be contiguous along dim=" +
               std::to_string(axis.dim) + " with cu_seqlens; pass a contiguous copy");
    ++k;
  }
  r.segment_count = axis.sequences;
  r.total = axis.plan.length;
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
  if (c.cu_seqlens) require_one_sequence(op, *c.x, dim);
  const scan_axis axis = plan_scan_axis(op, {c.x, c.out}, dim, c.cu_seqlens);
  scan_request r;
  r.type = c.x->type;
  r.op = c.op;
  r.kind = c.exclusive ? scan_kind::exclusive : scan_kind::inclusive;
  r.in = c.x->data;
  r.out = c.out->data;
  r.dir = c.reverse ? direction::reverse : direction::forward;
  if (axis.packed()) {
    plan_segments(axis, {c.x, c.out}, r);
  } else {
    r.in_layout = layout_of(axis.plan, 0);
    r.out_layout = layout_of(axis.plan, 1);
  }
  check_status(run_request(op, *c.x, c.stream, r, c.cu_seqlens), op,
               c.cu_seqlens ? "x, cu_seqlens -> out" : "x -> out");
}

void reduce(const reduce_call& c) {
  const char* op = "reduce";
  require_type(op, *c.x, scan_types);
  require_operator(op, *c.x, c.op);
  const int dim = normalize_dim(op, *c.x, c.dim);
  if (c.cu_seqlens) require_one_sequence(op, *c.x, dim);
  const scan_axis axis = plan_scan_axis(op, {c.x}, dim, c.cu_seqlens);
  array_arg expected = *c.x;  // out: x's shape without dim ((N,) + that with cu_seqlens), the accumulator type
  expected.type = accumulator_type_of(c.x->type);
  if (c.out->type != expected.type)
    fail(argument_error::type_error, op,
         std::string(c.out->name) + " has dtype " + name_of(c.out->type) + "; a reduce of " + name_of(c.x->type) +
             " writes " + name_of(expected.type));
  if (axis.packed()) require_packed_state(op, *c.out, expected, dim, axis.sequences);
  else require_state(op, *c.out, expected, dim);
  scan_request r;
  r.type = c.x->type;
  r.op = c.op;
  r.kind = scan_kind::reduce;
  r.in = c.x->data;
  r.out = c.out->data;
  if (axis.packed()) {
    plan_segments(axis, {c.x}, r);
  } else {
    r.in_layout = layout_of(axis.plan, 0);
    r.out_layout = r.in_layout;
  }
  check_status(run_request(op, *c.x, c.stream, r, c.cu_seqlens), op,
               c.cu_seqlens ? "x, cu_seqlens -> out" : "x -> out");
}

}  // namespace parscan::python
