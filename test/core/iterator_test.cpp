// test/core/iterator_test.cpp — the generic algorithms with Thrust's fancy iterators on the host
// backend (g++: Thrust's iterators are header-only and need no CUDA; CCCL's include directory,
// which parscan::parscan brings, holds them). The bodies are backend-neutral and live in
// iterator_cases.inl; iterator_test.cu runs them on the CUDA backend.
#if __has_include(<thrust/iterator/counting_iterator.h>)
#include "iterator_cases.inl"
#else
#include "support/catch.hpp"
TEST_CASE("host: iterator scans: not built, Thrust's headers are not on the include path", "[scan][iterators][host]") {
  WARN("CCCL's include directory has no thrust/: the iterator tests were left out");
}
#endif
