// Timeouts and intervals in the C++ APIs are std::chrono::milliseconds (the daemons' flags stay
// integers in ms, named *_ms, and are converted where the flags are read).
//
// Contract: kForever means "no deadline" and is accepted only where a function's contract says so
// (Transport::Recv, Node::Receive, which wait forever for any negative timeout); every other wait
// treats a negative timeout as already expired. Where 0 means "disabled", the field says so.
#ifndef SIEVE_BASE_DURATION_H_
#define SIEVE_BASE_DURATION_H_

#include <chrono>

namespace sieve {

inline constexpr std::chrono::milliseconds kForever{-1};

}  // namespace sieve

#endif  // SIEVE_BASE_DURATION_H_
