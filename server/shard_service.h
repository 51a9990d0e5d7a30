// ShardService: a server's message handling — admission of each data message (sender is a worker,
// message is for this shard, type a server accepts), fp16 / bf16 unpacking, the ShardServer event,
// and the encoding of every reply it produces (JOIN_ACK, INIT_ACK, ERROR, UPDATE/DENSE whole or in
// parts; per slice one index coding, one 16-bit conversion and one CRC-32C, shared by every
// recipient).
//
// Reply values (options.reply_values): the shard's weights are fp32 (and accumulate in fp32 or
// wider: ShardServer); an UPDATE or DENSE carries them as they are (kFp32) or each rounded to
// binary16 / bfloat16 (to nearest even, a finite weight beyond fp16's range saturating to
// ±65504). Every value a worker receives is thus round(w[i]) of the server's weight at that
// index, and a replica made only of received values (the dense pull at start, then UPDATEs) is
// round(w) of the servers' weights wherever it was last written, the same bits on every worker.
// sieve-server owns one and feeds it from its Node's I/O thread; it sees the node only through
// ServerLink, so unit tests drive it with a recorder.
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
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "metrics/daemon_metrics.h"
#include "net/rejection_log.h"
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
  // The precision of the values of UPDATE and DENSE replies (`--wire_values`), converted once per
  // slice for every recipient. The shard stays fp32.
  ValueType reply_values = ValueType::kFp32;
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
  // Lines a peer's message can cause (its ERRORs, replies that cannot be sent to it): at most 20
  // per 10 s (net/rejection_log.h), so a flood of them cannot flood the server's log.
  RejectionLog peer_log_{"peer-caused server events"};
  std::vector<float> unpacked_;  // fp16 / bf16 push values as fp32
  // The index frame, 16-bit values and checksum of each slice sent within one flush (replies to
  // several workers share their buffer; the outbox and `keepalive` keep every buffer alive, so an
  // address names one content until the flush ends): made once, sent to every recipient.
  struct CodedSlice {
    std::shared_ptr<const EncodedIndices> encoded;        // null: raw indices (or a dense slice)
    std::shared_ptr<const std::vector<uint16_t>> packed;  // reply_values fp16 / bf16; else null
    std::shared_ptr<const void> keepalive;  // what the frames borrow: the buffer (and `packed`)
    uint32_t crc = 0;
  };
  using SliceKey = std::tuple<const ReplyBuffer*, size_t, size_t>;  // buffer, from, to
  std::map<SliceKey, CodedSlice> slices_;
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SHARD_SERVICE_H_
