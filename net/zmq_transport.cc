// ZeroMQ implementation of Transport: one PULL socket bound for everything this node receives,
// one PUSH socket connected per peer. A private zmq::context_t per transport (no global state).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <zmq_addon.hpp>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "net/accept_guard.h"
#include "net/address.h"
#include "net/transport.h"
#include "net/zap_handler.h"

namespace sieve {
namespace {

// How long at most a TrySend waits for another send on the same connection to hand its frames
// over (never for queue space): microseconds, unless the other thread is descheduled meanwhile.
// Two threads send to one peer (the I/O thread's ERRORs, the owner's replies); without the wait
// an ERROR racing a reply was dropped.
constexpr std::chrono::milliseconds kTrySendPatience{250};

class ZmqTransport final : public Transport {
 public:
  ZmqTransport(const TransportOptions& options)
      : options_(options), job_(options.job), pull_(ctx_, zmq::socket_type::pull) {}

  ~ZmqTransport() override {
    Close();
    if (guard_) guard_->Stop();
    {
      MutexLock lock(&peers_mu_);
      peers_.clear();
    }
    pull_.close();
    if (zap_) zap_->Stop();
  }

  uint64_t auth_accepted() const override { return zap_ ? zap_->accepted() : 0; }
  uint64_t auth_denied() const override { return zap_ ? zap_->denied() : 0; }
  uint64_t refused_at_fd_limit() const override { return guard_ ? guard_->refused() : 0; }

  Status Bind() {
    if (options_.curve.enabled) {
      SIEVE_ASSIGN_OR_RETURN(auto zap, ZapHandler::Start(ctx_, options_.curve.allowed_clients));
      zap_ = std::move(zap);
    }
    try {
      if (options_.curve.enabled) {
        pull_.set(zmq::sockopt::zap_domain, "sieve");
        pull_.set(zmq::sockopt::curve_server, true);
        pull_.set(zmq::sockopt::curve_secretkey, options_.curve.server.secret_key);
      }
      pull_.set(zmq::sockopt::linger, 0);
      pull_.set(zmq::sockopt::rcvhwm, 0);
      pull_.set(zmq::sockopt::handshake_ivl, static_cast<int>(options_.handshake_timeout.count()));
      if (options_.idle_timeout > std::chrono::milliseconds::zero()) {
        const int idle = static_cast<int>(options_.idle_timeout.count());
        pull_.set(zmq::sockopt::heartbeat_ivl, std::max(1, idle / 4));
        pull_.set(zmq::sockopt::heartbeat_timeout, idle);
      }
      if (options_.max_message_bytes > 0) {
        pull_.set(zmq::sockopt::maxmsgsize, options_.max_message_bytes);
      }
      const std::string port = options_.port == 0 ? "*" : std::to_string(options_.port);
      SIEVE_ASSIGN_OR_RETURN(guard_, AcceptGuard::Start(ctx_, pull_));  // before the bind
      pull_.bind("tcp://" + options_.bind_host + ":" + port);
      const std::string endpoint = pull_.get(zmq::sockopt::last_endpoint);
      port_ = static_cast<uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
    } catch (const zmq::error_t& e) {
      return UnavailableError("cannot bind tcp://" + options_.bind_host + ":" +
                              std::to_string(options_.port) + ": " + e.what());
    } catch (const std::exception& e) {
      return InternalError(std::string("bind: ") + e.what());
    }
    host_ = options_.advertise_host;
    if (host_.empty()) {
      host_ = (options_.bind_host == "0.0.0.0" || options_.bind_host == "*") ? DetectHost()
                                                                             : options_.bind_host;
    }
    return Status::Ok();
  }

  const std::string& host() const override { return host_; }
  uint16_t port() const override { return port_; }

  Status Connect(int peer, const std::string& host, uint16_t port) override {
    std::shared_ptr<Peer> p;
    try {
      p = std::make_shared<Peer>(ctx_);
      MutexLock setup(&p->mu);  // uncontended: p is not shared yet
      p->socket.set(zmq::sockopt::linger, 2000);
      p->socket.set(zmq::sockopt::sndtimeo, static_cast<int>(options_.send_timeout.count()));
      p->socket.set(zmq::sockopt::sndhwm, options_.send_hwm);
      p->socket.set(zmq::sockopt::handshake_ivl,
                    static_cast<int>(options_.handshake_timeout.count()));
      if (options_.curve.enabled) {
        p->socket.set(zmq::sockopt::curve_serverkey, options_.curve.server.public_key);
        p->socket.set(zmq::sockopt::curve_publickey, options_.curve.client.public_key);
        p->socket.set(zmq::sockopt::curve_secretkey, options_.curve.client.secret_key);
      }
      p->socket.connect("tcp://" + host + ":" + std::to_string(port));
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return UnavailableError("transport closed");
      return InvalidArgumentError("cannot connect to " + host + ":" + std::to_string(port) + ": " +
                                  e.what());
    }
    MutexLock lock(&peers_mu_);
    if (closed_) return UnavailableError("transport closed");
    peers_[peer] = std::move(p);
    return Status::Ok();
  }

  void Disconnect(int peer) override {
    MutexLock lock(&peers_mu_);
    peers_.erase(peer);
  }

  Status Send(int peer, Frames frames) override { return SendFrames(peer, &frames, true); }
  Status TrySend(int peer, Frames frames) override { return SendFrames(peer, &frames, false); }

  StatusOr<bool> Recv(Frames* frames, std::chrono::milliseconds timeout) override {
    try {
      zmq::pollitem_t item{pull_.handle(), 0, ZMQ_POLLIN, 0};
      const int n = zmq::poll(&item, 1, timeout);  // a negative timeout (kForever) waits forever
      if (n == 0) return false;
      frames->clear();
      auto got = zmq::recv_multipart(pull_, std::back_inserter(*frames), zmq::recv_flags::dontwait);
      return got.has_value();
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return AbortedError("transport closed");
      return UnavailableError(std::string("recv: ") + e.what());
    }
  }

  void SetJob(uint64_t job) override { job_.store(job, std::memory_order_relaxed); }

  void Close() override {
    {
      MutexLock lock(&peers_mu_);
      if (closed_) return;
      closed_ = true;
    }
    ctx_.shutdown();  // wakes a blocked Recv with ETERM
  }

 private:
  // Send (wait: up to send_timeout for queue space) or TrySend (no wait for queue space).
  Status SendFrames(int peer, Frames* frames, bool wait) EXCLUDES(peers_mu_) {
    std::shared_ptr<Peer> p;
    {
      MutexLock lock(&peers_mu_);
      if (closed_) return UnavailableError("transport closed");
      auto it = peers_.find(peer);
      if (it == peers_.end()) return NotFoundError("no connection to node " + std::to_string(peer));
      p = it->second;
    }
    StampJob(frames, job_.load(std::memory_order_relaxed));
    if (wait) {
      p->mu.Lock();
    } else if (!TryLockBriefly(p.get())) {
      return UnavailableError("another send to node " + std::to_string(peer) +
                              " is waiting; message dropped");
    }
    MutexLock lock(&p->mu, std::adopt_lock);
    try {
      for (size_t i = 0; i < frames->size(); ++i) {
        auto flags = i + 1 < frames->size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
        // Only the first frame can block: ZeroMQ queues a multipart message atomically. A Send
        // first tries without waiting, and says it waits (Peer::waiting) before it does.
        bool sent;
        if (i == 0) {
          sent = p->socket.send((*frames)[i], flags | zmq::send_flags::dontwait).has_value();
          if (!sent && wait) {
            p->waiting.store(true, std::memory_order_release);
            sent = p->socket.send((*frames)[i], flags).has_value();
            p->waiting.store(false, std::memory_order_release);
          }
        } else {
          sent = p->socket.send((*frames)[i], flags).has_value();
        }
        if (!sent) {
          if (!wait) {
            return UnavailableError("send queue to node " + std::to_string(peer) +
                                    " full; message dropped");
          }
          return DeadlineExceededError("send queue to node " + std::to_string(peer) + " full for " +
                                       std::to_string(options_.send_timeout.count()) + " ms");
        }
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return UnavailableError("transport closed");
      return UnavailableError("send to node " + std::to_string(peer) + ": " + e.what());
    }
    return Status::Ok();
  }

  struct Peer {
    explicit Peer(zmq::context_t& ctx) : socket(ctx, zmq::socket_type::push) {}
    Mutex mu;  // held by the one send in progress on this connection
    zmq::socket_t socket GUARDED_BY(mu);
    std::atomic<bool> waiting{false};  // the holder of mu waits for queue space
  };

  // TrySend's hold on p: taken when free, or as soon as a send that holds it only to hand its
  // frames to ZeroMQ (microseconds) lets go, within kTrySendPatience; never while the holder
  // waits for queue space (a peer that does not read): then false at once.
  static bool TryLockBriefly(Peer* p) TRY_ACQUIRE(true, p->mu) {
    const auto deadline = std::chrono::steady_clock::now() + kTrySendPatience;
    for (;;) {
      if (p->mu.TryLock()) return true;
      if (p->waiting.load(std::memory_order_acquire) ||
          std::chrono::steady_clock::now() >= deadline) {
        return false;
      }
      std::this_thread::yield();
    }
  }

  const TransportOptions options_;
  std::atomic<uint64_t> job_;  // stamped on every message sent (options.job, SetJob)
  zmq::context_t ctx_;
  zmq::socket_t pull_;
  std::unique_ptr<ZapHandler> zap_;     // CURVE allow-list; stopped before ctx_ goes
  std::unique_ptr<AcceptGuard> guard_;  // no accept spin at the fd limit; stopped before ctx_ goes
  std::string host_;
  uint16_t port_ = 0;
  Mutex peers_mu_;
  bool closed_ GUARDED_BY(peers_mu_) = false;
  std::map<int, std::shared_ptr<Peer>> peers_ GUARDED_BY(peers_mu_);
};

}  // namespace

std::string PeerKey(const Frames& frames) {
  if (frames.empty()) return std::string();
  const char* user = zmq_msg_gets(frames[0].handle(), "User-Id");
  return user == nullptr ? std::string() : std::string(user);
}

StatusOr<std::unique_ptr<Transport>> CreateTransport(const TransportOptions& options) {
  if (options.factory) return options.factory(options);
  return CreateZmqTransport(options);
}

StatusOr<std::unique_ptr<Transport>> CreateZmqTransport(const TransportOptions& options) {
  auto t = std::make_unique<ZmqTransport>(options);
  SIEVE_RETURN_IF_ERROR(t->Bind());
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace sieve
