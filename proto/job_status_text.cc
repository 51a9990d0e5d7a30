#include "proto/job_status_text.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <map>

namespace sieve {
namespace {

std::string Number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

void Series(std::string* out, const char* name, const char* type, const char* help) {
  out->append("# HELP ").append(name).append(" ").append(help);
  out->append("\n# TYPE ").append(name).append(" ").append(type).append("\n");
}

void Sample(std::string* out, const char* name, const std::string& labels, double v) {
  out->append(name).append("{role=\"scheduler\"").append(labels).append("} ");
  out->append(Number(v)).append("\n");
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

}  // namespace

std::string PhaseName(pb::JobPhase phase) {
  std::string name = pb::JobPhase_Name(phase);
  return name.starts_with("JOB_") ? name.substr(4) : name;
}

std::string NodeStateName(pb::NodeState state) {
  std::string name = pb::NodeState_Name(state);
  return name.starts_with("NODE_") ? name.substr(5) : name;
}

std::string JobStatusToJson(const pb::JobStatus& status) {
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.always_print_primitive_fields = true;
  o.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(status, &out, o);  // fails only on Any
  return out;
}

StatusOr<pb::JobStatus> JobStatusFromJson(std::string_view json) {
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  pb::JobStatus status;
  auto s = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &status, o);
  if (!s.ok()) return InvalidArgumentError("not a job status: " + s.ToString());
  return status;
}

std::string JobStatusSeries(const pb::JobStatus& st) {
  std::string out;
  Series(&out, "sieve_job_phase", "gauge",
         "1 for the job's phase (forming, running, finished, failed)");
  for (pb::JobPhase p : {pb::JOB_FORMING, pb::JOB_RUNNING, pb::JOB_FINISHED, pb::JOB_FAILED}) {
    Sample(&out, "sieve_job_phase", ",phase=\"" + Lower(PhaseName(p)) + "\"", st.phase() == p);
  }
  const pb::JobProgress& p = st.progress();
  Series(&out, "sieve_job_round", "gauge", "The slowest live worker's rounds done");
  Sample(&out, "sieve_job_round", "", static_cast<double>(p.round()));
  Series(&out, "sieve_job_total_rounds", "gauge", "Rounds the workers run in all (0 = unknown)");
  Sample(&out, "sieve_job_total_rounds", "", static_cast<double>(p.total_rounds()));
  Series(&out, "sieve_job_rounds_per_second", "gauge",
         "The job's rounds per second over the last 30 s");
  Sample(&out, "sieve_job_rounds_per_second", "", p.rounds_per_second());
  if (p.has_loss()) {
    Series(&out, "sieve_job_loss", "gauge", "The mean of the live workers' last training losses");
    Sample(&out, "sieve_job_loss", "", p.loss());
  }
  if (p.has_test_accuracy()) {
    Series(&out, "sieve_job_test_accuracy", "gauge",
           "The lowest-ranked worker's last test accuracy");
    Sample(&out, "sieve_job_test_accuracy", "", p.test_accuracy());
  }
  Series(&out, "sieve_job_bytes_pushed", "gauge", "Payload bytes every worker process pushed");
  Sample(&out, "sieve_job_bytes_pushed", "", static_cast<double>(p.bytes_pushed()));
  for (pb::Role role : {pb::ROLE_WORKER, pb::ROLE_SERVER}) {
    std::map<pb::NodeState, int> count;
    for (pb::NodeState s : {pb::NODE_REGISTERED, pb::NODE_ALIVE, pb::NODE_LOST, pb::NODE_REJOINED,
                            pb::NODE_RESTARTED, pb::NODE_PROMOTED, pb::NODE_FINISHED}) {
      count[s] = 0;
    }
    for (const pb::JobNode& n : st.nodes()) {
      if (n.role() == role) ++count[n.state()];
    }
    const char* name = role == pb::ROLE_WORKER ? "sieve_job_workers" : "sieve_job_servers";
    Series(&out, name, "gauge", role == pb::ROLE_WORKER ? "Workers by state" : "Servers by state");
    for (const auto& [state, n] : count) {
      if (role == pb::ROLE_SERVER && state == pb::NODE_FINISHED) continue;
      if (role == pb::ROLE_WORKER && state == pb::NODE_PROMOTED) continue;
      Sample(&out, name, ",state=\"" + Lower(NodeStateName(state)) + "\"", n);
    }
  }
  return out;
}

std::string JobStatusBrief(const pb::JobStatus& st) {
  const pb::JobProgress& p = st.progress();
  std::string out = "phase=";
  out.append(PhaseName(st.phase())).append(" rounds=").append(std::to_string(p.round()));
  if (p.total_rounds() > 0) out.append("/").append(std::to_string(p.total_rounds()));
  char buf[64];
  if (p.has_loss()) {
    std::snprintf(buf, sizeof(buf), " loss=%.4f", p.loss());
    out += buf;
  }
  if (p.has_test_accuracy()) {
    std::snprintf(buf, sizeof(buf), " test_acc=%.4f", p.test_accuracy());
    out += buf;
  }
  out.append(" workers=").append(std::to_string(st.workers_finished())).append("/");
  out.append(std::to_string(st.num_workers())).append(" finished");
  std::snprintf(buf, sizeof(buf), " time=%.1fs", st.elapsed_seconds());
  out += buf;
  if (st.foreign_messages() > 0) {
    out.append(" foreign=").append(std::to_string(st.foreign_messages()));
  }
  if (st.impostor_messages() > 0) {
    out.append(" impostors=").append(std::to_string(st.impostor_messages()));
  }
  if (st.phase() == pb::JOB_FAILED) {
    const pb::JobFailure& f = st.failure();
    out.append(" failure=").append(f.code());
    if (f.node_id() >= 0) {
      out.append(f.role() == pb::ROLE_SERVER ? " node=server " : " node=worker ");
      out.append(std::to_string(f.rank()));
    }
    out.append(": ").append(f.message());
  }
  if (out.size() > 1024) out.resize(1024);
  return out;
}

}  // namespace sieve
