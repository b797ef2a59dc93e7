#include <cstdint>
#include <string>

#include "mla/ops/prefill_attention.h"

namespace mla {
namespace {

constexpr const char* kOp = "prefill_attention";

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

Status bad(const char* name, const std::string& want, const TensorView& v) {
  return Status::invalid(kOp,
                         std::string(name) + ": expected " + want + ", got " + (v.defined() ? v.str() : "nothing"));
}

}  // namespace

Status validate_prefill_attention(const PrefillAttentionParams& p) {
  const TensorView &q = p.q, &kn = p.k_nope, &kp = p.k_pe, &v = p.v, &o = p.out;
  if (!(q.rank == 3 && q.dtype == DType::kBf16 && q.data && aligned16(q.data) && q.shape[2] == kPrefillDimQK &&
        q.stride[2] == 1 && q.stride[1] == kPrefillDimQK && q.stride[0] >= q.shape[1] * kPrefillDimQK &&
        q.stride[0] % 8 == 0))
    return bad("q", "bf16[tq, h, 192] with strides (row % 8 == 0, 192, 1), 16-byte aligned", q);
  const int64_t tq = q.shape[0], h = q.shape[1];
  if (!(kn.rank == 3 && kn.dtype == DType::kBf16 && kn.data && aligned16(kn.data) && kn.shape[1] == h &&
        kn.shape[2] == kPrefillDimNope && kn.stride[2] == 1 && kn.stride[1] % 8 == 0 && kn.stride[0] % 8 == 0))
    return bad("k_nope", "bf16[tk, " + std::to_string(h) + ", 128] with row and head strides % 8 == 0, 16-byte aligned",
               kn);
  const int64_t tk = kn.shape[0];
  if (!(kp.rank == 2 && kp.dtype == DType::kBf16 && kp.data && aligned16(kp.data) && kp.shape[0] == tk &&
        kp.shape[1] == kPrefillDimRope && kp.stride[1] == 1 && kp.stride[0] % 8 == 0))
    return bad("k_pe", "bf16[" + std::to_string(tk) + ", 64] with row stride % 8 == 0, 16-byte aligned", kp);
  if (!(v.rank == 3 && v.dtype == DType::kBf16 && v.data && aligned16(v.data) && v.shape[0] == tk && v.shape[1] == h &&
        v.shape[2] == kPrefillDimV && v.stride[2] == 1 && v.stride[1] % 8 == 0 && v.stride[0] % 8 == 0))
    return bad(
        "v", "bf16[" + std::to_string(tk) + ", " + std::to_string(h) + ", 128] with row and head strides % 8 == 0", v);
  if (!(o.rank == 3 && o.dtype == DType::kBf16 && o.data && o.shape[0] == tq && o.shape[1] == h &&
        o.shape[2] == kPrefillDimV && o.stride[2] == 1 && o.stride[1] % 2 == 0 && o.stride[0] % 2 == 0 &&
        reinterpret_cast<uintptr_t>(o.data) % 4 == 0))
    return bad("out", "bf16[" + std::to_string(tq) + ", " + std::to_string(h) + ", 128] with even strides", o);
  if (p.lse.defined() && !(p.lse.rank == 2 && p.lse.dtype == DType::kFp32 && p.lse.data && p.lse.shape[0] == h &&
                           p.lse.shape[1] == tq && p.lse.is_contiguous()))
    return bad("lse", "contiguous fp32[" + std::to_string(h) + ", " + std::to_string(tq) + "]", p.lse);
  if (!(p.seqs.rank == 2 && p.seqs.dtype == DType::kInt32 && p.seqs.data && p.seqs.shape[1] == kPrefillSeqFields &&
        p.seqs.is_contiguous() && p.seqs.shape[0] <= 65535))
    return bad("seqs", "contiguous int32[b <= 65535, 4] (q_start, q_len, k_start, k_len)", p.seqs);
  if (h < 1 || h > 65535) return Status::invalid(kOp, "head count " + std::to_string(h));
  if (p.max_q_len < 0) return Status::invalid(kOp, "max_q_len < 0");
  if (!(p.softmax_scale > 0.f) || p.softmax_scale > 1e30f)
    return Status::invalid(kOp, "softmax_scale must be finite and > 0, got " + std::to_string(p.softmax_scale));
  return Status::ok();
}

}  // namespace mla
