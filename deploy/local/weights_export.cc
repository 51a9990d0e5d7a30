#include "deploy/local/weights_export.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include "proto/shards.h"
#include "server/checkpoint/checkpoint.h"

namespace sieve {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the shard, checkpoint and output files are little-endian float32");

constexpr std::string_view kShardPrefix = "shard-", kShardSuffix = ".f32";
constexpr std::string_view kCheckpointPrefix = "server-", kCheckpointSuffix = ".ckpt";

std::string Range(uint64_t lo, uint64_t hi) {
  return std::string("[").append(std::to_string(lo)).append(", ").append(std::to_string(hi)) + ")";
}

// The rank in "<prefix><rank><suffix>": decimal, no sign, no leading zero; nullopt otherwise.
std::optional<int> RankOf(std::string_view name, std::string_view prefix, std::string_view suffix) {
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
      !name.ends_with(suffix)) {
    return std::nullopt;
  }
  const std::string_view digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  int rank = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    rank = rank * 10 + (c - '0');
  }
  return rank;
}

// The files of one run's directory, by rank.
struct RunFiles {
  std::map<int, std::string> shards;       // shard-<rank>.f32
  std::map<int, std::string> checkpoints;  // server-<rank>.ckpt
  std::vector<std::string> ignored;        // every other entry's name
};

StatusOr<RunFiles> ListRun(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec || !fs::exists(st)) return NotFoundError("no directory " + dir);
  if (!fs::is_directory(st)) return FailedPreconditionError(dir + " is not a directory");
  RunFiles files;
  fs::directory_iterator it(dir, ec);
  if (ec) return UnavailableError("cannot read " + dir + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool regular = it->is_regular_file(ec);
    if (!regular) {
      files.ignored.push_back(name);
      continue;
    }
    if (auto r = RankOf(name, kShardPrefix, kShardSuffix)) {
      files.shards[*r] = it->path().string();
    } else if (auto c = RankOf(name, kCheckpointPrefix, kCheckpointSuffix)) {
      files.checkpoints[*c] = it->path().string();
    } else {
      files.ignored.push_back(name);
    }
  }
  if (ec) return UnavailableError("cannot read " + dir + ": " + ec.message());
  std::sort(files.ignored.begin(), files.ignored.end());
  return files;
}

std::string FileName(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// "the job (model=fnn3, D=199210, consistency=bsp, seed=1, 2 servers)".
std::string JobText(const ExportJob& job, size_t servers) {
  return std::string("the job (model=")
      .append(job.model.empty() ? "<the workers'>" : job.model)
      .append(", D=")
      .append(std::to_string(job.num_params))
      .append(", consistency=")
      .append(job.consistency)
      .append(", seed=")
      .append(std::to_string(job.seed))
      .append(", ")
      .append(std::to_string(servers))
      .append(servers == 1 ? " server)" : " servers)");
}

uint64_t JobHash(const ExportJob& job, const ShardRange& r) {
  CheckpointConfig c;
  c.model = job.model;
  c.num_params = job.num_params;
  c.lo = r.lo;
  c.hi = r.hi;
  c.consistency = job.consistency;
  c.seed = job.seed;
  return ConfigHash(c);
}

// Ranks 0..S-1 (S = the largest + 1) must all be there: a missing one is a gap of [0, D).
Status CheckNoMissingRank(const std::map<int, std::string>& by_rank, std::string_view prefix,
                          std::string_view suffix, const std::vector<ShardRange>& ranges) {
  for (size_t r = 0; r < ranges.size(); ++r) {
    if (by_rank.count(static_cast<int>(r)) == 0) {
      return FailedPreconditionError(std::string("gap: no ")
                                         .append(prefix)
                                         .append(std::to_string(r))
                                         .append(suffix)
                                         .append(", so ")
                                         .append(Range(ranges[r].lo, ranges[r].hi))
                                         .append(" of [0, D) is in no file (rank ")
                                         .append(std::to_string(by_rank.rbegin()->first))
                                         .append(" is there)"));
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<ShardRange>> Split(const ExportJob& job, size_t servers) {
  auto ranges = SplitShards(job.num_params, static_cast<uint32_t>(servers));
  if (!ranges.ok()) {
    return FailedPreconditionError(
        "the files name " + std::to_string(servers) + " shards, which do not split D=" +
        std::to_string(job.num_params) + ": " + ranges.status().message());
  }
  return ranges;
}

// Checks that `ckpt`, read from `name`, is the one shard `rank` of `job` over `ranges` has.
Status CheckJobCheckpoint(const std::string& name, const Checkpoint& ckpt, int rank,
                          const ExportJob& job, const std::vector<ShardRange>& ranges) {
  if (static_cast<size_t>(rank) >= ranges.size()) {
    return FailedPreconditionError(name + " is the checkpoint of shard " + std::to_string(rank) +
                                   " (" + Range(ckpt.lo, ckpt.hi) + "), but " +
                                   JobText(job, ranges.size()) +
                                   " has no such shard: it is of another job");
  }
  const ShardRange& want = ranges[rank];
  if (ckpt.lo != want.lo || ckpt.hi != want.hi) {
    return FailedPreconditionError(
        name + " holds " + Range(ckpt.lo, ckpt.hi) + ", but shard " + std::to_string(rank) +
        " of " + JobText(job, ranges.size()) + " is " + Range(want.lo, want.hi) +
        ": it overlaps another shard or leaves a gap, a checkpoint of another job");
  }
  if (ckpt.config_hash != JobHash(job, want)) {
    return FailedPreconditionError(
        name + " is not a checkpoint of " + JobText(job, ranges.size()) +
        ": its configuration hash differs (another job, or the model, consistency or seed given "
        "here is not the servers')");
  }
  return Status::Ok();
}

// Checkpoints' ranges must tile [0, D): reports the first overlap or gap, by position.
Status CheckTiling(const std::vector<std::pair<int, Checkpoint>>& ckpts, uint64_t d) {
  std::vector<const std::pair<int, Checkpoint>*> by_lo;
  for (const auto& c : ckpts) by_lo.push_back(&c);
  std::sort(by_lo.begin(), by_lo.end(),
            [](const auto* a, const auto* b) { return a->second.lo < b->second.lo; });
  uint64_t next = 0;  // the first index not covered yet
  const std::pair<int, Checkpoint>* prev = nullptr;
  for (const auto* c : by_lo) {
    const std::string name = CheckpointPath(".", c->first).substr(2);
    if (c->second.lo > next) {
      return FailedPreconditionError("gap: " + Range(next, c->second.lo) +
                                     " of [0, D) is in no checkpoint (" + name + " starts at " +
                                     std::to_string(c->second.lo) + ")");
    }
    if (c->second.lo < next) {
      return FailedPreconditionError(
          "overlap: " + name + " holds " + Range(c->second.lo, c->second.hi) + " and " +
          CheckpointPath(".", prev->first).substr(2) + " holds " +
          Range(prev->second.lo, prev->second.hi) + ": checkpoints of different jobs");
    }
    next = c->second.hi;
    prev = c;
  }
  if (next < d) {
    return FailedPreconditionError("gap: " + Range(next, d) + " of [0, D=" + std::to_string(d) +
                                   ") is in no checkpoint");
  }
  if (next > d) {
    return FailedPreconditionError("the checkpoints reach " + std::to_string(next) +
                                   ", beyond D=" + std::to_string(d) + ": of another model");
  }
  return Status::Ok();
}

StatusOr<ExportedWeights> FromCheckpoints(const RunFiles& files, const ExportJob& job) {
  const size_t servers = static_cast<size_t>(files.checkpoints.rbegin()->first) + 1;
  std::vector<std::pair<int, Checkpoint>> ckpts;
  for (const auto& [rank, path] : files.checkpoints) {
    auto c = ReadCheckpointFile(path);
    if (!c.ok()) return c.status();
    ckpts.emplace_back(rank, std::move(c).value());
  }
  // Where the ranges themselves are wrong, say so by position first: that names the overlap or
  // the gap, where a per-rank comparison would only say "not its range".
  SIEVE_RETURN_IF_ERROR(CheckTiling(ckpts, job.num_params));
  SIEVE_ASSIGN_OR_RETURN(auto ranges, Split(job, servers));
  SIEVE_RETURN_IF_ERROR(
      CheckNoMissingRank(files.checkpoints, kCheckpointPrefix, kCheckpointSuffix, ranges));
  ExportedWeights out;
  out.source = WeightsSource::kCheckpoints;
  out.num_shards = static_cast<int>(servers);
  out.weights.resize(job.num_params);
  for (const auto& [rank, c] : ckpts) {
    SIEVE_RETURN_IF_ERROR(
        CheckJobCheckpoint(FileName(files.checkpoints.at(rank)), c, rank, job, ranges));
  }
  for (const auto& [rank, c] : ckpts) {
    std::copy(c.weights.begin(), c.weights.end(), out.weights.begin() + c.lo);
    out.rounds.push_back(c.round);
  }
  if (std::adjacent_find(out.rounds.begin(), out.rounds.end(), std::not_equal_to<>()) !=
      out.rounds.end()) {
    std::string rounds;
    for (size_t r = 0; r < out.rounds.size(); ++r) {
      rounds.append(r == 0 ? "" : ", ").append(std::to_string(out.rounds[r]));
    }
    out.notes.push_back("the checkpoints are of different rounds (" + rounds +
                        ", by rank): under BSP a server's last checkpoint was not written");
  }
  return out;
}

StatusOr<ExportedWeights> FromFinalShards(const RunFiles& files, const ExportJob& job) {
  namespace fs = std::filesystem;
  const size_t servers = static_cast<size_t>(files.shards.rbegin()->first) + 1;
  // Sizes first: a file that is not whole float32 values is truncated whatever the layout.
  std::map<int, uint64_t> counts;
  uint64_t total = 0;
  for (const auto& [rank, path] : files.shards) {
    std::error_code ec;
    const uintmax_t bytes = fs::file_size(path, ec);
    if (ec) return UnavailableError("cannot read " + path + ": " + ec.message());
    if (bytes % sizeof(float) != 0) {
      return DataLossError(FileName(path) + " is truncated: " + std::to_string(bytes) +
                           " bytes, not a whole number of float32 values");
    }
    counts[rank] = bytes / sizeof(float);
    total += counts[rank];
  }
  SIEVE_ASSIGN_OR_RETURN(auto ranges, Split(job, servers));
  SIEVE_RETURN_IF_ERROR(CheckNoMissingRank(files.shards, kShardPrefix, kShardSuffix, ranges));
  // Rank by rank the shards follow each other: [0, n_0), [n_0, n_0 + n_1), ...
  uint64_t lo = 0;
  for (const auto& [rank, count] : counts) {
    const ShardRange& want = ranges[rank];
    if (count != want.size()) {
      const std::string name = FileName(files.shards.at(rank));
      std::string why = count < want.size()
                            ? "it is truncated, or of another job (another model or server count)"
                            : "it overlaps the next shard: of another job (another model or "
                              "server count)";
      return FailedPreconditionError(
          name + " holds " + std::to_string(count) + " values, " + Range(lo, lo + count) +
          " in rank order, but shard " + std::to_string(rank) + " of " + JobText(job, servers) +
          " is " + Range(want.lo, want.hi) + " (" + std::to_string(want.size()) + " values; " +
          std::to_string(total) + " in all the files for D=" + std::to_string(job.num_params) +
          "): " + why);
    }
    lo += count;
  }
  // The checkpoints beside them are the job's record: each must be its shard's, of this job.
  for (const auto& [rank, path] : files.checkpoints) {
    SIEVE_ASSIGN_OR_RETURN(Checkpoint c, ReadCheckpointFile(path));
    const Status mine = CheckJobCheckpoint(FileName(path), c, rank, job, ranges);
    if (!mine.ok()) return Status(mine.code(), mine.message() + " (beside the final shards)");
  }
  ExportedWeights out;
  out.source = WeightsSource::kFinalShards;
  out.num_shards = static_cast<int>(servers);
  out.weights.resize(job.num_params);
  for (const auto& [rank, path] : files.shards) {
    std::ifstream in(path, std::ios::binary);
    const ShardRange& r = ranges[rank];
    in.read(reinterpret_cast<char*>(out.weights.data() + r.lo),
            static_cast<std::streamsize>(r.size() * sizeof(float)));
    if (!in || in.gcount() != static_cast<std::streamsize>(r.size() * sizeof(float)) ||
        in.peek() != std::char_traits<char>::eof()) {
      return UnavailableError("cannot read " + path + " (" + std::strerror(errno) +
                              ", or it changed while being read)");
    }
  }
  if (files.checkpoints.empty()) {
    out.notes.push_back(
        "no server-<rank>.ckpt beside the final shards: only their sizes say "
        "which job they are of");
  }
  return out;
}

}  // namespace

StatusOr<ExportedWeights> CollectWeights(const std::string& dir, const ExportJob& job,
                                         WeightsSource source) {
  if (job.num_params == 0) return InvalidArgumentError("the job's D is 0");
  if (job.consistency != "bsp" && job.consistency != "ssp" && job.consistency != "asp") {
    return InvalidArgumentError("consistency must be bsp, ssp or asp, not '" + job.consistency +
                                "'");
  }
  SIEVE_ASSIGN_OR_RETURN(RunFiles files, ListRun(dir));
  if (source == WeightsSource::kAuto) {
    source = files.shards.empty() ? WeightsSource::kCheckpoints : WeightsSource::kFinalShards;
  }
  StatusOr<ExportedWeights> out = InternalError("no source");
  if (source == WeightsSource::kFinalShards) {
    if (files.shards.empty()) {
      return NotFoundError("no final shard (shard-<rank>.f32, sieve-server --dump_shard) in " +
                           dir);
    }
    out = FromFinalShards(files, job);
  } else {
    if (files.checkpoints.empty()) {
      return NotFoundError(
          files.shards.empty()
              ? "no final shard (shard-<rank>.f32) and no checkpoint (server-<rank>.ckpt) in " +
                    dir + ": not a sieve job's run directory, or its servers wrote nothing"
              : "no checkpoint (server-<rank>.ckpt, sieve-server --checkpoint_dir) in " + dir);
    }
    out = FromCheckpoints(files, job);
  }
  if (!out.ok()) return Status(out.status().code(), dir + ": " + out.status().message());
  for (const std::string& name : files.ignored) {
    out->notes.push_back("ignored " + name + " (not a shard-<rank>.f32 or server-<rank>.ckpt)");
  }
  return out;
}

std::string NpyHeader(uint64_t count) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  dict.append(std::to_string(count)).append(",), }");
  // magic (6) + version (2) + length (2) + dict + padding + '\n' = a multiple of 64.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ').push_back('\n');
  std::string header("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(dict.size());
  header.push_back(static_cast<char>(len & 0xff));
  header.push_back(static_cast<char>(len >> 8));
  return header + dict;
}

Status WriteWeights(const std::string& path, WeightsFormat format, std::span<const float> weights) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return UnavailableError("cannot open " + tmp + ": " + std::strerror(errno));
    if (format == WeightsFormat::kNpy) {
      const std::string header = NpyHeader(weights.size());
      out.write(header.data(), static_cast<std::streamsize>(header.size()));
    }
    out.write(reinterpret_cast<const char*>(weights.data()),
              static_cast<std::streamsize>(weights.size_bytes()));
    out.close();
    if (!out) {
      const std::string reason = std::strerror(errno);
      std::remove(tmp.c_str());
      return UnavailableError("cannot write " + tmp + ": " + reason);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(tmp.c_str());
    return UnavailableError("cannot rename " + tmp + " to " + path + ": " + reason);
  }
  return Status::Ok();
}

}  // namespace sieve
