// parscan/status.hpp — every entry point returns a status; nothing throws or aborts.
// When a call returns anything but status::success it has written no output.
#pragma once

namespace parscan {

enum class status : int {
  success = 0,
  null_pointer,          // a pointer that must address data is null
  negative_size,         // a count, length or group count is negative
  size_overflow,         // element or byte counts overflow 64-bit arithmetic
  invalid_stride,        // a stride is negative
  overlapping_output,    // output elements alias each other (a zero output stride, say), or an
                         // output partly aliases an input or another output
  shape_mismatch,        // two layouts or tensors disagree on their shape
  exceeds_device_limits, // the problem needs a launch larger than the device allows
  insufficient_workspace,// the caller's workspace is smaller than the size query says
  allocation_failed,     // the allocator hook returned no memory
  unsupported,           // a dtype, option or size this path does not support
  cuda_error,            // a CUDA runtime call or launch failed (see cuda::last_error)
  invalid_offsets,       // segment offsets (cu_seqlens) do not start at 0, decrease, or pass the
                         // packed length (checked where the offsets are readable: host backend)
  communication_error,   // a sequence-parallel call's exchange between ranks failed (an NCCL
                         // error: see distributed::nccl_last_error), or the ranks disagree
};

constexpr const char* to_string(status s) noexcept {
  switch (s) {
    case status::success: return "success";
    case status::null_pointer: return "null pointer where data is required";
    case status::negative_size: return "negative size";
    case status::size_overflow: return "size overflows 64-bit element or byte arithmetic";
    case status::invalid_stride: return "invalid stride (negative)";
    case status::overlapping_output: return "output overlaps itself or partly overlaps an input";
    case status::shape_mismatch: return "shapes of the arguments do not match";
    case status::exceeds_device_limits: return "problem exceeds what the device can launch";
    case status::insufficient_workspace: return "workspace smaller than required";
    case status::allocation_failed: return "workspace allocation failed";
    case status::unsupported: return "unsupported type, option or size for this path";
    case status::cuda_error: return "CUDA runtime error";
    case status::invalid_offsets: return "segment offsets do not start at 0, decrease, or exceed the packed length";
    case status::communication_error: return "communication between ranks failed";
  }
  return "unknown status";
}

}  // namespace parscan
