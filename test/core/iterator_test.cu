// test/core/iterator_test.cu — the generic algorithms with iterators on the CUDA backend: the
// backend-neutral cases of iterator_cases.inl (counting, constant, transform over zip, zip into
// zip with a user's tuple operator, transform_output and discard outputs), and the device-only
// ones here:
//   * 2^32 + 7 elements read from a transform over a counting iterator and written into a
//     discard iterator (carry_out only), a transform_output_iterator and a
//     tabulate_output_iterator whose functors compare every element with a closed form on the
//     device and count mismatches with an atomic: 64-bit counts and offsets all the way, in a
//     few bytes of memory;
//   * thrust::device_vector iterators and thrust::device_ptr, which travel as raw pointers
//     (the vector-load path, and the pointer checks for overlap), against the host reference.
#include <cstdint>
#include <type_traits>
#include <vector>

#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>
#include <thrust/iterator/tabulate_output_iterator.h>

#include "iterator_cases.inl"

namespace parscan_iterator_gpu {

using parscan::direction;
using parscan::index_t;
using parscan::sequence_layout;
using parscan::status;
using parscan_test::guarded_buffer;
using i64 = std::int64_t;
namespace cd = parscan::cuda_detail;

// ---------------------------------------------------------------------------------------------
// 2^32 + 7 elements: x[i] = i mod 7.

/// Σ_{j=0..i} (j mod 7), with S(-1) = 0: 21 per whole week, then 0 + 1 + … + (r-1).
PARSCAN_HD inline i64 week_sum(i64 i) {
  const i64 m = i + 1, r = m % 7;
  return 21 * (m / 7) + r * (r - 1) / 2;
}

struct mod7 {
  PARSCAN_HD i64 operator()(i64 i) const { return i % 7; }
};

/// An element that knows where it is: (index of the latest step, sum so far). The operator keeps
/// the later index and adds the sums, so a prefix names the step it ends at.
struct indexed_sum {
  i64 last, sum;
};
struct indexed_sum_op {
  PARSCAN_HD indexed_sum operator()(const indexed_sum& earlier, const indexed_sum& later) const {
    return {later.last, earlier.sum + later.sum};
  }
};
struct indexed_mod7 {
  PARSCAN_HD indexed_sum operator()(i64 i) const { return {i, i % 7}; }
};

/// Device-side counters, bumped by the output functors.
struct counters {
  unsigned long long mismatches, writes;
};

/// The expected prefix of step `last` (what the sequence holds from the carry c through that
/// step): c + S(last) forward, c + Σ_{j ≥ last} forward reverse (last = n for nothing yet).
struct closed_form {
  i64 n, c;
  bool reverse;
  PARSCAN_HD i64 at(i64 last) const { return c + (reverse ? week_sum(n - 1) - week_sum(last - 1) : week_sum(last)); }
};

/// For transform_output_iterator: checks the value against the closed form of the step it names
/// and writes nothing (its target is a discard iterator).
struct check_value {
  closed_form f;
  counters* count;
  __device__ int operator()(const indexed_sum& v) const {
    if (v.sum != f.at(v.last)) atomicAdd(&count->mismatches, 1ull);
    return 0;
  }
};

/// For tabulate_output_iterator: also checks that the value lands at its own position (the step
/// it names is the position, or the one before it in processing order for an exclusive scan),
/// and counts the writes (one atomic per converged group of lanes).
struct check_position {
  closed_form f;
  counters* count;
  int behind;  // 0 inclusive; exclusive: 1 forward, -1 reverse
  __device__ void operator()(std::ptrdiff_t index, const indexed_sum& v) const {
    if (v.last != index - behind || v.sum != f.at(v.last)) atomicAdd(&count->mismatches, 1ull);
    const unsigned group = __activemask();
    if (static_cast<int>(threadIdx.x % 32) == __ffs(group) - 1) atomicAdd(&count->writes, static_cast<unsigned long long>(__popc(group)));
  }
};

// ---------------------------------------------------------------------------------------------
// device_vector helpers: a vector with `guard` poisoned elements on each side of the payload.

template <class T>
struct guarded_device_vector {
  static constexpr std::size_t guard = 64;
  thrust::device_vector<T> v;
  std::size_t n;
  explicit guarded_device_vector(std::size_t n_) : v(n_ + 2 * guard), n(n_) {
    REQUIRE(cudaMemset(thrust::raw_pointer_cast(v.data()), parscan_test::poison_byte, v.size() * sizeof(T)) == cudaSuccess);
  }
  typename thrust::device_vector<T>::iterator begin() { return v.begin() + guard; }
  std::vector<T> all() const {
    std::vector<T> h(v.size());
    REQUIRE(cudaMemcpy(h.data(), thrust::raw_pointer_cast(v.data()), h.size() * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return h;
  }
};

template <class T>
bool is_poison(const T& x) {
  const auto* b = reinterpret_cast<const unsigned char*>(&x);
  for (std::size_t i = 0; i < sizeof(T); ++i)
    if (b[i] != parscan_test::poison_byte) return false;
  return true;
}

}  // namespace parscan_iterator_gpu

TEST_CASE(PARSCAN_TEST_NAME("iterator scans: 2^32 + 7 elements from a counting iterator, checked on the device"),
          PARSCAN_TEST_TAGS("[scan][iterators][large]")) {
  using namespace parscan_iterator_gpu;
  if (!parscan_test::long_shapes_wanted()) return;
  const i64 n = (i64(1) << 32) + 7;
  const auto be = parscan_test::backend();
  const bool reverse = GENERATE(false, true);
  INFO((reverse ? "reverse" : "forward"));
  PARSCAN_TEST_RNG(r, std::string("2^32 + 7 ") + (reverse ? "reverse" : "forward"));
  const i64 c = r.small_int(-1000000, 1000000);
  const direction dir = reverse ? direction::reverse : direction::forward;

  SECTION("int64 sum of i mod 7 into a discard iterator: carry_out and reduce") {
    const auto in = thrust::make_transform_iterator(thrust::counting_iterator<i64>(0), mod7{});
    guarded_buffer<i64> cin(std::vector<i64>{c}), cout(1), total(1);
    parscan::scan_options<i64> opts;
    opts.dir = dir;
    opts.carry_in = cin.data();
    opts.carry_out = cout.data();
    REQUIRE(parscan::inclusive_scan(be, in, thrust::make_discard_iterator(), n, parscan::sum_op<i64>{}, opts) == status::success);
    PARSCAN_TEST_SYNC();
    CHECK(cout.download()[0] == c + week_sum(n - 1));
    CHECK(cout.guards_intact());
    // Exclusive with init and no carry_in: the same total.
    cout.repoison();
    opts.carry_in = nullptr;
    REQUIRE(parscan::exclusive_scan(be, in, thrust::make_discard_iterator(), n, parscan::sum_op<i64>{}, c, opts) == status::success);
    PARSCAN_TEST_SYNC();
    CHECK(cout.download()[0] == c + week_sum(n - 1));
    opts.carry_in = cin.data();
    REQUIRE(parscan::reduce(be, in, sequence_layout::contiguous(n), parscan::sum_op<i64>{}, i64(0), total.data(), opts) ==
            status::success);
    PARSCAN_TEST_SYNC();
    CHECK(total.download()[0] == c + week_sum(n - 1));
    CHECK(total.guards_intact());
  }

  SECTION("every element checked on the device: transform_output_iterator and tabulate_output_iterator") {
    const auto in = thrust::make_transform_iterator(thrust::counting_iterator<i64>(0), indexed_mod7{});
    for (const bool exclusive : {false, true}) {
      INFO((exclusive ? "exclusive" : "inclusive"));
      guarded_buffer<counters> count(std::vector<counters>{{0, 0}});
      const closed_form f{n, c, reverse};
      // The carry names the step before the first: -1 forward, n reverse.
      const indexed_sum carry{reverse ? n : -1, c};
      guarded_buffer<indexed_sum> cin(std::vector<indexed_sum>{carry}), cout(1);
      parscan::scan_options<indexed_sum> opts;
      opts.dir = dir;
      opts.carry_out = cout.data();
      const auto checked = thrust::make_transform_output_iterator(thrust::make_discard_iterator(), check_value{f, count.data()});
      const auto tabulated = thrust::make_tabulate_output_iterator(check_position{f, count.data(), exclusive ? (reverse ? -1 : 1) : 0});
      status st;
      if (exclusive) {
        st = parscan::exclusive_scan(be, in, checked, n, indexed_sum_op{}, carry, opts);
        PARSCAN_TEST_SYNC();
        REQUIRE(st == status::success);
        opts.carry_in = cin.data();
        st = parscan::exclusive_scan(be, in, tabulated, n, indexed_sum_op{}, indexed_sum{0, 0}, opts);
      } else {
        opts.carry_in = cin.data();
        st = parscan::inclusive_scan(be, in, checked, n, indexed_sum_op{}, opts);
        PARSCAN_TEST_SYNC();
        REQUIRE(st == status::success);
        st = parscan::inclusive_scan(be, in, tabulated, n, indexed_sum_op{}, opts);
      }
      PARSCAN_TEST_SYNC();
      REQUIRE(st == status::success);
      const counters got = count.download()[0];
      CHECK(got.mismatches == 0);
      CHECK(got.writes == static_cast<unsigned long long>(n));
      const indexed_sum total = cout.download()[0];
      CHECK(total.last == (reverse ? 0 : n - 1));
      CHECK(total.sum == c + week_sum(n - 1));
    }
  }
}

TEST_CASE(PARSCAN_TEST_NAME("iterator scans: device_vector iterators and device_ptr run as raw pointers"),
          PARSCAN_TEST_TAGS("[scan][iterators][thrust]")) {
  using namespace parscan_iterator_gpu;
  using vec = thrust::device_vector<i64>;
  // They unwrap to the raw-pointer Problem: the same kernels as a call with pointers.
  static_assert(cd::unwraps_to_pointer<vec::iterator> && cd::unwraps_to_pointer<vec::const_iterator> &&
                    cd::unwraps_to_pointer<thrust::device_ptr<i64>>,
                "device_vector iterators and device_ptr unwrap");
  static_assert(std::is_same_v<cd::generic_problem_for<vec::const_iterator, vec::iterator, i64>, cd::generic_problem<i64, i64, i64>>,
                "the raw-pointer Problem");
  static_assert(!cd::unwraps_to_pointer<thrust::counting_iterator<i64>> &&
                    !cd::unwraps_to_pointer<thrust::transform_output_iterator<parscan_iterator_cases::negate_i64, i64*>>,
                "fancy iterators stay iterators");

  const auto be = parscan_test::backend();
  PARSCAN_TEST_RNG(r, "device_vector");
  const index_t n = 1000003;
  const std::vector<i64> x = r.vector(static_cast<std::size_t>(n), [](parscan_test::rng& g) { return g.small_int(-(i64(1) << 40), i64(1) << 40); });
  const vec in(x.begin(), x.end());
  const i64 c = r.small_int(-1000, 1000);

  const auto check_out = [&](const guarded_device_vector<i64>& out, bool exclusive, bool reverse) {
    const std::vector<i64> all = out.all();
    const std::size_t g = guarded_device_vector<i64>::guard;
    std::size_t unwritten = 0, guards = 0, wrong = 0;
    for (std::size_t i = 0; i < g; ++i) guards += !is_poison(all[i]) + !is_poison(all[g + out.n + i]);
    i64 run = c;
    for (index_t k = 0; k < n; ++k) {
      const auto t = static_cast<std::size_t>(reverse ? n - 1 - k : k);
      if (exclusive && all[g + t] != run) ++wrong;
      run += x[t];
      if (!exclusive && all[g + t] != run) ++wrong;
      unwritten += is_poison(all[g + t]);
    }
    CHECK(unwritten == 0);
    CHECK(guards == 0);
    CHECK(wrong == 0);
    return run;
  };

  SECTION("device_vector const_iterator in, device_vector iterator out, carries") {
    const bool reverse = GENERATE(false, true);
    INFO((reverse ? "reverse" : "forward"));
    guarded_device_vector<i64> out(static_cast<std::size_t>(n));
    guarded_buffer<i64> cin(std::vector<i64>{c}), cout(1);
    parscan::scan_options<i64> opts;
    opts.dir = reverse ? direction::reverse : direction::forward;
    opts.carry_in = cin.data();
    opts.carry_out = cout.data();
    REQUIRE(parscan::inclusive_scan(be, in.cbegin(), out.begin(), n, parscan::sum_op<i64>{}, opts) == status::success);
    PARSCAN_TEST_SYNC();
    const i64 total = check_out(out, false, reverse);
    CHECK(cout.download()[0] == total);
  }
  SECTION("device_ptr in, device_vector out, exclusive") {
    guarded_device_vector<i64> out(static_cast<std::size_t>(n));
    const thrust::device_ptr<const i64> p = thrust::device_pointer_cast(thrust::raw_pointer_cast(in.data()));
    REQUIRE(parscan::exclusive_scan(be, p, out.begin(), sequence_layout::contiguous(n), parscan::sum_op<i64>{}, c) == status::success);
    PARSCAN_TEST_SYNC();
    check_out(out, true, false);
  }
  SECTION("reduce of device_vector iterators") {
    guarded_buffer<i64> total(1);
    REQUIRE(parscan::reduce(be, in.begin(), n, parscan::sum_op<i64>{}, c, total.data()) == status::success);
    PARSCAN_TEST_SYNC();
    i64 want = c;
    for (i64 v : x) want += v;
    CHECK(total.download()[0] == want);
  }
  SECTION("the pointer checks apply: in place is fine, a shifted overlap is refused") {
    vec v(x.begin(), x.end());
    REQUIRE(parscan::inclusive_scan(be, v.begin(), v.begin() + 1, n - 1, parscan::sum_op<i64>{}) == status::overlapping_output);
    REQUIRE(parscan::inclusive_scan(be, thrust::device_pointer_cast(thrust::raw_pointer_cast(v.data())), v.begin(), n,
                                    parscan::sum_op<i64>{}) == status::success);
    PARSCAN_TEST_SYNC();
    std::vector<i64> got(static_cast<std::size_t>(n));
    REQUIRE(cudaMemcpy(got.data(), thrust::raw_pointer_cast(v.data()), got.size() * sizeof(i64), cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    i64 run = 0;
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) wrong += got[i] != (run += x[i]);
    CHECK(wrong == 0);
    // An empty device_vector's null pointer is fine with nothing to read.
    vec empty;
    CHECK(parscan::inclusive_scan(be, empty.begin(), empty.begin(), 0, parscan::sum_op<i64>{}) == status::success);
    PARSCAN_TEST_SYNC();
    // A null device_ptr with data to read is not.
    CHECK(parscan::inclusive_scan(be, thrust::device_ptr<i64>(), v.begin(), n, parscan::sum_op<i64>{}) == status::null_pointer);
  }
}
