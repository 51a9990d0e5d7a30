// Helpers shared by the proto/ unit tests: raw frame construction that bypasses the encoder, so
// tests can build exactly the bytes a faulty or hostile peer would send.
#ifndef SIEVE_TESTS_PROTO_TEST_UTIL_H_
#define SIEVE_TESTS_PROTO_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "proto/codec.h"

namespace sieve::testing {

// A frame holding a copy of `bytes`.
inline zmq::message_t CopyFrame(const void* data, size_t size) {
  return zmq::message_t(data, size);
}

inline zmq::message_t StringFrame(const std::string& bytes) {
  return zmq::message_t(bytes.data(), bytes.size());
}

// A frame holding the serialized header as is (no version or count fix-ups).
inline zmq::message_t HeaderFrame(const pb::Header& h) {
  std::string bytes;
  h.SerializeToString(&bytes);
  return StringFrame(bytes);
}

template <typename T>
zmq::message_t ArrayFrame(const std::vector<T>& v) {
  return CopyFrame(v.data(), v.size() * sizeof(T));
}

// Builds [header][indices][values] (sparse) or [header][values] (dense) from raw pieces. The
// header is taken verbatim: the caller sets version, count, flags and checksum.
inline Frames RawData(const pb::Header& h, const std::vector<uint32_t>* indices,
                      const std::vector<float>& values) {
  Frames f;
  f.push_back(HeaderFrame(h));
  if (indices != nullptr) f.push_back(ArrayFrame(*indices));
  f.push_back(ArrayFrame(values));
  return f;
}

// A valid-looking data header for `type` on `shard` with `count` elements (no checksum).
inline pb::Header DataHeader(pb::MsgType type, int shard, uint64_t count, uint32_t flags = 0) {
  pb::Header h;
  h.set_version(kProtocolVersion);
  h.set_type(type);
  h.set_sender(3);
  h.set_recipient(1);
  h.set_round(7);
  h.set_shard(shard);
  h.set_count(count);
  h.set_flags(flags);
  return h;
}

// CRC-32C computed one bit at a time straight from its definition (reflected polynomial
// 0x82F63B78, initial value and final XOR 0xFFFFFFFF), independent of proto/crc32c.cc. Extends
// `crc` like Crc32c().
inline uint32_t ReferenceCrc32c(uint32_t crc, std::span<const std::byte> bytes) {
  uint32_t c = ~crc;
  for (std::byte b : bytes) {
    c ^= static_cast<uint32_t>(b);
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

inline std::span<const std::byte> Bytes(const std::vector<float>& v) {
  return std::as_bytes(std::span<const float>(v));
}
inline std::span<const std::byte> Bytes(const std::vector<uint16_t>& v) {
  return std::as_bytes(std::span<const uint16_t>(v));
}

// EncodeData of the pairs (idx[j], val[j]) under `h` (fp32), the frames owning the arrays
// (zero-copy, as a real sender's). Errors: EncodeData's.
inline StatusOr<Frames> EncodePairs(pb::Header h, std::vector<uint32_t> idx,
                                    std::vector<float> val) {
  auto keep = std::make_shared<std::pair<std::vector<uint32_t>, std::vector<float>>>(
      std::move(idx), std::move(val));
  DataPayload p;
  p.indices = keep->first;
  p.values = std::as_bytes(std::span<const float>(keep->second));
  p.keepalive = keep;
  return EncodeData(std::move(h), p);
}

// An independent reading of docs/protocol.md's index codings, element by element (no tables, no
// word tricks): the oracle the codec's decoder is checked against. Returns false when `bytes` do
// not hold exactly `count` indices in `format` (structure only: order and range are not judged).
inline bool ReferenceDecodeIndices(IndexFormat format, const std::string& bytes, uint64_t count,
                                   std::vector<uint32_t>* out) {
  out->clear();
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  if (format == IndexFormat::kDeltaVByte) {
    const size_t control = (count + 3) / 4;
    if (bytes.size() < control) return false;
    size_t at = control;
    uint64_t prev = 0;
    for (uint64_t j = 0; j < count; ++j) {
      const size_t len = 1 + ((byte(j / 4) >> (2 * (j % 4))) & 3);
      if (at + len > bytes.size()) return false;
      uint64_t gap = 0;
      for (size_t b = 0; b < len; ++b) gap |= uint64_t{byte(at + b)} << (8 * b);
      at += len;
      prev = (prev + gap) & 0xFFFFFFFFu;
      out->push_back(static_cast<uint32_t>(prev));
    }
    for (uint64_t j = count; j < 4 * control; ++j)
      if ((byte(j / 4) >> (2 * (j % 4))) & 3) return false;
    return at == bytes.size();
  }
  if (format == IndexFormat::kBitmap) {
    if (count == 0 || bytes.size() < 5) return false;
    const uint32_t base = byte(0) | (byte(1) << 8) | (byte(2) << 16) | (uint32_t{byte(3)} << 24);
    if ((byte(4) & 1) == 0 || byte(bytes.size() - 1) == 0) return false;
    for (size_t i = 4; i < bytes.size(); ++i)
      for (int b = 0; b < 8; ++b)
        if ((byte(i) >> b) & 1) out->push_back(base + static_cast<uint32_t>(8 * (i - 4) + b));
    return out->size() == count;
  }
  return false;
}

}  // namespace sieve::testing

#endif  // SIEVE_TESTS_PROTO_TEST_UTIL_H_
