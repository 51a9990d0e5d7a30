#include "worker/trainer/trainer.h"

#include <glog/logging.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>

#include "kernels/model/param_init.h"
#include "kernels/selection.h"
#include "worker/data/minibatch.h"
#include "worker/data/partition.h"
#include "worker/trainer/metrics.h"
#include "worker/trainer/progress.h"
#include "worker/trainer/schedule.h"
#include "worker/trainer/synthetic_gradient.h"

namespace sieve {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The examples [range.lo, range.hi) of `full` as a Dataset of their own.
Dataset Slice(const Dataset& full, IndexRange range) {
  Dataset out;
  out.n = range.size();
  out.rows = full.rows;
  out.cols = full.cols;
  const int64_t es = full.example_size();
  out.images.assign(full.images.begin() + range.lo * es, full.images.begin() + range.hi * es);
  out.labels.assign(full.labels.begin() + range.lo, full.labels.begin() + range.hi);
  return out;
}

// Residual histograms (--histogram_rounds): 48 bins of 0.25 σ, i.e. ±6 σ around the mean.
constexpr double kHistogramWidthSigma = 0.25;
constexpr int kHistogramBins = 48;

// FNV-1a over the bit patterns of `w`: equal vectors give equal fingerprints.
uint64_t Fingerprint(std::span<const float> w) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (float v : w) h = (h ^ std::bit_cast<uint32_t>(v)) * 0x100000001b3ULL;
  return h;
}

bool IsEvalEpoch(const TrainerOptions& o, uint64_t epoch) {
  const bool last = epoch + 1 == static_cast<uint64_t>(o.epochs);
  return last || (o.eval_every > 0 && (epoch + 1) % static_cast<uint64_t>(o.eval_every) == 0);
}

}  // namespace

Trainer::Trainer(const TrainerOptions& options, Device device, PsClient* client, ModelLayout layout)
    : options_(options),
      device_(device),
      client_(client),
      layout_(std::move(layout)),
      d_(layout_.num_params),
      rank_(client->rank()),
      world_(static_cast<int>(client->num_workers())),
      synthetic_(options.model == "synthetic") {}

Trainer::~Trainer() = default;

StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrainerOptions& options, Device device,
                                                   PsClient* client) {
  SIEVE_RETURN_IF_ERROR(ValidateTrainerOptions(options));
  auto layout = MakeModelLayout(options.model, options.num_params);
  if (!layout.ok()) return layout.status();
  if (client->num_params() != layout->num_params) {
    return FailedPreconditionError("the job has D = " + std::to_string(client->num_params()) +
                                   " parameters but model " + options.model + " has " +
                                   std::to_string(layout->num_params));
  }
  std::unique_ptr<Trainer> t(new Trainer(options, device, client, std::move(*layout)));
  SIEVE_RETURN_IF_ERROR(t->Load());
  return t;
}

Status Trainer::Load() {
  if (synthetic_) {
    steps_per_epoch_ = options_.rounds_per_epoch;
  } else {
    auto model = MakeModel(options_.model);
    if (!model.ok()) return model.status();
    model_ = std::move(*model);
    auto full = LoadFashionMnist("train", options_.data_dir);
    if (!full.ok()) return full.status();
    train_total_ = full->n;
    auto range = PartitionRange(full->n, rank_, world_);
    if (!range.ok()) return range.status();
    train_lo_ = range->lo;
    train_ = Slice(*full, *range);
    auto steps = StepsPerEpoch(full->n, world_, options_.batch_size);
    if (!steps.ok()) return steps.status();
    steps_per_epoch_ = *steps;
    if (steps_per_epoch_ < 1) {
      return FailedPreconditionError("a partition of " + std::to_string(full->n / world_) +
                                     " examples holds no full batch of " +
                                     std::to_string(options_.batch_size));
    }
    if (rank_ == 0) {
      auto test = LoadFashionMnist("t10k", options_.data_dir);
      if (!test.ok()) return test.status();
      test_ = std::move(*test);
    }
  }
  auto ef = ErrorFeedback::Create(device_, d_);
  if (!ef.ok()) return ef.status();
  ef_ = std::move(*ef);
  grad_.assign(d_, 0.0f);
  return Status::Ok();
}

Status Trainer::InitWeights(uint64_t* first_round) {
  *first_round = 0;
  w_ = InitParams(layout_, options_.seed);
  if (client_->joined_late()) {
    // Rejoin (docs/architecture.md, "Worker rejoin"): the servers' weights, then a join round
    // `margin` rounds past the furthest server, so that no server passes it before the JOIN
    // arrives. The replica is resynchronized by the dense UPDATE of that first round. When a
    // server passed it anyway (fast rounds), pull again and join with twice the margin.
    constexpr uint64_t kFirstJoinMargin = 2;
    constexpr int kJoinAttempts = 8;  // margins 2, 4, ..., 256 rounds
    uint64_t margin = kFirstJoinMargin;
    for (int attempt = 1;; ++attempt, margin *= 2) {
      uint64_t at = 0;
      SIEVE_RETURN_IF_ERROR(client_->PullDense(w_, options_.round_timeout_ms, &at));
      const uint64_t join = at + margin;
      Status joined = client_->Join(join, options_.round_timeout_ms);
      if (joined.ok()) {
        LOG(INFO) << "rejoined a running job: servers at round " << at << ", counted from round "
                  << join << " (attempt " << attempt << ")";
        *first_round = join;
        return Status::Ok();
      }
      if (joined.code() != StatusCode::kOutOfRange || attempt == kJoinAttempts) {
        return Status(joined.code(), "rejoin at round " + std::to_string(join) + " failed after " +
                                         std::to_string(attempt) +
                                         " attempt(s): " + joined.message());
      }
      LOG(WARNING) << "join round " << join << " already passed (" << joined.message()
                   << "); pulling again and joining " << 2 * margin << " rounds ahead";
    }
  }
  // A fingerprint, not a copy, of the local initialization (a copy would cost 4 B/param at peak).
  const uint64_t local = Fingerprint(w_);
  SIEVE_RETURN_IF_ERROR(client_->PullDense(w_, options_.round_timeout_ms));
  if (Fingerprint(w_) != local) {
    LOG(WARNING) << "the servers' initial weights differ from InitParams(" << options_.model
                 << ", seed " << options_.seed
                 << ") (different --seed or model on the servers?); using the servers'";
  }
  return Status::Ok();
}

float Trainer::ComputeGradient(uint64_t round, const float* x, const uint8_t* labels,
                               bool want_loss) {
  float loss = 0.0f;
  if (synthetic_) {
    SyntheticGradientSpec spec{options_.grad_dist, options_.synthetic_scale,
                               options_.synthetic_pull, options_.seed, rank_};
    spec.noise = options_.synthetic_noise;
    SyntheticGradient(spec, round, w_, grad_);
    if (want_loss) loss = static_cast<float>(SyntheticLoss(options_.synthetic_pull, w_));
  } else {
    loss = model_->ForwardBackward(w_.data(), x, labels, options_.batch_size, grad_.data());
  }
  if (options_.weight_decay != 0.0) {
    const float wd = static_cast<float>(options_.weight_decay);
    for (uint64_t i = 0; i < d_; ++i) grad_[i] += wd * w_[i];
  }
  return loss;
}

void Trainer::Evaluate(std::optional<double>* test_acc, std::optional<double>* train_acc) {
  if (synthetic_ || rank_ != 0) return;
  EvalResult test = model_->Evaluate(w_.data(), test_.images.data(), test_.labels.data(), test_.n);
  *test_acc = test.accuracy;
  EvalResult train =
      model_->Evaluate(w_.data(), train_.images.data(), train_.labels.data(), train_.n);
  *train_acc = train.accuracy;
}

Status Trainer::DumpWeights() const {
  static_assert(std::endian::native == std::endian::little, "dump format is little-endian fp32");
  const std::string path = ExpandRankPattern(options_.dump_weights, rank_);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return UnavailableError("cannot open " + path + ": " + std::strerror(errno));
  const bool ok = std::fwrite(w_.data(), sizeof(float), d_, f) == d_;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) return DataLossError("cannot write " + path);
  return Status::Ok();
}

StatusOr<TrainSummary> Trainer::Run() {
  uint64_t first_round = 0;
  SIEVE_RETURN_IF_ERROR(InitWeights(&first_round));
  // The start barrier is the job's start; a rejoining worker joined at a round boundary instead.
  if (!client_->joined_late()) SIEVE_RETURN_IF_ERROR(client_->Barrier(options_.round_timeout_ms));

  MetricsWriter metrics;
  const bool per_rank_metrics = options_.metrics_out.find("{rank}") != std::string::npos;
  if (!options_.metrics_out.empty() && (rank_ == 0 || per_rank_metrics)) {
    SIEVE_RETURN_IF_ERROR(metrics.Open(ExpandRankPattern(options_.metrics_out, rank_)));
  }

  const uint64_t epochs = static_cast<uint64_t>(options_.epochs);
  const uint64_t spe = static_cast<uint64_t>(steps_per_epoch_);
  ProgressReporter progress(options_.progress_bar, epochs * spe);
  TrainSummary summary;
  summary.rank = rank_;
  summary.epochs = epochs;
  summary.first_round = first_round;
  const uint64_t dense_bytes = 4 * d_;
  const uint64_t seed_key =
      CounterHash(options_.seed, 0x5e1ec7'0000ULL + static_cast<uint32_t>(rank_));
  float prev_threshold = 0.0f, older_threshold = 0.0f;  // the last two thresholds (warm start)
  Selection sel;
  const auto run_start = Clock::now();
  uint64_t round = std::min(first_round, epochs * spe);

  for (uint64_t epoch = round / spe; epoch < epochs; ++epoch) {
    const uint64_t first_step = round - epoch * spe;  // > 0 only in a rejoiner's first epoch
    std::vector<int64_t> order;
    std::optional<MinibatchIterator> batches;
    if (!synthetic_) {
      auto global =
          EpochBatchOrder(train_total_, rank_, world_, options_.batch_size, options_.seed, epoch);
      if (!global.ok()) return global.status();
      order = std::move(*global);
      for (int64_t& i : order) i -= train_lo_;
      auto it = MinibatchIterator::Create(train_, order, options_.batch_size, /*drop_last=*/true);
      if (!it.ok()) return it.status();
      batches.emplace(std::move(*it));
      Minibatch skipped;
      for (uint64_t i = 0; i < first_step; ++i) {
        if (!batches->Next(&skipped)) return InternalError("batch iterator ended while skipping");
      }
    }
    const double density = DensityForEpoch(options_, epoch);
    const uint64_t k = options_.compressor == Compressor::kNone ? d_ : KForDensity(density, d_);
    double epoch_loss = 0.0;
    uint64_t epoch_selected = 0;

    for (uint64_t step = first_step; step < spe; ++step, ++round) {
      const bool last_of_epoch = step + 1 == spe;
      const bool eval = last_of_epoch && IsEvalEpoch(options_, epoch);
      const bool contraction =
          options_.contraction_every > 0 && round % options_.contraction_every == 0;
      const bool histogram =
          std::binary_search(options_.histogram_rounds.begin(), options_.histogram_rounds.end(),
                             static_cast<int64_t>(round));
      const bool write =
          metrics.is_open() && (round % options_.metrics_every == 0 || eval || contraction ||
                                histogram || (last_of_epoch && epoch + 1 == epochs));

      const auto t0 = Clock::now();
      Minibatch mb;
      if (batches && !batches->Next(&mb)) {
        return InternalError("batch iterator ended early at step " + std::to_string(step));
      }
      const float loss =
          ComputeGradient(round, mb.images, mb.labels, !synthetic_ || write || last_of_epoch);
      const auto t1 = Clock::now();
      const double lr = LearningRate(options_, round, steps_per_epoch_);
      SIEVE_RETURN_IF_ERROR(
          ef_->Accumulate(grad_, static_cast<float>(options_.momentum), static_cast<float>(lr)));
      std::vector<uint64_t> hist;
      if (histogram && metrics.is_open()) {
        SIEVE_RETURN_IF_ERROR(ef_->SigmaHistogram(kHistogramWidthSigma, kHistogramBins, &hist));
      }
      SelectOptions so;
      so.prev_threshold = prev_threshold;
      so.older_threshold = older_threshold;
      so.seed = CounterHash(seed_key, round);
      SIEVE_RETURN_IF_ERROR(ef_->Select(options_.compressor, k, so, &sel));
      if (std::isfinite(sel.threshold) && sel.threshold > 0) {
        older_threshold = prev_threshold;
        prev_threshold = sel.threshold;
      }
      const auto t2 = Clock::now();
      const uint64_t selected = sel.size();
      const double contraction_ratio = contraction ? sel.ContractionRatio() : 0.0;
      for (float v : sel.values) summary.pushed_sum += v;
      RoundStats stats;
      SIEVE_RETURN_IF_ERROR(client_->PushPull(round, &sel, w_, &stats, options_.round_timeout_ms));
      const auto t3 = Clock::now();
      if (options_.on_round) options_.on_round(round, k, selected, stats);

      summary.bytes_up += stats.bytes_up;
      summary.bytes_down += stats.bytes_down;
      summary.dense_bytes += dense_bytes;
      epoch_loss += synthetic_ ? 0.0 : loss;
      if (synthetic_ && last_of_epoch) epoch_loss = loss * static_cast<double>(spe - first_step);
      epoch_selected += selected;

      RoundMetrics m;
      if (eval) Evaluate(&m.test_acc, &m.train_acc);
      if (eval && m.test_acc) summary.test_acc = m.test_acc;
      if (write) {
        m.round = round;
        m.epoch = epoch;
        m.loss = loss;
        m.selected = selected;
        m.k = k;
        m.density = options_.compressor == Compressor::kNone ? 1.0 : density;
        m.threshold = sel.threshold;
        m.iterations = sel.iterations;
        m.bytes_up = stats.bytes_up;
        m.bytes_down = stats.bytes_down;
        m.dense_bytes = dense_bytes;
        m.t_compute = Seconds(t0, t1);
        m.t_select = Seconds(t1, t2);
        m.t_comm = Seconds(t2, t3);
        if (contraction) {
          m.has_contraction = true;
          m.contraction = contraction_ratio;
          m.bound_1 = 1.0 - static_cast<double>(k) / static_cast<double>(d_);
          m.bound_2 = m.bound_1 * m.bound_1;
        }
        if (!hist.empty()) {
          m.histogram_width = kHistogramWidthSigma;
          m.histogram = std::move(hist);
        }
        SIEVE_RETURN_IF_ERROR(metrics.Write(m));
      }
      progress.Round(round + 1, loss);
      if (last_of_epoch) {
        const double steps = static_cast<double>(spe - first_step);
        summary.loss = epoch_loss / steps;
        progress.EndEpoch(epoch, summary.loss, m.test_acc, summary.bytes_up,
                          static_cast<double>(epoch_selected) / steps);
      }
    }
  }
  progress.Finish();
  summary.rounds = round;
  summary.seconds = Seconds(run_start, Clock::now());
  SIEVE_RETURN_IF_ERROR(metrics.Close());
  if (!options_.dump_weights.empty()) SIEVE_RETURN_IF_ERROR(DumpWeights());
  return summary;
}

}  // namespace sieve
