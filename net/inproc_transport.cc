#include "net/inproc_transport.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <string>
#include <utility>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace sieve {

// One bound transport's receive queue.
struct InprocMailbox {
  Mutex mu;
  CondVar cv;
  std::deque<Frames> queue GUARDED_BY(mu);
  bool closed GUARDED_BY(mu) = false;
  int64_t max_message_bytes = 0;
};

struct InprocNetwork::State {
  Mutex mu;
  std::map<uint16_t, std::shared_ptr<InprocMailbox>> ports GUARDED_BY(mu);
  uint16_t next_port GUARDED_BY(mu) = 40000;
  uint64_t dropped GUARDED_BY(mu) = 0;

  std::shared_ptr<InprocMailbox> Find(uint16_t port) EXCLUDES(mu) {
    MutexLock lock(&mu);
    auto it = ports.find(port);
    return it == ports.end() ? nullptr : it->second;
  }
  void CountDrop() EXCLUDES(mu) {
    MutexLock lock(&mu);
    ++dropped;
  }
};

namespace {

class InprocTransport : public Transport {
 public:
  InprocTransport(std::shared_ptr<InprocNetwork::State> net, uint16_t port,
                  std::shared_ptr<InprocMailbox> box, uint64_t job)
      : net_(std::move(net)), port_(port), box_(std::move(box)), job_(job) {}
  ~InprocTransport() override { Close(); }

  const std::string& host() const override { return host_; }
  uint16_t port() const override { return port_; }

  Status Connect(int peer, const std::string& /*host*/, uint16_t port) override {
    MutexLock lock(&mu_);
    peers_[peer] = port;
    return Status::Ok();
  }
  void Disconnect(int peer) override {
    MutexLock lock(&mu_);
    peers_.erase(peer);
  }

  Status Send(int peer, Frames frames) override {
    uint16_t port = 0;
    {
      MutexLock lock(&mu_);
      if (closed_) return UnavailableError("transport closed");
      auto it = peers_.find(peer);
      if (it == peers_.end())
        return NotFoundError("never connected to node " + std::to_string(peer));
      port = it->second;
    }
    StampJob(&frames, job_.load(std::memory_order_relaxed));
    std::shared_ptr<InprocMailbox> to = net_->Find(port);
    if (to == nullptr) {
      net_->CountDrop();
      return Status::Ok();  // queued for a peer that is not there: lost, as with ZeroMQ
    }
    MutexLock lock(&to->mu);
    if (to->closed) {
      net_->CountDrop();
      return Status::Ok();
    }
    if (to->max_message_bytes > 0) {
      for (const auto& f : frames) {
        if (static_cast<int64_t>(f.size()) > to->max_message_bytes) {
          net_->CountDrop();
          return Status::Ok();
        }
      }
    }
    to->queue.push_back(std::move(frames));
    to->cv.NotifyOne();
    return Status::Ok();
  }
  Status TrySend(int peer, Frames frames) override { return Send(peer, std::move(frames)); }

  StatusOr<bool> Recv(Frames* frames, std::chrono::milliseconds timeout) override {
    MutexLock lock(&box_->mu);
    auto ready = [this] {
      box_->mu.AssertHeld();
      return box_->closed || !box_->queue.empty();
    };
    if (timeout < std::chrono::milliseconds::zero()) {  // kForever
      box_->cv.Wait(&box_->mu, ready);
    } else if (!box_->cv.WaitFor(&box_->mu, timeout, ready)) {
      return false;
    }
    if (box_->closed) return AbortedError("transport closed");
    *frames = std::move(box_->queue.front());
    box_->queue.pop_front();
    return true;
  }

  void SetJob(uint64_t job) override { job_.store(job, std::memory_order_relaxed); }

  void Close() override {
    {
      MutexLock lock(&mu_);
      if (closed_) return;
      closed_ = true;
    }
    {
      MutexLock lock(&net_->mu);
      net_->ports.erase(port_);
    }
    MutexLock lock(&box_->mu);
    box_->closed = true;
    box_->queue.clear();
    box_->cv.NotifyAll();
  }

 private:
  const std::shared_ptr<InprocNetwork::State> net_;
  const std::string host_ = "inproc";
  const uint16_t port_;
  const std::shared_ptr<InprocMailbox> box_;
  std::atomic<uint64_t> job_;  // stamped on every message sent (TransportOptions::job, SetJob)
  Mutex mu_;
  std::map<int, uint16_t> peers_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
};

StatusOr<std::unique_ptr<Transport>> CreateOn(const std::shared_ptr<InprocNetwork::State>& net,
                                              const TransportOptions& options) {
  auto box = std::make_shared<InprocMailbox>();
  box->max_message_bytes = options.max_message_bytes;
  uint16_t port = options.port;
  {
    MutexLock lock(&net->mu);
    if (port == 0) {
      while (net->ports.count(net->next_port) != 0) ++net->next_port;
      port = net->next_port++;
    } else if (net->ports.count(port) != 0) {
      return UnavailableError("inproc port " + std::to_string(port) + " is taken");
    }
    net->ports[port] = box;
  }
  return std::unique_ptr<Transport>(new InprocTransport(net, port, std::move(box), options.job));
}

}  // namespace

InprocNetwork::InprocNetwork() : state_(std::make_shared<State>()) {}

TransportFactory InprocNetwork::factory() const {
  return [net = state_](const TransportOptions& options) { return CreateOn(net, options); };
}

StatusOr<std::unique_ptr<Transport>> InprocNetwork::Create(const TransportOptions& options) const {
  return CreateOn(state_, options);
}

uint64_t InprocNetwork::dropped() const {
  MutexLock lock(&state_->mu);
  return state_->dropped;
}

}  // namespace sieve
