// The job status's text forms (proto/job_status_text.h): JSON both ways, the Prometheus series and
// the one-line brief.
#include "proto/job_status_text.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <utility>

namespace sieve {
namespace {

using google::protobuf::util::MessageDifferencer;

// A status with every kind of field set: strings, a fixed64 above 2^53, enums, nested messages,
// repeated messages and integers, maps of both messages, and the optional values.
pb::JobStatus Full() {
  pb::JobStatus st;
  st.set_job("mnist-4x2");
  st.set_instance(0xfedcba9876543210ull);
  st.set_phase(pb::JOB_FAILED);
  pb::JobFailure* f = st.mutable_failure();
  f->set_node_id(1);
  f->set_role(pb::ROLE_SERVER);
  f->set_rank(0);
  f->set_code("UNAVAILABLE");
  f->set_message("server 0 died and did not restart within 60000 ms");
  st.set_num_servers(2);
  st.set_num_workers(2);
  st.set_servers_registered(2);
  st.set_workers_registered(2);
  st.set_num_params(7850);
  st.set_scheduler("10.0.0.1:9000");
  st.set_elapsed_seconds(21.25);
  pb::JobProgress* p = st.mutable_progress();
  p->set_round(1875);
  p->set_total_rounds(3750);
  p->set_epoch(3);
  p->set_epochs(6);
  p->set_rounds_per_second(62.5);
  p->set_loss(0.3125);
  p->set_test_accuracy(0.875);
  p->set_bytes_pushed(12345678901234ull);
  p->set_bytes_pulled(42);
  p->set_eta_seconds(30.0);
  (*p->mutable_metrics())["f1"] = 0.5;
  (*p->mutable_metrics())["val.loss"] = 0.75;
  pb::JobNode* s = st.add_nodes();
  s->set_id(1);
  s->set_role(pb::ROLE_SERVER);
  s->set_rank(0);
  s->set_address("10.0.0.2:9100");
  s->set_state(pb::NODE_LOST);
  s->set_heartbeat_age_ms(10500);
  s->set_restarts(2);
  s->set_lost_reason("no heartbeat for 10000 ms");
  s->mutable_server()->set_rounds(1875);
  s->mutable_server()->set_pushes_applied(3750);
  s->mutable_server()->set_rejected(3);
  s->mutable_server()->set_duplicates(4);
  s->add_primary_shards(0);
  s->add_backup_shards(1);
  pb::JobNode* w = st.add_nodes();
  w->set_id(3);
  w->set_role(pb::ROLE_WORKER);
  w->set_rank(0);
  w->set_address("10.0.0.3:9200");
  w->set_state(pb::NODE_FINISHED);
  w->set_heartbeat_age_ms(20);
  pb::WorkerReport* r = w->mutable_worker();
  r->set_round(1875);
  r->set_total_rounds(3750);
  r->set_epoch(3);
  r->set_epochs(6);
  r->set_loss(0.25f);
  r->set_test_accuracy(0.5f);
  r->set_bytes_pushed(1000);
  r->set_bytes_pulled(2000);
  r->set_skipped_rounds(5);
  r->set_missed_slices(6);
  r->set_straggle_seconds(1.5f);
  (*r->mutable_metrics())["f1"] = 0.5;
  st.set_replication(1);
  st.set_min_workers(1);
  st.set_workers_finished(1);
  st.set_reports_refused(3);
  st.set_heartbeats(987654321);
  return st;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(JobStatusJsonTest, RoundTripKeepsEveryField) {
  const pb::JobStatus st = Full();
  const std::string json = JobStatusToJson(st);
  StatusOr<pb::JobStatus> back = JobStatusFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << json;
  EXPECT_TRUE(MessageDifferencer::Equals(*back, st)) << json << "\n" << back->DebugString();
}

TEST(JobStatusJsonTest, SnakeCaseNamesEnumNamesAnd64BitStrings) {
  const std::string json = JobStatusToJson(Full());
  EXPECT_TRUE(Contains(json, "\"phase\": \"JOB_FAILED\"")) << json;
  EXPECT_TRUE(Contains(json, "\"state\": \"NODE_FINISHED\"")) << json;
  EXPECT_TRUE(Contains(json, "\"role\": \"ROLE_SERVER\"")) << json;
  EXPECT_TRUE(Contains(json, "\"workers_registered\": 2")) << json;
  EXPECT_TRUE(Contains(json, "\"heartbeat_age_ms\": \"10500\"")) << json;
  EXPECT_TRUE(Contains(json, "\"lost_reason\": \"no heartbeat for 10000 ms\"")) << json;
  // 64-bit integers as strings: 0xfedcba9876543210 = 18364758544493064720.
  EXPECT_TRUE(Contains(json, "\"instance\": \"18364758544493064720\"")) << json;
  EXPECT_TRUE(Contains(json, "\"bytes_pushed\": \"12345678901234\"")) << json;
  EXPECT_TRUE(Contains(json, "\"primary_shards\": [")) << json;
  EXPECT_FALSE(Contains(json, "workersRegistered")) << json;
  EXPECT_FALSE(Contains(json, "heartbeatAgeMs")) << json;
  // One object, indented.
  ASSERT_FALSE(json.empty());
  EXPECT_EQ(json.front(), '{');
  EXPECT_TRUE(Contains(json, "\n ")) << json;
}

TEST(JobStatusJsonTest, ZeroFieldsArePresentAndUnsetOptionalsAreNot) {
  pb::JobStatus st;
  st.set_phase(pb::JOB_FORMING);
  st.mutable_progress();  // an empty progress: every optional value unset
  const std::string json = JobStatusToJson(st);
  EXPECT_TRUE(Contains(json, "\"job\": \"\"")) << json;
  EXPECT_TRUE(Contains(json, "\"phase\": \"JOB_FORMING\"")) << json;
  EXPECT_TRUE(Contains(json, "\"workers_registered\": 0")) << json;
  EXPECT_TRUE(Contains(json, "\"servers_registered\": 0")) << json;
  EXPECT_TRUE(Contains(json, "\"heartbeats\": \"0\"")) << json;
  EXPECT_TRUE(Contains(json, "\"elapsed_seconds\": 0")) << json;
  EXPECT_TRUE(Contains(json, "\"nodes\": []")) << json;
  EXPECT_TRUE(Contains(json, "\"round\": \"0\"")) << json;
  EXPECT_TRUE(Contains(json, "\"rounds_per_second\": 0")) << json;
  EXPECT_TRUE(Contains(json, "\"metrics\": {}")) << json;
  EXPECT_FALSE(Contains(json, "\"loss\"")) << json;
  EXPECT_FALSE(Contains(json, "\"test_accuracy\"")) << json;
  EXPECT_FALSE(Contains(json, "\"eta_seconds\"")) << json;
  StatusOr<pb::JobStatus> back = JobStatusFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->progress().has_loss());
  EXPECT_FALSE(back->progress().has_eta_seconds());
  EXPECT_TRUE(MessageDifferencer::Equals(*back, st)) << back->DebugString();
}

// A worker row without a loss yet keeps it unset through the round trip, one with loss 0 keeps a
// present zero.
TEST(JobStatusJsonTest, OptionalZeroDiffersFromUnset) {
  pb::JobStatus st;
  pb::JobNode* a = st.add_nodes();
  a->mutable_worker()->set_round(1);
  pb::JobNode* b = st.add_nodes();
  b->mutable_worker()->set_loss(0.0f);
  StatusOr<pb::JobStatus> back = JobStatusFromJson(JobStatusToJson(st));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->nodes_size(), 2);
  EXPECT_FALSE(back->nodes(0).worker().has_loss());
  EXPECT_TRUE(back->nodes(1).worker().has_loss());
  EXPECT_EQ(back->nodes(1).worker().loss(), 0.0f);
}

TEST(JobStatusJsonTest, GarbageIsInvalidArgument) {
  for (const std::string bad :
       {"", "not json", "{", "[1, 2]", "{\"phase\": 3.5}", "{\"num_workers\": \"x\"}"}) {
    StatusOr<pb::JobStatus> got = JobStatusFromJson(bad);
    EXPECT_FALSE(got.ok()) << bad;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(JobStatusJsonTest, TruncatedJsonIsInvalidArgument) {
  const std::string json = JobStatusToJson(Full());
  for (size_t n : {json.size() / 4, json.size() / 2, json.size() - 2}) {
    StatusOr<pb::JobStatus> got = JobStatusFromJson(json.substr(0, n));
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << json.substr(0, n);
  }
}

TEST(JobStatusJsonTest, UnknownFieldsAreIgnored) {
  const std::string json =
      "{\"job\": \"j\", \"from_the_future\": {\"x\": [1, 2]}, \"workers_registered\": 3,"
      " \"progress\": {\"round\": \"7\", \"new_thing\": true}, \"nodes\": [{\"id\": 4,"
      " \"shiny\": \"yes\"}]}";
  StatusOr<pb::JobStatus> got = JobStatusFromJson(json);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  pb::JobStatus want;
  want.set_job("j");
  want.set_workers_registered(3);
  want.mutable_progress()->set_round(7);
  want.add_nodes()->set_id(4);
  EXPECT_TRUE(MessageDifferencer::Equals(*got, want)) << got->DebugString();
}

// The Prometheus text, parsed: sample name -> (sorted labels -> value), and the names that have
// a # HELP and a # TYPE line.
struct Exposition {
  std::map<std::string, std::map<std::map<std::string, std::string>, double>> samples;
  std::map<std::string, int> help;
  std::map<std::string, std::string> type;

  bool Has(const std::string& name) const { return samples.count(name) > 0; }
  // The value of `name` with exactly `labels`; NaN-free sentinel -1 when absent (never a value).
  double Value(const std::string& name, const std::map<std::string, std::string>& labels) const {
    auto it = samples.find(name);
    if (it == samples.end()) return -1;
    auto v = it->second.find(labels);
    return v == it->second.end() ? -1 : v->second;
  }
};

// Parses `name{k="v",...} value` lines and # HELP / # TYPE lines; fails the test on anything else.
Exposition Parse(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0) {
      const std::string rest = line.substr(7);
      ++e.help[rest.substr(0, rest.find(' '))];
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      const size_t sp = rest.find(' ');
      e.type[rest.substr(0, sp)] = sp == std::string::npos ? "" : rest.substr(sp + 1);
      continue;
    }
    const size_t brace = line.find('{');
    const size_t close = line.find("} ");
    EXPECT_NE(brace, std::string::npos) << line;
    EXPECT_NE(close, std::string::npos) << line;
    if (brace == std::string::npos || close == std::string::npos) continue;
    const std::string name = line.substr(0, brace);
    std::map<std::string, std::string> labels;
    std::string body = line.substr(brace + 1, close - brace - 1);
    while (!body.empty()) {
      const size_t eq = body.find("=\"");
      const size_t end = body.find('"', eq + 2);
      EXPECT_TRUE(eq != std::string::npos && end != std::string::npos) << line;
      if (eq == std::string::npos || end == std::string::npos) break;
      labels[body.substr(0, eq)] = body.substr(eq + 2, end - eq - 2);
      body = body.substr(end + 1);
      if (!body.empty() && body[0] == ',') body = body.substr(1);
    }
    EXPECT_EQ(e.samples[name].count(labels), 0u) << "duplicate sample: " << line;
    e.samples[name][labels] = std::stod(line.substr(close + 2));
  }
  return e;
}

using Labels = std::map<std::string, std::string>;

Labels Role() { return {{"role", "scheduler"}}; }
Labels With(const std::string& key, const std::string& value) {
  Labels l = Role();
  l[key] = value;
  return l;
}

pb::JobStatus Running() {
  pb::JobStatus st;
  st.set_phase(pb::JOB_RUNNING);
  st.set_num_servers(1);
  st.set_num_workers(4);
  st.mutable_progress()->set_round(42);
  st.mutable_progress()->set_total_rounds(100);
  st.mutable_progress()->set_rounds_per_second(2.5);
  st.mutable_progress()->set_bytes_pushed(4096);
  auto add = [&](pb::Role role, pb::NodeState state) {
    pb::JobNode* n = st.add_nodes();
    n->set_role(role);
    n->set_state(state);
  };
  add(pb::ROLE_SERVER, pb::NODE_ALIVE);
  add(pb::ROLE_WORKER, pb::NODE_ALIVE);
  add(pb::ROLE_WORKER, pb::NODE_LOST);
  add(pb::ROLE_WORKER, pb::NODE_LOST);
  add(pb::ROLE_WORKER, pb::NODE_FINISHED);
  return st;
}

TEST(JobStatusSeriesTest, PhaseRoundAndNodeCounts) {
  const Exposition e = Parse(JobStatusSeries(Running()));
  EXPECT_EQ(e.Value("sieve_job_phase", With("phase", "running")), 1);
  EXPECT_EQ(e.Value("sieve_job_phase", With("phase", "forming")), 0);
  EXPECT_EQ(e.Value("sieve_job_phase", With("phase", "finished")), 0);
  EXPECT_EQ(e.Value("sieve_job_phase", With("phase", "failed")), 0);
  ASSERT_TRUE(e.Has("sieve_job_phase"));
  EXPECT_EQ(e.samples.at("sieve_job_phase").size(), 4u);
  EXPECT_EQ(e.Value("sieve_job_round", Role()), 42);
  EXPECT_EQ(e.Value("sieve_job_total_rounds", Role()), 100);
  EXPECT_EQ(e.Value("sieve_job_rounds_per_second", Role()), 2.5);
  EXPECT_EQ(e.Value("sieve_job_bytes_pushed", Role()), 4096);
  EXPECT_EQ(e.Value("sieve_job_workers", With("state", "lost")), 2);
  EXPECT_EQ(e.Value("sieve_job_workers", With("state", "alive")), 1);
  EXPECT_EQ(e.Value("sieve_job_workers", With("state", "finished")), 1);
  EXPECT_EQ(e.Value("sieve_job_workers", With("state", "registered")), 0);
  EXPECT_EQ(e.Value("sieve_job_workers", With("state", "rejoined")), 0);
  EXPECT_EQ(e.Value("sieve_job_servers", With("state", "alive")), 1);
  EXPECT_EQ(e.Value("sieve_job_servers", With("state", "lost")), 0);
  // Unknown loss and accuracy: no series at all.
  EXPECT_FALSE(e.Has("sieve_job_loss"));
  EXPECT_FALSE(e.Has("sieve_job_test_accuracy"));
  EXPECT_EQ(e.help.count("sieve_job_loss"), 0u);
  EXPECT_EQ(e.type.count("sieve_job_loss"), 0u);
}

TEST(JobStatusSeriesTest, EverySeriesHasHelpTypeAndTheSchedulerRole) {
  pb::JobStatus st = Running();
  st.mutable_progress()->set_loss(0.5);
  st.mutable_progress()->set_test_accuracy(0.75);
  const Exposition e = Parse(JobStatusSeries(st));
  EXPECT_EQ(e.Value("sieve_job_loss", Role()), 0.5);
  EXPECT_EQ(e.Value("sieve_job_test_accuracy", Role()), 0.75);
  for (const char* name :
       {"sieve_job_phase", "sieve_job_round", "sieve_job_total_rounds",
        "sieve_job_rounds_per_second", "sieve_job_loss", "sieve_job_test_accuracy",
        "sieve_job_bytes_pushed", "sieve_job_workers", "sieve_job_servers"}) {
    EXPECT_TRUE(e.Has(name)) << name;
    EXPECT_EQ(e.help.count(name), 1u) << name;
    ASSERT_EQ(e.type.count(name), 1u) << name;
    EXPECT_EQ(e.type.at(name), "gauge") << name;
  }
  for (const auto& [name, by_labels] : e.samples) {
    for (const auto& [labels, value] : by_labels) {
      ASSERT_EQ(labels.count("role"), 1u) << name;
      EXPECT_EQ(labels.at("role"), "scheduler") << name;
    }
  }
}

TEST(JobStatusSeriesTest, FinishedPhase) {
  pb::JobStatus st = Running();
  st.set_phase(pb::JOB_FINISHED);
  const Exposition e = Parse(JobStatusSeries(st));
  EXPECT_EQ(e.Value("sieve_job_phase", With("phase", "finished")), 1);
  EXPECT_EQ(e.Value("sieve_job_phase", With("phase", "running")), 0);
}

TEST(JobStatusBriefTest, FinishedJob) {
  pb::JobStatus st;
  st.set_phase(pb::JOB_FINISHED);
  st.set_num_workers(4);
  st.set_workers_finished(4);
  st.set_elapsed_seconds(21.3);
  st.mutable_progress()->set_round(1875);
  st.mutable_progress()->set_total_rounds(1875);
  st.mutable_progress()->set_loss(0.312);
  st.mutable_progress()->set_test_accuracy(0.8512);
  EXPECT_EQ(JobStatusBrief(st),
            "phase=FINISHED rounds=1875/1875 loss=0.3120 test_acc=0.8512 workers=4/4 finished "
            "time=21.3s");
}

TEST(JobStatusBriefTest, FailedJobWithoutLossOrAccuracy) {
  pb::JobStatus st;
  st.set_phase(pb::JOB_FAILED);
  st.set_num_workers(2);
  st.set_workers_finished(1);
  st.set_elapsed_seconds(7.5);
  st.mutable_progress()->set_round(40);
  st.mutable_progress()->set_total_rounds(100);
  pb::JobFailure* f = st.mutable_failure();
  f->set_node_id(1);
  f->set_role(pb::ROLE_SERVER);
  f->set_rank(0);
  f->set_code("UNAVAILABLE");
  f->set_message("server 0 died");
  EXPECT_EQ(JobStatusBrief(st),
            "phase=FAILED rounds=40/100 workers=1/2 finished time=7.5s failure=UNAVAILABLE "
            "node=server 0: server 0 died");
}

TEST(JobStatusBriefTest, FailedByAWorker) {
  pb::JobStatus st;
  st.set_phase(pb::JOB_FAILED);
  st.set_num_workers(3);
  st.set_elapsed_seconds(2.0);
  st.mutable_progress()->set_round(9);
  st.mutable_progress()->set_loss(1.5);
  pb::JobFailure* f = st.mutable_failure();
  f->set_node_id(5);
  f->set_role(pb::ROLE_WORKER);
  f->set_rank(2);
  f->set_code("INTERNAL");
  f->set_message("boom");
  EXPECT_EQ(JobStatusBrief(st),
            "phase=FAILED rounds=9 loss=1.5000 workers=0/3 finished time=2.0s failure=INTERNAL "
            "node=worker 2: boom");
}

TEST(JobStatusBriefTest, AtMost1024Bytes) {
  pb::JobStatus st;
  st.set_phase(pb::JOB_FAILED);
  st.mutable_failure()->set_node_id(-1);
  st.mutable_failure()->set_code("ABORTED");
  st.mutable_failure()->set_message(std::string(5000, 'x'));
  const std::string brief = JobStatusBrief(st);
  EXPECT_EQ(brief.size(), 1024u);
  EXPECT_EQ(brief.rfind("phase=FAILED rounds=0 workers=0/0 finished time=0.0s failure=ABORTED", 0),
            0u)
      << brief;
}

TEST(JobStatusNamesTest, NamesWithoutPrefix) {
  EXPECT_EQ(PhaseName(pb::JOB_FORMING), "FORMING");
  EXPECT_EQ(PhaseName(pb::JOB_RUNNING), "RUNNING");
  EXPECT_EQ(PhaseName(pb::JOB_FINISHED), "FINISHED");
  EXPECT_EQ(PhaseName(pb::JOB_FAILED), "FAILED");
  EXPECT_EQ(NodeStateName(pb::NODE_ALIVE), "ALIVE");
  EXPECT_EQ(NodeStateName(pb::NODE_LOST), "LOST");
  EXPECT_EQ(NodeStateName(pb::NODE_PROMOTED), "PROMOTED");
  EXPECT_EQ(NodeStateName(pb::NODE_FINISHED), "FINISHED");
}

}  // namespace
}  // namespace sieve
