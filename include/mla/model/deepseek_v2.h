#pragma once
// The DeepSeek-V2 model definition: embed → L × [RMSNorm → MLA → RMSNorm → MoE or MLP] → norm → lm_head,
// written once against Backend.
#include "mla/model/backend.h"

namespace mla::model {

class DeepseekV2 {
 public:
  explicit DeepseekV2(Backend* backend) : be_(backend) {}
  // One step: logits [t, vocab] (or [logits_rows.size(), vocab]) in backend memory, valid until the
  // next step.
  Status forward(const ForwardBatch& batch, TensorView* logits);

 private:
  Status attention(int layer, const TensorView& h, AttnPath path, TensorView out);
  Status mlp(const MlpWeights& w, const TensorView& h, TensorView out);
  Backend* be_;
};

}  // namespace mla::model
