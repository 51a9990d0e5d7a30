// The codec between sieve messages and ZeroMQ multipart frames. Pure: bytes in, messages out; it
// performs no I/O. Frame layout (docs/protocol.md):
//   control:           [Header]
//   PUSH/UPDATE:       [Header][indices][values: count x fp32|fp16|bf16 LE]
//                      indices: count x uint32 LE, or with FLAG_INDEX_DELTA / FLAG_INDEX_BITMAP
//                      the compact codings of proto/index_coding.h
//   dense PUSH/UPDATE: [Header][values]                  (FLAG_DENSE, count = shard len)
//   DENSE:             [Header][values]                  (count = shard len)
//   INIT:              [Header][values]                  (FLAG_DENSE, count = shard len)
//   PULL_DENSE:        [Header]
// Encoding borrows the caller's arrays zero-copy: ZeroMQ frees nothing of them, it drops the
// caller's keepalive once the frames are sent. Decoding validates everything (header, version,
// frame count, sizes, shard, checksum, index order and bound, finiteness) before returning, and
// the returned Message views its arrays inside the received frames without copying them (compactly
// coded indices are decoded into the Message's own array). The checksum is the CRC-32C
// (proto/crc32c.h) of the data frames' bytes in order, as sent (the encoded index bytes).
// Thread-safety: all functions are reentrant; a Message is a value owned by one thread at a time.
#ifndef SIEVE_PROTO_CODEC_H_
#define SIEVE_PROTO_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>
#include <zmq.hpp>

#include "base/status.h"
#include "kernels/value_precision.h"
#include "proto/index_coding.h"
#include "proto/node_ids.h"  // kSchedulerId, for the users of this header
#include "proto/sieve.pb.h"

namespace sieve {

// 14: MSG_STATUS_QUERY / MSG_STATUS: a status client without a node id (`sieve status
// --scheduler`) asks the scheduler for the job status, answered at the address it names (a
// scheduler of 13 would drop the query).
// 13: HEARTBEAT carries the node's report (Heartbeat.worker / .server) and FINISHED a worker's
// last one: the scheduler's job status (JobStatus) is built from them (a node of 12 reports
// nothing, so its row would never move).
// 12: MSG_COLLECTIVE / MSG_COLLECTIVE_RESULT and ERROR_BAD_COLLECTIVE: sums and broadcasts of the
// workers' small tensors through the scheduler (a scheduler of 11 would refuse them).
// 11: after its node table a node accepts only messages stamped with the job instance's digest
// (the scheduler sends later tables so too), the scheduler the token's digest on a REGISTER only;
// the registration proof covers Register.rebuildable; a REGISTER is refused (a version mismatch
// included) only once it is proven (a node of 10 would drop the later tables).
// 10: the rebuild of ASP/SSP shards: a REPLICA_SNAPSHOT of one carries its clocks
// (Header.clocks), and a Register.rebuildable server may hold such shards (a server of 9 would
// refuse the snapshot and leave the shard without its backup).
// 9: shard replication (scheduler --replication): NodeTable.replication and shard_primary,
// MSG_REPLICATE / MSG_REPLICATE_ACK between servers (Header.seq, origin, event), ERROR_NOT_PRIMARY
// and ERROR_NOT_REPLICA (a worker of 8 would keep sending a failed-over shard to its dead server).
// 8: BSP backup workers: FLAG_PUSH_MISSED on an UPDATE of a round that closed without the
// recipient's PUSH, ERROR_LATE_PUSH for that PUSH (a worker of 7 would take its push as applied).
// 7: compact index frames (FLAG_INDEX_DELTA: Stream VByte gaps; FLAG_INDEX_BITMAP: a bitmap of
// the range; proto/index_coding.h), bf16 values (FLAG_BF16), ERROR_BAD_ENCODING.
// 6: NodeTable.job_instance: with a token, every message after the node table carries the job
// instance's digest (proto/job_identity.h), so one job's recorded traffic is foreign in every
// other; Error.register_instance. 5: MSG_INIT / MSG_INIT_ACK and ERROR_NOT_INITIALIZED (a job whose
// servers take their initial weights from worker 0). 4: every message carries its job (Header.job)
// and a receiver drops other jobs' messages; ERROR_FOREIGN_JOB; NodeInfo.key and ERROR_RANK_TAKEN
// (CURVE keys bound to node ids). 3: a sparse UPDATE may be split into parts (Header.part/parts);
// 2: the data-frame checksum is CRC-32C (proto/crc32c.h); version 1 used zlib's CRC-32. Peers of
// different versions reject each other's messages with ERROR_VERSION_MISMATCH.
inline constexpr uint32_t kProtocolVersion = 15;
// Most values one COLLECTIVE may carry (256 KiB of fp32: well within the scheduler's 1 MiB frame).
inline constexpr uint32_t kMaxCollectiveValues = 65536;
// Most parts one UPDATE may be split into (Header.parts).
inline constexpr uint32_t kMaxReplyParts = 4096;
// Barrier groups (pb::Barrier.group bits).
inline constexpr uint32_t kGroupServers = 1;
inline constexpr uint32_t kGroupWorkers = 2;
inline constexpr uint32_t kGroupAll = kGroupServers | kGroupWorkers;

using Frames = std::vector<zmq::message_t>;

// Bytes a message occupies in its frames (header and data), what the byte metrics count.
uint64_t FrameBytes(const Frames& frames);

// A deep copy of `frames` (each frame's bytes copied): what a caller keeps when it hands the
// original on, or decodes the same message again (Decode consumes its frames).
Frames CopyFrames(const Frames& frames);

// The element type of a values frame: the kernels' ValuePrecision (one enum for both, so the
// rounding the kernels do and the frame the codec writes cannot disagree).
using ValueType = ValuePrecision;
inline size_t ValueBytes(ValueType t) { return t == ValueType::kFp32 ? 4 : 2; }
// "fp32", "fp16", "bf16"; ParseValueType accepts those names (InvalidArgument otherwise).
const char* ValueTypeName(ValueType t);
StatusOr<ValueType> ParseValueType(std::string_view name);

// A decoded message. The spans point into `storage` (or into `realigned` when a small frame was
// not 4-byte aligned, or into `decoded` for compactly coded indices), so they stay valid while the
// Message lives, including after a move.
struct Message {
  pb::Header header;
  std::span<const uint32_t> indices;      // shard-relative, strictly increasing; empty if dense
  std::span<const float> values;          // fp32 values (empty when FLAG_FP16 or FLAG_BF16)
  std::span<const uint16_t> values_fp16;  // binary16 values (empty unless FLAG_FP16)
  std::span<const uint16_t> values_bf16;  // bfloat16 values (empty unless FLAG_BF16)
  IndexFormat index_format = IndexFormat::kRaw;  // how the index frame was coded
  Frames storage;
  std::vector<uint32_t> realigned;
  std::unique_ptr<uint32_t[]> decoded;  // compactly coded indices, decoded

  pb::MsgType type() const { return header.type(); }
  bool dense() const { return (header.flags() & pb::FLAG_DENSE) != 0; }
  // The 16-bit values whichever their type (empty for fp32 or no values), and that type.
  std::span<const uint16_t> values16() const {
    return values_fp16.empty() ? values_bf16 : values_fp16;
  }
  ValueType values16_type() const {
    return values_fp16.empty() ? ValueType::kBf16 : ValueType::kFp16;
  }
};

// Arrays of a data message to be sent. Not owned: `keepalive` must keep them alive and unchanged
// until ZeroMQ releases it (after the bytes are handed to the kernel), which may be after Encode
// and the send call return.
// A sparse message's index frame in a compact coding, made once and sent to any number of peers
// (e.g. a BSP reply's slice, the same for every worker). Immutable once made.
struct EncodedIndices {
  IndexFormat format = IndexFormat::kDeltaVByte;
  CodedBytes bytes;
};
// Codes `indices` (strictly increasing) in the smaller compact coding (EncodeIndices).
std::shared_ptr<const EncodedIndices> EncodeIndexFrame(std::span<const uint32_t> indices);

struct DataPayload {
  std::span<const uint32_t> indices;  // empty for dense messages
  std::span<const std::byte> values;  // count x ValueBytes(value_type) bytes
  ValueType value_type = ValueType::kFp32;
  bool dense = false;
  std::shared_ptr<const void> keepalive;
  // Sparse, optional: `indices` already coded (EncodeIndexFrame of exactly `indices`); sent as
  // the index frame, kept alive by the frame. Null = coded by EncodeData as its options say.
  std::shared_ptr<const EncodedIndices> encoded;
};

struct EncodeOptions {
  bool checksum = true;  // compute the CRC-32C of the data frames and set FLAG_CHECKSUM
  // Sparse messages without payload.encoded: code the indices compactly (the smaller of
  // delta-vbyte and bitmap, proto/index_coding.h), else send them as raw uint32 (the protocol-6
  // layout, `--wire=v4`).
  bool compact_indices = true;
  // With checksum: the CRC-32C of exactly these data frames (index frame as sent, then values),
  // computed by the caller (DataChecksum), e.g. once for a reply sent to several workers; null =
  // compute it.
  const uint32_t* precomputed_checksum = nullptr;
};

// The CRC-32C that EncodeData puts in the header for `payload`'s data frames when its index frame
// is payload.encoded (when set) or the raw indices (otherwise).
uint32_t DataChecksum(const DataPayload& payload);

// Serializes a control message (no data frames). Sets header.version. Never fails for a header
// built by this process; returns Internal if protobuf refuses to serialize it.
StatusOr<Frames> EncodeControl(pb::Header header);

// Serializes a data message: sets version, count, the value-type, index-coding, DENSE and
// CHECKSUM flags and the checksum from `payload`. The index frame is payload.encoded when set,
// else the indices coded as options.compact_indices says. Errors: InvalidArgument when index and
// value counts differ (sparse), the value byte size is not a whole number of elements, or a
// precomputed checksum is given for indices this call would code (set payload.encoded).
StatusOr<Frames> EncodeData(pb::Header header, const DataPayload& payload,
                            const EncodeOptions& options = {});

// What the receiver knows when validating. shard_lengths[s] is the length of shard s (from the
// node table); empty before the node table arrives, in which case every data message is rejected.
// `job` is the receiver's job identity (Header.job; 0 = a job without a token): a message of any
// other job fails with ERROR_FOREIGN_JOB before anything else is checked.
// `token_job` (the token's digest, JobDigest) is also accepted for the types in `token_types`
// (proto/job_identity.h: kTokenStampedToNode for a node before its first node table,
// kTokenStampedToScheduler at the scheduler, none once a node has its table), the messages that
// travel before their receiver knows the job instance; `job` is then the instance's digest
// (JobInstanceDigest). Before a node knows the instance both are the token's digest.
struct DecodeLimits {
  std::span<const uint64_t> shard_lengths;
  bool verify_checksum = true;
  uint64_t job = 0;
  uint64_t token_job = 0;
  std::span<const pb::MsgType> token_types = {};
};

// Sets Header.job of an encoded message (its first frame) to `job` without decoding it: appends
// the field, which protobuf's merge-on-parse makes the value the receiver reads. Nothing happens
// for job 0 (the field's default) or an empty message. What every Transport does to each message
// it sends (net/transport.h).
void StampJob(Frames* frames, uint64_t job);

// Validates and decodes `frames`. On success returns OK and fills *out. On failure returns a
// non-OK Status carrying the wire error code to answer with (WireCodeOf, proto/error_code.h), and
// leaves out->header holding whatever header could be parsed (so the receiver can answer the
// sender) and no data views. Never crashes on any byte content.
Status Decode(Frames frames, const DecodeLimits& limits, Message* out);

// Element size of the values frame for a header's flags (2 for FP16 or BF16, else 4).
inline size_t ValueSize(uint32_t flags) {
  return (flags & (pb::FLAG_FP16 | pb::FLAG_BF16)) ? 2 : 4;
}

// Human-readable name of a message type ("PUSH", ...).
std::string_view MsgTypeName(pb::MsgType type);

}  // namespace sieve

#endif  // SIEVE_PROTO_CODEC_H_
