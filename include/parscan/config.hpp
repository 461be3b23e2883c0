// parscan/config.hpp — the host/device macro and the few portability switches the
// rest of the library needs. Everything under ops/ and host/ compiles with plain g++.
#pragma once

#if defined(__CUDACC__)
#define PARSCAN_HD __host__ __device__
#define PARSCAN_INLINE __forceinline__
#define PARSCAN_UNROLL _Pragma("unroll")  // a loop of constant trip count, in shared host/device code
#else
#define PARSCAN_HD
#define PARSCAN_INLINE inline
#define PARSCAN_UNROLL
#endif

#if defined(__CUDA_ARCH__)
#define PARSCAN_DEVICE_PASS 1
#else
#define PARSCAN_DEVICE_PASS 0
#endif

#include <cstdint>

namespace parscan {
using index_t = std::int64_t;  // every element count and stride is 64-bit
}  // namespace parscan
