#include "tests/fault/cluster.h"

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "proto/job_status_text.h"
#include "tests/net/daemon_paths.h"

namespace sieve::testing {

bool HaveFashionMnist() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}
namespace {

using std::chrono::milliseconds;

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

const pb::JobNode* FindNode(const pb::JobStatus& status, pb::Role role, int rank) {
  for (const pb::JobNode& n : status.nodes()) {
    if (n.role() == role && n.rank() == rank) return &n;
  }
  return nullptr;
}

FaultCluster::~FaultCluster() {
  scheduler_.reset();  // kills and reaps what still runs before its files go
  servers_.clear();
  workers_.clear();
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

bool FaultCluster::StartScheduler(int servers, int workers, const std::vector<std::string>& flags) {
  std::string pattern = (std::filesystem::temp_directory_path() / "sieve-fault-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    notes_ += "cluster: cannot create " + pattern + "\n";
    return false;
  }
  dir_ = pattern;
  const std::filesystem::path port_file = dir_ / "scheduler.port";
  std::vector<std::string> argv = LocalSchedulerArgv(servers, workers, port_file);
  argv.push_back("--status_file=" + (dir_ / "status.json").string());
  argv.insert(argv.end(), flags.begin(), flags.end());
  scheduler_ = std::make_unique<Subprocess>(argv);
  // The file is replaced atomically: once there, it is the whole "HOST:PORT\n".
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(10000);
  for (;;) {
    const std::string text = ReadFile(port_file);
    if (!text.empty() && text.back() == '\n') {
      address_ = text.substr(0, text.size() - 1);
      return true;
    }
    // Wait() drains the scheduler's output and paces the poll.
    if (auto st = scheduler_->Wait(milliseconds(20))) {
      notes_ += "cluster: the scheduler exited (wait status " + std::to_string(*st) +
                ") before writing its port file\n";
      return false;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      notes_ += "cluster: the scheduler wrote no port file within 10 s\n";
      return false;
    }
  }
}

Subprocess& FaultCluster::StartServer(int rank, const std::vector<std::string>& flags) {
  return StartDaemon(ServerBinary(), "server", rank, flags, &servers_[rank]);
}

Subprocess& FaultCluster::StartWorker(int rank, const std::vector<std::string>& flags) {
  return StartDaemon(WorkerBinary(), "worker", rank, flags, &workers_[rank]);
}

Subprocess& FaultCluster::StartDaemon(const std::string& binary, std::string_view role, int rank,
                                      const std::vector<std::string>& flags,
                                      std::vector<std::unique_ptr<Subprocess>>* processes) {
  std::vector<std::string> argv = {binary,
                                   "--scheduler=" + address_,
                                   "--bind=127.0.0.1",
                                   "--host=127.0.0.1",
                                   "--rank=" + std::to_string(rank),
                                   "--summary_out=" + SummaryPath(role, rank, processes->size())};
  argv.insert(argv.end(), flags.begin(), flags.end());
  processes->push_back(std::make_unique<Subprocess>(argv));
  return *processes->back();
}

void FaultCluster::Drain() {
  auto drain = [](Subprocess& p) {
    while (p.ReadLine(milliseconds(0))) {
    }
  };
  if (scheduler_) drain(*scheduler_);
  for (auto& [rank, v] : servers_) drain(*v.back());
  for (auto& [rank, v] : workers_) drain(*v.back());
}

bool FaultCluster::WaitAll(milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<Subprocess*> left;
  for (auto& [rank, v] : workers_) left.push_back(v.back().get());
  for (auto& [rank, v] : servers_) left.push_back(v.back().get());
  if (scheduler_) left.push_back(scheduler_.get());
  while (!left.empty()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    Drain();
    for (size_t i = 0; i < left.size();) {
      if (left[i]->Wait(milliseconds(1))) {
        left.erase(left.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  return true;
}

bool FaultCluster::AllExitedZero() {
  std::vector<Subprocess*> all = {scheduler_.get()};
  for (auto& [rank, v] : servers_) all.push_back(v.back().get());
  for (auto& [rank, v] : workers_) all.push_back(v.back().get());
  for (Subprocess* p : all) {
    const std::optional<int> st = p == nullptr ? std::nullopt : p->Wait(milliseconds(1));
    if (!st || !WIFEXITED(*st) || WEXITSTATUS(*st) != 0) return false;
  }
  return true;
}

std::string FaultCluster::SummaryPath(std::string_view role, int rank, size_t process) const {
  return (dir_ / (std::string(role) + "-" + std::to_string(rank) + "." + std::to_string(process) +
                  ".json"))
      .string();
}

KeyValues FaultCluster::ServerSummary(int rank) {
  return ReadSummaryFile(SummaryPath("server", rank, servers_.at(rank).size() - 1));
}

KeyValues FaultCluster::WorkerSummary(int rank) {
  return ReadSummaryFile(SummaryPath("worker", rank, workers_.at(rank).size() - 1));
}

std::vector<KeyValues> FaultCluster::ShardSummaries(int rank) {
  return ReadShardSummaries(SummaryPath("server", rank, servers_.at(rank).size() - 1));
}

std::optional<pb::JobStatus> FaultCluster::JobStatus() const {
  if (dir_.empty()) return std::nullopt;
  const std::string json = ReadFile(dir_ / "status.json");
  if (json.empty()) return std::nullopt;
  auto status = JobStatusFromJson(json);
  if (!status.ok()) return std::nullopt;
  return *std::move(status);
}

std::optional<pb::JobStatus> FaultCluster::WaitForStatus(
    const std::function<bool(const pb::JobStatus&)>& done, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    // Whether the scheduler had exited before this read: then the file is its final status.
    const bool exited = scheduler_ == nullptr || scheduler_->Wait(milliseconds(0)).has_value();
    std::optional<pb::JobStatus> status = JobStatus();
    if (status && done(*status)) return status;
    if (exited) {
      notes_ += "cluster: the scheduler exited before the awaited job status\n";
      return std::nullopt;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      notes_ += "cluster: the awaited job status did not come within " +
                std::to_string(timeout.count()) + " ms\n";
      return std::nullopt;
    }
    Drain();
    (void)scheduler_->Wait(milliseconds(20));  // paces the poll, draining its output
  }
}

bool FaultCluster::WaitForRunning(milliseconds timeout) {
  return WaitForStatus([](const pb::JobStatus& s) { return s.phase() == pb::JOB_RUNNING; }, timeout)
      .has_value();
}

bool FaultCluster::WaitForNodeState(pb::Role role, int rank, pb::NodeState state,
                                    milliseconds timeout) {
  return WaitForStatus(
             [&](const pb::JobStatus& s) {
               const pb::JobNode* n = FindNode(s, role, rank);
               return n != nullptr && n->state() == state;
             },
             timeout)
      .has_value();
}

std::string FaultCluster::Log() const {
  std::string all;
  auto add = [&](const std::string& name, const Subprocess& p) {
    for (const auto& l : p.lines()) all += name + ": " + l + "\n";
  };
  if (scheduler_) add("scheduler", *scheduler_);
  for (const auto& [rank, v] : servers_) {
    for (const auto& p : v) add("server" + std::to_string(rank), *p);
  }
  for (const auto& [rank, v] : workers_) {
    for (const auto& p : v) add("worker" + std::to_string(rank), *p);
  }
  if (dir_.empty()) return all + notes_;
  const std::string status = ReadFile(dir_ / "status.json");
  return all + notes_ + (status.empty() ? "" : "job status: " + status + "\n");
}

}  // namespace sieve::testing
