#include "worker/trainer/trainer_options.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>

#include "base/enum_names.h"
#include "base/parse_number.h"
#include "kernels/model/model_layout.h"

namespace sieve {
namespace {

std::vector<std::string_view> SplitCommas(std::string_view text) {
  std::vector<std::string_view> items;
  if (text.empty()) return items;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    items.push_back(
        text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

template <typename T>
StatusOr<std::vector<T>> ParseList(std::string_view text) {
  std::vector<T> out;
  for (std::string_view item : SplitCommas(text)) {
    const std::optional<T> value = ParseNumber<T>(item);
    if (!value) {
      return InvalidArgumentError("bad list item '" + std::string(item) + "' in '" +
                                  std::string(text) + "' (expected comma-separated numbers)");
    }
    out.push_back(*value);
  }
  return out;
}

bool InUnitInterval(double x) { return std::isfinite(x) && x > 0.0 && x <= 1.0; }

}  // namespace

StatusOr<GradDist> ParseGradDist(std::string_view name) {
  static constexpr EnumName<GradDist> kNames[] = {{GradDist::kGaussian, "gaussian"},
                                                  {GradDist::kLaplace, "laplace"}};
  return ParseEnumName(kNames, name, "gradient distribution");
}

StatusOr<SyntheticNoiseSource> ParseSyntheticNoiseSource(std::string_view name) {
  static constexpr EnumName<SyntheticNoiseSource> kNames[] = {
      {SyntheticNoiseSource::kHash, "hash"}, {SyntheticNoiseSource::kPool, "pool"}};
  return ParseEnumName(kNames, name, "synthetic noise source");
}

StatusOr<std::vector<double>> ParseDoubleList(std::string_view text) {
  return ParseList<double>(text);
}

StatusOr<std::vector<int>> ParseIntList(std::string_view text) { return ParseList<int>(text); }

double DefaultLearningRate(Compressor compressor, double density) {
  constexpr double kDefault = 0.05;
  if (compressor != Compressor::kRandomk || !InUnitInterval(density)) return kDefault;
  return std::min(kDefault, 0.025 * std::sqrt(density));
}

Status ValidateTrainerOptions(const TrainerOptions& o) {
  if (o.model != "softmax" && o.model != "fnn3" && o.model != "cnn" && o.model != "cnn_large" &&
      o.model != "synthetic") {
    return InvalidArgumentError(
        "--model must be softmax, fnn3, cnn, cnn_large or synthetic, not '" + o.model + "'");
  }
  if (o.model == "synthetic") {
    if (o.num_params < 1 || o.num_params > kMaxSyntheticParams) {
      return InvalidArgumentError("--num_params must be in [1, 2^40] for --model=synthetic");
    }
    if (o.rounds_per_epoch < 1) return InvalidArgumentError("--rounds_per_epoch must be >= 1");
    if (!std::isfinite(o.synthetic_scale) || o.synthetic_scale < 0) {
      return InvalidArgumentError("--synthetic_scale must be finite and >= 0");
    }
    if (!std::isfinite(o.synthetic_pull) || o.synthetic_pull < 0) {
      return InvalidArgumentError("--synthetic_pull must be finite and >= 0");
    }
  }
  if (o.batch_size < 1) return InvalidArgumentError("--batch_size must be >= 1");
  if (o.epochs < 1) return InvalidArgumentError("--epochs must be >= 1");
  if (o.max_rounds < 0) return InvalidArgumentError("--max_rounds must be >= 0");
  if (o.barrier_probe < 0) return InvalidArgumentError("--barrier_probe must be >= 0");
  if (!std::isfinite(o.lr) || o.lr < 0) return InvalidArgumentError("--lr must be finite and >= 0");
  if (!std::isfinite(o.momentum) || o.momentum < 0 || o.momentum >= 1) {
    return InvalidArgumentError("--momentum must be in [0, 1)");
  }
  if (!std::isfinite(o.weight_decay) || o.weight_decay < 0) {
    return InvalidArgumentError("--weight_decay must be finite and >= 0");
  }
  if (!std::isfinite(o.lr_warmup_epochs) || o.lr_warmup_epochs < 0) {
    return InvalidArgumentError("--lr_warmup_epochs must be finite and >= 0");
  }
  for (size_t i = 0; i < o.lr_steps.size(); ++i) {
    if (o.lr_steps[i] < 1 || (i > 0 && o.lr_steps[i] <= o.lr_steps[i - 1])) {
      return InvalidArgumentError("--lr_steps must be strictly ascending epochs >= 1");
    }
  }
  if (!std::isfinite(o.lr_gamma) || o.lr_gamma <= 0) {
    return InvalidArgumentError("--lr_gamma must be finite and > 0");
  }
  if (!InUnitInterval(o.density)) return InvalidArgumentError("--density must be in (0, 1]");
  for (double d : o.density_warmup) {
    if (!InUnitInterval(d)) {
      return InvalidArgumentError("every --density_warmup value must be in (0, 1], got " +
                                  std::to_string(d));
    }
  }
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda") {
    return InvalidArgumentError("--device must be auto, cpu or cuda, not '" + o.device + "'");
  }
  if (o.eval_every < 0) return InvalidArgumentError("--eval_every must be >= 0");
  if (o.metrics_every < 1) return InvalidArgumentError("--metrics_every must be >= 1");
  if (o.contraction_every < 0) return InvalidArgumentError("--contraction_every must be >= 0");
  for (size_t i = 0; i < o.histogram_rounds.size(); ++i) {
    if (o.histogram_rounds[i] < 0 ||
        (i > 0 && o.histogram_rounds[i] <= o.histogram_rounds[i - 1])) {
      return InvalidArgumentError("--histogram_rounds must be strictly ascending rounds >= 0");
    }
  }
  if (o.trace_rounds.begin >= o.trace_rounds.end) {
    return InvalidArgumentError("--trace_rounds must be A:B with A < B (rounds A to B-1)");
  }
  if (o.round_timeout < std::chrono::milliseconds(1))
    return InvalidArgumentError("--round_timeout_ms must be >= 1");
  return Status::Ok();
}

}  // namespace sieve
