#include "worker/data/minibatch.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace sieve {

StatusOr<MinibatchIterator> MinibatchIterator::Create(const Dataset& data,
                                                      std::span<const int64_t> order,
                                                      int batch_size, bool drop_last) {
  if (batch_size < 1) {
    return InvalidArgumentError("batch size must be >= 1, got " + std::to_string(batch_size));
  }
  for (int64_t i : order) {
    if (i < 0 || i >= data.n) {
      return InvalidArgumentError("example index " + std::to_string(i) + " outside [0, " +
                                  std::to_string(data.n) + ")");
    }
  }
  return MinibatchIterator(data, order, batch_size, drop_last);
}

int64_t MinibatchIterator::num_batches() const {
  const int64_t n = static_cast<int64_t>(order_.size());
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

bool MinibatchIterator::Next(Minibatch* batch) {
  const int64_t n = static_cast<int64_t>(order_.size());
  const int64_t size = std::min<int64_t>(batch_size_, n - position_);
  if (size <= 0 || (drop_last_ && size < batch_size_)) return false;
  const int64_t ex = data_->example_size();
  images_.resize(static_cast<size_t>(batch_size_ * ex));
  labels_.resize(static_cast<size_t>(batch_size_));
  for (int64_t b = 0; b < size; ++b) {
    const int64_t i = order_[position_ + b];
    std::memcpy(images_.data() + b * ex, data_->image(i), sizeof(float) * ex);
    labels_[b] = data_->labels[i];
  }
  batch->images = images_.data();
  batch->labels = labels_.data();
  batch->size = static_cast<int>(size);
  batch->index = position_ / batch_size_;
  position_ += size;
  return true;
}

}  // namespace sieve
