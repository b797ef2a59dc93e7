#pragma once
// embedding: out[i, :] = table[token_ids[i], :]   (the model's first op)
#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

struct EmbeddingParams {
  TensorView table;      // [vocab, hidden] bf16, contiguous
  TensorView token_ids;  // [t] int32; an id outside [0, vocab) gives a zero row (ids are checked on the host first)
  TensorView out;        // [t, hidden] bf16 | fp32, row stride >= hidden
};

namespace cuda {
// Device pointers; one warp per row, 16-byte loads; no allocation.
Status embedding(const EmbeddingParams& p, Stream stream);
}  // namespace cuda

}  // namespace mla
