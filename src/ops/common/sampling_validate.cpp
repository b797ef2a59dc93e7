#include <string>

#include "mla/ops/sampling.h"

namespace mla {

Status validate_sample(const SampleParams& p) {
  constexpr const char* op = "sample_tokens";
  const TensorView& l = p.logits;
  if (!(l.rank == 2 && l.dtype == DType::kFp32 && l.data && l.stride[1] == 1 && l.shape[0] >= 1 && l.shape[1] >= 1 &&
        l.stride[0] >= l.shape[1]))
    return Status::invalid(op, "logits: expected fp32[rows >= 1, vocab >= 1] with unit column stride, got " + l.str());
  if (l.shape[1] > kSampleMaxVocab)
    return Status::unsupported(op, "vocab " + std::to_string(l.shape[1]) + " > 2^24 (the id radix select's range)");
  const TensorView& t = p.tokens;
  if (!(t.rank == 1 && t.dtype == DType::kInt32 && t.data && t.shape[0] == l.shape[0] && t.is_contiguous()))
    return Status::invalid(op, "tokens: expected contiguous int32[" + std::to_string(l.shape[0]) + "], got " + t.str());
  if (p.rows == nullptr) return Status::invalid(op, "rows: null (one SamplingRow per logits row)");
  return Status::ok();
}

}  // namespace mla
