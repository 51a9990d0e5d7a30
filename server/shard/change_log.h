// ChangeLog: which weights of an ASP/SSP shard changed since each worker's last reply, and their
// current values. Every applied sparse push appends one record — its ascending indices and the
// weights' values right after it — shared by all workers; a worker's reply takes the union of the
// records appended since its previous reply (newest value wins), built by a balanced tree of
// sequential merges (server/shard/sorted_merge.h), so it reads no weight at scattered positions and
// merges each pending pair O(log records) times. A record is dropped once every counted worker
// has taken it.
//
// Thread-safety: none; owned and driven by one ShardServer. Memory: the records not yet taken by
// some counted worker (the owner bounds that by moving a worker far behind to a dense reply, see
// pending()).
#ifndef SIEVE_SERVER_SHARD_CHANGE_LOG_H_
#define SIEVE_SERVER_SHARD_CHANGE_LOG_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <vector>

namespace sieve {

class ChangeLog {
 public:
  explicit ChangeLog(uint32_t workers);
  ChangeLog(const ChangeLog&) = delete;
  ChangeLog& operator=(const ChangeLog&) = delete;

  // Appends a change: strictly ascending `indices` and the weights' values there after it.
  void Append(std::span<const uint32_t> indices, std::span<const float> values);

  // Pairs (with repeats across records) appended since `worker` last took or skipped.
  uint64_t pending(uint32_t worker) const;

  // Replaces *indices / *values with the union of the changes `worker` has not taken, ascending,
  // each index with its newest value; marks them taken.
  void Take(uint32_t worker, std::vector<uint32_t>* indices, std::vector<float>* values);

  // Marks every change so far as taken by `worker` (it gets the whole shard instead).
  void Skip(uint32_t worker);

  // Drops the records that every worker w with counted(w) has taken (a worker not counted, e.g. a
  // dead one, keeps nothing alive).
  void Trim(const std::function<bool(uint32_t)>& counted);
  void Trim(const std::vector<bool>& counted) {
    Trim([&counted](uint32_t w) { return static_cast<bool>(counted[w]); });
  }

  size_t records() const { return records_.size(); }

 private:
  struct Record {
    std::vector<uint32_t> indices;
    std::vector<float> values;
  };
  std::deque<Record> records_;     // oldest first; records_[j] has sequence number base_ + j
  std::deque<uint64_t> pairs_to_;  // pairs_to_[j]: pairs appended up to and including record j
  uint64_t base_ = 0;              // sequence number of records_.front()
  uint64_t pairs_before_ = 0;      // pairs appended before records_.front()
  std::vector<uint64_t> next_;     // per worker: sequence number of its first untaken record
  // Take's merge tree: two levels of runs, reused.
  struct Run {
    std::vector<uint32_t> indices;
    std::vector<float> values;
  };
  std::vector<Run> runs_a_, runs_b_;
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SHARD_CHANGE_LOG_H_
