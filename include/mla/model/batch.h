#pragma once
// What one forward step computes: for each sequence, a run of new tokens continuing its cache.
#include <cstdint>
#include <functional>
#include <vector>

#include "mla/core/status.h"

namespace mla::model {

// Tokens [start_pos, start_pos + num_tokens) of sequence `seq_id`; start_pos must equal the number of
// tokens the backend already caches for it (0 for a new sequence).
struct SeqChunk {
  int64_t seq_id = 0;
  int64_t start_pos = 0;
  int64_t num_tokens = 0;
};

// Which MLA formulation attention uses. kAuto: single-token chunks (decode) take the absorbed path
// (q_nope·W_UK, attention over the 576-wide latent cache, ·W_UV); longer chunks (prefill) expand the
// cache through kv_b_proj and attend with d_qk 192, d_v 128. The two are the same math, reassociated;
// forcing one lets tests check that.
enum class AttnPath { kAuto, kExpanded, kAbsorbed };

struct ForwardBatch {
  std::vector<int32_t> token_ids;  // [t]: the chunks' tokens back to back, in `seqs` order
  std::vector<SeqChunk> seqs;
  AttnPath attn_path = AttnPath::kAuto;
  // Rows of [0, t) whose logits the step returns, in this order (e.g. each chunk's last row when
  // sampling); empty: every row. lm_head is the largest GEMM of a decode step, so skip what nobody reads.
  std::vector<int32_t> logits_rows;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  // Position of every token in its sequence: [t].
  std::vector<int64_t> positions() const {
    std::vector<int64_t> p;
    for (const auto& s : seqs)
      for (int64_t i = 0; i < s.num_tokens; ++i) p.push_back(s.start_pos + i);
    return p;
  }
};

struct ModelConfig;

// The checks every backend makes before a step: non-empty, each sequence once with >= 1 token, chunks
// continuing exactly the cached prefix (`cached_tokens(seq_id)`), within max_position_embeddings, chunk
// sizes adding up to token_ids, logits rows and token ids in range. Errors name `op` and the sequence.
Status validate_forward_batch(const ForwardBatch& b, const ModelConfig& c,
                              const std::function<int64_t(int64_t)>& cached_tokens, const char* op);

}  // namespace mla::model
