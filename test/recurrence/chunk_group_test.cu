// test/recurrence/chunk_group_test.cu — the chunk loop's choice of row width and job count
// (chunk_group_for, cuda/agent/chunk_loop.cuh) and the bandwidth rule that widens it for the
// recurrence (chunk_loop_rich_gbs_per_sm, cuda/recurrence/channel_last_chunks.cuh). Host
// arithmetic only, built with the GPU tests because those headers need nvcc; it runs without a
// GPU. The lane-pack and packed GPU tests check the calls that it routes.
#include <parscan/cuda/recurrence/channel_last_chunks.cuh>

#include "support/env.hpp"

namespace {

namespace cd = parscan::cuda_detail;
using parscan::index_t;

constexpr int sms = 132;  // an H100's or an H200's multiprocessors

bool same(cd::chunk_group g, int width, index_t jobs) { return g.width == width && g.jobs == jobs; }

}  // namespace

TEST_CASE(PARSCAN_TEST_NAME("chunk loop groups: the widest rows whose jobs fill the device"),
          PARSCAN_TEST_TAGS("[recurrence][chunk]")) {
  // float: 4 channels a chunk, so 32 a 128-byte row and 16 a 64-byte row.
  CHECK(same(cd::chunk_group_for<float>(1536, 8, sms, false), 8, 384));
  CHECK(same(cd::chunk_group_for<float>(1536, 8, sms, false, true), 8, 384));  // filled already: unchanged
  CHECK(same(cd::chunk_group_for<float>(1024, 4, sms, false), 4, 256));        // 128 jobs of 32 do not fill
  // bfloat16: 128 channels a 256-byte row, taken where the jobs reach two thirds of the SMs.
  CHECK(same(cd::chunk_group_for<parscan::bfloat16>(1536, 8, sms, true), 16, 96));
  CHECK(same(cd::chunk_group_for<parscan::bfloat16>(1536, 8, sms, false), 8, 192));
  CHECK(same(cd::chunk_group_for<parscan::bfloat16>(1024, 1, sms, true), 0, 0));  // 8, 16 or 32 jobs: none
}

TEST_CASE(PARSCAN_TEST_NAME("chunk loop groups: 64-byte rows at two thirds of the device only where asked"),
          PARSCAN_TEST_TAGS("[recurrence][chunk]")) {
  // (8, T, 256) float: 64 jobs of 128-byte rows, 128 of 64-byte rows; 132 SMs.
  CHECK(same(cd::chunk_group_for<float>(256, 8, sms, false), 0, 0));
  CHECK(same(cd::chunk_group_for<float>(256, 8, sms, false, true), 4, 128));
  // The GPU test shape (7, 260, 300): 7 · 17 = 119 jobs, the last group one chunk wide.
  CHECK(same(cd::chunk_group_for<float>(260, 7, sms, false), 0, 0));
  CHECK(same(cd::chunk_group_for<float>(260, 7, sms, false, true), 4, 119));
  // The edge: 3 · 88 = 264 = 2 · 132 takes the call, 87 jobs do not.
  CHECK(same(cd::chunk_group_for<float>(16 * 11, 8, sms, false, true), 4, 88));
  CHECK(same(cd::chunk_group_for<float>(16 * 29, 3, sms, false, true), 0, 0));
  // 128-byte rows keep needing a job an SM: 96 of them (D = 384) fall through to 192 of 64 bytes.
  CHECK(same(cd::chunk_group_for<float>(384, 8, sms, false, true), 4, 192));
}

TEST_CASE(PARSCAN_TEST_NAME("chunk loop: the bandwidth rule tells an H100 from an H200"),
          PARSCAN_TEST_TAGS("[recurrence][chunk]")) {
  const int h100 = cd::memory_gbs_per_sm(2619000, 5120, 132), h200 = cd::memory_gbs_per_sm(3201000, 6144, 132);
  CHECK(h100 == 25);
  CHECK(h200 == 37);
  CHECK(h100 < cd::chunk_loop_rich_gbs_per_sm);
  CHECK(h200 >= cd::chunk_loop_rich_gbs_per_sm);
  CHECK(cd::memory_gbs_per_sm(1593000, 5120, 114) < cd::chunk_loop_rich_gbs_per_sm);  // an H100 PCIe: 2 TB/s
}
