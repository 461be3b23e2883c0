// test/recurrence/recurrence_cases.inl — the gated-recurrence tests (parscan/recurrence.hpp),
// backend-neutral. Included by recurrence_test.cpp (host backend) and recurrence_test.cu (CUDA
// backend, PARSCAN_TEST_CUDA=1); test names carry the backend ("host: ..." / "cuda: ...").
//
// Every result is compared with a float64 sequential reference (recurrence_reference.hpp),
// computed from the same (rounded) inputs. Error metric: max|x − ref| / max|ref|, at most
// 1e-5 for float and complex<float>, 1e-2 for bfloat16 and float16, 1e-12 for double. Every
// output is poisoned before the call and checked afterwards: each element written, nothing
// written around it (holes of strided layouts, guard bands), inputs untouched.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/env.hpp"

#include "recurrence/recurrence_reference.hpp"
#include "recurrence/recurrence_support.hpp"

namespace rec_test {

/// The gate families a dtype is tested with (complex: in and near the unit disk).
template <class T>
std::vector<family> families() {
  if constexpr (scalar<T>::is_complex) return {family::unit, family::near_one};
  else return {family::unit, family::near_one, family::signed_};
}

/// Shapes so large that one dense layout is enough (alternating from one such shape to the next).
inline bool huge(const shape3& s) {
  return s.B * s.D * s.T > (parscan_test::on_device ? index_t(8) << 20 : index_t(1) << 20);
}

// ---------------------------------------------------------------------------------------
// Forward.

/// Every sweep shape in both dense layouts; the options rotate so each shape size meets
/// x0 / no x0, reverse, log gates and every gate family somewhere.
template <class T>
void forward_sweep() {
  const std::vector<family> fams = families<T>();
  int i = 0, n_huge = 0;
  for (const shape3& s : sweep_shapes())
    for (lay l : {lay::tc, lay::cl}) {
      ++i;
      if (huge(s) && (l == lay::tc) != ((n_huge++ / 2) % 2 == 0)) continue;
      fwd_opts o;
      o.B = s.B, o.D = s.D, o.T = s.T, o.layout = l;
      o.x0 = (i % 2) == 0;
      o.xfinal = (i % 5) != 3;
      o.reverse = ((i / 2) % 2) == 1;
      o.fam = fams[static_cast<std::size_t>(i / 4) % fams.size()];
      o.log = (i % 3) == 1 && o.fam != family::signed_;
      run_forward<T>(o);
    }
}

/// Every combination of options and layouts (dense and strided) on two moderate shapes.
template <class T>
void forward_options() {
  for (const shape3& s : {shape3{3, 11, 129}, shape3{2, 5, 1000}})
    for (lay l : {lay::tc, lay::cl, lay::s1, lay::s2})
      for (bool x0 : {false, true})
        for (bool xf : {false, true})
          for (bool rev : {false, true})
            for (bool log : {false, true})
              for (family f : families<T>()) {
                if (log && f == family::signed_) continue;
                fwd_opts o;
                o.B = s.B, o.D = s.D, o.T = s.T, o.layout = l;
                o.x0 = x0, o.xfinal = xf, o.reverse = rev, o.log = log, o.fam = f;
                run_forward<T>(o);
              }
}

/// Pointers one element past an aligned allocation, and x == b (in place), in every layout.
template <class T>
void forward_misaligned_in_place() {
  int i = 0;
  for (const shape3& s : {shape3{1, 3, 33}, shape3{3, 11, 129}, shape3{2, 48, 1000}, shape3{1, 3, 4097}})
    for (lay l : {lay::tc, lay::cl, lay::s1, lay::s2})
      for (int variant = 0; variant < 3; ++variant) {  // misaligned; in place; both
        ++i;
        fwd_opts o;
        o.B = s.B, o.D = s.D, o.T = s.T, o.layout = l;
        o.misalign = variant != 1 ? 1 : 0;
        o.in_place = variant != 0;
        o.x0 = (i % 2) == 0, o.reverse = (i % 3) == 0, o.log = (i % 4) == 1;
        run_forward<T>(o);
      }
}

/// Lengths whose T·sizeof(T) is not a multiple of 16 (and one that is, in s3): sequences start
/// off 16-byte boundaries, where the CUDA kernels cannot read whole aligned vectors. Base
/// pointers aligned or one element past; b one element past a and x (the tensors disagree);
/// both directions, with and without x0 and x_final.
inline std::vector<shape3> odd_length_shapes() {
  std::vector<shape3> v = {{2, 3, 1},    {1, 5, 3},    {3, 3, 5},      {1, 2, 7},     {2, 7, 1001},
                           {1, 5, 4097}, {3, 1, 4099}, {1, 3, 100003}, {8, 640, 101}, {2, 3, 1000}};
  // Enough sequences for the (staged) warp loop with whole tiles, and long chained ones.
  if (parscan_test::long_shapes_wanted())
    for (const shape3& s : {shape3{8, 1024, 1001}, shape3{2, 512, 4097}, shape3{1, 2, 1000003}}) v.push_back(s);
  return v;
}

template <class T>
void forward_odd_lengths() {
  const std::vector<family> fams = families<T>();
  int i = 0;
  for (const shape3& s : odd_length_shapes())
    for (lay l : {lay::tc, lay::s3})
      for (int variant = 0; variant < 3; ++variant)  // base aligned; one element past; b apart
        for (bool rev : {false, true}) {
          ++i;
          if (huge(s) && l == lay::s3) continue;
          fwd_opts o;
          o.B = s.B, o.D = s.D, o.T = s.T, o.layout = l, o.reverse = rev;
          o.misalign = variant == 1 ? 1 : 0;
          o.b_misalign = variant == 2 ? 1 : -1;
          o.x0 = (i % 2) == 0, o.xfinal = (i % 4) != 3;
          o.fam = fams[static_cast<std::size_t>(i / 2) % fams.size()];
          o.log = (i % 3) == 1 && o.fam != family::signed_;
          o.in_place = variant == 1 && (i % 4) == 1;
          run_forward<T>(o);
        }
}

/// Few long time-contiguous sequences whose lengths are whole 16-byte runs of every dtype: on
/// the CUDA backend they run as bulk tiles (a and b staged whole by the copy engine), with
/// one tile, whole tiles and a partial last one (40960 steps: whole tiles of 5120 f32 and of
/// 8192 16-bit steps, so x_final comes from a full last tile); dense and padded (s3) sequence
/// strides, both directions, x0 and x_final, log gates, x == b.
template <class T>
void forward_few_long() {
  const std::vector<family> fams = families<T>();
  int i = 0;
  for (const shape3& s : {shape3{1, 1, 5120}, shape3{1, 3, 20480}, shape3{2, 3, 40000}, shape3{1, 2, 131136},
                          shape3{1, 2, 40960}})
    for (lay l : {lay::tc, lay::s3})
      for (bool rev : {false, true})
        for (bool in_place : {false, true}) {
          ++i;
          fwd_opts o;
          o.B = s.B, o.D = s.D, o.T = s.T, o.layout = l, o.reverse = rev, o.in_place = in_place;
          o.x0 = (i % 2) == 0, o.xfinal = (i % 3) != 2;
          o.fam = fams[static_cast<std::size_t>(i / 2) % fams.size()];
          o.log = (i % 4) == 1 && o.fam != family::signed_;
          run_forward<T>(o);
        }
}

// ---------------------------------------------------------------------------------------
// Backward.

template <class T>
void backward_sweep() {
  const std::vector<family> fams = families<T>();
  int i = 0, n_huge = 0;
  for (const shape3& s : sweep_shapes())
    for (lay l : {lay::tc, lay::cl}) {
      ++i;
      if (huge(s) && (l == lay::cl) != ((n_huge++ / 2) % 2 == 0)) continue;
      bwd_opts o;
      o.B = s.B, o.D = s.D, o.T = s.T, o.layout = l;
      o.x0 = (i % 2) == 1;
      o.dxfinal = (i % 3) != 0;
      o.x_given = (i % 4) < 2;
      o.reverse = ((i / 2) % 3) == 1;
      o.fam = fams[static_cast<std::size_t>(i / 3) % fams.size()];
      o.log = (i % 5) == 2 && o.fam != family::signed_;
      run_backward<T>(o);
    }
}

template <class T>
void backward_options() {
  int i = 0;
  for (const shape3& s : {shape3{3, 11, 129}, shape3{2, 5, 1000}})
    for (lay l : {lay::tc, lay::cl, lay::s1, lay::s2})
      for (bool x0 : {false, true})
        for (bool dxf : {false, true})
          for (int xmode = 0; xmode < 3; ++xmode)  // x given (b null); x and b given; x null
            for (bool rev : {false, true})
              for (bool log : {false, true})
                for (family f : families<T>()) {
                  if (log && f == family::signed_) continue;
                  ++i;
                  bwd_opts o;
                  o.B = s.B, o.D = s.D, o.T = s.T, o.layout = l;
                  o.x0 = x0, o.dxfinal = dxf, o.reverse = rev, o.log = log, o.fam = f;
                  o.x_given = xmode != 2, o.b_given = xmode == 1;
                  o.dx0_without_x0 = !x0 && (i % 2) == 0;
                  run_backward<T>(o);
                }
}

/// Misaligned pointers, db == dx and da == dx, in every layout.
template <class T>
void backward_misaligned_in_place() {
  int i = 0;
  for (const shape3& s : {shape3{1, 3, 33}, shape3{3, 11, 129}, shape3{2, 48, 1000}, shape3{1, 3, 4097}})
    for (lay l : {lay::tc, lay::cl, lay::s1, lay::s2})
      for (int variant = 0; variant < 5; ++variant) {  // misaligned; db==dx; da==dx; both with misaligned
        ++i;
        bwd_opts o;
        o.B = s.B, o.D = s.D, o.T = s.T, o.layout = l;
        o.misalign = (variant == 0 || variant >= 3) ? 1 : 0;
        o.in_place = variant == 1 || variant == 3 ? 1 : variant == 2 || variant == 4 ? 2 : 0;
        o.x0 = (i % 2) == 0, o.dxfinal = (i % 3) != 1, o.x_given = (i % 4) < 2, o.reverse = (i % 3) == 0;
        o.log = (i % 5) == 1;
        run_backward<T>(o);
      }
}

/// The backward over the shapes of forward_odd_lengths: base pointers aligned or one element
/// past, dx one element past the rest (no pads), x given or recomputed, db == dx.
template <class T>
void backward_odd_lengths() {
  const std::vector<family> fams = families<T>();
  int i = 0;
  for (const shape3& s : odd_length_shapes())
    for (lay l : {lay::tc, lay::s3})
      for (int variant = 0; variant < 3; ++variant)  // base aligned; one element past; dx apart
        for (bool rev : {false, true}) {
          ++i;
          if (huge(s) && l == lay::s3) continue;
          bwd_opts o;
          o.B = s.B, o.D = s.D, o.T = s.T, o.layout = l, o.reverse = rev;
          o.misalign = variant == 1 ? 1 : 0;
          o.dx_misalign = variant == 2 ? 1 : -1;
          o.x0 = (i % 2) == 1, o.dxfinal = (i % 3) != 0, o.x_given = (i % 4) < 2;
          o.fam = fams[static_cast<std::size_t>(i / 2) % fams.size()];
          o.log = (i % 5) == 2 && o.fam != family::signed_;
          o.in_place = variant == 1 && (i % 3) == 1 ? 1 : 0;
          run_backward<T>(o);
        }
}

/// The backward without x over sequences one block holds on the GPU (whole_sequence_backward.cuh:
/// time stride 1, 16-byte aligned sequences of 32·R to 512·R steps, R = 16 steps a thread, 8 for
/// 8-byte types): lengths at both ends of that range and 8 steps outside each; a single
/// sequence of odd length (its last 16-byte word part of the sequence); a part run; both
/// directions and gate forms, with and without x0 and dx_final; db == dx and da == dx.
template <class T>
void backward_whole_sequences() {
  const index_t R = sizeof(T) >= 8 ? 8 : 16;
  const std::vector<family> fams = families<T>();
  int i = 0;
  for (const shape3& s : {shape3{3, 5, 32 * R}, shape3{2, 3, 32 * R - 8}, shape3{1, 1, 512 * R - 1},
                          shape3{1, 2, 512 * R}, shape3{1, 2, 512 * R + 8}, shape3{1, 1, 77 * R + 3},
                          shape3{2, 7, 100 * R + 8}})
    for (int variant = 0; variant < 3; ++variant)  // db, da own tensors; db == dx; da == dx
      for (bool rev : {false, true}) {
        ++i;
        bwd_opts o;
        o.B = s.B, o.D = s.D, o.T = s.T, o.layout = lay::tc, o.reverse = rev, o.in_place = variant;
        o.x_given = false;
        o.x0 = (i % 2) == 0, o.dxfinal = (i % 3) != 1, o.dx0_without_x0 = !o.x0 && (i % 4) == 1;
        o.fam = fams[static_cast<std::size_t>(i) % fams.size()];
        o.log = (i % 3) == 0 && o.fam != family::signed_;
        run_backward<T>(o);
      }
}

// ---------------------------------------------------------------------------------------
// Channel-last lane packs (CUDA: a lane owns two adjacent channels of a 2-byte type when D is
// even and the pointers are 4-byte aligned, one channel otherwise). The shapes have even and
// odd D, below and above one warp's 64 channels, batches whose groups straddle a warp, and
// tiles enough for look-back windows (and, on the GPU, super-windows); misalign = 1 puts every
// base pointer one element off (one channel per lane). Lengths of 1, 64, 65 and 128 steps in
// few groups sit at either side of one staged lane tile (64 or 128 steps), below which the GPU
// runs the lane loop (dispatch_lane_tiles). Host: the same cases, as references.

inline std::vector<shape3> lane_pack_shapes() {
  std::vector<shape3> v = {{1, 64, 300}, {3, 64, 129}, {2, 65, 257},  {1, 256, 1000}, {4, 2, 77},
                           {3, 34, 513}, {2, 96, 4097}, {5, 33, 64}, {1, 64, 1}, {2, 64, 65}, {1, 96, 128}};
  if (parscan_test::long_shapes_wanted()) {
    v.push_back({1, 64, 140001});  // past a super-window of 1024 tiles, forward and backward
    v.push_back({4, 1024, 2049});
    // Groups of 32 channels enough for the float forward's lane loop (two per SM of an H100 or
    // H200: 264): whole groups, and groups that straddle batch rows (D = 1000).
    v.push_back({8, 1088, 300});
    v.push_back({9, 1000, 77});
    // The 16-bit chunk loop ({B, D, T}; on a GPU of 132 SMs, as the H100 and H200). Groups of
    // 64 channels (128-byte rows; tiles of 128 steps forward, 96 backward): 13 · 17 = 221 jobs,
    // the last group of a row one chunk wide; (8, 1088, 300) above: whole groups. Groups of 32
    // channels (64-byte rows; tiles of 256 and 160 steps), where 5 · 17 = 85 wide jobs would
    // not fill the device: 5 · 33 = 165 jobs, the last group one chunk wide. Both: whole tiles
    // and a partial one.
    v.push_back({13, 1032, 520});
    v.push_back({5, 1032, 520});
    // Groups of 128 16-bit channels (256-byte rows; tiles of 128 steps forward, 64 backward)
    // where the channels make whole groups and 12 · 8 = 96 jobs reach two thirds of the device:
    // whole tiles and a partial one. (float takes 128-byte rows here, complex<float> 64-byte.)
    v.push_back({12, 1024, 300});
    // complex<float> takes the chunk loop too (2 channels a chunk: groups of 16 or 8 channels),
    // in 128-byte rows at every shape above from (4, 1024, 2049) on; here 1 · 75 wide jobs would
    // not fill the device, 1 · 150 in 64-byte rows do (the other types take lane packs here).
    v.push_back({1, 1200, 300});
    // float in 64-byte rows where 7 · 17 = 119 jobs (the last group one chunk wide) reach two
    // thirds of 132 SMs but not all of them: the chunk loop on GPUs whose SMs each draw an
    // H200's share of the memory bandwidth, lane packs elsewhere.
    v.push_back({7, 260, 300});
  }
  return v;
}

template <class T>
void forward_lane_packs() {
  const std::vector<family> fams = families<T>();
  int i = 0;
  for (const shape3& s : lane_pack_shapes())
    for (index_t misalign : {0, 1})
      for (bool x0 : {false, true})
        for (bool rev : {false, true}) {
          ++i;
          if (huge(s) && misalign != 0) continue;  // the GPU's long shapes: aligned only
          fwd_opts o;
          o.B = s.B, o.D = s.D, o.T = s.T, o.layout = lay::cl, o.misalign = misalign;
          o.x0 = x0, o.reverse = rev, o.xfinal = (i % 3) != 2, o.in_place = (i % 5) == 4;
          o.fam = fams[static_cast<std::size_t>(i) % fams.size()];
          o.log = (i % 4) == 1 && o.fam != family::signed_;
          run_forward<T>(o);
        }
}

template <class T>
void backward_lane_packs() {
  const std::vector<family> fams = families<T>();
  int i = 0;
  for (const shape3& s : lane_pack_shapes())
    for (index_t misalign : {0, 1})
      for (bool x0 : {false, true})
        for (bool rev : {false, true}) {
          ++i;
          if (huge(s) && misalign != 0) continue;
          bwd_opts o;
          o.B = s.B, o.D = s.D, o.T = s.T, o.layout = lay::cl, o.misalign = misalign;
          o.x0 = x0, o.reverse = rev, o.dxfinal = (i % 3) != 1;
          o.x_given = (i % 4) < 2, o.b_given = (i % 4) == 1;  // x null: the recompute takes lane packs too
          o.in_place = (i % 6) == 5 ? 1 : (i % 6) == 2 ? 2 : 0;
          o.fam = fams[static_cast<std::size_t>(i) % fams.size()];
          o.log = (i % 5) == 2 && o.fam != family::signed_;
          run_backward<T>(o);
        }
}

// ---------------------------------------------------------------------------------------
// Chunks, determinism.

template <class T>
void chunked() {
  int i = 0;
  for (lay l : {lay::tc, lay::cl, lay::s1, lay::s2})
    for (bool rev : {false, true})
      for (bool x0 : {false, true})
        for (bool x_given : {true, false}) {
          ++i;
          bwd_opts o;
          o.B = 2, o.D = 3, o.T = 100, o.layout = l;
          o.reverse = rev, o.x0 = x0, o.x_given = x_given, o.dxfinal = (i % 3) != 0, o.log = (i % 3) == 1;
          o.fam = (i % 2) ? family::near_one : family::unit;
          o.misalign = (i % 4) == 3 ? 1 : 0;
          run_chunked<T>(o, (i % 3) == 2);  // a third share one state buffer (x_final == x0, dx0 == dx_final)
        }
  for (const shape3& s : {shape3{1, 1, 3}, shape3{3, 11, 4097}, shape3{2, 48, 1000}})
    for (bool rev : {false, true}) {
      ++i;
      bwd_opts o;
      o.B = s.B, o.D = s.D, o.T = s.T, o.layout = (i % 2) ? lay::cl : lay::tc;
      o.reverse = rev, o.x0 = true, o.dxfinal = true, o.x_given = rev, o.fam = family::near_one;
      run_chunked<T>(o, rev);
    }
}

/// The same call twice gives bitwise identical outputs.
template <class T>
void determinism() {
  std::vector<shape3> shapes = {{2, 48, 4097}, {1, 3, 65537}};
#if PARSCAN_TEST_ON_DEVICE
  shapes.push_back({8, 1536, 1024});  // many tiles and blocks: where scheduling could leak into results
  shapes.push_back({2, 8, index_t(1) << 20});
#endif
  for (const shape3& s : shapes)
    for (lay l : {lay::tc, lay::cl}) {
      bwd_opts o;
      o.B = s.B, o.D = s.D, o.T = s.T, o.layout = l, o.x0 = true, o.dxfinal = true, o.log = l == lay::cl;
      o.fam = family::near_one;
      INFO(scalar<T>::name() << " determinism " << o.str());
      PARSCAN_TEST_RNG(r, std::string("recurrence determinism ") + scalar<T>::name() + " " + o.str());
      const bwd_inputs<T> in = draw_bwd_inputs<T>(r, o);
      const fwd_opts fo = o.forward();
      const fwd_inputs<T> fin{in.a, in.b, in.x0};
      // The writes are checked elsewhere; here only the bits of repeated calls matter.
      const fwd_out<T> f1 = forward_call(fo, fin, false), f2 = forward_call(fo, fin, false);
      CHECK(first_bitwise_difference(f1.x, f2.x) == -1);
      CHECK(first_bitwise_difference(f1.xf, f2.xf) == -1);
      for (bool x_given : {true, false}) {
        o.x_given = x_given;
        INFO("backward, x " << (x_given ? "given" : "null"));
        const bwd_out<T> b1 = backward_call(o, in, false), b2 = backward_call(o, in, false);
        CHECK(first_bitwise_difference(b1.da, b2.da) == -1);
        CHECK(first_bitwise_difference(b1.db, b2.db) == -1);
        CHECK(first_bitwise_difference(b1.dx0, b2.dx0) == -1);
      }
    }
}

// ---------------------------------------------------------------------------------------
// Non-finite inputs.

/// NaN / ±Inf placed in b (and a NaN in a) of a few channels: those channels follow IEEE
/// arithmetic from that step on (in processing order), the others are unaffected.
template <class T>
void non_finite() {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  // T = 1001: every sequence but the first starts off a 16-byte boundary (the CUDA head pads).
  for (int variant = 0; variant < 8; ++variant) {
    const index_t length = variant < 4 ? 1000 : 1001;
    const lay l = variant % 4 < 2 ? lay::tc : lay::cl;
    const bool rev = variant % 2 == 1;
    fwd_opts o;
    o.B = 2, o.D = 3, o.T = length, o.layout = l, o.reverse = rev, o.x0 = true, o.fam = family::near_one;
    INFO(scalar<T>::name() << " non-finite " << o.str());
    PARSCAN_TEST_RNG(r, std::string("recurrence non-finite ") + scalar<T>::name() + " " + o.str());
    fwd_inputs<T> in = draw_fwd_inputs<T>(r, o);
    const index_t Tn = o.T;
    // channel 4: NaN in b at t = 500; channel 5: NaN in a at t = 200 (never the first step)
    if constexpr (scalar<T>::is_complex) {
      in.b[4 * Tn + 500] = from_ref<T>(std::complex<double>(nan, nan));
      in.a[5 * Tn + 200] = from_ref<T>(std::complex<double>(nan, nan));
    } else {
      in.b[4 * Tn + 500] = from_ref<T>(nan);
      in.a[5 * Tn + 200] = from_ref<T>(nan);
      // channel 1: +Inf in b at t = 300; channel 2: −Inf in b at t = 0. Gates are positive,
      // so the infinities persist (real types only: complex infinities mix into NaN).
      in.b[1 * Tn + 300] = from_ref<T>(inf);
      in.b[2 * Tn + 0] = from_ref<T>(-inf);
      // channel 3: +Inf gate at the first processed step, times x0 ≠ 0: ±Inf from there on
      // (a head pad combined before it would make a·(-0) + b a NaN)
      in.a[3 * Tn + (rev ? Tn - 1 : 0)] = from_ref<T>(inf);
    }
    const fwd_ref<T> ref = reference_forward(o, in);
    const fwd_out<T> out = forward_call(o, in);
    REQUIRE(out.st == status::success);
    double x_scale = 0;  // max|ref| over the finite states of x, the scale x_final is held to
    for (int which = 0; which < 2; ++which) {
      const std::vector<T>& got = which ? out.xf : out.x;
      const std::vector<ref_t<T>>& want = which ? ref.xf : ref.x;
      INFO((which ? "x_final" : "x"));
      index_t class_mismatch = 0, first = -1, nans = 0, infs = 0;
      double num = 0, den = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        const ref_t<T> g = to_ref(got[i]), w = want[i];
        bool ok;
        if (isnan_(w)) ok = isnan_(g), ++nans;
        else if (!isfinite_(w)) ok = g == w, ++infs;
        else {
          ok = isfinite_(g);
          if (ok) num = std::max(num, std::abs(g - w)), den = std::max(den, std::abs(w));
        }
        if (!ok && class_mismatch++ == 0) first = static_cast<index_t>(i);
      }
      INFO("elements where NaN/Inf/finite differs from IEEE sequential: " << class_mismatch << ", first at channel "
                                                                            << (first < 0 ? -1 : first / (which ? 1 : Tn))
                                                                            << " step " << (first < 0 ? -1 : first % Tn));
      CHECK(class_mismatch == 0);
      CHECK(nans > 0);  // the test itself must have produced non-finite values
      if constexpr (!scalar<T>::is_complex) CHECK(infs > 0);
      // Only a few finite channels of near-one gates remain here, so max|ref| is small against
      // the sums that x is made of and the float rounding, though normal, sometimes passed the
      // forward's tolerance (1.1e-5, about one seed in 50). This check is for the finite values
      // not being disturbed; the accuracy itself is held to scalar<T>::tol by the forward tests.
      // x_final has only a few finite elements (two or three of six channels), whose magnitude
      // can be far below that of the states they were summed through; so it is measured against
      // the scale of x (at 4 tol against its own max it failed: 6.5e-5 with
      // PARSCAN_TEST_SEED=4904054147298408837, float, reverse, time-contiguous).
      if (which == 0) x_scale = den;
      else den = std::max(den, x_scale);
      INFO("finite elements: max|x - ref| / max|ref| = " << num / den);
      CHECK(num / den <= 4 * scalar<T>::tol);
    }
    // channel 4 of x is NaN exactly from t = 500 on in processing order
    for (index_t t = 0; t < Tn; ++t) {
      const bool after = rev ? t <= 500 : t >= 500;
      if (isnan_(to_ref(out.x[static_cast<std::size_t>(4 * Tn + t)])) != after) {
        INFO("channel 4, step " << t << ": NaN expected " << after);
        CHECK(false);
        break;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Bad arguments: each returns its status and writes nothing.

template <class T>
struct fwd_fixture {
  static constexpr index_t B = 2, D = 3, T_ = 8, pad = 4;
  tensor<T> a, b, x, x0, xf;
  parscan::gated_forward_args<T> args;
  explicit fwd_fixture(rng& r) {
    fwd_opts o;
    o.B = B, o.D = D, o.T = T_, o.x0 = true;
    const fwd_inputs<T> in = draw_fwd_inputs<T>(r, o);
    const geometry g = make_geometry(arrangement::tc, B, D, T_);
    a = tensor<T>(g, pad, &in.a), b = tensor<T>(g, pad, &in.b), x = tensor<T>(g, pad, nullptr);
    x0 = tensor<T>::dense(B * D, pad, &in.x0), xf = tensor<T>::dense(B * D, pad, nullptr);
    args.shape = recurrence_shape{B, D, T_, recurrence_layout::time_contiguous};
    args.a = a.ptr(), args.b = b.ptr(), args.x = x.ptr(), args.x0 = x0.ptr(), args.x_final = xf.ptr();
    args.a_strides = args.b_strides = args.x_strides = g.s;
  }
  void check_nothing_written() {
    check_untouched(x, "x"), check_untouched(xf, "x_final");
    check_input_unchanged(a, "a"), check_input_unchanged(b, "b"), check_input_unchanged(x0, "x0");
  }
};

template <class T>
void bad_forward() {
  using args_t = parscan::gated_forward_args<T>;
  struct bad {
    const char* what;
    std::function<void(args_t&, fwd_fixture<T>&)> mutate;
    status want, also = status::success;  // `also`: a second acceptable status, where the docs differ
  };
  const index_t big = index_t(1) << 62, huge31 = index_t(1) << 31;
  const std::vector<bad> cases = {
      {"a null", [](args_t& g, fwd_fixture<T>&) { g.a = nullptr; }, status::null_pointer},
      {"b null", [](args_t& g, fwd_fixture<T>&) { g.b = nullptr; }, status::null_pointer},
      {"x null", [](args_t& g, fwd_fixture<T>&) { g.x = nullptr; }, status::null_pointer},
      {"batch -1", [](args_t& g, fwd_fixture<T>&) { g.shape.batch = -1; }, status::negative_size},
      {"channels -1", [](args_t& g, fwd_fixture<T>&) { g.shape.channels = -1; }, status::negative_size},
      {"length -1", [](args_t& g, fwd_fixture<T>&) { g.shape.length = -1; }, status::negative_size},
      {"length 2^62", [=](args_t& g, fwd_fixture<T>&) { g.shape.batch = 1, g.shape.channels = 1, g.shape.length = big; },
       status::size_overflow},
      {"B = D = T = 2^31", [=](args_t& g, fwd_fixture<T>&) { g.shape = {huge31, huge31, huge31, g.shape.layout}; },
       status::size_overflow},
      // Dense layouts whose strides themselves (D·T) overflow: still a size overflow, since
      // the caller gave no strides.
      {"channel_last, B=1 D=2 T=2^62",
       [=](args_t& g, fwd_fixture<T>&) { g.shape = {1, 2, big, recurrence_layout::channel_last}; },
       status::size_overflow},
      {"time_contiguous, B=1 D=2 T=2^62",
       [=](args_t& g, fwd_fixture<T>&) { g.shape = {1, 2, big, recurrence_layout::time_contiguous}; },
       status::size_overflow},
      {"strided, time stride 2^62",
       [=](args_t& g, fwd_fixture<T>&) {
         g.shape.layout = recurrence_layout::strided;
         g.b_strides.time = big;
       },
       status::size_overflow},
      {"strided, a time stride -1",
       [](args_t& g, fwd_fixture<T>&) {
         g.shape.layout = recurrence_layout::strided;
         g.a_strides.time = -1;
       },
       status::invalid_stride},
      {"strided, b channel stride -1",
       [](args_t& g, fwd_fixture<T>&) {
         g.shape.layout = recurrence_layout::strided;
         g.b_strides.channel = -1;
       },
       status::invalid_stride},
      {"strided, x batch stride -1",
       [](args_t& g, fwd_fixture<T>&) {
         g.shape.layout = recurrence_layout::strided;
         g.x_strides.batch = -1;
       },
       status::invalid_stride},
      {"strided, x time stride 0 (output elements alias)",
       [](args_t& g, fwd_fixture<T>&) {
         g.shape.layout = recurrence_layout::strided;
         g.x_strides.time = 0;
       },
       status::invalid_stride, status::overlapping_output},
      {"strided, x strides {1,1,1} (output elements alias)",
       [](args_t& g, fwd_fixture<T>&) {
         g.shape.layout = recurrence_layout::strided;
         g.x_strides = {1, 1, 1};
       },
       status::overlapping_output},
      {"x overlaps a, not exactly (x = a - 1)", [](args_t& g, fwd_fixture<T>& f) { g.x = f.a.ptr() - 1; },
       status::overlapping_output},
      {"x overlaps b, not exactly (x = b - 1)", [](args_t& g, fwd_fixture<T>& f) { g.x = f.b.ptr() - 1; },
       status::overlapping_output},
      {"x at b but other strides",
       [](args_t& g, fwd_fixture<T>& f) {
         g.shape.layout = recurrence_layout::strided;
         g.x = f.b.ptr();
         g.x_strides = {fwd_fixture<T>::D * fwd_fixture<T>::T_, 1, fwd_fixture<T>::D};  // channel-last over b
       },
       status::overlapping_output},
      {"x_final overlaps x (x_final = x + 3)", [](args_t& g, fwd_fixture<T>& f) { g.x_final = f.x.ptr() + 3; },
       status::overlapping_output},
      {"x_final overlaps a (x_final = a + 2)", [](args_t& g, fwd_fixture<T>& f) { g.x_final = f.a.ptr() + 2; },
       status::overlapping_output},
      {"x overlaps x0 (x0 = x + 1)", [](args_t& g, fwd_fixture<T>& f) { g.x0 = f.x.ptr() + 1; },
       status::overlapping_output},
  };
  for (const bad& c : cases) {
    INFO(scalar<T>::name() << " forward, bad argument: " << c.what);
    PARSCAN_TEST_RNG(r, std::string("recurrence bad forward ") + scalar<T>::name() + c.what);
    fwd_fixture<T> f(r);
    args_t args = f.args;
    c.mutate(args, f);
    const status st = parscan::gated_recurrence_forward(parscan_test::backend(), args);
    PARSCAN_TEST_SYNC();
    INFO("status " << parscan::to_string(st));
    CHECK((st == c.want || (c.also != status::success && st == c.also)));
    f.check_nothing_written();
  }
}

template <class T>
struct bwd_fixture {
  static constexpr index_t B = 2, D = 3, T_ = 8, pad = 4;
  tensor<T> a, x, b, x0, dx, dxf, da, db, dx0;
  parscan::gated_backward_args<T> args;
  explicit bwd_fixture(rng& r) {
    bwd_opts o;
    o.B = B, o.D = D, o.T = T_, o.x0 = true, o.dxfinal = true;
    const bwd_inputs<T> in = draw_bwd_inputs<T>(r, o);
    const geometry g = make_geometry(arrangement::tc, B, D, T_);
    a = tensor<T>(g, pad, &in.a), x = tensor<T>(g, pad, &in.x), b = tensor<T>(g, pad, &in.b);
    x0 = tensor<T>::dense(B * D, pad, &in.x0), dx = tensor<T>(g, pad, &in.dx);
    dxf = tensor<T>::dense(B * D, pad, &in.dxf);
    da = tensor<T>(g, pad, nullptr), db = tensor<T>(g, pad, nullptr), dx0 = tensor<T>::dense(B * D, pad, nullptr);
    args.shape = recurrence_shape{B, D, T_, recurrence_layout::time_contiguous};
    args.a = a.ptr(), args.x = x.ptr(), args.b = b.ptr(), args.x0 = x0.ptr(), args.dx = dx.ptr();
    args.dx_final = dxf.ptr(), args.da = da.ptr(), args.db = db.ptr(), args.dx0 = dx0.ptr();
    args.a_strides = args.x_strides = args.b_strides = args.dx_strides = args.da_strides = args.db_strides = g.s;
  }
  void check_nothing_written() {
    check_untouched(da, "da"), check_untouched(db, "db"), check_untouched(dx0, "dx0");
    check_input_unchanged(a, "a"), check_input_unchanged(x, "x"), check_input_unchanged(b, "b");
    check_input_unchanged(x0, "x0"), check_input_unchanged(dx, "dx"), check_input_unchanged(dxf, "dx_final");
  }
};

template <class T>
void bad_backward() {
  using args_t = parscan::gated_backward_args<T>;
  using fx = bwd_fixture<T>;
  struct bad {
    const char* what;
    std::function<void(args_t&, fx&)> mutate;
    status want;
  };
  const index_t big = index_t(1) << 62;
  auto strided = [](args_t& g) { g.shape.layout = recurrence_layout::strided; };
  const std::vector<bad> cases = {
      {"a null", [](args_t& g, fx&) { g.a = nullptr; }, status::null_pointer},
      {"dx null", [](args_t& g, fx&) { g.dx = nullptr; }, status::null_pointer},
      {"da null", [](args_t& g, fx&) { g.da = nullptr; }, status::null_pointer},
      {"db null", [](args_t& g, fx&) { g.db = nullptr; }, status::null_pointer},
      {"x0 given, dx0 null", [](args_t& g, fx&) { g.dx0 = nullptr; }, status::null_pointer},
      {"x null and b null", [](args_t& g, fx&) { g.x = nullptr, g.b = nullptr; }, status::null_pointer},
      {"batch -1", [](args_t& g, fx&) { g.shape.batch = -1; }, status::negative_size},
      {"channels -1", [](args_t& g, fx&) { g.shape.channels = -1; }, status::negative_size},
      {"length -1", [](args_t& g, fx&) { g.shape.length = -1; }, status::negative_size},
      {"length 2^62", [=](args_t& g, fx&) { g.shape.batch = 1, g.shape.channels = 1, g.shape.length = big; },
       status::size_overflow},
      {"B = D = T = 2^31",
       [=](args_t& g, fx&) { g.shape = {index_t(1) << 31, index_t(1) << 31, index_t(1) << 31, g.shape.layout}; },
       status::size_overflow},
      {"channel_last, B=1 D=2 T=2^62", [=](args_t& g, fx&) { g.shape = {1, 2, big, recurrence_layout::channel_last}; },
       status::size_overflow},
      {"strided, dx time stride 2^62", [=](args_t& g, fx&) { strided(g), g.dx_strides.time = big; },
       status::size_overflow},
      {"strided, a time stride -1", [=](args_t& g, fx&) { strided(g), g.a_strides.time = -1; }, status::invalid_stride},
      {"strided, x channel stride -1", [=](args_t& g, fx&) { strided(g), g.x_strides.channel = -1; },
       status::invalid_stride},
      {"strided, dx time stride -1", [=](args_t& g, fx&) { strided(g), g.dx_strides.time = -1; },
       status::invalid_stride},
      {"strided, da batch stride -1", [=](args_t& g, fx&) { strided(g), g.da_strides.batch = -1; },
       status::invalid_stride},
      {"strided, db channel stride -1", [=](args_t& g, fx&) { strided(g), g.db_strides.channel = -1; },
       status::invalid_stride},
      {"strided, b time stride -1 (x null)", [=](args_t& g, fx&) { strided(g), g.x = nullptr, g.b_strides.time = -1; },
       status::invalid_stride},
      {"da aliases a exactly", [](args_t& g, fx& f) { g.da = f.a.ptr(); }, status::overlapping_output},
      {"da overlaps a (da = a - 1)", [](args_t& g, fx& f) { g.da = f.a.ptr() - 1; }, status::overlapping_output},
      {"db aliases x exactly", [](args_t& g, fx& f) { g.db = f.x.ptr(); }, status::overlapping_output},
      {"db overlaps x (db = x - 1)", [](args_t& g, fx& f) { g.db = f.x.ptr() - 1; }, status::overlapping_output},
      {"db overlaps da (db = da - 1)", [](args_t& g, fx& f) { g.db = f.da.ptr() - 1; }, status::overlapping_output},
      {"da and db the same buffer", [](args_t& g, fx& f) { g.db = f.da.ptr(); }, status::overlapping_output},
      {"dx0 overlaps dx_final (dx0 = dx_final - 1)", [](args_t& g, fx& f) { g.dx0 = f.dxf.ptr() - 1; },
       status::overlapping_output},
      {"dx0 overlaps da (dx0 = da + 3)", [](args_t& g, fx& f) { g.dx0 = f.da.ptr() + 3; }, status::overlapping_output},
      {"da at dx but other strides",
       [=](args_t& g, fx& f) {
         strided(g);
         g.da = f.dx.ptr();
         g.da_strides = {fx::D * fx::T_, 1, fx::D};
       },
       status::overlapping_output},
      {"db overlaps b (x null, db = b - 1)", [](args_t& g, fx& f) { g.x = nullptr, g.db = f.b.ptr() - 1; },
       status::overlapping_output},
  };
  for (const bad& c : cases) {
    INFO(scalar<T>::name() << " backward, bad argument: " << c.what);
    PARSCAN_TEST_RNG(r, std::string("recurrence bad backward ") + scalar<T>::name() + c.what);
    fx f(r);
    args_t args = f.args;
    c.mutate(args, f);
    const status st = parscan::gated_recurrence_backward(parscan_test::backend(), args);
    PARSCAN_TEST_SYNC();
    CHECK(st == c.want);
    f.check_nothing_written();
  }
}

// ---------------------------------------------------------------------------------------
// Zero-sized problems: success, and no element written.

/// recurrence.hpp: with T = 0 nothing is read from a or b and x_final receives x0 (or zero);
/// backward with T = 0 writes dx0 (x0 given) = dx_final (or zero). With B·D = 0 there is no
/// element to write at all.
template <class T>
void zero_sized() {
  for (const shape3& s : {shape3{2, 3, 0}, shape3{0, 3, 8}, shape3{2, 0, 8}, shape3{0, 0, 0}})
    for (lay l : {lay::tc, lay::cl, lay::s1})
      for (bool with_state : {true, false}) {  // forward: x0 given or not; backward: dx_final given or not
        INFO(scalar<T>::name() << " zero-sized B=" << s.B << " D=" << s.D << " T=" << s.T << " layout=" << name(l)
                               << (with_state ? " with x0 / dx_final" : " without x0 / dx_final"));
        PARSCAN_TEST_RNG(r, std::string("recurrence zero-sized ") + scalar<T>::name());
        const index_t C = s.B * s.D, pad = 3;
        const fwd_arr fa = fwd_arrangements(l, false);
        std::vector<T> none, x0v(static_cast<std::size_t>(C)), dxfv(static_cast<std::size_t>(C));
        fill_normal(r, x0v);
        fill_normal(r, dxfv);
        const std::vector<ref_t<T>> zeros(static_cast<std::size_t>(C), ref_t<T>(0));
        // Every tensor keeps `pad` elements of payload, so a stray write has somewhere to land.
        tensor<T> ta(make_geometry(fa.a, s.B, s.D, s.T), pad, &none), tb(make_geometry(fa.b, s.B, s.D, s.T), pad, &none);
        tensor<T> tx(make_geometry(fa.x, s.B, s.D, s.T), pad, nullptr);
        tensor<T> tx0 = tensor<T>::dense(C, pad, &x0v), txf = tensor<T>::dense(C, pad, nullptr);
        parscan::gated_forward_args<T> fargs;
        fargs.shape = recurrence_shape{s.B, s.D, s.T, api_layout(l)};
        fargs.a = ta.ptr(), fargs.b = tb.ptr(), fargs.x = tx.ptr(), fargs.x_final = txf.ptr();
        fargs.x0 = with_state ? tx0.ptr() : nullptr;
        fargs.a_strides = ta.strides(), fargs.b_strides = tb.strides(), fargs.x_strides = tx.strides();
        const status fs = parscan::gated_recurrence_forward(parscan_test::backend(), fargs);
        PARSCAN_TEST_SYNC();
        CHECK(fs == status::success);
        check_untouched(tx, "x");
        if (C == 0) {
          check_untouched(txf, "x_final");
        } else {
          check_output_writes(txf, "x_final (T = 0)");
          const std::vector<T> xf = txf.values();
          INFO("T = 0: x_final must equal x0 (or zero without x0), bit for bit");
          CHECK(first_bitwise_difference(xf, with_state ? x0v : from_ref_vec<T>(zeros)) == -1);
        }
        check_input_unchanged(ta, "a"), check_input_unchanged(tb, "b"), check_input_unchanged(tx0, "x0");

        const bwd_arr ba = bwd_arrangements(l, 0);
        auto geo = [&](arrangement a) { return make_geometry(a, s.B, s.D, s.T); };
        tensor<T> ba_(geo(ba.a), pad, &none), bx(geo(ba.x), pad, &none), bdx(geo(ba.dx), pad, &none);
        tensor<T> bda(geo(ba.da), pad, nullptr), bdb(geo(ba.db), pad, nullptr);
        tensor<T> bdxf = tensor<T>::dense(C, pad, &dxfv), bdx0 = tensor<T>::dense(C, pad, nullptr);
        parscan::gated_backward_args<T> bargs;
        bargs.shape = fargs.shape;
        bargs.a = ba_.ptr(), bargs.x = bx.ptr(), bargs.x0 = tx0.ptr(), bargs.dx = bdx.ptr();
        bargs.dx_final = with_state ? bdxf.ptr() : nullptr;
        bargs.da = bda.ptr(), bargs.db = bdb.ptr(), bargs.dx0 = bdx0.ptr();
        bargs.a_strides = ba_.strides(), bargs.x_strides = bx.strides(), bargs.b_strides = geo(ba.b).s;
        bargs.dx_strides = bdx.strides(), bargs.da_strides = bda.strides(), bargs.db_strides = bdb.strides();
        const status bs = parscan::gated_recurrence_backward(parscan_test::backend(), bargs);
        PARSCAN_TEST_SYNC();
        CHECK(bs == status::success);
        check_untouched(bda, "da"), check_untouched(bdb, "db");
        if (C == 0) {
          check_untouched(bdx0, "dx0");
        } else {
          check_output_writes(bdx0, "dx0 (T = 0)");
          const std::vector<T> dx0 = bdx0.values();
          INFO("T = 0: dx0 must equal dx_final (or zero without it), bit for bit");
          CHECK(first_bitwise_difference(dx0, with_state ? dxfv : from_ref_vec<T>(zeros)) == -1);
        }
        check_input_unchanged(ba_, "a"), check_input_unchanged(bx, "x"), check_input_unchanged(bdx, "dx");
        check_input_unchanged(bdxf, "dx_final"), check_input_unchanged(tx0, "x0");
      }
}

// ---------------------------------------------------------------------------------------
// The backward formulas themselves, against finite differences of
//     L = sum(w·x) + sum(v·x_final)      (complex: L = Re sum(conj(w)·x + conj(v)·x_final))
// whose gradient (PyTorch's convention for complex: ∂L/∂Re z + i·∂L/∂Im z) is the backward
// with dx = w, dx_final = v.

template <class R>
double loss(index_t C, index_t T, const std::vector<R>& a_stored, bool log_form, const std::vector<R>& b,
            const std::vector<R>& x0, bool reverse, const std::vector<R>& w, const std::vector<R>& v) {
  std::vector<R> a(a_stored.size()), x, xf;
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = log_form ? exp_(a_stored[i]) : a_stored[i];
  ref_forward(C, T, a, b, x0.empty() ? nullptr : x0.data(), reverse, x, xf);
  double L = 0;
  for (std::size_t i = 0; i < x.size(); ++i) L += std::real(conj_(w[i]) * x[i]);
  for (std::size_t i = 0; i < xf.size(); ++i) L += std::real(conj_(v[i]) * xf[i]);
  return L;
}

/// Central differences of `loss` with respect to every element of `p` (one of a, b, x0).
template <class R>
std::vector<R> fd_gradient(std::vector<R>& p, double h, const std::function<double()>& L) {
  std::vector<R> g(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    const R keep = p[i];
    auto partial = [&](R dir) {
      p[i] = keep + dir * h;
      const double up = L();
      p[i] = keep - dir * h;
      const double dn = L();
      p[i] = keep;
      return (up - dn) / (2 * h);
    };
    if constexpr (std::is_same<R, double>::value) g[i] = partial(1.0);
    else g[i] = R(partial(R(1, 0)), partial(R(0, 1)));
  }
  return g;
}

}  // namespace rec_test

// =======================================================================================
// The test cases.

#define REC_NAME(title) PARSCAN_TEST_NAME("recurrence " title)
#define REC_TAGS(tags) PARSCAN_TEST_TAGS("[recurrence]" tags)

/// One TEST_CASE per library dtype, each calling fn<dtype>().
#define REC_FOR_EACH_DTYPE(title, tags, fn)                                                        \
  TEST_CASE(REC_NAME(title " <float>"), REC_TAGS(tags)) { rec_test::fn<float>(); }                 \
  TEST_CASE(REC_NAME(title " <double>"), REC_TAGS(tags)) { rec_test::fn<double>(); }               \
  TEST_CASE(REC_NAME(title " <bfloat16>"), REC_TAGS(tags)) { rec_test::fn<parscan::bfloat16>(); }  \
  TEST_CASE(REC_NAME(title " <float16>"), REC_TAGS(tags)) { rec_test::fn<parscan::float16>(); }    \
  TEST_CASE(REC_NAME(title " <complex<float>>"), REC_TAGS(tags)) { rec_test::fn<rec_test::cfloat>(); }

REC_FOR_EACH_DTYPE("forward: shapes x dense layouts", "[forward]", forward_sweep)
REC_FOR_EACH_DTYPE("forward: every option x every layout", "[forward]", forward_options)
REC_FOR_EACH_DTYPE("forward: misaligned pointers and x == b", "[forward]", forward_misaligned_in_place)
REC_FOR_EACH_DTYPE("forward: lengths off 16-byte multiples and sequences off alignment", "[forward][odd_t]",
                   forward_odd_lengths)
REC_FOR_EACH_DTYPE("forward: few long sequences of whole runs", "[forward][few_long]", forward_few_long)
REC_FOR_EACH_DTYPE("backward: shapes x dense layouts", "[backward]", backward_sweep)
REC_FOR_EACH_DTYPE("backward: every option x every layout", "[backward]", backward_options)
REC_FOR_EACH_DTYPE("backward: misaligned pointers, db == dx, da == dx", "[backward]", backward_misaligned_in_place)
REC_FOR_EACH_DTYPE("backward: lengths off 16-byte multiples and sequences off alignment", "[backward][odd_t]",
                   backward_odd_lengths)
REC_FOR_EACH_DTYPE("backward: x recomputed over whole sequences, lengths at the ends of a block's", "[backward]",
                   backward_whole_sequences)
REC_FOR_EACH_DTYPE("forward: channel-last lane packs with even and odd D and misaligned pointers", "[forward][lane_packs]",
                   forward_lane_packs)
REC_FOR_EACH_DTYPE("backward: channel-last lane packs with even and odd D and misaligned pointers", "[backward][lane_packs]",
                   backward_lane_packs)
REC_FOR_EACH_DTYPE("chunked forward and backward equal one call", "[chunked]", chunked)
REC_FOR_EACH_DTYPE("same call twice is bitwise identical", "[determinism]", determinism)
REC_FOR_EACH_DTYPE("NaN and Inf propagate per channel as IEEE", "[nonfinite]", non_finite)
REC_FOR_EACH_DTYPE("forward: bad arguments return their status and write nothing", "[errors]", bad_forward)
REC_FOR_EACH_DTYPE("backward: bad arguments return their status and write nothing", "[errors]", bad_backward)
REC_FOR_EACH_DTYPE("zero-sized problems succeed; with T = 0 x_final = x0, dx0 = dx_final", "[errors]", zero_sized)

TEST_CASE(REC_NAME("reference: backward formulas equal finite differences of the loss"), REC_TAGS("[reference]")) {
  // Checks the test's own float64 reference (and so the formulas of recurrence.hpp, complex
  // conjugates included) against central differences; independent of the library.
  using namespace rec_test;
  PARSCAN_TEST_RNG(r, "recurrence reference finite differences");
  const index_t C = 3, T = 7;
  const std::size_t n = static_cast<std::size_t>(C * T);
  auto check = [&](auto zero, bool x0_given, bool reverse, bool log_form) {
    using R = decltype(zero);
    constexpr bool cplx = !std::is_same<R, double>::value;
    INFO((cplx ? "complex<double>" : "double") << " x0=" << x0_given << " reverse=" << reverse << " log=" << log_form);
    auto draw = [&](std::size_t k) {
      std::vector<R> v(k);
      for (auto& e : v) {
        if constexpr (cplx) e = R(r.normal(), r.normal());
        else e = r.normal();
      }
      return v;
    };
    std::vector<R> a(n);
    for (auto& e : a) {
      if constexpr (cplx) e = draw_gate_complex(r, family::unit, log_form);
      else e = draw_gate_real(r, log_form ? family::unit : family::signed_, log_form);
    }
    std::vector<R> b = draw(n), w = draw(n), v = draw(static_cast<std::size_t>(C));
    std::vector<R> x0 = x0_given ? draw(static_cast<std::size_t>(C)) : std::vector<R>{};
    auto L = [&] { return loss(C, T, a, log_form, b, x0, reverse, w, v); };
    const double h = log_form ? 1e-5 : 1e-3;  // L is affine in each linear gate, b and x0
    const std::vector<R> ga = fd_gradient(a, h, L), gb = fd_gradient(b, 1e-3, L);
    const std::vector<R> gx0 = x0_given ? fd_gradient(x0, 1e-3, L) : std::vector<R>{};

    std::vector<R> al(n), x, xf, da, db, dx0;
    for (std::size_t i = 0; i < n; ++i) al[i] = log_form ? exp_(a[i]) : a[i];
    ref_forward(C, T, al, b, x0_given ? x0.data() : nullptr, reverse, x, xf);
    ref_backward(C, T, al, x, x0_given ? x0.data() : nullptr, w, v.data(), reverse, log_form, da, db, dx0);
    CHECK(rel_error_ref(da, ga) <= 1e-8);
    CHECK(rel_error_ref(db, gb) <= 1e-8);
    if (x0_given) CHECK(rel_error_ref(dx0, gx0) <= 1e-8);
  };
  for (bool x0 : {false, true})
    for (bool rev : {false, true})
      for (bool log : {false, true}) {
        check(0.0, x0, rev, log);
        check(std::complex<double>(0, 0), x0, rev, log);
      }
}

TEST_CASE(REC_NAME("backward <double> equals finite differences of L = sum(w.x) + sum(v.x_final)"),
          REC_TAGS("[backward][gradcheck]")) {
  // The library's float64 backward against central differences of the loss through the
  // float64 reference forward: verifies the backward, not only its agreement with the formulas.
  using namespace rec_test;
  for (lay l : {lay::tc, lay::s1})
    for (bool x0 : {false, true})
      for (bool rev : {false, true})
        for (bool log : {false, true})
          for (bool x_given : {true, false}) {
            bwd_opts o;
            o.B = 2, o.D = 2, o.T = 6, o.layout = l, o.x0 = x0, o.dxfinal = true, o.reverse = rev, o.log = log;
            o.x_given = x_given, o.fam = log ? family::unit : family::signed_;
            INFO("gradcheck " << o.str());
            PARSCAN_TEST_RNG(r, "recurrence gradcheck " + o.str());
            const bwd_inputs<double> in = draw_bwd_inputs<double>(r, o);
            const index_t C = o.B * o.D;
            std::vector<double> a = in.a, b = in.b, x0v = in.x0;
            auto L = [&] { return loss(C, o.T, a, log, b, x0v, rev, in.dx, in.dxf); };
            const std::vector<double> ga = fd_gradient(a, log ? 1e-5 : 1e-3, L), gb = fd_gradient(b, 1e-3, L);
            const std::vector<double> gx0 = x0 ? fd_gradient(x0v, 1e-3, L) : std::vector<double>{};
            const bwd_out<double> out = backward_call(o, in);
            REQUIRE(out.st == status::success);
            CHECK(rel_error_ref(out.da, ga) <= 1e-8);
            CHECK(rel_error_ref(out.db, gb) <= 1e-8);
            if (x0) CHECK(rel_error_ref(out.dx0, gx0) <= 1e-8);
          }
}
