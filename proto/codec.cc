#include "proto/codec.h"

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <string>

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

uint32_t Crc(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const Bytef*>(data);
  while (size > 0) {  // zlib takes uInt lengths
    const uInt chunk = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    crc = static_cast<uint32_t>(crc32(crc, p, chunk));
    p += chunk;
    size -= chunk;
  }
  return crc;
}

bool IsDataType(pb::MsgType t) {
  return t == pb::MSG_PUSH || t == pb::MSG_UPDATE || t == pb::MSG_DENSE;
}

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
    default:
      return pb::Header::BODY_NOT_SET;
  }
}

Status Fail(pb::ErrorCode code, pb::ErrorCode* out, StatusCode status, std::string msg) {
  *out = code;
  return Status(status, std::string(pb::ErrorCode_Name(code)) + ": " + msg);
}

bool Fp16Finite(uint16_t h) { return (h & 0x7C00u) != 0x7C00u; }

// Returns a pointer to `frame`'s bytes usable as T[]; copies into `scratch` only if misaligned
// (ZeroMQ stores very small messages inline, with no alignment promise).
template <typename T>
const T* AlignedView(const zmq::message_t& frame, std::vector<uint32_t>* scratch) {
  const void* p = frame.data();
  if (reinterpret_cast<uintptr_t>(p) % alignof(T) == 0) return static_cast<const T*>(p);
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

StatusOr<Frames> EncodeData(pb::Header header, const DataPayload& payload,
                            const EncodeOptions& options) {
  const size_t vsize = payload.fp16 ? 2 : 4;
  if (payload.values.size() % vsize != 0) {
    return InvalidArgumentError("value bytes are not a whole number of elements");
  }
  const size_t count = payload.values.size() / vsize;
  const bool dense = payload.dense || header.type() == pb::MSG_DENSE;
  if (!dense && payload.indices.size() != count) {
    return InvalidArgumentError("indices (" + std::to_string(payload.indices.size()) +
                                ") and values (" + std::to_string(count) + ") differ in count");
  }
  uint32_t flags = header.flags() & ~(pb::FLAG_FP16 | pb::FLAG_DENSE | pb::FLAG_CHECKSUM);
  if (payload.fp16) flags |= pb::FLAG_FP16;
  if (dense) flags |= pb::FLAG_DENSE;
  const bool has_indices = !(flags & pb::FLAG_DENSE);
  if (options.checksum) {
    flags |= pb::FLAG_CHECKSUM;
    uint32_t crc = static_cast<uint32_t>(crc32(0, nullptr, 0));
    if (has_indices) crc = Crc(crc, payload.indices.data(), payload.indices.size_bytes());
    crc = Crc(crc, payload.values.data(), payload.values.size());
    header.set_checksum(crc);
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
  if (has_indices) {
    frames.push_back(
        BorrowFrame(payload.indices.data(), payload.indices.size_bytes(), payload.keepalive));
  }
  frames.push_back(BorrowFrame(payload.values.data(), payload.values.size(), payload.keepalive));
  return frames;
}

Status Decode(Frames frames, const DecodeLimits& limits, Message* out, pb::ErrorCode* error) {
  *error = pb::ERROR_NONE;
  out->header.Clear();
  out->indices = {};
  out->values = {};
  out->values_fp16 = {};
  out->realigned.clear();
  out->storage.clear();
  if (frames.empty()) {
    return Fail(pb::ERROR_BAD_FRAME_COUNT, error, StatusCode::kInvalidArgument, "empty message");
  }
  pb::Header& h = out->header;
  if (frames[0].size() > (1u << 24) ||
      !h.ParseFromArray(frames[0].data(), static_cast<int>(frames[0].size()))) {
    h.Clear();
    return Fail(pb::ERROR_MALFORMED_HEADER, error, StatusCode::kInvalidArgument,
                "header frame of " + std::to_string(frames[0].size()) + " bytes does not parse");
  }
  if (h.version() != kProtocolVersion) {
    return Fail(pb::ERROR_VERSION_MISMATCH, error, StatusCode::kFailedPrecondition,
                "peer speaks protocol version " + std::to_string(h.version()) + ", this node " +
                    std::to_string(kProtocolVersion));
  }
  const pb::MsgType type = h.type();
  if (!pb::MsgType_IsValid(type) || type == pb::MSG_UNSPECIFIED) {
    return Fail(pb::ERROR_MALFORMED_HEADER, error, StatusCode::kInvalidArgument,
                "unknown message type " + std::to_string(static_cast<int>(type)));
  }
  if (!IsDataType(type)) {
    if (frames.size() != 1) {
      return Fail(
          pb::ERROR_BAD_FRAME_COUNT, error, StatusCode::kInvalidArgument,
          std::string(MsgTypeName(type)) + " takes 1 frame, got " + std::to_string(frames.size()));
    }
    const auto body = ExpectedBody(type);
    if (body != pb::Header::BODY_NOT_SET && h.body_case() != body) {
      return Fail(pb::ERROR_MALFORMED_HEADER, error, StatusCode::kInvalidArgument,
                  std::string(MsgTypeName(type)) + " without its payload");
    }
    if (type == pb::MSG_PULL_DENSE &&
        (h.shard() < 0 || static_cast<size_t>(h.shard()) >= limits.shard_lengths.size())) {
      return Fail(pb::ERROR_WRONG_SHARD, error, StatusCode::kInvalidArgument,
                  "unknown shard " + std::to_string(h.shard()));
    }
    out->storage = std::move(frames);
    return Status::Ok();
  }

  // Data messages.
  const uint32_t flags = h.flags();
  if (flags & ~uint32_t{pb::FLAG_FP16 | pb::FLAG_DENSE | pb::FLAG_CHECKSUM}) {
    return Fail(pb::ERROR_MALFORMED_HEADER, error, StatusCode::kInvalidArgument,
                "unknown flag bits");
  }
  const bool dense = (flags & pb::FLAG_DENSE) || type == pb::MSG_DENSE;
  if (type == pb::MSG_DENSE && !(flags & pb::FLAG_DENSE)) {
    return Fail(pb::ERROR_MALFORMED_HEADER, error, StatusCode::kInvalidArgument,
                "DENSE without FLAG_DENSE");
  }
  const size_t want_frames = dense ? 2 : 3;
  if (frames.size() != want_frames) {
    return Fail(pb::ERROR_BAD_FRAME_COUNT, error, StatusCode::kInvalidArgument,
                std::string(MsgTypeName(type)) + (dense ? " (dense)" : "") + " takes " +
                    std::to_string(want_frames) + " frames, got " + std::to_string(frames.size()));
  }
  if (h.shard() < 0 || static_cast<size_t>(h.shard()) >= limits.shard_lengths.size()) {
    return Fail(pb::ERROR_WRONG_SHARD, error, StatusCode::kInvalidArgument,
                "unknown shard " + std::to_string(h.shard()));
  }
  const uint64_t shard_len = limits.shard_lengths[static_cast<size_t>(h.shard())];
  const uint64_t count = h.count();
  if (dense ? count != shard_len : count > shard_len) {
    return Fail(pb::ERROR_BAD_COUNT, error, StatusCode::kOutOfRange,
                "count " + std::to_string(count) + (dense ? " != " : " > ") + "shard length " +
                    std::to_string(shard_len));
  }
  const size_t vsize = ValueSize(flags);
  const zmq::message_t& vframe = frames.back();
  if (vframe.size() != count * vsize) {
    return Fail(pb::ERROR_BAD_FRAME_SIZE, error, StatusCode::kInvalidArgument,
                "values frame has " + std::to_string(vframe.size()) + " bytes, expected " +
                    std::to_string(count * vsize));
  }
  if (!dense && frames[1].size() != count * 4) {
    return Fail(pb::ERROR_BAD_FRAME_SIZE, error, StatusCode::kInvalidArgument,
                "indices frame has " + std::to_string(frames[1].size()) + " bytes, expected " +
                    std::to_string(count * 4));
  }
  if ((flags & pb::FLAG_CHECKSUM) && limits.verify_checksum) {
    uint32_t crc = static_cast<uint32_t>(crc32(0, nullptr, 0));
    for (size_t f = 1; f < frames.size(); ++f) crc = Crc(crc, frames[f].data(), frames[f].size());
    if (crc != h.checksum()) {
      return Fail(pb::ERROR_CHECKSUM, error, StatusCode::kDataLoss, "data frames fail their CRC32");
    }
  }
  std::vector<uint32_t> scratch;
  // Reserve once so a second AlignedView copy cannot move the first one.
  scratch.reserve((vframe.size() + (dense ? 0 : frames[1].size())) / 4 + 2);
  std::span<const uint32_t> idx;
  if (!dense) {
    idx = {AlignedView<uint32_t>(frames[1], &scratch), count};
    for (uint64_t j = 0; j < count; ++j) {
      if (idx[j] >= shard_len) {
        return Fail(
            pb::ERROR_INDEX_RANGE, error, StatusCode::kOutOfRange,
            "index " + std::to_string(idx[j]) + " >= shard length " + std::to_string(shard_len));
      }
      if (j > 0 && idx[j] <= idx[j - 1]) {
        return Fail(pb::ERROR_INDEX_ORDER, error, StatusCode::kInvalidArgument,
                    "indices not strictly increasing at position " + std::to_string(j));
      }
    }
  }
  std::span<const float> vals;
  std::span<const uint16_t> vals16;
  if (vsize == 2) {
    vals16 = {AlignedView<uint16_t>(vframe, &scratch), count};
    for (uint64_t j = 0; j < count; ++j) {
      if (!Fp16Finite(vals16[j])) {
        return Fail(pb::ERROR_NON_FINITE, error, StatusCode::kInvalidArgument,
                    "non-finite value at position " + std::to_string(j));
      }
    }
  } else {
    vals = {AlignedView<float>(vframe, &scratch), count};
    for (uint64_t j = 0; j < count; ++j) {
      if (!std::isfinite(vals[j])) {
        return Fail(pb::ERROR_NON_FINITE, error, StatusCode::kInvalidArgument,
                    "non-finite value at position " + std::to_string(j));
      }
    }
  }
  // Scratch (if used) holds copies; its heap buffer, and the frames' heap buffers, do not move
  // when the vectors are moved into *out, so the spans stay valid.
  out->realigned = std::move(scratch);
  out->storage = std::move(frames);
  out->indices = idx;
  out->values = vals;
  out->values_fp16 = vals16;
  return Status::Ok();
}

}  // namespace sieve
