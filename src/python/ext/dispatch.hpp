// src/python/ext/dispatch.hpp — from a run-time element_type to the C++ type parscan is
// instantiated for.
#pragma once

#include <parscan/numeric.hpp>

#include "array_args.hpp"

namespace parscan::python {

template <class T>
struct type_tag {
  using type = T;
};

/// f(type_tag<T>{}) for the floating-point types the recurrences are compiled for. The caller
/// has already refused any other type (require_type).
template <class F>
decltype(auto) visit_float_type(element_type t, F&& f) {
  switch (t) {
    case element_type::float64: return f(type_tag<double>{});
    case element_type::bfloat16: return f(type_tag<bfloat16>{});
    case element_type::float16: return f(type_tag<float16>{});
    case element_type::complex64: return f(type_tag<complex<float>>{});
    case element_type::float32: break;
    default: fail(argument_error::runtime_error, "internal", "visit_float_type: a type the caller should have refused");
  }
  return f(type_tag<float>{});
}

}  // namespace parscan::python
