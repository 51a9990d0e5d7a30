#include "proto/stream_vbyte.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SIEVE_SVB_X86 1
#endif

namespace sieve {
namespace {

// Data bytes of the four values one control byte describes.
constexpr std::array<uint8_t, 256> MakeLengths() {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) {
    t[c] = static_cast<uint8_t>(4 + (c & 3) + ((c >> 2) & 3) + ((c >> 4) & 3) + ((c >> 6) & 3));
  }
  return t;
}
constexpr std::array<uint8_t, 256> kLengths = MakeLengths();

using Shuffles = std::array<std::array<uint8_t, 16>, 256>;

// Decoding: lane i's 4 bytes take the value's bytes from its offset in the 16 loaded; 0x80 zeroes.
constexpr Shuffles MakeDecodeShuffles() {
  Shuffles t{};
  for (int c = 0; c < 256; ++c) {
    int offset = 0;
    for (int lane = 0; lane < 4; ++lane) {
      const int len = 1 + ((c >> (2 * lane)) & 3);
      for (int b = 0; b < 4; ++b) {
        t[c][4 * lane + b] = static_cast<uint8_t>(b < len ? offset + b : 0x80);
      }
      offset += len;
    }
  }
  return t;
}

// Encoding: output byte o takes the byte of the lane (and position in it) that lands there.
constexpr Shuffles MakeEncodeShuffles() {
  Shuffles t{};
  for (int c = 0; c < 256; ++c) {
    for (auto& b : t[c]) b = 0x80;
    int offset = 0;
    for (int lane = 0; lane < 4; ++lane) {
      const int len = 1 + ((c >> (2 * lane)) & 3);
      for (int b = 0; b < len; ++b) t[c][offset + b] = static_cast<uint8_t>(4 * lane + b);
      offset += len;
    }
  }
  return t;
}

alignas(16) constexpr Shuffles kDecodeShuffles = MakeDecodeShuffles();
alignas(16) constexpr Shuffles kEncodeShuffles = MakeEncodeShuffles();

inline uint32_t Code(uint32_t gap) {
  return gap < (1u << 8) ? 0 : gap < (1u << 16) ? 1 : gap < (1u << 24) ? 2 : 3;
}

// Values [from, n) after `prev`, ctrl/data positioned at value `from` (from % 4 == 0).
size_t EncodeTail(const uint32_t* in, size_t from, size_t n, uint32_t prev, uint8_t* ctrl,
                  uint8_t* data) {
  uint8_t* const start = data;
  for (size_t j = from; j < n; ++j) {
    const uint32_t gap = in[j] - prev;
    prev = in[j];
    const uint32_t code = Code(gap);
    if (j % 4 == 0) ctrl[j / 4] = 0;
    ctrl[j / 4] = static_cast<uint8_t>(ctrl[j / 4] | (code << (2 * (j % 4))));
    for (uint32_t b = 0; b <= code; ++b) *data++ = static_cast<uint8_t>(gap >> (8 * b));
  }
  return static_cast<size_t>(data - start);
}

void DecodeTail(const uint8_t* ctrl, const uint8_t* data, size_t from, size_t n, uint32_t prev,
                uint32_t* out) {
  for (size_t j = from; j < n; ++j) {
    const uint32_t code = (ctrl[j / 4] >> (2 * (j % 4))) & 3;
    uint32_t gap = 0;
    for (uint32_t b = 0; b <= code; ++b) gap |= static_cast<uint32_t>(*data++) << (8 * b);
    prev += gap;
    out[j] = prev;
  }
}

#ifdef SIEVE_SVB_X86
#define SIEVE_SVB_TARGET __attribute__((target("avx2")))
#define SIEVE_SVB_NAME(x) x##Avx2
#include "proto/stream_vbyte_simd.inc"
#undef SIEVE_SVB_TARGET
#undef SIEVE_SVB_NAME
#define SIEVE_SVB_TARGET __attribute__((target("ssse3,sse4.1")))
#define SIEVE_SVB_NAME(x) x##Sse4
#include "proto/stream_vbyte_simd.inc"
#undef SIEVE_SVB_TARGET
#undef SIEVE_SVB_NAME

bool HaveAvx2() { return __builtin_cpu_supports("avx2"); }
bool HaveVector() { return __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("sse4.1"); }
#endif

}  // namespace

size_t SvbAnnouncedBytes(const uint8_t* ctrl, size_t n) {
  const size_t bytes = (n + 3) / 4;
  size_t total = bytes + 4 * bytes;  // the control bytes, and 1 byte per field before the codes
  size_t c = 0;
  // Eight control bytes at a time: the 2-bit fields summed within each byte (SWAR), then the
  // bytes summed by a multiply (each byte's sum is at most 12, eight of them at most 96).
  for (; c + 8 <= bytes; c += 8) {
    uint64_t w;
    std::memcpy(&w, ctrl + c, 8);
    const uint64_t pairs = (w & 0x3333333333333333ull) + ((w >> 2) & 0x3333333333333333ull);
    const uint64_t per_byte =
        (pairs & 0x0F0F0F0F0F0F0F0Full) + ((pairs >> 4) & 0x0F0F0F0F0F0F0F0Full);
    total += (per_byte * 0x0101010101010101ull) >> 56;
  }
  for (; c < bytes; ++c) total += kLengths[ctrl[c]] - 4u;
  return total;
}

size_t SvbDeltaEncodeScalar(const uint32_t* in, size_t n, uint8_t* out) {
  return (n + 3) / 4 + EncodeTail(in, 0, n, 0, out, out + (n + 3) / 4);
}

void SvbDeltaDecodeScalar(const uint8_t* in, size_t /*size*/, size_t n, uint32_t* out) {
  DecodeTail(in, in + (n + 3) / 4, 0, n, 0, out);
}

size_t SvbDeltaEncode(const uint32_t* in, size_t n, uint8_t* out) {
#ifdef SIEVE_SVB_X86
  if (HaveAvx2()) return EncodeAvx2(in, n, out);
  if (HaveVector()) return EncodeSse4(in, n, out);
#endif
  return SvbDeltaEncodeScalar(in, n, out);
}

void SvbDeltaDecode(const uint8_t* in, size_t size, size_t n, uint32_t* out) {
#ifdef SIEVE_SVB_X86
  if (HaveAvx2()) return DecodeAvx2(in, size, n, out);
  if (HaveVector()) return DecodeSse4(in, size, n, out);
#endif
  SvbDeltaDecodeScalar(in, size, n, out);
}

}  // namespace sieve
