// The worker's compute per round, on each device, at the worker's thread defaults (one OpenBLAS
// thread, one OpenMP thread: several workers share few cores):
//   model/<model>/<impl>: ForwardBackward of one batch of 32 — impl 0 the CPU reference model
//     (tests/worker/cpu_reference, the code before kernels/nn), 1 the Model on the CPU, 2 on CUDA;
//   step/<model>/<device>: the round's whole local compute — ForwardBackward, error feedback
//     (m = μm + g; r += lr·m) and topk selection at ρ = 0.001 (device 0 cpu, 1 cuda).
// Models: 0 fnn3, 1 cnn, 2 cnn_large. CUDA rows report an error (not a time) without a GPU.
// `scripts/bench model` prints each Model row as a ratio to the reference of the same run.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/model/param_init.h"
#include "kernels/selection.h"
#include "tests/worker/cpu_reference/model.h"
#include "worker/model/model.h"

namespace sieve {
namespace {

constexpr int kBatch = 32;
const char* const kModels[] = {"fnn3", "cnn", "cnn_large"};

struct Inputs {
  std::vector<float> params, x;
  std::vector<uint8_t> labels;
};

Inputs MakeInputs(const ModelLayout& layout) {
  Inputs in;
  in.params = InitParams(layout, 1);
  std::mt19937 rng(7);
  std::normal_distribution<float> pixel(0.0f, 1.0f);
  in.x.resize(size_t{kBatch} * 784);
  for (float& v : in.x) v = pixel(rng);
  for (int b = 0; b < kBatch; ++b) in.labels.push_back(static_cast<uint8_t>(rng() % 10));
  return in;
}

// The model's inputs copied into its device's memory (owned by the model's context).
struct DeviceInputs {
  BackendContext* ctx = nullptr;
  float* params = nullptr;
  float* x = nullptr;
  float* grad = nullptr;
  ~DeviceInputs() {
    if (ctx == nullptr) return;
    ctx->Free(params);
    ctx->Free(x);
    ctx->Free(grad);
  }
};

bool Upload(Model& m, const Inputs& in, DeviceInputs* out) {
  out->ctx = m.context();
  auto up = [&](const std::vector<float>& v, float** p) {
    StatusOr<float*> a = out->ctx->Alloc(v.size());
    if (!a.ok()) return false;
    *p = *a;
    return out->ctx->FromHost(v.data(), v.size(), *p).ok();
  };
  StatusOr<float*> g = out->ctx->Alloc(m.num_params());
  if (!g.ok()) return false;
  out->grad = *g;
  return up(in.params, &out->params) && up(in.x, &out->x);
}

void BM_Model(benchmark::State& state) {
  const char* name = kModels[state.range(0)];
  const int impl = static_cast<int>(state.range(1));
  state.SetLabel(std::string(name) + (impl == 0 ? " reference" : impl == 1 ? " cpu" : " cuda"));
  if (impl == 0) {
    auto ref = cpu_reference::MakeModel(name);
    if (!ref.ok()) return state.SkipWithError("no reference for this model");
    const Inputs in = MakeInputs((*ref)->layout());
    std::vector<float> grad((*ref)->num_params());
    for (auto _ : state) {
      benchmark::DoNotOptimize((*ref)->ForwardBackward(in.params.data(), in.x.data(),
                                                       in.labels.data(), kBatch, grad.data()));
    }
    return;
  }
  auto model = MakeModel(name, impl == 1 ? Device::kCpu : Device::kCuda);
  if (!model.ok()) return state.SkipWithError(model.status().ToString().c_str());
  const Inputs in = MakeInputs((*model)->layout());
  DeviceInputs dev;
  if (!Upload(**model, in, &dev)) return state.SkipWithError("upload failed");
  float loss = 0.0f;
  for (auto _ : state) {
    Status st =
        (*model)->ForwardBackward(dev.params, dev.x, in.labels.data(), kBatch, dev.grad, &loss);
    if (st.ok()) st = (*model)->context()->Synchronize();
    if (!st.ok()) return state.SkipWithError(st.ToString().c_str());
  }
}

void BM_Step(benchmark::State& state) {
  const char* name = kModels[state.range(0)];
  const Device device = state.range(1) == 0 ? Device::kCpu : Device::kCuda;
  state.SetLabel(std::string(name) + " " + std::string(DeviceName(device)));
  auto model = MakeModel(name, device);
  if (!model.ok()) return state.SkipWithError(model.status().ToString().c_str());
  const Inputs in = MakeInputs((*model)->layout());
  DeviceInputs dev;
  if (!Upload(**model, in, &dev)) return state.SkipWithError("upload failed");
  auto ef = ErrorFeedback::Create(device, (*model)->num_params());
  if (!ef.ok()) return state.SkipWithError(ef.status().ToString().c_str());
  const uint64_t k = KForDensity(0.001, (*model)->num_params());
  Selection sel;
  float loss = 0.0f;
  for (auto _ : state) {
    Status st =
        (*model)->ForwardBackward(dev.params, dev.x, in.labels.data(), kBatch, dev.grad, &loss);
    if (st.ok()) st = (*model)->context()->Synchronize();
    if (st.ok()) st = (*ef)->AccumulateDevice(dev.grad, 0.9f, 0.05f);
    if (st.ok()) st = (*ef)->Select(Compressor::kTopk, k, SelectOptions{}, &sel);
    if (!st.ok()) return state.SkipWithError(st.ToString().c_str());
  }
}

BENCHMARK(BM_Model)
    ->ArgsProduct({{0, 1, 2}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Step)->ArgsProduct({{0, 1, 2}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace sieve

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
  omp_set_num_threads(1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
