// Host build of the log-space recurrence tests.
#include "recurrence/log_recurrence_cases.inl"
