// src/python/ext/array_args.cpp — checks shared by every binding, and the mapping of an array
// scanned along one dimension onto parscan's strided (batch, channel, time) layout.
#include "array_args.hpp"

#include <string>

namespace parscan::python {

const char* name_of(element_type t) {
  switch (t) {
    case element_type::float32: return "float32";
    case element_type::float64: return "float64";
    case element_type::bfloat16: return "bfloat16";
    case element_type::float16: return "float16";
    case element_type::complex64: return "complex64";
    case element_type::int32: return "int32";
    case element_type::int64: return "int64";
    case element_type::uint8: return "uint8";
    case element_type::boolean: return "bool";
    case element_type::other: break;
  }
  return "an unsupported type";
}

std::int64_t array_arg::size() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

namespace {

// Python's tuple notation. Built from std::to_string: the std::ostringstream it replaced crashed
// (SIGSEGV) in the CUDA build of the module on the GPU machine, not in the host-only build.
std::string join(const std::int64_t* v, int n) {
  std::string s = "(";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  if (n == 1) s += ',';
  return s + ')';
}

std::string device_name(const array_arg& a) {
  return a.device == device_kind::cpu ? std::string("cpu") : "cuda:" + std::to_string(a.device_id);
}

}  // namespace

std::string array_arg::describe_shape() const { return join(shape, rank); }

std::string array_arg::describe_strides() const { return join(strides, rank); }

void set_dense_strides(array_arg& a) {
  std::int64_t step = 1;
  for (int i = a.rank - 1; i >= 0; --i) {
    a.strides[i] = step;
    step *= a.shape[i];
  }
}

void fail(argument_error::kind_t kind, const char* op, const std::string& message) {
  throw argument_error(kind, std::string("parscan.") + op + ": " + message);
}

void check_status(status s, const char* op, const char* arguments) {
  if (s == status::success) return;
  const bool runtime = s == status::cuda_error || s == status::allocation_failed;
  fail(runtime ? argument_error::runtime_error : argument_error::value_error, op,
       std::string("the library refused (") + arguments + "): " + to_string(s) + " (nothing was written)");
}

void require_type(const char* op, const array_arg& a, std::initializer_list<element_type> allowed) {
  for (element_type t : allowed)
    if (a.type == t) return;
  std::string names;
  for (element_type t : allowed) names += std::string(names.empty() ? "" : ", ") + name_of(t);
  fail(argument_error::type_error, op,
       std::string(a.name) + " has dtype " + name_of(a.type) + "; this operation takes " + names);
}

void require_like(const char* op, const array_arg& ref, const array_arg& other) {
  if (other.type != ref.type)
    fail(argument_error::type_error, op,
         std::string(other.name) + " has dtype " + name_of(other.type) + " but " + ref.name + " has dtype " +
             name_of(ref.type) + "; they must match");
  if (other.device != ref.device || (other.device == device_kind::cuda && other.device_id != ref.device_id))
    fail(argument_error::value_error, op,
         std::string(other.name) + " is on " + device_name(other) + " but " + ref.name + " is on " + device_name(ref) +
             "; every array of one call must be on the same device");
#if !PARSCAN_HAS_CUDA
  if (ref.device == device_kind::cuda)
    fail(argument_error::value_error, op,
         std::string(ref.name) + " is on " + device_name(ref) +
             ", but this parscan was built without the CUDA backend (no CUDA compiler, or PARSCAN_ENABLE_CUDA=OFF)");
#endif
}

int normalize_dim(const char* op, const array_arg& a, std::int64_t dim) {
  if (a.rank == 0) fail(argument_error::value_error, op, std::string(a.name) + " must have at least one dimension");
  const std::int64_t d = dim < 0 ? dim + a.rank : dim;
  if (d < 0 || d >= a.rank)
    fail(argument_error::value_error, op,
         "dim=" + std::to_string(dim) + " is out of range for " + a.name + " of shape " + a.describe_shape());
  return static_cast<int>(d);
}

void require_same_shape(const char* op, const array_arg& a, const array_arg& ref) {
  require_like(op, ref, a);
  bool same = a.rank == ref.rank;
  for (int i = 0; same && i < a.rank; ++i) same = a.shape[i] == ref.shape[i];
  if (!same)
    fail(argument_error::value_error, op,
         std::string(a.name) + " has shape " + a.describe_shape() + " but " + ref.name + " has shape " +
             ref.describe_shape() + "; they must match");
}

void require_sign(const char* op, const array_arg& sign, const array_arg& magnitude) {
  if (sign.type != element_type::uint8 && sign.type != element_type::boolean)
    fail(argument_error::type_error, op,
         std::string(sign.name) + " has dtype " + name_of(sign.type) + "; a sign array is uint8 or bool");
  array_arg as_magnitude = sign;  // compared like a magnitude array, bar the dtype
  as_magnitude.type = magnitude.type;
  require_same_shape(op, as_magnitude, magnitude);
  for (int i = 0; i < sign.rank; ++i)
    if (sign.shape[i] > 1 && sign.strides[i] != magnitude.strides[i])
      fail(argument_error::value_error, op,
           std::string(sign.name) + " (strides " + join(sign.strides, sign.rank) + ") must have the element strides of " +
               magnitude.name + " (" + join(magnitude.strides, magnitude.rank) +
               "): parscan addresses both through one set of strides; pass contiguous copies of both");
}

namespace {

void require_nonnegative_strides(const char* op, const array_arg& a) {
  for (int i = 0; i < a.rank; ++i)
    if (a.strides[i] < 0 && a.shape[i] > 1)
      fail(argument_error::value_error, op,
           std::string(a.name) + " has a negative stride (strides " + join(a.strides, a.rank) +
               "); parscan takes non-negative strides only: pass reverse=True instead of a flipped view, or a copy");
}

// The strided dimensions the non-time dimensions of arrays[0..n) collapse into.
struct collapsed {
  int count = 0;
  std::int64_t size[max_rank] = {};
  std::int64_t stride[max_rank][8] = {};  // [group][array]: the stride of the group's innermost dimension
};

collapsed collapse(const array_arg* const* arrays, int n, int dim) {
  collapsed c;
  const array_arg& ref = *arrays[0];
  for (int i = 0; i < ref.rank; ++i) {
    if (i == dim || ref.shape[i] == 1) continue;
    bool merges = c.count > 0;
    for (int k = 0; merges && k < n; ++k) merges = c.stride[c.count - 1][k] == ref.shape[i] * arrays[k]->strides[i];
    const int g = merges ? c.count - 1 : c.count++;
    c.size[g] = merges ? c.size[g] * ref.shape[i] : ref.shape[i];
    for (int k = 0; k < n; ++k) c.stride[g][k] = arrays[k]->strides[i];
  }
  return c;
}

}  // namespace

time_axis_plan plan_time_axis(const char* op, std::initializer_list<const array_arg*> arrays, int dim) {
  return plan_time_axis(op, arrays.begin(), static_cast<int>(arrays.size()), dim);
}

time_axis_plan plan_time_axis(const char* op, const array_arg* const* list, int n, int dim) {
  if (n < 1 || n > 8) fail(argument_error::runtime_error, op, "internal: a plan takes 1 to 8 arrays");
  const array_arg& ref = *list[0];
  for (int k = 0; k < n; ++k) {
    require_same_shape(op, *list[k], ref);
    require_nonnegative_strides(op, *list[k]);
  }

  time_axis_plan plan;
  plan.length = ref.shape[dim];
  bool empty = false;
  for (int i = 0; i < ref.rank; ++i) empty = empty || (i != dim && ref.shape[i] == 0);
  if (empty) {  // no sequences: nothing is read or written, so strides do not matter
    plan.batch = 0;
    plan.channels = 1;
    return plan;
  }

  // Adding the arrays one at a time finds the one whose layout breaks the shared split.
  collapsed c;
  for (int k = 1; k <= n; ++k) {
    c = collapse(list, k, dim);
    if (c.count > 2) {
      const array_arg& bad = *list[k - 1];
      fail(argument_error::value_error, op,
           std::string(bad.name) + " (shape " + bad.describe_shape() + ", strides " + join(bad.strides, bad.rank) +
               ") cannot be scanned along dim=" + std::to_string(dim) + " in place" +
               (k > 1 ? std::string(" together with ") + ref.name : std::string()) +
               ": its other dimensions need more than two strides; pass a contiguous copy");
    }
  }
  plan.batch = c.count == 2 ? c.size[0] : 1;
  plan.channels = c.count >= 1 ? c.size[c.count - 1] : 1;
  for (int k = 0; k < n; ++k) {
    recurrence_strides& s = plan.strides[k];
    s.time = list[k]->strides[dim];
    s.channel = c.count >= 1 ? c.stride[c.count - 1][k] : 0;
    s.batch = c.count == 2 ? c.stride[0][k] : 0;
  }
  return plan;
}

namespace {

// state: the shape expected[0..count), dense row-major, the type and device of ref.
void require_dense_state(const char* op, const array_arg& state, const array_arg& ref, const std::int64_t* expected,
                         int count, const std::string& described) {
  require_like(op, ref, state);
  bool same = state.rank == count;
  for (int i = 0; same && i < count; ++i) same = state.shape[i] == expected[i];
  if (!same)
    fail(argument_error::value_error, op,
         std::string(state.name) + " has shape " + state.describe_shape() + "; it must have the shape of " +
             described + ", " + join(expected, count));
  std::int64_t step = 1;
  for (int i = state.rank - 1; i >= 0; --i) {
    if (state.shape[i] != 1 && state.strides[i] != step && state.size() > 0)
      fail(argument_error::value_error, op,
           std::string(state.name) + " (strides " + join(state.strides, state.rank) +
               ") must be dense in row-major order");
    step *= state.shape[i];
  }
}

// Appends the shape of ref without dim to expected[count..); returns the new count.
int append_without(std::int64_t* expected, int count, const array_arg& ref, int dim) {
  for (int i = 0; i < ref.rank; ++i)
    if (i != dim) expected[count++] = ref.shape[i];
  return count;
}

}  // namespace

void require_state(const char* op, const array_arg& state, const array_arg& ref, int dim) {
  std::int64_t expected[max_rank];
  const int count = append_without(expected, 0, ref, dim);
  require_dense_state(op, state, ref, expected, count,
                      std::string(ref.name) + " without dim=" + std::to_string(dim));
}

void require_packed_state(const char* op, const array_arg& state, const array_arg& ref, int dim,
                          std::int64_t sequences) {
  std::int64_t expected[max_rank];
  expected[0] = sequences;
  const int count = append_without(expected, 1, ref, dim);
  require_dense_state(op, state, ref, expected, count,
                      "(sequences,) + " + std::string(ref.name) + " without dim=" + std::to_string(dim) +
                          " (one state per sequence of cu_seqlens)");
}

std::int64_t require_offsets(const char* op, const array_arg& offsets, const array_arg& ref) {
  if (offsets.type != element_type::int64 && offsets.type != element_type::int32)
    fail(argument_error::type_error, op,
         std::string(offsets.name) + " has dtype " + name_of(offsets.type) + "; offsets are int64 or int32");
  array_arg as_ref = offsets;  // compared like an array of ref's type, bar the dtype
  as_ref.type = ref.type;
  require_like(op, ref, as_ref);
  if (offsets.rank != 1 || offsets.shape[0] < 1)
    fail(argument_error::value_error, op,
         std::string(offsets.name) + " has shape " + offsets.describe_shape() +
             "; it must hold the N + 1 offsets of N packed sequences, one dimension of at least one element");
  if (offsets.shape[0] > 1 && offsets.strides[0] != 1)
    fail(argument_error::value_error, op,
         std::string(offsets.name) + " (strides " + join(offsets.strides, 1) + ") must be contiguous");
  return offsets.shape[0] - 1;
}

time_axis_plan plan_packed_time_axis(const char* op, std::initializer_list<const array_arg*> arrays, int dim) {
  const time_axis_plan plan = plan_time_axis(op, arrays, dim);
  if (plan.batch > 1) {
    const array_arg& ref = **arrays.begin();
    fail(argument_error::value_error, op,
         std::string(ref.name) + " (shape " + ref.describe_shape() + ", strides " + join(ref.strides, ref.rank) +
             "): with cu_seqlens, the dimensions other than dim=" + std::to_string(dim) +
             " must collapse into one strided dimension (the channels of the packed sequences); pass a contiguous "
             "copy");
  }
  return plan;
}

void scan_axis::require_state_of(const array_arg& state) const {
  if (packed()) require_packed_state(op, state, *ref, dim, sequences);
  else require_state(op, state, *ref, dim);
}

varlen_shape scan_axis::packed_shape() const {
  varlen_shape s;
  s.sequences = sequences;
  s.channels = plan.batch == 0 ? 0 : plan.channels;
  s.total_length = plan.length;
  s.layout = recurrence_layout::strided;
  return s;
}

scan_axis states_axis(const char* op, const array_arg& ref, int dim, const array_arg* cu_seqlens) {
  scan_axis axis;
  axis.op = op;
  axis.ref = &ref;
  axis.dim = dim;
  axis.cu_seqlens = cu_seqlens;
  if (cu_seqlens) axis.sequences = require_offsets(op, *cu_seqlens, ref);
  return axis;
}

scan_axis plan_scan_axis(const char* op, std::initializer_list<const array_arg*> arrays, int dim,
                         const array_arg* cu_seqlens) {
  scan_axis axis = states_axis(op, **arrays.begin(), dim, cu_seqlens);
  axis.plan = cu_seqlens ? plan_packed_time_axis(op, arrays, dim) : plan_time_axis(op, arrays, dim);
  return axis;
}

}  // namespace parscan::python
