// Host-memory helpers around sparse (index, value) vectors, used by workers and by the server,
// which keeps its shard on the host: scatter-add into a dense buffer and fp16 / bf16 packing of
// values
// (the split of indices by shard is shard math: proto/shards.h). All inputs are validated (bounds,
// ordering, sizes) and reported as Status; outputs are caller- owned. Pure functions on caller
// buffers: thread-safe as long as buffers are not shared.
#ifndef SIEVE_KERNELS_SPARSE_OPS_H_
#define SIEVE_KERNELS_SPARSE_OPS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/value_precision.h"

namespace sieve {

// dense[indices[j]] += scale · values[j] for every j (duplicates accumulate). Fails, touching
// nothing, when the sizes differ or an index is ≥ dense.size().
Status ScatterAdd(std::span<const uint32_t> indices, std::span<const float> values, float scale,
                  std::span<float> dense);

// IEEE-754 binary16 conversion, round to nearest even; overflow → ±Inf, NaN stays NaN,
// subnormals handled in both directions.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
// Elementwise over spans of equal length (fails otherwise).
Status PackFp16(std::span<const float> in, std::span<uint16_t> out);
Status UnpackFp16(std::span<const uint16_t> in, std::span<float> out);

// bfloat16 (the high 16 bits of a binary32) conversion, round to nearest even; values past the
// largest bf16 round to ±Inf, NaN stays NaN (quiet). Bf16ToFloat is exact.
uint16_t FloatToBf16(float f);
float Bf16ToFloat(uint16_t b);
Status PackBf16(std::span<const float> in, std::span<uint16_t> out);
Status UnpackBf16(std::span<const uint16_t> in, std::span<float> out);

// x rounded to precision p (to nearest even) as a binary32, saturating: a finite x beyond p's
// largest finite value gives that value (±65504, ±3.3895e38), ±Inf and NaN stay. The function
// error feedback rounds pushed values with (SelectOptions::round_values), on either backend.
float RoundToValuePrecision(float x, ValuePrecision p);
// out[i] = the fp16 / bf16 bits of RoundToValuePrecision(in[i], p), so a finite value always packs
// to a finite one (a value already rounded packs exactly). InvalidArgument for kFp32 or lengths
// that differ.
Status PackSaturating(std::span<const float> in, ValuePrecision p, std::span<uint16_t> out);
// out[i] = in[i] decoded from precision p (kFp16 or kBf16; exact). InvalidArgument otherwise.
Status Unpack16(std::span<const uint16_t> in, ValuePrecision p, std::span<float> out);

}  // namespace sieve

#endif  // SIEVE_KERNELS_SPARSE_OPS_H_
