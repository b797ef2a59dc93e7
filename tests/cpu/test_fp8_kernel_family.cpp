// fp8_kernel_family (src/ops/cuda/sm90/decode_fp8/kernel_family.h): which fp8 decode kernel runs a step's tiles, the
// rule the dispatch (dispatch.cu) and the fp8 GPU suite's choice of reference arithmetic share.
#include <gtest/gtest.h>

#include "ops/cuda/sm90/decode_fp8/kernel_family.h"

namespace mla::sm90::decode_fp8 {
namespace {

constexpr Fp8KernelFamily family(int rows, int tile_rows, N32Mode n32 = N32Mode::kAuto, bool mma_sync = false) {
  return fp8_kernel_family(rows, tile_rows, n32, mma_sync);
}

TEST(Fp8KernelFamily, SixteenRowTilesRunTheKeysAsMKernel) {
  EXPECT_EQ(family(16, 64), Fp8KernelFamily::kH16);                         // h_q 16, s_q 1
  EXPECT_EQ(family(16, 64, N32Mode::kMma, true), Fp8KernelFamily::kH16);    // the knobs are for wider tiles
  EXPECT_EQ(family(128, 16), Fp8KernelFamily::kH16);                        // narrow tiles of h_q 128
  EXPECT_EQ(family(64, 16, N32Mode::kWs, true), Fp8KernelFamily::kH16);     // narrow tiles of h_q 64
}

TEST(Fp8KernelFamily, ThirtyTwoRowTilesFollowTheN32Knob) {
  EXPECT_EQ(family(32, 64), Fp8KernelFamily::kH16);  // h_q 32 s_q 1, h_q 16 s_q 2: two row groups of keys-as-M
  EXPECT_EQ(family(32, 64, N32Mode::kWs), Fp8KernelFamily::kWs64);
  EXPECT_EQ(family(32, 64, N32Mode::kMma), Fp8KernelFamily::kMmaSync);
  EXPECT_EQ(family(32, 64, N32Mode::kWs, true), Fp8KernelFamily::kMmaSync);  // the mma_sync variant takes any wide tile
}

TEST(Fp8KernelFamily, WiderTilesRunTheWarpSpecializedKernelUnlessMmaSync) {
  for (int rows : {48, 64, 128, 256, 512}) {  // 48: h_q 16 s_q 3, three row groups
    EXPECT_EQ(family(rows, 64), Fp8KernelFamily::kWs64) << rows;
    EXPECT_EQ(family(rows, 64, N32Mode::kMma), Fp8KernelFamily::kWs64) << rows;  // N32 is for 32-47 rows only
    EXPECT_EQ(family(rows, 64, N32Mode::kAuto, true), Fp8KernelFamily::kMmaSync) << rows;
  }
}

}  // namespace
}  // namespace mla::sm90::decode_fp8
