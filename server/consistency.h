// Consistency modes of a sieve server (docs/architecture.md): BSP (synchronous rounds), SSP
// (bounded staleness), ASP (fully asynchronous). Pure value types and parsing; thread-safe.
#ifndef SIEVE_SERVER_CONSISTENCY_H_
#define SIEVE_SERVER_CONSISTENCY_H_

#include <string_view>

#include "base/status.h"

namespace sieve {

enum class Consistency { kBsp, kSsp, kAsp };

// Accepts "bsp", "ssp", "asp". Errors: InvalidArgument naming the accepted values.
StatusOr<Consistency> ParseConsistency(std::string_view name);
std::string_view ConsistencyName(Consistency c);

}  // namespace sieve

#endif  // SIEVE_SERVER_CONSISTENCY_H_
