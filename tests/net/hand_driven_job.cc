#include "tests/net/hand_driven_job.h"

#include <gtest/gtest.h>

#include <chrono>
#include <span>
#include <string>
#include <utility>

#include "proto/codec.h"
#include "proto/messages.h"
#include "tests/net/daemon_paths.h"
#include "tests/proto/test_util.h"

namespace sieve::testing {

StatusOr<std::unique_ptr<HandDrivenJob>> HandDrivenJob::Start(
    int num_workers, const std::vector<std::string>& server_flags) {
  std::unique_ptr<HandDrivenJob> job(new HandDrivenJob());
  SchedulerOptions so;
  so.num_servers = 1;
  so.num_workers = num_workers;
  so.transport.bind_host = "127.0.0.1";
  so.heartbeat_timeout = std::chrono::milliseconds(0);
  auto s = Scheduler::Create(so);
  if (!s.ok()) return InternalError("scheduler: " + s.status().ToString());
  job->scheduler_ = std::move(s).value();
  Scheduler* sched = job->scheduler_.get();
  job->scheduler_thread_ = std::thread([sched] { (void)sched->Run(); });
  const std::string addr = "127.0.0.1:" + std::to_string(sched->port());
  std::vector<std::string> argv{ServerBinary(),
                                "--scheduler=" + addr,
                                "--bind=127.0.0.1",
                                "--host=127.0.0.1",
                                "--model=softmax",
                                "--seed=3",
                                "--heartbeat_interval_ms=0",
                                "--summary_out=" + job->summary_path()};
  argv.insert(argv.end(), server_flags.begin(), server_flags.end());
  job->server_ = std::make_unique<Subprocess>(std::move(argv));
  job->workers_.resize(num_workers);
  std::vector<Status> errors(num_workers);
  std::vector<std::thread> starting;
  for (int w = 0; w < num_workers; ++w) {
    starting.emplace_back([&, w] {
      NodeOptions no;
      no.role = pb::ROLE_WORKER;
      no.rank = w;
      no.scheduler = addr;
      no.transport.bind_host = "127.0.0.1";
      no.num_params = kNumParams;
      no.heartbeat_interval = std::chrono::milliseconds(0);
      auto n = Node::Start(no);
      if (n.ok()) {
        job->workers_[w] = std::move(n).value();
      } else {
        errors[w] = n.status();
      }
    });
  }
  for (auto& t : starting) t.join();
  for (int w = 0; w < num_workers; ++w) {
    if (!errors[w].ok())
      return InternalError("worker " + std::to_string(w) + ": " + errors[w].ToString());
  }
  return job;
}

HandDrivenJob::~HandDrivenJob() {
  if (!finished_ && server_ != nullptr) {
    const std::optional<int> st = FinishAndWaitForServer();
    EXPECT_TRUE(st.has_value()) << "sieve-server did not exit after the workers finished";
  }
  if (scheduler_ != nullptr) scheduler_->Stop("test over");
  if (scheduler_thread_.joinable()) scheduler_thread_.join();
}

Frames HandDrivenJob::Push(int w, uint64_t round, int shard, std::vector<uint32_t> idx,
                           std::vector<float> val) const {
  auto f = EncodePairs(MakeDataHeader(pb::MSG_PUSH, workers_[w]->id(), kNoRecipient, shard, round),
                       std::move(idx), std::move(val));
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(f).value() : Frames{};
}

Message HandDrivenJob::Next(int w) {
  Message m;
  auto got = workers_[w]->Receive(&m, std::chrono::milliseconds(10000));
  EXPECT_TRUE(got.ok() && *got) << "worker " << w << ": no message in 10 s";
  return m;
}

std::vector<float> HandDrivenJob::PullShard(int w) {
  pb::Header h = MakeDataHeader(pb::MSG_PULL_DENSE, workers_[w]->id(), kNoRecipient, 0, 0);
  for (int attempt = 0; attempt < 20; ++attempt) {
    auto frames = EncodeControl(h);
    EXPECT_TRUE(frames.ok());
    if (!frames.ok()) break;
    EXPECT_TRUE(workers_[w]->Send(1, std::move(frames).value()).ok());
    Message m;
    auto got = workers_[w]->Receive(&m, std::chrono::milliseconds(500 * (attempt + 1)));
    if (!got.ok()) break;
    if (*got) {
      EXPECT_EQ(m.type(), pb::MSG_DENSE);
      return {m.values.begin(), m.values.end()};
    }
  }
  ADD_FAILURE() << "worker " << w << ": no DENSE reply after 20 pulls";
  return {};
}

std::optional<int> HandDrivenJob::FinishAndWaitForServer() {
  finished_ = true;
  for (auto& n : workers_) {
    if (n != nullptr) {
      EXPECT_TRUE(n->Finish().ok());
    }
  }
  return server_->Wait(std::chrono::seconds(20));
}

KeyValues HandDrivenJob::ServerSummary() const { return ReadSummaryFile(summary_path()); }

}  // namespace sieve::testing
