// ServerLink: what a server's message handling needs of the node that carries it — its own id, the
// worker id arithmetic and two sends. sieve-server adapts its Node to it; unit tests pass a
// recorder, so the dispatch and reply encoding run without sockets or processes.
//
// Thread-safety: as the implementation's; ShardService calls it from one thread at a time.
#ifndef SIEVE_SERVER_SERVER_LINK_H_
#define SIEVE_SERVER_SERVER_LINK_H_

#include <cstdint>
#include <string>

#include "base/status.h"
#include "proto/codec.h"
#include "proto/sieve.pb.h"

namespace sieve {

class ServerLink {
 public:
  virtual ~ServerLink() = default;

  virtual int id() const = 0;                  // this server's node id (a header's sender)
  virtual int WorkerId(int rank) const = 0;    // node id of worker `rank`
  virtual int WorkerRankOf(int id) const = 0;  // worker rank of node `id` (may be out of range)
  // Sends encoded frames to `peer` (ownership passes). Errors: the transport's (the caller logs).
  virtual Status Send(int peer, Frames frames) = 0;
  // Answers `peer` with an ERROR without blocking; may drop it (Unavailable) when the peer reads
  // nothing. Errors are never fatal to the caller.
  virtual Status SendError(int peer, pb::ErrorCode code, const std::string& message,
                           pb::MsgType rejected, uint64_t round) = 0;
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SERVER_LINK_H_
