#include "mla/engine/fake_backend.h"

#include <string>

#include "mla/engine/sampler.h"

namespace mla::engine {

namespace {
uint64_t kv_entry(int32_t token, int32_t position) {
  return mix64((uint64_t(uint32_t(token)) << 32) | uint32_t(position));
}
uint64_t fold(uint64_t h, uint64_t entry) { return mix64(h ^ entry); }
void logits_from_hash(uint64_t h, int vocab, float* out) {
  // 24 bits per logit in [-4, 4): wide enough that greedy picks vary, exactly reproducible.
  for (int v = 0; v < vocab; ++v) out[v] = float(mix64(h ^ uint64_t(v)) >> 40) * 0x1.0p-21f - 4.0f;
}
}  // namespace

FakeBackend::FakeBackend(int num_pages, int page_size, int vocab)
    : num_pages_(num_pages), page_size_(page_size), vocab_(vocab), cache_(size_t(num_pages) * size_t(page_size)) {
  // Garbage, like uninitialized device memory: a read of a slot nobody wrote changes the logits.
  for (size_t i = 0; i < cache_.size(); ++i) cache_[i] = mix64(i ^ 0xBADC0FFEEull);
}

void FakeBackend::reference_logits(const std::vector<int32_t>& tokens, int vocab, std::vector<float>* out) {
  uint64_t h = 0;
  for (size_t pos = 0; pos < tokens.size(); ++pos) h = fold(h, kv_entry(tokens[pos], int32_t(pos)));
  out->resize(size_t(vocab));
  logits_from_hash(h, vocab, out->data());
}

Status FakeBackend::check(const StepInputs& in) const {
  const char* op = "FakeBackend::forward";
  const size_t t = size_t(in.num_tokens), b = size_t(in.num_seqs);
  if (in.page_size != page_size_) return Status::invalid(op, "page size mismatch");
  if (in.input_ids.size() != t || in.positions.size() != t || in.slot_mapping.size() != t ||
      in.query_start_loc.size() != b + 1 || in.seq_lens.size() != b ||
      in.block_tables.size() != b * size_t(in.max_pages_per_seq) ||
      in.logits_indices.size() != in.sample_entries.size() || in.query_start_loc.back() != in.num_tokens) {
    return Status::invalid(op, "inconsistent input sizes");
  }
  for (int64_t slot : in.slot_mapping) {
    if (slot < 0 || slot >= int64_t(cache_.size()))
      return Status::invalid(op, "slot " + std::to_string(slot) + " out of range");
  }
  for (size_t j = 0; j < in.sample_entries.size(); ++j) {
    const int e = in.sample_entries[j];
    if (e < 0 || size_t(e) >= b || in.logits_indices[j] != in.query_start_loc[size_t(e) + 1] - 1 ||
        in.positions[size_t(in.logits_indices[j])] != in.seq_lens[size_t(e)] - 1) {
      return Status::invalid(op, "sampled row " + std::to_string(j) + " is not its sequence's last token");
    }
    for (int p = 0; p < in.seq_lens[size_t(e)]; ++p) {
      const int32_t page = in.block_tables[size_t(e) * size_t(in.max_pages_per_seq) + size_t(p / page_size_)];
      if (page < 0 || page >= num_pages_) return Status::invalid(op, "block table page " + std::to_string(page));
    }
  }
  return Status::ok();
}

Status FakeBackend::forward(const StepInputs& in, Logits* logits) {
  MLA_TRY(check(in));
  ++num_calls_;
  num_rows_ += in.num_tokens;
  // All writes before any read, as attention sees the step's own keys (causally: a sampled row is its
  // sequence's last, so it sees every key of its sequence).
  for (size_t i = 0; i < size_t(in.num_tokens); ++i)
    cache_[size_t(in.slot_mapping[i])] = kv_entry(in.input_ids[i], in.positions[i]);
  logits->num_rows = int(in.logits_indices.size());
  logits->vocab = vocab_;
  logits->data.assign(size_t(logits->num_rows) * size_t(vocab_), 0.0f);
  for (size_t j = 0; j < in.sample_entries.size(); ++j) {
    const size_t e = size_t(in.sample_entries[j]);
    uint64_t h = 0;
    for (int p = 0; p < in.seq_lens[e]; ++p) {
      const int64_t page = in.block_tables[e * size_t(in.max_pages_per_seq) + size_t(p / page_size_)];
      h = fold(h, cache_[size_t(page * page_size_ + p % page_size_)]);
    }
    logits_from_hash(h, vocab_, logits->data.data() + j * size_t(vocab_));
  }
  return Status::ok();
}

}  // namespace mla::engine
