#include "deploy/local/status_query.h"

#include <random>
#include <utility>

#include "net/address.h"
#include "net/transport.h"
#include "proto/codec.h"
#include "proto/job_identity.h"
#include "proto/messages.h"
#include "proto/node_ids.h"

namespace sieve {

StatusOr<std::unique_ptr<StatusQuerier>> StatusQuerier::Create(const StatusQueryOptions& options) {
  std::string host;
  uint16_t port = 0;
  SIEVE_RETURN_IF_ERROR(ParseHostPort(options.scheduler, &host, &port));
  TransportOptions t;
  t.bind_host = options.bind;
  t.advertise_host = options.host;
  t.job = JobDigest(options.job_token);
  // A status of a large job is a few hundred KB: far below this.
  t.max_message_bytes = int64_t{16} << 20;
  auto transport = CreateTransport(t);
  if (!transport.ok()) return transport.status();
  SIEVE_RETURN_IF_ERROR((*transport)->Connect(kSchedulerId, host, port));
  return std::unique_ptr<StatusQuerier>(
      new StatusQuerier(options, std::move(transport).value(), t.job));
}

StatusQuerier::StatusQuerier(const StatusQueryOptions& options,
                             std::unique_ptr<Transport> transport, uint64_t job)
    : options_(options),
      transport_(std::move(transport)),
      job_(job),
      nonce_(std::random_device{}() | (uint64_t{std::random_device{}()} << 32)) {}

StatusQuerier::~StatusQuerier() { transport_->Close(); }

StatusOr<pb::JobStatus> StatusQuerier::Query() {
  const uint64_t nonce = ++nonce_;
  pb::Header q = MakeHeader(pb::MSG_STATUS_QUERY, /*sender=*/-1, kSchedulerId);
  q.mutable_status_query()->set_host(transport_->host());
  q.mutable_status_query()->set_port(transport_->port());
  q.mutable_status_query()->set_nonce(nonce);
  auto frames = EncodeControl(std::move(q));
  if (!frames.ok()) return frames.status();
  SIEVE_RETURN_IF_ERROR(transport_->Send(kSchedulerId, std::move(frames).value()));
  DecodeLimits limits;
  limits.job = job_;
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    Frames in;
    auto got = transport_->Recv(&in, left);
    if (!got.ok()) return got.status();
    if (!*got) break;
    Message msg;
    // Anything else arriving here (an answer to an earlier query, bytes of another job) is not
    // this query's answer.
    if (!Decode(std::move(in), limits, &msg).ok()) continue;
    if (msg.header.type() != pb::MSG_STATUS || msg.header.round() != nonce) continue;
    return msg.header.job_status();
  }
  std::string why("no status from the scheduler at ");
  why.append(options_.scheduler)
      .append(" within ")
      .append(std::to_string(options_.timeout.count()))
      .append(
          " ms (is it running? a job with a token answers only with --job_token_file; it must "
          "reach this command at ")
      .append(transport_->host())
      .append(":")
      .append(std::to_string(transport_->port()))
      .append(" (--host); a CURVE job answers only on its metrics endpoint: --metrics=HOST:PORT)");
  return DeadlineExceededError(why);
}

}  // namespace sieve
