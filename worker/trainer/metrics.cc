#include "worker/trainer/metrics.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include "kernels/selection.h"

namespace sieve {
namespace {

void AppendNumber(std::string* out, double v) {
  if (!std::isfinite(v)) {
    *out += "null";
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  *out += buf;
}

void AppendKey(std::string* out, const char* key) {
  if (out->size() > 1) *out += ',';
  *out += '"';
  *out += key;
  *out += "\":";
}

void Field(std::string* out, const char* key, double v) {
  AppendKey(out, key);
  AppendNumber(out, v);
}

void Field(std::string* out, const char* key, uint64_t v) {
  AppendKey(out, key);
  *out += std::to_string(v);
}

void Field(std::string* out, const char* key, const std::optional<double>& v) {
  AppendKey(out, key);
  if (v) {
    AppendNumber(out, *v);
  } else {
    *out += "null";
  }
}

}  // namespace

void RoundMetrics::SetContraction(double sumsq_total, double sumsq_selected, uint64_t k,
                                  uint64_t d) {
  has_contraction = true;
  contraction = ContractionRatio(sumsq_total, sumsq_selected);
  bound_1 = 1.0 - static_cast<double>(k) / static_cast<double>(d);
  bound_2 = bound_1 * bound_1;
}

std::string FormatMetricsJson(const RoundMetrics& m) {
  std::string out = "{";
  Field(&out, "round", m.round);
  Field(&out, "epoch", m.epoch);
  Field(&out, "loss", m.loss);
  Field(&out, "train_acc", m.train_acc);
  Field(&out, "test_acc", m.test_acc);
  Field(&out, "selected", m.selected);
  Field(&out, "k", m.k);
  Field(&out, "density", m.density);
  Field(&out, "threshold", m.threshold);
  AppendKey(&out, "iterations");
  out += std::to_string(m.iterations);
  Field(&out, "bytes_up", m.bytes_up);
  Field(&out, "bytes_down", m.bytes_down);
  Field(&out, "dense_bytes", m.dense_bytes);
  Field(&out, "t_compute", m.t_compute);
  Field(&out, "t_select", m.t_select);
  Field(&out, "t_comm", m.t_comm);
  Field(&out, "t_wall", m.t_wall);
  Field(&out, "t_straggle", m.t_straggle);
  if (m.has_contraction) {
    Field(&out, "contraction", m.contraction);
    Field(&out, "bound_1", m.bound_1);
    Field(&out, "bound_2", m.bound_2);
  }
  if (!m.histogram.empty()) {
    Field(&out, "hist_width", m.histogram_width);
    AppendKey(&out, "hist");
    out += '[';
    for (size_t i = 0; i < m.histogram.size(); ++i) {
      if (i != 0) out += ',';
      out += std::to_string(m.histogram[i]);
    }
    out += ']';
  }
  out += '}';
  return out;
}

MetricsWriter::~MetricsWriter() { (void)Close(); }

Status MetricsWriter::Open(const std::string& path) {
  (void)Close();
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) {
    return UnavailableError("cannot open metrics file " + path + ": " + std::strerror(errno));
  }
  path_ = path;
  return Status::Ok();
}

Status MetricsWriter::Write(const RoundMetrics& m) {
  if (file_ == nullptr) return FailedPreconditionError("metrics file not open");
  std::string line = FormatMetricsJson(m);
  line += '\n';
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    return DataLossError("cannot write metrics file " + path_ + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Status MetricsWriter::Close() {
  if (file_ == nullptr) return Status::Ok();
  const bool ok = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok) return DataLossError("cannot close metrics file " + path_);
  return Status::Ok();
}

}  // namespace sieve
