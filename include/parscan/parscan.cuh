// parscan/parscan.cuh — everything in parscan.hpp plus the CUDA backend of the generic
// algorithms. Include from .cu files compiled by nvcc.
#pragma once

#include "parscan.hpp"
#include "cuda/scan.cuh"
#include "cuda/segmented_scan.cuh"
