// test/support/catch_version.hpp — PARSCAN_CATCH2_MAJOR: 3 or 2. test/CMakeLists.txt defines it;
// without it, the installed headers decide. Shared by catch.hpp and catch_main.cpp.
#pragma once

#if !defined(PARSCAN_CATCH2_MAJOR)
#if __has_include(<catch2/catch_all.hpp>)
#define PARSCAN_CATCH2_MAJOR 3
#else
#define PARSCAN_CATCH2_MAJOR 2
#endif
#endif
