#include "kernels/model/model_layout.h"

#include <cmath>
#include <utility>

namespace sieve {
namespace {

// Appends segments to a layout, keeping offsets contiguous.
class LayoutBuilder {
 public:
  explicit LayoutBuilder(std::string_view name) { layout_.name = std::string(name); }

  void Add(std::string name, std::vector<int64_t> shape, uint64_t fan_in, InitRule init) {
    uint64_t length = 1;
    for (int64_t d : shape) length *= static_cast<uint64_t>(d);
    Segment s;
    s.name = std::move(name);
    s.offset = layout_.num_params;
    s.length = length;
    s.shape = std::move(shape);
    s.fan_in = fan_in;
    s.init = init;
    layout_.num_params += length;
    layout_.segments.push_back(std::move(s));
  }

  // A fully connected layer: weight [out][in], bias [out].
  void AddDense(const std::string& prefix, int64_t in, int64_t out, InitRule weight_init) {
    Add(prefix + ".weight", {out, in}, static_cast<uint64_t>(in), weight_init);
    Add(prefix + ".bias", {out}, 0, InitRule{});
  }

  // A k x k convolution: weight [out_c][k][k][in_c], bias [out_c].
  void AddConv(const std::string& prefix, int64_t in_c, int64_t out_c, int64_t k,
               InitRule weight_init) {
    Add(prefix + ".weight", {out_c, k, k, in_c}, static_cast<uint64_t>(in_c * k * k), weight_init);
    Add(prefix + ".bias", {out_c}, 0, InitRule{});
  }

  ModelLayout Build() && { return std::move(layout_); }

 private:
  ModelLayout layout_;
};

InitRule HeUniform(int64_t fan_in) {
  return {InitKind::kUniform, static_cast<float>(std::sqrt(6.0 / static_cast<double>(fan_in)))};
}

InitRule LecunUniform(int64_t fan_in) {
  return {InitKind::kUniform, static_cast<float>(std::sqrt(3.0 / static_cast<double>(fan_in)))};
}

}  // namespace

const Segment* ModelLayout::Find(std::string_view segment_name) const {
  for (const Segment& s : segments) {
    if (s.name == segment_name) return &s;
  }
  return nullptr;
}

StatusOr<ModelLayout> MakeModelLayout(std::string_view name, uint64_t synthetic_num_params) {
  LayoutBuilder b(name);
  if (name == "softmax") {
    b.AddDense("fc", 784, 10, InitRule{});
  } else if (name == "fnn3") {
    b.AddDense("fc1", 784, 200, HeUniform(784));
    b.AddDense("fc2", 200, 200, HeUniform(200));
    b.AddDense("fc3", 200, 10, LecunUniform(200));
  } else if (name == "cnn") {
    b.AddConv("conv1", 1, 8, 5, HeUniform(1 * 5 * 5));
    b.AddConv("conv2", 8, 16, 5, HeUniform(8 * 5 * 5));
    b.AddDense("fc1", 256, 64, HeUniform(256));
    b.AddDense("fc2", 64, 10, LecunUniform(64));
  } else if (name == "cnn_large") {
    b.AddConv("conv1", 1, 32, 5, HeUniform(1 * 5 * 5));
    b.AddConv("conv2", 32, 64, 5, HeUniform(32 * 5 * 5));
    b.AddDense("fc1", 1024, 2048, HeUniform(1024));
    b.AddDense("fc2", 2048, 10, LecunUniform(2048));
  } else if (name == "synthetic") {
    if (synthetic_num_params == 0 || synthetic_num_params > kMaxSyntheticParams) {
      return InvalidArgumentError("synthetic model needs 1 <= num_params <= 2^40, got " +
                                  std::to_string(synthetic_num_params));
    }
    b.Add("synthetic", {static_cast<int64_t>(synthetic_num_params)}, 0,
          InitRule{InitKind::kNormal, 0.01f});
  } else {
    return NotFoundError("unknown model '" + std::string(name) +
                         "' (expected softmax, fnn3, cnn, cnn_large or synthetic)");
  }
  return std::move(b).Build();
}

StatusOr<std::vector<DenseLayerSpec>> MlpLayersOf(const ModelLayout& layout, int input_size,
                                                  int num_classes) {
  const std::vector<Segment>& segs = layout.segments;
  if (segs.empty() || segs.size() % 2 != 0) {
    return InvalidArgumentError(layout.name + ": not (weight, bias) pairs");
  }
  std::vector<DenseLayerSpec> layers;
  int prev = input_size;
  for (size_t i = 0; i < segs.size(); i += 2) {
    const Segment& w = segs[i];
    const Segment& b = segs[i + 1];
    if (w.shape.size() != 2 || b.shape.size() != 1) {
      return InvalidArgumentError(layout.name + ": " + w.name + " / " + b.name +
                                  " are not a weight matrix and a bias vector");
    }
    DenseLayerSpec l;
    l.out = static_cast<int>(w.shape[0]);
    l.in = static_cast<int>(w.shape[1]);
    if (l.in != prev) return InvalidArgumentError(layout.name + ": " + w.name + " does not chain");
    if (b.shape[0] != l.out) {
      return InvalidArgumentError(layout.name + ": " + b.name + " does not match " + w.name);
    }
    l.weight_offset = w.offset;
    l.bias_offset = b.offset;
    layers.push_back(l);
    prev = l.out;
  }
  if (prev != num_classes) {
    return InvalidArgumentError(layout.name + ": the last layer has " + std::to_string(prev) +
                                " outputs, not " + std::to_string(num_classes));
  }
  return layers;
}

}  // namespace sieve
