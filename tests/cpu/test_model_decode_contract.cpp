// The model's absorbed decode maps onto the mla_decode op: q = [W_UKᵀ q_nope | q_pe] (576 per head),
// the latent cache [kv_c | k_pe] as K, its first 512 values as V, then ·W_UV. This is the call the CUDA
// backend will make; here the op's CPU reference stands in for the kernel.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/metrics.h"
#include "mla/core/half.h"
#include "mla/ops/mla_decode.h"
#include "model/cpu_kernels.h"  // src/ is on the include path (internal kernels)

namespace mla::model {
namespace {

TEST(ModelDecodeContract, AbsorbedAttentionEqualsMlaDecodeOp) {
  ModelConfig c;
  ASSERT_TRUE(preset_config("tiny", &c).is_ok());
  c.num_attention_heads = 16;  // the op's smallest head count
  const int64_t nh = 16, R = 512, D = 576, dn = 128, dv = 128, L = 100, kPage = 64;
  std::mt19937_64 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> kv_b(static_cast<size_t>(nh * (dn + dv) * R));
  for (auto& x : kv_b) x = nd(rng) / std::sqrt(float(R));
  const TensorView w = TensorView::contiguous(kv_b.data(), DType::kFp32, {nh * (dn + dv), R});
  std::vector<float> cache(static_cast<size_t>(L * D));  // bf16-exact, as a bf16 cache holds it
  for (auto& x : cache) x = round_bf16(nd(rng));
  const float scale = static_cast<float>(c.softmax_scale());

  for (int64_t s_q : {1, 2}) {  // 2: two new tokens at once (causal within the step)
    std::vector<float> q(static_cast<size_t>(s_q * nh * (dn + 64)));
    for (auto& x : q) x = nd(rng);
    std::vector<float> mine(static_cast<size_t>(s_q * nh * dv));
    cpu::mla_attention_absorbed({.q = q.data(),
                                 .ldq = nh * (dn + 64),
                                 .n = s_q,
                                 .start = L - s_q,
                                 .cache = cache.data(),
                                 .out = mine.data(),
                                 .ldo = nh * dv},
                                c, w, scale);

    // The op's inputs: absorbed q in bf16, the cache paged in bf16.
    std::vector<uint16_t> q_op(static_cast<size_t>(s_q * nh * D));
    for (int64_t i = 0; i < s_q; ++i)
      for (int64_t h = 0; h < nh; ++h) {
        const float* qh = &q[(i * nh + h) * (dn + 64)];
        for (int64_t r = 0; r < R; ++r) {
          double acc = 0;
          for (int64_t d = 0; d < dn; ++d) acc += double(qh[d]) * kv_b[(h * (dn + dv) + d) * R + r];
          q_op[(i * nh + h) * D + r] = float_to_bf16(float(acc));
        }
        for (int64_t d = 0; d < 64; ++d) q_op[(i * nh + h) * D + R + d] = float_to_bf16(qh[dn + d]);
      }
    const int64_t pages = (L + kPage - 1) / kPage;
    std::vector<uint16_t> paged(static_cast<size_t>(pages * kPage * D), float_to_bf16(NAN));
    for (int64_t t = 0; t < L * D; ++t) paged[t] = float_to_bf16(cache[t]);
    std::vector<int32_t> table(static_cast<size_t>(pages)), seqlens = {int32_t(L)};
    for (int64_t p = 0; p < pages; ++p) table[p] = int32_t(p);
    std::vector<uint16_t> o_lat(static_cast<size_t>(s_q * nh * R));
    std::vector<float> lse(static_cast<size_t>(nh * s_q));
    MlaDecodeParams p{.q = TensorView::contiguous(q_op.data(), DType::kBf16, {1, s_q, nh, D}),
                      .kv_cache = TensorView::contiguous(paged.data(), DType::kBf16, {pages, kPage, D}),
                      .block_table = TensorView::contiguous(table.data(), DType::kInt32, {1, pages}),
                      .seqlens = TensorView::contiguous(seqlens.data(), DType::kInt32, {1}),
                      .out = TensorView::contiguous(o_lat.data(), DType::kBf16, {1, s_q, nh, R}),
                      .lse = TensorView::contiguous(lse.data(), DType::kFp32, {1, nh, s_q}),
                      .format = KvFormat::kBf16,
                      .softmax_scale = scale,
                      .causal = s_q > 1};
    Status st = ref::mla_decode(p, {.p_rounding = PRounding::kNone});
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    std::vector<float> theirs(mine.size());
    for (int64_t i = 0; i < s_q; ++i)
      for (int64_t h = 0; h < nh; ++h)
        for (int64_t e = 0; e < dv; ++e) {
          double acc = 0;
          for (int64_t r = 0; r < R; ++r)
            acc += double(kv_b[(h * (dn + dv) + dn + e) * R + r]) * bf16_to_float(o_lat[(i * nh + h) * R + r]);
          theirs[(i * nh + h) * dv + e] = float(acc);
        }
    // The op path rounds q_lat, q_pe and its output to bf16 (2^-9 relative each); measured ~2e-3.
    // A layout or scale mismatch between the model and the op is O(1).
    const auto s = mla::test::compare_vec(mine, theirs);
    EXPECT_LE(s.rel_l2, 1e-2) << "s_q " << s_q << ": " << s.str();
  }
}

}  // namespace
}  // namespace mla::model
