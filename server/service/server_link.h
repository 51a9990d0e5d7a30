// ServerLink: what a server's message handling needs of the node that carries it — its own id, the
// worker and server id arithmetic, which server serves each shard now, and three sends.
// sieve-server adapts its Node to it; unit tests pass a recorder, so the dispatch and reply
// encoding run without sockets or processes.
//
// Thread-safety: as the implementation's; ShardService calls it from one thread at a time.
#ifndef SIEVE_SERVER_SERVICE_SERVER_LINK_H_
#define SIEVE_SERVER_SERVICE_SERVER_LINK_H_

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
  virtual int ServerId(int rank) const { return 1 + rank; }  // node id of server `rank`
  // The server rank serving `shard` as primary in the latest node table (replication; without it
  // every shard is its own server's).
  virtual int ShardPrimary(int shard) const { return shard; }
  // Whether the scheduler declared worker `rank` dead (and it was not re-admitted since).
  virtual bool WorkerDead(int /*rank*/) const { return false; }
  // Whether the scheduler declared server `rank` dead (and it was not re-admitted since).
  virtual bool ServerDead(int /*rank*/) const { return false; }
  // Tells the scheduler that server `server` holds an up-to-date copy of `shard` (MSG_COPY_READY,
  // after a rebuild). Errors: the transport's (the caller logs).
  virtual Status ReportCopy(int /*shard*/, int /*server*/) { return Status::Ok(); }
  // Tells the scheduler that `shard` is served by server `server` from now on (MSG_HANDOVER).
  virtual Status ReportHandover(int /*shard*/, int /*server*/) { return Status::Ok(); }
  // Replies to `peer` (UPDATE, DENSE, the acks, REPLICATE_ACK; ownership passes) without ever
  // waiting: when the peer's queue is full the reply is dropped (Unavailable) and counted, so a
  // peer that sends and never reads cannot stall the server's event loop. A worker that misses a
  // reply pushes again after its timeout and is answered again. Errors are never fatal.
  virtual Status Reply(int peer, Frames frames) = 0;
  // Sends the replication stream (REPLICATE) to a backup server: nothing in it may be lost, so
  // it waits for queue space up to the transport's send timeout. Errors: the transport's (the
  // caller logs).
  virtual Status Send(int peer, Frames frames) = 0;
  // Answers `peer` with an ERROR for `shard` (its Header.shard) without blocking; may drop it
  // (Unavailable) when the peer reads nothing. Errors are never fatal to the caller.
  virtual Status SendError(int peer, pb::ErrorCode code, const std::string& message,
                           pb::MsgType rejected, uint64_t round, int shard) = 0;
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SERVICE_SERVER_LINK_H_
