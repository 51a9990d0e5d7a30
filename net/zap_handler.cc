#include "net/zap_handler.h"

#include <zmq_addon.hpp>

namespace sieve {

ZapHandler::ZapHandler(zmq::context_t& ctx, std::set<std::string> allowed)
    : socket_(ctx, zmq::socket_type::rep), allowed_(std::move(allowed)) {}

StatusOr<std::unique_ptr<ZapHandler>> ZapHandler::Start(
    zmq::context_t& ctx, const std::vector<std::string>& allowed_z85) {
  std::unique_ptr<ZapHandler> h(
      new ZapHandler(ctx, std::set<std::string>(allowed_z85.begin(), allowed_z85.end())));
  try {
    h->socket_.set(zmq::sockopt::linger, 0);
    h->socket_.bind("inproc://zeromq.zap.01");
  } catch (const zmq::error_t& e) {
    return UnavailableError(std::string("ZAP handler: ") + e.what());
  }
  h->thread_ = std::thread([p = h.get()] { p->Loop(); });
  return h;
}

ZapHandler::~ZapHandler() { Stop(); }

void ZapHandler::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  socket_.close();
}

void ZapHandler::Loop() {
  while (!stop_) {
    try {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
      std::vector<zmq::message_t> req;
      if (!zmq::recv_multipart(socket_, std::back_inserter(req), zmq::recv_flags::dontwait))
        continue;
      // Request: version, request id, domain, address, identity, mechanism, credentials...
      bool ok = false;
      std::string key;  // the client's public key in Z85
      if (req.size() >= 7 && req[5].to_string() == "CURVE" && req[6].size() == 32) {
        char z85[41];
        if (zmq_z85_encode(z85, static_cast<const uint8_t*>(req[6].data()), 32) != nullptr) {
          key.assign(z85, 40);
          ok = allowed_.count(key) > 0;
        }
      }
      (ok ? accepted_ : denied_).fetch_add(1);
      std::vector<zmq::message_t> reply;
      reply.emplace_back(std::string("1.0"));
      reply.emplace_back(req.size() > 1 ? req[1].to_string() : std::string());
      reply.emplace_back(std::string(ok ? "200" : "400"));
      reply.emplace_back(std::string(ok ? "OK" : "client key not allowed"));
      reply.emplace_back(ok ? key : std::string());  // user id: every message's "User-Id"
      reply.emplace_back(std::string());             // metadata
      zmq::send_multipart(socket_, reply);
    } catch (const zmq::error_t&) {
      return;  // context terminated
    }
  }
}

}  // namespace sieve
