// MinibatchIterator: walks a Dataset in a given order and hands out contiguous minibatches.
//
// Each batch's images (batch x example_size floats, row-major) and labels are gathered into
// buffers owned by the iterator and reused from batch to batch (no allocation after the first
// batch). The pointers in a Minibatch stay valid until the next call to Next() or Reset(), or the
// iterator's destruction. The Dataset and the order must outlive the iterator (they are not
// copied). With drop_last the final short batch is skipped, otherwise it is returned short.
// Thread-safety: an iterator is used by one thread at a time.
#ifndef SIEVE_WORKER_DATA_MINIBATCH_H_
#define SIEVE_WORKER_DATA_MINIBATCH_H_

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "worker/data/dataset.h"

namespace sieve {

struct Minibatch {
  const float* images = nullptr;    // size x example_size floats
  const uint8_t* labels = nullptr;  // size bytes
  int size = 0;
  int64_t index = 0;  // 0-based number of this batch in the pass
};

class MinibatchIterator {
 public:
  // Errors: InvalidArgument if batch_size < 1 or an index of `order` is outside [0, data.n).
  static StatusOr<MinibatchIterator> Create(const Dataset& data, std::span<const int64_t> order,
                                            int batch_size, bool drop_last);

  // Fills `batch` with the next minibatch and returns true, or returns false at the end.
  bool Next(Minibatch* batch);
  // Starts over from the beginning of the order.
  void Reset() { position_ = 0; }
  // Number of batches one pass yields.
  int64_t num_batches() const;

 private:
  MinibatchIterator(const Dataset& data, std::span<const int64_t> order, int batch_size,
                    bool drop_last)
      : data_(&data), order_(order), batch_size_(batch_size), drop_last_(drop_last) {}

  const Dataset* data_;
  std::span<const int64_t> order_;
  int batch_size_;
  bool drop_last_;
  int64_t position_ = 0;
  std::vector<float> images_;
  std::vector<uint8_t> labels_;
};

}  // namespace sieve

#endif  // SIEVE_WORKER_DATA_MINIBATCH_H_
