// Raw ZeroMQ round trips: the ceiling a sparse push/pull can reach over the same sockets. Used by
// bench_transport and bench_pushpull as their same-run reference.
//
// Pattern: S server threads and W worker threads, each with its own ZeroMQ context and one PULL
// socket bound on 127.0.0.1; every worker has a PUSH to every server's PULL and every server one
// PUSH per worker (sieve's socket pattern). A round trip of one worker: it sends each server a
// multipart [32-byte header][4·up indices][4·up values] message, then waits for every server's
// [32-byte header][4·down indices][4·down values] reply. Servers answer each push at once. Frames
// are sent zero-copy from fixed buffers and nothing is validated: no codec, no checksum.
//
// Thread-safety: RunRawRoundTrips is a blocking call that owns every thread and socket it makes;
// concurrent calls are independent.
#ifndef SIEVE_BENCH_RAWZMQ_RAW_ROUND_TRIPS_H_
#define SIEVE_BENCH_RAWZMQ_RAW_ROUND_TRIPS_H_

#include <cstddef>
#include <cstdint>

namespace sieve {

struct RawRoundTripConfig {
  int workers = 1;
  int servers = 1;
  size_t up_pairs = 0;    // (index, value) pairs a worker sends each server per round trip
  size_t down_pairs = 0;  // pairs each server sends back per round trip
  int rounds = 10;        // timed round trips per worker
  int warmup = 3;         // untimed round trips per worker before the clock starts
};

struct RawRoundTripResult {
  double seconds = 0;        // wall-clock time of the timed rounds (all workers)
  uint64_t round_trips = 0;  // workers · rounds
  uint64_t bytes = 0;        // every frame sent both ways during the timed rounds
  bool ok = true;            // false when a socket failed (the numbers are then meaningless)
};

RawRoundTripResult RunRawRoundTrips(const RawRoundTripConfig& config);

}  // namespace sieve

#endif  // SIEVE_BENCH_RAWZMQ_RAW_ROUND_TRIPS_H_
