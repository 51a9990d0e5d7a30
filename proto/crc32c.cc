#include "proto/crc32c.h"

#include <array>
#include <cstring>

#include "base/enum_names.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define SIEVE_CRC32C_X86 1
#endif

// The routines work on the raw register value, the CRC state before the final XOR; the public
// functions convert (state = ~crc) on entry and exit, which makes chaining exact. All raw states
// are linear in (start state, bytes) over GF(2), which the multi-stream routines rely on.
namespace sieve {
namespace {

using Table = std::array<uint32_t, 256>;

constexpr uint32_t kPolyReflected = 0x82F63B78u;

// What this CPU runs beyond the portable routine.
struct Support {
  bool sse42 = false;
  bool clmul = false;
};

// kSlice[0] is the bytewise table; kSlice[k][b] advances kSlice[k-1][b] by one zero byte, so that
// kSlice[k] accounts for a byte followed by k more (slice-by-8).
constexpr std::array<Table, 8> MakeSliceTables() {
  std::array<Table, 8> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int bit = 0; bit < 8; ++bit) c = (c >> 1) ^ (kPolyReflected & (0u - (c & 1u)));
    t[0][b] = c;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (size_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  }
  return t;
}
constexpr std::array<Table, 8> kSlice = MakeSliceTables();

// Little-endian load from unaligned bytes (the compiler emits one plain load).
inline uint32_t Load32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

uint32_t PortableRaw(uint32_t c, const uint8_t* p, size_t n) {
  for (; n >= 8; p += 8, n -= 8) {
    const uint32_t lo = c ^ Load32(p);
    const uint32_t hi = Load32(p + 4);
    c = kSlice[7][lo & 0xFF] ^ kSlice[6][(lo >> 8) & 0xFF] ^ kSlice[5][(lo >> 16) & 0xFF] ^
        kSlice[4][lo >> 24] ^ kSlice[3][hi & 0xFF] ^ kSlice[2][(hi >> 8) & 0xFF] ^
        kSlice[1][(hi >> 16) & 0xFF] ^ kSlice[0][hi >> 24];
  }
  for (; n > 0; ++p, --n) c = (c >> 8) ^ kSlice[0][(c ^ *p) & 0xFF];
  return c;
}

#ifdef SIEVE_CRC32C_X86

// x86 is little-endian and loads unaligned words natively.
inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// A shift by L maps a raw state c to the state reached from c after L zero bytes. By linearity,
// the state after A||B from start c is shift_|B|(state after A from c) XOR (state after B from 0),
// which joins independently computed streams. A shift is linear, so four byte-indexed tables
// express it.
using Shift = std::array<Table, 4>;

constexpr Shift ShiftFromBasis(const std::array<uint32_t, 32>& basis) {
  Shift s{};
  for (size_t k = 0; k < 4; ++k) {
    for (uint32_t v = 0; v < 256; ++v) {
      uint32_t c = 0;
      for (size_t bit = 0; bit < 8; ++bit) {
        if ((v >> bit) & 1u) c ^= basis[8 * k + bit];
      }
      s[k][v] = c;
    }
  }
  return s;
}

constexpr uint32_t ApplyShift(const Shift& s, uint32_t c) {
  return s[0][c & 0xFF] ^ s[1][(c >> 8) & 0xFF] ^ s[2][(c >> 16) & 0xFF] ^ s[3][c >> 24];
}

constexpr Shift MakeShift(size_t bytes) {
  std::array<uint32_t, 32> basis{};
  for (size_t i = 0; i < 32; ++i) {
    uint32_t c = 1u << i;
    for (size_t b = 0; b < bytes; ++b) c = (c >> 8) ^ kSlice[0][c & 0xFF];
    basis[i] = c;
  }
  return ShiftFromBasis(basis);
}

constexpr Shift Twice(const Shift& s) {
  std::array<uint32_t, 32> basis{};
  for (size_t i = 0; i < 32; ++i) basis[i] = ApplyShift(s, ApplyShift(s, 1u << i));
  return ShiftFromBasis(basis);
}

// Shifts by L and 2L bytes, for three streams of L bytes each.
template <size_t L>
struct StreamShifts {
  static constexpr Shift kByL = MakeShift(L);
  static constexpr Shift kBy2L = Twice(kByL);
};

// Consumes whole blocks of 3 x L bytes from (*p, *n): three independent crc32 chains over the
// block's thirds (the instruction's latency hides behind the other two), then joined.
template <size_t L>
__attribute__((target("sse4.2"))) uint64_t HardwareBlocks(uint64_t c, const uint8_t** p,
                                                          size_t* n) {
  static_assert(L % 8 == 0);
  for (; *n >= 3 * L; *p += 3 * L, *n -= 3 * L) {
    const uint8_t* a = *p;
    uint64_t c1 = 0, c2 = 0;
    for (size_t i = 0; i < L; i += 8) {
      c = _mm_crc32_u64(c, Load64(a + i));
      c1 = _mm_crc32_u64(c1, Load64(a + L + i));
      c2 = _mm_crc32_u64(c2, Load64(a + 2 * L + i));
    }
    c = ApplyShift(StreamShifts<L>::kBy2L, static_cast<uint32_t>(c)) ^
        ApplyShift(StreamShifts<L>::kByL, static_cast<uint32_t>(c1)) ^ c2;
  }
  return c;
}

__attribute__((target("sse4.2"))) uint32_t Sse42Raw(uint32_t state, const uint8_t* p, size_t n) {
  uint64_t c = state;
  c = HardwareBlocks<2048>(c, &p, &n);  // 6 KiB blocks
  c = HardwareBlocks<256>(c, &p, &n);   // 768-byte blocks for the rest
  for (; n >= 8; p += 8, n -= 8) c = _mm_crc32_u64(c, Load64(p));
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}

// Folding with carry-less multiplication. Read the bytes as one polynomial D over GF(2), first
// byte's bit 0 the highest power (reflected order); the zero-start raw CRC of D is D·x^32 mod P.
// A 16-byte block A = A_hi·x^64 + A_lo sits in a register with A_hi (its first 8 bytes) in the
// low qword. Moving A forward over d blocks, A·x^(128d) ≡ A_hi·(x^(128d+64) mod P) +
// A_lo·(x^(128d) mod P), two 64x32-bit products of under 96 bits, which XOR into the block d
// places later; at the end one 16-byte block is left and two crc32 instructions reduce it. The
// multiplier x^t mod P is stored reflected in the high half of a qword, so that the product lands
// in the register's reflected frame one degree high; hence the constants use t - 1.
constexpr uint32_t XPowMod(size_t t) {  // reflected: bit 31 is x^0
  uint32_t r = 0x80000000u;
  for (size_t i = 0; i < t; ++i) r = (r >> 1) ^ (kPolyReflected & (0u - (r & 1u)));
  return r;
}
// The pair of multipliers (low qword, high qword) that moves a block `blocks` x 16 bytes ahead,
// evaluated at compile time.
template <size_t blocks>
struct FoldBy {
  static constexpr int64_t kLo = int64_t{XPowMod(128 * blocks + 63)} << 32;
  static constexpr int64_t kHi = int64_t{XPowMod(128 * blocks - 1)} << 32;
};

constexpr size_t kClmulMinBytes = 256;  // below this the crc32 instruction is as fast

// The routine's instruction sets; AVX-512F brings 512-bit vectors and three-way XOR.
#define SIEVE_CRC32C_CLMUL_TARGET "avx512f,vpclmulqdq,pclmul,sse4.2"

// Moves acc (lanes of 16-byte blocks) forward by the distance its multipliers k encode and XORs
// in `next`.
__attribute__((target(SIEVE_CRC32C_CLMUL_TARGET))) inline __m512i Fold512(__m512i acc, __m512i k,
                                                                          __m512i next) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k, 0x00),
                                   _mm512_clmulepi64_epi128(acc, k, 0x11), next, 0x96);
}

__attribute__((target(SIEVE_CRC32C_CLMUL_TARGET))) inline __m256i Fold256(__m256i acc, __m256i k,
                                                                          __m256i next) {
  const __m256i lo = _mm256_clmulepi64_epi128(acc, k, 0x00);
  const __m256i hi = _mm256_clmulepi64_epi128(acc, k, 0x11);
  return _mm256_xor_si256(_mm256_xor_si256(lo, hi), next);
}

__attribute__((target(SIEVE_CRC32C_CLMUL_TARGET))) inline __m128i Fold128(__m128i acc, __m128i k,
                                                                          __m128i next) {
  const __m128i lo = _mm_clmulepi64_si128(acc, k, 0x00);
  const __m128i hi = _mm_clmulepi64_si128(acc, k, 0x11);
  return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

__attribute__((target(SIEVE_CRC32C_CLMUL_TARGET))) inline __m512i Load512(const uint8_t* p) {
  return _mm512_loadu_si512(p);
}

template <size_t blocks>
__attribute__((target(SIEVE_CRC32C_CLMUL_TARGET))) inline __m512i Multipliers512() {
  using K = FoldBy<blocks>;
  return _mm512_set_epi64(K::kHi, K::kLo, K::kHi, K::kLo, K::kHi, K::kLo, K::kHi, K::kLo);
}

__attribute__((target(SIEVE_CRC32C_CLMUL_TARGET))) uint32_t ClmulRaw(uint32_t state,
                                                                     const uint8_t* p, size_t n) {
  if (n < kClmulMinBytes) return Sse42Raw(state, p, n);
  // Four accumulators of four blocks each: 256 bytes per round, so each moves 16 blocks ahead.
  const __m512i k16 = Multipliers512<16>();
  const __m512i k4 = Multipliers512<4>();
  // The running state enters as the first 32 bits of the message.
  __m512i z0 = _mm512_xor_si512(Load512(p), _mm512_maskz_set1_epi32(1, static_cast<int>(state)));
  __m512i z1 = Load512(p + 64), z2 = Load512(p + 128), z3 = Load512(p + 192);
  for (p += 256, n -= 256; n >= 256; p += 256, n -= 256) {
    z0 = Fold512(z0, k16, Load512(p));
    z1 = Fold512(z1, k16, Load512(p + 64));
    z2 = Fold512(z2, k16, Load512(p + 128));
    z3 = Fold512(z3, k16, Load512(p + 192));
  }
  z1 = Fold512(z0, k4, z1);
  z2 = Fold512(z1, k4, z2);
  z3 = Fold512(z2, k4, z3);
  for (; n >= 64; p += 64, n -= 64) z3 = Fold512(z3, k4, Load512(p));
  // Halve to one 16-byte block: the first half moves over the second, then again.
  const __m256i k2 =
      _mm256_set_epi64x(FoldBy<2>::kHi, FoldBy<2>::kLo, FoldBy<2>::kHi, FoldBy<2>::kLo);
  // (Element access instead of the cast/extract intrinsics, which trip GCC 12's
  // -Wmaybe-uninitialized.)
  const __m256i lower = _mm256_set_epi64x(z3[3], z3[2], z3[1], z3[0]);
  const __m256i upper = _mm256_set_epi64x(z3[7], z3[6], z3[5], z3[4]);
  const __m256i y = Fold256(lower, k2, upper);
  const __m128i k1 = _mm_set_epi64x(FoldBy<1>::kHi, FoldBy<1>::kLo);
  __m128i x = Fold128(_mm256_castsi256_si128(y), k1, _mm256_extracti128_si256(y, 1));
  for (; n >= 16; p += 16, n -= 16) {
    x = Fold128(x, k1, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  uint64_t c = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
  c = _mm_crc32_u64(c, static_cast<uint64_t>(_mm_extract_epi64(x, 1)));
  // GCC 12 leaves out the vzeroupper before this tail call: with the upper halves of the vector
  // registers still in use, every legacy-SSE instruction the caller runs next (the codec's
  // scans, Stream VByte) pays the SSE/AVX transition (measured: 4x slower gap coding).
  _mm256_zeroupper();
  return Sse42Raw(static_cast<uint32_t>(c), p, n);
}

#undef SIEVE_CRC32C_CLMUL_TARGET

Support Detect() {
  __builtin_cpu_init();  // may run before the runtime's own CPU probe (static initializers)
  Support s;
  s.sse42 = __builtin_cpu_supports("sse4.2");
  s.clmul = s.sse42 && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("avx512f") &&
            __builtin_cpu_supports("vpclmulqdq");
  return s;
}

#else

Support Detect() { return {}; }
uint32_t Sse42Raw(uint32_t state, const uint8_t* p, size_t n) { return PortableRaw(state, p, n); }
uint32_t ClmulRaw(uint32_t state, const uint8_t* p, size_t n) { return PortableRaw(state, p, n); }

#endif  // SIEVE_CRC32C_X86

// Zero-initialized (all false: portable) until its dynamic initializer runs, so a call from
// another static initializer is still correct.
const Support kSupport = Detect();

uint32_t Raw(Crc32cPath path, uint32_t state, const uint8_t* p, size_t n) {
  if (!Crc32cSupported(path)) path = Crc32cPath::kPortable;
  switch (path) {
    case Crc32cPath::kClmul:
      return ClmulRaw(state, p, n);
    case Crc32cPath::kSse42:
      return Sse42Raw(state, p, n);
    case Crc32cPath::kPortable:
      break;
  }
  return PortableRaw(state, p, n);
}

}  // namespace

bool Crc32cSupported(Crc32cPath path) {
  switch (path) {
    case Crc32cPath::kClmul:
      return kSupport.clmul;
    case Crc32cPath::kSse42:
      return kSupport.sse42;
    case Crc32cPath::kPortable:
      return true;
  }
  return false;
}

Crc32cPath Crc32cBestPath() {
  if (kSupport.clmul) return Crc32cPath::kClmul;
  if (kSupport.sse42) return Crc32cPath::kSse42;
  return Crc32cPath::kPortable;
}

const char* Crc32cPathName(Crc32cPath path) {
  static constexpr EnumName<Crc32cPath> kNames[] = {{Crc32cPath::kClmul, "vpclmulqdq"},
                                                    {Crc32cPath::kSse42, "sse4.2"},
                                                    {Crc32cPath::kPortable, "portable"}};
  return EnumNameOf(kNames, path, "portable").data();
}

uint32_t Crc32cWith(Crc32cPath path, uint32_t crc, const void* data, size_t size) {
  return ~Raw(path, ~crc, static_cast<const uint8_t*>(data), size);
}

uint32_t Crc32c(uint32_t crc, const void* data, size_t size) {
  return Crc32cWith(Crc32cBestPath(), crc, data, size);
}

}  // namespace sieve
