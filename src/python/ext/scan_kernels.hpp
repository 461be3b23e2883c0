// src/python/ext/scan_kernels.hpp — the generic scans with built-in operators, instantiated
// once per backend: scan_host.cpp (plain C++) and, in CUDA builds only, scan_cuda.cu and
// segmented_scan_cuda.cu (nvcc; the segmented kernels in a translation unit of their own, so
// the two compile side by side). Arguments arrive checked (scan.cpp); parscan still validates
// them and returns a status.
#pragma once

#include <cstdint>

#include <parscan/layout.hpp>
#include <parscan/scan.hpp>
#include <parscan/status.hpp>

#include "array_args.hpp"
#include "ops.hpp"

namespace parscan::python {

struct scan_request {
  element_type type = element_type::float32;  // the input's; the output's too, except for reduce
  scan_operator op = scan_operator::sum;
  scan_kind kind = scan_kind::inclusive;
  const void* in = nullptr;
  sequence_layout in_layout;
  void* out = nullptr;  // reduce: dense, one accumulator per sequence
  sequence_layout out_layout;
  direction dir = direction::forward;
  // Packed segments (cu_seqlens): when offsets is set, in and out are each one contiguous
  // packed array of `total` elements (the layouts are not read), scanned segment by segment
  // (parscan/segmented_scan.hpp); reduce writes one accumulator per segment.
  const std::int64_t* offsets = nullptr;  // segment_count + 1, in the memory of the arrays' device
  index_t segment_count = 0;
  index_t total = 0;
};

/// The request on the host backend, segmented or not.
status run_scan_host(const scan_request& r);
/// The request on the CUDA backend: run_scan_cuda for sequences (r.offsets null),
/// run_segmented_scan_cuda for packed segments.
status run_scan_cuda(const scan_request& r, std::uintptr_t stream);
status run_segmented_scan_cuda(const scan_request& r, std::uintptr_t stream);

}  // namespace parscan::python
