// test/support/env.hpp — a backend-neutral test environment: the same test body runs on the
// host backend (built with g++, no PARSCAN_TEST_CUDA) and on the CUDA backend (built with nvcc,
// PARSCAN_TEST_CUDA=1).
//
//   parscan_test::test_backend   parscan::host_backend, or parscan::cuda_backend on the default
//                                stream with no workspace (the library allocates).
//   guarded_buffer<T>            n elements of host or device memory between two guard bands;
//                                everything starts out filled with a poison byte.
//   PARSCAN_TEST_SYNC()          after a library call: on the GPU, synchronise and REQUIRE that
//                                neither the kernels nor the runtime reported an error.
//   PARSCAN_TEST_NAME("x")       "host: x" or "cuda: x", so both executables' names differ.
//   PARSCAN_TEST_TAGS("[t]")     "[t][host]" or "[t][cuda]".
//
// Only buffers live here; no parscan CUDA code beyond the include.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <parscan/parscan.hpp>

#include "support/catch.hpp"

#if defined(PARSCAN_TEST_CUDA) && PARSCAN_TEST_CUDA
#include <cuda_runtime.h>

#include <parscan/parscan.cuh>
#define PARSCAN_TEST_ON_DEVICE 1
#define PARSCAN_TEST_BACKEND_NAME "cuda"
#else
#define PARSCAN_TEST_ON_DEVICE 0
#define PARSCAN_TEST_BACKEND_NAME "host"
#endif

#define PARSCAN_TEST_NAME(name) PARSCAN_TEST_BACKEND_NAME ": " name
#define PARSCAN_TEST_TAGS(tags) tags "[" PARSCAN_TEST_BACKEND_NAME "]"

namespace parscan_test {

#if PARSCAN_TEST_ON_DEVICE
using test_backend = parscan::cuda_backend;
#else
using test_backend = parscan::host_backend;
#endif

inline constexpr bool on_device = PARSCAN_TEST_ON_DEVICE != 0;

/// Whether to leave out the long shapes that only the GPU runs (PARSCAN_TEST_SMALL set: the
/// compute-sanitizer runs, which slow every kernel down a hundredfold).
inline bool long_shapes_wanted() { return on_device && std::getenv("PARSCAN_TEST_SMALL") == nullptr; }

/// The backend every test runs on: default stream, no workspace, no allocator.
inline test_backend backend() { return test_backend{}; }

namespace detail {

[[noreturn]] inline void fail(const std::string& what) { throw std::runtime_error(what); }

#if PARSCAN_TEST_ON_DEVICE
inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(std::string(what) + ": " + cudaGetErrorString(e));
}
#endif

// Raw storage of `bytes` bytes, host or device, 256-byte aligned.
inline void* raw_allocate(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
#if PARSCAN_TEST_ON_DEVICE
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
#else
  return ::operator new(bytes, std::align_val_t{256});
#endif
}

inline void raw_free(void* p) noexcept {
  if (!p) return;
#if PARSCAN_TEST_ON_DEVICE
  cudaFree(p);
#else
  ::operator delete(p, std::align_val_t{256});
#endif
}

inline void raw_fill(void* p, unsigned char byte, std::size_t bytes) {
#if PARSCAN_TEST_ON_DEVICE
  check_cuda(cudaMemset(p, byte, bytes), "cudaMemset");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after cudaMemset");
#else
  std::memset(p, byte, bytes);
#endif
}

inline void raw_upload(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
#if PARSCAN_TEST_ON_DEVICE
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
#else
  std::memcpy(dst, src, bytes);
#endif
}

inline void raw_download(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
#if PARSCAN_TEST_ON_DEVICE
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
#else
  std::memcpy(dst, src, bytes);
#endif
}

}  // namespace detail

/// The byte every guarded_buffer is filled with. Read as a float, 0xA5A5A5A5 is -2.87e-16; as a
/// double -2.5e-127; as an int64 -6.5e18; as a bfloat16 -2.87e-16; as a float16 -0.0220. The
/// tests keep their data well away from all of these (gates in (0,1), values of order 1,
/// integers far below 2^62), so an element still equal to poison was never written.
inline constexpr unsigned char poison_byte = 0xA5;

/// n elements of T (host memory, or device memory under PARSCAN_TEST_CUDA) with `guard`
/// elements of guard band before and after. Everything, payload and guards, starts out as
/// the poison byte; the guards must keep it, and a payload element whose bytes are all poison
/// was never written.
template <class T>
class guarded_buffer {
  static_assert(std::is_trivially_copyable<T>::value, "guarded_buffer holds trivially copyable types");

 public:
  static constexpr std::size_t default_guard = 64;

  explicit guarded_buffer(std::size_t n, std::size_t guard = default_guard, unsigned char poison = poison_byte)
      : n_(n), guard_(guard), poison_(poison) {
    base_ = detail::raw_allocate(total_bytes());
    detail::raw_fill(base_, poison_, total_bytes());
  }
  /// n elements, payload uploaded from v (n = v.size()).
  explicit guarded_buffer(const std::vector<T>& v) : guarded_buffer(v.size()) { upload(v); }

  guarded_buffer(const guarded_buffer&) = delete;
  guarded_buffer& operator=(const guarded_buffer&) = delete;
  guarded_buffer(guarded_buffer&& o) noexcept : base_(std::exchange(o.base_, nullptr)), n_(o.n_), guard_(o.guard_), poison_(o.poison_) {}
  guarded_buffer& operator=(guarded_buffer&& o) noexcept {
    if (this != &o) {
      detail::raw_free(base_);
      base_ = std::exchange(o.base_, nullptr);
      n_ = o.n_, guard_ = o.guard_, poison_ = o.poison_;
    }
    return *this;
  }
  ~guarded_buffer() { detail::raw_free(base_); }

  /// The payload (a device pointer under PARSCAN_TEST_CUDA). Never null, even when n = 0.
  T* data() const { return reinterpret_cast<T*>(static_cast<unsigned char*>(base_) + guard_ * sizeof(T)); }
  std::size_t size() const { return n_; }
  std::size_t guard() const { return guard_; }
  unsigned char poison() const { return poison_; }

  /// Writes the payload (v.size() must equal size()); the guard bands are left alone.
  void upload(const std::vector<T>& v) {
    if (v.size() != n_) detail::fail("guarded_buffer::upload: size mismatch");
    detail::raw_upload(data(), v.data(), n_ * sizeof(T));
  }
  /// The payload, copied to the host.
  std::vector<T> download() const {
    std::vector<T> v(n_);
    detail::raw_download(v.data(), data(), n_ * sizeof(T));
    return v;
  }
  /// Refills payload and guards with the poison byte.
  void repoison() { detail::raw_fill(base_, poison_, total_bytes()); }

  /// True when every byte of both guard bands still holds the poison byte.
  bool guards_intact() const {
    const std::vector<unsigned char> raw = raw_bytes();
    const std::size_t g = guard_ * sizeof(T), p = n_ * sizeof(T);
    for (std::size_t i = 0; i < g; ++i)
      if (raw[i] != poison_ || raw[g + p + i] != poison_) return false;
    return true;
  }

  /// True when every byte of v is the poison byte: an element nobody wrote.
  bool is_poison(const T& v) const {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    for (unsigned char c : b)
      if (c != poison_) return false;
    return true;
  }
  /// Per payload element: true when it is still entirely poison (never written).
  std::vector<bool> poison_mask() const {
    const std::vector<T> v = download();
    std::vector<bool> m(n_);
    for (std::size_t i = 0; i < n_; ++i) m[i] = is_poison(v[i]);
    return m;
  }
  /// Payload indices still entirely poison.
  std::vector<std::size_t> poisoned_positions() const {
    const std::vector<bool> m = poison_mask();
    std::vector<std::size_t> r;
    for (std::size_t i = 0; i < n_; ++i)
      if (m[i]) r.push_back(i);
    return r;
  }
  /// Every payload element was overwritten.
  bool all_written() const { return poisoned_positions().empty(); }
  /// No payload element was written (and the guards are intact).
  bool untouched() const {
    const std::vector<unsigned char> raw = raw_bytes();
    for (unsigned char c : raw)
      if (c != poison_) return false;
    return true;
  }

 private:
  std::size_t total_bytes() const { return (n_ + 2 * guard_) * sizeof(T); }
  std::vector<unsigned char> raw_bytes() const {
    std::vector<unsigned char> raw(total_bytes());
    detail::raw_download(raw.data(), base_, raw.size());
    return raw;
  }

  void* base_ = nullptr;
  std::size_t n_, guard_;
  unsigned char poison_;
};

/// Elements of `now` that are not `covered` and whose bytes differ from `before`: writes that
/// landed outside a tensor's addressed elements.
template <class T>
std::size_t stray_changes(const std::vector<T>& now, const std::vector<T>& before, const std::vector<char>& covered) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < now.size(); ++i)
    if (!covered[i] && std::memcmp(&now[i], &before[i], sizeof(T)) != 0) ++n;
  return n;
}

/// Two payloads are bit-identical.
template <class T>
bool bit_identical(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// "[3, 17, 18, ...]": the first few of a list of positions, for failure messages.
inline std::string first_positions(const std::vector<std::size_t>& v, std::size_t max = 8) {
  std::ostringstream s;
  s << v.size() << " position(s) [";
  for (std::size_t i = 0; i < v.size() && i < max; ++i) s << (i ? ", " : "") << v[i];
  s << (v.size() > max ? ", ...]" : "]");
  return s.str();
}

}  // namespace parscan_test

#if PARSCAN_TEST_ON_DEVICE
/// After each library call: wait for the device, and fail on any kernel or runtime error.
#define PARSCAN_TEST_SYNC()                                                          \
  do {                                                                               \
    const cudaError_t parscan_sync_err_ = cudaDeviceSynchronize();                   \
    INFO("cudaDeviceSynchronize: " << cudaGetErrorString(parscan_sync_err_));        \
    REQUIRE(parscan_sync_err_ == cudaSuccess);                                       \
    const cudaError_t parscan_last_err_ = cudaGetLastError();                        \
    INFO("cudaGetLastError: " << cudaGetErrorString(parscan_last_err_));             \
    REQUIRE(parscan_last_err_ == cudaSuccess);                                       \
  } while (0)
#else
#define PARSCAN_TEST_SYNC() ((void)0)
#endif

// Print parscan::status by name in assertion messages.
namespace Catch {
template <>
struct StringMaker<parscan::status> {
  static std::string convert(parscan::status s) {
    return std::string("status::") + parscan::to_string(s) + " (" + std::to_string(static_cast<int>(s)) + ")";
  }
};
}  // namespace Catch
