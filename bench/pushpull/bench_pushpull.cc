// Push/pull benchmark: the path a worker sees — PsClient::PushPull → sieve-server → UPDATE
// applied to the replica — through real daemons (sieve-scheduler and S sieve-server processes on
// loopback, --model=synthetic), against raw ZeroMQ moving the same bytes up and down with the
// same socket pattern (bench/rawzmq), measured in the same run.
//
// Each cell (consistency, W workers, k pairs per push) starts its own job: a scheduler, S servers
// and W client threads in this process, each with its own PsClient. Every round a worker pushes k
// distinct random ascending indices in [0, D) with dyadic values (m / 4096, 0 < |m| <= 64), so
// sums of pushes are exact in fp32. After warm-up rounds the round count is set so that one
// timed block lasts about --seconds; the timed blocks of sieve and of raw ZeroMQ alternate
// --repeats times and the median of each is reported.
//
// Checks (a wrong fast path fails the run, exit 1):
//  - every --verify_every-th round: BSP, the replica at every index of the round's union equals
//    old - fl(sum of the W pushes / W) bit for bit, and 64 random indices outside it are
//    unchanged; ASP with one worker, old - v (scale 1) bit for bit;
//  - at the end: a fresh PullDense equals worker 0's replica bit for bit (BSP), or the initial
//    weights minus every push / W within 1e-5 (ASP, W > 1: arrival order changes fp32 rounding).
//  - a variant with --reply_values=fp16|bf16 (16-bit replies: each replica holds the servers'
//    weights rounded): the per-round check allows one rounding of the old and of the new value
//    (ReplyTolerance), the final one compares the replica with the rounded PullDense bit for bit;
//  - every daemon exits 0 and every server reports rejected=0;
//  - with --replication, every copy of a shard ends bitwise equal to its primary (the servers'
//    summaries: checksum= of their own shard, copies= of the others they hold).
// Usage: bench_pushpull --bin_dir=DIR [--k=1000,10000,100000,1000000] [--workers=1,4,8]
//          [--consistency=bsp,asp] [--servers=1] [--num_params=10000000] [--seconds=0.5]
//          [--repeats=3] [--verify_every=16] [--json=PATH] [--log_dir=/tmp]
//          [--variant=LABEL:SERVER_FLAGS ...]
// Each --variant runs every cell once more with extra sieve-server flags (e.g.
// --variant=whole:--reply_part_pairs=0 --variant=parts:), for A/B comparisons in one run; a
// --bin_dir=DIR among them takes that variant's daemons from another build of the same protocol,
// and a --replication=R goes to the scheduler (e.g. --variant=r0: --variant=r1:--replication=1
// with --servers=2: the cost of shard backups).
// --wire=v4,v5 runs each variant once per wire format (v4: raw uint32 indices, v5: the compact
// index coding of protocol 7; the clients and the servers alike), in the same run.
#include <arpa/inet.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/huge_page_allocator.h"
#include "bench/common/bench_end.h"
#include "bench/common/flag_value.h"
#include "bench/rawzmq/raw_round_trips.h"
#include "kernels/sparse_ops.h"
#include "kernels/value_precision.h"
#include "tests/net/subprocess.h"
#include "tests/net/summary_file.h"
#include "worker/client/ps_client.h"

namespace sieve {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Subprocess;
constexpr int kWarmup = 5;  // untimed rounds per worker before calibration
// Any single wait of the job; a hang fails the run.
constexpr std::chrono::milliseconds kTimeout{120000};
constexpr int kPoolSize = 4;  // distinct selections per worker, used in rotation
constexpr float kValueUnit = 1.0f / 4096.0f;

struct Config {
  std::string bin_dir;
  std::string log_dir = "/tmp";
  int servers = 1;
  uint64_t num_params = 10000000;
  double seconds = 0.5;
  int repeats = 3;
  int verify_every = 16;
};

struct Cell {
  std::string consistency;
  int workers = 1;
  size_t k = 0;
  std::vector<std::string> server_flags;     // extra sieve-server flags of this variant
  std::vector<std::string> scheduler_flags;  // extra sieve-scheduler flags (--replication=)
  std::string bin_dir;                       // the variant's daemons (empty: --bin_dir's)
  bool compact_indices = true;  // the clients' index coding (a `--wire=v4` variant: raw)
  // The servers' --reply_values: with fp16 / bf16 each replica holds the servers' weights rounded
  // to it, so the checks compare against rounded weights.
  ValuePrecision reply_values = ValuePrecision::kFp32;
};

// |got - want| allowed when the replica is the servers' weight rounded to p and want is the
// previous replica (itself rounded) minus the round's mean: one rounding of each, with 1/4 of p's
// ulp to spare; 0 for fp32 (bitwise).
float ReplyTolerance(float before, float want, ValuePrecision p) {
  if (p == ValuePrecision::kFp32) return 0.0f;
  const float rel = p == ValuePrecision::kFp16 ? 0x1p-11f : 0x1p-8f;  // half an ulp, relative
  const float tiny = p == ValuePrecision::kFp16 ? 0x1p-24f : 0.0f;    // fp16's subnormal step
  return 1.25f * (rel * (std::fabs(before) + std::fabs(want)) + tiny);
}

struct Timed {
  double seconds = 0;
  uint64_t round_trips = 0;
  uint64_t bytes = 0;  // payload both ways (every frame), all workers
  double rts() const { return round_trips / seconds; }
  double gbs() const { return bytes / seconds / 1e9; }
};

struct CellResult {
  Timed sieve, raw;
  int rounds_per_block = 0;
  double pairs_down_per_round = 0;  // per worker and round, all servers
  uint64_t verified_rounds = 0;
  uint64_t copies_checked = 0;  // --replication: shard copies found equal to their primary's
  // Per round, timed blocks: worker 0's split+send and wait+apply time (RoundStats), and the
  // CPU time of all servers (user + system, from /proc) divided by worker 0's rounds.
  double push_ms = 0, wait_ms = 0, server_cpu_ms = 0;
  bool ok = true;
  std::string error;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "bench_pushpull: %s\n", what.c_str());
  std::exit(1);
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    Die("cannot find a free port");
  }
  close(fd);
  return ntohs(a.sin_port);
}

// A daemon whose stdout+stderr go to `log` (a pipe nobody drains could block it).
std::unique_ptr<Subprocess> Spawn(const std::string& bin, const std::vector<std::string>& args,
                                  const std::string& log) {
  std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" >'" + log + "' 2>&1", bin};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<Subprocess>(argv);
}

// User + system CPU seconds of a process so far (0 when it cannot be read).
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return 0;
  // Fields after the parenthesized command name: state is field 3, utime 14, stime 15.
  std::stringstream ss(line.substr(line.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && ss >> field; ++i) {
    if (i >= 14) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Pool of selections: k distinct ascending indices in [0, d) and dyadic nonzero values.
std::vector<Selection> MakePool(size_t k, uint64_t d, int n, uint64_t seed) {
  std::vector<Selection> pool(n);
  std::mt19937_64 rng(seed);
  for (int p = 0; p < n; ++p) {
    Selection& s = pool[p];
    s.dim = d;
    // Floyd's sampling of k distinct values, then sort.
    std::vector<uint32_t> idx;
    idx.reserve(k);
    if (k * 4 > d) {
      for (uint64_t i = 0; i < d; ++i) idx.push_back(static_cast<uint32_t>(i));
      std::shuffle(idx.begin(), idx.end(), rng);
      idx.resize(k);
    } else {
      std::vector<uint8_t> taken(d, 0);
      while (idx.size() < k) {
        const uint32_t i = static_cast<uint32_t>(rng() % d);
        if (!taken[i]) {
          taken[i] = 1;
          idx.push_back(i);
        }
      }
    }
    std::sort(idx.begin(), idx.end());
    s.indices = std::move(idx);
    s.values.resize(k);
    for (size_t j = 0; j < k; ++j) {
      int m = static_cast<int>(rng() % 128) - 64;
      if (m >= 0) ++m;  // in [-64, -1] ∪ [1, 64]
      s.values[j] = static_cast<float>(m) * kValueUnit;
    }
  }
  return pool;
}

// The selection worker w pushes in round r (same in every thread: all can recompute the union).
const Selection& PoolEntry(const std::vector<Selection>& pool, int workers, int w, uint64_t r) {
  return pool[(r * static_cast<uint64_t>(workers) + static_cast<uint64_t>(w)) % pool.size()];
}

// Ascending union of the W pushes of round r with exact per-index sums.
void RoundUnion(const std::vector<Selection>& pool, int workers, uint64_t r,
                std::vector<uint32_t>* idx, std::vector<float>* sum) {
  std::vector<std::pair<uint32_t, float>> all;
  for (int w = 0; w < workers; ++w) {
    const Selection& s = PoolEntry(pool, workers, w, r);
    for (size_t j = 0; j < s.indices.size(); ++j) all.emplace_back(s.indices[j], s.values[j]);
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  idx->clear();
  sum->clear();
  for (const auto& [i, v] : all) {
    if (!idx->empty() && idx->back() == i) {
      sum->back() += v;
    } else {
      idx->push_back(i);
      sum->push_back(v);
    }
  }
}

CellResult RunCell(const Config& cfg, const Cell& cell, const std::vector<Selection>& pool) {
  CellResult result;
  const bool bsp = cell.consistency == "bsp";
  const int port = FreePort();
  const std::string bin_dir = cell.bin_dir.empty() ? cfg.bin_dir : cell.bin_dir;
  const std::string tag = cell.consistency + "-w" + std::to_string(cell.workers) + "-k" +
                          std::to_string(cell.k) + "-" + std::to_string(getpid());
  const std::string sched_log = cfg.log_dir + "/pushpull-scheduler-" + tag + ".log";
  std::vector<std::string> sched_args = {"--num_servers=" + std::to_string(cfg.servers),
                                         "--num_workers=" + std::to_string(cell.workers),
                                         "--port=" + std::to_string(port),
                                         "--bind=127.0.0.1",
                                         "--host=127.0.0.1",
                                         "--startup_timeout_ms=60000"};
  sched_args.insert(sched_args.end(), cell.scheduler_flags.begin(), cell.scheduler_flags.end());
  auto scheduler = Spawn(bin_dir + "/scheduler/sieve-scheduler", sched_args, sched_log);
  std::vector<std::unique_ptr<Subprocess>> servers;
  std::vector<std::string> server_logs;
  for (int s = 0; s < cfg.servers; ++s) {
    server_logs.push_back(cfg.log_dir + "/pushpull-server" + std::to_string(s) + "-" + tag +
                          ".log");
    std::vector<std::string> args = {
        "--scheduler=127.0.0.1:" + std::to_string(port),
        "--bind=127.0.0.1",
        "--host=127.0.0.1",
        "--model=synthetic",
        "--num_params=" + std::to_string(cfg.num_params),
        "--consistency=" + cell.consistency,
        "--server_compressor=none",
        "--summary_out=" + cfg.log_dir + "/pushpull-server{rank}-" + tag + ".summary.json"};
    // A variant's flags go last: gflags keeps the last value of a repeated flag.
    args.insert(args.end(), cell.server_flags.begin(), cell.server_flags.end());
    servers.push_back(Spawn(bin_dir + "/server/sieve-server", args, server_logs.back()));
  }

  const int W = cell.workers;
  std::mutex mu;
  auto fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (result.ok) result.error = what;
    result.ok = false;
  };
  std::atomic<bool> stop{false};
  // Phase barrier of the W workers and the driver (this thread): warm-up done, then each timed
  // block's start and end. The completion step runs once per phase, on the last arrival.
  std::atomic<int> rounds{0};
  std::atomic<double> warm_seconds{0};
  Clock::time_point t0, t1;
  std::barrier<std::function<void()>> phase(W + 1, [&]() noexcept {
    t1 = Clock::now();
    t0 = t1;
  });
  std::vector<uint64_t> bytes(W, 0), pairs_down(W, 0), verified(W, 0);
  std::vector<float> init, final_replica;
  double push_s = 0, wait_s = 0;  // worker 0, timed rounds
  uint64_t timed_rounds = 0;

  auto worker_main = [&](int w) {
    bool dropped = false;
    auto leave = [&](const std::string& what) {
      fail("worker " + std::to_string(w) + ": " + what);
      stop = true;
      if (!dropped) phase.arrive_and_drop();
      dropped = true;
    };
    PsClientOptions po;
    po.scheduler = "127.0.0.1:" + std::to_string(port);
    po.rank = w;
    po.num_params = cfg.num_params;
    po.bind_host = "127.0.0.1";
    po.advertise_host = "127.0.0.1";
    po.compact_indices = cell.compact_indices;
    auto client_or = PsClient::Connect(po);
    if (!client_or.ok()) return leave("connect: " + client_or.status().ToString());
    PsClient& client = **client_or;
    HugePageVector<float> replica(cfg.num_params);  // as the worker's (CPU backend Alloc)
    Status s = client.PullDense(replica, kTimeout);
    if (s.ok()) s = client.Barrier(kTimeout);  // nobody pushes before every replica is pulled
    if (!s.ok()) return leave("start: " + s.ToString());
    if (w == 0) init.assign(replica.begin(), replica.end());
    std::vector<Selection> own(pool.size());  // this worker's copies, lent to PushPull
    std::vector<uint32_t> uidx, outside;
    std::vector<float> usum, before, outside_before;
    std::mt19937_64 rng(1000 + w);
    uint64_t round = 0;
    auto one_round = [&](bool timed) -> bool {
      const Selection& ref = PoolEntry(pool, W, w, round);
      Selection& sel = own[(round * W + w) % pool.size()];
      if (sel.indices.size() != ref.indices.size()) sel = ref;  // first use, or not handed back
      const bool verify = cfg.verify_every > 0 && round % cfg.verify_every == 0 && (bsp || W == 1);
      if (verify) {
        if (bsp) {
          RoundUnion(pool, W, round, &uidx, &usum);
        } else {
          uidx = ref.indices;
          usum = ref.values;
        }
        before.resize(uidx.size());
        for (size_t j = 0; j < uidx.size(); ++j) before[j] = replica[uidx[j]];
        outside.clear();
        outside_before.clear();
        while (outside.size() < 64) {
          const uint32_t i = static_cast<uint32_t>(rng() % cfg.num_params);
          if (std::binary_search(uidx.begin(), uidx.end(), i)) continue;
          outside.push_back(i);
          outside_before.push_back(replica[i]);
        }
      }
      RoundStats st;
      Status ps = client.PushPull(round, &sel, replica, &st, kTimeout);
      if (!ps.ok()) {
        leave("round " + std::to_string(round) + ": " + ps.ToString());
        return false;
      }
      if (timed) {
        if (w == 0) {
          push_s += st.push_seconds;
          wait_s += st.wait_seconds;
          ++timed_rounds;
        }
        bytes[w] += st.bytes_up + st.bytes_down;
        pairs_down[w] += st.pairs_down;
      }
      if (verify) {
        const float n = bsp ? static_cast<float>(W) : 1.0f;
        for (size_t j = 0; j < uidx.size(); ++j) {
          const float want = before[j] - usum[j] / n;
          const float got = replica[uidx[j]];
          const bool same =
              cell.reply_values == ValuePrecision::kFp32
                  ? std::memcmp(&want, &got, 4) == 0
                  : std::fabs(got - want) <= ReplyTolerance(before[j], want, cell.reply_values);
          if (!same) {
            leave("round " + std::to_string(round) + ": replica[" + std::to_string(uidx[j]) +
                  "] = " + std::to_string(replica[uidx[j]]) + ", expected " + std::to_string(want));
            return false;
          }
        }
        for (size_t j = 0; j < outside.size(); ++j) {
          if (std::memcmp(&outside_before[j], &replica[outside[j]], 4) != 0) {
            leave("round " + std::to_string(round) + ": untouched index " +
                  std::to_string(outside[j]) + " changed");
            return false;
          }
        }
        ++verified[w];
      }
      ++round;
      return true;
    };
    const auto tw = Clock::now();
    for (int r = 0; r < kWarmup; ++r) {
      if (!one_round(false)) return;
    }
    if (w == 0) warm_seconds = std::chrono::duration<double>(Clock::now() - tw).count();
    phase.arrive_and_wait();  // warm-up done: the driver sets the round count
    for (int rep = 0; rep < cfg.repeats; ++rep) {
      phase.arrive_and_wait();  // block start
      if (stop) return leave("stopped");
      const int n = rounds.load();
      for (int r = 0; r < n; ++r) {
        if (!one_round(true)) return;
      }
      phase.arrive_and_wait();  // block end
    }
    if (w == 0) {
      // Whole-replica check against the servers' weights.
      std::vector<float> fresh(cfg.num_params);
      if (bsp) {
        s = client.PullDense(fresh, kTimeout);
        if (!s.ok()) return leave("final pull: " + s.ToString());
        if (cell.reply_values != ValuePrecision::kFp32) {
          for (float& x : fresh) x = RoundToValuePrecision(x, cell.reply_values);
        }
        if (std::memcmp(fresh.data(), replica.data(), 4 * fresh.size()) != 0) {
          return leave("replica differs from the servers' weights after the run");
        }
      }
      final_replica.assign(replica.begin(), replica.end());
    }
    s = client.Barrier(kTimeout);  // every worker done pushing
    if (s.ok() && !bsp && w == 0) {
      std::vector<float> fresh(cfg.num_params);
      s = client.PullDense(fresh, kTimeout);
      if (s.ok()) {
        std::vector<double> want(init.begin(), init.end());
        for (uint64_t r = 0; r < round; ++r) {
          for (int v = 0; v < W; ++v) {
            const Selection& p = PoolEntry(pool, W, v, r);
            for (size_t j = 0; j < p.indices.size(); ++j)
              want[p.indices[j]] -= static_cast<double>(p.values[j]) / W;
          }
        }
        for (size_t i = 0; i < want.size(); ++i) {
          if (std::fabs(want[i] - fresh[i]) > 1e-5) {
            return leave("ASP: w[" + std::to_string(i) + "] = " + std::to_string(fresh[i]) +
                         ", expected " + std::to_string(want[i]));
          }
        }
      }
    }
    if (s.ok()) s = client.Finish();
    if (s.ok()) s = client.WaitShutdown(kTimeout);
    if (!s.ok()) return leave("end: " + s.ToString());
  };

  std::vector<std::thread> threads;
  for (int w = 0; w < W; ++w) threads.emplace_back(worker_main, w);
  phase.arrive_and_wait();  // warm-up done
  const double per_round = std::max(warm_seconds.load() / kWarmup, 1e-6);
  result.rounds_per_block = std::clamp(static_cast<int>(cfg.seconds / per_round), 3, 20000);
  rounds = result.rounds_per_block;
  std::vector<Timed> sieve_runs, raw_runs;
  auto servers_cpu = [&] {
    double sum = 0;
    for (auto& s : servers) sum += ProcessCpuSeconds(s->pid());
    return sum;
  };
  const double cpu0 = servers_cpu();
  for (int rep = 0; rep < cfg.repeats && !stop; ++rep) {
    std::fill(bytes.begin(), bytes.end(), 0);
    phase.arrive_and_wait();  // block start (t0)
    const auto start = t0;
    phase.arrive_and_wait();  // block end (t1)
    if (stop) break;
    Timed t;
    t.seconds = std::chrono::duration<double>(t1 - start).count();
    t.round_trips = static_cast<uint64_t>(W) * result.rounds_per_block;
    for (int w = 0; w < W; ++w) t.bytes += bytes[w];
    sieve_runs.push_back(t);
    // Raw ZeroMQ with the bytes this block moved per round trip and server.
    uint64_t down = 0;
    for (int w = 0; w < W; ++w) down += pairs_down[w];
    const double down_per_rt = static_cast<double>(down) / (t.round_trips * (rep + 1));
    result.pairs_down_per_round = down_per_rt;
    RawRoundTripConfig rc;
    rc.workers = W;
    rc.servers = cfg.servers;
    rc.up_pairs = (cell.k + cfg.servers - 1) / cfg.servers;
    rc.down_pairs = static_cast<size_t>(std::llround(down_per_rt / cfg.servers));
    rc.rounds = result.rounds_per_block;
    const RawRoundTripResult raw = RunRawRoundTrips(rc);
    if (!raw.ok) fail("raw ZeroMQ path failed");
    raw_runs.push_back({raw.seconds, raw.round_trips, raw.bytes});
  }
  if (stop) phase.arrive_and_drop();
  const double cpu1 = servers_cpu();
  for (auto& t : threads) t.join();
  if (timed_rounds > 0) {
    result.push_ms = push_s / timed_rounds * 1e3;
    result.wait_ms = wait_s / timed_rounds * 1e3;
    // Raw ZeroMQ blocks run while the servers idle, so this is the servers' cost of the rounds.
    result.server_cpu_ms = (cpu1 - cpu0) / timed_rounds * 1e3;
  }
  for (uint64_t v : verified) result.verified_rounds += v;

  // Every daemon must end cleanly, and no server may have rejected a message.
  auto check_exit = [&](Subprocess& p, const std::string& name, const std::string& log) {
    auto st = p.Wait(std::chrono::seconds(30));
    if (!st || !WIFEXITED(*st) || WEXITSTATUS(*st) != 0) {
      p.Kill(SIGKILL);
      fail(name + " did not exit 0 (log: " + log + ")");
    }
  };
  // With --replication, every copy of a shard ends with its primary's bytes: each server's
  // summary (its --summary_out, named by the rank the scheduler gave it) has its own shard's
  // checksum and copies=shard:checksum,... of the others it holds.
  for (int s = 0; s < cfg.servers; ++s)
    check_exit(*servers[s], "server " + std::to_string(s), server_logs[s]);
  std::vector<std::string> own_crc(cfg.servers);
  std::vector<std::pair<int, std::string>> copies;  // (shard, checksum) as its copies report
  for (int rank = 0; rank < cfg.servers; ++rank) {
    const std::string path =
        cfg.log_dir + "/pushpull-server" + std::to_string(rank) + "-" + tag + ".summary.json";
    const testing::KeyValues summary = testing::ReadSummaryFile(path);
    if (summary.empty()) fail("server " + std::to_string(rank) + " wrote no summary " + path);
    if (summary.count("rejected") == 1 && summary.at("rejected") != "0") {
      fail("server " + std::to_string(rank) + " rejected messages (" + path + ")");
    }
    own_crc[rank] = summary.count("checksum") == 1 ? summary.at("checksum") : "";
    const std::string list = summary.count("copies") == 1 ? summary.at("copies") : "";
    for (size_t at = 0; !list.empty() && at < list.size();) {
      const size_t end = std::min(list.find(',', at), list.size());
      const std::string entry = list.substr(at, end - at);
      const size_t colon = entry.find(':');
      if (colon != std::string::npos) {
        copies.push_back({std::atoi(entry.substr(0, colon).c_str()), entry.substr(colon + 1)});
      }
      at = end + 1;
    }
  }
  for (const auto& [shard, crc] : copies) {
    if (shard < 0 || shard >= cfg.servers || crc != own_crc[shard]) {
      fail("a copy of shard " + std::to_string(shard) + " ends with checksum " + crc +
           ", its primary with " + (shard >= 0 && shard < cfg.servers ? own_crc[shard] : "?") +
           " (logs: " + cfg.log_dir + "/pushpull-server*-" + tag + ".log)");
    }
  }
  result.copies_checked = copies.size();
  check_exit(*scheduler, "scheduler", sched_log);
  auto median = [](std::vector<Timed> v) {
    if (v.empty()) return Timed{1, 0, 0};
    std::sort(v.begin(), v.end(),
              [](const Timed& a, const Timed& b) { return a.seconds < b.seconds; });
    return v[v.size() / 2];
  };
  result.sieve = median(sieve_runs);
  result.raw = median(raw_runs);
  if (result.ok) {
    for (const std::string& l : server_logs) std::remove(l.c_str());
    std::remove(sched_log.c_str());
  }
  return result;
}

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

int Main(int argc, char** argv) {
  FLAGS_minloglevel = 1;  // the clients' INFO lines (job start, shutdown) would bury the table
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  Config cfg;
  std::string ks = "1000,10000,100000,1000000", ws = "1,4,8", cs = "bsp,asp", json, wires;
  // Variants: (label, extra server flags); each cell runs once per variant.
  std::vector<std::pair<std::string, Cell>> variants;  // label, server flags and daemons
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string_view name) { return FlagValue(argv[i], name); };
    if (a == "--help") {
      std::puts(
          "usage: bench_pushpull --bin_dir=DIR [--k=1000,10000,100000,1000000] "
          "[--workers=1,4,8]\n"
          "         [--consistency=bsp,asp] [--servers=1] [--num_params=10000000] "
          "[--seconds=0.5]\n"
          "         [--repeats=3] [--verify_every=16] [--json=PATH] [--log_dir=/tmp]\n"
          "         [--variant=LABEL:SERVER_FLAGS ...]   (each cell once per variant)\n"
          "         [--wire=v4,v5]   (each variant once per wire format: v4 raw uint32 indices,\n"
          "                           v5 compact index coding; clients and servers alike)");
      return 0;
    } else if (auto v = value("bin_dir")) {
      cfg.bin_dir = v;
    } else if (auto v = value("k")) {
      ks = v;
    } else if (auto v = value("workers")) {
      ws = v;
    } else if (auto v = value("consistency")) {
      cs = v;
    } else if (auto v = value("servers")) {
      cfg.servers = std::atoi(v);
    } else if (auto v = value("num_params")) {
      cfg.num_params = std::strtoull(v, nullptr, 10);
    } else if (auto v = value("seconds")) {
      cfg.seconds = std::atof(v);
    } else if (auto v = value("repeats")) {
      cfg.repeats = std::atoi(v);
    } else if (auto v = value("verify_every")) {
      cfg.verify_every = std::atoi(v);
    } else if (auto v = value("json")) {
      json = v;
    } else if (auto v = value("log_dir")) {
      cfg.log_dir = v;
    } else if (auto v = value("wire")) {
      wires = v;
    } else if (auto v = value("variant")) {
      const std::string text = v;
      const size_t colon = text.find(':');
      if (colon == 0 || colon == std::string::npos) Die("--variant takes LABEL:FLAGS");
      Cell variant;
      std::stringstream ss(text.substr(colon + 1));
      for (std::string f; ss >> f;) {
        if (f.rfind("--bin_dir=", 0) == 0) {
          variant.bin_dir = f.substr(10);
        } else if (f.rfind("--replication=", 0) == 0) {  // the scheduler's: shard backups
          variant.scheduler_flags.push_back(f);
        } else {
          if (f == "--wire=v4") variant.compact_indices = false;  // the clients follow
          if (f == "--wire=v5") variant.compact_indices = true;
          if (f == "--reply_values=fp16") variant.reply_values = ValuePrecision::kFp16;
          if (f == "--reply_values=bf16") variant.reply_values = ValuePrecision::kBf16;
          variant.server_flags.push_back(f);
        }
      }
      variants.emplace_back(text.substr(0, colon), variant);
    } else {
      Die("unknown argument '" + a + "' (see --help)");
    }
  }
  if (cfg.bin_dir.empty()) Die("--bin_dir (the build directory) is required");
  if (variants.empty()) variants.emplace_back("", Cell{});
  if (!wires.empty()) {  // each variant once per wire format, v4 and v5 in the same run
    std::vector<std::pair<std::string, Cell>> crossed;
    for (const auto& [label, variant] : variants) {
      for (const std::string& w : Split(wires)) {
        if (w != "v4" && w != "v5") Die("--wire takes v4 and/or v5");
        Cell c = variant;
        c.compact_indices = w == "v5";
        c.server_flags.push_back("--wire=" + w);
        crossed.emplace_back(label.empty() ? w : label + "/" + w, c);
      }
    }
    variants = std::move(crossed);
  }
  if (cfg.servers < 1 || cfg.repeats < 1 || cfg.seconds <= 0 || cfg.num_params < 1 ||
      cfg.num_params >= (uint64_t{1} << 32)) {
    Die("bad --servers, --repeats, --seconds or --num_params");
  }
  std::ostringstream out;
  out << "{\"benchmark\":\"pushpull\",\"num_params\":" << cfg.num_params
      << ",\"servers\":" << cfg.servers << ",\"repeats\":" << cfg.repeats << ",\"rows\":[";
  std::printf("D=%llu servers=%d; medians of %d interleaved blocks; ratio = sieve / raw ZeroMQ\n",
              static_cast<unsigned long long>(cfg.num_params), cfg.servers, cfg.repeats);
  std::printf("%-8s %-4s %-3s %-8s %10s %8s %10s %8s %6s %6s %9s %7s %7s %7s %5s\n", "variant",
              "mode", "W", "k", "sieve rt/s", "GB/s", "raw rt/s", "GB/s", "rt x", "GB/s x",
              "pairs dn", "push ms", "wait ms", "srv ms", "vrfy");
  bool all_ok = true, first = true;
  for (const std::string& kstr : Split(ks)) {
    const size_t k = static_cast<size_t>(std::stod(kstr));
    if (k < 1 || k > cfg.num_params) Die("k must be in [1, num_params]");
    for (const std::string& wstr : Split(ws)) {
      const int W = std::atoi(wstr.c_str());
      if (W < 1) Die("bad --workers");
      const auto pool = MakePool(k, cfg.num_params, std::max(kPoolSize, W + 1), 42 + k);
      for (const std::string& c : Split(cs)) {
        if (c != "bsp" && c != "asp") Die("--consistency takes bsp and/or asp");
        for (const auto& [label, variant] : variants) {
          Cell cell = variant;
          cell.consistency = c;
          cell.workers = W;
          cell.k = k;
          const CellResult r = RunCell(cfg, cell, pool);
          all_ok = all_ok && r.ok;
          std::printf(
              "%-8s %-4s %-3d %-8zu %10.0f %8.3f %10.0f %8.3f %6.2f %6.2f %9.0f %7.3f %7.3f %7.3f "
              "%5llu%s\n",
              label.empty() ? "-" : label.c_str(), c.c_str(), W, k, r.sieve.rts(), r.sieve.gbs(),
              r.raw.rts(), r.raw.gbs(), r.sieve.rts() / r.raw.rts(), r.sieve.gbs() / r.raw.gbs(),
              r.pairs_down_per_round, r.push_ms, r.wait_ms, r.server_cpu_ms,
              static_cast<unsigned long long>(r.verified_rounds), r.ok ? "" : "  FAILED");
          if (!r.ok) std::fprintf(stderr, "  %s\n", r.error.c_str());
          std::fflush(stdout);
          out << (first ? "" : ",") << "{\"variant\":\"" << label << "\",\"consistency\":\"" << c
              << "\",\"workers\":" << W << ",\"k\":" << k
              << ",\"rounds_per_block\":" << r.rounds_per_block
              << ",\"pairs_down_per_round\":" << r.pairs_down_per_round
              << ",\"sieve_round_trips_per_s\":" << r.sieve.rts()
              << ",\"sieve_gbytes_per_s\":" << r.sieve.gbs()
              << ",\"raw_round_trips_per_s\":" << r.raw.rts()
              << ",\"raw_gbytes_per_s\":" << r.raw.gbs()
              << ",\"rt_ratio\":" << r.sieve.rts() / r.raw.rts()
              << ",\"gbytes_ratio\":" << r.sieve.gbs() / r.raw.gbs() << ",\"push_ms\":" << r.push_ms
              << ",\"wait_ms\":" << r.wait_ms << ",\"server_cpu_ms_per_round\":" << r.server_cpu_ms
              << ",\"verified_rounds\":" << r.verified_rounds
              << ",\"copies_checked\":" << r.copies_checked
              << ",\"ok\":" << (r.ok ? "true" : "false") << "}";
          first = false;
        }
      }
    }
  }
  out << "]}\n";
  return FinishBench("bench_pushpull", json, out.str(), all_ok ? "" : "a cell failed (see above)");
}

}  // namespace
}  // namespace sieve

int main(int argc, char** argv) { return sieve::Main(argc, argv); }
