// src/python/ext/scan_host.cpp — the built-in-operator scans on the host backend, over
// sequences or packed segments.
#include <parscan/parscan.hpp>

#include "scan_impl.hpp"

namespace parscan::python {

status run_scan_host(const scan_request& r) {
  return r.offsets ? scan_detail::run_scan<true>(host_backend{}, r) : scan_detail::run_scan<false>(host_backend{}, r);
}

}  // namespace parscan::python
