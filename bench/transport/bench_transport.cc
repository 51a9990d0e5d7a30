// Transport benchmark: sparse push+pull round trips through sieve's Transport + codec against raw
// ZeroMQ moving the same bytes with the same socket pattern, in the same run.
//
// Pattern (both paths): one server thread and W worker threads, each with its own ZeroMQ context
// and one PULL socket bound on 127.0.0.1; every worker has a PUSH connected to the server's PULL
// and the server one PUSH per worker. A round trip: the worker sends k (index, value) pairs, the
// server receives them and replies with k pairs, the worker receives the reply.
//  - sieve:  EncodeData(PUSH) -> Transport::Send; the server Transport::Recv + Decode (full
//            validation: header, sizes, index order and bound, finiteness, and the CRC-32C when
//            the checksum is on) and replies EncodeData(UPDATE); the worker decodes the reply the
//            same way. Values and indices are lent zero-copy, as the worker and server do.
//  - raw:    [32-byte header][4k bytes][4k bytes] multipart, sent zero-copy from fixed buffers, no
//            validation: the ceiling of the socket pattern.
// Bytes counted per round trip: every frame of the push and of the reply.
//
// Each (k, W) runs each path 3 times, interleaved, after 3 untimed warm-up round trips per
// worker; the median run is reported (the machine may be shared).
// Allocator: every received frame is a fresh heap block (ZeroMQ allocates it). With glibc's
// adaptive thresholds, blocks of 100s of KiB flip between reused pages and freshly mapped or
// trimmed ones, whose page faults (and TLB shootdowns) cost more than the copy itself on a VM and
// land at random on either path. By default (--pin_malloc=1) the process fixes the mmap threshold
// at 32 MiB and turns trimming off, for both paths alike; --pin_malloc=0 keeps glibc's defaults.
// Usage: bench_transport [--k=1000,10000,100000,1000000] [--workers=1,2,4,8] [--seconds=0.5]
//                        [--pin_malloc=1] [--json=PATH]
// Prints the CRC-32C routine this CPU uses, then one table row per (k, W): round trips/s and GB/s
// of raw, sieve with checksum, sieve without, and the ratios to raw. The JSON holds the same rows.
#include <malloc.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "bench/common/bench_end.h"
#include "bench/common/flag_value.h"
#include "bench/rawzmq/raw_round_trips.h"
#include "net/transport.h"
#include "proto/codec.h"
#include "proto/crc32c.h"
#include "proto/messages.h"

namespace sieve {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWarmup = 3;   // untimed round trips per worker (connections, first allocations)
constexpr int kRepeats = 3;  // each path runs this often, interleaved; the median is reported

struct Payload {
  std::vector<uint32_t> indices;
  std::vector<float> values;
  uint64_t shard_length = 0;
};

// k strictly increasing indices spread over a shard 8x larger, finite values.
std::shared_ptr<Payload> MakePayload(size_t k) {
  auto p = std::make_shared<Payload>();
  p->shard_length = 8 * static_cast<uint64_t>(k);
  p->indices.resize(k);
  p->values.resize(k);
  for (size_t i = 0; i < k; ++i) {
    p->indices[i] = static_cast<uint32_t>(8 * i + (i * 2654435761u) % 8);
    p->values[i] = static_cast<float>(std::sin(static_cast<double>(i)) * 1e-3);
  }
  return p;
}

size_t FramesBytes(const Frames& frames) {
  size_t n = 0;
  for (const auto& f : frames) n += f.size();
  return n;
}

struct Result {
  double seconds = 0;
  uint64_t round_trips = 0;
  uint64_t bytes = 0;
  bool ok = true;
  std::string error;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "bench_transport: %s\n", what.c_str());
  std::exit(1);
}

// ---- sieve path ---------------------------------------------------------------------------------

Result RunSieve(size_t k, int workers, int rounds, bool checksum) {
  auto payload = MakePayload(k);
  const std::vector<uint64_t> shard_lengths = {payload->shard_length};
  TransportOptions to;
  to.bind_host = "127.0.0.1";
  to.advertise_host = "127.0.0.1";
  auto server_or = CreateZmqTransport(to);
  if (!server_or.ok()) Die(server_or.status().ToString());
  std::unique_ptr<Transport> server = std::move(server_or).value();
  std::vector<std::unique_ptr<Transport>> wt;
  for (int w = 0; w < workers; ++w) {
    auto t = CreateZmqTransport(to);
    if (!t.ok()) Die(t.status().ToString());
    wt.push_back(std::move(t).value());
    if (!wt.back()->Connect(0, "127.0.0.1", server->port()).ok()) Die("connect to server");
    if (!server->Connect(1 + w, "127.0.0.1", wt.back()->port()).ok()) Die("connect to worker");
  }
  EncodeOptions eo;
  eo.checksum = checksum;
  auto encode = [&](pb::MsgType type, int sender, int round) {
    pb::Header h = MakeDataHeader(type, sender, kNoRecipient, 0, round);
    DataPayload p;
    p.indices = payload->indices;
    p.values = std::as_bytes(std::span<const float>(payload->values));
    p.keepalive = payload;
    auto frames = EncodeData(h, p, eo);
    if (!frames.ok()) Die(frames.status().ToString());
    return std::move(frames).value();
  };
  DecodeLimits limits;
  limits.shard_lengths = shard_lengths;
  limits.verify_checksum = checksum;

  const int total = (kWarmup + rounds) * workers;
  std::atomic<uint64_t> bytes{0};
  std::atomic<bool> failed{false};
  Clock::time_point t0;
  std::barrier start(workers, [&]() noexcept {
    bytes = 0;
    t0 = Clock::now();
  });
  // Receives and fully validates one message of k pairs; false on timeout or any error.
  auto receive = [&](Transport& t, Message* m) {
    Frames in;
    auto got = t.Recv(&in, std::chrono::milliseconds(30000));
    if (!got.ok() || !*got) return false;
    return Decode(std::move(in), limits, m).ok() && m->values.size() == k;
  };
  std::thread server_thread([&] {
    for (int n = 0; n < total && !failed; ++n) {
      Message m;
      if (!receive(*server, &m)) {
        failed = true;
        return;
      }
      Frames reply = encode(pb::MSG_UPDATE, 0, static_cast<int>(m.header.round()));
      if (m.header.round() >= kWarmup) bytes += FramesBytes(m.storage) + FramesBytes(reply);
      if (!server->Send(m.header.sender(), std::move(reply)).ok()) failed = true;
    }
  });
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      int r = 0;
      for (; r < kWarmup + rounds && !failed; ++r) {
        if (r == kWarmup) start.arrive_and_wait();
        Message m;
        if (!wt[w]->Send(0, encode(pb::MSG_PUSH, 1 + w, r)).ok() || !receive(*wt[w], &m)) {
          failed = true;
          break;
        }
      }
      if (r < kWarmup) start.arrive_and_drop();  // failed early: do not hold the others
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  server_thread.join();
  for (auto& t : wt) t->Close();
  server->Close();
  Result r;
  r.seconds = seconds;
  r.round_trips = static_cast<uint64_t>(rounds) * workers;
  r.bytes = bytes;
  r.ok = !failed;
  if (failed) r.error = "sieve path failed (timeout or decode error)";
  return r;
}

// ---- raw ZeroMQ path: bench/rawzmq, one server --------------------------------------------------

Result RunRaw(size_t k, int workers, int rounds) {
  RawRoundTripConfig c;
  c.workers = workers;
  c.servers = 1;
  c.up_pairs = k;
  c.down_pairs = k;
  c.rounds = rounds;
  c.warmup = kWarmup;
  const RawRoundTripResult raw = RunRawRoundTrips(c);
  Result r;
  r.seconds = raw.seconds;
  r.round_trips = raw.round_trips;
  r.bytes = raw.bytes;
  r.ok = raw.ok;
  if (!raw.ok) r.error = "raw path failed";
  return r;
}

// ---- driver -------------------------------------------------------------------------------------

// The run with the median time (an error in any run marks the result failed).
Result Median(std::vector<Result> runs) {
  bool ok = true;
  for (const auto& r : runs) ok = ok && r.ok;
  std::sort(runs.begin(), runs.end(),
            [](const Result& a, const Result& b) { return a.seconds < b.seconds; });
  Result m = runs[runs.size() / 2];
  m.ok = ok;
  if (!ok && m.error.empty()) m.error = "a repetition failed";
  return m;
}

std::vector<double> ParseList(const std::string& text) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stod(item));
  return out;
}

std::string FlagValue(int argc, char** argv, const std::string& name, const std::string& dflt) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
  }
  return dflt;
}

int Main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0) {
      std::puts(
          "usage: bench_transport [--k=1000,10000,100000,1000000] [--workers=1,2,4,8]\n"
          "                       [--seconds=0.5] [--pin_malloc=1] [--json=PATH]");
      return 0;
    }
  }
  const auto ks = ParseList(FlagValue(argc, argv, "k", "1000,10000,100000,1000000"));
  const auto ws = ParseList(FlagValue(argc, argv, "workers", "1,2,4,8"));
  const double target_s = std::stod(FlagValue(argc, argv, "seconds", "0.5"));
  const std::string json_path = FlagValue(argc, argv, "json", "");
  const bool pin_malloc = FlagValue(argc, argv, "pin_malloc", "1") != "0";
  if (pin_malloc && (mallopt(M_MMAP_THRESHOLD, 32 << 20) != 1 ||
                     mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max()) != 1)) {
    Die("mallopt refused the allocator settings");
  }

  const char* crc_path = Crc32cPathName(Crc32cBestPath());
  std::printf("checksum: CRC-32C (%s); allocator: %s\n", crc_path,
              pin_malloc ? "pinned (mmap threshold 32 MiB, no trim)" : "glibc defaults");
  std::ostringstream json;
  json << "{\"benchmark\":\"transport\",\"crc32c_path\":\"" << crc_path
       << "\",\"pin_malloc\":" << (pin_malloc ? "true" : "false") << ",\"rows\":[";
  std::printf("%-9s %-3s %12s %9s %12s %9s %7s %12s %9s %7s\n", "k", "W", "raw rt/s", "raw GB/s",
              "sieve rt/s", "GB/s", "ratio", "nocrc rt/s", "GB/s", "ratio");
  bool first = true;
  for (double kd : ks) {
    for (double wd : ws) {
      const size_t k = static_cast<size_t>(kd);
      const int w = static_cast<int>(wd);
      // Calibrate the round count on a short raw run so each measurement lasts ~target_s.
      const Result probe = RunRaw(k, w, 10);
      const double per_round = probe.seconds / 10.0;
      const int rounds =
          std::clamp(static_cast<int>(target_s / std::max(per_round, 1e-6)), 5, 20000);
      std::vector<Result> raws, crcs, nocrcs;
      for (int rep = 0; rep < kRepeats; ++rep) {
        raws.push_back(RunRaw(k, w, rounds));
        crcs.push_back(RunSieve(k, w, rounds, true));
        nocrcs.push_back(RunSieve(k, w, rounds, false));
      }
      const Result raw = Median(raws), crc = Median(crcs), nocrc = Median(nocrcs);
      auto rts = [](const Result& r) { return r.round_trips / r.seconds; };
      auto gbs = [](const Result& r) { return r.bytes / r.seconds / 1e9; };
      std::printf("%-9zu %-3d %12.0f %9.3f %12.0f %9.3f %6.0f%% %12.0f %9.3f %6.0f%%\n", k, w,
                  rts(raw), gbs(raw), rts(crc), gbs(crc), 100 * gbs(crc) / gbs(raw), rts(nocrc),
                  gbs(nocrc), 100 * gbs(nocrc) / gbs(raw));
      std::fflush(stdout);
      if (!crc.ok || !nocrc.ok)
        std::fprintf(stderr, "k=%zu W=%d: %s %s\n", k, w, crc.error.c_str(), nocrc.error.c_str());
      json << (first ? "" : ",") << "{\"k\":" << k << ",\"workers\":" << w
           << ",\"rounds_per_worker\":" << rounds
           << ",\"bytes_per_round_trip\":" << (raw.round_trips ? raw.bytes / raw.round_trips : 0)
           << ",\"raw_round_trips_per_s\":" << rts(raw) << ",\"raw_gbytes_per_s\":" << gbs(raw)
           << ",\"sieve_round_trips_per_s\":" << rts(crc) << ",\"sieve_gbytes_per_s\":" << gbs(crc)
           << ",\"sieve_ratio\":" << gbs(crc) / gbs(raw)
           << ",\"sieve_nocrc_round_trips_per_s\":" << rts(nocrc)
           << ",\"sieve_nocrc_gbytes_per_s\":" << gbs(nocrc)
           << ",\"sieve_nocrc_ratio\":" << gbs(nocrc) / gbs(raw)
           << ",\"ok\":" << (crc.ok && nocrc.ok ? "true" : "false") << "}";
      first = false;
    }
  }
  json << "]}\n";
  return FinishBench("bench_transport", json_path, json.str(), "");
}

}  // namespace
}  // namespace sieve

int main(int argc, char** argv) { return sieve::Main(argc, argv); }
