#include "worker/data/dataset.h"

#include <utility>

#include "worker/data/idx_reader.h"

namespace sieve {

StatusOr<Dataset> LoadDataset(const std::string& images_path, const std::string& labels_path,
                              int num_classes) {
  SIEVE_ASSIGN_OR_RETURN(IdxImages images, ReadIdxImages(images_path));
  SIEVE_ASSIGN_OR_RETURN(std::vector<uint8_t> labels, ReadIdxLabels(labels_path));
  if (static_cast<int64_t>(labels.size()) != images.count) {
    return InvalidArgumentError("image/label count mismatch: " + images_path + " has " +
                                std::to_string(images.count) + " images, " + labels_path + " has " +
                                std::to_string(labels.size()) + " labels");
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= num_classes) {
      return InvalidArgumentError(labels_path + ": label " + std::to_string(labels[i]) +
                                  " of example " + std::to_string(i) + " is not in [0, " +
                                  std::to_string(num_classes - 1) + "]");
    }
  }
  Dataset d;
  d.n = images.count;
  d.rows = images.rows;
  d.cols = images.cols;
  d.labels = std::move(labels);
  d.images.resize(images.pixels.size());
  const float scale = 1.0f / (255.0f * kFashionMnistStd);
  const float shift = kFashionMnistMean / kFashionMnistStd;
  for (size_t i = 0; i < images.pixels.size(); ++i) {
    d.images[i] = static_cast<float>(images.pixels[i]) * scale - shift;
  }
  return d;
}

StatusOr<Dataset> LoadFashionMnist(std::string_view split, std::string_view dir) {
  if (split != "train" && split != "t10k") {
    return InvalidArgumentError("Fashion-MNIST split must be 'train' or 't10k', got '" +
                                std::string(split) + "'");
  }
  const std::string prefix = std::string(dir) + "/" + std::string(split);
  return LoadDataset(prefix + "-images-idx3-ubyte.gz", prefix + "-labels-idx1-ubyte.gz");
}

}  // namespace sieve
