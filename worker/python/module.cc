// sieve._core: the pybind11 bindings behind the Python package `sieve` (docs/worker-api.md,
// "The Python module"). What it offers:
//   - Client: PsClient (connect, pull dense, push-pull of a Selection, barrier, finish, wait for
//     shutdown, rank and sizes); every blocking call releases the GIL.
//   - ErrorFeedback: kernels/selection.h's momentum + residual on a Device (cpu, or cuda when this
//     build has the CUDA backend), and Select with every compressor.
//   - The worker's pure pieces, so a Python worker does exactly what sieve-worker does: the data
//     partition and per-epoch shuffle, the learning-rate and density schedules' inputs
//     (CounterHash, KForDensity), the Fashion-MNIST loader, the models' layouts and initial
//     weights, and the metrics JSON lines / summary line / progress line formats.
//
// Arrays pass without copies: a NumPy array (or any object with the buffer protocol) is used in
// place; a torch tensor through its data pointer (tensor.data_ptr()), on the CPU or, with the CUDA
// backend, on the GPU (then the error feedback and the UPDATE scatter run in GPU memory; only the
// selected pairs and the servers' reply cross to the host). Every array must be float32,
// C-contiguous and of the expected length; anything else raises before anything is sent.
//
// Errors: a Status that is not OK becomes a Python exception carrying its message:
// InvalidArgument -> ValueError, DeadlineExceeded -> sieve.TimeoutError (a TimeoutError),
// anything else -> sieve.Error (a RuntimeError); the exception's `code` attribute is the
// StatusCode's name ("OUT_OF_RANGE", "DEADLINE_EXCEEDED", ...): callers test it, never the message.
#include <glog/logging.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kernels/compressor.h"
#include "kernels/device.h"
#include "kernels/model/model_layout.h"
#include "kernels/model/param_init.h"
#include "kernels/nn/nn_ops.h"
#include "kernels/selection.h"
#include "proto/codec.h"
#include "proto/error_code.h"
#include "proto/job_identity.h"
#include "proto/progress_line.h"
#include "worker/client/ps_client.h"
#include "worker/client/worker_start.h"
#include "worker/data/dataset.h"
#include "worker/data/partition.h"
#include "worker/trainer/metrics.h"
#include "worker/trainer/round_ledger.h"
#include "worker/trainer/schedule.h"
#include "worker/trainer/straggler.h"
#include "worker/trainer/summary.h"

namespace py = pybind11;

namespace sieve {
namespace {

// Thrown (also where the GIL is released: unwinding re-acquires it) and translated by pybind11
// into sieve.Error (a RuntimeError) and sieve.TimeoutError (a TimeoutError).
struct SieveError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct SieveTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Raises the exception of `s` with its code as attribute `code` (the StatusCode's name, e.g.
// "OUT_OF_RANGE") and a peer's refusal's protocol code as `wire_code` (e.g.
// "ERROR_UNKNOWN_ROUND"; None for any other error), so callers test codes, never the message. A
// caller's bad argument is a ValueError; a peer's refusal never is.
[[noreturn]] void Raise(const Status& s) {
  const pb::ErrorCode wire = WireCodeOf(s);
  if (s.code() == StatusCode::kInvalidArgument && wire == pb::ERROR_NONE) {
    throw py::value_error(s.message());
  }
  py::gil_scoped_acquire gil;
  py::module_ core = py::module_::import("sieve._core");
  py::object type = core.attr(s.code() == StatusCode::kDeadlineExceeded ? "TimeoutError" : "Error");
  py::object exc = type(s.ToString());
  exc.attr("code") = std::string(StatusCodeName(s.code()));
  exc.attr("wire_code") = wire == pb::ERROR_NONE ? py::object(py::none())
                                                 : py::object(py::str(pb::ErrorCode_Name(wire)));
  PyErr_SetObject(type.ptr(), exc.ptr());
  throw py::error_already_set();
}

void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

template <typename T>
T Take(StatusOr<T> v) {
  if (!v.ok()) Raise(v.status());
  return std::move(*v);
}

// A float32, C-contiguous array lent by Python: a torch tensor or a buffer-protocol object.
struct FloatArray {
  float* data = nullptr;
  size_t n = 0;
  Device device = Device::kCpu;
  bool torch = false;
  std::optional<py::buffer_info> buffer;  // keeps a buffer-protocol view open
};

bool IsTorchTensor(py::handle obj) {
  return py::hasattr(obj, "data_ptr") && py::hasattr(obj, "is_contiguous") &&
         py::hasattr(obj, "dtype") && py::hasattr(obj, "device");
}

// `what` names the argument in errors. With `expect` > 0 the length must equal it.
FloatArray AsFloatArray(py::handle obj, const std::string& what, size_t expect) {
  FloatArray a;
  if (IsTorchTensor(obj)) {
    a.torch = true;
    const std::string dtype = py::str(obj.attr("dtype"));
    if (dtype != "torch.float32") {
      throw py::value_error(what + " must be float32 (torch.float32), got " + dtype);
    }
    if (!obj.attr("is_contiguous")().cast<bool>()) {
      throw py::value_error(what + " must be contiguous (call .contiguous())");
    }
    const std::string device = py::str(obj.attr("device").attr("type"));
    if (device == "cuda") {
      if (!CudaBackendCompiled()) {
        throw py::value_error(what +
                              " is on cuda but this sieve module was built without the CUDA "
                              "backend (rebuild with nvcc present, SIEVE_CUDA=ON)");
      }
      a.device = Device::kCuda;
    } else if (device != "cpu") {
      throw py::value_error(what + " is on device '" + device +
                            "', which sieve does not support (cpu" +
                            (CudaBackendCompiled() ? " or cuda)" : " only in this build)"));
    }
    a.n = obj.attr("numel")().cast<size_t>();
    a.data = reinterpret_cast<float*>(obj.attr("data_ptr")().cast<uintptr_t>());
  } else if (PyObject_CheckBuffer(obj.ptr())) {
    py::buffer b = py::reinterpret_borrow<py::buffer>(obj);
    py::buffer_info info = b.request(/*writable=*/false);
    if (info.itemsize != 4 || (info.format != "f" && info.format != "<f" && info.format != "=f")) {
      throw py::value_error(what + " must be float32 (format 'f'), got format '" + info.format +
                            "' of " + std::to_string(info.itemsize) + "-byte items");
    }
    py::ssize_t stride = 4;
    for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
      if (info.shape[d] > 1 && info.strides[d] != stride) {
        throw py::value_error(what + " must be C-contiguous (numpy.ascontiguousarray)");
      }
      stride *= info.shape[d];
    }
    if (info.readonly) throw py::value_error(what + " is read-only");
    a.n = static_cast<size_t>(info.size);
    a.data = static_cast<float*>(info.ptr);
    a.buffer = std::move(info);
  } else {
    throw py::type_error(what + " must be a float32 torch tensor or NumPy array, got " +
                         std::string(py::str(py::type::of(obj))));
  }
  if (expect > 0 && a.n != expect) {
    throw py::value_error(what + " has " + std::to_string(a.n) + " elements, expected " +
                          std::to_string(expect) + " (the job's D)");
  }
  return a;
}

// Waits for torch's current CUDA stream, so that a tensor torch just wrote is complete before
// a sieve backend (with its own stream) reads it.
void SyncTorchCuda(const FloatArray& a) {
  if (a.device != Device::kCuda) return;
  py::module_::import("torch").attr("cuda").attr("current_stream")().attr("synchronize")();
}

// A NumPy array over `data` that keeps `owner` alive.
template <typename T>
py::array ArrayView(const T* data, size_t n, py::handle owner) {
  return py::array(py::dtype::of<T>(), {static_cast<py::ssize_t>(n)}, {sizeof(T)}, data, owner);
}

// A NumPy array owning a copy of `v` (moved into a capsule).
template <typename T>
py::array OwnedArray(std::vector<T> v, std::vector<py::ssize_t> shape) {
  auto* heap = new std::vector<T>(std::move(v));
  py::capsule free(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t s = sizeof(T);
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    s *= shape[d];
  }
  return py::array(py::dtype::of<T>(), shape, strides, heap->data(), free);
}

Device ParseDeviceName(const std::string& name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") {
    if (!CudaBackendCompiled()) {
      throw py::value_error("device 'cuda': this sieve module was built without the CUDA backend");
    }
    return Device::kCuda;
  }
  throw py::value_error("device must be 'cpu' or 'cuda', got '" + name + "'");
}

// "fp32", "fp16" or "bf16" (proto/codec.h's ParseValueType); ValueError naming `what` otherwise.
ValuePrecision ParsePrecision(const std::string& name, const std::string& what) {
  StatusOr<ValueType> t = ParseValueType(name);
  if (!t.ok()) throw py::value_error(what + ": " + t.status().message());
  return *t;
}

std::string PrecisionName(ValuePrecision p) { return ValueTypeName(p); }

py::dict StatsDict(const RoundStats& s) {
  py::dict d;
  d["bytes_up"] = s.bytes_up;
  d["bytes_down"] = s.bytes_down;
  d["pairs_up"] = s.pairs_up;
  d["pairs_down"] = s.pairs_down;
  d["push_seconds"] = s.push_seconds;
  d["wait_seconds"] = s.wait_seconds;
  // Backup workers (RoundStats): rounds that closed without this worker, now applied, and the
  // pushed pairs no server applied (returned to the ErrorFeedback given to push_pull).
  d["rounds_skipped"] = s.rounds_skipped;
  d["missed_shards"] = s.missed_shards;
  double returned = 0;
  for (float v : s.missed_values) returned += v;
  d["returned_sum"] = returned;
  return d;
}

class PyErrorFeedback {
 public:
  PyErrorFeedback(size_t d, const std::string& device) : device_(ParseDeviceName(device)) {
    ef_ = Take(ErrorFeedback::Create(device_, d));
  }
  size_t dim() const { return ef_->dim(); }
  std::string device() const { return std::string(DeviceName(device_)); }

  void Accumulate(py::handle grad, float momentum, float lr) {
    FloatArray g = AsFloatArray(grad, "grad", ef_->dim());
    CheckDevice(g, "grad");
    SyncTorchCuda(g);
    py::gil_scoped_release nogil;
    Check(ef_->AccumulateDevice(g.data, momentum, lr));
    if (device_ == Device::kCuda) Check(ef_->Synchronize());  // g may change once we return
  }

  // With hints, they replace prev_threshold / older_threshold and keep the new threshold.
  void Select(const std::string& compressor, uint64_t k, float prev_threshold,
              float older_threshold, uint64_t seed, const std::string& round_values,
              bool mask_momentum, ThresholdHints* hints, Selection* out) {
    const Compressor c = Take(ParseCompressor(compressor));
    SelectOptions so;
    so.prev_threshold = prev_threshold;
    so.older_threshold = older_threshold;
    if (hints != nullptr) hints->Fill(&so);
    so.seed = seed;
    so.round_values = ParsePrecision(round_values, "round_values");
    so.mask_momentum = mask_momentum;
    {
      py::gil_scoped_release nogil;
      Check(ef_->Select(c, k, so, out));
    }
    if (hints != nullptr) hints->Observe(out->threshold);
  }

  void WriteState(py::handle m, py::handle r) {
    FloatArray am = AsFloatArray(m, "momentum", ef_->dim());
    FloatArray ar = AsFloatArray(r, "residual", ef_->dim());
    if (am.device != Device::kCpu || ar.device != Device::kCpu) {
      throw py::value_error("write_state takes host (cpu) arrays");
    }
    Check(ef_->WriteState(std::span<const float>(am.data, am.n),
                          std::span<const float>(ar.data, ar.n)));
  }

  // Pairs pushed but never applied (backup workers) back into the residual.
  void ReturnUnapplied(const RoundStats& st) {
    Check(ef_->ReturnUnapplied(st.missed_indices, st.missed_values));
  }

  py::tuple ReadState() const {
    std::vector<float> m, r;
    Check(ef_->ReadState(&m, &r));
    const py::ssize_t n = static_cast<py::ssize_t>(m.size());
    return py::make_tuple(OwnedArray(std::move(m), {n}), OwnedArray(std::move(r), {n}));
  }

  void CheckDevice(const FloatArray& a, const std::string& what) const {
    if (a.device != device_) {
      throw py::value_error(what + " is in " + std::string(DeviceName(a.device)) +
                            " memory but this ErrorFeedback lives in " +
                            std::string(DeviceName(device_)) + " memory");
    }
  }

 private:
  Device device_;
  std::unique_ptr<ErrorFeedback> ef_;
};

class PyClient {
 public:
  explicit PyClient(std::unique_ptr<PsClient> c) : c_(std::move(c)) {}

  static std::unique_ptr<PyClient> Connect(
      const std::string& scheduler, uint64_t num_params, int rank, const std::string& bind,
      const std::string& host, int port, bool fp16, const std::string& wire_values,
      const std::string& wire, bool checksum, int heartbeat_interval_ms, int heartbeat_timeout_ms,
      const std::string& curve_dir, const std::string& job_token, const std::string& job_token_file,
      const std::string& curve_key) {
    if (num_params == 0) throw py::value_error("num_params (the model's D) must be >= 1");
    if (scheduler.rfind(':') == std::string::npos) {
      throw py::value_error("scheduler must be host:port, got '" + scheduler + "'");
    }
    if (port < 0 || port > 65535) throw py::value_error("port must be in [0, 65535]");
    PsClientOptions o;
    o.scheduler = scheduler;
    o.rank = rank;
    o.num_params = num_params;
    o.bind_host = bind;
    o.advertise_host = host;
    o.port = static_cast<uint16_t>(port);
    o.curve_dir = curve_dir;
    o.curve_key = curve_key;
    if (!job_token.empty() && !job_token_file.empty()) {
      throw py::value_error("give job_token or job_token_file, not both");
    }
    o.job_token = job_token;
    if (!job_token_file.empty()) {
      StatusOr<std::string> token = ReadJobTokenFile(job_token_file);
      if (!token.ok()) throw py::value_error("job_token_file: " + token.status().message());
      o.job_token = *token;
    }
    o.heartbeat_interval = std::chrono::milliseconds(heartbeat_interval_ms);
    o.heartbeat_timeout = std::chrono::milliseconds(heartbeat_timeout_ms);
    o.fp16 = fp16;
    o.push_values = ParsePrecision(wire_values, "wire_values");
    if (wire != "v5" && wire != "v4") {
      throw py::value_error("wire must be 'v5' or 'v4', got '" + wire + "'");
    }
    o.compact_indices = wire == "v5";
    o.checksum = checksum;
    StatusOr<std::unique_ptr<PsClient>> c = [&] {
      py::gil_scoped_release nogil;
      return PsClient::Connect(o);
    }();
    auto client = std::make_unique<PyClient>(Take(std::move(c)));
    if (client->c_->num_params() != num_params) {
      const std::string msg = "the job has D = " + std::to_string(client->c_->num_params()) +
                              " parameters but this worker's model has " +
                              std::to_string(num_params);
      client->c_->RequestStop(msg);
      throw py::value_error(msg);
    }
    return client;
  }

  PsClient& c() {
    if (!c_) throw py::value_error("the client is closed");
    return *c_;
  }

  uint64_t PullDense(py::handle weights, int timeout_ms) {
    FloatArray w = AsFloatArray(weights, "weights", c().num_params());
    uint64_t at = 0;
    if (w.device == Device::kCpu) {
      py::gil_scoped_release nogil;
      Check(
          c_->PullDense(std::span<float>(w.data, w.n), std::chrono::milliseconds(timeout_ms), &at));
      return at;
    }
    std::vector<float> host(w.n);
    {
      py::gil_scoped_release nogil;
      Check(c_->PullDense(host, std::chrono::milliseconds(timeout_ms), &at));
    }
    SyncTorchCuda(w);
    py::gil_scoped_release nogil;
    BackendContext* ctx = Ops(w.device)->context();
    Check(ctx->FromHost(host.data(), host.size(), w.data));
    Check(ctx->Synchronize());
    return at;
  }

  // With backup workers a round may close without this push: the pairs no server applied go
  // back into `ef`'s residual; without an ErrorFeedback that is an error (they would be lost).
  // With a ledger, the round is counted in it and stats["advance"] is the rounds it advances.
  py::dict PushPull(uint64_t round, Selection* sel, py::handle weights, int timeout_ms,
                    PyErrorFeedback* ef, RoundLedger* ledger) {
    RoundStats stats;
    PushPullInto(round, sel, weights, timeout_ms, &stats);
    if (stats.missed_shards > 0) {
      if (ef == nullptr) {
        throw std::runtime_error(
            "round " + std::to_string(round) + " closed without this push at " +
            std::to_string(stats.missed_shards) +
            " server(s) (backup workers): its pairs were not applied; pass error_feedback= to "
            "push_pull so that they return to the residual");
      }
      ef->ReturnUnapplied(stats);
    }
    py::dict d = StatsDict(stats);
    if (ledger != nullptr) d["advance"] = ledger->AfterPushPull(stats);
    return d;
  }

  void PushPullInto(uint64_t round, Selection* sel, py::handle weights, int timeout_ms,
                    RoundStats* out) {
    FloatArray w = AsFloatArray(weights, "weights", c().num_params());
    if (sel->dim != w.n) {
      throw py::value_error("the selection was made from a vector of " + std::to_string(sel->dim) +
                            " values, the job's D is " + std::to_string(w.n));
    }
    RoundStats& stats = *out;
    if (w.device == Device::kCpu) {
      {
        py::gil_scoped_release nogil;
        Check(c_->PushPull(round, sel, std::span<float>(w.data, w.n), &stats,
                           std::chrono::milliseconds(timeout_ms)));
      }
      return;
    }
    // GPU replica: stage the UPDATE's pairs on the host, then one scatter on the device.
    SyncTorchCuda(w);
    NnOps* ops = Ops(w.device);
    {
      py::gil_scoped_release nogil;
      update_idx_.clear();
      update_vals_.clear();
      Status dense_copy;
      const UpdateSink sink = [&](uint64_t lo, std::span<const uint32_t> rel,
                                  std::span<const float> values) {
        if (lo + values.size() > w.n) {
          dense_copy = InternalError("an UPDATE reaches past D");
        } else if (rel.empty()) {
          if (dense_copy.ok()) {
            dense_copy = ops->context()->FromHost(values.data(), values.size(), w.data + lo);
          }
        } else {
          for (uint32_t r : rel) update_idx_.push_back(static_cast<uint32_t>(lo + r));
          update_vals_.insert(update_vals_.end(), values.begin(), values.end());
        }
      };
      Check(c_->PushPull(round, sel, sink, &stats, std::chrono::milliseconds(timeout_ms)));
      Check(dense_copy);
      Check(ops->ScatterSet(update_idx_.data(), update_vals_.data(), update_idx_.size(), w.data,
                            w.n));
      Check(ops->context()->Synchronize());
    }
  }

  // StartWorker (worker/client/worker_start.h) on a host or cuda replica: `weights` holds this
  // worker's own initial weights (offered by worker 0) and gets the servers'.
  py::dict Start(py::handle weights, int timeout_ms) {
    FloatArray w = AsFloatArray(weights, "weights", c().num_params());
    std::vector<float> host;
    std::span<float> span(w.data, w.n);
    if (w.device != Device::kCpu) {
      SyncTorchCuda(w);
      host.resize(w.n);
      py::gil_scoped_release nogil;
      BackendContext* ctx = Ops(w.device)->context();
      Check(ctx->ToHost(w.data, w.n, host.data()));
      Check(ctx->Synchronize());
      span = host;
    }
    StatusOr<WorkerStart> started = [&] {
      py::gil_scoped_release nogil;
      return StartWorker(c_.get(), span, std::chrono::milliseconds(timeout_ms));
    }();
    const WorkerStart st = Take(std::move(started));
    if (w.device != Device::kCpu) {
      py::gil_scoped_release nogil;
      BackendContext* ctx = Ops(w.device)->context();
      Check(ctx->FromHost(host.data(), host.size(), w.data));
      Check(ctx->Synchronize());
    }
    py::dict d;
    d["first_round"] = st.first_round;
    d["rejoined"] = st.rejoined;
    d["servers_at"] = st.servers_at;
    d["attempts"] = st.attempts;
    return d;
  }

  void Barrier(int timeout_ms) {
    PsClient& client = c();
    py::gil_scoped_release nogil;
    Check(client.Barrier(std::chrono::milliseconds(timeout_ms)));
  }
  // A collective of a float32 vector over every live worker ("sum" or "broadcast" of `root`'s):
  // (values, the number of workers whose parts they combine).
  py::tuple Collective(const std::string& op,
                       py::array_t<float, py::array::c_style | py::array::forcecast> values,
                       int root, int timeout_ms) {
    PsClient::CollectiveOp code;
    if (op == "sum") {
      code = PsClient::CollectiveOp::kSum;
    } else if (op == "broadcast") {
      code = PsClient::CollectiveOp::kBroadcast;
    } else {
      throw py::value_error("collective op must be 'sum' or 'broadcast', got '" + op + "'");
    }
    if (values.ndim() != 1) throw py::value_error("a collective takes a 1-D float32 array");
    std::vector<float> in(values.data(), values.data() + values.size());
    PsClient& client = c();
    StatusOr<std::pair<std::vector<float>, uint32_t>> out = InternalError("not run");
    {
      py::gil_scoped_release nogil;
      out = client.Collective(code, root, in, std::chrono::milliseconds(timeout_ms));
    }
    Check(out.status());
    const auto n = static_cast<py::ssize_t>(out->first.size());
    const uint32_t contributors = out->second;
    return py::make_tuple(OwnedArray(std::move(out->first), {n}), contributors);
  }
  void Finish() {
    PsClient& client = c();
    py::gil_scoped_release nogil;
    Check(client.Finish());
  }
  void WaitShutdown(int timeout_ms) {
    PsClient& client = c();
    py::gil_scoped_release nogil;
    Check(client.WaitShutdown(std::chrono::milliseconds(timeout_ms)));
  }
  void Join(uint64_t round, int timeout_ms) {
    PsClient& client = c();
    py::gil_scoped_release nogil;
    Check(client.Join(round, std::chrono::milliseconds(timeout_ms)));
  }
  void RequestStop(const std::string& reason) { c().RequestStop(reason); }
  // This worker's part of the job's status (PsClient::Report; sieve.proto's WorkerReport).
  void Report(uint64_t round, uint64_t total_rounds, uint32_t epoch, uint32_t epochs,
              std::optional<double> loss, std::optional<double> test_acc, uint64_t bytes_up,
              uint64_t bytes_down, uint64_t skipped_rounds, uint64_t missed_slices,
              const std::map<std::string, double>& metrics, double straggle_s) {
    WorkerProgress p;
    p.round = round;
    p.total_rounds = total_rounds;
    p.epoch = epoch;
    p.epochs = epochs;
    if (loss && std::isfinite(*loss) && *loss >= 0) p.loss = loss;
    if (test_acc && *test_acc >= 0 && *test_acc <= 1) p.test_accuracy = test_acc;
    p.bytes_pushed = bytes_up;
    p.bytes_pulled = bytes_down;
    p.skipped_rounds = skipped_rounds;
    p.missed_slices = missed_slices;
    p.straggle_seconds = straggle_s;
    p.metrics = metrics;
    c().Report(p);
  }
  void Close() {
    py::gil_scoped_release nogil;
    c_.reset();
  }

 private:
  NnOps* Ops(Device device) {
    if (!ops_) ops_ = Take(NnOps::Create(device));
    return ops_.get();
  }

  std::unique_ptr<PsClient> c_;
  std::unique_ptr<NnOps> ops_;  // the CUDA scatter of a GPU replica's UPDATEs
  std::vector<uint32_t> update_idx_;
  std::vector<float> update_vals_;
};

py::dict LayoutDict(const ModelLayout& l) {
  py::list segs;
  for (const Segment& s : l.segments) {
    py::dict d;
    d["name"] = s.name;
    d["offset"] = s.offset;
    d["length"] = s.length;
    d["shape"] = s.shape;
    segs.append(d);
  }
  py::dict out;
  out["name"] = l.name;
  out["num_params"] = l.num_params;
  out["segments"] = segs;
  return out;
}

// sieve.Error and sieve.TimeoutError, which Raise throws (their `code`: a StatusCode name;
// `wire_code`: a peer's protocol error code name or None).
void BindErrors(py::module_& m) {
  py::register_exception<SieveError>(m, "Error", PyExc_RuntimeError);
  py::register_exception<SieveTimeout>(m, "TimeoutError", PyExc_TimeoutError);
  m.attr("Error").attr("code") = "UNKNOWN";
  m.attr("TimeoutError").attr("code") = "DEADLINE_EXCEEDED";
  m.attr("Error").attr("wire_code") = py::none();
  m.attr("TimeoutError").attr("wire_code") = py::none();
}

// Selection: the pairs ErrorFeedback.select chose, viewed without copies.
void BindSelection(py::module_& m) {
  py::class_<Selection>(m, "Selection", "The pairs chosen by ErrorFeedback.select (host memory).")
      .def(py::init<>())
      .def_readonly("dim", &Selection::dim)
      .def_readonly("dense", &Selection::dense)
      .def_readonly("threshold", &Selection::threshold)
      .def_readonly("iterations", &Selection::iterations)
      .def_readonly("sumsq_total", &Selection::sumsq_total)
      .def_readonly("sumsq_selected", &Selection::sumsq_selected)
      .def("__len__", &Selection::size)
      .def_property_readonly("size", &Selection::size)
      .def("contraction_ratio", &Selection::ContractionRatio)
      .def_property_readonly(
          "indices",
          [](py::object self) {
            const Selection& s = self.cast<const Selection&>();
            return ArrayView(s.indices.data(), s.indices.size(), self);
          },
          "uint32 view, ascending (empty when dense); valid until the next select/push_pull")
      .def_property_readonly(
          "values",
          [](py::object self) {
            const Selection& s = self.cast<const Selection&>();
            return ArrayView(s.values.data(), s.values.size(), self);
          },
          "float32 view; valid until the next select/push_pull")
      .def("values_sum", [](const Selection& s) {
        double sum = 0;
        for (float v : s.values) sum += v;
        return sum;
      });
}

// ErrorFeedback: momentum, residual and selection on a Device.
void BindErrorFeedback(py::module_& m) {
  py::class_<PyErrorFeedback>(m, "ErrorFeedback",
                              "Momentum m and residual r of length d in cpu or cuda memory.")
      .def(py::init<size_t, const std::string&>(), py::arg("d"), py::arg("device") = "cpu")
      .def_property_readonly("dim", &PyErrorFeedback::dim)
      .def_property_readonly("device", &PyErrorFeedback::device)
      .def("accumulate", &PyErrorFeedback::Accumulate, py::arg("grad"), py::arg("momentum"),
           py::arg("lr"), "m = momentum*m + grad; r += lr*m (grad: float32, length d)")
      .def(
          "select",
          [](PyErrorFeedback& self, const std::string& compressor, uint64_t k, float prev,
             float older, uint64_t seed, Selection* out, const std::string& round_values,
             ThresholdHints* hints, bool mask_momentum) {
            Selection fresh;
            Selection* s = out != nullptr ? out : &fresh;
            self.Select(compressor, k, prev, older, seed, round_values, mask_momentum, hints, s);
            if (out != nullptr) return py::cast(out, py::return_value_policy::reference);
            return py::cast(std::move(fresh));
          },
          py::arg("compressor"), py::arg("k"), py::arg("prev_threshold") = 0.0f,
          py::arg("older_threshold") = 0.0f, py::arg("seed") = 0, py::arg("out") = nullptr,
          py::arg("round_values") = "fp32", py::arg("hints") = nullptr,
          py::arg("mask_momentum") = true,
          "Selects k entries of r (r and m are zeroed there; m is kept with "
          "mask_momentum=False); reuses `out` when given. "
          "round_values='fp16'|'bf16' (what a Client with that wire_values pushes, "
          "Client.push_values): the values are rounded to it and r keeps each rounding error. "
          "hints (a ThresholdHints): the warm start in place of prev_threshold/older_threshold, "
          "and the new threshold kept in it (sieve-worker's carry)")
      .def("read_state", &PyErrorFeedback::ReadState, "(m, r) as NumPy copies")
      .def("write_state", &PyErrorFeedback::WriteState, py::arg("momentum"), py::arg("residual"),
           "Replaces (m, r) with host float32 arrays of length d (a checkpoint's state)");
}

// ThresholdHints and RoundLedger: the per-round bookkeeping sieve-worker's loop does (one C++
// implementation, worker/trainer/round_ledger.h).
void BindLedger(py::module_& m) {
  py::class_<ThresholdHints>(m, "ThresholdHints",
                             "A selection's warm-start hints: the last two finite, > 0 thresholds")
      .def(py::init<>())
      .def("observe", &ThresholdHints::Observe, py::arg("threshold"),
           "Keeps a finite, > 0 threshold as prev (prev becomes older); ignores any other "
           "(ErrorFeedback.select with hints= does it)")
      .def_property(
          "pair", [](const ThresholdHints& h) { return py::make_tuple(h.prev(), h.older()); },
          [](ThresholdHints& h, std::pair<float, float> p) { h.Set(p.first, p.second); },
          "(prev, older); set: restores both (a checkpoint's), unchecked");
  py::class_<RoundLedger>(m, "RoundLedger",
                          "A worker's running totals, as sieve-worker counts them (pass it to "
                          "Client.push_pull as ledger=)")
      .def(py::init<>())
      .def("after_select", &RoundLedger::AfterSelect, py::arg("selection"),
           "Adds the selection's values to pushed_sum (fp64, one by one)")
      .def("add_transfer", &RoundLedger::AddTransfer, py::arg("up"), py::arg("down"),
           "Bytes sent and received outside push_pull (collectives)")
      .def_property_readonly("rounds", &RoundLedger::rounds)
      .def_property_readonly("skipped_rounds", &RoundLedger::skipped_rounds)
      .def_property_readonly("missed_slices", &RoundLedger::missed_slices)
      .def_property_readonly("returned_sum", &RoundLedger::returned_sum)
      .def_property_readonly("bytes_up", &RoundLedger::bytes_up)
      .def_property_readonly("bytes_down", &RoundLedger::bytes_down)
      .def_property_readonly("pairs_up", &RoundLedger::pairs_up)
      .def_property_readonly("pushed_sum", &RoundLedger::pushed_sum);
}

// Client: a PsClient whose blocking calls release the GIL.
void BindClient(py::module_& m) {
  const PsClientOptions kClientDefaults;
  py::class_<PyClient>(m, "Client", "A worker of a sieve job (PsClient).")
      // The defaults are PsClientOptions' (sieve-worker's flags' defaults, defined once there;
      // PythonFlagsMatchSieveWorker checks them against sieve.worker.WORKER_FLAGS).
      .def_static("connect", &PyClient::Connect, py::arg("scheduler"), py::arg("num_params"),
                  py::arg("rank") = kClientDefaults.rank,
                  py::arg("bind") = kClientDefaults.bind_host,
                  py::arg("host") = kClientDefaults.advertise_host,
                  py::arg("port") = static_cast<int>(kClientDefaults.port),
                  py::arg("fp16") = kClientDefaults.fp16,
                  py::arg("wire_values") = PrecisionName(kClientDefaults.push_values),
                  py::arg("wire") = kClientDefaults.compact_indices ? "v5" : "v4",
                  py::arg("checksum") = kClientDefaults.checksum,
                  py::arg("heartbeat_interval_ms") =
                      static_cast<int>(kClientDefaults.heartbeat_interval.count()),
                  py::arg("heartbeat_timeout_ms") =
                      static_cast<int>(kClientDefaults.heartbeat_timeout.count()),
                  py::arg("curve_dir") = kClientDefaults.curve_dir,
                  py::arg("job_token") = kClientDefaults.job_token, py::arg("job_token_file") = "",
                  py::arg("curve_key") = kClientDefaults.curve_key)
      .def_property_readonly("rank", [](PyClient& c) { return c.c().rank(); })
      .def_property_readonly("num_params", [](PyClient& c) { return c.c().num_params(); })
      .def_property_readonly(
          "push_values", [](PyClient& c) { return PrecisionName(c.c().push_values()); },
          "The pushes' precision ('fp32', 'fp16', 'bf16'): pass it as ErrorFeedback.select's "
          "round_values so that no rounding error is lost")
      .def_property_readonly("num_workers", [](PyClient& c) { return c.c().num_workers(); })
      .def_property_readonly("num_servers", [](PyClient& c) { return c.c().num_servers(); })
      .def_property_readonly("joined_late", [](PyClient& c) { return c.c().joined_late(); })
      .def_property_readonly(
          "errors_retried", [](PyClient& c) { return c.c().errors_retried(); },
          "ERRORs a forged or corrupted copy of a request could have caused, answered by sending "
          "the request again")
      .def("pull_dense", &PyClient::PullDense, py::arg("weights"), py::arg("timeout_ms") = 120000,
           "Overwrites weights (length D) with the servers' values; returns their round")
      .def("push_pull", &PyClient::PushPull, py::arg("round"), py::arg("selection"),
           py::arg("weights"), py::arg("timeout_ms") = 120000, py::arg("error_feedback") = nullptr,
           py::arg("ledger") = nullptr,
           "Pushes the selection, writes the servers' UPDATEs into weights; returns the stats. "
           "With backup workers (sieve-server --backup_workers) a round may close without this "
           "push: its pairs go back into error_feedback's residual (an error without one), and "
           "stats['rounds_skipped'] rounds that closed without this worker were applied too: "
           "the next round is round + 1 + rounds_skipped. With a RoundLedger the round is "
           "counted in it (sieve-worker's counters) and stats['advance'] is 1 + rounds_skipped")
      .def("start", &PyClient::Start, py::arg("weights"), py::arg("timeout_ms") = 120000,
           "Enters the job (worker 0 offers `weights`, the start barrier, the servers' weights "
           "into `weights`; or the rejoin of a restarted worker); returns first_round etc.")
      .def("barrier", &PyClient::Barrier, py::arg("timeout_ms") = 120000)
      .def("collective", &PyClient::Collective, py::arg("op"), py::arg("values"),
           py::arg("root") = 0, py::arg("timeout_ms") = 120000,
           "A collective of a 1-D float32 array over every live worker, through the scheduler: "
           "'sum' (fp64, rank order) or 'broadcast' of worker `root`'s values; every worker "
           "calls the same collectives in the same order. Returns (values, contributors)")
      .def("join", &PyClient::Join, py::arg("round"), py::arg("timeout_ms") = 120000)
      .def("finish", &PyClient::Finish)
      .def("wait_shutdown", &PyClient::WaitShutdown, py::arg("timeout_ms") = 600000)
      .def("request_stop", &PyClient::RequestStop, py::arg("reason"))
      .def("report", &PyClient::Report, py::arg("round"), py::arg("total_rounds"), py::arg("epoch"),
           py::arg("epochs"), py::arg("loss"), py::arg("test_acc"), py::arg("bytes_up"),
           py::arg("bytes_down"), py::arg("skipped_rounds"), py::arg("missed_slices"),
           py::arg("metrics"), py::arg("straggle_s") = 0.0,
           "This worker's part of the job's status: sent on the next heartbeat and with FINISHED")
      .def("close", &PyClient::Close);
}

// The schedules' and the data order's pure functions, as sieve-worker computes them.
void BindSchedules(py::module_& m) {
  m.def(
      "k_for_density", [](double density, uint64_t d) { return KForDensity(density, d); },
      py::arg("density"), py::arg("d"));
  m.def("counter_hash", &CounterHash, py::arg("seed"), py::arg("counter"));
  m.def(
      "parse_compressor",
      [](const std::string& name) {
        return std::string(CompressorName(Take(ParseCompressor(name))));
      },
      py::arg("name"), "Checks a compressor name (ValueError names the valid ones)");
  m.def(
      "partition_range",
      [](int64_t n, int rank, int world) {
        IndexRange r = Take(PartitionRange(n, rank, world));
        return py::make_tuple(r.lo, r.hi);
      },
      py::arg("n"), py::arg("rank"), py::arg("world"));
  m.def(
      "steps_per_epoch",
      [](int64_t n, int world, int batch) { return Take(StepsPerEpoch(n, world, batch)); },
      py::arg("n"), py::arg("world"), py::arg("batch_size"));
  m.def(
      "epoch_batch_order",
      [](int64_t n, int rank, int world, int batch, uint64_t seed, uint64_t epoch) {
        std::vector<int64_t> order = Take(EpochBatchOrder(n, rank, world, batch, seed, epoch));
        const py::ssize_t len = static_cast<py::ssize_t>(order.size());
        return OwnedArray(std::move(order), {len});
      },
      py::arg("n"), py::arg("rank"), py::arg("world"), py::arg("batch_size"), py::arg("seed"),
      py::arg("epoch"), "The global example indices rank visits in epoch (sieve-worker's order)");
  m.def(
      "learning_rate",
      [](uint64_t round, int64_t spe, double lr, std::vector<int> steps, double gamma,
         double warmup) {
        TrainerOptions o;
        o.lr = lr;
        o.lr_steps = std::move(steps);
        o.lr_gamma = gamma;
        o.lr_warmup_epochs = warmup;
        return LearningRate(o, round, spe);
      },
      py::arg("round"), py::arg("steps_per_epoch"), py::arg("lr"), py::arg("lr_steps"),
      py::arg("lr_gamma"), py::arg("lr_warmup_epochs"));
}

// The Fashion-MNIST loader, the models' layouts and initial weights.
void BindDataAndModels(py::module_& m) {
  m.def(
      "load_fashion_mnist",
      [](const std::string& split, const std::string& dir) {
        Dataset d = Take(LoadFashionMnist(split, dir));
        const py::ssize_t n = d.n, ex = d.example_size();
        return py::make_tuple(OwnedArray(std::move(d.images), {n, ex}),
                              OwnedArray(std::move(d.labels), {n}));
      },
      py::arg("split"), py::arg("dir") = std::string(kFashionMnistDir),
      "(images float32 [n, 784] normalized as sieve-worker does, labels uint8 [n])");
  m.def(
      "model_layout",
      [](const std::string& name, uint64_t num_params) {
        return LayoutDict(Take(MakeModelLayout(name, num_params)));
      },
      py::arg("model"), py::arg("num_params") = 0);
  m.def(
      "init_params",
      [](const std::string& name, uint64_t seed, uint64_t num_params) {
        ModelLayout l = Take(MakeModelLayout(name, num_params));
        const py::ssize_t n = static_cast<py::ssize_t>(l.num_params);
        return OwnedArray(InitParams(l, seed), {n});
      },
      py::arg("model"), py::arg("seed") = 1, py::arg("num_params") = 0,
      "The initial weights servers start from for (model, seed)");
}

// The per-round metrics and their JSON lines writer (--metrics_out).
void BindMetrics(py::module_& m) {
  py::class_<RoundMetrics>(m, "RoundMetrics")
      .def(py::init<>())
      .def_readwrite("round", &RoundMetrics::round)
      .def_readwrite("epoch", &RoundMetrics::epoch)
      .def_readwrite("loss", &RoundMetrics::loss)
      .def_readwrite("train_acc", &RoundMetrics::train_acc)
      .def_readwrite("test_acc", &RoundMetrics::test_acc)
      .def_readwrite("selected", &RoundMetrics::selected)
      .def_readwrite("k", &RoundMetrics::k)
      .def_readwrite("density", &RoundMetrics::density)
      .def_readwrite("threshold", &RoundMetrics::threshold)
      .def_readwrite("iterations", &RoundMetrics::iterations)
      .def_readwrite("bytes_up", &RoundMetrics::bytes_up)
      .def_readwrite("bytes_down", &RoundMetrics::bytes_down)
      .def_readwrite("dense_bytes", &RoundMetrics::dense_bytes)
      .def_readwrite("t_compute", &RoundMetrics::t_compute)
      .def_readwrite("t_select", &RoundMetrics::t_select)
      .def_readwrite("t_comm", &RoundMetrics::t_comm)
      .def_readwrite("t_wall", &RoundMetrics::t_wall)
      .def_readwrite("t_straggle", &RoundMetrics::t_straggle)
      .def_readwrite("has_contraction", &RoundMetrics::has_contraction)
      .def_readwrite("contraction", &RoundMetrics::contraction)
      .def_readwrite("bound_1", &RoundMetrics::bound_1)
      .def_readwrite("bound_2", &RoundMetrics::bound_2)
      .def("set_contraction", &RoundMetrics::SetContraction, py::arg("sumsq_total"),
           py::arg("sumsq_selected"), py::arg("k"), py::arg("d"),
           "has_contraction, contraction and its bounds 1 - k/d, (1 - k/d)^2 from the round's "
           "sums of squares over D and over the selected entries (as sieve-worker)")
      .def("to_json", [](const RoundMetrics& r) { return FormatMetricsJson(r); });

  py::class_<MetricsWriter>(m, "MetricsWriter", "sieve-worker's --metrics_out JSON lines")
      .def(py::init<>())
      .def("open", [](MetricsWriter& w, const std::string& path) { Check(w.Open(path)); })
      .def_property_readonly("is_open", &MetricsWriter::is_open)
      .def("write", [](MetricsWriter& w, const RoundMetrics& r) { Check(w.Write(r)); })
      .def("close", [](MetricsWriter& w) { Check(w.Close()); });
  m.def("expand_rank_pattern", &ExpandRankPattern, py::arg("path"), py::arg("rank"));
}

// An emulated straggler (--straggler, worker/trainer/straggler.h), as sieve-worker stalls.
void BindStraggler(py::module_& m) {
  py::class_<Straggler>(m, "Straggler",
                        "This worker's part of a --straggler plan: stall(round, measured_s) "
                        "sleeps for the extra compute time of the round and returns it")
      .def(py::init([](const std::string& plan, int rank, int num_workers, uint64_t seed) {
             StragglerPlan p = Take(ParseStragglerPlan(plan));
             Check(p.CheckRanks(num_workers));
             return Straggler(p.ForRank(rank), seed, rank);
           }),
           py::arg("plan"), py::arg("rank"), py::arg("num_workers"), py::arg("seed"),
           "ValueError names a bad item or a rank the job does not have")
      .def_property_readonly("active", [](const Straggler& s) { return s.spec().active(); })
      .def_property_readonly("text", [](const Straggler& s) { return s.spec().text; })
      .def("extra_seconds", &Straggler::ExtraSeconds, py::arg("round"), py::arg("measured_s"))
      .def(
          "stall",
          [](const Straggler& s, uint64_t round, double measured_s) {
            py::gil_scoped_release nogil;
            return s.Stall(round, measured_s);
          },
          py::arg("round"), py::arg("measured_s"));
}

// The end-of-run summary line (and file) and the progress line `sieve launch` reads.
void BindSummaryLines(py::module_& m) {
  m.def(
      "worker_summary",
      [](int rank, uint64_t rounds, uint64_t first_round, uint64_t epochs,
         std::optional<double> test_acc, double loss, uint64_t bytes_up, uint64_t bytes_down,
         uint64_t dense_bytes, double seconds, double pushed_sum, uint64_t skipped_rounds,
         uint64_t missed_slices, double returned_sum, double max_pushpull_s,
         std::vector<std::pair<std::string, double>> metrics, const std::string& summary_out,
         const std::string& straggler, double straggle_s, uint64_t errors_retried) {
        TrainSummary s;
        s.rank = rank;
        s.rounds = rounds;
        s.first_round = first_round;
        s.epochs = epochs;
        s.test_acc = test_acc;
        s.loss = loss;
        s.bytes_up = bytes_up;
        s.bytes_down = bytes_down;
        s.dense_bytes = dense_bytes;
        s.seconds = seconds;
        s.pushed_sum = pushed_sum;
        s.skipped_rounds = skipped_rounds;
        s.missed_slices = missed_slices;
        s.returned_sum = returned_sum;
        s.max_pushpull_s = max_pushpull_s;
        s.metrics = std::move(metrics);
        s.straggler = straggler;
        s.straggle_seconds = straggle_s;
        s.errors_retried = errors_retried;
        const SummaryRecord record = WorkerSummaryRecord(s);
        if (!summary_out.empty()) Check(WriteSummaryFile(summary_out, "worker", rank, record));
        return record.Line(kSummaryPrefix);
      },
      py::arg("rank"), py::arg("rounds"), py::arg("first_round"), py::arg("epochs"),
      py::arg("test_acc"), py::arg("loss"), py::arg("bytes_up"), py::arg("bytes_down"),
      py::arg("dense_bytes"), py::arg("seconds"), py::arg("pushed_sum") = 0.0,
      py::arg("skipped_rounds") = 0, py::arg("missed_slices") = 0, py::arg("returned_sum") = 0.0,
      py::arg("max_pushpull_s") = 0.0,
      py::arg("metrics") = std::vector<std::pair<std::string, double>>{},
      py::arg("summary_out") = "", py::arg("straggler") = "", py::arg("straggle_s") = 0.0,
      py::arg("errors_retried") = 0,
      "sieve-worker's end-of-run summary line; with summary_out, also its JSON file there "
      "({role} = worker, {rank} expanded)");
  m.def(
      "format_progress_line",
      [](uint64_t epoch, uint64_t epochs, uint64_t round, uint64_t rounds, double loss,
         uint64_t bytes_up) {
        return FormatProgressLine(ProgressPoint{epoch, epochs, round, rounds, loss, bytes_up});
      },
      py::arg("epoch"), py::arg("epochs"), py::arg("round"), py::arg("rounds"), py::arg("loss"),
      py::arg("bytes_up"), "The progress line `sieve launch` reads from a worker's stdout");
}

}  // namespace
}  // namespace sieve

PYBIND11_MODULE(_core, m) {
  using namespace sieve;
  m.doc() = "sieve's C++ core: push/pull client, error feedback and selection (docs/worker-api.md)";
  BindErrors(m);
  m.attr("cuda_compiled") = CudaBackendCompiled();
  // The client logs through glog (node events, a job's end): to stderr, like the daemons.
  if (!google::IsGoogleLoggingInitialized()) {
    FLAGS_logtostderr = true;
    google::InitGoogleLogging("sieve-python");
  }
  BindSelection(m);
  BindErrorFeedback(m);
  BindLedger(m);
  BindClient(m);
  BindSchedules(m);
  BindStraggler(m);
  BindDataAndModels(m);
  BindMetrics(m);
  BindSummaryLines(m);
}
