// src/python/ext/scan_impl.hpp — the bodies of run_scan_host, run_scan_cuda and
// run_segmented_scan_cuda: element type × operator × kind, each a call of parscan's generic
// algorithms. Included by exactly one source per backend and form, after that backend's header
// (parscan/parscan.hpp or parscan.cuh).
#pragma once

#include <cstdint>

#include <parscan/numeric.hpp>
#include <parscan/ops/basic.hpp>
#include <parscan/segmented_scan.hpp>

#include "dispatch.hpp"
#include "scan_kernels.hpp"

namespace parscan::python::scan_detail {

/// f(type_tag<In>{}, op) for the request's element type In and operator op, which combines in
/// float for 16-bit floats (so a long sum of bfloat16 is not rounded to 8 bits at every step).
template <class In, class C, class F>
status with_operator(const scan_request& r, F& f) {
  switch (r.op) {
    case scan_operator::sum: return f(type_tag<In>{}, sum_op<C>{});
    case scan_operator::max: return f(type_tag<In>{}, max_op<C>{});
    case scan_operator::min: return f(type_tag<In>{}, min_op<C>{});
  }
  return status::unsupported;
}

template <class F>
status with_type_and_operator(const scan_request& r, F&& f) {
  switch (r.type) {
    case element_type::float32: return with_operator<float, float>(r, f);
    case element_type::float64: return with_operator<double, double>(r, f);
    case element_type::bfloat16: return with_operator<bfloat16, float>(r, f);
    case element_type::float16: return with_operator<float16, float>(r, f);
    case element_type::int32: return with_operator<std::int32_t, std::int32_t>(r, f);
    case element_type::int64: return with_operator<std::int64_t, std::int64_t>(r, f);
    case element_type::complex64:  // complex numbers have no order: sum only
      return r.op == scan_operator::sum ? f(type_tag<complex<float>>{}, sum_op<complex<float>>{}) : status::unsupported;
    case element_type::uint8:  // sign arrays of log_recurrence: refused by scan.cpp's checks
    case element_type::boolean:
    case element_type::other: break;
  }
  return status::unsupported;
}

/// The request over sequences (parscan/scan.hpp) or, with Segmented, over packed segments
/// (parscan/segmented_scan.hpp). One body for both; each translation unit instantiates the
/// form it serves, so scan_cuda.cu and segmented_scan_cuda.cu compile apart.
template <bool Segmented, class Backend>
status run_scan(const Backend& be, const scan_request& r) {
  return with_type_and_operator(r, [&](auto tag, auto op) {
    using In = typename decltype(tag)::type;
    using Op = decltype(op);
    using Acc = accumulator_t<Op, In>;
    const In* in = static_cast<const In*>(r.in);
    In* out = static_cast<In*>(r.out);
    const segments seg{r.segment_count, r.offsets, r.total};
    scan_options<Acc> opts;
    opts.dir = r.dir;
    switch (r.kind) {
      case scan_kind::inclusive:
        if constexpr (Segmented) return parscan::segmented_inclusive_scan(be, in, out, seg, op, opts);
        else return parscan::inclusive_scan(be, in, r.in_layout, out, r.out_layout, op, opts);
      case scan_kind::exclusive:
        if constexpr (Segmented) return parscan::segmented_exclusive_scan(be, in, out, seg, op, Op::identity(), opts);
        else return parscan::exclusive_scan(be, in, r.in_layout, out, r.out_layout, op, Op::identity(), opts);
      case scan_kind::reduce:
        if constexpr (Segmented)
          return parscan::segmented_reduce(be, in, seg, op, Op::identity(), static_cast<Acc*>(r.out), opts);
        else return parscan::reduce(be, in, r.in_layout, op, Op::identity(), static_cast<Acc*>(r.out), opts);
    }
    return status::unsupported;
  });
}

}  // namespace parscan::python::scan_detail
