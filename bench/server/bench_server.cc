// Server-alone benchmark (scripts/bench server): recorded pushes fed from memory straight into
// a ShardServer, no sockets and no clients, so nothing shares the server's cores but its own
// threads. One shard of D weights, W workers each pushing k distinct random ascending indices
// per round (BSP: a round is W pushes merged into the union, then the update pass and the reply;
// the reply is built in parts of --reply_part_pairs as sieve-server does, and the part sink
// drops them as a send would). Measures rounds/s at each --threads count (ShardServerOptions::
// threads, sieve-server --server_threads) and prints the same-run ratios to one thread:
//   server threads: bsp k=1e5 W=4 2t/1t=X 4t/1t=Y 8t/1t=Z
//
// Every thread count gets its own server and the same sequence of rounds; timed blocks of the
// thread counts alternate --repeats times and the median block is reported. At the end the
// servers' weights must be bitwise equal (exit 1 otherwise): the threads change the speed, never
// the result.
//
// Wall-clock ratios need idle cores. On a loaded machine the "span" columns say more: the
// calling thread's CPU time per round is the round's critical path (it sleeps while it waits for
// a descheduled helper), so 1 thread's CPU per round over it estimates the speed-up idle cores
// would give, if the memory system is not shared:
//   server threads (cpu span): bsp k=1e5 W=4 2t/1t=...
//
// The machine line measures what the memory system gives (a streaming copy at 1 and at the
// largest thread count); the model line counts the bytes a round moves (merges: every pair read
// and written once per merge; update pass: the union's pairs read, one 64-byte line of w read and
// written per pair, the reply's pairs written), from which the GB/s each row needs follows.
//
// Usage: bench_server [--threads=1,2,4,8] [--workers=4] [--num_params=10000000]
//          [--k=100000] [--consistency=bsp] [--recorded=8] [--seconds=1] [--repeats=5]
//          [--reply_part_pairs=32768] [--json=PATH]
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_team.h"
#include "bench/common/bench_end.h"
#include "bench/common/flag_value.h"
#include "server/shard/shard_server.h"

namespace sieve {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "bench_server: %s\n", why.c_str());
  std::exit(2);
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

double CpuSeconds(clockid_t clock = CLOCK_PROCESS_CPUTIME_ID) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double LoadAverage() {
  double l = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = 0;
    std::fclose(f);
  }
  return l;
}

struct Push {
  std::vector<uint32_t> idx;
  std::vector<float> val;
};

// k distinct ascending indices of [0, d) and small values.
Push RandomPush(std::mt19937_64& rng, uint64_t d, size_t k) {
  Push p;
  std::uniform_int_distribution<uint64_t> pick(0, d - 1);
  while (p.idx.size() < k) {
    for (size_t j = p.idx.size(); j < k + k / 64 + 8; ++j)
      p.idx.push_back(static_cast<uint32_t>(pick(rng)));
    std::sort(p.idx.begin(), p.idx.end());
    p.idx.erase(std::unique(p.idx.begin(), p.idx.end()), p.idx.end());
  }
  if (p.idx.size() > k) {  // drop a random surplus, keeping the order
    std::vector<uint32_t> kept;
    kept.reserve(k);
    std::sample(p.idx.begin(), p.idx.end(), std::back_inserter(kept), k, rng);
    p.idx.swap(kept);
  }
  std::uniform_real_distribution<float> v(-1e-3f, 1e-3f);
  p.val.resize(k);
  for (float& x : p.val) x = v(rng);
  return p;
}

struct Config {
  uint64_t num_params = 10'000'000;
  uint32_t workers = 4;
  uint32_t recorded = 8;  // rounds of recorded pushes, replayed in a cycle
  double seconds = 1.0;   // per timed block
  int repeats = 5;
  uint64_t reply_part_pairs = 32768;
};

// One server and where it is in the recorded sequence.
struct Runner {
  uint32_t threads = 1;
  std::unique_ptr<ShardServer> server;
  uint64_t round = 0;  // BSP round / ASP clock of every worker
  std::vector<double> block_s, block_cpu_s, block_caller_s;
};

// Runs `rounds` rounds (W pushes each) of the recorded pushes on r.
void RunRounds(Runner& r, const std::vector<std::vector<Push>>& pushes, Consistency c,
               uint64_t rounds) {
  Outbox out;
  const uint32_t workers = static_cast<uint32_t>(pushes[0].size());
  for (uint64_t n = 0; n < rounds; ++n, ++r.round) {
    const auto& round_pushes = pushes[r.round % pushes.size()];
    for (uint32_t w = 0; w < workers; ++w) {
      const Push& p = round_pushes[w];
      r.server->OnPush(static_cast<int>(w), r.round, p.idx, p.val, false, &out);
      out.clear();  // replies dropped as a send would (their buffers go back to the pool)
    }
  }
  if (c == Consistency::kBsp && r.server->round() != r.round) Die("a BSP round did not complete");
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Streaming copy of 2 x 256 MiB at `threads` threads: GB/s (read + write).
double CopyGbs(ThreadTeam& team, uint32_t threads, std::vector<float>& a, std::vector<float>& b) {
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    team.Run(threads, [&](uint32_t t) {
      const size_t from = ThreadTeam::RangeBegin(a.size(), threads, t);
      const size_t to = ThreadTeam::RangeBegin(a.size(), threads, t + 1);
      std::memcpy(b.data() + from, a.data() + from, (to - from) * sizeof(float));
    });
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 2.0 * static_cast<double>(a.size() * sizeof(float)) / s / 1e9);
  }
  return best;
}

std::string Short(double x) {  // 100000 -> "1e5", 32768 -> "32768"
  char buf[32];
  const double e = std::floor(std::log10(x));
  if (x >= 1000 && std::pow(10.0, e) * std::round(x / std::pow(10.0, e)) == x) {
    std::snprintf(buf, sizeof buf, "%.0fe%.0f", x / std::pow(10.0, e), e);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", x);
  }
  return buf;
}

int Main(int argc, char** argv) {
  Config cfg;
  std::string thread_list = "1,2,4,8", ks = "100000", cs = "bsp", json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string_view name) { return FlagValue(argv[i], name); };
    if (a == "--help") {
      std::puts(
          "usage: bench_server [--threads=1,2,4,8] [--workers=4] [--num_params=10000000]\n"
          "         [--k=100000] [--consistency=bsp|asp|bsp,asp] [--recorded=8] [--seconds=1]\n"
          "         [--repeats=5] [--reply_part_pairs=32768] [--json=PATH]");
      return 0;
    } else if (auto v = value("threads")) {
      thread_list = v;
    } else if (auto v = value("workers")) {
      cfg.workers = static_cast<uint32_t>(std::atoi(v));
    } else if (auto v = value("num_params")) {
      cfg.num_params = static_cast<uint64_t>(std::stod(v));
    } else if (auto v = value("k")) {
      ks = v;
    } else if (auto v = value("consistency")) {
      cs = v;
    } else if (auto v = value("recorded")) {
      cfg.recorded = static_cast<uint32_t>(std::atoi(v));
    } else if (auto v = value("seconds")) {
      cfg.seconds = std::atof(v);
    } else if (auto v = value("repeats")) {
      cfg.repeats = std::atoi(v);
    } else if (auto v = value("reply_part_pairs")) {
      cfg.reply_part_pairs = std::strtoull(v, nullptr, 10);
    } else if (auto v = value("json")) {
      json = v;
    } else {
      Die("unknown argument '" + a + "' (see --help)");
    }
  }
  std::vector<uint32_t> threads;
  for (const std::string& t : Split(thread_list)) {
    const int n = std::atoi(t.c_str());
    if (n < 1 || n > static_cast<int>(ThreadTeam::kMaxThreads)) Die("bad --threads " + t);
    threads.push_back(static_cast<uint32_t>(n));
  }
  if (threads.empty() || threads[0] != 1) threads.insert(threads.begin(), 1);  // the reference
  if (cfg.workers < 1 || cfg.recorded < 1 || cfg.seconds <= 0 || cfg.repeats < 1 ||
      cfg.num_params < 1 || cfg.num_params >= (uint64_t{1} << 32)) {
    Die("bad --workers, --recorded, --seconds, --repeats or --num_params");
  }
  const uint32_t max_threads = *std::max_element(threads.begin(), threads.end());

  // What the memory system gives, for the model line.
  double copy1 = 0, copyn = 0;
  {
    ThreadTeam team(max_threads);
    std::vector<float> a(size_t{64} << 20, 1.0f), b(size_t{64} << 20, 0.0f);
    copy1 = CopyGbs(team, 1, a, b);
    copyn = CopyGbs(team, max_threads, a, b);
  }
  std::printf(
      "machine: %u hardware threads, load average %.2f; streaming copy %.1f GB/s at 1 thread, "
      "%.1f GB/s at %u\n",
      std::thread::hardware_concurrency(), LoadAverage(), copy1, copyn, max_threads);

  std::ostringstream out;
  out << "{\"benchmark\":\"server\",\"num_params\":" << cfg.num_params
      << ",\"workers\":" << cfg.workers << ",\"repeats\":" << cfg.repeats
      << ",\"reply_part_pairs\":" << cfg.reply_part_pairs << ",\"copy_gbs_1\":" << copy1
      << ",\"copy_gbs_n\":" << copyn << ",\"rows\":[";
  bool first = true, all_ok = true;
  for (const std::string& c_name : Split(cs)) {
    auto consistency = ParseConsistency(c_name);
    if (!consistency.ok() || *consistency == Consistency::kSsp) Die("--consistency: bsp or asp");
    const Consistency c = *consistency;
    for (const std::string& kstr : Split(ks)) {
      const size_t k = static_cast<size_t>(std::stod(kstr));
      if (k < 1 || k > cfg.num_params) Die("k must be in [1, num_params]");
      std::mt19937_64 rng(1000 + k);
      std::vector<std::vector<Push>> pushes(cfg.recorded);
      double union_pairs = 0;  // mean BSP union per round
      for (auto& round : pushes) {
        std::vector<uint32_t> uni;
        for (uint32_t w = 0; w < cfg.workers; ++w) {
          round.push_back(RandomPush(rng, cfg.num_params, k));
          uni.insert(uni.end(), round.back().idx.begin(), round.back().idx.end());
        }
        std::sort(uni.begin(), uni.end());
        union_pairs += static_cast<double>(std::unique(uni.begin(), uni.end()) - uni.begin());
      }
      union_pairs /= cfg.recorded;

      std::vector<Runner> runners;
      std::vector<float> initial(cfg.num_params);
      for (size_t i = 0; i < initial.size(); ++i) initial[i] = 1e-6f * static_cast<float>(i % 997);
      for (uint32_t t : threads) {
        ShardServerOptions o;
        o.num_workers = cfg.workers;
        o.consistency = c;
        o.reply_part_pairs = c == Consistency::kBsp ? cfg.reply_part_pairs : 0;
        o.threads = t;
        auto made = ShardServer::Create(o, initial);
        if (!made.ok()) Die(made.status().ToString());
        Runner r;
        r.threads = t;
        r.server = std::move(*made);
        r.server->set_part_sink([](Outbox* ob) { ob->clear(); });
        runners.push_back(std::move(r));
      }
      // Warm-up (page faults, pool buffers), and the block length from the 1-thread rate.
      const uint64_t warm = 2 * cfg.recorded;
      double one_round_s = 0;
      for (Runner& r : runners) {
        const auto t0 = Clock::now();
        RunRounds(r, pushes, c, warm);
        if (r.threads == 1)
          one_round_s = std::chrono::duration<double>(Clock::now() - t0).count() / warm;
      }
      const uint64_t block =
          std::max<uint64_t>(3, static_cast<uint64_t>(cfg.seconds / std::max(one_round_s, 1e-9)));
      for (int rep = 0; rep < cfg.repeats; ++rep) {
        for (Runner& r : runners) {
          const double cpu0 = CpuSeconds(), caller0 = CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
          const auto t0 = Clock::now();
          RunRounds(r, pushes, c, block);
          r.block_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
          r.block_cpu_s.push_back(CpuSeconds() - cpu0);
          r.block_caller_s.push_back(CpuSeconds(CLOCK_THREAD_CPUTIME_ID) - caller0);
        }
      }
      // The threads never change the result.
      bool same = true;
      for (const Runner& r : runners) {
        const auto a = runners[0].server->weights(), b = r.server->weights();
        same = same && a.size() == b.size() &&
               std::memcmp(a.data(), b.data(), a.size_bytes()) == 0 &&
               r.server->stats().pushes_applied == runners[0].server->stats().pushes_applied;
      }
      all_ok = all_ok && same;

      // Bytes a BSP round moves (see the header): merges and the update pass.
      double merge_pairs = 0;  // Σ over the W merges of the pairs read (union so far + push)
      for (uint32_t w = 0; w < cfg.workers; ++w)
        merge_pairs += union_pairs * w / cfg.workers + static_cast<double>(k);
      const double round_bytes =
          c == Consistency::kBsp
              ? merge_pairs * 8 * 2 + union_pairs * (8 + 128 + 8)
              : static_cast<double>(cfg.workers) * static_cast<double>(k) * (8 + 128 + 4);
      std::printf(
          "\n%s k=%s W=%u D=%s: union %.0f pairs/round, %u-round blocks, medians of %d; model "
          "%.1f MB moved per round\n",
          c_name.c_str(), Short(static_cast<double>(k)).c_str(), cfg.workers,
          Short(static_cast<double>(cfg.num_params)).c_str(), union_pairs,
          static_cast<unsigned>(block), cfg.repeats, round_bytes / 1e6);
      std::printf("%-8s %10s %10s %8s %10s %10s %8s %8s %9s\n", "threads", "rounds/s", "ms/round",
                  "x 1t", "Mpairs/s", "model GB/s", "cpu/wall", "cpu ms", "span x 1t");
      const double base = block / Median(runners[0].block_s);
      const double base_cpu = Median(runners[0].block_cpu_s) / block;
      std::string ratios, span_ratios;
      for (const Runner& r : runners) {
        const double rps = block / Median(r.block_s);
        double cpu = 0, wall = 0;
        for (size_t j = 0; j < r.block_s.size(); ++j) {
          cpu += r.block_cpu_s[j];
          wall += r.block_s[j];
        }
        const double pairs_s = rps * cfg.workers * static_cast<double>(k);
        // The calling thread's CPU per round is the round's critical path when the helpers get
        // cores (it waits asleep otherwise): 1 thread's CPU per round over it estimates the
        // speed-up on idle cores even when other jobs load the machine.
        const double cpu_ms = 1e3 * Median(r.block_cpu_s) / block;
        const double span = base_cpu / (Median(r.block_caller_s) / block);
        std::printf("%-8u %10.1f %10.3f %8.2f %10.1f %10.2f %8.2f %8.3f %9.2f\n", r.threads, rps,
                    1e3 / rps, rps / base, pairs_s / 1e6, rps * round_bytes / 1e9, cpu / wall,
                    cpu_ms, span);
        if (r.threads != 1) {
          char buf[64];
          std::snprintf(buf, sizeof buf, " %ut/1t=%.2f", r.threads, rps / base);
          ratios += buf;
          std::snprintf(buf, sizeof buf, " %ut/1t=%.2f", r.threads, span);
          span_ratios += buf;
        }
        out << (first ? "" : ",") << "{\"consistency\":\"" << c_name << "\",\"k\":" << k
            << ",\"threads\":" << r.threads << ",\"rounds_per_s\":" << rps
            << ",\"ratio_to_1t\":" << rps / base << ",\"union_pairs\":" << union_pairs
            << ",\"model_bytes_per_round\":" << round_bytes << ",\"cpu_per_wall\":" << cpu / wall
            << ",\"cpu_ms_per_round\":" << cpu_ms << ",\"span_ratio_to_1t\":" << span
            << ",\"bitwise_equal\":" << (same ? "true" : "false") << "}";
        first = false;
      }
      std::printf("server threads: %s k=%s W=%u%s%s\n", c_name.c_str(),
                  Short(static_cast<double>(k)).c_str(), cfg.workers, ratios.c_str(),
                  same ? "" : "  FAILED: weights differ between thread counts");
      std::printf("server threads (cpu span): %s k=%s W=%u%s\n", c_name.c_str(),
                  Short(static_cast<double>(k)).c_str(), cfg.workers, span_ratios.c_str());
      std::fflush(stdout);
    }
  }
  out << "]}\n";
  std::printf("load average after: %.2f\n", LoadAverage());
  return FinishBench("bench_server", json, out.str(),
                     all_ok ? "" : "the thread counts' weights differ");
}

}  // namespace
}  // namespace sieve

int main(int argc, char** argv) { return sieve::Main(argc, argv); }
