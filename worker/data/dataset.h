// Dataset: an in-memory labelled image set (Fashion-MNIST), images already normalized to float.
//
// Images are stored row-major as n x (rows * cols) floats, pixel p mapped to
// ((p / 255) - kFashionMnistMean) / kFashionMnistStd; labels are one byte each, in
// [0, num_classes). The Dataset owns its buffers; it is an immutable value after loading and may
// be read from any number of threads.
#ifndef SIEVE_WORKER_DATA_DATASET_H_
#define SIEVE_WORKER_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sieve {

// Mean and standard deviation of the Fashion-MNIST training pixels, scaled to [0, 1].
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;
inline constexpr int kFashionMnistClasses = 10;
// Where Debian's dataset-fashion-mnist package installs the files.
inline constexpr std::string_view kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct Dataset {
  int64_t n = 0;
  int rows = 0;
  int cols = 0;
  std::vector<float> images;    // n * rows * cols, row-major, normalized
  std::vector<uint8_t> labels;  // n, each < num_classes

  int64_t example_size() const { return int64_t{rows} * cols; }
  const float* image(int64_t i) const { return images.data() + i * example_size(); }
};

// Reads an IDX images file and an IDX labels file (gzip or plain) into a Dataset.
// Errors: those of idx_reader.h, plus InvalidArgument when the two counts differ or a label is
// >= num_classes.
StatusOr<Dataset> LoadDataset(const std::string& images_path, const std::string& labels_path,
                              int num_classes = kFashionMnistClasses);

// Fashion-MNIST split "train" (60,000) or "t10k" (10,000) from `dir`, i.e. the files
// <dir>/<split>-images-idx3-ubyte.gz and <dir>/<split>-labels-idx1-ubyte.gz.
StatusOr<Dataset> LoadFashionMnist(std::string_view split, std::string_view dir = kFashionMnistDir);

}  // namespace sieve

#endif  // SIEVE_WORKER_DATA_DATASET_H_
