// test/core/graph_capture_test.cu — every CUDA entry point inside a captured CUDA graph (issue 12).
//
// For each entry point — the generic inclusive_scan, exclusive_scan and reduce (one long
// sequence: the chained tiles and the two-pass reduce; one long affine sequence: the persistent
// grid launched cooperatively; batches of many short sequences: the warp loop; a channel-last
// batch: the lane tiles), gated_recurrence_forward / backward, log_recurrence_forward /
// backward, matrix_recurrence_forward / backward and matrix_chain — and for both sources of
// temporary storage (none given: the library's pool, whose allocation inside a capture becomes a
// memory node of the graph; and a caller's workspace of the size the matching *_workspace_size
// query returns), the test
//   1. creates a non-blocking stream and begins a global-mode capture on it;
//   2. calls the entry point once with cuda_backend{stream, ...}: it must return
//      status::success, and cudaStreamEndCapture must succeed (a synchronising or otherwise
//      capture-invalidating call inside the library fails it);
//   3. looks at the graph's nodes: with a caller's workspace there is no memory node; without
//      one every allocation node has its free node (so the graph can be replayed), and where
//      the call certainly takes temporary storage there is at least one allocation node;
//   4. instantiates the graph and replays it twice: each time fresh random inputs (different
//      from the previous round's) are uploaded into the buffers the graph was captured with,
//      every output and the caller's workspace are poisoned, the graph is launched on the
//      stream, and every output is checked written and compared with the float64 (or exact)
//      reference. So the graph re-reads its inputs, rewrites all of its outputs, and re-zeroes
//      its own tile state on every launch.
// Scalar arguments (shapes, init, flags) are baked into the graph at capture; only the
// contents of the buffers change between replays. Inputs come from the run's recorded seed
// (support/random.hpp); tolerances are those of the entry points' own tests.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "support/env.hpp"
#include "support/random.hpp"
#include "support/reference.hpp"

#include "matrix/matrix_support.hpp"
#include "recurrence/recurrence_support.hpp"

#if !PARSCAN_TEST_ON_DEVICE
#error "graph_capture_test.cu is a GPU test: it is built by nvcc with PARSCAN_TEST_CUDA=1"
#endif

namespace graph_test {

using parscan::direction;
using parscan::index_t;
using parscan::sequence_layout;
using parscan::status;
using parscan_test::guarded_buffer;
using parscan_test::rng;
namespace ref = parscan_test::ref;

// ---------------------------------------------------------------------------------------------
// Streams, graphs, and one capture replayed twice.

/// Where a call's temporary storage comes from.
enum class workspace_from {
  library,  // no workspace and no allocator: the library's pool, stream-ordered on the stream
  caller,   // cuda_backend::workspace, sized by the *_workspace_size query
};
inline const char* name(workspace_from w) {
  return w == workspace_from::library ? "from the library (its pool, allocation nodes in the capture)"
                                      : "from the caller (sized by the workspace query)";
}

inline std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

/// A non-blocking stream; a capture still open when it goes away (an assertion threw inside
/// one) is ended and its graph dropped, so later tests start clean.
class capture_stream {
 public:
  capture_stream() {
    const cudaError_t e = cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking);
    if (e != cudaSuccess) throw std::runtime_error("cudaStreamCreateWithFlags: " + cuda_error_text(e));
  }
  capture_stream(const capture_stream&) = delete;
  capture_stream& operator=(const capture_stream&) = delete;
  ~capture_stream() {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s_, &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(s_, &g);
      if (g) cudaGraphDestroy(g);
    }
    cudaStreamSynchronize(s_);
    cudaStreamDestroy(s_);
    cudaGetLastError();
  }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class graph_handle {
 public:
  graph_handle() = default;
  graph_handle(const graph_handle&) = delete;
  graph_handle& operator=(const graph_handle&) = delete;
  ~graph_handle() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};

/// What a captured graph holds.
struct graph_nodes {
  std::size_t total = 0, kernels = 0, cooperative = 0, mem_alloc = 0, mem_free = 0, memsets = 0, other = 0;
  cudaError_t query = cudaSuccess;
  std::string str() const {
    std::ostringstream s;
    s << total << " nodes: " << kernels << " kernel (" << cooperative << " cooperative), " << memsets << " memset, "
      << mem_alloc << " memory allocation, " << mem_free << " memory free, " << other << " other";
    return s.str();
  }
};

inline graph_nodes inspect(cudaGraph_t g) {
  graph_nodes r;
  std::size_t n = 0;
  if ((r.query = cudaGraphGetNodes(g, nullptr, &n)) != cudaSuccess) return r;
  std::vector<cudaGraphNode_t> nodes(n);
  if (n && (r.query = cudaGraphGetNodes(g, nodes.data(), &n)) != cudaSuccess) return r;
  r.total = n;
  for (std::size_t i = 0; i < n; ++i) {
    cudaGraphNodeType type;
    if ((r.query = cudaGraphNodeGetType(nodes[i], &type)) != cudaSuccess) return r;
    switch (type) {
      case cudaGraphNodeTypeKernel: {
        ++r.kernels;
        cudaKernelNodeAttrValue v{};
        if (cudaGraphKernelNodeGetAttribute(nodes[i], cudaLaunchAttributeCooperative, &v) == cudaSuccess && v.cooperative)
          ++r.cooperative;
        cudaGetLastError();  // an attribute the driver does not report is no error of the test
        break;
      }
      case cudaGraphNodeTypeMemset: ++r.memsets; break;
      case cudaGraphNodeTypeMemAlloc: ++r.mem_alloc; break;
      case cudaGraphNodeTypeMemFree: ++r.mem_free; break;
      default: ++r.other; break;
    }
  }
  return r;
}

struct replay_spec {
  std::string what;                          // the entry point and its shape
  workspace_from ws = workspace_from::library;
  std::size_t ws_bytes = 0;                  // the workspace query's answer
  bool must_allocate = false;                // the call certainly takes temporary storage
  bool expect_cooperative = false;           // the shape is meant to take a cooperative launch
};

using call_fn = std::function<status(const parscan::cuda_backend&)>;
using round_fn = std::function<void(int)>;

/// Captures call(backend) once on a fresh non-blocking stream, instantiates the graph and
/// replays it twice: before each launch refill(round) draws fresh inputs and poisons the outputs
/// (synchronously, outside the capture); after it check(round) compares with the reference.
inline void capture_and_replay(const replay_spec& spec, const call_fn& call, const round_fn& refill,
                               const round_fn& check) {
  INFO(spec.what << "; workspace " << name(spec.ws) << ", query " << spec.ws_bytes << " bytes");
  capture_stream stream;
  std::optional<guarded_buffer<unsigned char>> ws;
  parscan::cuda_backend be{};
  be.stream = stream.get();
  if (spec.ws == workspace_from::caller) {
    ws.emplace(spec.ws_bytes, 256);  // 256 bytes of guard: data() stays 256-byte aligned
    be.workspace = ws->data();
    be.workspace_bytes = spec.ws_bytes;
    REQUIRE(reinterpret_cast<std::uintptr_t>(be.workspace) % 256 == 0);
  }
  // Every buffer, the workspace included, exists before the capture begins: a cudaMalloc
  // inside it would break the capture (test code, not the library's).
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);

  graph_handle h;
  {
    const cudaError_t begin = cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal);
    INFO("cudaStreamBeginCapture: " << cuda_error_text(begin));
    REQUIRE(begin == cudaSuccess);
  }
  const status st = call(be);
  const cudaError_t lib_error = st == status::cuda_error ? parscan::cuda_last_error() : cudaSuccess;
  const cudaError_t end = cudaStreamEndCapture(stream.get(), &h.graph);
  const cudaError_t sticky = cudaGetLastError();
  {
    INFO("the call returned " << Catch::StringMaker<status>::convert(st) << " during the capture"
                              << (st == status::cuda_error ? "; parscan::cuda_last_error(): " + cuda_error_text(lib_error)
                                                           : std::string()));
    INFO("cudaStreamEndCapture: " << cuda_error_text(end) << "; cudaGetLastError after it: " << cuda_error_text(sticky)
                                  << " (an error here means a CUDA call inside the library is not capturable: a "
                                     "synchronisation, a synchronous copy or allocation, or a launch kind that stream "
                                     "capture refuses"
                                  << (spec.expect_cooperative ? ", such as the persistent grid's cudaLaunchCooperativeKernel)"
                                                              : ")"));
    CHECK(st == status::success);
    REQUIRE(end == cudaSuccess);
    REQUIRE(h.graph != nullptr);
    REQUIRE(st == status::success);
  }

  const graph_nodes nodes = inspect(h.graph);
  INFO("the captured graph: " << nodes.str());
  REQUIRE(nodes.query == cudaSuccess);
  CHECK(nodes.kernels >= 1);
  if (spec.ws == workspace_from::caller) {
    INFO("with the caller's workspace the library must not allocate");
    CHECK(nodes.mem_alloc == 0);
    CHECK(nodes.mem_free == 0);
  } else {
    INFO("every allocation the library makes in the capture must be freed in it (else a replay leaks or fails)");
    CHECK(nodes.mem_alloc == nodes.mem_free);
    if (spec.must_allocate) {
      INFO("this call takes temporary storage: without a workspace, the pool's allocation must show as a memory node");
      CHECK(nodes.mem_alloc >= 1);
    }
  }
  if (spec.expect_cooperative && nodes.cooperative == 0)
    WARN(spec.what << ": the graph holds no cooperative kernel node, so this shape no longer takes the persistent "
                      "cooperative grid and its capture was not exercised here (the results are checked all the same)");

  {
    const cudaError_t inst = cudaGraphInstantiate(&h.exec, h.graph, 0);
    INFO("cudaGraphInstantiate: " << cuda_error_text(inst)
                                  << (nodes.cooperative ? " (the graph holds a cooperative kernel node: the persistent "
                                                          "chained kernel launched with cudaLaunchCooperativeKernel)"
                                                        : ""));
    REQUIRE(inst == cudaSuccess);
  }

  for (int round = 1; round <= 2; ++round) {
    INFO("replay " << round << " of 2 (fresh inputs, poisoned outputs"
                   << (ws ? " and workspace)" : ")"));
    refill(round);
    if (ws) ws->repoison();  // the graph must re-zero its own tile state
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const cudaError_t launch = cudaGraphLaunch(h.exec, stream.get());
    INFO("cudaGraphLaunch: " << cuda_error_text(launch));
    REQUIRE(launch == cudaSuccess);
    const cudaError_t done = cudaStreamSynchronize(stream.get());
    INFO("cudaStreamSynchronize after the replay: " << cuda_error_text(done));
    REQUIRE(done == cudaSuccess);
    const cudaError_t last = cudaGetLastError();
    INFO("cudaGetLastError after the replay: " << cuda_error_text(last));
    REQUIRE(last == cudaSuccess);
    check(round);
    if (ws) CHECK(ws->guards_intact());
  }
}

/// Both sources of temporary storage, each captured in its own graph.
inline constexpr workspace_from workspace_sources[] = {workspace_from::library, workspace_from::caller};

/// Payload positions of a download still entirely poison (never written).
template <class U>
std::vector<std::size_t> unwritten(const guarded_buffer<U>& buf, const std::vector<U>& got) {
  std::vector<std::size_t> r;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (buf.is_poison(got[i])) r.push_back(i);
  return r;
}

/// CHECKs that every payload element of an output was written and its guards hold; returns the
/// payload.
template <class U>
std::vector<U> fetch_written(const guarded_buffer<U>& buf, const char* what) {
  const std::vector<U> got = buf.download();
  const std::vector<std::size_t> missing = unwritten(buf, got);
  INFO("output " << what << ": elements never written: " << parscan_test::first_positions(missing));
  CHECK(missing.empty());
  CHECK(buf.guards_intact());
  return got;
}

/// Short shapes under PARSCAN_TEST_SMALL (the sanitizer runs), the stated ones otherwise.
inline index_t sized(index_t full, index_t small) { return parscan_test::long_shapes_wanted() ? full : small; }

// ---------------------------------------------------------------------------------------------
// Generic scans: the operators.

template <class I>
struct int_sum_case {  // exact; |partial sums| stay far inside I
  static constexpr const char* name = sizeof(I) == 4 ? "sum_op<int32>" : "sum_op<int64>";
  using in_t = I;
  using op_t = parscan::sum_op<I>;
  using acc_t = parscan::accumulator_t<op_t, in_t>;
  using ref_t = std::int64_t;
  static constexpr bool exact = true;
  static constexpr double tolerance = 0.0;
  // int32: |x| ≤ 500 over at most 3.2·10^6 steps stays below 1.6·10^9 < 2^31.
  static in_t draw(rng& r) {
    const std::int64_t m = sizeof(I) == 4 ? 500 : (std::int64_t(1) << 40);
    return static_cast<I>(r.small_int(-m, m));
  }
  static acc_t draw_acc(rng& r) { return draw(r); }
  static ref_t from_in(const in_t& v) { return v; }
  static ref_t from_acc(const acc_t& v) { return v; }
  static ref_t ref_op(const ref_t& e, const ref_t& l) { return e + l; }
  static bool equal(const ref_t& x, const ref_t& y) { return x == y; }
  static double error(const ref::batch<ref_t>&, const ref::batch<ref_t>&, double) { return 0; }
};

struct ref_affine {
  double a, b;
};

struct affine_f32_case {  // the 8-byte affine pair: the persistent grid on one long sequence
  static constexpr const char* name = "affine_op<float>";
  using in_t = parscan::affine<float>;
  using op_t = parscan::affine_op<float>;
  using acc_t = parscan::accumulator_t<op_t, in_t>;
  using ref_t = ref_affine;
  static constexpr bool exact = false;
  static constexpr double tolerance = 1e-5;  // as the generic-scan tests
  // Gates in (0, 1), inputs in (-1, 1): the states stay bounded.
  static in_t draw(rng& r) { return in_t(static_cast<float>(r.gate()), static_cast<float>(r.signed_unit())); }
  static acc_t draw_acc(rng& r) { return draw(r); }
  static ref_t from_in(const in_t& v) { return {v.a, v.b}; }
  static ref_t from_acc(const acc_t& v) { return {v.a, v.b}; }
  // x ↦ a·x + b, "later after earlier".
  static ref_t ref_op(const ref_t& e, const ref_t& l) { return {l.a * e.a, l.a * e.b + l.b}; }
  static bool equal(const ref_t& x, const ref_t& y) { return x.a == y.a && x.b == y.b; }
  // max|got − ref| / max|ref| per coefficient; `floor` is the data's scale (all below 1).
  static double error(const ref::batch<ref_t>& got, const ref::batch<ref_t>& want, double floor) {
    const double ea = ref::relative_error(got, want, [](const ref_t& v) { return v.a; }, floor);
    const double eb = ref::relative_error(got, want, [](const ref_t& v) { return v.b; }, floor);
    return (ea != ea || eb != eb) ? NAN : (ea > eb ? ea : eb);
  }
};

template <class C>
void compare(const ref::batch<typename C::ref_t>& got, const ref::batch<typename C::ref_t>& want, const char* what,
             double floor = 0.0) {
  if constexpr (C::exact) {
    const std::string bad = ref::first_mismatches(got, want, C::equal);
    INFO(what << " differs from the reference at: " << bad);
    CHECK(bad.empty());
  } else {
    const double err = C::error(got, want, floor);
    INFO(what << ": max|got - ref| / max|ref| = " << err << " (tolerance " << C::tolerance << ")");
    CHECK(err <= C::tolerance);
  }
}

/// One generic call (kind, layout, direction, carry_in or not) in buffers allocated once, so
/// that a graph captured with their pointers can be refilled and replayed.
template <class C>
struct scan_fixture {
  using in_t = typename C::in_t;
  using acc_t = typename C::acc_t;
  using ref_t = typename C::ref_t;

  ref::kind kind;
  sequence_layout layout;
  direction dir;
  bool carry_in;
  rng& r;
  std::size_t n_elem, n_seq;
  guarded_buffer<in_t> in, out;
  guarded_buffer<acc_t> cin, cout;  // carry_in; carry_out (reduce: the result)
  acc_t init;                       // baked into the graph at capture: drawn once
  std::vector<in_t> in_host;
  std::vector<acc_t> cin_host;

  scan_fixture(ref::kind k, const sequence_layout& l, direction d, bool with_carry_in, rng& g)
      : kind(k), layout(l), dir(d), carry_in(with_carry_in), r(g),
        n_elem(static_cast<std::size_t>(ref::span(l))), n_seq(static_cast<std::size_t>(ref::num_sequences(l))),
        in(n_elem), out(k == ref::kind::reduce ? 0 : n_elem), cin(n_seq), cout(n_seq), init(C::draw_acc(g)) {
    REQUIRE(n_elem == static_cast<std::size_t>(ref::num_sequences(l) * l.length));  // dense: every element addressed
  }

  std::string what() const {
    std::ostringstream s;
    s << "parscan::" << (kind == ref::kind::inclusive ? "inclusive_scan" : kind == ref::kind::exclusive ? "exclusive_scan" : "reduce")
      << " " << C::name << (dir == direction::reverse ? " reverse" : " forward") << " over " << layout.groups << " x "
      << layout.count << " sequences of " << layout.length << " steps (sequence stride " << layout.sequence_stride
      << ", step stride " << layout.step_stride << ")" << (carry_in ? " with carry_in" : "") << " and carry_out";
    return s.str();
  }

  status call(const parscan::cuda_backend& be) const {
    const typename C::op_t op{};
    parscan::scan_options<acc_t> o;
    o.dir = dir;
    if (carry_in) o.carry_in = cin.data();
    o.carry_out = cout.data();
    switch (kind) {
      case ref::kind::inclusive: return parscan::inclusive_scan(be, in.data(), out.data(), layout, op, o);
      case ref::kind::exclusive: return parscan::exclusive_scan(be, in.data(), out.data(), layout, op, init, o);
      default: return parscan::reduce(be, in.data(), layout, op, init, cout.data(), o);
    }
  }

  void refill() {
    in_host = r.vector(n_elem, C::draw);
    in.upload(in_host);
    cin_host = r.vector(n_seq, C::draw_acc);
    cin.upload(cin_host);
    out.repoison();
    cout.repoison();
  }

  void check() const {
    std::vector<ref_t> cin_ref;
    for (const acc_t& c : cin_host) cin_ref.push_back(C::from_acc(c));
    const ref::result<ref_t> want = ref::scan(kind, ref::gather(in_host, layout, C::from_in), C::ref_op,
                                              dir == direction::reverse, std::optional<ref_t>(C::from_acc(init)),
                                              carry_in ? &cin_ref : nullptr);
    if (kind != ref::kind::reduce) {
      const std::vector<in_t> got = fetch_written(out, "scan");
      compare<C>(ref::gather(got, layout, C::from_in), want.out, "scan output");
    }
    const std::vector<acc_t> got_carry = fetch_written(cout, kind == ref::kind::reduce ? "reduce result" : "carry_out");
    ref::batch<ref_t> got_c(1), want_c(1);
    for (std::size_t s = 0; s < n_seq; ++s) {
      REQUIRE(want.carry[s].has_value());
      got_c[0].push_back(C::from_acc(got_carry[s]));
      want_c[0].push_back(*want.carry[s]);
    }
    compare<C>(got_c, want_c, kind == ref::kind::reduce ? "reduce result" : "carry_out", 1.0);
  }
};

/// Captures kind over layout with each source of temporary storage, and replays each twice.
template <class C>
void generic_graphs(ref::kind kind, const sequence_layout& layout, direction dir, bool with_carry_in, bool must_allocate,
                    bool expect_cooperative = false) {
  PARSCAN_TEST_RNG(r, std::string("graph capture generic ") + C::name + " " + ref::to_string(kind) + " " +
                          std::to_string(layout.num_sequences()) + "x" + std::to_string(layout.length));
  scan_fixture<C> f(kind, layout, dir, with_carry_in, r);
  for (workspace_from w : workspace_sources) {
    replay_spec spec;
    spec.what = f.what();
    spec.ws = w;
    spec.ws_bytes = parscan::scan_workspace_size<typename C::in_t>(layout, typename C::op_t{});
    spec.must_allocate = must_allocate;
    spec.expect_cooperative = expect_cooperative;
    capture_and_replay(
        spec, [&](const parscan::cuda_backend& be) { return f.call(be); }, [&](int) { f.refill(); },
        [&](int) { f.check(); });
  }
}

// ---------------------------------------------------------------------------------------------
// Gated recurrence (float, bfloat16): dense tensors in either layout; the float64 reference of
// test/recurrence/recurrence_reference.hpp in canonical order (c = b·D + d, then t).

/// Storage index of canonical element (sequence c, step t) of a dense (B, D, T) tensor.
struct dense3 {
  index_t B, D, T;
  bool channel_last;
  std::size_t at(index_t c, index_t t) const {
    const index_t b = c / D, d = c % D;
    return static_cast<std::size_t>(channel_last ? (b * T + t) * D + d : c * T + t);
  }
  std::size_t size() const { return static_cast<std::size_t>(B * D * T); }
  index_t sequences() const { return B * D; }
};

template <class U>
std::vector<U> to_canonical(const std::vector<U>& stored, const dense3& g) {
  std::vector<U> v(stored.size());
  for (index_t c = 0; c < g.sequences(); ++c)
    for (index_t t = 0; t < g.T; ++t) v[static_cast<std::size_t>(c * g.T + t)] = stored[g.at(c, t)];
  return v;
}

template <class T>
struct gated_fixture {
  using R = rec_test::ref_t<T>;
  parscan::recurrence_shape shape;
  dense3 g;
  bool reverse;
  rng& r;
  guarded_buffer<T> a, b, x0, dx, dxf;  // inputs
  guarded_buffer<T> x, xf, da, db, dx0;  // outputs
  std::vector<T> ha, hb, hx0, hdx, hdxf;

  gated_fixture(index_t B, index_t D, index_t Tn, bool channel_last, bool rev, rng& gen)
      : shape{B, D, Tn, channel_last ? parscan::recurrence_layout::channel_last : parscan::recurrence_layout::time_contiguous},
        g{B, D, Tn, channel_last}, reverse(rev), r(gen),
        a(g.size(), 64, rec_test::poison_for<T>()), b(g.size(), 64, rec_test::poison_for<T>()),
        x0(static_cast<std::size_t>(B * D), 64, rec_test::poison_for<T>()), dx(g.size(), 64, rec_test::poison_for<T>()),
        dxf(static_cast<std::size_t>(B * D), 64, rec_test::poison_for<T>()), x(g.size(), 64, rec_test::poison_for<T>()),
        xf(static_cast<std::size_t>(B * D), 64, rec_test::poison_for<T>()), da(g.size(), 64, rec_test::poison_for<T>()),
        db(g.size(), 64, rec_test::poison_for<T>()), dx0(static_cast<std::size_t>(B * D), 64, rec_test::poison_for<T>()) {}

  std::string describe(const char* entry) const {
    std::ostringstream s;
    s << "parscan::" << entry << "<" << rec_test::scalar<T>::name() << "> B=" << shape.batch << " D=" << shape.channels
      << " T=" << shape.length << (g.channel_last ? " channel_last" : " time_contiguous") << (reverse ? " reverse" : "");
    return s.str();
  }

  parscan::gated_forward_args<T> forward_args() const {
    parscan::gated_forward_args<T> f{};
    f.shape = shape;
    f.a = a.data(), f.b = b.data(), f.x = x.data(), f.x0 = x0.data(), f.x_final = xf.data();
    f.reverse = reverse;
    return f;
  }
  /// Backward without x (recomputed into temporary storage from b and x0), with dx_final.
  parscan::gated_backward_args<T> backward_args() const {
    parscan::gated_backward_args<T> k{};
    k.shape = shape;
    k.a = a.data(), k.x = nullptr, k.b = b.data(), k.x0 = x0.data(), k.dx = dx.data(), k.dx_final = dxf.data();
    k.da = da.data(), k.db = db.data(), k.dx0 = dx0.data();
    k.reverse = reverse;
    return k;
  }

  void refill_inputs() {
    ha.resize(g.size());
    for (T& v : ha) v = rec_test::draw_gate<T>(r, rec_test::family::unit, false);
    hb.resize(g.size()), hx0.resize(x0.size()), hdx.resize(g.size()), hdxf.resize(dxf.size());
    rec_test::fill_normal(r, hb);
    rec_test::fill_normal(r, hx0);
    rec_test::fill_normal(r, hdx);
    rec_test::fill_normal(r, hdxf);
    a.upload(ha), b.upload(hb), x0.upload(hx0), dx.upload(hdx), dxf.upload(hdxf);
  }
  void refill_forward() {
    refill_inputs();
    x.repoison(), xf.repoison();
  }
  void refill_backward() {
    refill_inputs();
    da.repoison(), db.repoison(), dx0.repoison();
  }

  void reference_forward(std::vector<R>& rx, std::vector<R>& rxf) const {
    const std::vector<R> r0 = rec_test::to_ref_vec(hx0);
    rec_test::ref_forward(g.sequences(), g.T, rec_test::to_ref_vec(to_canonical(ha, g)),
                          rec_test::to_ref_vec(to_canonical(hb, g)), r0.data(), reverse, rx, rxf);
  }

  void check_forward() const {
    std::vector<R> rx, rxf;
    reference_forward(rx, rxf);
    const std::vector<T> gx = to_canonical(fetch_written(x, "x"), g), gxf = fetch_written(xf, "x_final");
    rec_test::check_close("x", gx, rx);
    rec_test::check_close("x_final", gxf, rxf, rec_test::scalar<T>::tol, rec_test::max_abs(rx));
  }

  void check_backward() const {
    std::vector<R> rx, rxf, rda, rdb, rdx0;
    reference_forward(rx, rxf);  // x recomputed in float64, as the library must recompute it
    const std::vector<R> r0 = rec_test::to_ref_vec(hx0), rdxf = rec_test::to_ref_vec(hdxf);
    rec_test::ref_backward(g.sequences(), g.T, rec_test::to_ref_vec(to_canonical(ha, g)), rx, r0.data(),
                           rec_test::to_ref_vec(to_canonical(hdx, g)), rdxf.data(), reverse, false, rda, rdb, rdx0);
    const std::vector<T> gda = to_canonical(fetch_written(da, "da"), g), gdb = to_canonical(fetch_written(db, "db"), g);
    const std::vector<T> gdx0 = fetch_written(dx0, "dx0");
    rec_test::check_close("da", gda, rda);
    rec_test::check_close("db", gdb, rdb);
    rec_test::check_close("dx0", gdx0, rdx0, rec_test::scalar<T>::tol, rec_test::max_abs(rdb));
  }
};

/// Captures and replays the fixture's backward (x recomputed from b and x0) with each source of
/// workspace.
template <class T>
void replay_gated_backward(gated_fixture<T>& f, const std::string& how, bool must_allocate, bool expect_cooperative) {
  for (workspace_from w : workspace_sources) {
    replay_spec spec;
    spec.what = f.describe("gated_recurrence_backward") + how;
    spec.ws = w;
    spec.ws_bytes = parscan::gated_recurrence_workspace_size(f.backward_args());
    spec.must_allocate = must_allocate;
    spec.expect_cooperative = expect_cooperative;
    capture_and_replay(
        spec, [&](const parscan::cuda_backend& be) { return parscan::gated_recurrence_backward(be, f.backward_args()); },
        [&](int) { f.refill_backward(); }, [&](int) { f.check_backward(); });
  }
}

template <class T>
void gated_graphs(index_t B, index_t D, index_t Tn, bool channel_last, bool reverse, bool expect_cooperative) {
  PARSCAN_TEST_RNG(r, std::string("graph capture gated ") + rec_test::scalar<T>::name() + " " + std::to_string(B) + "x" +
                          std::to_string(D) + "x" + std::to_string(Tn) + (channel_last ? " cl" : " tc"));
  gated_fixture<T> f(B, D, Tn, channel_last, reverse, r);
  for (workspace_from w : workspace_sources) {
    replay_spec spec;
    spec.what = f.describe("gated_recurrence_forward") + " with x0 and x_final";
    spec.ws = w;
    spec.ws_bytes = parscan::gated_recurrence_workspace_size(f.forward_args());
    spec.must_allocate = true;  // chained tiles or lane tiles: tile state
    spec.expect_cooperative = expect_cooperative;
    capture_and_replay(
        spec, [&](const parscan::cuda_backend& be) { return parscan::gated_recurrence_forward(be, f.forward_args()); },
        [&](int) { f.refill_forward(); }, [&](int) { f.check_forward(); });
  }
  replay_gated_backward(f, " with x0 and dx_final and x recomputed", true /* the recomputed x */, expect_cooperative);
}

/// The backward without x over sequences a block holds (recurrence/whole_sequence_backward.cuh):
/// x is recomputed in registers, so the workspace query is 0 and the graph holds no allocation.
/// float takes a block a sequence; bfloat16 the persistent grid of two buffers, whose occupancy
/// query and shared-memory opt-in may run inside the capture.
template <class T>
void gated_whole_sequence_graph(index_t B, index_t D, index_t Tn, bool reverse) {
  PARSCAN_TEST_RNG(r, std::string("graph capture gated whole sequences ") + rec_test::scalar<T>::name() + " " +
                          std::to_string(B) + "x" + std::to_string(D) + "x" + std::to_string(Tn));
  gated_fixture<T> f(B, D, Tn, false, reverse, r);
  CHECK(parscan::gated_recurrence_workspace_size(f.backward_args()) == 0);
  replay_gated_backward(f, " with x0 and dx_final and x recomputed in registers", false, false);
}

// ---------------------------------------------------------------------------------------------
// Log-space recurrence (float): long-double references of the formulas in log_recurrence.hpp.

using ld = long double;
using sign_t = std::uint8_t;

inline ld value_of(float log_mag, bool negative) { return (negative ? -1.0L : 1.0L) * std::exp(static_cast<ld>(log_mag)); }

struct log_fixture {
  parscan::recurrence_shape shape;
  dense3 g;
  bool signed_values;  // forward: a in (-1, 1), b and x0 normal; else all positive
  bool reverse;
  rng& r;
  guarded_buffer<float> la, lb, lx0, G, Gf;    // inputs (log magnitudes; G = dL/dlog|x|)
  guarded_buffer<sign_t> sa, sb, sx0;          // input signs
  guarded_buffer<float> lx, lxf, dla, dlb, dlx0;  // outputs
  guarded_buffer<sign_t> sx, sxf;
  std::vector<float> hla, hlb, hlx0, hG, hGf;
  std::vector<sign_t> hsa, hsb, hsx0;

  log_fixture(index_t B, index_t D, index_t Tn, bool channel_last, bool signed_v, bool rev, rng& gen)
      : shape{B, D, Tn, channel_last ? parscan::recurrence_layout::channel_last : parscan::recurrence_layout::time_contiguous},
        g{B, D, Tn, channel_last}, signed_values(signed_v), reverse(rev), r(gen), la(g.size()), lb(g.size()),
        lx0(static_cast<std::size_t>(B * D)), G(g.size()), Gf(static_cast<std::size_t>(B * D)), sa(g.size()),
        sb(g.size()), sx0(static_cast<std::size_t>(B * D)), lx(g.size()), lxf(static_cast<std::size_t>(B * D)),
        dla(g.size()), dlb(g.size()), dlx0(static_cast<std::size_t>(B * D)), sx(g.size()),
        sxf(static_cast<std::size_t>(B * D)) {}

  std::string describe(const char* entry) const {
    std::ostringstream s;
    s << "parscan::" << entry << "<float> B=" << shape.batch << " D=" << shape.channels << " T=" << shape.length
      << (g.channel_last ? " channel_last" : " time_contiguous") << (reverse ? " reverse" : "")
      << (signed_values ? " signed values" : " positive values");
    return s.str();
  }

  /// Forward in log form with sign arrays, x0 and x_final.
  parscan::log_forward_args<float> forward_args() const {
    parscan::log_forward_args<float> f{};
    f.shape = shape;
    f.log_a = la.data(), f.a_negative = sa.data(), f.log_b = lb.data(), f.b_negative = sb.data();
    f.log_x = lx.data(), f.x_negative = sx.data();
    f.log_x0 = lx0.data(), f.x0_negative = sx0.data();
    f.log_x_final = lxf.data(), f.x_final_negative = sxf.data();
    f.reverse = reverse;
    return f;
  }
  /// Backward of positive values (no sign arrays), x recomputed, with x0 and dlog_x_final.
  parscan::log_backward_args<float> backward_args() const {
    parscan::log_backward_args<float> k{};
    k.shape = shape;
    k.log_a = la.data(), k.log_b = lb.data(), k.log_x = nullptr, k.log_x0 = lx0.data();
    k.dlog_x = G.data(), k.dlog_x_final = Gf.data();
    k.dlog_a = dla.data(), k.dlog_b = dlb.data(), k.dlog_x0 = dlx0.data();
    k.reverse = reverse;
    return k;
  }

  void refill_inputs(bool signs) {
    const std::size_t n = g.size(), c = lx0.size();
    hla.resize(n), hlb.resize(n), hG.resize(n), hsa.assign(n, 0), hsb.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      double av = signs ? r.signed_unit() : r.uniform(0.05, 1.0);
      if (av == 0) av = 0.5;
      const double bv = signs ? r.normal() : r.uniform(0.1, 1.0);
      hla[i] = static_cast<float>(std::log(std::fabs(av))), hsa[i] = av < 0;
      hlb[i] = static_cast<float>(std::log(std::fabs(bv))), hsb[i] = bv < 0;
      hG[i] = static_cast<float>(r.normal());
    }
    hlx0.resize(c), hsx0.assign(c, 0), hGf.resize(c);
    for (std::size_t s = 0; s < c; ++s) {
      const double xv = signs ? r.normal() : r.uniform(0.1, 2.0);
      hlx0[s] = static_cast<float>(std::log(std::fabs(xv))), hsx0[s] = xv < 0;
      hGf[s] = static_cast<float>(r.normal());
    }
    la.upload(hla), lb.upload(hlb), lx0.upload(hlx0), G.upload(hG), Gf.upload(hGf);
    sa.upload(hsa), sb.upload(hsb), sx0.upload(hsx0);
  }
  void refill_forward() {
    refill_inputs(signed_values);
    lx.repoison(), sx.repoison(), lxf.repoison(), sxf.repoison();
  }
  void refill_backward() {
    refill_inputs(false);
    dla.repoison(), dlb.repoison(), dlx0.repoison();
  }

  /// Worst over sequences of max|x − ref| / scale, scale the largest |x|, |a·x_prev| or |b| of
  /// the sequence (float is accurate relative to what it adds); x_final at the same scale.
  double forward_error() const {
    const std::vector<float> hx = fetch_written(lx, "log_x"), hxf = fetch_written(lxf, "log_x_final");
    const std::vector<sign_t> hs = fetch_written(sx, "x_negative"), hsf = fetch_written(sxf, "x_final_negative");
    double worst = 0;
    for (index_t c = 0; c < g.sequences(); ++c) {
      ld state = value_of(hlx0[c], hsx0[c]), err = 0, scale = 0;
      for (index_t i = 0; i < g.T; ++i) {
        const std::size_t k = g.at(c, reverse ? g.T - 1 - i : i);
        const ld carried = value_of(hla[k], hsa[k]) * state, fresh = value_of(hlb[k], hsb[k]);
        state = carried + fresh;
        err = std::max(err, std::fabs(value_of(hx[k], hs[k] != 0) - state));
        scale = std::max({scale, std::fabs(state), std::fabs(carried), std::fabs(fresh)});
      }
      err = std::max(err, std::fabs(value_of(hxf[c], hsf[c] != 0) - state));
      if (!(err == err)) return std::numeric_limits<double>::infinity();
      worst = std::max(worst, static_cast<double>(err / scale));
    }
    return worst;
  }

  /// Worst over sequences of the gradients' error relative to the size of the terms they are
  /// made of, from x recomputed in long double (as the library recomputes it).
  double backward_error() const {
    const std::vector<float> hda = fetch_written(dla, "dlog_a"), hdb = fetch_written(dlb, "dlog_b");
    const std::vector<float> hdx0 = fetch_written(dlx0, "dlog_x0");
    double worst = 0;
    std::vector<ld> X(static_cast<std::size_t>(g.T));
    for (index_t c = 0; c < g.sequences(); ++c) {
      auto k = [&](index_t i) { return g.at(c, reverse ? g.T - 1 - i : i); };
      auto A = [&](index_t i) { return value_of(hla[k(i)], false); };
      auto Bv = [&](index_t i) { return value_of(hlb[k(i)], false); };
      const ld x0v = value_of(hlx0[c], false);
      ld s = x0v;
      for (index_t i = 0; i < g.T; ++i) X[i] = s = A(i) * s + Bv(i);
      ld db_next = 0, a_next = 0, scale = 0, err = 0;
      for (index_t i = g.T - 1; i >= 0; --i) {
        ld Gi = hG[k(i)];
        if (i == g.T - 1) Gi += hGf[c];
        const ld gi = Gi / X[i], carried = a_next * db_next, dbv = gi + carried;
        const ld x_prev = i > 0 ? X[i - 1] : x0v;
        const ld want_b = dbv * Bv(i), want_a = dbv * A(i) * x_prev;
        err = std::max({err, std::fabs(static_cast<ld>(hdb[k(i)]) - want_b), std::fabs(static_cast<ld>(hda[k(i)]) - want_a)});
        scale = std::max({scale, std::fabs(want_a), std::fabs(want_b),
                          std::max(std::fabs(gi), std::fabs(carried)) * std::max(std::fabs(Bv(i)), std::fabs(A(i) * x_prev))});
        db_next = dbv, a_next = A(i);
      }
      const ld want_x0 = db_next * a_next * x0v;
      err = std::max(err, std::fabs(static_cast<ld>(hdx0[c]) - want_x0));
      scale = std::max({scale, std::fabs(want_x0), 1e-30L});
      if (!(err == err)) return std::numeric_limits<double>::infinity();
      worst = std::max(worst, static_cast<double>(err / scale));
    }
    return worst;
  }
};

/// Tolerances of the log recurrence's own tests: forward 1e-5 (float; 1e-4 for signed values
/// beyond 10^4 steps), backward ten times the forward's (1e-4).
inline void log_graphs(index_t B, index_t D, index_t Tn, bool channel_last, bool signed_forward, bool reverse,
                       bool expect_cooperative) {
  PARSCAN_TEST_RNG(r, "graph capture log " + std::to_string(B) + "x" + std::to_string(D) + "x" + std::to_string(Tn) +
                          (channel_last ? " cl" : " tc"));
  log_fixture f(B, D, Tn, channel_last, signed_forward, reverse, r);
  const double forward_tol = signed_forward && Tn > 10000 ? 1e-4 : 1e-5, backward_tol = 1e-4;
  for (workspace_from w : workspace_sources) {
    replay_spec spec;
    spec.what = f.describe("log_recurrence_forward") + " with signs and x0 and x_final";
    spec.ws = w;
    spec.ws_bytes = parscan::log_recurrence_workspace_size(f.forward_args());
    spec.must_allocate = true;  // chained tiles or lane tiles: tile state
    spec.expect_cooperative = expect_cooperative;
    capture_and_replay(
        spec, [&](const parscan::cuda_backend& be) { return parscan::log_recurrence_forward(be, f.forward_args()); },
        [&](int) { f.refill_forward(); },
        [&](int) {
          const double err = f.forward_error();
          INFO("log forward: worst max|x - ref| / scale = " << err << " (tolerance " << forward_tol << ")");
          CHECK(err <= forward_tol);
        });
  }
  for (workspace_from w : workspace_sources) {
    replay_spec spec;
    spec.what = f.describe("log_recurrence_backward") + " (positive values) with x0 and dlog_x_final and x recomputed";
    spec.ws = w;
    spec.ws_bytes = parscan::log_recurrence_workspace_size(f.backward_args());
    spec.must_allocate = true;  // the recomputed log|x|
    spec.expect_cooperative = expect_cooperative;
    capture_and_replay(
        spec, [&](const parscan::cuda_backend& be) { return parscan::log_recurrence_backward(be, f.backward_args()); },
        [&](int) { f.refill_backward(); },
        [&](int) {
          const double err = f.backward_error();
          INFO("log backward: worst gradient error / scale = " << err << " (tolerance " << backward_tol << ")");
          CHECK(err <= backward_tol);
        });
  }
}

// ---------------------------------------------------------------------------------------------
// Matrix recurrence and chains (float), dense tensors; references from
// test/matrix/matrix_reference.hpp.

struct matrix_fixture {
  index_t B, Tn, N;
  bool reverse;
  rng& r;
  guarded_buffer<float> W, b, x0, dx, dxf;  // inputs
  guarded_buffer<float> x, xf, dW, db, dx0;  // outputs
  std::vector<float> hW, hb, hx0, hdx, hdxf;

  matrix_fixture(index_t B_, index_t T_, index_t N_, bool rev, rng& gen)
      : B(B_), Tn(T_), N(N_), reverse(rev), r(gen), W(static_cast<std::size_t>(B * Tn * N * N)),
        b(static_cast<std::size_t>(B * Tn * N)), x0(static_cast<std::size_t>(B * N)), dx(b.size()), dxf(x0.size()),
        x(b.size()), xf(x0.size()), dW(W.size()), db(b.size()), dx0(x0.size()) {}

  std::string describe(const char* entry) const {
    std::ostringstream s;
    s << "parscan::" << entry << "<float> B=" << B << " T=" << Tn << " N=" << N << (reverse ? " reverse" : "");
    return s.str();
  }

  parscan::matrix_forward_args<float> forward_args() const {
    parscan::matrix_forward_args<float> f;
    f.batch = B, f.length = Tn, f.n = N;
    f.W = W.data(), f.b = b.data(), f.x = x.data(), f.x0 = x0.data(), f.x_final = xf.data();
    f.reverse = reverse;
    return f;
  }
  /// Backward without x (recomputed from b and x0), with dx_final.
  parscan::matrix_backward_args<float> backward_args() const {
    parscan::matrix_backward_args<float> k;
    k.batch = B, k.length = Tn, k.n = N;
    k.W = W.data(), k.x = nullptr, k.b = b.data(), k.x0 = x0.data(), k.dx = dx.data(), k.dx_final = dxf.data();
    k.dW = dW.data(), k.db = db.data(), k.dx0 = dx0.data();
    k.reverse = reverse;
    return k;
  }

  void refill_inputs() {
    hW = mtx_test::draw_matrices<float>(r, mtx_test::family::contractive, B * Tn, N);
    hb = mtx_test::draw_normal<float>(r, b.size());
    hx0 = mtx_test::draw_normal<float>(r, x0.size());
    hdx = mtx_test::draw_normal<float>(r, dx.size());
    hdxf = mtx_test::draw_normal<float>(r, dxf.size());
    W.upload(hW), b.upload(hb), x0.upload(hx0), dx.upload(hdx), dxf.upload(hdxf);
  }
  void refill_forward() {
    refill_inputs();
    x.repoison(), xf.repoison();
  }
  void refill_backward() {
    refill_inputs();
    dW.repoison(), db.repoison(), dx0.repoison();
  }

  void check_forward() const {
    mtx_test::dvec rx, rxf;
    mtx_test::ref_forward(B, Tn, N, mtx_test::to_dvec(hW), mtx_test::to_dvec(hb), mtx_test::to_dvec(hx0), reverse, rx, rxf);
    const double tol = mtx_test::tolerance<float>(N);
    mtx_test::check_close("x", mtx_test::to_dvec(fetch_written(x, "x")), rx, tol);
    mtx_test::check_close("x_final", mtx_test::to_dvec(fetch_written(xf, "x_final")), rxf, tol, mtx_test::max_abs(rx));
  }
  void check_backward() const {
    mtx_test::dvec rx, rxf, rdW, rdb, rdx0;
    const mtx_test::dvec W_ = mtx_test::to_dvec(hW), x0_ = mtx_test::to_dvec(hx0);
    mtx_test::ref_forward(B, Tn, N, W_, mtx_test::to_dvec(hb), x0_, reverse, rx, rxf);
    mtx_test::ref_backward(B, Tn, N, W_, rx, x0_, mtx_test::to_dvec(hdx), mtx_test::to_dvec(hdxf), reverse, rdW, rdb, rdx0);
    const double tol = mtx_test::tolerance<float>(N);
    mtx_test::check_close("dW", mtx_test::to_dvec(fetch_written(dW, "dW")), rdW, tol);
    mtx_test::check_close("db", mtx_test::to_dvec(fetch_written(db, "db")), rdb, tol);
    mtx_test::check_close("dx0", mtx_test::to_dvec(fetch_written(dx0, "dx0")), rdx0, tol, mtx_test::max_abs(rdb));
  }
};

inline void matrix_graphs(index_t B, index_t Tn, index_t N, bool reverse) {
  PARSCAN_TEST_RNG(r, "graph capture matrix recurrence " + std::to_string(B) + "x" + std::to_string(Tn) + " N=" +
                          std::to_string(N));
  matrix_fixture f(B, Tn, N, reverse, r);
  for (workspace_from w : workspace_sources) {
    replay_spec spec;
    spec.what = f.describe("matrix_recurrence_forward") + " with x0 and x_final";
    spec.ws = w;
    spec.ws_bytes = parscan::matrix_recurrence_workspace_size(f.forward_args());
    spec.must_allocate = spec.ws_bytes > 0;  // chunked: the chunks' aggregates and carries
    capture_and_replay(
        spec, [&](const parscan::cuda_backend& be) { return parscan::matrix_recurrence_forward(be, f.forward_args()); },
        [&](int) { f.refill_forward(); }, [&](int) { f.check_forward(); });
  }
  for (workspace_from w : workspace_sources) {
    replay_spec spec;
    spec.what = f.describe("matrix_recurrence_backward") + " with x0 and dx_final and x recomputed";
    spec.ws = w;
    spec.ws_bytes = parscan::matrix_recurrence_workspace_size(f.backward_args());
    spec.must_allocate = true;  // the recomputed x and db[first]
    capture_and_replay(
        spec, [&](const parscan::cuda_backend& be) { return parscan::matrix_recurrence_backward(be, f.backward_args()); },
        [&](int) { f.refill_backward(); }, [&](int) { f.check_backward(); });
  }
}

inline void chain_graphs(index_t B, index_t n, index_t d, parscan::chain_output output, parscan::chain_order order,
                         parscan::chain_math math) {
  const bool prefixes = output == parscan::chain_output::prefixes;
  const bool ltr = order == parscan::chain_order::left_to_right;
  std::ostringstream what;
  what << "parscan::matrix_chain<float> B=" << B << " n=" << n << " d=" << d << (prefixes ? " prefixes" : " total")
       << (ltr ? " left_to_right" : " right_to_left")
       << (math == parscan::chain_math::exact ? " exact" : math == parscan::chain_math::tf32 ? " tf32" : " bf16");
  PARSCAN_TEST_RNG(r, "graph capture " + what.str());
  const index_t dd = d * d;
  guarded_buffer<float> M(static_cast<std::size_t>(B * n * dd)), out(static_cast<std::size_t>(B * (prefixes ? n : 1) * dd));
  std::vector<float> hM;
  parscan::matrix_chain_args<float> g;
  g.batch = B, g.count = n, g.d = d, g.M = M.data(), g.out = out.data();
  g.output = output, g.order = order, g.math = math;
  // The bound docs/api.md states for the tensor-core modes (near-orthogonal factors).
  double tol = mtx_test::tolerance<float>(d);
  if (math != parscan::chain_math::exact)
    tol = std::max(tol, 8 * (math == parscan::chain_math::tf32 ? 0x1p-11 : 0x1p-8) * std::sqrt(static_cast<double>(n)));
  for (workspace_from w : workspace_sources) {
    replay_spec spec;
    spec.what = what.str();
    spec.ws = w;
    spec.ws_bytes = parscan::matrix_chain_workspace_size(g);
    spec.must_allocate = spec.ws_bytes > 0;
    capture_and_replay(
        spec, [&](const parscan::cuda_backend& be) { return parscan::matrix_chain(be, g); },
        [&](int) {
          hM = mtx_test::draw_matrices<float>(r, mtx_test::family::near_orthogonal, B * n, d);
          M.upload(hM);
          out.repoison();
        },
        [&](int) {
          const mtx_test::dvec P = mtx_test::ref_chain_prefixes(B, n, d, mtx_test::to_dvec(hM), ltr);
          const mtx_test::dvec want = prefixes ? P : mtx_test::ref_chain_total(B, n, d, P);
          mtx_test::check_close(prefixes ? "prefixes" : "total", mtx_test::to_dvec(fetch_written(out, "out")), want, tol);
        });
  }
}

}  // namespace graph_test

// =============================================================================================
// Test cases. Each captures every call it makes twice (library and caller workspace) and
// replays each graph twice.

TEST_CASE(PARSCAN_TEST_NAME("graph capture: generic scans of one long sequence"), PARSCAN_TEST_TAGS("[graph][scan]")) {
  using namespace graph_test;
  // int32 sums (4-byte accumulator) over 3·2^20 + 5 steps, many tiles and a partial one: bulk
  // tiles for the scans, the tile-blocks reduce for the reduce (on sm_90 its fold launched to
  // start early: a programmatic edge in the graph; without sm_90, the chained tiles and a plain
  // second launch). With PARSCAN_TEST_SMALL, 3·2^16 + 5 steps: grid tiles, a cooperative launch.
  const index_t n = sized(3 * (index_t(1) << 20) + 5, 3 * (index_t(1) << 16) + 5);
  using C = int_sum_case<int>;
  const sequence_layout l = sequence_layout::contiguous(n);
  generic_graphs<C>(ref::kind::inclusive, l, direction::forward, false, true);
  generic_graphs<C>(ref::kind::exclusive, l, direction::reverse, true, true);
  generic_graphs<C>(ref::kind::reduce, l, direction::forward, false, true);
}

TEST_CASE(PARSCAN_TEST_NAME("graph capture: generic scans of one long affine sequence (cooperative launch)"),
          PARSCAN_TEST_TAGS("[graph][scan][cooperative]")) {
  using namespace graph_test;
  // affine<float> (8-byte accumulator) over 2^22 + 3 steps (bulk tiles on sm_90, else the
  // persistent chained grid, launched with cudaLaunchCooperativeKernel; with PARSCAN_TEST_SMALL
  // 2^18 + 3 steps, grid tiles, also a cooperative launch). Whether stream capture accepts that
  // launch is what this case finds out: the failure message names the CUDA error and the launch.
  const index_t n = sized((index_t(1) << 22) + 3, (index_t(1) << 18) + 3);
  const sequence_layout l = sequence_layout::contiguous(n);
  generic_graphs<affine_f32_case>(ref::kind::inclusive, l, direction::forward, false, true, true);
  generic_graphs<affine_f32_case>(ref::kind::exclusive, l, direction::reverse, true, true, true);
}

TEST_CASE(PARSCAN_TEST_NAME("graph capture: generic scans of batches of many short sequences"),
          PARSCAN_TEST_TAGS("[graph][scan][batch]")) {
  using namespace graph_test;
  // int64 sums: warps looping over whole sequences (no workspace), with the short-sequence
  // shape (50 steps) and the staged one (1000 steps).
  using C = int_sum_case<std::int64_t>;
  for (const sequence_layout& l : {sequence_layout::time_contiguous(3000, 50), sequence_layout::time_contiguous(500, 1000)}) {
    generic_graphs<C>(ref::kind::inclusive, l, direction::forward, true, false);
    generic_graphs<C>(ref::kind::exclusive, l, direction::reverse, false, false);
    generic_graphs<C>(ref::kind::reduce, l, direction::forward, true, false);
  }
}

TEST_CASE(PARSCAN_TEST_NAME("graph capture: generic scans of a channel-last batch"),
          PARSCAN_TEST_TAGS("[graph][scan][batch]")) {
  using namespace graph_test;
  // A (3, 2500, 100) tensor scanned along its middle dimension: the lane tiles.
  const sequence_layout l = sequence_layout::channel_last(3, 2500, 100);
  generic_graphs<affine_f32_case>(ref::kind::inclusive, l, direction::reverse, true, true);
  generic_graphs<affine_f32_case>(ref::kind::exclusive, l, direction::forward, false, true);
  generic_graphs<affine_f32_case>(ref::kind::reduce, l, direction::forward, true, true);
}

TEST_CASE(PARSCAN_TEST_NAME("graph capture: gated recurrence forward and backward"),
          PARSCAN_TEST_TAGS("[graph][recurrence]")) {
  using namespace graph_test;
  // Few long time-contiguous channels (odd T: head pads; 8-byte affine state: the persistent
  // cooperative grid), a channel-last batch (lane tiles), and bfloat16 channel-last (lane packs).
  gated_graphs<float>(2, 3, sized((index_t(1) << 18) + 3, (index_t(1) << 15) + 3), false, false, true);
  gated_graphs<float>(3, 96, 2000, true, true, false);
  gated_graphs<parscan::bfloat16>(2, 128, 1500, true, false, false);
  // Time-contiguous sequences of 1000 and 3000 steps: the backward without x in one kernel.
  gated_whole_sequence_graph<float>(2, 8, 1000, false);
  gated_whole_sequence_graph<parscan::bfloat16>(2, 16, 3000, true);
}

TEST_CASE(PARSCAN_TEST_NAME("graph capture: log recurrence forward and backward"), PARSCAN_TEST_TAGS("[graph][log]")) {
  using namespace graph_test;
  // Few long time-contiguous channels (chained tiles; 12-byte state: the persistent cooperative
  // grid), and a channel-last batch of signed values (lane tiles).
  log_graphs(1, 3, sized((index_t(1) << 17) + 3, (index_t(1) << 14) + 3), false, false, false, true);
  log_graphs(2, 64, 3000, true, true, true, false);
}

TEST_CASE(PARSCAN_TEST_NAME("graph capture: matrix recurrence forward and backward"),
          PARSCAN_TEST_TAGS("[graph][matrix]")) {
  using namespace graph_test;
  // Few long sequences, so every engine runs chunked (three phases, workspace): the thread
  // engine (N = 2), the tensor engine (N = 8), the block engine (N = 24).
  matrix_graphs(4, 5000, 2, false);
  matrix_graphs(3, 2000, 8, true);
  matrix_graphs(2, 600, 24, false);
}

TEST_CASE(PARSCAN_TEST_NAME("graph capture: matrix chain totals and prefixes"), PARSCAN_TEST_TAGS("[graph][chain]")) {
  using namespace graph_test;
  using parscan::chain_math;
  using parscan::chain_order;
  using parscan::chain_output;
  // The chunk engine (d ≤ 64, one cooperative launch: totals through its tree, prefixes
  // through their carries; exact whatever the mode), the level-by-level GEMM tree (64 < d <
  // 128, an odd count), the chunked prefixes of d > 64 on tensor cores (TF32).
  chain_graphs(3, 300, 8, chain_output::total, chain_order::left_to_right, chain_math::exact);
  chain_graphs(2, 9, 40, chain_output::total, chain_order::right_to_left, chain_math::exact);
  chain_graphs(2, 50, 12, chain_output::prefixes, chain_order::left_to_right, chain_math::exact);
  chain_graphs(2, 30, 48, chain_output::prefixes, chain_order::right_to_left, chain_math::tf32);
  chain_graphs(2, 9, 72, chain_output::total, chain_order::right_to_left, chain_math::exact);
  chain_graphs(2, 12, 70, chain_output::prefixes, chain_order::left_to_right, chain_math::tf32);
  // The thread engine (d ≤ 16, B·n ≥ 16384; its staged kernel sets its shared-memory size
  // while capturing): totals in three launches, prefixes in three.
  chain_graphs(64, 300, 8, chain_output::total, chain_order::left_to_right, chain_math::exact);
  chain_graphs(300, 600, 8, chain_output::prefixes, chain_order::right_to_left, chain_math::exact);
  // d ≥ 128: the levels run on cuBLAS, with its workspace carved from the call's.
  chain_graphs(3, 9, 128, chain_output::total, chain_order::left_to_right, chain_math::exact);
  chain_graphs(1, 6, 130, chain_output::total, chain_order::right_to_left, chain_math::tf32);
}
