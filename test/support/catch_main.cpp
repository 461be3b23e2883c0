// test/support/catch_main.cpp — main() for the test executables under Catch2 v2.
// Under Catch2 v3 main() comes from Catch2::Catch2WithMain and this file compiles to nothing.
// CATCH_CONFIG_MAIN must be defined before the first include of the Catch2 v2 header.
#include "support/catch_version.hpp"

#if PARSCAN_CATCH2_MAJOR < 3
#define CATCH_CONFIG_MAIN
#include "support/catch.hpp"
#endif
