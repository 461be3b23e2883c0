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
#else
#include <catch2/catch.hpp>
#endif
