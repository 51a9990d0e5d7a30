#include "deploy/local/export_command.h"

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/parse_number.h"
#include "deploy/local/subcommand.h"
#include "deploy/local/weights_export.h"
#include "kernels/model/model_layout.h"

namespace sieve {
namespace {

constexpr char kUsage[] =
    "usage: sieve export --from=DIR --out=FILE (--model=NAME | --num_params=D)\n"
    "                    [--consistency=bsp|ssp|asp] [--seed=N] [--source=auto|final|checkpoint]\n"
    "                    [--format=npy|raw]\n"
    "\n"
    "Writes the trained weights of one job, the model's flat vector of D float32 values, to\n"
    "FILE, from what its servers left in DIR: the final shards shard-<rank>.f32 (sieve-server\n"
    "--dump_shard) or the checkpoints server-<rank>.ckpt (--checkpoint_dir). DIR is one run's\n"
    "directory (on Kubernetes: run-<uid> on the job's checkpoint volume). The files must tile\n"
    "[0, D) exactly, by rank, and be whole and of this job: a missing rank (a gap), a shard of\n"
    "the wrong size (a gap or an overlap), a truncated or corrupt file, a checkpoint of another\n"
    "job (its configuration hash: model, D, consistency, seed, the shard's range) or an empty\n"
    "DIR fails the export, and nothing is written.\n"
    "\n"
    "  --from=DIR             the run's directory\n"
    "  --out=FILE             the output, written atomically (FILE.tmp renamed)\n"
    "  --model=NAME           the servers' --model: softmax|fnn3|cnn|cnn_large|synthetic; gives D\n"
    "  --num_params=D         D, for --model=synthetic or servers that ran without --model\n"
    "  --consistency=C        the servers' --consistency (default bsp)\n"
    "  --seed=N               the servers' --seed (default 1)\n"
    "  --source=S             auto (default: the final shards if DIR has any, else the\n"
    "                         checkpoints), final, or checkpoint (the last checkpoint: weights\n"
    "                         of a run that did not end)\n"
    "  --format=F             npy: a NumPy .npy file (header, then the values; numpy.load\n"
    "                         reads it); raw: the D values as raw little-endian float32, what\n"
    "                         sieve-server --init_weights reads. Default: npy for a FILE ending\n"
    "                         in .npy, raw otherwise\n"
    "\n"
    "Exit status: 0 written, 1 refused or failed (the reason on stderr), 2 usage error.\n";

struct Options {
  std::string from, out;
  std::optional<std::string> model;
  std::optional<uint64_t> num_params;
  std::string consistency = "bsp";
  uint64_t seed = 1;
  WeightsSource source = WeightsSource::kAuto;
  std::optional<WeightsFormat> format;
};

int Usage(const std::string& message) { return UsageError("export", message, kUsage); }

// Parses args into *o; returns an exit code to end with, or nullopt to go on.
std::optional<int> Parse(const std::vector<std::string>& args, Options* o) {
  for (const std::string& a : args) {
    const auto [name, flag_value] = SplitFlagWord(a);
    if (name == "--help" || name == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (!flag_value) return Usage("unknown or malformed argument '" + a + "'");
    const std::string& value = *flag_value;
    if (name == "--from" && !value.empty()) {
      o->from = value;
    } else if (name == "--out" && !value.empty()) {
      o->out = value;
    } else if (name == "--model") {
      o->model = value;
    } else if (name == "--num_params") {
      o->num_params = ParseNumber<uint64_t>(value);
      if (!o->num_params || *o->num_params == 0) {
        return Usage("--num_params takes a positive integer, got '" + value + "'");
      }
    } else if (name == "--consistency") {
      if (value != "bsp" && value != "ssp" && value != "asp") {
        return Usage("--consistency takes bsp, ssp or asp, got '" + value + "'");
      }
      o->consistency = value;
    } else if (name == "--seed") {
      const std::optional<uint64_t> seed = ParseNumber<uint64_t>(value);
      if (!seed) return Usage("--seed takes an unsigned integer, got '" + value + "'");
      o->seed = *seed;
    } else if (name == "--source") {
      if (value == "auto") {
        o->source = WeightsSource::kAuto;
      } else if (value == "final") {
        o->source = WeightsSource::kFinalShards;
      } else if (value == "checkpoint") {
        o->source = WeightsSource::kCheckpoints;
      } else {
        return Usage("--source takes auto, final or checkpoint, got '" + value + "'");
      }
    } else if (name == "--format") {
      if (value == "npy") {
        o->format = WeightsFormat::kNpy;
      } else if (value == "raw") {
        o->format = WeightsFormat::kRaw;
      } else {
        return Usage("--format takes npy or raw, got '" + value + "'");
      }
    } else {
      return Usage("unknown or malformed argument '" + a + "'");
    }
  }
  if (o->from.empty()) return Usage("--from=DIR is required");
  if (o->out.empty()) return Usage("--out=FILE is required");
  if (!o->model && !o->num_params) {
    return Usage("give the job's model (--model=NAME) or its D (--num_params=D)");
  }
  return std::nullopt;
}

// The job's D from --model and --num_params, as sieve-server derives it; an exit code on error.
std::optional<int> ResolveJob(const Options& o, ExportJob* job) {
  job->model = o.model.value_or("");
  job->consistency = o.consistency;
  job->seed = o.seed;
  if (job->model.empty()) {
    job->num_params = *o.num_params;
    return std::nullopt;
  }
  const bool synthetic = job->model == "synthetic";
  if (synthetic && !o.num_params) return Usage("--model=synthetic needs --num_params=D");
  StatusOr<ModelLayout> layout = MakeModelLayout(job->model, o.num_params.value_or(0));
  if (!layout.ok()) return Usage("--model: " + layout.status().message());
  if (!synthetic && o.num_params && *o.num_params != layout->num_params) {
    return Usage("--num_params=" + std::to_string(*o.num_params) + " but " + job->model +
                 " has D=" + std::to_string(layout->num_params));
  }
  job->num_params = layout->num_params;
  return std::nullopt;
}

std::string What(const ExportedWeights& w) {
  if (w.source == WeightsSource::kFinalShards) return "the final shards";
  uint64_t lo = w.rounds.front(), hi = w.rounds.front();
  for (uint64_t r : w.rounds) {
    lo = std::min(lo, r);
    hi = std::max(hi, r);
  }
  std::string what = "the checkpoints, round ";
  what.append(std::to_string(lo));
  if (hi != lo) what.append(" to ").append(std::to_string(hi));
  return what;
}

}  // namespace

int RunExport(const std::vector<std::string>& args) {
  Options o;
  if (std::optional<int> code = Parse(args, &o)) return *code;
  ExportJob job;
  if (std::optional<int> code = ResolveJob(o, &job)) return *code;
  const WeightsFormat format =
      o.format.value_or(o.out.ends_with(".npy") ? WeightsFormat::kNpy : WeightsFormat::kRaw);

  StatusOr<ExportedWeights> w = CollectWeights(o.from, job, o.source);
  if (!w.ok()) {
    std::fprintf(stderr, "sieve export: refused, nothing written: %s\n",
                 w.status().ToString().c_str());
    return 1;
  }
  for (const std::string& note : w->notes) {
    std::fprintf(stderr, "sieve export: note: %s\n", note.c_str());
  }
  const Status written = WriteWeights(o.out, format, w->weights);
  if (!written.ok()) {
    std::fprintf(stderr, "sieve export: %s\n", written.ToString().c_str());
    return 1;
  }
  std::printf("sieve export: wrote %s (%s, D=%llu float32) from %s of %d server%s in %s\n",
              o.out.c_str(), format == WeightsFormat::kNpy ? "npy" : "raw little-endian",
              static_cast<unsigned long long>(w->weights.size()), What(*w).c_str(), w->num_shards,
              w->num_shards == 1 ? "" : "s", o.from.c_str());
  return 0;
}

}  // namespace sieve
