#include "proto/index_coding.h"

#include <glog/logging.h>

#include <array>
#include <bit>
#include <cstring>
#include <string>

#include "base/enum_names.h"
#include "proto/stream_vbyte.h"

namespace sieve {
namespace {

size_t ControlBytes(uint64_t count) { return static_cast<size_t>((count + 3) / 4); }

// Bytes of one gap in Stream VByte (1-4).
inline size_t GapBytes(uint32_t gap) {
  return gap < (1u << 8) ? 1 : gap < (1u << 16) ? 2 : gap < (1u << 24) ? 3 : 4;
}

// True when idx is strictly increasing (the encoders' precondition).
bool StrictlyIncreasing(std::span<const uint32_t> idx) {
  for (size_t j = 1; j < idx.size(); ++j)
    if (idx[j] <= idx[j - 1]) return false;
  return true;
}

IndexFault Fault(IndexFault f, std::string* message, std::string text) {
  *message = std::move(text);
  return f;
}

// Nonzero when some v[j] <= v[j - 1], 0 < j < n.
uint32_t OrderFaults(const uint32_t* __restrict v, size_t n) {
  uint32_t bad = 0;
  for (size_t j = 1; j < n; ++j) bad |= static_cast<uint32_t>(v[j] <= v[j - 1]);
  return bad;
}

IndexFault DecodeDeltaVByte(std::span<const uint8_t> bytes, uint64_t count, uint64_t shard_len,
                            std::span<uint32_t> out, std::string* message) {
  if (count == 0) {
    if (!bytes.empty()) {
      return Fault(IndexFault::kEncoding, message,
                   "delta-vbyte frame of " + std::to_string(bytes.size()) + " bytes for 0 indices");
    }
    return IndexFault::kNone;
  }
  const size_t control = ControlBytes(count);
  if (bytes.size() < control) {
    return Fault(IndexFault::kEncoding, message,
                 "delta-vbyte frame of " + std::to_string(bytes.size()) +
                     " bytes is shorter than " + std::to_string(control) + " control bytes");
  }
  // The data length the control bytes announce must be exactly what the frame holds; only then
  // does the decoder below stay inside the frame.
  size_t data = SvbAnnouncedBytes(bytes.data(), count) - control;
  const uint32_t tail = static_cast<uint32_t>(count % 4);
  if (tail != 0) {
    const uint8_t last = bytes[control - 1];
    if ((last >> (2 * tail)) != 0) {
      return Fault(IndexFault::kEncoding, message,
                   "delta-vbyte: unused fields of the last control byte are not 0");
    }
    data -= 4 - tail;  // the unused fields counted 1 byte each
  }
  if (bytes.size() != control + data) {
    return Fault(IndexFault::kEncoding, message,
                 "delta-vbyte frame has " + std::to_string(bytes.size()) +
                     " bytes, its control bytes announce " + std::to_string(control + data));
  }
  SvbDeltaDecode(bytes.data(), bytes.size(), count, out.data());
  // Strictly increasing, without wrap-around: every gap after the first is >= 1 and no prefix
  // sum passes 2^32 (a wrapped sum would be <= its predecessor).
  // A branch-free sweep the compiler vectorizes; the position only on failure.
  if (OrderFaults(out.data(), static_cast<size_t>(count)) != 0) {
    for (uint64_t j = 1; j < count; ++j) {
      if (out[j] <= out[j - 1]) {
        return Fault(IndexFault::kOrder, message,
                     "decoded indices not strictly increasing at position " + std::to_string(j));
      }
    }
  }
  if (out[count - 1] >= shard_len) {
    return Fault(IndexFault::kRange, message,
                 "index " + std::to_string(out[count - 1]) + " >= shard length " +
                     std::to_string(shard_len));
  }
  return IndexFault::kNone;
}

IndexFault TooMany(uint64_t count, std::string* message) {
  return Fault(IndexFault::kEncoding, message,
               "bitmap holds more than count = " + std::to_string(count) + " indices");
}

IndexFault DecodeBitmap(std::span<const uint8_t> bytes, uint64_t count, uint64_t shard_len,
                        std::span<uint32_t> out, std::string* message) {
  if (count == 0) {
    return Fault(IndexFault::kEncoding, message,
                 "bitmap for 0 indices (an empty list is delta-vbyte)");
  }
  if (bytes.size() < 5) {
    return Fault(IndexFault::kEncoding, message,
                 "bitmap frame of " + std::to_string(bytes.size()) + " bytes (base + >= 1 byte)");
  }
  uint32_t base = 0;
  std::memcpy(&base, bytes.data(), 4);  // little-endian host (x86-64, aarch64)
  const std::span<const uint8_t> map = bytes.subspan(4);
  if ((map[0] & 1) == 0 || map.back() == 0) {
    return Fault(IndexFault::kEncoding, message,
                 "bitmap not canonical (bit 0 clear or a trailing zero byte)");
  }
  if (base >= shard_len || map.size() > (shard_len - base + 7) / 8) {
    return Fault(IndexFault::kRange, message,
                 "bitmap of " + std::to_string(map.size() * 8) + " bits from " +
                     std::to_string(base) + " exceeds shard length " + std::to_string(shard_len));
  }
  uint64_t k = 0;
  size_t pos = 0;
  for (; pos + 8 <= map.size(); pos += 8) {
    uint64_t word;
    std::memcpy(&word, map.data() + pos, 8);
    const uint32_t at = base + static_cast<uint32_t>(pos * 8);
    while (word != 0) {
      if (k == count) return TooMany(count, message);
      out[k++] = at + static_cast<uint32_t>(std::countr_zero(word));
      word &= word - 1;
    }
  }
  for (; pos < map.size(); ++pos) {
    uint32_t b = map[pos];
    while (b != 0) {
      if (k == count) return TooMany(count, message);
      out[k++] = base + static_cast<uint32_t>(pos * 8) + static_cast<uint32_t>(std::countr_zero(b));
      b &= b - 1;
    }
  }
  if (k != count) {
    return Fault(
        IndexFault::kEncoding, message,
        "bitmap holds " + std::to_string(k) + " indices, count = " + std::to_string(count));
  }
  if (out[count - 1] >= shard_len) {  // the last byte's high bits past the shard
    return Fault(IndexFault::kRange, message,
                 "index " + std::to_string(out[count - 1]) + " >= shard length " +
                     std::to_string(shard_len));
  }
  return IndexFault::kNone;
}

}  // namespace

const char* IndexFormatName(IndexFormat format) {
  static constexpr EnumName<IndexFormat> kNames[] = {{IndexFormat::kRaw, "raw"},
                                                     {IndexFormat::kDeltaVByte, "delta-vbyte"},
                                                     {IndexFormat::kBitmap, "bitmap"}};
  return EnumNameOf(kNames, format, "unknown").data();
}

size_t DeltaVByteBytes(std::span<const uint32_t> indices) {
  if (indices.empty()) return 0;
  size_t n = ControlBytes(indices.size()) + GapBytes(indices[0]);
  for (size_t j = 1; j < indices.size(); ++j) n += GapBytes(indices[j] - indices[j - 1]);
  return n;
}

size_t BitmapBytes(std::span<const uint32_t> indices) {
  if (indices.empty()) return 0;
  return 4 + (static_cast<size_t>(indices.back() - indices.front()) / 8 + 1);
}

void EncodeIndicesAs(IndexFormat format, std::span<const uint32_t> indices, CodedBytes* bytes) {
  DCHECK(StrictlyIncreasing(indices));
  bytes->clear();
  if (indices.empty()) return;
  if (format == IndexFormat::kBitmap) {
    bytes->assign(BitmapBytes(indices), 0);
    const uint32_t base = indices.front();
    std::memcpy(bytes->data(), &base, 4);
    uint8_t* map = bytes->data() + 4;
    for (uint32_t i : indices) map[(i - base) >> 3] |= static_cast<uint8_t>(1u << ((i - base) & 7));
    return;
  }
  CHECK(format == IndexFormat::kDeltaVByte) << "not a compact index format";
  bytes->resize(SvbEncodeBound(indices.size()));
  bytes->resize(SvbDeltaEncode(indices.data(), indices.size(), bytes->data()));
}

IndexFormat EncodeIndices(std::span<const uint32_t> indices, CodedBytes* bytes) {
  const size_t bitmap = BitmapBytes(indices);
  // A lower bound of the delta coding (each gap >= 1 byte) decides most lists without a walk.
  const size_t delta_floor = ControlBytes(indices.size()) + indices.size();
  if (!indices.empty() && bitmap < delta_floor) {
    EncodeIndicesAs(IndexFormat::kBitmap, indices, bytes);
    return IndexFormat::kBitmap;
  }
  EncodeIndicesAs(IndexFormat::kDeltaVByte, indices, bytes);
  if (!indices.empty() && bitmap < bytes->size()) {
    EncodeIndicesAs(IndexFormat::kBitmap, indices, bytes);
    return IndexFormat::kBitmap;
  }
  return IndexFormat::kDeltaVByte;
}

IndexFault DecodeIndices(IndexFormat format, std::span<const uint8_t> bytes, uint64_t count,
                         uint64_t shard_len, std::span<uint32_t> out, std::string* message) {
  CHECK_GE(out.size(), count);
  if (count > shard_len) {
    return Fault(IndexFault::kRange, message,
                 "count " + std::to_string(count) + " > shard length " + std::to_string(shard_len));
  }
  switch (format) {
    case IndexFormat::kDeltaVByte:
      return DecodeDeltaVByte(bytes, count, shard_len, out, message);
    case IndexFormat::kBitmap:
      return DecodeBitmap(bytes, count, shard_len, out, message);
    case IndexFormat::kRaw:
      break;
  }
  return Fault(IndexFault::kEncoding, message, "not a compact index format");
}

}  // namespace sieve
