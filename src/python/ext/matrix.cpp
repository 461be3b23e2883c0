// src/python/ext/matrix.cpp — the matrix recurrence and matrix-chain products for the bindings:
// checks, the mapping of arrays of dense blocks (N-vectors, N×N matrices) scanned along one
// named dimension onto parscan's (batch, step) strides, and the call on the arrays' backend.
#include <parscan/matrix_recurrence.hpp>
#include <parscan/numeric.hpp>

#include "backends.hpp"
#include "dispatch.hpp"
#include "ops.hpp"

namespace parscan::python {

namespace {

const std::initializer_list<element_type> matrix_types = {element_type::float32, element_type::float64,
                                                          element_type::bfloat16, element_type::float16};

template <class T>
const T* input(const array_arg* a) { return a ? static_cast<const T*>(a->data) : nullptr; }
template <class T>
T* output(const array_arg* a) { return a ? static_cast<T*>(a->data) : nullptr; }

/// One array of blocks: the array, and how many of its trailing dimensions form a block.
struct blocked {
  const array_arg* array;
  int block_rank;  // 1: N-vectors; 2: N×N matrices
};

struct block_plan {
  index_t batch = 0, length = 0;
  batch_strides strides[6];
};

std::string shape_text(const array_arg& a) { return a.describe_shape(); }

/// The blocks must be dense: parscan addresses a vector or matrix as one run of elements.
void require_dense_blocks(const char* op, const blocked& b) {
  const array_arg& a = *b.array;
  if (a.size() == 0) return;  // nothing is addressed: an empty array's strides are arbitrary
  std::int64_t step = 1;
  for (int i = a.rank - 1; i >= a.rank - b.block_rank; --i) {
    if (a.shape[i] > 1 && a.strides[i] != step)
      fail(argument_error::value_error, op,
           std::string(a.name) + " (shape " + shape_text(a) + ") must be dense in its last " +
               (b.block_rank == 1 ? "dimension (the state vectors)" : "two dimensions (the matrices, row-major)") +
               "; pass a contiguous copy");
    step *= a.shape[i];
  }
}

/// The dimensions before the blocks of every array (one shape for all of them) are scanned
/// along `dim`; the others must collapse into one strided dimension, parscan's batch.
block_plan plan_blocks(const char* op, std::initializer_list<blocked> arrays, int dim) {
  array_arg leading[6];
  const array_arg* list[6];
  int n = 0;
  for (const blocked& b : arrays) {
    require_dense_blocks(op, b);
    leading[n] = *b.array;
    leading[n].rank = b.array->rank - b.block_rank;
    list[n] = &leading[n];
    ++n;
  }
  block_plan p;
  // Adding the arrays one at a time finds the first whose other dimensions need two strides.
  time_axis_plan t;
  for (int k = 1; k <= n; ++k) {
    t = plan_time_axis(op, list, k, dim);
    if (t.batch > 1 && t.channels > 1)
      fail(argument_error::value_error, op,
           std::string(list[k - 1]->name) + " (shape " + shape_text(*list[k - 1]) + " before its blocks) cannot be scanned along dim=" +
               std::to_string(dim) +
               " in place: its other dimensions need more than one stride (parscan's matrix operations take one "
               "batch stride); move dim to the front or next to the blocks (a copy)");
  }
  p.length = t.length;
  p.batch = t.batch * t.channels;  // one of them is 1 (or the batch is empty)
  for (int k = 0; k < n; ++k) {
    const recurrence_strides& s = t.strides[k];
    p.strides[k].batch = t.channels > 1 ? s.channel : s.batch;
    p.strides[k].step = s.time;
  }
  return p;
}

/// Dimensions of size 0 or 1 take no step, so their strides are never used; parscan still
/// checks output strides for self-overlap, so they are set to a dense tensor's.
void settle_unused_strides(block_plan& p, std::initializer_list<index_t> block_sizes) {
  int k = 0;
  for (index_t block : block_sizes) {
    if (p.length <= 1) p.strides[k].step = block;
    if (p.batch <= 1) p.strides[k].batch = block * (p.length > 1 ? p.length : 1);
    ++k;
  }
}

/// f(type_tag<T>{}) for the types the matrix operations are compiled for.
template <class F>
status visit_matrix_type(element_type t, F&& f) {
  switch (t) {
    case element_type::float64: return f(type_tag<double>{});
    case element_type::bfloat16: return f(type_tag<bfloat16>{});
    case element_type::float16: return f(type_tag<float16>{});
    default: return f(type_tag<float>{});
  }
}

/// W must be b's shape followed by N, b's last dimension.
void require_W_shape(const char* op, const array_arg& W, const array_arg& b) {
  bool ok = W.rank == b.rank + 1;
  for (int i = 0; ok && i < b.rank; ++i) ok = W.shape[i] == b.shape[i];
  ok = ok && W.shape[W.rank - 1] == b.shape[b.rank - 1];
  if (!ok)
    fail(argument_error::value_error, op,
         std::string(W.name) + " has shape " + W.describe_shape() + "; it must be " + b.name + "'s shape " +
             b.describe_shape() + " followed by N = " + std::to_string(b.shape[b.rank - 1]));
}

/// dim names a step dimension of b: any but the last, which holds the state.
int step_dim(const char* op, const array_arg& b, std::int64_t dim) {
  if (b.rank < 2)
    fail(argument_error::value_error, op,
         std::string(b.name) + " has shape " + b.describe_shape() + "; it needs a step dimension and the state (rank 2 or more)");
  array_arg leading = b;
  leading.rank = b.rank - 1;
  std::int64_t d = dim < 0 ? dim + b.rank : dim;
  if (d == b.rank - 1)
    fail(argument_error::value_error, op,
         "dim=" + std::to_string(dim) + " names the state dimension of " + b.name + "; it must name a step dimension");
  return normalize_dim(op, leading, d);
}

void require_n(const char* op, const array_arg& b) {
  const std::int64_t n = b.shape[b.rank - 1];
  if (n < 1 || n > 64)
    fail(argument_error::value_error, op,
         std::string(b.name) + " has state size N = " + std::to_string(n) + " (its last dimension); parscan takes N = 1..64");
}

/// Packed sequences have no batch dimension: b's dimensions other than dim and the state must
/// have size 1.
void require_unbatched(const char* op, const array_arg& b, const block_plan& p) {
  if (p.batch > 1)
    fail(argument_error::value_error, op,
         std::string(b.name) + " has shape " + b.describe_shape() +
             ": with cu_seqlens, its dimensions other than dim and the state must have size 1 (packed sequences "
             "have no batch dimension); pass (total, N) vectors and (total, N, N) matrices");
}

/// The library's call on the batch args (Batch) or, with cu_seqlens, the packed args (Packed),
/// `fill` setting the fields both have.
template <class Batch, class Packed, class Fill, class Call>
status run_matrix(const array_arg& where, std::uintptr_t stream, const scan_axis& states, const block_plan& p,
                  index_t n, Fill&& fill, Call&& call) {
  if (!states.packed()) {
    Batch g;
    g.batch = p.batch;
    g.length = p.length;
    g.n = n;
    fill(g);
    return run_on(where, stream, [&](const auto& backend) { return call(backend, g); });
  }
  if (p.batch == 0) return status::success;  // a dimension other than dim is empty: nothing to do
  Packed g;
  g.shape.sequences = states.sequences;
  g.shape.total_length = p.length;
  g.shape.n = n;
  fill(g);
  return run_packed(where, stream, states.op, *states.cu_seqlens, g, call);
}

}  // namespace

void matrix_forward(const matrix_forward_call& c) {
  const char* op = "matrix_recurrence";
  require_type(op, *c.b, matrix_types);
  const int dim = step_dim(op, *c.b, c.dim);
  require_like(op, *c.b, *c.W);
  require_W_shape(op, *c.W, *c.b);
  require_same_shape(op, *c.x, *c.b);
  require_n(op, *c.b);
  const scan_axis states = states_axis(op, *c.b, dim, c.cu_seqlens);
  if (c.x0) states.require_state_of(*c.x0);
  if (c.x_final) states.require_state_of(*c.x_final);
  block_plan p = plan_blocks(op, {{c.W, 2}, {c.b, 1}, {c.x, 1}}, dim);
  if (c.cu_seqlens) require_unbatched(op, *c.b, p);
  const index_t n = c.b->shape[c.b->rank - 1];
  settle_unused_strides(p, {n * n, n, n});

  const status s = visit_matrix_type(c.b->type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto fill = [&](auto& g) {
      g.W = input<T>(c.W);
      g.b = input<T>(c.b);
      g.x = output<T>(c.x);
      g.x0 = input<T>(c.x0);
      g.x_final = output<T>(c.x_final);
      g.reverse = c.reverse;
      g.W_strides = p.strides[0];
      g.b_strides = p.strides[1];
      g.x_strides = p.strides[2];
    };
    const auto call = [](const auto& backend, const auto& g) { return matrix_recurrence_forward(backend, g); };
    return run_matrix<matrix_forward_args<T>, matrix_varlen_forward_args<T>>(*c.b, c.stream, states, p, n, fill, call);
  });
  check_status(s, op, "W, b, x0 -> x, x_final");
}

void matrix_backward(const matrix_backward_call& c) {
  const char* op = "matrix_recurrence_backward";
  const array_arg* x_or_b = c.x ? c.x : c.b;  // the backward reads x, or recomputes it from b
  if (!x_or_b) fail(argument_error::value_error, op, "needs the forward's output x, or b to recompute it");
  require_type(op, *c.dx, matrix_types);
  const int dim = step_dim(op, *c.dx, c.dim);
  require_like(op, *c.dx, *c.W);
  require_W_shape(op, *c.W, *c.dx);
  require_W_shape(op, *c.dW, *c.dx);
  require_like(op, *c.dx, *c.dW);
  require_same_shape(op, *x_or_b, *c.dx);
  require_same_shape(op, *c.db, *c.dx);
  require_n(op, *c.dx);
  const scan_axis states = states_axis(op, *c.dx, dim, c.cu_seqlens);
  if (c.x0) {
    states.require_state_of(*c.x0);
    if (!c.dx0) fail(argument_error::value_error, op, "dx0 is required when x0 is given");
    states.require_state_of(*c.dx0);
  }
  if (c.dx_final) states.require_state_of(*c.dx_final);
  block_plan p = plan_blocks(op, {{c.W, 2}, {x_or_b, 1}, {c.dx, 1}, {c.dW, 2}, {c.db, 1}}, dim);
  if (c.cu_seqlens) require_unbatched(op, *c.dx, p);
  const index_t n = c.dx->shape[c.dx->rank - 1];
  settle_unused_strides(p, {n * n, n, n, n * n, n});

  const status s = visit_matrix_type(c.dx->type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto fill = [&](auto& g) {
      g.W = input<T>(c.W);
      g.x = input<T>(c.x);
      g.b = c.x ? nullptr : input<T>(c.b);
      g.x0 = input<T>(c.x0);
      g.dx = input<T>(c.dx);
      g.dx_final = input<T>(c.dx_final);
      g.dW = output<T>(c.dW);
      g.db = output<T>(c.db);
      g.dx0 = c.x0 ? output<T>(c.dx0) : nullptr;
      g.reverse = c.reverse;
      g.W_strides = p.strides[0];
      (c.x ? g.x_strides : g.b_strides) = p.strides[1];
      g.dx_strides = p.strides[2];
      g.dW_strides = p.strides[3];
      g.db_strides = p.strides[4];
    };
    const auto call = [](const auto& backend, const auto& g) { return matrix_recurrence_backward(backend, g); };
    return run_matrix<matrix_backward_args<T>, matrix_varlen_backward_args<T>>(*c.dx, c.stream, states, p, n, fill,
                                                                               call);
  });
  check_status(s, op, "W, x, x0, dx, dx_final -> dW, db, dx0");
}

void matrix_chain(const matrix_chain_call& c) {
  const char* op = "matrix_chain";
  require_type(op, *c.M, matrix_types);
  const array_arg& M = *c.M;
  if (M.rank < 3 || M.shape[M.rank - 1] != M.shape[M.rank - 2])
    fail(argument_error::value_error, op,
         std::string(M.name) + " has shape " + M.describe_shape() +
             "; it must be (..., n, d, d): square matrices after at least one chain dimension");
  const index_t d = M.shape[M.rank - 1];
  if (d < 1 || d > 1024)
    fail(argument_error::value_error, op, "the matrices are " + std::to_string(d) + "x" + std::to_string(d) + "; parscan takes d = 1..1024");
  array_arg leading = M;
  leading.rank = M.rank - 2;
  const std::int64_t given = c.dim < 0 ? c.dim + M.rank : c.dim;
  if (given >= leading.rank)
    fail(argument_error::value_error, op,
         "dim=" + std::to_string(c.dim) + " names a matrix dimension of " + M.name + "; it must name a chain dimension");
  const int dim = normalize_dim(op, leading, given);
  if (c.order < 0 || c.order > 1 || c.math < 0 || c.math > 2)
    fail(argument_error::value_error, op, "internal: order or math code out of range");

  block_plan p;
  if (c.prefixes) {
    require_same_shape(op, *c.out, M);
    p = plan_blocks(op, {{c.M, 2}, {c.out, 2}}, dim);
    settle_unused_strides(p, {d * d, d * d});
  } else {
    // The total is dense, of M's shape without dim: sequences are numbered in row-major order
    // of the remaining dimensions, exactly as plan_blocks numbers them.
    require_state(op, *c.out, M, dim);
    p = plan_blocks(op, {{c.M, 2}}, dim);
    settle_unused_strides(p, {d * d});
    p.strides[1] = {d * d, d * d};
  }

  const status s = visit_matrix_type(M.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    matrix_chain_args<T> g;
    g.batch = p.batch;
    g.count = p.length;
    g.d = d;
    g.M = input<T>(c.M);
    g.out = output<T>(c.out);
    g.output = c.prefixes ? chain_output::prefixes : chain_output::total;
    g.order = c.order == 0 ? chain_order::left_to_right : chain_order::right_to_left;
    g.math = c.math == 0 ? chain_math::exact : c.math == 1 ? chain_math::tf32 : chain_math::bf16;
    g.M_strides = p.strides[0];
    g.out_strides = p.strides[1];
    return run_on(M, c.stream, [&](const auto& backend) { return parscan::matrix_chain(backend, g); });
  });
  check_status(s, op, "M -> out");
}

}  // namespace parscan::python
