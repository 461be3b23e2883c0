// src/python/ext/jax_ffi.hpp — the XLA FFI handlers that make parscan's operations JAX custom
// calls (jax.ffi). parscan/jax.py registers each one with jax.ffi.register_ffi_target.
#pragma once

#include <vector>

namespace parscan::python {

struct jax_handler {
  const char* name;      // the FFI target name
  const char* platform;  // "cpu" or "CUDA"
  void* function;        // an XLA_FFI_Handler*
};

/// Every handler this build has: the CPU ones when the module was compiled against jaxlib's
/// FFI headers, the CUDA ones too in a CUDA build; none without jaxlib at build time.
std::vector<jax_handler> jax_handlers();

}  // namespace parscan::python
