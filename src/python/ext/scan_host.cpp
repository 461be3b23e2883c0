// src/python/ext/scan_host.cpp — the built-in-operator scans on the host backend, over
// sequences or packed segments.
#include <parscan/parscan.hpp>

#include "scan_impl.hpp"

namespace parscan::python {

status run_scan_host(const scan_request& r) {
  return r.offsets ? scan_detail::run_segmented_scan(host_backend{}, r) : scan_detail::run_scan(host_backend{}, r);
}

}  // namespace parscan::python
