#include "proto/codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "base/enum_names.h"
#include "proto/crc32c.h"
#include "proto/error_code.h"
#include "proto/job_identity.h"

namespace sieve {
namespace {

// ZeroMQ calls this once it no longer needs a borrowed frame; drops one keepalive reference.
void ReleaseKeepalive(void* /*data*/, void* hint) {
  delete static_cast<std::shared_ptr<const void>*>(hint);
}

zmq::message_t BorrowFrame(const void* data, size_t size,
                           const std::shared_ptr<const void>& keepalive) {
  if (size == 0) return zmq::message_t();
  auto* hint = new std::shared_ptr<const void>(keepalive);
  return zmq::message_t(const_cast<void*>(data), size, &ReleaseKeepalive, hint);
}

bool IsDataType(pb::MsgType t) {
  return t == pb::MSG_PUSH || t == pb::MSG_UPDATE || t == pb::MSG_DENSE || t == pb::MSG_INIT ||
         t == pb::MSG_REPLICATE;
}

// Types whose values always cover a whole shard (FLAG_DENSE is required).
bool AlwaysDense(pb::MsgType t) { return t == pb::MSG_DENSE || t == pb::MSG_INIT; }

// The body a control type must carry (kNotSet where none is required).
pb::Header::BodyCase ExpectedBody(pb::MsgType t) {
  switch (t) {
    case pb::MSG_REGISTER:
      return pb::Header::kRegister;
    case pb::MSG_REGISTER_ACK:
      return pb::Header::kRegisterAck;
    case pb::MSG_NODE_TABLE:
      return pb::Header::kNodeTable;
    case pb::MSG_BARRIER:
    case pb::MSG_BARRIER_RELEASE:
      return pb::Header::kBarrier;
    case pb::MSG_NODE_DEAD:
      return pb::Header::kNodeDead;
    case pb::MSG_SHUTDOWN:
      return pb::Header::kShutdown;
    case pb::MSG_ERROR:
      return pb::Header::kError;
    case pb::MSG_REGISTER_CHALLENGE:
      return pb::Header::kRegisterChallenge;
    case pb::MSG_COLLECTIVE:
    case pb::MSG_COLLECTIVE_RESULT:
      return pb::Header::kCollective;
    case pb::MSG_STATUS_QUERY:
      return pb::Header::kStatusQuery;
    case pb::MSG_STATUS:
      return pb::Header::kJobStatus;
    default:
      return pb::Header::BODY_NOT_SET;
  }
}

Status Fail(pb::ErrorCode code, const std::string& msg) { return WireError(code, msg); }

// Non-finite (Inf or NaN): every exponent bit set.
bool Fp16Finite(uint16_t h) { return (h & 0x7C00u) != 0x7C00u; }
bool Fp32Finite(uint32_t bits) { return (bits & 0x7F800000u) != 0x7F800000u; }
bool Bf16Finite(uint16_t b) { return (b & 0x7F80u) != 0x7F80u; }

// The receiver's pass over the data frames: CRC-32C and validity in one sweep, a cache-sized
// chunk at a time (the chunk is checksummed, then checked while still in L1/L2). The checks are
// branch-free reductions the compiler vectorizes, built for AVX-512 and AVX2 as well and picked by
// the CPU at load time (the default build targets plain x86-64); they only say whether a chunk is
// valid. On a failure Decode reruns the exact element-by-element checks to name the first
// offending element, so errors and messages are those of a plain loop.
// Not under ThreadSanitizer: the clones' load-time resolver would run instrumented before the
// sanitizer's runtime is up.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define SIEVE_SCAN_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define SIEVE_SCAN_CLONES
#endif

constexpr size_t kScanChunkBytes = 24 * 1024;

// Nonzero when some idx[j] <= idx[j - 1] for j in [begin, end); begin >= 1.
SIEVE_SCAN_CLONES uint32_t OrderFaults(const uint32_t* idx, size_t begin, size_t end) {
  uint32_t bad = 0;
  for (size_t j = begin; j < end; ++j) bad |= idx[j] <= idx[j - 1];
  return bad;
}

// Nonzero when some v[j], j in [begin, end), is Inf or NaN.
SIEVE_SCAN_CLONES uint32_t NonFiniteFp32(const float* v, size_t begin, size_t end) {
  uint32_t bad = 0;
  for (size_t j = begin; j < end; ++j) bad |= !Fp32Finite(std::bit_cast<uint32_t>(v[j]));
  return bad;
}

SIEVE_SCAN_CLONES uint32_t NonFiniteFp16(const uint16_t* v, size_t begin, size_t end) {
  uint32_t bad = 0;
  for (size_t j = begin; j < end; ++j) bad |= !Fp16Finite(v[j]);
  return bad;
}

// Runs faults(begin, end) over [0, count) in chunks of T, extending *crc (if not null) over each
// chunk's bytes first. True when no chunk had a fault.
template <typename T, typename Faults>
bool Scan(const T* data, size_t count, uint32_t* crc, Faults faults) {
  constexpr size_t kChunk = kScanChunkBytes / sizeof(T);
  uint32_t bad = 0;
  for (size_t begin = 0; begin < count; begin += kChunk) {
    const size_t end = std::min(count, begin + kChunk);
    if (crc != nullptr) *crc = Crc32c(*crc, data + begin, (end - begin) * sizeof(T));
    bad |= faults(begin, end);
  }
  return bad == 0;
}

// Strictly increasing and < shard_len (the last index bounds the others once the order holds).
bool ScanIndices(const uint32_t* idx, size_t count, uint64_t shard_len, uint32_t* crc) {
  const bool ordered = Scan(idx, count, crc, [idx](size_t begin, size_t end) {
    return OrderFaults(idx, std::max<size_t>(begin, 1), end);
  });
  return ordered && (count == 0 || idx[count - 1] < shard_len);
}

bool ScanFp32(const float* v, size_t count, uint32_t* crc) {
  return Scan(v, count, crc,
              [v](size_t begin, size_t end) { return NonFiniteFp32(v, begin, end); });
}

SIEVE_SCAN_CLONES uint32_t NonFiniteBf16(const uint16_t* v, size_t begin, size_t end) {
  uint32_t bad = 0;
  for (size_t j = begin; j < end; ++j) bad |= !Bf16Finite(v[j]);
  return bad;
}

bool ScanBf16(const uint16_t* v, size_t count, uint32_t* crc) {
  return Scan(v, count, crc,
              [v](size_t begin, size_t end) { return NonFiniteBf16(v, begin, end); });
}

bool ScanFp16(const uint16_t* v, size_t count, uint32_t* crc) {
  return Scan(v, count, crc,
              [v](size_t begin, size_t end) { return NonFiniteFp16(v, begin, end); });
}

// Returns a pointer to `frame`'s bytes usable as T[]; copies into `scratch` only if misaligned
// (ZeroMQ stores very small messages inline, with no alignment promise).
template <typename T>
bool IsAligned(const zmq::message_t& frame) {
  return reinterpret_cast<uintptr_t>(frame.data()) % alignof(T) == 0;
}

// Words of scratch AlignedView<T> needs for `frame` (0 when aligned).
template <typename T>
size_t CopyWords(const zmq::message_t& frame) {
  return IsAligned<T>(frame) ? 0 : (frame.size() + 3) / 4;
}

template <typename T>
const T* AlignedView(const zmq::message_t& frame, std::vector<uint32_t>* scratch) {
  const void* p = frame.data();
  if (IsAligned<T>(frame)) return static_cast<const T*>(p);
  const size_t old = scratch->size();
  scratch->resize(old + (frame.size() + 3) / 4);
  std::memcpy(scratch->data() + old, p, frame.size());
  return reinterpret_cast<const T*>(scratch->data() + old);
}

}  // namespace

std::string_view MsgTypeName(pb::MsgType type) {
  const std::string& n = pb::MsgType_Name(type);
  if (n.empty()) return "UNKNOWN";
  return std::string_view(n).substr(4);  // drop "MSG_"
}

StatusOr<Frames> EncodeControl(pb::Header header) {
  header.set_version(kProtocolVersion);
  header.set_count(0);
  std::string bytes;
  if (!header.SerializeToString(&bytes)) return InternalError("cannot serialize header");
  Frames frames;
  frames.emplace_back(bytes.data(), bytes.size());
  return frames;
}

void StampJob(Frames* frames, uint64_t job) {
  if (job == 0 || frames->empty()) return;
  // Header.job is a fixed64 (wire type 1): one tag byte, then 8 bytes little-endian.
  static_assert(pb::Header::kJobFieldNumber < 16, "the job field's tag must fit one byte");
  constexpr uint8_t kJobTag = (pb::Header::kJobFieldNumber << 3) | 1;
  const zmq::message_t& header = (*frames)[0];
  zmq::message_t stamped(header.size() + 9);
  auto* out = static_cast<uint8_t*>(stamped.data());
  std::memcpy(out, header.data(), header.size());
  out[header.size()] = kJobTag;
  for (int i = 0; i < 8; ++i) out[header.size() + 1 + i] = static_cast<uint8_t>(job >> (8 * i));
  (*frames)[0] = std::move(stamped);
}

constexpr EnumName<ValueType> kValueTypeNames[] = {
    {ValueType::kFp32, "fp32"}, {ValueType::kFp16, "fp16"}, {ValueType::kBf16, "bf16"}};

const char* ValueTypeName(ValueType t) { return EnumNameOf(kValueTypeNames, t, "unknown").data(); }

StatusOr<ValueType> ParseValueType(std::string_view name) {
  if (std::optional<ValueType> t = EnumValueOf(kValueTypeNames, name)) return *t;
  return InvalidArgumentError("value type must be " + EnumNameList(kValueTypeNames) + ", got '" +
                              std::string(name) + "'");
}

std::shared_ptr<const EncodedIndices> EncodeIndexFrame(std::span<const uint32_t> indices) {
  auto e = std::make_shared<EncodedIndices>();
  e->format = EncodeIndices(indices, &e->bytes);
  return e;
}

uint32_t DataChecksum(const DataPayload& payload) {
  uint32_t crc = 0;
  if (!payload.dense) {
    crc = payload.encoded
              ? Crc32c(crc, payload.encoded->bytes.data(), payload.encoded->bytes.size())
              : Crc32c(crc, payload.indices.data(), payload.indices.size_bytes());
  }
  return Crc32c(crc, payload.values.data(), payload.values.size());
}

StatusOr<Frames> EncodeData(pb::Header header, const DataPayload& payload_in,
                            const EncodeOptions& options) {
  const size_t vsize = ValueBytes(payload_in.value_type);
  if (payload_in.values.size() % vsize != 0) {
    return InvalidArgumentError("value bytes are not a whole number of elements");
  }
  const size_t count = payload_in.values.size() / vsize;
  const bool dense = payload_in.dense || AlwaysDense(header.type());
  if (!dense && payload_in.indices.size() != count) {
    return InvalidArgumentError("indices (" + std::to_string(payload_in.indices.size()) +
                                ") and values (" + std::to_string(count) + ") differ in count");
  }
  if (!dense && !payload_in.encoded && options.compact_indices && options.checksum &&
      options.precomputed_checksum != nullptr) {
    return InvalidArgumentError(
        "a precomputed checksum of compactly coded indices needs payload.encoded (the bytes it "
        "covers)");
  }
  const DataPayload* payload = &payload_in;
  DataPayload coded;  // payload_in with its indices coded here
  if (!dense && !payload_in.encoded && options.compact_indices) {
    coded = payload_in;
    coded.encoded = EncodeIndexFrame(payload_in.indices);
    payload = &coded;
  }
  const bool compact = !dense && payload->encoded;
  uint32_t flags =
      header.flags() & ~uint32_t{pb::FLAG_FP16 | pb::FLAG_BF16 | pb::FLAG_DENSE |
                                 pb::FLAG_CHECKSUM | pb::FLAG_INDEX_DELTA | pb::FLAG_INDEX_BITMAP};
  if (payload->value_type == ValueType::kFp16) flags |= pb::FLAG_FP16;
  if (payload->value_type == ValueType::kBf16) flags |= pb::FLAG_BF16;
  if (dense) flags |= pb::FLAG_DENSE;
  if (compact) {
    flags |= payload->encoded->format == IndexFormat::kBitmap ? pb::FLAG_INDEX_BITMAP
                                                              : pb::FLAG_INDEX_DELTA;
  }
  if (options.checksum) {
    flags |= pb::FLAG_CHECKSUM;
    header.set_checksum(options.precomputed_checksum != nullptr ? *options.precomputed_checksum
                                                                : DataChecksum(*payload));
  } else {
    header.set_checksum(0);
  }
  header.set_version(kProtocolVersion);
  header.set_count(count);
  header.set_flags(flags);
  header.clear_body();
  std::string bytes;
  if (!header.SerializeToString(&bytes)) return InternalError("cannot serialize header");
  Frames frames;
  frames.reserve(3);
  frames.emplace_back(bytes.data(), bytes.size());
  if (compact) {
    const CodedBytes& ib = payload->encoded->bytes;
    frames.push_back(BorrowFrame(ib.data(), ib.size(), payload->encoded));
  } else if (!dense) {
    frames.push_back(
        BorrowFrame(payload->indices.data(), payload->indices.size_bytes(), payload->keepalive));
  }
  frames.push_back(BorrowFrame(payload->values.data(), payload->values.size(), payload->keepalive));
  return frames;
}

namespace {

// Decode's steps, in the order docs/protocol.md ("Validation") lists them. Each fails through
// Fail (a wire error) and returns OK when its checks hold.

// Empties every field of *out (a failed Decode leaves no data views).
void ClearMessage(Message* out) {
  out->header.Clear();
  out->indices = {};
  out->values = {};
  out->values_fp16 = {};
  out->values_bf16 = {};
  out->index_format = IndexFormat::kRaw;
  out->decoded.reset();
  out->realigned.clear();
  out->storage.clear();
}

// Checks shared by every type: the header frame parses into *h, is of this job, speaks this
// protocol version, names a known type and is split only as a sparse UPDATE may be.
Status CheckHeader(const Frames& frames, const DecodeLimits& limits, pb::Header* h) {
  if (frames.empty()) {
    return Fail(pb::ERROR_BAD_FRAME_COUNT, "empty message");
  }
  if (frames[0].size() > (1u << 24) ||
      !h->ParseFromArray(frames[0].data(), static_cast<int>(frames[0].size()))) {
    h->Clear();
    return Fail(pb::ERROR_MALFORMED_HEADER,
                "header frame of " + std::to_string(frames[0].size()) + " bytes does not parse");
  }
  // Another job's message is refused before anything in it is believed, the version included.
  if (h->job() != limits.job &&
      !(h->job() == limits.token_job && IsOneOf(limits.token_types, h->type()))) {
    return Fail(pb::ERROR_FOREIGN_JOB, "message of another job (job " + std::to_string(h->job()) +
                                           ", this node's " + std::to_string(limits.job) + ")");
  }
  if (h->version() != kProtocolVersion) {
    return Fail(pb::ERROR_VERSION_MISMATCH, "peer speaks protocol version " +
                                                std::to_string(h->version()) + ", this node " +
                                                std::to_string(kProtocolVersion));
  }
  const pb::MsgType type = h->type();
  if (!pb::MsgType_IsValid(type) || type == pb::MSG_UNSPECIFIED) {
    return Fail(pb::ERROR_MALFORMED_HEADER,
                "unknown message type " + std::to_string(static_cast<int>(type)));
  }
  if (h->parts() > 1 || h->part() != 0) {
    const bool split_update = type == pb::MSG_UPDATE && !(h->flags() & pb::FLAG_DENSE);
    if (!split_update || h->parts() > kMaxReplyParts || h->part() >= h->parts()) {
      return Fail(pb::ERROR_MALFORMED_HEADER, "part " + std::to_string(h->part()) + " of " +
                                                  std::to_string(h->parts()) +
                                                  " (only a sparse UPDATE is split, into at most " +
                                                  std::to_string(kMaxReplyParts) + " parts)");
    }
  }
  return Status::Ok();
}

// A control message: one frame, the body its type requires, and (PULL_DENSE, REPLICATE_ACK) a
// known shard.
Status CheckControl(const Frames& frames, const pb::Header& h, const DecodeLimits& limits) {
  const pb::MsgType type = h.type();
  if (frames.size() != 1) {
    return Fail(pb::ERROR_BAD_FRAME_COUNT, std::string(MsgTypeName(type)) + " takes 1 frame, got " +
                                               std::to_string(frames.size()));
  }
  const auto body = ExpectedBody(type);
  if (body != pb::Header::BODY_NOT_SET && h.body_case() != body) {
    return Fail(pb::ERROR_MALFORMED_HEADER,
                std::string(MsgTypeName(type)) + " without its payload");
  }
  if ((type == pb::MSG_PULL_DENSE || type == pb::MSG_REPLICATE_ACK) &&
      (h.shard() < 0 || static_cast<size_t>(h.shard()) >= limits.shard_lengths.size())) {
    return Fail(pb::ERROR_WRONG_SHARD, "unknown shard " + std::to_string(h.shard()));
  }
  if (type == pb::MSG_COLLECTIVE || type == pb::MSG_COLLECTIVE_RESULT) {
    const pb::Collective& c = h.collective();
    if (!pb::CollectiveOp_IsValid(c.op()) || c.seq() == 0) {
      return Fail(pb::ERROR_MALFORMED_HEADER, "collective with op " + std::to_string(c.op()) +
                                                  ", seq " + std::to_string(c.seq()));
    }
    if (c.values_size() > static_cast<int>(kMaxCollectiveValues)) {
      return Fail(pb::ERROR_BAD_COUNT, "collective of " + std::to_string(c.values_size()) +
                                           " values (at most " +
                                           std::to_string(kMaxCollectiveValues) + ")");
    }
    for (const float v : c.values()) {
      if (!std::isfinite(v)) {
        return Fail(pb::ERROR_NON_FINITE, "collective value is not finite");
      }
    }
  }
  return Status::Ok();
}

// What a data message's header says about its frames, once checked.
struct DataShape {
  uint32_t flags = 0;
  bool dense = false;
  IndexFormat format = IndexFormat::kRaw;
  bool raw_indices = false;  // sparse with a raw uint32 index frame
  uint64_t shard_len = 0;
  uint64_t count = 0;
  size_t vsize = 4;  // bytes per value
};

// A data message's flags: only known bits, one value type, at most one index coding and only on a
// sparse message, FLAG_DENSE where the type is always dense. Fills flags, dense and format.
Status CheckDataFlags(const pb::Header& h, DataShape* shape) {
  const pb::MsgType type = h.type();
  const uint32_t flags = h.flags();
  if (flags & ~uint32_t{pb::FLAG_FP16 | pb::FLAG_BF16 | pb::FLAG_DENSE | pb::FLAG_CHECKSUM |
                        pb::FLAG_INDEX_DELTA | pb::FLAG_INDEX_BITMAP | pb::FLAG_PUSH_MISSED |
                        pb::FLAG_PUSH_LATE}) {
    return Fail(pb::ERROR_MALFORMED_HEADER, "unknown flag bits");
  }
  if ((flags & pb::FLAG_PUSH_MISSED) && type != pb::MSG_UPDATE) {
    return Fail(pb::ERROR_MALFORMED_HEADER,
                "FLAG_PUSH_MISSED on " + std::string(MsgTypeName(type)) + " (UPDATE only)");
  }
  if ((flags & pb::FLAG_PUSH_LATE) && (type != pb::MSG_UPDATE || (flags & pb::FLAG_PUSH_MISSED))) {
    return Fail(pb::ERROR_MALFORMED_HEADER, "FLAG_PUSH_LATE on " + std::string(MsgTypeName(type)) +
                                                " (UPDATE only, not with FLAG_PUSH_MISSED)");
  }
  if ((flags & pb::FLAG_FP16) && (flags & pb::FLAG_BF16)) {
    return Fail(pb::ERROR_MALFORMED_HEADER, "FLAG_FP16 and FLAG_BF16 together");
  }
  const bool dense = (flags & pb::FLAG_DENSE) || AlwaysDense(type);
  const uint32_t coding = flags & (pb::FLAG_INDEX_DELTA | pb::FLAG_INDEX_BITMAP);
  if (coding == (pb::FLAG_INDEX_DELTA | pb::FLAG_INDEX_BITMAP) || (dense && coding != 0)) {
    return Fail(pb::ERROR_MALFORMED_HEADER,
                "index coding flags: at most one, and only on a sparse message");
  }
  if (AlwaysDense(type) && !(flags & pb::FLAG_DENSE)) {
    return Fail(pb::ERROR_MALFORMED_HEADER, std::string(MsgTypeName(type)) + " without FLAG_DENSE");
  }
  shape->flags = flags;
  shape->dense = dense;
  shape->format = coding == pb::FLAG_INDEX_DELTA    ? IndexFormat::kDeltaVByte
                  : coding == pb::FLAG_INDEX_BITMAP ? IndexFormat::kBitmap
                                                    : IndexFormat::kRaw;
  shape->raw_indices = !dense && shape->format == IndexFormat::kRaw;
  return Status::Ok();
}

// A data message's frames: their number, a known shard, a count the shard allows, and frame sizes
// that match the count. Fills shard_len, count and vsize.
Status CheckDataSizes(const Frames& frames, const pb::Header& h, const DecodeLimits& limits,
                      DataShape* shape) {
  const bool dense = shape->dense;
  const size_t want_frames = dense ? 2 : 3;
  if (frames.size() != want_frames) {
    return Fail(pb::ERROR_BAD_FRAME_COUNT,
                std::string(MsgTypeName(h.type())) + (dense ? " (dense)" : "") + " takes " +
                    std::to_string(want_frames) + " frames, got " + std::to_string(frames.size()));
  }
  if (h.shard() < 0 || static_cast<size_t>(h.shard()) >= limits.shard_lengths.size()) {
    return Fail(pb::ERROR_WRONG_SHARD, "unknown shard " + std::to_string(h.shard()));
  }
  const uint64_t shard_len = limits.shard_lengths[static_cast<size_t>(h.shard())];
  const uint64_t count = h.count();
  if (dense ? count != shard_len : count > shard_len) {
    return Fail(pb::ERROR_BAD_COUNT, "count " + std::to_string(count) + (dense ? " != " : " > ") +
                                         "shard length " + std::to_string(shard_len));
  }
  const size_t vsize = ValueSize(shape->flags);
  const zmq::message_t& vframe = frames.back();
  if (vframe.size() != count * vsize) {
    return Fail(pb::ERROR_BAD_FRAME_SIZE, "values frame has " + std::to_string(vframe.size()) +
                                              " bytes, expected " + std::to_string(count * vsize));
  }
  if (shape->raw_indices && frames[1].size() != count * 4) {
    return Fail(pb::ERROR_BAD_FRAME_SIZE, "indices frame has " + std::to_string(frames[1].size()) +
                                              " bytes, expected " + std::to_string(count * 4));
  }
  shape->shard_len = shard_len;
  shape->count = count;
  shape->vsize = vsize;
  return Status::Ok();
}

// Typed views of a data message's arrays (into the frames, or into scratch when misaligned).
struct DataViews {
  std::span<const uint32_t> idx;  // raw indices only, until compact ones are decoded
  std::span<const float> vals;
  std::span<const uint16_t> vals16;
};

DataViews ViewData(const Frames& frames, const DataShape& shape, std::vector<uint32_t>* scratch) {
  const zmq::message_t& vframe = frames.back();
  // Reserve once so a second AlignedView copy cannot move the first one; only misaligned frames
  // (in practice tiny inline ones) are copied.
  scratch->reserve((shape.raw_indices ? CopyWords<uint32_t>(frames[1]) : 0) +
                   (shape.vsize == 2 ? CopyWords<uint16_t>(vframe) : CopyWords<float>(vframe)));
  DataViews v;
  if (shape.raw_indices) v.idx = {AlignedView<uint32_t>(frames[1], scratch), shape.count};
  if (shape.vsize == 2) {
    v.vals16 = {AlignedView<uint16_t>(vframe, scratch), shape.count};
  } else {
    v.vals = {AlignedView<float>(vframe, scratch), shape.count};
  }
  return v;
}

// The result of the one sweep over the data frames.
struct SweepResult {
  uint32_t crc = 0;  // over the frames in order (indices, then values), when verifying
  bool indices_ok = true;
  bool values_ok = true;
};

// One sweep: the checksum over the frames in order (indices, then values) and the validity
// checks of the raw indices and of the values.
SweepResult Sweep(const Frames& frames, const DataShape& shape, const DataViews& v, bool verify) {
  SweepResult r;
  uint32_t* crc_arg = verify ? &r.crc : nullptr;
  if (shape.raw_indices) {
    r.indices_ok = ScanIndices(v.idx.data(), v.idx.size(), shape.shard_len, crc_arg);
  } else if (!shape.dense && verify) {
    r.crc = Crc32c(r.crc, frames[1].data(), frames[1].size());
  }
  // bf16 is the high half of a binary32: its exponent bits are 0x7F80.
  r.values_ok = shape.vsize == 4                ? ScanFp32(v.vals.data(), v.vals.size(), crc_arg)
                : (shape.flags & pb::FLAG_BF16) ? ScanBf16(v.vals16.data(), shape.count, crc_arg)
                                                : ScanFp16(v.vals16.data(), shape.count, crc_arg);
  return r;
}

// Decodes a compactly coded index frame into *decoded; the decoder validates structure, order and
// range.
Status DecodeCompactIndices(const zmq::message_t& frame, const DataShape& shape,
                            std::unique_ptr<uint32_t[]>* decoded) {
  const uint64_t count = shape.count;
  decoded->reset(new uint32_t[std::max<uint64_t>(count, 1)]);
  std::string why;
  const IndexFault fault =
      DecodeIndices(shape.format, {static_cast<const uint8_t*>(frame.data()), frame.size()}, count,
                    shape.shard_len, {decoded->get(), count}, &why);
  switch (fault) {
    case IndexFault::kNone:
      break;
    case IndexFault::kEncoding:
      return Fail(pb::ERROR_BAD_ENCODING, std::string(IndexFormatName(shape.format)) + ": " + why);
    case IndexFault::kOrder:
      return Fail(pb::ERROR_INDEX_ORDER, why);
    case IndexFault::kRange:
      return Fail(pb::ERROR_INDEX_RANGE, why);
  }
  return Status::Ok();
}

// After the sweep found a fault: the exact element-by-element checks, naming the first offending
// index, then the first non-finite value.
Status NameFirstFault(const DataShape& shape, const DataViews& v, const SweepResult& sweep) {
  const uint64_t count = shape.count;
  const uint64_t shard_len = shape.shard_len;
  for (uint64_t j = 0; !sweep.indices_ok && j < count; ++j) {
    if (v.idx[j] >= shard_len) {
      return Fail(pb::ERROR_INDEX_RANGE, "index " + std::to_string(v.idx[j]) + " >= shard length " +
                                             std::to_string(shard_len));
    }
    if (j > 0 && v.idx[j] <= v.idx[j - 1]) {
      return Fail(pb::ERROR_INDEX_ORDER,
                  "indices not strictly increasing at position " + std::to_string(j));
    }
  }
  for (uint64_t j = 0; !sweep.values_ok && j < count; ++j) {
    const bool finite = shape.vsize == 4 ? Fp32Finite(std::bit_cast<uint32_t>(v.vals[j]))
                        : (shape.flags & pb::FLAG_BF16) ? Bf16Finite(v.vals16[j])
                                                        : Fp16Finite(v.vals16[j]);
    if (!finite) {
      return Fail(pb::ERROR_NON_FINITE, "non-finite value at position " + std::to_string(j));
    }
  }
  return Status::Ok();
}

// A data message (PUSH, UPDATE, DENSE, INIT) whose header CheckHeader accepted.
Status DecodeData(Frames frames, const DecodeLimits& limits, Message* out) {
  const pb::Header& h = out->header;
  DataShape shape;
  if (Status s = CheckDataFlags(h, &shape); !s.ok()) return s;
  if (Status s = CheckDataSizes(frames, h, limits, &shape); !s.ok()) return s;
  std::vector<uint32_t> scratch;
  DataViews views = ViewData(frames, shape, &scratch);
  // The checksum is judged first, as its failure makes the rest meaningless.
  const bool verify = (shape.flags & pb::FLAG_CHECKSUM) && limits.verify_checksum;
  const SweepResult sweep = Sweep(frames, shape, views, verify);
  if (verify && sweep.crc != h.checksum()) {
    return Fail(pb::ERROR_CHECKSUM, "data frames fail their CRC-32C");
  }
  if (!shape.dense && !shape.raw_indices) {
    // Decoded only after the checksum held.
    std::unique_ptr<uint32_t[]> decoded;
    if (Status s = DecodeCompactIndices(frames[1], shape, &decoded); !s.ok()) return s;
    views.idx = {decoded.get(), shape.count};
    out->decoded = std::move(decoded);
    out->index_format = shape.format;
  }
  if (Status s = NameFirstFault(shape, views, sweep); !s.ok()) return s;
  // Scratch (if used) holds copies; its heap buffer, and the frames' heap buffers, do not move
  // when the vectors are moved into *out, so the spans stay valid.
  out->realigned = std::move(scratch);
  out->storage = std::move(frames);
  out->indices = views.idx;
  out->values = views.vals;
  if (shape.flags & pb::FLAG_BF16) {
    out->values_bf16 = views.vals16;
  } else {
    out->values_fp16 = views.vals16;
  }
  return Status::Ok();
}

}  // namespace

Status Decode(Frames frames, const DecodeLimits& limits, Message* out) {
  ClearMessage(out);
  if (Status s = CheckHeader(frames, limits, &out->header); !s.ok()) return s;
  if (IsDataType(out->header.type())) return DecodeData(std::move(frames), limits, out);
  if (Status s = CheckControl(frames, out->header, limits); !s.ok()) return s;
  out->storage = std::move(frames);
  return Status::Ok();
}

uint64_t FrameBytes(const Frames& frames) {
  uint64_t n = 0;
  for (const auto& f : frames) n += f.size();
  return n;
}

Frames CopyFrames(const Frames& frames) {
  Frames copy;
  copy.reserve(frames.size());
  for (const auto& f : frames) copy.emplace_back(f.data(), f.size());
  return copy;
}

}  // namespace sieve
