// A minimal server/worker stand-in on the node runtime, for the net/ integration tests: it
// registers, reports the node table it received, enters barriers, reports node deaths, and (as
// a worker) finishes, then waits for the scheduler's shutdown. Output lines (stdout):
//   table <id> <role> <rank> <digest>     once the node table arrived
//   barrier <n> done                      after the n-th all-node barrier
//   dead <id>                             for every NODE_DEAD heard
//   shutdown ok | failed: <reason>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>

#include "net/node.h"
#include "net/signal_watcher.h"

DEFINE_string(scheduler, "127.0.0.1:9310", "scheduler host:port");
DEFINE_string(role, "worker", "server | worker");
DEFINE_int32(rank, -1, "requested rank");
DEFINE_uint64(num_params, 0, "D declared at registration");
DEFINE_int32(barriers, 1, "all-node barriers to pass");
DEFINE_int32(wait_dead, 0, "after the barriers, wait for this many NODE_DEAD announcements");
DEFINE_int32(heartbeat_interval_ms, 100, "heartbeat interval");
DEFINE_int32(heartbeat_timeout_ms, 3000, "scheduler-loss timeout");

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  sieve::NodeOptions opt;
  opt.role = FLAGS_role == "server" ? sieve::pb::ROLE_SERVER : sieve::pb::ROLE_WORKER;
  opt.rank = FLAGS_rank;
  opt.scheduler = FLAGS_scheduler;
  opt.transport.bind_host = "127.0.0.1";
  opt.num_params = FLAGS_num_params;
  opt.heartbeat_interval = std::chrono::milliseconds(FLAGS_heartbeat_interval_ms);
  opt.heartbeat_timeout = std::chrono::milliseconds(FLAGS_heartbeat_timeout_ms);
  opt.register_retry = std::chrono::milliseconds(200);
  opt.startup_timeout = std::chrono::milliseconds(30000);
  std::mutex mu;
  sieve::Node* node_ptr = nullptr;
  sieve::SignalWatcher signals([&](int) {
    std::lock_guard<std::mutex> lock(mu);
    if (node_ptr) node_ptr->RequestStop("signal");
  });
  auto node = sieve::Node::Start(opt);
  if (!node.ok()) {
    std::printf("start failed: %s\n", node.status().ToString().c_str());
    return 1;
  }
  sieve::Node& n = **node;
  {
    std::lock_guard<std::mutex> lock(mu);
    node_ptr = &n;
  }
  std::string digest;
  for (const auto& e : n.table().nodes()) {
    digest += std::to_string(e.id()) + "/" + std::to_string(e.role()) + "/" +
              std::to_string(e.rank()) + "/" + e.host() + ":" + std::to_string(e.port()) + "/" +
              std::to_string(e.shard_lo()) + "-" + std::to_string(e.shard_hi()) + ";";
  }
  digest += "D=" + std::to_string(n.num_params());
  std::printf("table %d %s %d %zx %s\n", n.id(), FLAGS_role.c_str(), n.rank(),
              std::hash<std::string>{}(digest), digest.c_str());
  std::fflush(stdout);
  std::mutex dead_mu;
  std::condition_variable dead_cv;
  int dead_count = 0;
  n.set_on_node_dead([&](const sieve::pb::NodeDead& d) {
    std::printf("dead %d\n", d.id());
    std::fflush(stdout);
    std::lock_guard<std::mutex> lock(dead_mu);
    ++dead_count;
    dead_cv.notify_all();
  });
  for (int b = 1; b <= FLAGS_barriers; ++b) {
    sieve::Status s = n.Barrier(sieve::kGroupAll, std::chrono::milliseconds(30000));
    if (!s.ok()) {
      std::printf("barrier failed: %s\n", s.ToString().c_str());
      return 1;
    }
    std::printf("barrier %d done\n", b);
    std::fflush(stdout);
  }
  if (FLAGS_wait_dead > 0) {
    std::unique_lock<std::mutex> lock(dead_mu);
    if (!dead_cv.wait_for(lock, std::chrono::seconds(30),
                          [&] { return dead_count >= FLAGS_wait_dead; })) {
      std::printf("no death announced\n");
      return 1;
    }
  }
  if (n.role() == sieve::pb::ROLE_WORKER) (void)n.Finish();
  sieve::Status s = n.WaitShutdown(std::chrono::milliseconds(30000));
  std::printf("shutdown %s\n", s.ok() ? "ok" : ("failed: " + s.ToString()).c_str());
  std::fflush(stdout);
  return s.ok() ? 0 : 1;
}
