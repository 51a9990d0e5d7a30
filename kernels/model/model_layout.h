// ModelLayout: how a model's parameters sit in sieve's single flat fp32 parameter vector of length
// D (docs/architecture.md: all layers contiguous, selection global over the flat vector).
//
// A layout is an ordered list of named segments; segment i occupies the global indices
// [offset, offset + length), segments are back to back in order, and the last one ends at D.
// Each segment carries its tensor shape (row-major, outermost first) and the rule that gives its
// initial values (see param_init.h). The layouts are a contract between the worker's models
// (worker/model/) and the server, which generates the initial weights of its shard from the same
// layout and seed; changing a layout changes both sides.
//
// Built-in layouts (MakeModelLayout):
//   softmax    fc.weight [10][784], fc.bias [10]                                   D = 7,850
//   fnn3       fc1 784->200, fc2 200->200, fc3 200->10 (weight [out][in], bias)    D = 199,210
//   cnn        input 1x28x28 (NHWC), every conv 5x5 "valid", stride 1, ReLU, 2x2 max-pool:
//                conv1.weight [8][5][5][1]  + conv1.bias [8]    -> 24x24x8 -> pool 12x12x8
//                conv2.weight [16][5][5][8] + conv2.bias [16]   -> 8x8x16  -> pool 4x4x16 = 256
//                fc1 256->64 (ReLU), fc2 64->10                                    D = 20,522
//              Conv weights are [out_c][kh][kw][in_c] so that a convolution is one GEMM over
//              NHWC patches; the flatten order after pool2 is (y, x, c).
//   cnn_large  the same geometry, wider: conv1 5x5 (32) -> 12x12x32, conv2 5x5 (64) -> 4x4x64 =
//              1024, fc1 1024->2048 (ReLU), fc2 2048->10                      D = 2,171,786
//   synthetic  one segment "synthetic" of D = synthetic_num_params, Normal(0, 0.01) init; it has
//              no data or model math (the worker fakes its gradients).
//
// Init rules: biases are zero; ReLU-fed weights are He-uniform (bound sqrt(6 / fan_in)); the
// weights of a network's last layer are LeCun-uniform (bound sqrt(3 / fan_in)); softmax
// regression starts at all zeros.
//
// Values are plain data: copyable, no shared state, safe to read from any number of threads.
#ifndef SIEVE_KERNELS_MODEL_MODEL_LAYOUT_H_
#define SIEVE_KERNELS_MODEL_MODEL_LAYOUT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sieve {

enum class InitKind {
  kZeros,    // every value 0
  kNormal,   // Normal(0, scale^2): scale is the standard deviation
  kUniform,  // Uniform[-scale, scale): scale is the half-width
};

struct InitRule {
  InitKind kind = InitKind::kZeros;
  float scale = 0.0f;
};

struct Segment {
  std::string name;            // e.g. "fc1.weight"; unique within a layout
  uint64_t offset = 0;         // first global index
  uint64_t length = 0;         // number of parameters (product of shape)
  std::vector<int64_t> shape;  // row-major tensor shape, outermost first
  uint64_t fan_in = 0;         // inputs feeding one output unit (0 for biases / synthetic)
  InitRule init;
};

struct ModelLayout {
  std::string name;
  std::vector<Segment> segments;  // in order of offset, contiguous, covering [0, num_params)
  uint64_t num_params = 0;        // D

  // The segment called `name`, or nullptr.
  const Segment* Find(std::string_view segment_name) const;
};

// One fully connected layer of an MLP layout: weight [out][in] at weight_offset, bias [out] at
// bias_offset (global indices of the flat vector).
struct DenseLayerSpec {
  int in = 0;
  int out = 0;
  uint64_t weight_offset = 0;
  uint64_t bias_offset = 0;
};

// The layers of `layout` read as an MLP: (weight [out][in], bias [out]) segment pairs, in order,
// whose sizes chain from `input_size` to `num_classes`. InvalidArgument naming the segment when
// the layout is not such a chain.
StatusOr<std::vector<DenseLayerSpec>> MlpLayersOf(const ModelLayout& layout, int input_size,
                                                  int num_classes);

// Largest D accepted for the synthetic layout (2^40 parameters, 4 TiB of fp32).
inline constexpr uint64_t kMaxSyntheticParams = uint64_t{1} << 40;

// The layout of model `name` (softmax, fnn3, cnn, cnn_large, synthetic). `synthetic_num_params` is
// D for "synthetic" (must be in [1, kMaxSyntheticParams]) and ignored otherwise. Errors: NotFound
// for an unknown name, InvalidArgument for a bad synthetic D.
StatusOr<ModelLayout> MakeModelLayout(std::string_view name, uint64_t synthetic_num_params = 0);

}  // namespace sieve

#endif  // SIEVE_KERNELS_MODEL_MODEL_LAYOUT_H_
