// parscan/parscan.hpp — one include for users of the host side: operators, layouts, the
// generic algorithms on the host backend, and the gated and matrix recurrences and matrix chains
// (both backends).
// For the generic algorithms on the CUDA backend include parscan/parscan.cuh from a .cu file.
#pragma once

#include "backend.hpp"
#include "config.hpp"
#include "host/scan.hpp"
#include "layout.hpp"
#include "log_recurrence.hpp"
#include "numeric.hpp"
#include "ops.hpp"
#include "matrix_recurrence.hpp"
#include "recurrence.hpp"
#include "scan.hpp"
#include "segmented_scan.hpp"
#include "host/segmented_scan.hpp"
#include "status.hpp"
