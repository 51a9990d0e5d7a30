// Stream VByte of the gaps of an ascending uint32 list (Lemire, Kurz & Rupp, "Stream VByte:
// Faster Byte-Oriented Integer Compression", 2018), the byte format of libstreamvbyte's
// streamvbyte_delta_encode / _decode with prev = 0: ceil(n/4) control bytes (2 bits per value,
// LSB first: byte length - 1), then each gap in 1-4 bytes little-endian. Debian's library is built
// without SIMD (a scalar loop, ~5 ns per value here), so sieve codes the same bytes itself: an
// SSSE3/SSE4.1 path (a shuffle per 4 values, picked at load time) and a scalar one; the library
// is the reference the tests compare both against (tests/proto/stream_vbyte_test.cc).
// Thread-safety: pure functions on caller buffers.
#ifndef SIEVE_PROTO_STREAM_VBYTE_H_
#define SIEVE_PROTO_STREAM_VBYTE_H_

#include <cstddef>
#include <cstdint>

namespace sieve {

// Bytes SvbDeltaEncode may write for n values (control bytes + 4 per value), plus the 16 bytes of
// slack its vector stores need: what `out` must hold.
inline size_t SvbEncodeBound(size_t n) { return (n + 3) / 4 + 4 * n + 16; }

// Codes the gaps of in[0, n) (in[0] - 0, in[j] - in[j - 1]; unsigned wrap-around, so any list
// codes) into out, which holds SvbEncodeBound(n) bytes. Returns the bytes of the coding (without
// the slack).
size_t SvbDeltaEncode(const uint32_t* in, size_t n, uint8_t* out);

// Bytes of the coding the control bytes ctrl[0, ceil(n/4)) announce, counting every field of the
// last control byte (the caller checks that the unused ones are 0 and subtracts 4 - n % 4).
size_t SvbAnnouncedBytes(const uint8_t* ctrl, size_t n);

// Decodes n values from in[0, size), where size is exactly the coding's length (the caller has
// checked it against SvbAnnouncedBytes): reads no byte outside [in, in + size). Prefix sums wrap
// modulo 2^32 (the caller checks the order).
void SvbDeltaDecode(const uint8_t* in, size_t size, size_t n, uint32_t* out);

// The scalar paths alone (tests compare them with the vector ones and the library).
size_t SvbDeltaEncodeScalar(const uint32_t* in, size_t n, uint8_t* out);
void SvbDeltaDecodeScalar(const uint8_t* in, size_t size, size_t n, uint32_t* out);

}  // namespace sieve

#endif  // SIEVE_PROTO_STREAM_VBYTE_H_
