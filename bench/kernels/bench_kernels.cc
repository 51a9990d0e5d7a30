// Micro-benchmarks of the selection operators against the physical one-pass limit (a streaming
// read computing Σ|r|: stream_read from wherever the caches keep the vector, stream_read_dram with
// the vector flushed from every cache level first) and the std::nth_element / std::sort baselines. Buffers are allocated and
// filled once per d outside the timed loops. `--device=cpu|cuda|auto` picks the backend of the
// operators (baselines always run on the host; on cuda the streaming read is a device read).
// Data: N(0,1), fixed seed. Arguments: d and ρ·1e4 (10 → ρ = 0.001, 100 → ρ = 0.01).
// The rows above time the stateless sieve::Select on that fixed data (no previous threshold);
// worker_path.h adds the worker's path beside them: ErrorFeedback::Select in steady state.
#include <benchmark/benchmark.h>
#include <omp.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/kernels/worker_path.h"
#include "kernels/selection.h"

namespace sieve {
namespace {

Device g_device = Device::kCpu;

// Host copy of r plus (on the selected device) an ErrorFeedback holding the same r.
struct Data {
  std::vector<float> host;
  std::vector<float> scratch;  // for the baselines (|r| copy)
  std::unique_ptr<ErrorFeedback> ef;
};

Data& GetData(size_t d) {
  static std::map<size_t, std::unique_ptr<Data>> cache;
  auto& slot = cache[d];
  if (!slot) {
    cache.clear();  // keep at most one size resident (d = 1e8 is 400 MB per buffer)
    auto data = std::make_unique<Data>();
    data->host.resize(d);
    // kDataChunks seeded streams, whatever the thread count: the same data at 1 and 2 threads.
    // (It matters: std::nth_element's time depends on the data — 39 to 88 ms at d = 1e7 over six
    // seeds of one stream — and the data used to be one stream per OpenMP thread.)
    constexpr int kDataChunks = 64;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < kDataChunks; ++c) {
      std::mt19937_64 rng(1234 + c);
      std::normal_distribution<float> n(0.0f, 1.0f);
      for (size_t i = d * c / kDataChunks; i < d * (c + 1) / kDataChunks; ++i) {
        data->host[i] = n(rng);
      }
    }
    data->scratch.resize(d);
    if (g_device == Device::kCuda) {
      auto ef = ErrorFeedback::Create(g_device, d);
      if (ef.ok() && (*ef)->WriteState(std::vector<float>(d, 0.0f), data->host).ok()) {
        data->ef = std::move(ef).value();
      }
    }
    cache[d] = std::move(data);
    return *cache[d];
  }
  return *slot;
}

const float* OperandFor(Data& data) {
  return data.ef ? data.ef->residual_data() : data.host.data();
}

void SetCounters(benchmark::State& state, size_t d) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * d * sizeof(float));
  state.counters["d"] = static_cast<double>(d);
  state.counters["rho"] = state.range(1) / 1e4;
}

void BM_StreamRead(benchmark::State& state) {
  const size_t d = state.range(0);
  Data& data = GetData(d);
  const float* x = data.host.data();
  for (auto _ : state) {
    float sum = 0.0f;
#pragma omp parallel for simd reduction(+ : sum) schedule(static)
    for (size_t i = 0; i < d; ++i) sum += std::fabs(x[i]);
    benchmark::DoNotOptimize(sum);
  }
  SetCounters(state, d);
}

// Writes back and evicts x[0, n) from every cache level (clflush), so that the next read comes
// from DRAM. Without SSE2 it does nothing (stream_read_dram is then stream_read).
void EvictFromCaches(const float* x, size_t n) {
#if defined(__SSE2__)
  const char* p = reinterpret_cast<const char*>(x);
  for (size_t off = 0; off < n * sizeof(float); off += 64) _mm_clflush(p + off);
  _mm_mfence();
#else
  (void)x;
  (void)n;
#endif
}

// The streaming read from DRAM: what one pass over r costs where the caches do not hold it (the
// worker's Select, right after an Accumulate that streamed g, m and r: 3 vectors through the
// caches). Where the last-level cache holds the vector (d = 1e7 is 40 MB; a 480 MiB L3 holds it),
// stream_read is an L3 read and this row is the slower, DRAM one; otherwise the two are equal.
void BM_StreamReadDram(benchmark::State& state) {
  const size_t d = state.range(0);
  Data& data = GetData(d);
  const float* x = data.host.data();
  for (auto _ : state) {
    state.PauseTiming();
    EvictFromCaches(x, d);
    state.ResumeTiming();
    float sum = 0.0f;
#pragma omp parallel for simd reduction(+ : sum) schedule(static)
    for (size_t i = 0; i < d; ++i) sum += std::fabs(x[i]);
    benchmark::DoNotOptimize(sum);
  }
  SetCounters(state, d);
}

void BM_NthElement(benchmark::State& state) {
  const size_t d = state.range(0);
  const uint64_t k = KForDensity(state.range(1) / 1e4, d);
  Data& data = GetData(d);
  for (auto _ : state) {
    float* a = data.scratch.data();
    for (size_t i = 0; i < d; ++i) a[i] = std::fabs(data.host[i]);
    std::nth_element(a, a + (k - 1), a + d, std::greater<float>());
    benchmark::DoNotOptimize(a[k - 1]);
  }
  SetCounters(state, d);
}

void BM_FullSort(benchmark::State& state) {
  const size_t d = state.range(0);
  Data& data = GetData(d);
  for (auto _ : state) {
    float* a = data.scratch.data();
    for (size_t i = 0; i < d; ++i) a[i] = std::fabs(data.host[i]);
    std::sort(a, a + d, std::greater<float>());
    benchmark::DoNotOptimize(a[0]);
  }
  SetCounters(state, d);
}

void BM_Operator(benchmark::State& state, Compressor c) {
  const size_t d = state.range(0);
  const uint64_t k = KForDensity(state.range(1) / 1e4, d);
  Data& data = GetData(d);
  Selection s;
  uint64_t seed = 0;
  double selected = 0, iterations = 0;
  for (auto _ : state) {
    Status st = Select(g_device, c, OperandFor(data), d, k, {.seed = ++seed}, &s);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      break;
    }
    selected += s.size();
    iterations += s.iterations;
  }
  SetCounters(state, d);
  state.counters["k"] = static_cast<double>(k);
  state.counters["selected"] = benchmark::Counter(selected, benchmark::Counter::kAvgIterations);
  state.counters["adjust"] = benchmark::Counter(iterations, benchmark::Counter::kAvgIterations);
}

}  // namespace
}  // namespace sieve

int main(int argc, char** argv) {
  using namespace sieve;  // NOLINT
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--device=", 9) == 0) {
      StatusOr<Device> dev = ParseDevice(argv[i] + 9);
      if (!dev.ok()) {
        std::fprintf(stderr, "%s\n", dev.status().ToString().c_str());
        return 2;
      }
      g_device = *dev;
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  // Rows are registered d-major so each buffer is generated once (d = 1e8: 400 MB per buffer).
  const char* quick = std::getenv("SIEVE_BENCH_QUICK");
  const bool skip_1e8 = quick != nullptr && std::strcmp(quick, "1") == 0;
  for (int64_t d : {100000L, 1000000L, 10000000L, 100000000L}) {
    if (d == 100000000L && skip_1e8) continue;
    for (int64_t rho : {10L, 100L}) {
      std::vector<benchmark::internal::Benchmark*> rows;
      rows.push_back(benchmark::RegisterBenchmark("stream_read", &BM_StreamRead));
      if (g_device == Device::kCpu) {  // the ef_ rows' r is in host memory only on the CPU
        rows.push_back(benchmark::RegisterBenchmark("stream_read_dram", &BM_StreamReadDram));
      }
      rows.push_back(benchmark::RegisterBenchmark("nth_element", BM_NthElement));
      if (d < 100000000L) {  // a full sort of 1e8 floats takes ~10 s per iteration
        rows.push_back(benchmark::RegisterBenchmark("full_sort", BM_FullSort));
      }
      for (Compressor c : {Compressor::kTopk, Compressor::kGaussiank, Compressor::kGaussiankPaper,
                           Compressor::kDgc, Compressor::kRandomk}) {
        rows.push_back(
            benchmark::RegisterBenchmark(std::string(CompressorName(c)).c_str(), BM_Operator, c));
      }
      for (auto* b : rows) b->Args({d, rho})->Unit(benchmark::kMillisecond)->UseRealTime();
      RegisterWorkerPathRows(g_device, d, rho);  // ef_*, sl_*, ef_round_*, ef_lrstep_*
    }
  }
  benchmark::Initialize(&rest_argc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
