#include "kernels/sparse_ops.h"

#include <bit>
#include <cmath>
#include <string>

namespace sieve {

Status ScatterAdd(std::span<const uint32_t> indices, std::span<const float> values, float scale,
                  std::span<float> dense) {
  if (indices.size() != values.size()) {
    return InvalidArgumentError("scatter-add: " + std::to_string(indices.size()) + " indices but " +
                                std::to_string(values.size()) + " values");
  }
  for (uint32_t i : indices) {
    if (i >= dense.size()) {
      return OutOfRangeError("scatter-add: index " + std::to_string(i) + " >= length " +
                             std::to_string(dense.size()));
    }
  }
  for (size_t j = 0; j < indices.size(); ++j) dense[indices[j]] += scale * values[j];
  return Status::Ok();
}

uint16_t FloatToHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // ≥ 65520 rounds past the largest half
  if (ax < 0x38800000u) {                        // below 2^-14: half subnormal or zero
    if (ax <= 0x33000000u) return sign;          // ≤ 2^-25 rounds to zero (tie to even)
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(ax >> 23);
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return sign | static_cast<uint16_t>(q);
  }
  uint32_t h = (ax - 0x38000000u) >> 13;
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float mag = std::ldexp(static_cast<float>(m), -24);
    return std::bit_cast<float>(std::bit_cast<uint32_t>(mag) | sign);
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

Status PackFp16(std::span<const float> in, std::span<uint16_t> out) {
  if (in.size() != out.size()) return InvalidArgumentError("fp16 pack: length mismatch");
  for (size_t i = 0; i < in.size(); ++i) out[i] = FloatToHalf(in[i]);
  return Status::Ok();
}

Status UnpackFp16(std::span<const uint16_t> in, std::span<float> out) {
  if (in.size() != out.size()) return InvalidArgumentError("fp16 unpack: length mismatch");
  for (size_t i = 0; i < in.size(); ++i) out[i] = HalfToFloat(in[i]);
  return Status::Ok();
}

uint16_t FloatToBf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // NaN
  // Round to nearest even on the dropped 16 bits; a carry into the exponent is the right result
  // (the largest finite values round to Inf, as binary16's do).
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float Bf16ToFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

Status PackBf16(std::span<const float> in, std::span<uint16_t> out) {
  if (in.size() != out.size()) return InvalidArgumentError("bf16 pack: length mismatch");
  for (size_t i = 0; i < in.size(); ++i) out[i] = FloatToBf16(in[i]);
  return Status::Ok();
}

Status UnpackBf16(std::span<const uint16_t> in, std::span<float> out) {
  if (in.size() != out.size()) return InvalidArgumentError("bf16 unpack: length mismatch");
  for (size_t i = 0; i < in.size(); ++i) out[i] = Bf16ToFloat(in[i]);
  return Status::Ok();
}

}  // namespace sieve
