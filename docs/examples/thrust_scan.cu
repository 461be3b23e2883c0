// docs/examples/thrust_scan.cu — parscan's generic scans on Thrust containers and iterators.
//
//  1. A thrust::device_vector scanned with a user-written functor (a running maximum that
//     remembers where it was reached). device_vector iterators are passed as they are; parscan
//     unwraps them to raw pointers, so this is exactly the call with pointers.
//  2. A selective-scan step, h[t] = exp(-Δ[t]·A)·h[t-1] + Δ[t]·x[t], with the gates computed on
//     the fly from Δ and x by a transform_iterator over a zip_iterator (never stored), and only
//     the state h kept, through a transform_output_iterator.
//
// Build with nvcc (the CMake target `thrust_scan` when the CUDA backend is on); needs a GPU.
#include <parscan/parscan.cuh>

#include <cmath>
#include <cstdio>
#include <vector>

#include <thrust/device_vector.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/transform_output_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/tuple.h>

struct best {
  float value;
  int index;
};

// Associative, not commutative: on ties the earlier element wins.
struct keep_best {
  PARSCAN_HD best operator()(const best& earlier, const best& later) const {
    return later.value > earlier.value ? later : earlier;
  }
};

// (Δ, x) ↦ the step's affine map h ↦ exp(-Δ·A)·h + Δ·x.
struct selective_step {
  float A;
  template <class DeltaX>
  PARSCAN_HD parscan::affine<float> operator()(const DeltaX& dx) const {
    const float delta = thrust::get<0>(dx), x = thrust::get<1>(dx);
    return parscan::affine<float>(expf(-delta * A), delta * x);
  }
};

// A composed map (A, B) applied to h[-1] = 0 is B: the state.
struct state_of {
  PARSCAN_HD float operator()(const parscan::affine<float>& m) const { return m.b; }
};

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 1;
  }
  const parscan::cuda_backend be{};  // default stream

  // 1. device_vector in, device_vector out, user functor.
  const std::vector<best> h_in{{3, 0}, {1, 1}, {4, 2}, {1, 3}, {5, 4}, {9, 5}, {2, 6}};
  const thrust::device_vector<best> in(h_in.begin(), h_in.end());
  thrust::device_vector<best> out(in.size());
  parscan::status s = parscan::inclusive_scan(be, in.begin(), out.begin(), parscan::index_t(in.size()), keep_best{});
  if (s != parscan::status::success) {
    std::printf("inclusive_scan: %s\n", parscan::to_string(s));
    return 1;
  }
  std::vector<best> h_out(out.size());
  thrust::copy(out.begin(), out.end(), h_out.begin());  // synchronises with the default stream
  for (const best& b : h_out) std::printf("%g@%d ", b.value, b.index);  // 3@0 3@0 4@2 4@2 5@4 9@5 9@5
  std::printf("\n");

  // 2. Gates computed on the fly, only the state written.
  const int T = 1 << 20;
  const float A = 1.5f;
  std::vector<float> h_delta(T), h_x(T);
  for (int t = 0; t < T; ++t) h_delta[t] = 0.01f + 0.2f * float(t % 97) / 97, h_x[t] = std::sin(0.001f * t);
  const thrust::device_vector<float> delta(h_delta.begin(), h_delta.end()), x(h_x.begin(), h_x.end());
  thrust::device_vector<float> h(T);
  const auto steps =
      thrust::make_transform_iterator(thrust::make_zip_iterator(thrust::make_tuple(delta.begin(), x.begin())), selective_step{A});
  const auto states = thrust::make_transform_output_iterator(h.begin(), state_of{});
  s = parscan::inclusive_scan(be, steps, states, T, parscan::affine_op<float>{});
  if (s != parscan::status::success) {
    std::printf("inclusive_scan: %s\n", parscan::to_string(s));
    return 1;
  }
  std::vector<float> got(T);
  thrust::copy(h.begin(), h.end(), got.begin());
  double state = 0, worst = 0;
  for (int t = 0; t < T; ++t) {
    state = std::exp(-double(h_delta[t]) * A) * state + double(h_delta[t]) * h_x[t];
    worst = std::fmax(worst, std::fabs(got[t] - state));
  }
  std::printf("selective scan of %d steps: h[T-1] = %.6f, max |error| vs a double loop = %.2e\n", T, got[T - 1], worst);
  const bool ok = h_out.back().index == 5 && worst < 1e-4;
  std::printf(ok ? "ok\n" : "FAILED\n");
  return ok ? 0 : 1;
}
