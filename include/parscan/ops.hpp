// parscan/ops.hpp — every built-in operator. Add a new operator as one header in ops/ and
// include it here (docs/operators.md).
#pragma once

#include "ops/affine.hpp"
#include "ops/basic.hpp"
#include "ops/log_affine.hpp"
#include "ops/matrix.hpp"
