// prefill_attention on the host: the direct formula per (sequence, head, query), float arithmetic.
#include <algorithm>
#include <cmath>
#include <vector>

#include "mla/core/half.h"
#include "mla/ops/prefill_attention.h"

namespace mla::ref {
namespace {

float at(const TensorView& t, int64_t i0, int64_t i1, int64_t i2 = 0) {
  const int64_t off = i0 * t.stride[0] + i1 * t.stride[1] + (t.rank == 3 ? i2 * t.stride[2] : 0);
  return bf16_to_float(t.ptr<const uint16_t>()[off]);
}

}  // namespace

Status prefill_attention(const PrefillAttentionParams& p) {
  MLA_TRY(validate_prefill_attention(p));
  const int64_t h = p.q.shape[1], b = p.seqs.shape[0], tq = p.q.shape[0], tk = p.k_nope.shape[0];
  const int32_t* seqs = p.seqs.ptr<const int32_t>();
  std::vector<float> s, o(kPrefillDimV);
  for (int64_t bi = 0; bi < b; ++bi) {
    const int64_t q0 = seqs[bi * 4], nq = seqs[bi * 4 + 1], k0 = seqs[bi * 4 + 2], nk = seqs[bi * 4 + 3];
    if (q0 < 0 || nq < 0 || k0 < 0 || nq > nk || q0 + nq > tq || k0 + nk > tk || nq > p.max_q_len)
      return Status::invalid("prefill_attention", "sequence " + std::to_string(bi) + ": q [" + std::to_string(q0) +
                                                      ", +" + std::to_string(nq) + "), k [" + std::to_string(k0) +
                                                      ", +" + std::to_string(nk) +
                                                      ") out of range or q_len > k_len / max_q_len");
    for (int64_t hh = 0; hh < h; ++hh)
      for (int64_t i = 0; i < nq; ++i) {
        const int64_t visible = nk - nq + i + 1;
        s.assign(static_cast<size_t>(visible), 0.f);
        for (int64_t j = 0; j < visible; ++j) {
          float acc = 0;
          for (int d = 0; d < kPrefillDimNope; ++d) acc += at(p.q, q0 + i, hh, d) * at(p.k_nope, k0 + j, hh, d);
          for (int d = 0; d < kPrefillDimRope; ++d)
            acc += at(p.q, q0 + i, hh, kPrefillDimNope + d) * at(p.k_pe, k0 + j, d);
          s[static_cast<size_t>(j)] = acc * p.softmax_scale;
        }
        const float mx = *std::max_element(s.begin(), s.end());
        float sum = 0;
        for (float& x : s) sum += (x = std::exp(x - mx));
        std::fill(o.begin(), o.end(), 0.f);
        for (int64_t j = 0; j < visible; ++j)
          for (int d = 0; d < kPrefillDimV; ++d)
            o[static_cast<size_t>(d)] += s[static_cast<size_t>(j)] * at(p.v, k0 + j, hh, d);
        uint16_t* out = p.out.ptr<uint16_t>() + (q0 + i) * p.out.stride[0] + hh * p.out.stride[1];
        for (int d = 0; d < kPrefillDimV; ++d) out[d] = float_to_bf16(o[static_cast<size_t>(d)] / sum);
        if (p.lse.defined()) p.lse.ptr<float>()[hh * tq + q0 + i] = mx + std::log(sum);
      }
  }
  return Status::ok();
}

}  // namespace mla::ref
