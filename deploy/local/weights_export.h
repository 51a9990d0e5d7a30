// The trained weights of one sieve job, put back together from what its servers left in one
// directory (`sieve export`, export_command.h): the final shards `shard-<rank>.f32` that
// sieve-server --dump_shard writes at the end (raw little-endian float32, no header) or the
// checkpoints `server-<rank>.ckpt` of --checkpoint_dir (server/checkpoint/checkpoint.h).
//
// Contract of CollectWeights: it returns the model's full flat vector of D float32 values, bit
// for bit what the files hold, or an error naming the file and the reason; never a partial or
// mixed vector. It refuses (error) when:
//  - the directory is missing, unreadable, or holds none of the files of the chosen source;
//  - the files do not tile [0, D) exactly once: a rank missing (a gap), a shard whose size is not
//    its share of D (the servers split [0, D) into S balanced contiguous ranges by rank,
//    proto/shards.h: a shard too short or too long leaves a gap or overlaps its neighbour),
//    a checkpoint range overlapping another or leaving part of [0, D) uncovered;
//  - a file is truncated or corrupt: a final shard that is not a whole number of float32 or not
//    its share of D (a final shard has no checksum: a bit flipped inside it cannot be seen), a
//    checkpoint failing its own checks (size, magic, version, CRC);
//  - a file belongs to another job: a checkpoint whose configuration hash is not the one the job
//    given here (model, D, consistency, seed) has for that shard's range, or whose range is not
//    the one its rank has; a final shard whose size does not fit this job's D and server count;
//    a checkpoint next to the final shards that disagrees with them (range, rank, job).
// The checkpoints in the directory are verified when the final shards are exported too: they
// are the only record of which job the shards belong to. A final shard of another run of the
// very same configuration (same model, D, servers, consistency and seed) cannot be told apart.
//
// Output formats (WriteWeights): kRaw, the D values as raw little-endian float32 (what
// sieve-server --init_weights and sieve-worker --dump_weights use), or kNpy, the same bytes after
// a NumPy .npy version 1.0 header (dtype '<f4', shape (D,)), which numpy.load reads.
//
// Thread-safety: free functions on their arguments; little-endian hosts only, like the files.
#ifndef SIEVE_DEPLOY_LOCAL_WEIGHTS_EXPORT_H_
#define SIEVE_DEPLOY_LOCAL_WEIGHTS_EXPORT_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace sieve {

// What the servers of the job were started with: the checkpoints' configuration hash
// (server/checkpoint/checkpoint.h ConfigHash) is computed from it.
struct ExportJob {
  std::string model;                // the servers' --model ("" when they took the workers' model)
  uint64_t num_params = 0;          // D
  std::string consistency = "bsp";  // the servers' --consistency: bsp | ssp | asp
  uint64_t seed = 1;                // the servers' --seed
};

enum class WeightsSource {
  kAuto,         // the final shards if any shard-<rank>.f32 is there, else the checkpoints
  kFinalShards,  // shard-<rank>.f32
  kCheckpoints,  // server-<rank>.ckpt
};

struct ExportedWeights {
  std::vector<float> weights;                          // D values
  WeightsSource source = WeightsSource::kFinalShards;  // what they came from (never kAuto)
  int num_shards = 0;                                  // S
  // kCheckpoints: each shard's round (the next BSP round to aggregate; ASP/SSP: pushes applied).
  std::vector<uint64_t> rounds;
  // Things a person should know that did not stop the export (files ignored, rounds that
  // differ between the checkpoints), one sentence each.
  std::vector<std::string> notes;
};

// See the file comment. `dir` is one run's directory (on Kubernetes, run-<uid> on the checkpoint
// volume). Errors: InvalidArgument (a bad `job`: D = 0, an unknown consistency), NotFound (no
// directory, no file of the source), DataLoss (truncated or corrupt), FailedPrecondition (a gap,
// an overlap, a file of another job), Unavailable (a read failed).
StatusOr<ExportedWeights> CollectWeights(const std::string& dir, const ExportJob& job,
                                         WeightsSource source);

enum class WeightsFormat { kRaw, kNpy };

// The .npy version 1.0 header of a one-dimensional little-endian float32 array of `count`
// values: magic, version, header length, the header dict, padded with spaces and ended by a
// newline so that the data starts at a multiple of 64 bytes.
std::string NpyHeader(uint64_t count);

// Writes `weights` to `path` in `format`, atomically ("<path>.tmp" renamed over it). Errors:
// Unavailable (open, write or rename failed; nothing is left at `path` that was not there).
Status WriteWeights(const std::string& path, WeightsFormat format, std::span<const float> weights);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_WEIGHTS_EXPORT_H_
