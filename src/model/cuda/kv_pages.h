#pragma once
// Host bookkeeping of the paged KV cache: a free list of page ids, each sequence's pages in order, and
// how many of its tokens are committed (written by a step that finished). The same page id indexes every
// layer's pool, so one list serves all layers.
#include <cstdint>
#include <map>
#include <vector>

namespace mla::model::cuda_backend {

class KvPages {
 public:
  static constexpr int64_t kPageSize = 64;

  void init(int64_t num_pages) {
    free_.clear();
    for (int64_t p = num_pages - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));  // page 0 handed out first
    seqs_.clear();
  }
  // Gives `seq` pages for `tokens` tokens in total; false (and no change) when the pool is short.
  bool reserve(int64_t seq, int64_t tokens) {
    auto& s = seqs_[seq];
    const int64_t need = (tokens + kPageSize - 1) / kPageSize - static_cast<int64_t>(s.pages.size());
    if (need <= 0) return true;
    if (need > static_cast<int64_t>(free_.size())) return false;
    for (int64_t i = 0; i < need; ++i) {
      s.pages.push_back(free_.back());
      free_.pop_back();
    }
    return true;
  }
  int64_t num_pages(int64_t seq) const {
    auto it = seqs_.find(seq);
    return it == seqs_.end() ? 0 : static_cast<int64_t>(it->second.pages.size());
  }
  // Gives back the pages of `seq` past its first `keep` (undoing reserve() of a step that cannot run).
  void shrink(int64_t seq, int64_t keep) {
    auto it = seqs_.find(seq);
    if (it == seqs_.end()) return;
    auto& pg = it->second.pages;
    while (static_cast<int64_t>(pg.size()) > keep) {
      free_.push_back(pg.back());
      pg.pop_back();
    }
    if (pg.empty() && it->second.committed == 0) seqs_.erase(it);
  }
  const std::vector<int32_t>& pages(int64_t seq) const { return seqs_.at(seq).pages; }
  int64_t committed(int64_t seq) const {
    auto it = seqs_.find(seq);
    return it == seqs_.end() ? 0 : it->second.committed;
  }
  void commit(int64_t seq, int64_t tokens) { seqs_[seq].committed = tokens; }
  void release(int64_t seq) {
    auto it = seqs_.find(seq);
    if (it == seqs_.end()) return;
    free_.insert(free_.end(), it->second.pages.rbegin(), it->second.pages.rend());
    seqs_.erase(it);
  }
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }

 private:
  struct Seq {
    std::vector<int32_t> pages;
    int64_t committed = 0;
  };
  std::vector<int32_t> free_;
  std::map<int64_t, Seq> seqs_;
};

}  // namespace mla::model::cuda_backend
