// test/core/host_parallel_test.cpp — the host backend's parallel machinery (parscan/host/
// parallel_for.hpp, parscan/host/scan.hpp): the job runner, the chunking rule, chunked scans
// checked exactly against the sequential reference (support/reference.hpp) with operators that
// are neither commutative nor given an identity, bitwise reproducibility across thread counts,
// batches in strided layouts, and refusals that write nothing.
//
// Every run: fresh random input (holes of strided layouts included), outputs and carries
// poisoned first, then checked element by element, checked fully written where the layout
// addresses it and untouched elsewhere, with intact guard bands.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/env.hpp"
#include "support/random.hpp"
#include "support/reference.hpp"

namespace {

using parscan::direction;
using parscan::index_t;
using parscan::scan_kind;
using parscan::sequence_layout;
using parscan::status;
using parscan_test::guarded_buffer;
using parscan_test::rng;
namespace ref = parscan_test::ref;
namespace hd = parscan::host::detail;

// ---------------------------------------------------------------------------------------------
// Two exact, associative, non-commutative operators. Neither has an identity the library could
// know of: a default-constructed value (the zero matrix, the map x ↦ 0) absorbs everything, so
// a backend that started a prefix from Acc{} would be caught at once.

struct mat2 {
  std::int64_t m[4];  // [[m0, m1], [m2, m3]], entries in [0, p)
};

// 2×2 integer matrices under product modulo a prime: op(earlier, later) = earlier · later.
struct mat2_mod_op {
  static constexpr std::int64_t p = 1000003;
  mat2 operator()(const mat2& e, const mat2& l) const {
    return {{(e.m[0] * l.m[0] + e.m[1] * l.m[2]) % p, (e.m[0] * l.m[1] + e.m[1] * l.m[3]) % p,
             (e.m[2] * l.m[0] + e.m[3] * l.m[2]) % p, (e.m[2] * l.m[1] + e.m[3] * l.m[3]) % p}};
  }
};

// x ↦ a·x + b over the integers modulo 2^64, composed as "later after earlier".
struct affine_u64 {
  std::uint64_t a, b;
};

struct affine_u64_op {
  affine_u64 operator()(const affine_u64& e, const affine_u64& l) const { return {l.a * e.a, l.a * e.b + l.b}; }
};

struct mat2_case {
  static constexpr const char* name = "2x2 matrix product mod p";
  using value_t = mat2;
  using op_t = mat2_mod_op;
  static mat2 draw(rng& r) {
    mat2 x;
    for (auto& v : x.m) v = r.small_int(0, mat2_mod_op::p - 1);
    return x;
  }
  // Written independently of mat2_mod_op: (E·L)[i][j] = Σ_k E[i][k]·L[k][j] mod p.
  static mat2 ref_op(const mat2& e, const mat2& l) {
    mat2 r;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        std::int64_t s = 0;
        for (int k = 0; k < 2; ++k) s = (s + e.m[2 * i + k] * l.m[2 * k + j]) % mat2_mod_op::p;
        r.m[2 * i + j] = s;
      }
    return r;
  }
  static bool equal(const mat2& x, const mat2& y) { return std::memcmp(&x, &y, sizeof(mat2)) == 0; }
};

struct affine_u64_case {
  static constexpr const char* name = "affine maps mod 2^64";
  using value_t = affine_u64;
  using op_t = affine_u64_op;
  static affine_u64 draw(rng& r) { return {r.bits() | 1u, r.bits()}; }  // odd a: no product collapses to 0
  // x ↦ l.a·(e.a·x + e.b) + l.b, spelled out.
  static affine_u64 ref_op(const affine_u64& e, const affine_u64& l) {
    affine_u64 r;
    r.a = e.a * l.a;
    r.b = e.b * l.a;
    r.b += l.b;
    return r;
  }
  static bool equal(const affine_u64& x, const affine_u64& y) { return x.a == y.a && x.b == y.b; }
};

// ---------------------------------------------------------------------------------------------
// One configuration, run through the public forms or through the host backend's machinery
// with a plan of the test's own, and checked exactly.

struct config {
  scan_kind kind = scan_kind::inclusive;
  direction dir = direction::forward;
  std::string layout_name = "contiguous";
  sequence_layout in_layout, out_layout;
  bool carry_in = false, carry_out = false, in_place = false;
};

inline ref::kind ref_kind(scan_kind k) {
  return k == scan_kind::inclusive ? ref::kind::inclusive : k == scan_kind::exclusive ? ref::kind::exclusive : ref::kind::reduce;
}

inline std::string describe(const char* op_name, const config& c, const std::string& runner) {
  return std::string(op_name) + " " + ref::to_string(ref_kind(c.kind)) +
         (c.dir == direction::reverse ? " reverse" : " forward") + " layout=" + c.layout_name +
         " sequences=" + std::to_string(c.in_layout.num_sequences()) + " length=" + std::to_string(c.in_layout.length) +
         (c.carry_in ? " carry_in" : "") + (c.carry_out ? " carry_out" : "") + (c.in_place ? " in-place" : "") + " " +
         runner;
}

/// The public forms on host_backend{threads}.
struct public_forms {
  int threads;
  std::string name() const { return "host_backend{" + std::to_string(threads) + "}"; }
  template <class T, class Op>
  status operator()(scan_kind k, const T* in, const sequence_layout& il, T* out, const sequence_layout& ol,
                    const parscan::scan_options<T>& opts, const T& init, T* result) const {
    const parscan::host_backend be{threads};
    if (k == scan_kind::inclusive) return parscan::inclusive_scan(be, in, il, out, ol, Op{}, opts);
    if (k == scan_kind::exclusive) return parscan::exclusive_scan(be, in, il, out, ol, Op{}, init, opts);
    return parscan::reduce(be, in, il, Op{}, init, result, opts);
  }
};

/// run_scan's validation and machinery, with a plan of the test's own: chunks far shorter than
/// the library would cut, so short sequences make many chunks. Builds the problem the way the
/// convenience forms of parscan/scan.hpp do (the one place here that knows scan_problem's
/// members).
struct own_plan {
  hd::scan_plan plan;
  std::string name() const {
    return "plan{chunk_length=" + std::to_string(plan.chunk_length) + ", threads=" + std::to_string(plan.threads) + "}";
  }
  template <class T, class Op>
  status operator()(scan_kind k, const T* in, const sequence_layout& il, T* out, const sequence_layout& ol,
                    parscan::scan_options<T> opts, const T& init, T* result) const {
    if (k == scan_kind::reduce) opts.carry_out = result, out = nullptr;
    const parscan::scan_problem<T, T, T> p{k, in, il, out, k == scan_kind::reduce ? il : ol, opts, init, k != scan_kind::inclusive};
    if (status s = parscan::detail::validate(p); s != status::success) return s;
    return hd::scan_with_plan(p, Op{}, plan);
  }
};

/// Checks an output buffer against its layout: addressed elements written, the others equal to
/// `holes` (poison, or the input for an in-place run), guards intact.
template <class T>
void check_coverage(const guarded_buffer<T>& buf, const std::vector<T>& contents, const sequence_layout& l,
                    const std::vector<T>* holes) {
  CHECK(buf.guards_intact());
  const std::vector<bool> cov = ref::covered(l, contents.size());
  std::vector<std::size_t> unwritten, clobbered;
  for (std::size_t i = 0; i < contents.size(); ++i) {
    if (cov[i]) {
      if (!holes && buf.is_poison(contents[i])) unwritten.push_back(i);
    } else if (holes ? std::memcmp(&contents[i], &(*holes)[i], sizeof(T)) != 0 : !buf.is_poison(contents[i])) {
      clobbered.push_back(i);
    }
  }
  if (!unwritten.empty()) FAIL_CHECK("output elements never written: " << parscan_test::first_positions(unwritten));
  if (!clobbered.empty())
    FAIL_CHECK("elements outside the output layout that changed: " << parscan_test::first_positions(clobbered));
}

template <class Case, class Runner>
void check_exact(const config& cfg, const Runner& run) {
  using T = typename Case::value_t;
  const std::string what = describe(Case::name, cfg, run.name());
  INFO(what);
  PARSCAN_TEST_RNG(r, what);

  const bool reduce = cfg.kind == scan_kind::reduce;
  const sequence_layout& il = cfg.in_layout;
  const sequence_layout& ol = cfg.in_place ? cfg.in_layout : cfg.out_layout;
  const auto n_seq = static_cast<std::size_t>(ref::num_sequences(il));

  const std::vector<T> in_host = r.vector(static_cast<std::size_t>(ref::span(il)), Case::draw);
  guarded_buffer<T> in_buf(in_host);
  const std::vector<T> carry_in_host = r.vector(n_seq, Case::draw);
  guarded_buffer<T> carry_in_buf(carry_in_host);
  const T init = Case::draw(r);
  guarded_buffer<T> out_buf(reduce || cfg.in_place ? 0 : static_cast<std::size_t>(ref::span(ol)));
  guarded_buffer<T> carry_out_buf(n_seq);  // carry_out, or reduce's result
  guarded_buffer<T> ignored_buf(n_seq);    // reduce: opts.carry_out, which reduce must ignore

  parscan::scan_options<T> opts;
  opts.dir = cfg.dir;
  if (cfg.carry_in) opts.carry_in = carry_in_buf.data();
  if (cfg.carry_out) opts.carry_out = reduce ? ignored_buf.data() : carry_out_buf.data();
  T* out = reduce ? nullptr : cfg.in_place ? in_buf.data() : out_buf.data();
  const status st = run.template operator()<T, typename Case::op_t>(cfg.kind, in_buf.data(), il, out, ol, opts, init,
                                                                     carry_out_buf.data());
  REQUIRE(st == status::success);

  std::vector<T> carry_in_ref(carry_in_host);
  const ref::result<T> expected = ref::scan(ref_kind(cfg.kind), ref::gather(in_host, il), Case::ref_op,
                                            cfg.dir == direction::reverse, std::optional<T>(init),
                                            cfg.carry_in ? &carry_in_ref : nullptr);

  if (!cfg.in_place) CHECK(parscan_test::bit_identical(in_buf.download(), in_host));
  CHECK(in_buf.guards_intact());
  CHECK(parscan_test::bit_identical(carry_in_buf.download(), carry_in_host));

  if (!reduce) {
    const guarded_buffer<T>& ob = cfg.in_place ? in_buf : out_buf;
    const std::vector<T> got = ob.download();
    check_coverage(ob, got, ol, cfg.in_place ? &in_host : nullptr);
    const std::string bad = ref::first_mismatches(ref::gather(got, ol), expected.out, Case::equal);
    INFO("output differs from the reference at: " << bad);
    CHECK(bad.empty());
  }
  if (reduce || cfg.carry_out) {
    CHECK(carry_out_buf.guards_intact());
    const std::vector<T> got = carry_out_buf.download();
    std::vector<std::size_t> missing, spurious, wrong;
    for (std::size_t s = 0; s < n_seq; ++s) {
      const bool written = !carry_out_buf.is_poison(got[s]);
      if (expected.carry[s] && !written) missing.push_back(s);
      if (!expected.carry[s] && written) spurious.push_back(s);
      if (expected.carry[s] && written && !Case::equal(got[s], *expected.carry[s])) wrong.push_back(s);
    }
    if (!missing.empty()) FAIL_CHECK("carry_out not written at " << parscan_test::first_positions(missing));
    if (!spurious.empty()) FAIL_CHECK("carry_out written where nothing is defined, at " << parscan_test::first_positions(spurious));
    if (!wrong.empty()) FAIL_CHECK("carry_out differs from the reference at " << parscan_test::first_positions(wrong));
  } else {
    CHECK(carry_out_buf.untouched());
  }
  CHECK(ignored_buf.untouched());
}

template <class Runner>
void check_both_operators(int op, const config& cfg, const Runner& run) {
  if (op == 0) check_exact<affine_u64_case>(cfg, run);
  else check_exact<mat2_case>(cfg, run);
}

inline scan_kind kind_of(int i) { return i == 0 ? scan_kind::inclusive : i == 1 ? scan_kind::exclusive : scan_kind::reduce; }
inline direction dir_of(int i) { return i == 0 ? direction::forward : direction::reverse; }

/// (groups, count, length) with gaps: step stride 3, sequence stride 3·length + 1, and 5
/// unused elements between groups.
inline sequence_layout odd_layout(index_t groups, index_t count, index_t length) {
  sequence_layout l;
  l.count = count;
  l.length = length;
  l.step_stride = 3;
  l.sequence_stride = 3 * length + 1;
  l.groups = groups;
  l.group_stride = count * l.sequence_stride + 5;
  return l;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The job runner.

TEST_CASE("host parallel: parallel_for runs every job exactly once", "[host-parallel][parallel_for]") {
  const auto jobs = static_cast<index_t>(GENERATE(0, 1, 2, 3, 17, 1000));
  const int threads = GENERATE(-1, 0, 1, 2, 3, 8, 64);
  CAPTURE(jobs, threads);
  std::vector<std::atomic<int>> runs(static_cast<std::size_t>(jobs));
  for (auto& r : runs) r = 0;
  hd::parallel_for(jobs, threads, [&](index_t i) { runs[static_cast<std::size_t>(i)].fetch_add(1); });
  std::vector<std::size_t> wrong;
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (runs[i] != 1) wrong.push_back(i);
  if (!wrong.empty()) FAIL("jobs not run exactly once: " << parscan_test::first_positions(wrong));
}

TEST_CASE("host parallel: parallel_for shares jobs out over threads", "[host-parallel][parallel_for]") {
  std::mutex m;
  std::set<std::thread::id> ids;
  // Jobs that take a while, so the calling thread cannot finish them all before the others start.
  hd::parallel_for(64, 4, [&](index_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
  });
  CHECK(ids.size() > 1);
  CHECK(ids.size() <= 4);
  CHECK(ids.count(std::this_thread::get_id()) == 1);  // the calling thread works too

  ids.clear();
  hd::parallel_for(64, 1, [&](index_t) { ids.insert(std::this_thread::get_id()); });
  CHECK(ids.size() == 1);
  CHECK(ids.count(std::this_thread::get_id()) == 1);
}

TEST_CASE("host parallel: a job's exception reaches the caller after every thread is joined",
          "[host-parallel][parallel_for]") {
  const int threads = GENERATE(1, 2, 5);
  CAPTURE(threads);
  std::atomic<int> started{0};
  const auto run = [&] {
    hd::parallel_for(200, threads, [&](index_t i) {
      started.fetch_add(1);
      if (i == 7) throw std::runtime_error("job 7");
    });
  };
  CHECK_THROWS_AS(run(), std::runtime_error);
  CHECK(started.load() >= 8);  // jobs are claimed in order: 0..7 ran
}

// ---------------------------------------------------------------------------------------------
// The plan.

TEST_CASE("host parallel: the chunking rule depends on the length alone", "[host-parallel][plan]") {
  // Below the threshold: one chunk, the plain loop.
  for (index_t n : {index_t(0), index_t(1), index_t(1000), hd::chunked_min_length - 1}) CHECK(hd::chunk_length(n) == n);
  CHECK(hd::chunked_min_length == (index_t(1) << 17));
  CHECK(hd::chunk_length(index_t(1) << 17) == (index_t(1) << 16));
  CHECK(hd::chunk_length(index_t(1) << 26) == (index_t(1) << 16));
  CHECK(hd::chunk_length(index_t(1) << 30) == (index_t(1) << 20));
  CHECK(hd::chunk_length((index_t(1) << 30) + 1) == (index_t(1) << 20) + 1024);
  // From the threshold on: 2 to 1024 chunks of at least 2^16 steps, a multiple of 1024.
  for (index_t n = hd::chunked_min_length; n < (index_t(1) << 40); n = n * 3 / 2 + 7) {
    const index_t l = hd::chunk_length(n), chunks = (n + l - 1) / l;
    CAPTURE(n, l, chunks);
    CHECK(l >= hd::min_chunk_length);
    CHECK(l % 1024 == 0);
    CHECK(chunks >= 2);
    CHECK(chunks <= hd::max_chunks);
  }
}

TEST_CASE("host parallel: threads only where the work is worth them", "[host-parallel][plan]") {
  const auto plan = [](int threads, index_t sequences, index_t length) {
    return hd::plan_scan(parscan::host_backend{threads}, sequence_layout::time_contiguous(sequences, length));
  };
  CHECK(parscan::host_backend{}.threads == 0);
  CHECK(plan(0, 1, 1000).threads == 1);          // too little work: no thread is started
  CHECK(plan(8, 100, 300).threads == 1);         // 30000 elements
  CHECK(plan(8, 1, index_t(1) << 16).threads == 2);
  CHECK(plan(3, 1, index_t(1) << 20).threads == 3);
  CHECK(plan(1, 64, index_t(1) << 20).threads == 1);
  CHECK(plan(0, 64, index_t(1) << 20).threads == hd::hardware_threads());
  CHECK(plan(-2, 64, index_t(1) << 20).threads == hd::hardware_threads());
  // The chunk length follows the length whatever the threads.
  for (int t : {0, 1, 2, 7}) CHECK(plan(t, 3, (index_t(1) << 20) + 5).chunk_length == hd::chunk_length((index_t(1) << 20) + 5));
}

// ---------------------------------------------------------------------------------------------
// Chunked scans, exact.

TEST_CASE("host parallel: fine chunks of short sequences equal the sequential reference",
          "[host-parallel][chunks]") {
  // The machinery of run_scan with chunks far shorter than it would cut: many chunks, lengths
  // that are and are not multiples of the chunk, single steps, empty sequences.
  const int op = GENERATE(0, 1);
  const auto n = static_cast<index_t>(GENERATE(0, 1, 2, 5, 64, 1000));
  const auto chunk = static_cast<index_t>(GENERATE(1, 3, 64, 999));
  const int lp = GENERATE(0, 1, 2);
  const int k = GENERATE(0, 1, 2);
  const int d = GENERATE(0, 1);
  const int carry = GENERATE(0, 1, 2, 3);
  const bool in_place = GENERATE(false, true);
  if (in_place && k == 2) return;  // reduce writes no output
  config cfg;
  cfg.kind = kind_of(k);
  cfg.dir = dir_of(d);
  cfg.carry_in = carry & 1, cfg.carry_out = carry & 2;
  cfg.in_place = in_place;
  if (lp == 0) cfg.layout_name = "contiguous", cfg.in_layout = cfg.out_layout = sequence_layout::contiguous(n);
  // 21 interleaved sequences: a full block of side-by-side lanes and a partial one.
  if (lp == 1) cfg.layout_name = "channel_last(3, n, 7)", cfg.in_layout = cfg.out_layout = sequence_layout::channel_last(3, n, 7);
  if (lp == 2) {
    cfg.layout_name = "odd strides (2, 3, n) -> channel_last(2, n, 3)";
    cfg.in_layout = odd_layout(2, 3, n);
    cfg.out_layout = sequence_layout::channel_last(2, n, 3);
    if (in_place) return;  // in place needs one layout
  }
  check_both_operators(op, cfg, own_plan{{chunk, 4}});
}

TEST_CASE("host parallel: lengths around the chunking threshold equal the sequential reference",
          "[host-parallel][threshold]") {
  // Below, at and above chunked_min_length; 2, 3 and 5 chunks, the last one full or not.
  const auto n = static_cast<index_t>(GENERATE(131071, 131072, 131073, 3 * 65536 + 5, 5 * 65536));
  const int k = GENERATE(0, 1, 2);
  const int d = GENERATE(0, 1);
  const int carry = GENERATE(0, 1, 2, 3);
  const bool in_place = GENERATE(false, true);
  const int threads = GENERATE(0, 3);
  if (in_place && k == 2) return;
  config cfg;
  cfg.kind = kind_of(k);
  cfg.dir = dir_of(d);
  cfg.carry_in = carry & 1, cfg.carry_out = carry & 2;
  cfg.in_place = in_place;
  cfg.in_layout = cfg.out_layout = sequence_layout::contiguous(n);
  check_exact<affine_u64_case>(cfg, public_forms{threads});
  // The 2×2 matrices too, where the work is heavier per step (fewer variants).
  if (carry == 3 && threads == 0) check_exact<mat2_case>(cfg, public_forms{threads});
}

TEST_CASE("host parallel: batches in strided layouts equal the sequential reference", "[host-parallel][batch]") {
  const int lp = GENERATE(range(0, 7));
  const int k = GENERATE(0, 1, 2);
  const int d = GENERATE(0, 1);
  const int carry = GENERATE(0, 3);
  const bool in_place = GENERATE(false, true);
  const int threads = GENERATE(0, 5);
  if (in_place && k == 2) return;
  config cfg;
  cfg.kind = kind_of(k);
  cfg.dir = dir_of(d);
  cfg.carry_in = cfg.carry_out = carry == 3;
  cfg.in_place = in_place;
  const index_t long_n = hd::chunked_min_length + 3;  // chunked: 3 chunks, the last one of 3 steps
  switch (lp) {
    case 0: cfg.layout_name = "time_contiguous(1000, 37)", cfg.in_layout = sequence_layout::time_contiguous(1000, 37); break;
    case 1: cfg.layout_name = "channel_last(8, 300, 33)", cfg.in_layout = sequence_layout::channel_last(8, 300, 33); break;
    case 2: cfg.layout_name = "channel_last(50, 20, 1)", cfg.in_layout = sequence_layout::channel_last(50, 20, 1); break;
    case 3: cfg.layout_name = "odd strides (3, 40, 129)", cfg.in_layout = odd_layout(3, 40, 129); break;
    case 4:
      cfg.layout_name = "odd strides (3, 40, 129) -> channel_last(3, 129, 40)";
      cfg.in_layout = odd_layout(3, 40, 129);
      cfg.out_layout = sequence_layout::channel_last(3, 129, 40);
      if (in_place) return;
      break;
    case 5: cfg.layout_name = "time_contiguous(3, 2^17 + 3)", cfg.in_layout = sequence_layout::time_contiguous(3, long_n); break;
    default: cfg.layout_name = "channel_last(2, 2^17 + 3, 3)", cfg.in_layout = sequence_layout::channel_last(2, long_n, 3); break;
  }
  if (lp != 4) cfg.out_layout = cfg.in_layout;
  check_exact<affine_u64_case>(cfg, public_forms{threads});
}

TEST_CASE("host parallel: bad arguments to long scans are refused and nothing is written",
          "[host-parallel][validation]") {
  // Long enough to be chunked and shared out over threads, had the arguments been good.
  using T = std::int64_t;
  using op_t = parscan::sum_op<T>;
  const index_t n = index_t(1) << 18;
  PARSCAN_TEST_RNG(r, "bad arguments to long scans");
  const parscan::host_backend be{4};
  const std::vector<T> in_host = r.vector(static_cast<std::size_t>(n), [](rng& g) { return g.small_int(-1000, 1000); });
  guarded_buffer<T> in(in_host), out(static_cast<std::size_t>(n)), cout(4), result(4);
  const auto expect = [&](status expected, status got) {
    CHECK(got == expected);
    CHECK(out.untouched());
    CHECK(cout.untouched());
    CHECK(result.untouched());
    CHECK(in.download() == in_host);
    CHECK(in.guards_intact());
  };
  parscan::scan_options<T> opts;
  opts.carry_out = cout.data();
  const sequence_layout one = sequence_layout::contiguous(n);
  const sequence_layout four = sequence_layout::time_contiguous(4, n / 4);
  // Output one element past the input: overlapping, not exactly aliased.
  expect(status::overlapping_output, parscan::inclusive_scan(be, in.data(), in.data() + 1, n - 1, op_t{}, opts));
  expect(status::null_pointer, parscan::exclusive_scan(be, in.data(), static_cast<T*>(nullptr), four, op_t{}, T(3), opts));
  expect(status::shape_mismatch, parscan::inclusive_scan(be, in.data(), one, out.data(), four, op_t{}, opts));
  opts.carry_out = out.data() + 17;  // inside the output
  expect(status::overlapping_output, parscan::inclusive_scan(be, in.data(), out.data(), four, op_t{}, opts));
  expect(status::overlapping_output, parscan::reduce(be, in.data(), four, op_t{}, T(0), in.data() + 5));
  expect(status::null_pointer, parscan::reduce(be, in.data(), four, op_t{}, T(0), static_cast<T*>(nullptr)));
}

// ---------------------------------------------------------------------------------------------
// Floating point: the same bits on any number of threads.

namespace {

template <class T>
struct float_run {
  std::vector<T> out;
  std::vector<T> carry;
};

template <class T, class Op>
float_run<T> run_float(int threads, scan_kind k, const std::vector<T>& in, const std::vector<T>& carry_in, direction dir) {
  const auto n = static_cast<index_t>(in.size());
  float_run<T> r;
  r.out.assign(k == scan_kind::reduce ? 0 : in.size(), T{});
  r.carry.assign(1, T{});
  parscan::scan_options<T> opts;
  opts.dir = dir;
  opts.carry_in = carry_in.data();
  opts.carry_out = r.carry.data();
  const parscan::host_backend be{threads};
  const sequence_layout l = sequence_layout::contiguous(n);
  status st = status::unsupported;
  if (k == scan_kind::inclusive) st = parscan::inclusive_scan(be, in.data(), r.out.data(), l, Op{}, opts);
  if (k == scan_kind::exclusive) st = parscan::exclusive_scan(be, in.data(), r.out.data(), l, Op{}, carry_in[0], opts);
  if (k == scan_kind::reduce) st = parscan::reduce(be, in.data(), l, Op{}, carry_in[0], r.carry.data(), opts);
  REQUIRE(st == status::success);
  return r;
}

/// Runs one kind on host_backend{threads} and checks, for every other thread count, the same
/// bits; carry_out (= carry_in ⊕ x[0] ⊕ … ⊕ x[n-1] in every kind) also against float64.
template <class T, class Op>
void check_reproducible(const char* name, index_t n, int k, int d, T (*draw)(rng&),
                        double (*total_error)(const std::vector<T>&, const T&, bool, const T&), double tolerance) {
  const std::string what = std::string(name) + " n=" + std::to_string(n) + " " + ref::to_string(ref_kind(kind_of(k))) +
                           (d ? " reverse" : " forward");
  INFO(what);
  PARSCAN_TEST_RNG(r, what);
  const std::vector<T> in = r.vector(static_cast<std::size_t>(n), draw);
  const std::vector<T> carry_in{draw(r)};
  const float_run<T> one = run_float<T, Op>(1, kind_of(k), in, carry_in, dir_of(d));
  for (int threads : {2, 3, 7, 0}) {
    INFO("threads = " << threads << " against threads = 1");
    const float_run<T> many = run_float<T, Op>(threads, kind_of(k), in, carry_in, dir_of(d));
    CHECK(parscan_test::bit_identical(many.out, one.out));
    CHECK(parscan_test::bit_identical(many.carry, one.carry));
  }
  // Right, not only reproducible: the total against a float64 sequential loop.
  const double err = total_error(in, carry_in[0], d == 1, one.carry[0]);
  INFO("carry_out error against float64: " << err << ", tolerance " << tolerance);
  CHECK(err <= tolerance);
}

float draw_float(rng& r) { return static_cast<float>(r.uniform(0.5, 1.5)); }

// Relative error of the sum.
double sum_error(const std::vector<float>& in, const float& c, bool, const float& total) {
  double s = c;
  for (float x : in) s += x;
  return std::fabs(total - s) / std::fabs(s);
}

parscan::affine<float> draw_affine(rng& r) { return {static_cast<float>(r.gate()), static_cast<float>(r.signed_unit())}; }

// Error of the composed map's coefficients, on the data's scale (gates below 1, offsets below 1
// in magnitude: every state stays of order 1).
double affine_error(const std::vector<parscan::affine<float>>& in, const parscan::affine<float>& c, bool reverse,
                    const parscan::affine<float>& total) {
  double a = c.a, b = c.b;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const parscan::affine<float>& x = in[reverse ? in.size() - 1 - i : i];
    a = x.a * a;
    b = x.a * b + x.b;
  }
  return std::max(std::fabs(total.a - a), std::fabs(total.b - b));
}

}  // namespace

TEST_CASE("host parallel: float results are bitwise the same on any number of threads",
          "[host-parallel][reproducible]") {
  // 3·2^20 + 17 steps: 49 chunks, the last one of 17 steps; and either side of the threshold.
  const auto n = static_cast<index_t>(GENERATE(3 * (1 << 20) + 17, 131071, 131072));
  const int k = GENERATE(0, 1, 2);
  const int d = GENERATE(0, 1);
  const int op = GENERATE(0, 1);
  if (op == 0) check_reproducible<float, parscan::sum_op<float>>("sum_op<float>", n, k, d, draw_float, sum_error, 1e-4);
  else
    check_reproducible<parscan::affine<float>, parscan::affine_op<float>>("affine_op<float>", n, k, d, draw_affine,
                                                                           affine_error, 1e-5);
}
