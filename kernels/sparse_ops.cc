#include "kernels/sparse_ops.h"

#include <string>

#include "kernels/backend_functors.h"

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

namespace {

// out[i] = convert(in[i]) for every i; `what` names the conversion in the error of a length
// mismatch.
template <typename In, typename Out, typename Convert>
Status ConvertEach(std::span<const In> in, std::span<Out> out, const char* what, Convert convert) {
  if (in.size() != out.size()) return InvalidArgumentError(std::string(what) + ": length mismatch");
  for (size_t i = 0; i < in.size(); ++i) out[i] = convert(in[i]);
  return Status::Ok();
}

}  // namespace

uint16_t FloatToHalf(float f) { return backend_internal::FloatToHalfBits(f); }

float HalfToFloat(uint16_t h) { return backend_internal::HalfBitsToFloat(h); }

Status PackFp16(std::span<const float> in, std::span<uint16_t> out) {
  return ConvertEach(in, out, "fp16 pack", FloatToHalf);
}

Status UnpackFp16(std::span<const uint16_t> in, std::span<float> out) {
  return ConvertEach(in, out, "fp16 unpack", HalfToFloat);
}

uint16_t FloatToBf16(float f) { return backend_internal::FloatToBf16Bits(f); }

float Bf16ToFloat(uint16_t b) { return backend_internal::Bf16BitsToFloat(b); }

Status PackBf16(std::span<const float> in, std::span<uint16_t> out) {
  return ConvertEach(in, out, "bf16 pack", FloatToBf16);
}

Status UnpackBf16(std::span<const uint16_t> in, std::span<float> out) {
  return ConvertEach(in, out, "bf16 unpack", Bf16ToFloat);
}

float RoundToValuePrecision(float x, ValuePrecision p) {
  return backend_internal::RoundToPrecision(x, p);
}

Status PackSaturating(std::span<const float> in, ValuePrecision p, std::span<uint16_t> out) {
  if (in.size() != out.size()) return InvalidArgumentError("16-bit pack: length mismatch");
  if (p == ValuePrecision::kFp16) {
    for (size_t i = 0; i < in.size(); ++i) {
      out[i] = backend_internal::FloatToHalfBits(backend_internal::RoundToPrecision(in[i], p));
    }
  } else if (p == ValuePrecision::kBf16) {
    for (size_t i = 0; i < in.size(); ++i) {
      out[i] = backend_internal::FloatToBf16Bits(backend_internal::RoundToPrecision(in[i], p));
    }
  } else {
    return InvalidArgumentError("16-bit pack: the precision is fp32");
  }
  return Status::Ok();
}

Status Unpack16(std::span<const uint16_t> in, ValuePrecision p, std::span<float> out) {
  if (p == ValuePrecision::kFp16) return UnpackFp16(in, out);
  if (p == ValuePrecision::kBf16) return UnpackBf16(in, out);
  return InvalidArgumentError("16-bit unpack: the precision is fp32");
}

}  // namespace sieve
