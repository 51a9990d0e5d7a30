#include "worker/trainer/round_ledger.h"

#include <algorithm>
#include <cmath>

namespace sieve {

void ThresholdHints::Observe(float threshold) {
  if (std::isfinite(threshold) && threshold > 0) {
    older_ = prev_;
    prev_ = threshold;
  }
}

void ThresholdHints::Fill(SelectOptions* so) const {
  so->prev_threshold = prev_;
  so->older_threshold = older_;
}

void RoundLedger::AfterSelect(const Selection& sel) {
  for (float v : sel.values) pushed_sum_ += v;
}

uint64_t RoundLedger::AfterPushPull(const RoundStats& st, uint64_t max_skip) {
  if (st.missed_shards > 0) {
    missed_slices_ += st.missed_shards;
    for (float v : st.missed_values) returned_sum_ += v;
  }
  const uint64_t skip = std::min(st.rounds_skipped, max_skip);
  skipped_rounds_ += skip;
  rounds_ += 1 + skip;
  bytes_up_ += st.bytes_up;
  bytes_down_ += st.bytes_down;
  pairs_up_ += st.pairs_up;
  return 1 + skip;
}

}  // namespace sieve
