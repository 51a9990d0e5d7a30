#include "bench/kernels/worker_path.h"

#include <benchmark/benchmark.h>
#include <omp.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/compressor.h"
#include "kernels/selection.h"

namespace sieve {
namespace {

constexpr float kMomentum = 0.9f;
constexpr float kLr = 0.05f;
constexpr float kLrStep = 0.1f;
constexpr size_t kPoolPad = size_t{1} << 16;  // gradient windows start at offsets below this
constexpr double kScaleDecayRounds = 400.0;   // the gradient's scale: exp(−round / this) ...
constexpr double kScaleNoise = 0.1;           // ... × (1 ± this), uniform, seeded per round

enum class Timed { kSelect, kRound, kStateless, kLrStep };

struct Plan {
  int warmup;  // untimed rounds first
  int timed;   // timed rounds (Google Benchmark iterations)
};

Plan PlanFor(int64_t d, Timed timed) {
  if (timed == Timed::kLrStep) return {d >= 100000000 ? 6 : 15, 10};
  if (d >= 100000000) return {6, 12};
  if (d >= 10000000) return {15, 30};
  return {20, 60};
}

// d + kPoolPad N(0,1) floats (fixed seed), generated once per d (rows run d-major).
const std::vector<float>& NoisePool(size_t d) {
  static std::map<size_t, std::vector<float>> cache;
  if (cache.count(d) == 0) {
    cache.clear();
    std::vector<float> pool(d + kPoolPad);
#pragma omp parallel
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      std::mt19937_64 rng(4321 + t);
      std::normal_distribution<float> n(0.0f, 1.0f);
      for (size_t i = pool.size() * t / nt; i < pool.size() * (t + 1) / nt; ++i) pool[i] = n(rng);
    }
    cache[d] = std::move(pool);
  }
  return cache[d];
}

// The round's gradient in backend memory: a window of the noise pool times the drifting scale,
// written on the host and (CUDA) copied into a device buffer held by a second ErrorFeedback.
class GradientFeed {
 public:
  static StatusOr<std::unique_ptr<GradientFeed>> Create(Device device, size_t d) {
    auto feed = std::unique_ptr<GradientFeed>(new GradientFeed(d));
    if (device != Device::kCpu) {
      SIEVE_ASSIGN_OR_RETURN(feed->holder_, ErrorFeedback::Create(device, d));
    }
    return feed;
  }

  StatusOr<const float*> Next(int round) {
    std::mt19937_64 rng(977 + round);
    const double noise = std::uniform_real_distribution<double>(-1.0, 1.0)(rng);
    const float scale =
        static_cast<float>(std::exp(-round / kScaleDecayRounds) * (1.0 + kScaleNoise * noise));
    const float* src = pool_.data() + (static_cast<size_t>(round) * 40503u) % kPoolPad;
    float* g = g_.data();
    const size_t d = g_.size();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < d; ++i) g[i] = scale * src[i];
    if (!holder_) return static_cast<const float*>(g);
    SIEVE_RETURN_IF_ERROR(holder_->WriteState(g_, g_));
    return holder_->residual_data();
  }

 private:
  explicit GradientFeed(size_t d) : pool_(NoisePool(d)), g_(d) {}

  const std::vector<float>& pool_;
  std::vector<float> g_;
  std::unique_ptr<ErrorFeedback> holder_;  // CUDA: the device copy of g
};

// The trainer's warm start: the last two finite positive thresholds.
struct Thresholds {
  float prev = 0.0f, older = 0.0f;
  SelectOptions Options(int round) const {
    SelectOptions so;
    so.prev_threshold = prev;
    so.older_threshold = older;
    so.seed = static_cast<uint64_t>(round);
    return so;
  }
  void Record(const Selection& s) {
    if (std::isfinite(s.threshold) && s.threshold > 0.0f) {
      older = prev;
      prev = s.threshold;
    }
  }
};

void BM_WorkerPath(benchmark::State& state, Device device, Compressor c, Timed timed) {
  const size_t d = static_cast<size_t>(state.range(0));
  const uint64_t k = KForDensity(static_cast<double>(state.range(1)) / 1e4, d);
  auto fail = [&](const Status& st) { state.SkipWithError(st.ToString().c_str()); };
  StatusOr<std::unique_ptr<ErrorFeedback>> ef_or = ErrorFeedback::Create(device, d);
  StatusOr<std::unique_ptr<GradientFeed>> feed_or = GradientFeed::Create(device, d);
  if (!ef_or.ok() || !feed_or.ok()) {
    fail(!ef_or.ok() ? ef_or.status() : feed_or.status());
    for (auto _ : state) {
    }
    return;
  }
  ErrorFeedback& ef = **ef_or;
  GradientFeed& feed = **feed_or;
  const Plan plan = PlanFor(static_cast<int64_t>(d), timed);
  Thresholds thr;
  Selection s, stateless;
  int round = 0;
  // One untimed round: accumulate, select, carry the threshold.
  auto untimed_round = [&](float lr) -> Status {
    SIEVE_ASSIGN_OR_RETURN(const float* g, feed.Next(round));
    SIEVE_RETURN_IF_ERROR(ef.AccumulateDevice(g, kMomentum, lr));
    SIEVE_RETURN_IF_ERROR(ef.Select(c, k, thr.Options(round), &s));
    thr.Record(s);
    ++round;
    return Status::Ok();
  };
  for (int w = 0; w < plan.warmup; ++w) {
    if (Status st = untimed_round(kLr); !st.ok()) {
      fail(st);
      break;
    }
  }
  const float lr = timed == Timed::kLrStep ? kLr * kLrStep : kLr;
  double passes = 0, adjust = 0, fallback = 0, selected = 0;
  for (auto _ : state) {
    if (state.error_occurred()) break;
    state.PauseTiming();
    StatusOr<const float*> g = feed.Next(round);
    Status st = g.status();
    if (st.ok() && timed != Timed::kRound) {
      st = ef.AccumulateDevice(*g, kMomentum, lr);
      if (st.ok()) st = ef.Synchronize();
    }
    const SelectOptions so = thr.Options(round);
    if (!st.ok()) {
      fail(st);
      break;
    }
    state.ResumeTiming();
    if (timed == Timed::kStateless) {
      st = Select(device, c, ef.residual_data(), d, k, so, &stateless);
      state.PauseTiming();
      if (st.ok()) st = ef.Select(c, k, so, &s);
      state.ResumeTiming();
    } else {
      if (timed == Timed::kRound) st = ef.AccumulateDevice(*g, kMomentum, lr);
      if (st.ok()) st = ef.Select(c, k, so, &s);
    }
    if (!st.ok()) {
      fail(st);
      break;
    }
    const Selection& timed_sel = timed == Timed::kStateless ? stateless : s;
    passes += 1 + timed_sel.iterations + (timed_sel.exact_fallback ? 1 : 0);
    adjust += timed_sel.iterations;
    fallback += timed_sel.exact_fallback ? 1 : 0;
    selected += static_cast<double>(timed_sel.size());
    thr.Record(s);
    ++round;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * d * sizeof(float));
  state.counters["d"] = static_cast<double>(d);
  state.counters["rho"] = static_cast<double>(state.range(1)) / 1e4;
  state.counters["k"] = static_cast<double>(k);
  using C = benchmark::Counter;
  state.counters["selected"] = C(selected, C::kAvgIterations);
  if (c != Compressor::kTopk) {
    state.counters["passes"] = C(passes, C::kAvgIterations);
    state.counters["adjust"] = C(adjust, C::kAvgIterations);
    state.counters["fallback"] = C(fallback, C::kAvgIterations);
  }
}

void Register(Device device, int64_t d, int64_t rho_e4, const std::string& prefix, Compressor c,
              Timed timed) {
  const std::string name = prefix + std::string(CompressorName(c));
  benchmark::RegisterBenchmark(name.c_str(), BM_WorkerPath, device, c, timed)
      ->Args({d, rho_e4})
      ->Iterations(PlanFor(d, timed).timed)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

}  // namespace

void RegisterWorkerPathRows(Device device, int64_t d, int64_t rho_e4) {
  for (Compressor c : {Compressor::kTopk, Compressor::kGaussiank, Compressor::kDgc}) {
    Register(device, d, rho_e4, "ef_", c, Timed::kSelect);
  }
  for (Compressor c : {Compressor::kTopk, Compressor::kGaussiank}) {
    Register(device, d, rho_e4, "sl_", c, Timed::kStateless);
    Register(device, d, rho_e4, "ef_round_", c, Timed::kRound);
  }
  for (Compressor c : {Compressor::kGaussiank, Compressor::kDgc}) {
    Register(device, d, rho_e4, "ef_lrstep_", c, Timed::kLrStep);
  }
}

}  // namespace sieve
