// src/python/ext/scan_kernels.hpp — the generic scans with built-in operators, instantiated
// once per backend: scan_host.cpp (plain C++) and scan_cuda.cu (nvcc, only in CUDA builds).
// Arguments arrive checked (scan.cpp); parscan still validates them and returns a status.
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
};

status run_scan_host(const scan_request& r);
status run_scan_cuda(const scan_request& r, std::uintptr_t stream);

}  // namespace parscan::python
