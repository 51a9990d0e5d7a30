#include "bench/rawzmq/raw_round_trips.h"

#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace sieve {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRecvTimeoutMs = 30000;  // a lost message fails the run instead of hanging it

struct RawNode {
  zmq::context_t ctx{1};
  zmq::socket_t pull{ctx, zmq::socket_type::pull};
  std::string endpoint;
  RawNode() {
    pull.set(zmq::sockopt::linger, 0);
    pull.set(zmq::sockopt::rcvhwm, 0);
    pull.set(zmq::sockopt::rcvtimeo, kRecvTimeoutMs);
    pull.bind("tcp://127.0.0.1:*");
    endpoint = pull.get(zmq::sockopt::last_endpoint);
  }
};

zmq::socket_t ConnectPush(zmq::context_t& ctx, const std::string& endpoint) {
  zmq::socket_t s(ctx, zmq::socket_type::push);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::sndhwm, 1000);
  s.connect(endpoint);
  return s;
}

// Fixed send buffers: n pairs with finite values.
struct Pairs {
  std::vector<uint32_t> indices;
  std::vector<float> values;
  explicit Pairs(size_t n) : indices(n), values(n) {
    for (size_t i = 0; i < n; ++i) {
      indices[i] = static_cast<uint32_t>(8 * i);
      values[i] = static_cast<float>(i % 1000) * 1e-6f;
    }
  }
  size_t bytes() const { return 32 + 8 * indices.size(); }
};

// Sends [header][indices][values] without copying: ZeroMQ gets pointers into fixed buffers.
bool SendPairs(zmq::socket_t& s, const uint32_t* header, const Pairs& p) {
  zmq::message_t h(const_cast<uint32_t*>(header), 32, nullptr);
  zmq::message_t i(const_cast<uint32_t*>(p.indices.data()), 4 * p.indices.size(), nullptr);
  zmq::message_t v(const_cast<float*>(p.values.data()), 4 * p.values.size(), nullptr);
  return s.send(h, zmq::send_flags::sndmore) && s.send(i, zmq::send_flags::sndmore) &&
         s.send(v, zmq::send_flags::none);
}

}  // namespace

RawRoundTripResult RunRawRoundTrips(const RawRoundTripConfig& c) {
  const Pairs up(c.up_pairs), down(c.down_pairs);
  std::vector<std::unique_ptr<RawNode>> servers, workers;
  for (int s = 0; s < c.servers; ++s) servers.push_back(std::make_unique<RawNode>());
  for (int w = 0; w < c.workers; ++w) workers.push_back(std::make_unique<RawNode>());
  // to_server[w][s] lives in worker w's context, to_worker[s][w] in server s's.
  std::vector<std::vector<zmq::socket_t>> to_server(c.workers), to_worker(c.servers);
  for (int w = 0; w < c.workers; ++w) {
    for (int s = 0; s < c.servers; ++s) {
      to_server[w].push_back(ConnectPush(workers[w]->ctx, servers[s]->endpoint));
    }
  }
  for (int s = 0; s < c.servers; ++s) {
    for (int w = 0; w < c.workers; ++w) {
      to_worker[s].push_back(ConnectPush(servers[s]->ctx, workers[w]->endpoint));
    }
  }
  // Header word 0 names the sender: worker w sends w + 1, servers send 0.
  std::vector<std::array<uint32_t, 8>> headers(c.workers + 1);
  for (int w = 0; w <= c.workers; ++w) headers[w].fill(static_cast<uint32_t>(w));
  const int per_worker = c.warmup + c.rounds;
  std::atomic<bool> failed{false};
  Clock::time_point t0;
  std::barrier start(c.workers, [&]() noexcept { t0 = Clock::now(); });
  std::vector<std::thread> threads;
  for (int s = 0; s < c.servers; ++s) {
    threads.emplace_back([&, s] {
      for (int n = 0; n < per_worker * c.workers && !failed; ++n) {
        std::vector<zmq::message_t> in;
        if (!zmq::recv_multipart(servers[s]->pull, std::back_inserter(in)) || in.size() != 3) {
          failed = true;
          return;
        }
        uint32_t w;
        std::memcpy(&w, in[0].data(), 4);
        if (w < 1 || w > static_cast<uint32_t>(c.workers) ||
            !SendPairs(to_worker[s][w - 1], headers[0].data(), down)) {
          failed = true;
          return;
        }
      }
    });
  }
  for (int w = 0; w < c.workers; ++w) {
    threads.emplace_back([&, w] {
      bool arrived = false;
      for (int r = 0; r < per_worker && !failed; ++r) {
        if (r == c.warmup) {
          start.arrive_and_wait();
          arrived = true;
        }
        bool ok = true;
        for (int s = 0; s < c.servers && ok; ++s) {
          ok = SendPairs(to_server[w][s], headers[w + 1].data(), up);
        }
        for (int s = 0; s < c.servers && ok; ++s) {
          std::vector<zmq::message_t> in;
          ok = zmq::recv_multipart(workers[w]->pull, std::back_inserter(in)).has_value();
        }
        if (!ok) {
          failed = true;
          break;
        }
      }
      if (!arrived) start.arrive_and_drop();  // failed before the barrier: do not hold the others
    });
  }
  // Workers first (they end the timed section), then servers.
  for (int i = c.servers; i < static_cast<int>(threads.size()); ++i) threads[i].join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int i = 0; i < c.servers; ++i) threads[i].join();
  RawRoundTripResult r;
  r.seconds = seconds;
  r.round_trips = static_cast<uint64_t>(c.rounds) * c.workers;
  r.bytes = r.round_trips * c.servers * (up.bytes() + down.bytes());
  r.ok = !failed;
  return r;
}

}  // namespace sieve
