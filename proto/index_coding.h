// Compact coding of a data message's index frame (protocol 7, docs/protocol.md "Index coding").
// A sparse PUSH or UPDATE carries a strictly increasing list of shard-relative indices. Besides
// the plain array of uint32 (kRaw, what protocol 6 sent), two codings are defined:
//   kDeltaVByte  the gaps (first index, then index[j] - index[j - 1]) in Stream VByte: ceil(n/4)
//                control bytes (2 bits per gap, LSB first: byte length - 1; unused fields of the
//                last control byte are 0), then each gap's 1-4 bytes little-endian;
//   kBitmap      a little-endian uint32 base (the first index), then a bitmap of the range from
//                it: bit b of byte j (LSB first) stands for index base + 8j + b. Bit 0 is set and
//                the last byte is not 0, so each index set has one bitmap.
// The encoder (EncodeIndices) picks whichever is smaller for the list; a sparse list of random
// indices costs about 1.25 bytes per index in kDeltaVByte (gaps < 256), a union dense enough that
// gaps average under ~10 costs less as a bitmap.
//
// Decoding validates the bytes completely before any index is believed: the frame size against
// what the control bytes or the bitmap's population say, the count, then order and range. It
// reads no byte outside the frame, whatever the frame holds.
// The gaps are coded by proto/stream_vbyte.h (libstreamvbyte's byte format, vectorized here).
// Thread-safety: all functions are reentrant; they touch only their arguments.
#ifndef SIEVE_PROTO_INDEX_CODING_H_
#define SIEVE_PROTO_INDEX_CODING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace sieve {

enum class IndexFormat : uint8_t { kRaw = 0, kDeltaVByte = 1, kBitmap = 2 };

// std::allocator, but resize() leaves new bytes uninitialized (the encoder overwrites them): a
// coded frame is not zero-filled first.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) {}
  template <typename U>
  void construct(U* p) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using CodedBytes = std::vector<uint8_t, UninitializedAllocator<uint8_t>>;

// "raw", "delta-vbyte", "bitmap".
const char* IndexFormatName(IndexFormat format);

// Bytes the two compact codings take for `indices` (strictly increasing). DeltaVByteBytes walks
// the list; BitmapBytes is O(1) (0 for an empty list).
size_t DeltaVByteBytes(std::span<const uint32_t> indices);
size_t BitmapBytes(std::span<const uint32_t> indices);

// Encodes `indices` (strictly increasing; the caller's invariant, CHECKed in debug builds) in
// the smaller of kDeltaVByte and kBitmap (ties: kDeltaVByte) into *bytes (replaced), and returns
// the format used. An empty list is kDeltaVByte with no bytes.
IndexFormat EncodeIndices(std::span<const uint32_t> indices, CodedBytes* bytes);
// Encodes in the given compact format (kDeltaVByte or kBitmap), for tests and benchmarks.
void EncodeIndicesAs(IndexFormat format, std::span<const uint32_t> indices, CodedBytes* bytes);

// Why a decode failed: the frame's structure (kEncoding: sizes, control bits, population,
// canonical form) or the decoded list (kOrder: not strictly increasing; kRange: an index >=
// shard_len). The codec maps them to ERROR_BAD_ENCODING, ERROR_INDEX_ORDER, ERROR_INDEX_RANGE.
enum class IndexFault { kNone, kEncoding, kOrder, kRange };

// Decodes `count` indices in `format` (kDeltaVByte or kBitmap) from `bytes` into out[0, count)
// (out must hold count elements). Returns kNone on success; otherwise the fault, with *message
// naming it, and out's content is unspecified (the caller discards it).
IndexFault DecodeIndices(IndexFormat format, std::span<const uint8_t> bytes, uint64_t count,
                         uint64_t shard_len, std::span<uint32_t> out, std::string* message);

}  // namespace sieve

#endif  // SIEVE_PROTO_INDEX_CODING_H_
