// Server checkpoints: one file per shard holding the shard's weights, the BSP round they belong
// to and a hash of the configuration they are valid for.
//
// File layout (little-endian hosts, like the wire format):
//   magic     8 bytes  "SIEVECK1"
//   version   uint32   1
//   reserved  uint32   0
//   config    uint64   ConfigHash() of the job the shard belongs to
//   round     uint64   rounds completed when the snapshot was taken (the next round to aggregate)
//   lo, hi    uint64   the shard's global range [lo, hi)
//   count     uint64   hi - lo
//   values    count × float32
//   crc       uint32   CRC-32 (zlib) of every byte before it
//
// Writes are atomic: the bytes go to "<path>.tmp", which is fsync'ed and renamed over <path>, and
// the directory is fsync'ed, so a crash leaves either the old or the new checkpoint, never a mix.
// Reads verify everything (size, magic, version, CRC, config, range) before returning a value: a
// truncated, corrupt or foreign checkpoint is an error, never silently loaded.
#ifndef SIEVE_SERVER_CHECKPOINT_CHECKPOINT_H_
#define SIEVE_SERVER_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace sieve {

// What a checkpoint must match to be restored.
struct CheckpointConfig {
  std::string model;        // --model
  uint64_t num_params = 0;  // D
  uint64_t lo = 0, hi = 0;  // the shard's range
  std::string consistency;  // bsp | ssp | asp
  uint64_t seed = 0;        // initialization seed
};

// 64-bit FNV-1a of a canonical text form of `config`.
uint64_t ConfigHash(const CheckpointConfig& config);

struct Checkpoint {
  uint64_t config_hash = 0;
  uint64_t round = 0;
  uint64_t lo = 0, hi = 0;
  std::vector<float> weights;  // hi - lo values
};

// "<dir>/server-<rank>.ckpt".
std::string CheckpointPath(const std::string& dir, int rank);

// Writes `ckpt` atomically to `path`. Errors: InvalidArgument (weights.size() != hi - lo),
// Unavailable (the file system refused: open, write, fsync, rename).
Status WriteCheckpoint(const std::string& path, const Checkpoint& ckpt);

// Reads `path` and verifies the file itself (size, magic, version, CRC, sizes), not what it
// belongs to: for tools that learn the shard's range and configuration hash from the file (`sieve
// export`). Errors: NotFound (no file), DataLoss (truncated, wrong magic or version, CRC
// mismatch, inconsistent sizes), Unavailable (read error).
StatusOr<Checkpoint> ReadCheckpointFile(const std::string& path);

// Reads and verifies `path`. Errors: NotFound (no file), DataLoss (truncated, wrong magic or
// version, CRC mismatch, inconsistent sizes), FailedPrecondition (config hash or range differs
// from the expected ones: a checkpoint of another job or shard), Unavailable (read error).
StatusOr<Checkpoint> ReadCheckpoint(const std::string& path, uint64_t expected_config_hash,
                                    uint64_t expected_lo, uint64_t expected_hi);

}  // namespace sieve

#endif  // SIEVE_SERVER_CHECKPOINT_CHECKPOINT_H_
