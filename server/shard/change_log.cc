#include "server/shard/change_log.h"

#include <algorithm>
#include <utility>

#include "server/shard/sorted_merge.h"

namespace sieve {
namespace {

// a ∪ b with b's value where both hold an index (b is newer).
void MergeNewerWins(std::span<const uint32_t> a_idx, std::span<const float> a_val,
                    std::span<const uint32_t> b_idx, std::span<const float> b_val,
                    std::vector<uint32_t>* out_idx, std::vector<float>* out_val) {
  MergeSortedPairs(
      a_idx, a_val, b_idx, b_val, out_idx, out_val, [](float v) { return v; },
      [](float, float v) { return v; });
}

}  // namespace

ChangeLog::ChangeLog(uint32_t workers) : next_(workers, 0) {}

void ChangeLog::Append(std::span<const uint32_t> indices, std::span<const float> values) {
  if (indices.empty()) return;
  Record r;
  r.indices.assign(indices.begin(), indices.end());
  r.values.assign(values.begin(), values.end());
  const uint64_t before = pairs_to_.empty() ? pairs_before_ : pairs_to_.back();
  records_.push_back(std::move(r));
  pairs_to_.push_back(before + indices.size());
}

uint64_t ChangeLog::pending(uint32_t worker) const {
  const uint64_t end = pairs_to_.empty() ? pairs_before_ : pairs_to_.back();
  const uint64_t first = next_[worker];
  if (first <= base_) return end - pairs_before_;  // everything still held is pending
  return end - pairs_to_[first - base_ - 1];
}

void ChangeLog::Take(uint32_t worker, std::vector<uint32_t>* indices, std::vector<float>* values) {
  const uint64_t end = base_ + records_.size();
  const size_t first = static_cast<size_t>(std::max(next_[worker], base_) - base_);
  next_[worker] = end;
  const size_t n = records_.size() - first;
  indices->clear();
  values->clear();
  if (n == 0) return;
  if (n == 1) {
    const Record& r = records_[first];
    indices->assign(r.indices.begin(), r.indices.end());
    values->assign(r.values.begin(), r.values.end());
    return;
  }
  // Balanced tree, oldest to newest left to right: each level merges neighbours, the right one
  // (newer) winning ties, so every index ends with the value of its newest record. The runs'
  // arrays are kept between calls (no allocation, no page faults once warm).
  std::vector<Run>* cur = &runs_a_;
  std::vector<Run>* nxt = &runs_b_;
  size_t count = 0;
  for (size_t j = first; j < records_.size(); j += 2, ++count) {
    if (cur->size() <= count) cur->emplace_back();
    Run& run = (*cur)[count];
    if (j + 1 < records_.size()) {
      MergeNewerWins(records_[j].indices, records_[j].values, records_[j + 1].indices,
                     records_[j + 1].values, &run.indices, &run.values);
    } else {
      run.indices.assign(records_[j].indices.begin(), records_[j].indices.end());
      run.values.assign(records_[j].values.begin(), records_[j].values.end());
    }
  }
  while (count > 1) {
    size_t merged = 0;
    for (size_t j = 0; j < count; j += 2, ++merged) {
      if (nxt->size() <= merged) nxt->emplace_back();
      Run& run = (*nxt)[merged];
      if (j + 1 == count) {
        run.indices.swap((*cur)[j].indices);
        run.values.swap((*cur)[j].values);
      } else {
        MergeNewerWins((*cur)[j].indices, (*cur)[j].values, (*cur)[j + 1].indices,
                       (*cur)[j + 1].values, &run.indices, &run.values);
      }
    }
    std::swap(cur, nxt);
    count = merged;
  }
  // The result goes out; the caller's (cleared) arrays take its place for the next call.
  indices->swap((*cur)[0].indices);
  values->swap((*cur)[0].values);
}

void ChangeLog::Skip(uint32_t worker) { next_[worker] = base_ + records_.size(); }

void ChangeLog::Trim(const std::function<bool(uint32_t)>& counted) {
  uint64_t keep_from = base_ + records_.size();
  for (uint32_t w = 0; w < next_.size(); ++w) {
    if (counted(w)) keep_from = std::min(keep_from, next_[w]);
  }
  while (base_ < keep_from && !records_.empty()) {
    pairs_before_ = pairs_to_.front();
    records_.pop_front();
    pairs_to_.pop_front();
    ++base_;
  }
}

}  // namespace sieve
