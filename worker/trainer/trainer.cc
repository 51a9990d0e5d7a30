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
#include <sstream>

#include "base/rank_pattern.h"
#include "kernels/model/param_init.h"
#include "kernels/selection.h"
#include "worker/client/worker_start.h"
#include "worker/data/partition.h"
#include "worker/trainer/barrier_probe.h"
#include "worker/trainer/metrics.h"
#include "worker/trainer/progress.h"
#include "worker/trainer/round_ledger.h"
#include "worker/trainer/schedule.h"
#include "worker/trainer/straggler.h"
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

// The timeline's thread of the training loop (the only one the trainer records).
constexpr int kTraceTid = 1;

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
  SIEVE_RETURN_IF_ERROR(options.straggler.CheckRanks(static_cast<int>(client->num_workers())));
  SIEVE_ASSIGN_OR_RETURN(ModelLayout layout, MakeModelLayout(options.model, options.num_params));
  if (client->num_params() != layout.num_params) {
    return FailedPreconditionError("the job has D = " + std::to_string(client->num_params()) +
                                   " parameters but model " + options.model + " has " +
                                   std::to_string(layout.num_params));
  }
  std::unique_ptr<Trainer> t(new Trainer(options, device, client, std::move(layout)));
  SIEVE_RETURN_IF_ERROR(t->Load());
  return t;
}

Status Trainer::Load() {
  if (synthetic_) {
    steps_per_epoch_ = options_.rounds_per_epoch;
    SIEVE_ASSIGN_OR_RETURN(own_ops_, NnOps::Create(device_));
    nn_ = own_ops_.get();
  } else {
    SIEVE_ASSIGN_OR_RETURN(model_, MakeModel(options_.model, device_));
    nn_ = model_->ops();
    SIEVE_ASSIGN_OR_RETURN(Dataset full, LoadFashionMnist("train", options_.data_dir));
    train_total_ = full.n;
    SIEVE_ASSIGN_OR_RETURN(auto range, PartitionRange(full.n, rank_, world_));
    train_lo_ = range.lo;
    train_ = Slice(full, range);
    SIEVE_ASSIGN_OR_RETURN(steps_per_epoch_, StepsPerEpoch(full.n, world_, options_.batch_size));
    if (steps_per_epoch_ < 1) {
      return FailedPreconditionError("a partition of " + std::to_string(full.n / world_) +
                                     " examples holds no full batch of " +
                                     std::to_string(options_.batch_size));
    }
    if (rank_ == 0) {
      SIEVE_ASSIGN_OR_RETURN(test_, LoadFashionMnist("t10k", options_.data_dir));
    }
  }
  BackendContext* ctx = nn_->context();
  w_.emplace(ctx);
  grad_.emplace(ctx);
  SIEVE_RETURN_IF_ERROR(w_->Reserve(d_));
  SIEVE_RETURN_IF_ERROR(grad_->Reserve(d_));
  if (synthetic_ && options_.synthetic_noise == SyntheticNoiseSource::kPool) {
    const auto pool = SyntheticNoisePool(SyntheticSpec());
    noise_pool_.emplace(ctx);
    SIEVE_RETURN_IF_ERROR(noise_pool_->Reserve(pool->size()));
    SIEVE_RETURN_IF_ERROR(ctx->FromHost(pool->data(), pool->size(), noise_pool_->data()));
  }
  if (!synthetic_) {
    batch_x_.emplace(ctx);
    SIEVE_RETURN_IF_ERROR(
        batch_x_->Reserve(static_cast<size_t>(options_.batch_size) * train_.example_size()));
    SIEVE_RETURN_IF_ERROR(StageData());
  }
  SIEVE_ASSIGN_OR_RETURN(ef_, ErrorFeedback::Create(device_, d_));
  return Status::Ok();
}

Status Trainer::StageData() {
  if (device_ == Device::kCpu) {  // host memory already
    train_x_ = train_.images.data();
    test_x_ = test_.images.data();
    return Status::Ok();
  }
  BackendContext* ctx = nn_->context();
  auto stage = [ctx](const Dataset& data, std::optional<DeviceBuffer>* buf,
                     const float** x) -> Status {
    if (data.n == 0) return Status::Ok();
    buf->emplace(ctx);
    if (!(*buf)->Reserve(data.images.size()).ok()) {
      buf->reset();  // does not fit: batches are copied up from the host instead
      return Status::Ok();
    }
    SIEVE_RETURN_IF_ERROR(ctx->FromHost(data.images.data(), data.images.size(), (*buf)->data()));
    *x = (*buf)->data();
    return Status::Ok();
  };
  SIEVE_RETURN_IF_ERROR(stage(train_, &train_x_stage_, &train_x_));
  SIEVE_RETURN_IF_ERROR(stage(test_, &test_x_stage_, &test_x_));
  const double mb = 4.0 * static_cast<double>(train_.images.size()) / 1e6;
  if (train_x_ == nullptr) {
    LOG(WARNING) << "the training partition (" << mb << " MB as floats) does not fit in "
                 << DeviceName(device_)
                 << " memory next to the model: each batch is copied up from the host instead";
  } else {
    LOG(INFO) << "staged the training partition (" << mb << " MB) in " << DeviceName(device_)
              << " memory";
  }
  return Status::Ok();
}

Status Trainer::UploadWeights(const std::vector<float>& w) {
  return nn_->context()->FromHost(w.data(), d_, w_->data());
}

Status Trainer::ReadWeights(std::vector<float>* out) const {
  out->resize(d_);
  return nn_->context()->ToHost(w_->data(), d_, out->data());
}

Status Trainer::InitWeights(uint64_t* first_round) {
  // This worker's own initialization: what worker 0 offers to servers started without a model.
  std::vector<float> w = InitParams(layout_, options_.seed);
  // A fingerprint, not a copy, of the local initialization (a copy would cost 4 B/param at peak).
  const uint64_t local = Fingerprint(w);
  SIEVE_ASSIGN_OR_RETURN(WorkerStart start, StartWorker(client_, w, options_.round_timeout));
  // The timeline's zero: out of the start barriers, every worker at the same moment.
  if (trace_) SIEVE_RETURN_IF_ERROR(trace_->MarkZero(start.rejoined ? "rejoin" : "start_barrier"));
  *first_round = start.first_round;
  if (!start.rejoined && Fingerprint(w) != local) {
    LOG(WARNING)
        << "the servers' initial weights differ from InitParams(" << options_.model << ", seed "
        << options_.seed
        << ") (different --seed, --model or --init_weights on the servers?); using the servers'";
  }
  return UploadWeights(w);
}

Status Trainer::GatherBatch(const std::vector<int64_t>& order, uint64_t step) {
  const int b = options_.batch_size;
  const int64_t* rows = order.data() + step * static_cast<uint64_t>(b);
  if ((step + 1) * static_cast<uint64_t>(b) > order.size()) {
    return InternalError("batch " + std::to_string(step) + " runs past the epoch's order");
  }
  labels_.resize(static_cast<size_t>(b));
  for (int j = 0; j < b; ++j) labels_[j] = train_.labels[static_cast<size_t>(rows[j])];
  const int ex = static_cast<int>(train_.example_size());
  if (train_x_ != nullptr) {
    return nn_->GatherRows(train_x_, train_.n, ex, rows, b, batch_x_->data());
  }
  host_batch_.resize(static_cast<size_t>(b) * ex);
  for (int j = 0; j < b; ++j) {
    std::memcpy(host_batch_.data() + static_cast<size_t>(j) * ex, train_.image(rows[j]),
                sizeof(float) * ex);
  }
  return nn_->context()->FromHost(host_batch_.data(), host_batch_.size(), batch_x_->data());
}

SyntheticGradientSpec Trainer::SyntheticSpec() const {
  SyntheticGradientSpec spec{options_.grad_dist, options_.synthetic_scale, options_.synthetic_pull,
                             options_.seed, rank_};
  spec.noise = options_.synthetic_noise;
  return spec;
}

Status Trainer::ComputeGradient(uint64_t round, bool want_loss, float* loss) {
  *loss = 0.0f;
  float* const w = w_->data();
  float* const grad = grad_->data();
  if (synthetic_) {
    const SyntheticGradientSpec spec = SyntheticSpec();
    const bool pull = options_.synthetic_pull != 0.0;
    if (noise_pool_) {  // pool noise: generated in device memory on every device
      SyntheticPoolOffsets(spec, round, d_, &pool_offsets_);
      SIEVE_RETURN_IF_ERROR(
          nn_->PoolNoiseGradient(noise_pool_->data(), kSyntheticPoolSize, kSyntheticPoolBlock,
                                 pool_offsets_.data(), static_cast<float>(spec.scale),
                                 static_cast<float>(spec.pull), pull ? w : nullptr, d_, grad));
    } else if (device_ == Device::kCpu) {
      SyntheticGradient(spec, round, std::span<const float>(w, d_), std::span<float>(grad, d_));
    } else {
      // Hash noise off the CPU: drawn on the host, then copied up (one dense copy per round).
      host_w_.resize(d_);
      host_grad_.resize(d_);
      if (pull) SIEVE_RETURN_IF_ERROR(nn_->context()->ToHost(w, d_, host_w_.data()));
      SyntheticGradient(spec, round, host_w_, host_grad_);
      SIEVE_RETURN_IF_ERROR(nn_->context()->FromHost(host_grad_.data(), d_, grad));
    }
    if (want_loss) {
      // The objective's value needs w on the host (a copy off the CPU; only when reported).
      std::span<const float> wh(w, d_);
      if (device_ != Device::kCpu) {
        host_w_.resize(d_);
        SIEVE_RETURN_IF_ERROR(nn_->context()->ToHost(w, d_, host_w_.data()));
        wh = host_w_;
      }
      *loss = static_cast<float>(SyntheticLoss(options_.synthetic_pull, wh));
    }
  } else {
    SIEVE_RETURN_IF_ERROR(model_->ForwardBackward(w, batch_x_->data(), labels_.data(),
                                                  options_.batch_size, grad, loss));
  }
  if (options_.weight_decay != 0.0) {
    SIEVE_RETURN_IF_ERROR(
        nn_->WeightDecayAdd(w, d_, static_cast<float>(options_.weight_decay), grad));
  }
  // The error feedback reads the gradient on its own stream: the model's work must be done.
  return nn_->context()->Synchronize();
}

Status Trainer::PushPull(uint64_t round, Selection* sel, RoundStats* stats,
                         Clock::time_point* updates_in) {
  update_idx_.clear();
  update_vals_.clear();
  BackendContext* ctx = nn_->context();
  float* const w = w_->data();
  Status dense_copy;
  const UpdateSink sink = [&](uint64_t lo, std::span<const uint32_t> rel,
                              std::span<const float> values) {
    if (lo + values.size() > d_) {
      dense_copy = InternalError("an UPDATE reaches past D");
    } else if (rel.empty()) {  // a dense part: one contiguous copy
      if (dense_copy.ok()) dense_copy = ctx->FromHost(values.data(), values.size(), w + lo);
    } else {
      for (uint32_t r : rel) update_idx_.push_back(static_cast<uint32_t>(lo + r));
      update_vals_.insert(update_vals_.end(), values.begin(), values.end());
    }
  };
  SIEVE_RETURN_IF_ERROR(client_->PushPull(round, sel, sink, stats, options_.round_timeout));
  *updates_in = Clock::now();
  SIEVE_RETURN_IF_ERROR(dense_copy);
  return nn_->ScatterSet(update_idx_.data(), update_vals_.data(), update_idx_.size(), w, d_);
}

Status Trainer::EvaluateOn(const Dataset& data, const float* x_dev, double* accuracy) {
  EvalResult r;
  if (x_dev != nullptr) {
    SIEVE_RETURN_IF_ERROR(model_->Evaluate(w_->data(), x_dev, data.labels.data(), data.n, &r));
    *accuracy = r.accuracy;
    return Status::Ok();
  }
  // Not staged: copy chunks of one batch buffer's size up and evaluate each.
  const int64_t chunk = options_.batch_size;
  int64_t correct = 0;
  for (int64_t lo = 0; lo < data.n; lo += chunk) {
    const int64_t n = std::min(chunk, data.n - lo);
    SIEVE_RETURN_IF_ERROR(nn_->context()->FromHost(
        data.image(lo), static_cast<size_t>(n * data.example_size()), batch_x_->data()));
    SIEVE_RETURN_IF_ERROR(
        model_->Evaluate(w_->data(), batch_x_->data(), data.labels.data() + lo, n, &r));
    correct += r.correct;
  }
  *accuracy = data.n > 0 ? static_cast<double>(correct) / static_cast<double>(data.n) : 0.0;
  return Status::Ok();
}

Status Trainer::Evaluate(std::optional<double>* test_acc, std::optional<double>* train_acc) {
  if (synthetic_ || rank_ != 0) return Status::Ok();
  double acc = 0.0;
  SIEVE_RETURN_IF_ERROR(EvaluateOn(test_, test_x_, &acc));
  *test_acc = acc;
  SIEVE_RETURN_IF_ERROR(EvaluateOn(train_, train_x_, &acc));
  *train_acc = acc;
  return Status::Ok();
}

Status Trainer::DumpWeights() const {
  static_assert(std::endian::native == std::endian::little, "dump format is little-endian fp32");
  std::vector<float> w;
  SIEVE_RETURN_IF_ERROR(ReadWeights(&w));
  const std::string path = ExpandRankPattern(options_.dump_weights, rank_);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return UnavailableError("cannot open " + path + ": " + std::strerror(errno));
  const bool ok = std::fwrite(w.data(), sizeof(float), d_, f) == d_;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) return DataLossError("cannot write " + path);
  return Status::Ok();
}

Status Trainer::Diverged(uint64_t round, double lr, const std::string& what) const {
  const uint64_t epoch = static_cast<uint64_t>(round) / static_cast<uint64_t>(steps_per_epoch_);
  std::ostringstream msg;
  msg << "training diverged at round " << round << " (epoch " << epoch + 1 << "): " << what
      << ", with learning rate " << lr << " (--lr=" << options_.lr
      << ", --momentum=" << options_.momentum
      << "). Try a smaller --lr (e.g. --lr=" << options_.lr / 4
      << "), a learning-rate warm-up (--lr_warmup_epochs=1)";
  if (options_.compressor != Compressor::kNone) {
    msg << " or a density warm-up (--density_warmup=0.25,0.0625,0.015625,0.004)";
  }
  return FailedPreconditionError(msg.str());
}

namespace {

// The round to stop before: the end of the last epoch, or --max_rounds when that comes first.
uint64_t StopRound(const TrainerOptions& options, uint64_t end_of_last_epoch) {
  return options.max_rounds > 0
             ? std::min(end_of_last_epoch, static_cast<uint64_t>(options.max_rounds))
             : end_of_last_epoch;
}

}  // namespace

// --eval_deferred: an evaluation round's replica copy and its metrics line (without the
// accuracies), evaluated and written after the last round.
struct Trainer::DeferredEval {
  std::vector<float> weights;  // the replica after the round (length D)
  RoundMetrics metrics;        // t_wall as of the round
  bool write = false;          // the round has a metrics line
  uint64_t epoch = 0;
};

// What Run carries from round to round.
struct Trainer::RunState {
  RunState(const TrainerOptions& options, int rank, uint64_t d, uint64_t steps_per_epoch,
           uint64_t first_round, MetricsWriter* metrics_writer);

  const uint64_t epochs;
  const uint64_t spe;   // rounds per epoch
  const uint64_t stop;  // the round to stop before
  MetricsWriter& metrics;
  ProgressReporter progress;
  TrainSummary summary;
  const Straggler straggler;
  const uint64_t dense_bytes;  // what a dense push of the whole model would send
  const uint64_t seed_key;     // the selection's per-round seeds derive from it
  ThresholdHints hints;        // the last two thresholds (the selection's warm start)
  // The round's counters; summary's copies of them are updated where the loop always did.
  RoundLedger ledger;
  Selection sel;
  const Clock::time_point run_start;
  uint64_t round;      // the round in progress
  uint64_t skip = 0;   // rounds after it that closed without this worker (backup workers)
  uint64_t epoch = 0;  // the epoch of the last round run, from 0
  std::optional<double> last_loss;  // the last round's training loss
  // --eval_deferred: the evaluations put off until the end, in round order.
  std::vector<DeferredEval> deferred;
};

Trainer::RunState::RunState(const TrainerOptions& options, int rank, uint64_t d,
                            uint64_t steps_per_epoch, uint64_t first_round,
                            MetricsWriter* metrics_writer)
    : epochs(static_cast<uint64_t>(options.epochs)),
      spe(steps_per_epoch),
      stop(StopRound(options, epochs * spe)),
      metrics(*metrics_writer),
      progress(options.progress_bar, stop, spe),
      straggler(options.straggler.ForRank(rank), options.seed, rank),
      dense_bytes(4 * d),
      seed_key(CounterHash(options.seed, 0x5e1ec7'0000ULL + static_cast<uint32_t>(rank))),
      run_start(Clock::now()),
      round(std::min(first_round, epochs * spe)) {
  summary.rank = rank;
  summary.epochs = epochs;
  summary.first_round = first_round;
  if (straggler.spec().active()) summary.straggler = straggler.spec().text;
}

// One epoch's batch order and density, and its running totals.
struct Trainer::EpochState {
  uint64_t epoch = 0;
  uint64_t first_step = 0;     // > 0 only in a rejoiner's first epoch
  std::vector<int64_t> order;  // local example indices, batch after batch (empty: synthetic)
  double density = 1.0;
  uint64_t k = 0;     // pairs selected per round
  double loss = 0.0;  // the rounds' losses summed (synthetic: set at the epoch's end)
  uint64_t selected = 0;
  uint64_t rounds_run = 0;  // rounds this worker trained in the epoch (not the skipped ones)
};

// What a round does besides training, from its place in the run.
struct Trainer::RoundPlan {
  bool last_of_epoch = false;
  bool cut_short = false;  // the last round before --max_rounds
  bool eval = false;
  bool contraction = false;
  bool histogram = false;
  bool write = false;  // a metrics line
};

// What a round measured.
struct Trainer::RoundResult {
  Clock::time_point t0, t1, t2, t3;  // start, gradient done, selection done, push/pull done
  Clock::time_point updates_in;      // every UPDATE of the round in (before the scatter)
  double lr = 0.0;
  float loss = 0.0f;
  double straggle = 0.0;       // seconds an emulated straggler stalled
  std::vector<uint64_t> hist;  // the residual's histogram (histogram rounds with metrics)
  uint64_t selected = 0;
  double sumsq_total = 0.0;     // the selection's Σr² over D and over the selected entries
  double sumsq_selected = 0.0;  // (the contraction ratio's)
  RoundStats stats;
};

Status Trainer::OpenMetrics(MetricsWriter* metrics) const {
  const bool per_rank_metrics = options_.metrics_out.find("{rank}") != std::string::npos;
  if (!options_.metrics_out.empty() && (rank_ == 0 || per_rank_metrics)) {
    return metrics->Open(ExpandRankPattern(options_.metrics_out, rank_));
  }
  return Status::Ok();
}

Status Trainer::StartEpoch(uint64_t epoch, uint64_t first_step, EpochState* ep) const {
  ep->epoch = epoch;
  ep->first_step = first_step;
  if (!synthetic_) {
    auto global =
        EpochBatchOrder(train_total_, rank_, world_, options_.batch_size, options_.seed, epoch);
    if (!global.ok()) return global.status();
    ep->order = std::move(*global);
    for (int64_t& i : ep->order) {
      i -= train_lo_;
      if (i < 0 || i >= train_.n) return InternalError("batch order leaves the partition");
    }
  }
  ep->density = DensityForEpoch(options_, epoch);
  ep->k = options_.compressor == Compressor::kNone ? d_ : KForDensity(ep->density, d_);
  return Status::Ok();
}

Status Trainer::RunEpoch(uint64_t epoch, RunState* run) {
  EpochState ep;
  SIEVE_RETURN_IF_ERROR(StartEpoch(epoch, run->round - epoch * run->spe, &ep));
  for (uint64_t step = ep.first_step; step < run->spe && run->round < run->stop;) {
    SIEVE_RETURN_IF_ERROR(RunRound(step, &ep, run));
    const uint64_t advance = 1 + run->skip;  // backup workers: the rounds closed without us
    run->summary.skipped_rounds = run->ledger.skipped_rounds();
    run->skip = 0;
    step += advance;
    run->round += advance;
  }
  return Status::Ok();
}

Trainer::RoundPlan Trainer::PlanRound(const RunState& run, const EpochState& ep, uint64_t step,
                                      uint64_t round) const {
  RoundPlan p;
  p.last_of_epoch = step + 1 == run.spe;
  p.cut_short = round + 1 == run.stop && run.stop < run.epochs * run.spe;  // --max_rounds
  p.eval = (p.last_of_epoch && IsEvalEpoch(options_, ep.epoch)) || p.cut_short ||
           (options_.eval_every_rounds > 0 && (round + 1) % options_.eval_every_rounds == 0);
  p.contraction = options_.contraction_every > 0 && round % options_.contraction_every == 0;
  p.histogram = std::binary_search(options_.histogram_rounds.begin(),
                                   options_.histogram_rounds.end(), static_cast<int64_t>(round));
  p.write = run.metrics.is_open() &&
            (round % options_.metrics_every == 0 || p.eval || p.contraction || p.histogram ||
             p.cut_short || (p.last_of_epoch && ep.epoch + 1 == run.epochs));
  return p;
}

Status Trainer::RunRound(uint64_t step, EpochState* ep, RunState* run) {
  RoundPlan plan = PlanRound(*run, *ep, step, run->round);
  RoundResult r;
  SIEVE_RETURN_IF_ERROR(ComputeRound(*run, *ep, step, plan, &r));
  SIEVE_RETURN_IF_ERROR(SelectRound(*ep, plan, run, &r));
  SIEVE_RETURN_IF_ERROR(PushPull(run->round, &run->sel, &r.stats, &r.updates_in));
  r.t3 = Clock::now();
  SIEVE_RETURN_IF_ERROR(AfterMissedRounds(step, *ep, run, &plan, &r));
  if (options_.on_round) options_.on_round(run->round, ep->k, r.selected, r.stats);
  SIEVE_RETURN_IF_ERROR(RecordRound(plan, ep, run, &r));
  TraceRound(run->round, *ep, plan, r, Clock::now());
  return Status::Ok();
}

Status Trainer::OpenTrace() {
  if (options_.trace_out.empty()) return Status::Ok();
  TraceWriterOptions o;
  o.path = ExpandRolePattern(options_.trace_out, "worker", rank_);
  o.role = "worker";
  o.rank = rank_;
  o.rounds = options_.trace_rounds;
  auto opened = TraceWriter::Open(o);
  if (!opened.ok()) {
    return Status(opened.status().code(), "--trace_out: " + opened.status().message());
  }
  trace_ = std::move(opened).value();
  trace_->SetThreadName(kTraceTid, "training");
  return Status::Ok();
}

void Trainer::TraceRound(uint64_t round, const EpochState& ep, const RoundPlan& plan,
                         const RoundResult& r, Clock::time_point end) const {
  if (!trace_ || !trace_->Wants(round)) return;
  const RoundStats& st = r.stats;
  // The client times its sends (RoundStats::push_seconds) from its own start, a few µs after t2.
  const Clock::time_point pushed =
      std::min(r.updates_in, r.t2 + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(st.push_seconds)));
  trace_->AddSpan("round", kTraceTid, round, r.t0, end,
                  {{"epoch", ep.epoch},
                   {"bytes_up", st.bytes_up},
                   {"bytes_down", st.bytes_down},
                   {"k", ep.k},
                   {"selected", r.selected},
                   {"rounds_skipped", st.rounds_skipped}});
  trace_->AddSpan("compute", kTraceTid, round, r.t0, r.t1,
                  {{"straggle_ms", std::round(r.straggle * 1e6) / 1e3}});
  trace_->AddSpan("select", kTraceTid, round, r.t1, r.t2, {{"selected", r.selected}});
  trace_->AddSpan("push", kTraceTid, round, r.t2, pushed,
                  {{"bytes_up", st.bytes_up}, {"pairs_up", st.pairs_up}});
  trace_->AddSpan("wait", kTraceTid, round, pushed, r.updates_in,
                  {{"bytes_down", st.bytes_down}, {"pairs_down", st.pairs_down}});
  trace_->AddSpan("apply", kTraceTid, round, r.updates_in, r.t3, {{"pairs", st.pairs_down}});
  if (plan.eval) trace_->AddSpan("evaluate", kTraceTid, round, r.t3, end);
  trace_->AddCounter("bytes per round", kTraceTid, round, end,
                     {{"up", st.bytes_up}, {"down", st.bytes_down}});
}

Status Trainer::AfterMissedRounds(uint64_t step, const EpochState& ep, RunState* run,
                                  RoundPlan* plan, RoundResult* r) {
  const RoundStats& st = r->stats;
  if (st.missed_shards > 0) {
    SIEVE_RETURN_IF_ERROR(ef_->ReturnUnapplied(st.missed_indices, st.missed_values));
  }
  // Skipped rounds count up to the run's stop; what they would have done is planned below.
  run->skip = run->ledger.AfterPushPull(st, run->stop - run->round - 1) - 1;
  run->summary.missed_slices = run->ledger.missed_slices();
  run->summary.returned_sum = run->ledger.returned_sum();
  if (st.rounds_skipped == 0) return Status::Ok();
  // The last skipped round of this epoch: what it would have done is done now.
  const uint64_t last_step = std::min(step + run->skip, run->spe - 1);
  const RoundPlan end = PlanRound(*run, ep, last_step, run->round + (last_step - step));
  plan->last_of_epoch = end.last_of_epoch;
  plan->cut_short = end.cut_short;
  // An --eval_every_rounds round among the skipped ones is evaluated now.
  const uint64_t n = options_.eval_every_rounds;
  const bool crossed = n > 0 && (run->round + 1 + run->skip) / n > (run->round + 1) / n;
  plan->eval = plan->eval || end.eval || crossed;
  plan->write = plan->write || end.write || (crossed && run->metrics.is_open());
  return Status::Ok();
}

Status Trainer::ComputeRound(const RunState& run, const EpochState& ep, uint64_t step,
                             const RoundPlan& plan, RoundResult* r) {
  const uint64_t round = run.round;
  r->t0 = Clock::now();
  r->lr = LearningRate(options_, round, steps_per_epoch_);
  if (!synthetic_) SIEVE_RETURN_IF_ERROR(GatherBatch(ep.order, step));
  SIEVE_RETURN_IF_ERROR(ComputeGradient(
      round, !synthetic_ || plan.write || plan.last_of_epoch || plan.cut_short, &r->loss));
  if (!std::isfinite(r->loss)) {
    return Diverged(round, r->lr, "the loss is " + std::to_string(r->loss));
  }
  // An emulated straggler computes longer (counted in t_compute, and apart in t_straggle).
  r->straggle = run.straggler.Stall(round, Seconds(r->t0, Clock::now()));
  r->t1 = Clock::now();
  return Status::Ok();
}

Status Trainer::SelectRound(const EpochState& ep, const RoundPlan& plan, RunState* run,
                            RoundResult* r) {
  const uint64_t round = run->round;
  SIEVE_RETURN_IF_ERROR(ef_->AccumulateDevice(grad_->data(), static_cast<float>(options_.momentum),
                                              static_cast<float>(r->lr)));
  if (plan.histogram && run->metrics.is_open()) {
    SIEVE_RETURN_IF_ERROR(ef_->SigmaHistogram(kHistogramWidthSigma, kHistogramBins, &r->hist));
  }
  SelectOptions so;
  run->hints.Fill(&so);
  so.seed = CounterHash(run->seed_key, round);
  so.mask_momentum = options_.momentum_masking;
  // 16-bit pushes: the values are rounded here and their rounding error stays in r.
  so.round_values = client_->push_values();
  Selection& sel = run->sel;
  if (Status selected = ef_->Select(options_.compressor, ep.k, so, &sel); !selected.ok()) {
    if (selected.code() == StatusCode::kNonFinite) {
      return Diverged(round, r->lr, selected.message());
    }
    return selected;
  }
  run->hints.Observe(sel.threshold);
  r->t2 = Clock::now();
  r->selected = sel.size();
  r->sumsq_total = sel.sumsq_total;
  r->sumsq_selected = sel.sumsq_selected;
  run->ledger.AfterSelect(sel);
  run->summary.pushed_sum = run->ledger.pushed_sum();
  return Status::Ok();
}

Status Trainer::RecordRound(const RoundPlan& plan, EpochState* ep, RunState* run, RoundResult* r) {
  TrainSummary& summary = run->summary;
  summary.straggle_seconds += r->straggle;
  summary.bytes_up = run->ledger.bytes_up();
  summary.bytes_down = run->ledger.bytes_down();
  summary.dense_bytes += run->dense_bytes;
  summary.max_pushpull_s =
      std::max(summary.max_pushpull_s, std::chrono::duration<double>(r->t3 - r->t2).count());
  ep->loss += synthetic_ ? 0.0 : r->loss;
  if (synthetic_ && (plan.last_of_epoch || plan.cut_short)) {
    ep->loss = r->loss * static_cast<double>(ep->rounds_run + 1);
  }
  ep->selected += r->selected;
  ++ep->rounds_run;

  RoundMetrics m;
  // --eval_deferred: every evaluation but the run's last is a copy of the replica for now.
  const bool last_round = run->round + 1 + run->skip >= run->stop;
  if (plan.eval && options_.eval_deferred && !last_round && rank_ == 0 && !synthetic_) {
    DeferredEval& later = run->deferred.emplace_back();
    SIEVE_RETURN_IF_ERROR(ReadWeights(&later.weights));
    later.epoch = ep->epoch;
    later.write = plan.write;
    if (plan.write) FillMetrics(*ep, plan, *run, *r, &later.metrics);
  } else {
    if (plan.eval) SIEVE_RETURN_IF_ERROR(Evaluate(&m.test_acc, &m.train_acc));
    if (plan.eval && m.test_acc) summary.test_acc = m.test_acc;
    if (plan.write) {
      FillMetrics(*ep, plan, *run, *r, &m);
      SIEVE_RETURN_IF_ERROR(run->metrics.Write(m));
    }
  }
  run->progress.Round(run->round + 1, r->loss, summary.bytes_up);
  run->epoch = ep->epoch;
  run->last_loss = r->loss;
  client_->Report(WorkerProgressOf(summary, run->round + 1, run->stop, run->epoch, run->last_loss));
  if (plan.last_of_epoch || plan.cut_short) EndEpoch(*ep, m.test_acc, run);
  return Status::Ok();
}

void Trainer::FillMetrics(const EpochState& ep, const RoundPlan& plan, const RunState& run,
                          const RoundResult& r, RoundMetrics* m) const {
  m->round = run.round;
  m->epoch = ep.epoch;
  m->loss = r.loss;
  m->selected = r.selected;
  m->k = ep.k;
  m->density = options_.compressor == Compressor::kNone ? 1.0 : ep.density;
  m->threshold = run.sel.threshold;
  m->iterations = run.sel.iterations;
  m->bytes_up = r.stats.bytes_up;
  m->bytes_down = r.stats.bytes_down;
  m->dense_bytes = run.dense_bytes;
  m->t_compute = Seconds(r.t0, r.t1);
  m->t_straggle = r.straggle;
  m->t_select = Seconds(r.t1, r.t2);
  m->t_comm = Seconds(r.t2, r.t3);
  if (plan.contraction) {
    m->SetContraction(r.sumsq_total, r.sumsq_selected, ep.k, d_);
  }
  if (!r.hist.empty()) {
    m->histogram_width = kHistogramWidthSigma;
    m->histogram = r.hist;
  }
  m->t_wall = Seconds(run.run_start, Clock::now());  // after the evaluation, if any
}

void Trainer::EndEpoch(const EpochState& ep, std::optional<double> test_acc, RunState* run) {
  const double steps = static_cast<double>(std::max<uint64_t>(1, ep.rounds_run));
  run->summary.loss = ep.loss / steps;
  run->progress.EndEpoch(ep.epoch, run->summary.loss, test_acc, run->summary.bytes_up,
                         static_cast<double>(ep.selected) / steps);
}

Status Trainer::EvaluateDeferred(RunState* run) {
  if (run->deferred.empty()) return Status::Ok();
  std::vector<float> final_weights;
  SIEVE_RETURN_IF_ERROR(ReadWeights(&final_weights));
  for (DeferredEval& later : run->deferred) {
    SIEVE_RETURN_IF_ERROR(UploadWeights(later.weights));
    std::optional<double> test_acc, train_acc;
    SIEVE_RETURN_IF_ERROR(Evaluate(&test_acc, &train_acc));
    if (test_acc) {
      LOG(INFO) << "deferred evaluation: epoch " << later.epoch + 1 << " round "
                << later.metrics.round << " test_acc " << *test_acc;
    }
    if (later.write) {
      later.metrics.test_acc = test_acc;
      later.metrics.train_acc = train_acc;
      SIEVE_RETURN_IF_ERROR(run->metrics.Write(later.metrics));
    }
    std::vector<float>().swap(later.weights);
  }
  run->deferred.clear();
  return UploadWeights(final_weights);
}

StatusOr<TrainSummary> Trainer::FinishRun(RunState* run) {
  run->progress.Finish();
  run->summary.rounds = run->round;
  run->summary.seconds = Seconds(run->run_start, Clock::now());
  run->summary.errors_retried = client_->errors_retried();
  SIEVE_RETURN_IF_ERROR(EvaluateDeferred(run));
  client_->Report(
      WorkerProgressOf(run->summary, run->round, run->stop, run->epoch, run->last_loss));
  SIEVE_RETURN_IF_ERROR(run->metrics.Close());
  if (trace_) {
    if (Status s = trace_->Close(); !s.ok()) {
      return Status(s.code(), "--trace_out: " + s.message());
    }
  }
  if (!options_.dump_weights.empty()) SIEVE_RETURN_IF_ERROR(DumpWeights());
  return std::move(run->summary);
}

StatusOr<TrainSummary> Trainer::Run() {
  uint64_t first_round = 0;
  SIEVE_RETURN_IF_ERROR(OpenTrace());                // before the job waits for this worker
  SIEVE_RETURN_IF_ERROR(InitWeights(&first_round));  // the start barrier included
  BarrierProbeStats probe;  // --barrier_probe (not for a rejoiner: the others are past it)
  if (options_.barrier_probe > 0 && !client_->joined_late()) {
    SIEVE_ASSIGN_OR_RETURN(probe, RunBarrierProbe(options_.barrier_probe, [this] {
                             return client_->Barrier(options_.round_timeout);
                           }));
  }
  MetricsWriter metrics;
  SIEVE_RETURN_IF_ERROR(OpenMetrics(&metrics));
  RunState run(options_, rank_, d_, static_cast<uint64_t>(steps_per_epoch_), first_round, &metrics);
  run.summary.barrier_probes = probe.probes;
  run.summary.barrier_p50_ms = probe.p50_ms;
  run.summary.barrier_p99_ms = probe.p99_ms;
  run.summary.barrier_probe_s = probe.total_s;
  // By the round reached, not by a count: a worker that skipped rounds (backup workers) may skip
  // past an epoch's end.
  while (run.round < run.stop && run.round / run.spe < run.epochs) {
    SIEVE_RETURN_IF_ERROR(RunEpoch(run.round / run.spe, &run));
  }
  return FinishRun(&run);
}

}  // namespace sieve
