// A test seam of the push/pull client (not installed): PsClient::Connect over transports a test
// provides, e.g. an InprocNetwork's (net/inproc_transport.h), so that the client's reply
// collection (stale rounds, duplicates, ERRORs, resends, deadlines) is unit-tested against a
// server the test plays.
#ifndef SIEVE_WORKER_CLIENT_PS_CLIENT_TESTING_H_
#define SIEVE_WORKER_CLIENT_PS_CLIENT_TESTING_H_

#include <memory>

#include "net/transport.h"
#include "worker/client/ps_client.h"

namespace sieve {

class PsClientTesting {
 public:
  // PsClient::Connect, with every transport made by `factory` (nullptr: ZeroMQ). Errors as
  // PsClient::Connect.
  static StatusOr<std::unique_ptr<PsClient>> Connect(const PsClientOptions& options,
                                                     TransportFactory factory);
};

}  // namespace sieve

#endif  // SIEVE_WORKER_CLIENT_PS_CLIENT_TESTING_H_
