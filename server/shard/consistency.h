// Consistency modes of a sieve server (docs/architecture.md): BSP (synchronous rounds), SSP
// (bounded staleness), ASP (fully asynchronous); how ASP/SSP scale a stale push's step
// (StalenessLr), and what BSP with backup workers does with a late push (LatePushes). Pure value
// types and parsing; thread-safe.
#ifndef SIEVE_SERVER_SHARD_CONSISTENCY_H_
#define SIEVE_SERVER_SHARD_CONSISTENCY_H_

#include <string_view>

#include "base/status.h"

namespace sieve {

enum class Consistency { kBsp, kSsp, kAsp };

// Accepts "bsp", "ssp", "asp". Errors: InvalidArgument naming the accepted values.
StatusOr<Consistency> ParseConsistency(std::string_view name);
std::string_view ConsistencyName(Consistency c);

// ASP/SSP's step for a push of staleness τ (the pushes the shard applied since it built the reply
// the pushing worker last got, i.e. since the weights its gradient was computed on): kNone applies
// every push with the shard's scale; kInverse with scale / τ when τ >= 1 (Zhang et al.,
// "Staleness-aware Async-SGD", IJCAI 2016), a fresh push (τ = 0) with the scale itself.
enum class StalenessLr { kNone, kInverse };

// Accepts "none", "inverse". Errors: InvalidArgument naming the accepted values.
StatusOr<StalenessLr> ParseStalenessLr(std::string_view name);

// What a BSP server with backup workers does with a push of a round that closed without it
// (sieve-server --late_pushes; ShardServerOptions::late_pushes): kApply merges it into the round
// being aggregated, kReturn refuses it and the worker returns it to its residual.
enum class LatePushes { kApply, kReturn };

// Accepts "apply", "return". Errors: InvalidArgument naming the accepted values.
StatusOr<LatePushes> ParseLatePushes(std::string_view name);

}  // namespace sieve

#endif  // SIEVE_SERVER_SHARD_CONSISTENCY_H_
