// CPU reference of merge_attn_states (float arithmetic via ops/common/merge_weights.h).
#include "mla/ops/merge_attn_states.h"
#include "ops/common/cache_codec.h"
#include "ops/common/merge_weights.h"

namespace mla {
namespace {

template <class T>
Status run(const MergeAttnStatesParams& p) {
  using R = typename T::raw;
  const int64_t n = p.out.shape[0], h = p.out.shape[1], d = p.out.shape[2];
  const R* a = p.out_a.ptr<const R>();
  const R* b = p.out_b.ptr<const R>();
  R* o = p.out.ptr<R>();
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t k = 0; k < h; ++k) {
      const merge::Weights w =
          merge::weights(p.lse_a.ptr<const float>()[k * n + t], p.lse_b.ptr<const float>()[k * n + t]);
      const int64_t row = (t * h + k) * d;
      for (int64_t j = 0; j < d; ++j) {
        const float va = w.use_a ? cache::to_float(T{}, a[row + j]) : 0.f;
        const float vb = w.use_b ? cache::to_float(T{}, b[row + j]) : 0.f;
        o[row + j] = cache::from_float(T{}, merge::combine(w, va, vb));
      }
      if (p.lse.defined()) p.lse.ptr<float>()[k * n + t] = w.lse;
    }
  }
  return Status::ok();
}

}  // namespace

namespace ref {
Status merge_attn_states(const MergeAttnStatesParams& p) {
  MLA_TRY(validate_merge_attn_states(p));
  switch (p.out.dtype) {
    case DType::kBf16: return run<cache::Bf16>(p);
    case DType::kFp16: return run<cache::Fp16>(p);
    default: return run<cache::Fp32>(p);
  }
}
}  // namespace ref

}  // namespace mla
