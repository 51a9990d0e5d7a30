// CRC-32C (Castagnoli): the checksum of sieve's data frames (docs/protocol.md, "Checksum rule").
//
// Parameters: polynomial 0x1EDC6F41 (reflected 0x82F63B78), reflected input and output, initial
// value 0xFFFFFFFF, final XOR 0xFFFFFFFF (the iSCSI / RFC 3720 CRC). The check value, the CRC of
// the nine ASCII bytes "123456789", is 0xE3069283.
//
// Crc32c() picks at run time, once per process, the fastest routine this CPU runs (Crc32cPath):
// carry-less multiply folding on 512-bit vectors (AVX-512F + VPCLMULQDQ), else the SSE4.2 `crc32`
// instruction in three interleaved streams, else a portable table-driven (slice-by-8) routine.
// All compute the identical value for the same bytes, so a checksum never depends on the machine.
// No build flag is needed: each accelerated routine is compiled for its instruction set on its own
// and only called after the CPU check, so binaries run on any x86-64 (and, portable only, on other
// architectures).
// Thread-safety: all functions are reentrant.
#ifndef SIEVE_PROTO_CRC32C_H_
#define SIEVE_PROTO_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace sieve {

// Extends `crc`, the CRC-32C of some bytes A (0 for no bytes), to the CRC-32C of A followed by
// the `size` bytes at `data` (which may be null when size is 0). Chaining is exact:
// Crc32c(Crc32c(0, a, n), b, m) equals the CRC-32C of the n + m bytes a||b.
uint32_t Crc32c(uint32_t crc, const void* data, size_t size);

// The routines behind Crc32c(), for tests and benchmarks.
enum class Crc32cPath {
  kPortable,  // slice-by-8 tables, any CPU
  kSse42,     // SSE4.2 crc32 instruction, three streams
  kClmul,     // AVX-512F + VPCLMULQDQ folding (SSE4.2 for short inputs, tail and final step)
};

// Whether this CPU runs `path` (kPortable: always).
bool Crc32cSupported(Crc32cPath path);

// The path Crc32c() uses on this CPU.
Crc32cPath Crc32cBestPath();

// "portable", "sse4.2" or "vpclmulqdq".
const char* Crc32cPathName(Crc32cPath path);

// Crc32c() computed by `path`. Precondition: Crc32cSupported(path); an unsupported path falls
// back to kPortable.
uint32_t Crc32cWith(Crc32cPath path, uint32_t crc, const void* data, size_t size);

}  // namespace sieve

#endif  // SIEVE_PROTO_CRC32C_H_
