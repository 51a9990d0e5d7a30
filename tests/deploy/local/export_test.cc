// `sieve export` (deploy/local/weights_export.h, export_command.h): a job's weights are written
// here as its servers would leave them (the checkpoints by the server's own writer,
// server/checkpoint/checkpoint.h; the final shards as --dump_shard's raw float32, cut from one vector by
// the servers' own split, proto/shards.h), exported, and compared bit for bit with the vector
// they came from; then every refusal (a gap, an overlap, a truncated or corrupt file, a file of
// another job, an empty directory) and the command's exit statuses.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "deploy/local/weights_export.h"
#include "proto/shards.h"
#include "server/checkpoint/checkpoint.h"

namespace sieve {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kD = 1001;  // 3 servers: 334, 334, 333 values

ExportJob Job(uint64_t d = kD) {
  ExportJob job;
  job.model = "synthetic";
  job.num_params = d;
  job.consistency = "bsp";
  job.seed = 7;
  return job;
}

// D values with every kind of float32 bit pattern a model may hold: NaN payloads, -0,
// subnormals, infinities, ordinary values.
std::vector<float> Weights(uint64_t d, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> w(d);
  for (auto& v : w) {
    const uint32_t bits = gen();
    std::memcpy(&v, &bits, sizeof(v));
  }
  w[0] = -0.0f;
  w[1] = std::numeric_limits<float>::denorm_min();
  w[2] = std::numeric_limits<float>::infinity();
  return w;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteBytes(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  ASSERT_TRUE(out.good()) << path;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "sieve_export_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ + "/run";
    fs::create_directory(dir_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // What S servers of `job` leave at the end: shard-<rank>.f32 of `w`'s slices.
  void WriteFinalShards(const std::vector<float>& w, uint32_t servers, const std::string& dir) {
    auto ranges = SplitShards(w.size(), servers);
    ASSERT_TRUE(ranges.ok());
    for (uint32_t r = 0; r < servers; ++r) {
      const ShardRange& s = (*ranges)[r];
      WriteBytes(dir + "/shard-" + std::to_string(r) + ".f32", w.data() + s.lo,
                 s.size() * sizeof(float));
    }
  }

  // Their checkpoints at `round`, by the server's writer and with the server's config hash.
  void WriteCheckpoints(const std::vector<float>& w, uint32_t servers, const ExportJob& job,
                        uint64_t round, const std::string& dir) {
    auto ranges = SplitShards(w.size(), servers);
    ASSERT_TRUE(ranges.ok());
    for (uint32_t r = 0; r < servers; ++r) {
      WriteCheckpointOf(w, (*ranges)[r], r, job, round, dir);
    }
  }

  void WriteCheckpointOf(const std::vector<float>& w, ShardRange s, uint32_t rank,
                         const ExportJob& job, uint64_t round, const std::string& dir) {
    CheckpointConfig cc;
    cc.model = job.model;
    cc.num_params = w.size();
    cc.lo = s.lo;
    cc.hi = s.hi;
    cc.consistency = job.consistency;
    cc.seed = job.seed;
    Checkpoint c;
    c.config_hash = ConfigHash(cc);
    c.round = round;
    c.lo = s.lo;
    c.hi = s.hi;
    c.weights.assign(w.begin() + s.lo, w.begin() + s.hi);
    ASSERT_TRUE(WriteCheckpoint(CheckpointPath(dir, static_cast<int>(rank)), c).ok());
  }

  // The export's error, expected to have `code` and to mention `words`.
  void ExpectRefused(WeightsSource source, StatusCode code, const std::string& words,
                     const ExportJob& job = Job()) {
    auto got = CollectWeights(dir_, job, source);
    ASSERT_FALSE(got.ok()) << "exported although it should refuse (" << words << ")";
    EXPECT_EQ(got.status().code(), code) << got.status().ToString();
    EXPECT_NE(got.status().message().find(words), std::string::npos)
        << "'" << words << "' not in: " << got.status().ToString();
  }

  std::string root_, dir_;
};

TEST_F(ExportTest, FinalShardsAreTheVectorBitForBit) {
  const std::vector<float> w = Weights(kD, 1);
  WriteFinalShards(w, 3, dir_);
  // Older checkpoints beside them (as on the volume): verified, not exported.
  WriteCheckpoints(Weights(kD, 2), 3, Job(), 500, dir_);
  auto got = CollectWeights(dir_, Job(), WeightsSource::kAuto);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->source, WeightsSource::kFinalShards);
  EXPECT_EQ(got->num_shards, 3);
  EXPECT_TRUE(BitwiseEqual(got->weights, w));
  EXPECT_TRUE(got->notes.empty());
}

TEST_F(ExportTest, OneServerAndManyServers) {
  for (uint32_t servers : {1u, 7u}) {
    fs::remove_all(dir_);
    fs::create_directory(dir_);
    const std::vector<float> w = Weights(kD, servers);
    WriteFinalShards(w, servers, dir_);
    auto got = CollectWeights(dir_, Job(), WeightsSource::kFinalShards);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->num_shards, static_cast<int>(servers));
    EXPECT_TRUE(BitwiseEqual(got->weights, w)) << servers << " servers";
  }
}

TEST_F(ExportTest, CheckpointsAreTheVectorBitForBit) {
  const std::vector<float> w = Weights(kD, 3);
  WriteCheckpoints(w, 3, Job(), 500, dir_);
  auto got = CollectWeights(dir_, Job(), WeightsSource::kAuto);  // no final shard: checkpoints
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->source, WeightsSource::kCheckpoints);
  EXPECT_EQ(got->rounds, (std::vector<uint64_t>{500, 500, 500}));
  EXPECT_TRUE(BitwiseEqual(got->weights, w));
  EXPECT_TRUE(got->notes.empty());
}

TEST_F(ExportTest, CheckpointsChosenBesideFinalShards) {
  const std::vector<float> ckpt = Weights(kD, 4);
  WriteFinalShards(Weights(kD, 5), 2, dir_);
  WriteCheckpoints(ckpt, 2, Job(), 900, dir_);
  auto got = CollectWeights(dir_, Job(), WeightsSource::kCheckpoints);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(BitwiseEqual(got->weights, ckpt));
}

TEST_F(ExportTest, CheckpointsOfDifferentRoundsAreExportedWithANote) {
  const std::vector<float> w = Weights(kD, 6);
  WriteCheckpoints(w, 2, Job(), 500, dir_);
  auto ranges = SplitShards(kD, 2);
  WriteCheckpointOf(w, (*ranges)[1], 1, Job(), 1000, dir_);
  auto got = CollectWeights(dir_, Job(), WeightsSource::kCheckpoints);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->rounds, (std::vector<uint64_t>{500, 1000}));
  ASSERT_EQ(got->notes.size(), 1u);
  EXPECT_NE(got->notes[0].find("different rounds (500, 1000"), std::string::npos);
}

TEST_F(ExportTest, OtherFilesAreIgnoredWithANote) {
  const std::vector<float> w = Weights(kD, 7);
  WriteFinalShards(w, 2, dir_);
  WriteBytes(dir_ + "/server-0.ckpt.tmp", "x", 1);  // a checkpoint write cut short
  WriteBytes(dir_ + "/shard-01.f32", "abcd", 4);    // not a name the server writes
  auto got = CollectWeights(dir_, Job(), WeightsSource::kAuto);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(BitwiseEqual(got->weights, w));
  std::string notes;
  for (const auto& n : got->notes) notes += n + "\n";
  EXPECT_NE(notes.find("ignored server-0.ckpt.tmp"), std::string::npos) << notes;
  EXPECT_NE(notes.find("ignored shard-01.f32"), std::string::npos) << notes;
  EXPECT_NE(notes.find("no server-<rank>.ckpt beside"), std::string::npos) << notes;
}

// --- refusals ---

TEST_F(ExportTest, RefusesAnEmptyOrMissingDirectory) {
  ExpectRefused(WeightsSource::kAuto, StatusCode::kNotFound, "no final shard");
  WriteBytes(dir_ + "/notes.txt", "x", 1);
  ExpectRefused(WeightsSource::kAuto, StatusCode::kNotFound, "not a sieve job's run directory");
  fs::remove_all(dir_);
  ExpectRefused(WeightsSource::kAuto, StatusCode::kNotFound, "no directory");
}

TEST_F(ExportTest, RefusesASourceThatIsNotThere) {
  WriteCheckpoints(Weights(kD, 8), 2, Job(), 100, dir_);
  ExpectRefused(WeightsSource::kFinalShards, StatusCode::kNotFound, "no final shard");
  fs::remove_all(dir_);
  fs::create_directory(dir_);
  WriteFinalShards(Weights(kD, 8), 2, dir_);
  ExpectRefused(WeightsSource::kCheckpoints, StatusCode::kNotFound, "no checkpoint");
}

TEST_F(ExportTest, RefusesAGapInTheFinalShards) {
  WriteFinalShards(Weights(kD, 9), 3, dir_);
  fs::remove(dir_ + "/shard-1.f32");  // the middle rank
  ExpectRefused(WeightsSource::kAuto, StatusCode::kFailedPrecondition,
                "gap: no shard-1.f32, so [334, 668) of [0, D) is in no file");
}

TEST_F(ExportTest, RefusesFinalShardsMissingTheLastRank) {
  // Ranks 0 and 1 of a 3-server job: as 2 servers' shards they are too short.
  WriteFinalShards(Weights(kD, 10), 3, dir_);
  fs::remove(dir_ + "/shard-2.f32");
  ExpectRefused(WeightsSource::kAuto, StatusCode::kFailedPrecondition,
                "shard-0.f32 holds 334 values, [0, 334) in rank order, but shard 0 of the job");
  ExpectRefused(WeightsSource::kAuto, StatusCode::kFailedPrecondition, "it is truncated");
}

TEST_F(ExportTest, RefusesOverlappingFinalShards) {
  // shard-0 of a 2-server job beside shard-1 of a 3-server one: 501 + 334 values, the first too
  // long for its share of 3.
  const std::vector<float> w = Weights(kD, 11);
  WriteFinalShards(w, 3, dir_);
  WriteBytes(dir_ + "/shard-0.f32", w.data(), 501 * sizeof(float));
  ExpectRefused(WeightsSource::kAuto, StatusCode::kFailedPrecondition,
                "it overlaps the next shard");
}

TEST_F(ExportTest, RefusesATruncatedFinalShard) {
  const std::vector<float> w = Weights(kD, 12);
  WriteFinalShards(w, 2, dir_);
  // Cut inside a value: not whole float32s.
  WriteBytes(dir_ + "/shard-1.f32", w.data() + 501, 500 * sizeof(float) - 3);
  ExpectRefused(WeightsSource::kAuto, StatusCode::kDataLoss,
                "shard-1.f32 is truncated: 1997 bytes");
  // Cut between values: shorter than its share.
  WriteBytes(dir_ + "/shard-1.f32", w.data() + 501, 499 * sizeof(float));
  ExpectRefused(WeightsSource::kAuto, StatusCode::kFailedPrecondition,
                "shard-1.f32 holds 499 values");
  // Empty.
  WriteBytes(dir_ + "/shard-1.f32", w.data(), 0);
  ExpectRefused(WeightsSource::kAuto, StatusCode::kFailedPrecondition,
                "shard-1.f32 holds 0 values");
}

TEST_F(ExportTest, RefusesFinalShardsOfAnotherModel) {
  WriteFinalShards(Weights(kD + 10, 13), 2, dir_);
  ExpectRefused(WeightsSource::kAuto, StatusCode::kFailedPrecondition, "of another job");
}

TEST_F(ExportTest, RefusesAGapInTheCheckpoints) {
  WriteCheckpoints(Weights(kD, 14), 3, Job(), 100, dir_);
  fs::remove(CheckpointPath(dir_, 1));
  ExpectRefused(WeightsSource::kAuto, StatusCode::kFailedPrecondition,
                "gap: [334, 668) of [0, D) is in no checkpoint");
  WriteCheckpoints(Weights(kD, 14), 3, Job(), 100, dir_);
  fs::remove(CheckpointPath(dir_, 2));
  ExpectRefused(WeightsSource::kAuto, StatusCode::kFailedPrecondition,
                "gap: [668, 1001) of [0, D=1001) is in no checkpoint");
}

TEST_F(ExportTest, RefusesOverlappingCheckpoints) {
  // server-0 and server-1 of a 2-server job beside server-2 of a 3-server one.
  const std::vector<float> w = Weights(kD, 15);
  WriteCheckpoints(w, 2, Job(), 100, dir_);
  auto three = SplitShards(kD, 3);
  WriteCheckpointOf(w, (*three)[2], 2, Job(), 100, dir_);
  ExpectRefused(WeightsSource::kAuto, StatusCode::kFailedPrecondition,
                "overlap: server-2.ckpt holds [668, 1001) and server-1.ckpt holds [501, 1001)");
}

TEST_F(ExportTest, RefusesATruncatedOrCorruptCheckpoint) {
  WriteCheckpoints(Weights(kD, 16), 2, Job(), 100, dir_);
  const std::string path = CheckpointPath(dir_, 1);
  const std::string good = ReadAll(path);
  WriteBytes(path, good.data(), good.size() - 6);
  ExpectRefused(WeightsSource::kAuto, StatusCode::kDataLoss, "truncated");
  std::string flipped = good;
  flipped[100] ^= 0x10;
  WriteBytes(path, flipped.data(), flipped.size());
  ExpectRefused(WeightsSource::kAuto, StatusCode::kDataLoss, "corrupt (CRC mismatch)");
  // Beside the final shards as well: the export reads every file it is given.
  WriteFinalShards(Weights(kD, 16), 2, dir_);
  ExpectRefused(WeightsSource::kFinalShards, StatusCode::kDataLoss, "corrupt (CRC mismatch)");
}

TEST_F(ExportTest, RefusesACheckpointOfAnotherJob) {
  ExportJob other = Job();
  other.seed = 8;
  const std::vector<float> w = Weights(kD, 17);
  WriteCheckpoints(w, 2, Job(), 100, dir_);
  auto ranges = SplitShards(kD, 2);
  WriteCheckpointOf(w, (*ranges)[1], 1, other, 100, dir_);
  ExpectRefused(WeightsSource::kAuto, StatusCode::kFailedPrecondition,
                "server-1.ckpt is not a checkpoint of the job (model=synthetic, D=1001, "
                "consistency=bsp, seed=7, 2 servers): its configuration hash differs");
  // Beside final shards that fit: the checkpoint says they are of another job's run.
  WriteFinalShards(w, 2, dir_);
  ExpectRefused(WeightsSource::kAuto, StatusCode::kFailedPrecondition,
                "its configuration hash differs (another job, or the model, consistency or seed "
                "given here is not the servers') (beside the final shards)");
  // The whole run asked for as another job (another consistency than the servers').
  WriteCheckpoints(w, 2, Job(), 100, dir_);
  ExportJob asked = Job();
  asked.consistency = "asp";
  ExpectRefused(WeightsSource::kAuto, StatusCode::kFailedPrecondition,
                "server-0.ckpt is not a checkpoint of the job", asked);
}

TEST_F(ExportTest, RefusesACheckpointOfAShardTheFinalShardsDoNotHave) {
  const std::vector<float> w = Weights(kD, 18);
  WriteFinalShards(w, 2, dir_);
  WriteCheckpoints(w, 3, Job(), 100, dir_);  // a 3-server run's checkpoints
  ExpectRefused(WeightsSource::kFinalShards, StatusCode::kFailedPrecondition,
                "server-0.ckpt holds [0, 334), but shard 0 of the job");
  fs::remove(CheckpointPath(dir_, 0));
  fs::remove(CheckpointPath(dir_, 1));
  ExpectRefused(WeightsSource::kFinalShards, StatusCode::kFailedPrecondition,
                "server-2.ckpt is the checkpoint of shard 2 ([668, 1001)), but the job");
}

// --- the output file ---

TEST(ExportFormat, NpyHeaderIsVersion1AlignedTo64) {
  for (uint64_t n : {uint64_t{1}, uint64_t{7850}, uint64_t{2171786}, uint64_t{1} << 40}) {
    const std::string h = NpyHeader(n);
    ASSERT_GE(h.size(), 10u);
    EXPECT_EQ(h.size() % 64, 0u) << n;
    EXPECT_EQ(h.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    const size_t len = static_cast<unsigned char>(h[8]) | static_cast<unsigned char>(h[9]) << 8;
    EXPECT_EQ(len, h.size() - 10);
    EXPECT_EQ(h.back(), '\n');
    EXPECT_EQ(h.substr(10, h.find('}') - 9),
              "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(n) + ",), }");
  }
}

class ExportFileTest : public ExportTest {};

TEST_F(ExportFileTest, RawAndNpyHoldTheValuesBitForBit) {
  const std::vector<float> w = Weights(kD, 19);
  const std::string raw = root_ + "/w.f32", npy = root_ + "/w.npy";
  ASSERT_TRUE(WriteWeights(raw, WeightsFormat::kRaw, w).ok());
  ASSERT_TRUE(WriteWeights(npy, WeightsFormat::kNpy, w).ok());
  const std::string bytes(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float));
  EXPECT_EQ(ReadAll(raw), bytes);
  EXPECT_EQ(ReadAll(npy), NpyHeader(kD) + bytes);
  EXPECT_FALSE(fs::exists(raw + ".tmp"));
  const Status bad = WriteWeights(root_ + "/no/such/dir/w.f32", WeightsFormat::kRaw, w);
  EXPECT_EQ(bad.code(), StatusCode::kUnavailable) << bad.ToString();
}

// --- the command ---

struct CommandRun {
  int code = -1;
  std::string output;  // stdout and stderr
};

CommandRun Sieve(const std::string& args) {
  const std::string cmd = std::string(SIEVE_BINARY) + " export " + args + " 2>&1";
  CommandRun run;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return run;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) run.output.append(buf, n);
  const int status = pclose(p);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST_F(ExportTest, CommandWritesTheFileOrRefusesWithExitOne) {
  const std::vector<float> w = Weights(7850, 20);
  ExportJob softmax;
  softmax.model = "softmax";
  softmax.num_params = 7850;
  softmax.seed = 1;
  WriteFinalShards(w, 2, dir_);
  WriteCheckpoints(w, 2, softmax, 100, dir_);
  const std::string bytes(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float));

  CommandRun ok = Sieve("--from=" + dir_ + " --out=" + root_ + "/w.npy --model=softmax");
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_NE(ok.output.find("D=7850 float32) from the final shards of 2 servers"), std::string::npos)
      << ok.output;
  EXPECT_EQ(ReadAll(root_ + "/w.npy"), NpyHeader(7850) + bytes);
  CommandRun raw =
      Sieve("--from=" + dir_ + " --out=" + root_ + "/w.bin --model=softmax --source=checkpoint");
  EXPECT_EQ(raw.code, 0) << raw.output;
  EXPECT_NE(raw.output.find("from the checkpoints, round 100 of 2 servers"), std::string::npos)
      << raw.output;
  EXPECT_EQ(ReadAll(root_ + "/w.bin"), bytes);

  // Refused: exit 1, the reason, and no file.
  CommandRun seed = Sieve("--from=" + dir_ + " --out=" + root_ + "/x.npy --model=softmax --seed=2");
  EXPECT_EQ(seed.code, 1) << seed.output;
  EXPECT_NE(seed.output.find("refused, nothing written"), std::string::npos) << seed.output;
  EXPECT_FALSE(fs::exists(root_ + "/x.npy"));
  CommandRun fnn3 = Sieve("--from=" + dir_ + " --out=" + root_ + "/x.npy --model=fnn3");
  EXPECT_EQ(fnn3.code, 1) << fnn3.output;
  CommandRun empty =
      Sieve("--from=" + root_ + "/nothing --out=" + root_ + "/x.npy --model=softmax");
  EXPECT_EQ(empty.code, 1) << empty.output;
  EXPECT_FALSE(fs::exists(root_ + "/x.npy"));
  CommandRun unwritable =
      Sieve("--from=" + dir_ + " --out=" + root_ + "/no/dir/x.npy --model=softmax");
  EXPECT_EQ(unwritable.code, 1) << unwritable.output;
}

TEST(ExportCommand, UsageErrorsExitTwoAndHelpZero) {
  EXPECT_EQ(Sieve("--help").code, 0);
  EXPECT_EQ(Sieve("").code, 2);
  EXPECT_EQ(Sieve("--from=/tmp --out=/tmp/x.npy").code, 2);  // no model, no D
  EXPECT_EQ(Sieve("--from=/tmp --model=fnn3").code, 2);      // no --out
  EXPECT_EQ(Sieve("--from=/tmp --out=/tmp/x --model=nope").code, 2);
  EXPECT_EQ(Sieve("--from=/tmp --out=/tmp/x --model=synthetic").code, 2);  // no D
  EXPECT_EQ(Sieve("--from=/tmp --out=/tmp/x --model=fnn3 --num_params=5").code, 2);
  EXPECT_EQ(Sieve("--from=/tmp --out=/tmp/x --num_params=5 --consistency=eventual").code, 2);
  EXPECT_EQ(Sieve("--from=/tmp --out=/tmp/x --num_params=5 --source=latest").code, 2);
  EXPECT_EQ(Sieve("--from=/tmp --out=/tmp/x --num_params=5 --format=csv").code, 2);
  EXPECT_EQ(Sieve("--from=/tmp --out=/tmp/x --num_params=5 --bogus=1").code, 2);
}

}  // namespace
}  // namespace sieve
