#pragma once
// FakeBackend: a deterministic stand-in for the model, with a real paged cache so tests see the bugs a
// model would. Each row writes hash(token, position) into its slot; a sampled row's logits are a hash
// of every cache entry of its context, read through its block table. So a sequence's logits depend
// only on its own tokens -- exactly when slots, block tables, chunking and recompute are right -- and
// a wrong page, a stale slot or a skipped write changes the output.
#include <cstdint>
#include <vector>

#include "mla/engine/model_backend.h"

namespace mla::engine {

class FakeBackend final : public ModelBackend {
 public:
  FakeBackend(int num_pages, int page_size, int vocab);

  int num_pages() const override { return num_pages_; }
  int page_size() const override { return page_size_; }
  int vocab() const { return vocab_; }
  Status forward(const StepInputs& in, Logits* logits) override;

  int64_t num_forward_calls() const { return num_calls_; }
  int64_t num_rows_computed() const { return num_rows_; }

  // The logits a sequence with these tokens gets for its next token (the oracle the tests compare to).
  static void reference_logits(const std::vector<int32_t>& tokens, int vocab, std::vector<float>* out);

 private:
  Status check(const StepInputs& in) const;

  int num_pages_;
  int page_size_;
  int vocab_;
  std::vector<uint64_t> cache_;  // [num_pages * page_size], one "KV entry" per slot
  int64_t num_calls_ = 0;
  int64_t num_rows_ = 0;
};

}  // namespace mla::engine
