// Initial weights from a file (sieve-server --init_weights): the format --dump_weights writes,
// D raw little-endian float32 values, nothing else. A server reads only its shard's slice.
//
// CheckWeightsFile: the file exists and holds exactly 4·D bytes. ReadWeightsSlice: the values
// [lo, hi) of that file into out (hi − lo floats, caller-owned), every one finite. Errors:
// NotFound (missing or unreadable file), InvalidArgument (wrong size: truncated, or another model's
// D; a non-finite value, named by index); on error `out` is unspecified and nothing else changes.
// Thread-safety: no shared state.
#ifndef SIEVE_SERVER_SHARD_INITIAL_WEIGHTS_H_
#define SIEVE_SERVER_SHARD_INITIAL_WEIGHTS_H_

#include <cstdint>
#include <string>

#include "base/status.h"

namespace sieve {

Status CheckWeightsFile(const std::string& path, uint64_t d);
Status ReadWeightsSlice(const std::string& path, uint64_t d, uint64_t lo, uint64_t hi, float* out);

}  // namespace sieve

#endif  // SIEVE_SERVER_SHARD_INITIAL_WEIGHTS_H_
