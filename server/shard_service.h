// ShardService: a server's message handling — admission of each data message (sender is a worker,
// message is for this shard, type a server accepts), fp16 unpacking, the ShardServer event, and
// the encoding of every reply it produces (JOIN_ACK, INIT_ACK, ERROR, UPDATE/DENSE whole or in
// parts, one CRC-32C per slice shared by every recipient). sieve-server owns one and feeds it from
// its Node's I/O thread; it sees the node only through ServerLink, so unit tests drive it with a
// recorder.
//
// Errors from peers never reach the caller: a rejected message is answered with an ERROR naming
// the reason (docs/protocol.md) and changes no state; a failed send is logged.
//
// Ownership: borrows the shard, the link and the optional metrics and checkpointer, which must
// outlive it. Installs itself as the shard's part sink (split BSP replies go out as soon as each
// part is applied).
// Thread-safety: not thread-safe; one thread at a time calls OnData / OnWorkerDead /
// OnWorkerRejoined (sieve-server: the node's I/O thread, behind a gate that closes at shutdown).
#ifndef SIEVE_SERVER_SHARD_SERVICE_H_
#define SIEVE_SERVER_SHARD_SERVICE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "metrics/daemon_metrics.h"
#include "proto/codec.h"
#include "server/checkpointer.h"
#include "server/server_link.h"
#include "server/shard_server.h"

namespace sieve {

struct ShardServiceOptions {
  int rank = 0;              // this server's rank = the shard it owns
  uint32_t num_workers = 1;  // worker ranks are [0, num_workers)
  bool bsp = true;           // what the rounds metric counts: BSP rounds, else pushes applied
  // A whole sparse UPDATE of more pairs than this goes out in parts (at most kMaxReplyParts);
  // 0 = always whole.
  uint64_t reply_part_pairs = 0;
  // Code each sparse reply's indices compactly (protocol 7, docs/protocol.md "Index coding"),
  // once per slice for every recipient; false = raw uint32 indices (`--wire=v4`).
  bool compact_indices = true;
};

class ShardService {
 public:
  // metrics and checkpointer may be null (no metrics; no checkpoints).
  ShardService(const ShardServiceOptions& options, ShardServer* shard, ServerLink* link,
               DaemonMetrics* metrics, ShardCheckpointer* checkpointer);
  ShardService(const ShardService&) = delete;
  ShardService& operator=(const ShardService&) = delete;
  ~ShardService();

  // One validated data-plane message from a known peer (Node::set_on_data).
  void OnData(Message msg);
  // The scheduler declared worker `rank` dead / re-admitted it under a new instance.
  void OnWorkerDead(int rank);
  void OnWorkerRejoined(int rank);

 private:
  void Flush();
  // Sends pairs [from, to) of reply `r` as part `part` of `parts` (1 = unsplit). False when the
  // encoding or the send failed (logged).
  bool SendSlice(const Reply& r, int peer, uint32_t part, uint32_t parts, size_t from, size_t to);
  // A header-only acknowledgement (JOIN_ACK, INIT_ACK).
  void SendAck(const Reply& r, int peer);

  const ShardServiceOptions options_;
  ShardServer* const shard_;
  ServerLink* const link_;
  DaemonMetrics* const metrics_;
  ShardCheckpointer* const checkpointer_;
  Outbox out_;
  std::vector<float> unpacked_;  // fp16 push values as fp32
  // The index frame and checksum of the slice last sent within one flush (replies to several
  // workers share their buffer; the outbox keeps every buffer alive, so an address names one
  // content until then): coded and summed once, sent to every recipient.
  struct CodedSlice {
    const ReplyBuffer* buffer = nullptr;
    size_t from = 0, to = 0;
    std::shared_ptr<const EncodedIndices> encoded;  // null: raw indices (or a dense slice)
    uint32_t crc = 0;
  } slice_;
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SHARD_SERVICE_H_
