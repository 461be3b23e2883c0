// docs/examples/custom_operator.cpp — a generic scan with a user-written operator.
//
// Any functor works with parscan's generic algorithms if op(earlier, later) is associative
// (it need not be commutative). Here the elements are 2×2 integer matrices and the operator
// is their product modulo a prime, so an inclusive scan of M, M, M, … gives the powers
// M, M², M³, …; with M = [[1, 1], [1, 0]] the entry (0, 1) of M^k is the Fibonacci number
// F(k) mod p. The same functor runs on the CUDA backend (parscan/parscan.cuh in a .cu file)
// because its call operator is marked PARSCAN_HD.
#include <parscan/parscan.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

struct mat2 {
  std::uint64_t m[2][2];
};

// Matrix product mod p, in processing order: the running product times the next matrix.
struct mat2_mul_mod {
  std::uint64_t p;
  PARSCAN_HD mat2 operator()(const mat2& earlier, const mat2& later) const {
    mat2 r;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j)
        r.m[i][j] = (earlier.m[i][0] * later.m[0][j] + earlier.m[i][1] * later.m[1][j]) % p;
    return r;
  }
};

int main() {
  constexpr std::uint64_t prime = 1000000007;
  constexpr int n = 90;
  const std::vector<mat2> in(n, mat2{{{1, 1}, {1, 0}}});
  std::vector<mat2> powers(n);

  const parscan::status s =
      parscan::inclusive_scan(parscan::host_backend{}, in.data(), powers.data(), n, mat2_mul_mod{prime});
  if (s != parscan::status::success) {
    std::printf("inclusive_scan failed: %s\n", parscan::to_string(s));
    return 1;
  }

  // Check against the Fibonacci recurrence, also mod p.
  std::uint64_t f0 = 0, f1 = 1;  // F(k-1), F(k) for k = 1
  for (int k = 1; k <= n; ++k) {
    if (powers[k - 1].m[0][1] != f1) {
      std::printf("mismatch at k=%d: %llu != %llu\n", k, (unsigned long long)powers[k - 1].m[0][1],
                  (unsigned long long)f1);
      return 1;
    }
    const std::uint64_t next = (f0 + f1) % prime;
    f0 = f1, f1 = next;
  }

  // A reduce with the same operator: M^n, whose entry (0, 1) is F(n) mod p.
  mat2 total;
  const mat2 identity{{{1, 0}, {0, 1}}};
  if (parscan::reduce(parscan::host_backend{}, in.data(), n, mat2_mul_mod{prime}, identity, &total) !=
      parscan::status::success)
    return 1;

  std::printf("F(10) = %llu, F(50) mod p = %llu, F(%d) mod p = %llu (p = %llu)\n",
              (unsigned long long)powers[9].m[0][1], (unsigned long long)powers[49].m[0][1], n,
              (unsigned long long)total.m[0][1], (unsigned long long)prime);
  std::printf("ok\n");
  return total.m[0][1] == powers[n - 1].m[0][1] ? 0 : 1;
}
