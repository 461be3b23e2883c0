// test/support/catch.hpp — include this (as "support/catch.hpp") instead of a Catch2 header.
// It picks the header of the Catch2 the build found: v3 (catch2/catch_all.hpp, Ubuntu 24.04)
// or v2 (catch2/catch.hpp, Debian 12). test/CMakeLists.txt defines PARSCAN_CATCH2_MAJOR;
// without it, the installed headers decide. Test code uses only what both versions share
// (TEST_CASE, SECTION, REQUIRE, CHECK, INFO, CAPTURE, GENERATE, ...), with explicit
// tolerance checks rather than Approx.
#pragma once

#include "support/catch_version.hpp"

#if PARSCAN_CATCH2_MAJOR >= 3
#include <catch2/catch_all.hpp>
#if defined(__CUDACC__) && !defined(__clang__)
// Under nvcc, Catch2 v3 wraps every assertion and test registration in the pragmas
// nv_diagnostic push / nv_diag_suppress 177 / nv_diagnostic pop, and nvcc 13.0's front end
// (cudafe++ 13.0.88) can spin forever on them: test/core/iterator_test.cu, whose scenarios
// have CHECKs in member functions defined inside their classes, did not compile in 19 minutes
// (about a minute with Catch2 v2, which emits no nv pragmas). Eight lines without Catch2 also
// hang it (still running after 300 s): a member function defined in its class whose body
// holds nv_diagnostic push and pop, then an unused constexpr int at namespace scope, then a
// namespace-scope nv_diag_suppress. The macros expand where the tests use them, so emptying
// them here keeps those pragmas out of every test source; they only silenced warning 177
// (declared but never referenced), which no GPU test raises without them.
#undef CATCH_INTERNAL_START_WARNINGS_SUPPRESSION
#undef CATCH_INTERNAL_STOP_WARNINGS_SUPPRESSION
#undef CATCH_INTERNAL_SUPPRESS_UNUSED_VARIABLE_WARNINGS
#define CATCH_INTERNAL_START_WARNINGS_SUPPRESSION
#define CATCH_INTERNAL_STOP_WARNINGS_SUPPRESSION
#define CATCH_INTERNAL_SUPPRESS_UNUSED_VARIABLE_WARNINGS
#endif
#else
#include <catch2/catch.hpp>
#endif
