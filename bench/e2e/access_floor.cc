// bench_access_floor: what one sparse BSP round must cost a server on this machine, whatever the
// implementation. A round updates the union of the workers' pushes at scattered indices of the
// shard: w[i] -= sum/n, and reads w[i] back for the reply. This program does exactly that on a
// D-float array allocated like the server's shard (HugePageVector), for `pairs` sorted distinct
// random indices per round, and reports the CPU time (this thread's clock) per round twice:
//   busy: the read-modify-writes alone, back to back;
//   idle: the same after sleeping --idle_ms first, as a server does between rounds (the wake-up
//         and the caches, TLB and page tables left cold by other processes count).
// The growth of these figures with D is the memory system's share of the server's growth
// (docs/results.md, "Server CPU"). Output: one JSON line on stdout.
#include <gflags/gflags.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "base/huge_page_allocator.h"

DEFINE_uint64(num_params, 100000000, "D: floats in the array (the shard)");
DEFINE_uint64(pairs, 20000, "indices updated per round (the union of the workers' pushes)");
DEFINE_int32(rounds, 20, "rounds measured for each of busy and idle");
DEFINE_int32(idle_ms, 400, "sleep before each idle round (the server's wall time per round)");
DEFINE_uint64(seed, 1, "random seed of the indices");

namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Figures {
  double mean_ms = 0;
  double median_ms = 0;
};

Figures Measure(sieve::HugePageVector<float>& w, std::chrono::milliseconds idle,
                std::mt19937_64& rng) {
  std::uniform_int_distribution<uint64_t> pick(0, w.size() - 1);
  std::vector<uint32_t> idx;
  std::vector<float> sums(FLAGS_pairs), reply(FLAGS_pairs);
  for (size_t j = 0; j < sums.size(); ++j) sums[j] = 1e-3f * static_cast<float>(j % 17);
  std::vector<double> ms;
  for (int r = 0; r < FLAGS_rounds; ++r) {
    idx.clear();
    for (uint64_t j = 0; j < FLAGS_pairs; ++j) idx.push_back(static_cast<uint32_t>(pick(rng)));
    std::sort(idx.begin(), idx.end());
    idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
    const double t0 = ThreadCpuSeconds();
    if (idle > std::chrono::milliseconds::zero()) std::this_thread::sleep_for(idle);
    const float inv_n = 0.5f;
    for (size_t j = 0; j < idx.size(); ++j) {
      const uint32_t i = idx[j];
      w[i] -= sums[j] * inv_n;
      reply[j] = w[i];
    }
    ms.push_back(1e3 * (ThreadCpuSeconds() - t0));
  }
  volatile float sink = reply[0];
  (void)sink;
  Figures f;
  for (double v : ms) f.mean_ms += v / static_cast<double>(ms.size());
  std::sort(ms.begin(), ms.end());
  f.median_ms = ms[ms.size() / 2];
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "bench_access_floor [--num_params=D] [--pairs=K] [--rounds=R] [--idle_ms=MS]: CPU per "
      "sparse server round that the memory system alone costs (one JSON line)");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_num_params < 1 || FLAGS_num_params > (uint64_t{1} << 32) || FLAGS_pairs < 1 ||
      FLAGS_rounds < 1 || FLAGS_idle_ms < 0) {
    std::fprintf(stderr,
                 "bench_access_floor: need 1 <= --num_params <= 2^32, --pairs >= 1, "
                 "--rounds >= 1, --idle_ms >= 0\n");
    return 2;
  }
  sieve::HugePageVector<float> w(FLAGS_num_params);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1e-6f * static_cast<float>(i % 1000);
  std::mt19937_64 rng(FLAGS_seed);
  const Figures busy = Measure(w, std::chrono::milliseconds::zero(), rng);
  const Figures idle = Measure(w, std::chrono::milliseconds(FLAGS_idle_ms), rng);
  std::printf(
      "{\"d\": %llu, \"pairs\": %llu, \"rounds\": %d, \"idle_ms\": %d, \"busy_ms\": %.4f, "
      "\"busy_median_ms\": %.4f, \"idle_ms_per_round\": %.4f, \"idle_median_ms\": %.4f}\n",
      static_cast<unsigned long long>(FLAGS_num_params),
      static_cast<unsigned long long>(FLAGS_pairs), FLAGS_rounds, FLAGS_idle_ms, busy.mean_ms,
      busy.median_ms, idle.mean_ms, idle.median_ms);
  return 0;
}
