// GPU build of the log-space recurrence tests (PARSCAN_TEST_CUDA).
#include "recurrence/log_recurrence_cases.inl"
