// src/python/ext/scan_impl.hpp — the body of run_scan_host and run_scan_cuda: element type ×
// operator × kind, each a call of parscan's generic algorithms. Included by exactly one
// source per backend, after that backend's header (parscan/parscan.hpp or parscan.cuh).
#pragma once

#include <cstdint>

#include <parscan/numeric.hpp>
#include <parscan/ops/basic.hpp>

#include "scan_kernels.hpp"

namespace parscan::python::scan_detail {

template <class In, class Backend, class Op>
status run_kind(const Backend& be, const scan_request& r, Op op) {
  using Acc = accumulator_t<Op, In>;
  const In* in = static_cast<const In*>(r.in);
  scan_options<Acc> opts;
  opts.dir = r.dir;
  switch (r.kind) {
    case scan_kind::inclusive:
      return parscan::inclusive_scan(be, in, r.in_layout, static_cast<In*>(r.out), r.out_layout, op, opts);
    case scan_kind::exclusive:
      return parscan::exclusive_scan(be, in, r.in_layout, static_cast<In*>(r.out), r.out_layout, op, Op::identity(),
                                     opts);
    case scan_kind::reduce:
      return parscan::reduce(be, in, r.in_layout, op, Op::identity(), static_cast<Acc*>(r.out), opts);
  }
  return status::unsupported;
}

/// In: the element type stored; C: the type the operator combines in (float for 16-bit floats,
/// so a long sum of bfloat16 is not rounded to 8 bits at every step).
template <class In, class C, class Backend>
status run_op(const Backend& be, const scan_request& r) {
  switch (r.op) {
    case scan_operator::sum: return run_kind<In>(be, r, sum_op<C>{});
    case scan_operator::max: return run_kind<In>(be, r, max_op<C>{});
    case scan_operator::min: return run_kind<In>(be, r, min_op<C>{});
  }
  return status::unsupported;
}

template <class Backend>
status run_scan(const Backend& be, const scan_request& r) {
  switch (r.type) {
    case element_type::float32: return run_op<float, float>(be, r);
    case element_type::float64: return run_op<double, double>(be, r);
    case element_type::bfloat16: return run_op<bfloat16, float>(be, r);
    case element_type::float16: return run_op<float16, float>(be, r);
    case element_type::int32: return run_op<std::int32_t, std::int32_t>(be, r);
    case element_type::int64: return run_op<std::int64_t, std::int64_t>(be, r);
    case element_type::complex64:  // complex numbers have no order: sum only
      return r.op == scan_operator::sum ? run_kind<complex<float>>(be, r, sum_op<complex<float>>{}) : status::unsupported;
    case element_type::uint8:  // sign arrays of log_recurrence: refused by scan.cpp's checks
    case element_type::boolean:
    case element_type::other: break;
  }
  return status::unsupported;
}

}  // namespace parscan::python::scan_detail
