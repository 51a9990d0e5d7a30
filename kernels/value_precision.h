// ValuePrecision: the precision in which values travel on the wire (fp32, IEEE binary16, bfloat16;
// proto/codec.h's ValueType is this enum, with the wire's flags). The
// kernels round to it where error feedback must keep the rounding error in the residual
// (SelectOptions::round_values, kernels/selection.h). Part of the installed API.
// Thread-safety: a plain enum.
#ifndef SIEVE_KERNELS_VALUE_PRECISION_H_
#define SIEVE_KERNELS_VALUE_PRECISION_H_

#include <cstdint>

namespace sieve {

// kFp32: values as they are; kFp16: IEEE-754 binary16 (11-bit significand, largest finite
// 65504); kBf16: bfloat16 (the high 16 bits of a binary32: 8-bit significand, binary32's range).
enum class ValuePrecision : uint8_t { kFp32 = 0, kFp16 = 1, kBf16 = 2 };

}  // namespace sieve

#endif  // SIEVE_KERNELS_VALUE_PRECISION_H_
