#include "tests/fault/cluster.h"

#include <sys/wait.h>

#include <filesystem>
#include <optional>
#include <sstream>

#include "tests/net/daemon_paths.h"

namespace sieve::testing {

bool HaveFashionMnist() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}
namespace {

using std::chrono::milliseconds;

KeyValues Summary(Subprocess& p, const std::string& marker) {
  for (const std::string& line : p.lines()) {
    if (line.find(marker) != std::string::npos) return ParseSummary(line, marker);
  }
  return {};
}

}  // namespace

bool FaultCluster::StartScheduler(int servers, int workers, const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {SchedulerBinary(),
                                   "--port=0",
                                   "--bind=127.0.0.1",
                                   "--host=127.0.0.1",
                                   "--num_servers=" + std::to_string(servers),
                                   "--num_workers=" + std::to_string(workers)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  scheduler_ = std::make_unique<Subprocess>(argv);
  auto line = scheduler_->WaitFor("listening on ", milliseconds(10000));
  if (!line) return false;
  address_ = line->substr(line->find("listening on ") + 13);
  return true;
}

Subprocess& FaultCluster::StartServer(int rank, const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {ServerBinary(), "--scheduler=" + address_, "--bind=127.0.0.1",
                                   "--host=127.0.0.1", "--rank=" + std::to_string(rank)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  servers_[rank].push_back(std::make_unique<Subprocess>(argv));
  return *servers_[rank].back();
}

Subprocess& FaultCluster::StartWorker(int rank, const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {WorkerBinary(), "--scheduler=" + address_, "--bind=127.0.0.1",
                                   "--host=127.0.0.1", "--rank=" + std::to_string(rank)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  workers_[rank].push_back(std::make_unique<Subprocess>(argv));
  return *workers_[rank].back();
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

KeyValues FaultCluster::ServerSummary(int rank) {
  return Summary(server(rank), "sieve-server summary: ");
}

KeyValues FaultCluster::WorkerSummary(int rank) {
  return Summary(worker(rank), "sieve-worker summary: ");
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
  return all;
}

}  // namespace sieve::testing
