// FlagsToServerOptions (server/daemon/server_flags.h): sieve-server's flags to its options, in process;
// each test sets flags under a gflags::FlagSaver.
#include "server/daemon/server_flags.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <string>

#include "base/thread_team.h"
#include "kernels/compressor.h"
#include "net/node_flags.h"
#include "server/shard/consistency.h"

namespace sieve {
namespace {

// The error message of FlagsToServerOptions() with the flags as set (empty: it succeeded).
std::string ErrorOf() {
  auto o = FlagsToServerOptions();
  return o.ok() ? "" : o.status().message();
}

TEST(ServerFlagsTest, DefaultsServeTheWorkersModel) {
  gflags::FlagSaver saver;
  auto o = FlagsToServerOptions();
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->model.empty());
  EXPECT_FALSE(o->layout.has_value());
  EXPECT_EQ(o->expected_d, 0u);
  EXPECT_EQ(o->shard.consistency, Consistency::kBsp);
  EXPECT_EQ(o->shard.staleness, 2);
  EXPECT_EQ(o->shard.staleness_lr, StalenessLr::kNone);
  EXPECT_EQ(o->shard.server_compressor, Compressor::kNone);
  EXPECT_EQ(o->shard.reply_part_pairs, 32768u);
  EXPECT_EQ(o->shard.threads, DefaultServerThreads());
  EXPECT_EQ(o->reply_values, ValueType::kFp32);
  EXPECT_EQ(o->checkpoint.restore, "auto");
  EXPECT_TRUE(o->checkpoint.dir.empty());
  EXPECT_EQ(o->node.rank, -1);
}

TEST(ServerFlagsTest, FlagsReachTheOptions) {
  gflags::FlagSaver saver;
  FLAGS_model = "synthetic";
  FLAGS_num_params = 1000;
  FLAGS_seed = 7;
  FLAGS_consistency = "ssp";
  FLAGS_staleness = 3;
  FLAGS_async_scale = 0.5;
  FLAGS_server_compressor = "topk";
  FLAGS_server_density = 0.25;
  FLAGS_server_threads = 3;
  FLAGS_reply_part_pairs = 0;
  FLAGS_wire_values = "bf16";
  FLAGS_reply_values = "fp16";
  FLAGS_checkpoint_dir = "/tmp/ckpt";
  FLAGS_checkpoint_every = 5;
  FLAGS_checkpoint_every_s = 2.5;
  FLAGS_restore = "never";
  FLAGS_dump_shard = "shard-{rank}.bin";
  FLAGS_rank = 1;
  FLAGS_staleness_lr = "inverse";
  auto o = FlagsToServerOptions();
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->model, "synthetic");
  ASSERT_TRUE(o->layout.has_value());
  EXPECT_EQ(o->expected_d, 1000u);
  EXPECT_EQ(o->seed, 7u);
  EXPECT_EQ(o->shard.consistency, Consistency::kSsp);
  EXPECT_EQ(o->shard.staleness, 3);
  EXPECT_FLOAT_EQ(o->shard.async_scale, 0.5f);
  EXPECT_EQ(o->shard.staleness_lr, StalenessLr::kInverse);
  EXPECT_EQ(o->shard.server_compressor, Compressor::kTopk);
  EXPECT_DOUBLE_EQ(o->shard.server_density, 0.25);
  EXPECT_EQ(o->shard.threads, 3u);
  EXPECT_EQ(o->shard.reply_part_pairs, 0u);
  EXPECT_EQ(o->node.wire_values, ValueType::kBf16);
  EXPECT_EQ(o->reply_values, ValueType::kFp16);
  EXPECT_EQ(o->checkpoint.dir, "/tmp/ckpt");
  EXPECT_EQ(o->checkpoint.every_rounds, 5u);
  EXPECT_DOUBLE_EQ(o->checkpoint.every_seconds, 2.5);
  EXPECT_EQ(o->checkpoint.restore, "never");
  EXPECT_EQ(o->dump_shard, "shard-{rank}.bin");
  EXPECT_EQ(o->node.rank, 1);
}

TEST(ServerFlagsTest, BackupWorkersAndTheirLatePushes) {
  {
    gflags::FlagSaver saver;
    auto o = FlagsToServerOptions();
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(o->shard.backup_workers, 0u);
    EXPECT_EQ(o->shard.late_pushes, LatePushes::kApply);
  }
  {
    gflags::FlagSaver saver;
    FLAGS_backup_workers = 2;
    FLAGS_late_pushes = "return";
    auto o = FlagsToServerOptions();
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    EXPECT_EQ(o->shard.backup_workers, 2u);
    EXPECT_EQ(o->shard.late_pushes, LatePushes::kReturn);
  }
  {
    gflags::FlagSaver saver;
    FLAGS_late_pushes = "drop";
    EXPECT_EQ(ErrorOf(), "--late_pushes: unknown late_pushes 'drop' (expected apply or return)");
  }
  {
    gflags::FlagSaver saver;
    FLAGS_consistency = "asp";
    FLAGS_backup_workers = 1;
    EXPECT_EQ(ErrorOf(), "--backup_workers=1 needs --consistency=bsp");
  }
}

TEST(ServerFlagsTest, NumParamsWithoutModelIsTheExpectedD) {
  gflags::FlagSaver saver;
  FLAGS_num_params = 4096;
  auto o = FlagsToServerOptions();
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->layout.has_value());
  EXPECT_EQ(o->expected_d, 4096u);
}

TEST(ServerFlagsTest, BadValuesAreUsageErrorsNamingTheFlag) {
  {
    gflags::FlagSaver saver;
    FLAGS_consistency = "eventual";
    EXPECT_EQ(ErrorOf().rfind("--consistency: ", 0), 0u) << ErrorOf();
  }
  {
    gflags::FlagSaver saver;
    FLAGS_server_compressor = "dgc";
    EXPECT_EQ(ErrorOf(), "--server_compressor must be none, topk or gaussiank");
  }
  {
    gflags::FlagSaver saver;
    FLAGS_staleness = -1;
    EXPECT_EQ(ErrorOf(), "--staleness must be >= 0");
  }
  {
    gflags::FlagSaver saver;
    FLAGS_consistency = "asp";
    FLAGS_staleness_lr = "sqrt";
    EXPECT_EQ(ErrorOf(), "--staleness_lr: unknown staleness_lr 'sqrt' (expected none or inverse)");
  }
  {
    gflags::FlagSaver saver;
    FLAGS_staleness_lr = "inverse";  // with the default --consistency=bsp
    EXPECT_EQ(ErrorOf(), "--staleness_lr=inverse needs --consistency=asp or ssp");
  }
  {
    gflags::FlagSaver saver;
    FLAGS_server_density = 0;
    EXPECT_EQ(ErrorOf(), "--server_density must be in (0, 1]");
  }
  {
    gflags::FlagSaver saver;
    FLAGS_server_threads = ThreadTeam::kMaxThreads + 1;
    EXPECT_EQ(ErrorOf(),
              "--server_threads must be in 0.." + std::to_string(ThreadTeam::kMaxThreads) +
                  " (0 = " + std::to_string(DefaultServerThreads()) + " on this machine), got " +
                  std::to_string(ThreadTeam::kMaxThreads + 1));
  }
  {
    gflags::FlagSaver saver;
    FLAGS_reply_values = "fp8";
    EXPECT_EQ(ErrorOf().rfind("--reply_values: ", 0), 0u) << ErrorOf();
  }
  {
    gflags::FlagSaver saver;
    FLAGS_model = "resnet";
    EXPECT_EQ(ErrorOf().rfind("--model: ", 0), 0u) << ErrorOf();
  }
  {
    gflags::FlagSaver saver;
    FLAGS_num_params = 16;
    FLAGS_init_weights = "/nonexistent/weights.bin";
    EXPECT_EQ(ErrorOf().rfind("--init_weights: ", 0), 0u) << ErrorOf();
  }
}

TEST(ServerFlagsTest, TheFirstBadFlagIsReported) {
  gflags::FlagSaver saver;
  FLAGS_staleness = -1;
  FLAGS_server_density = 2;
  EXPECT_EQ(ErrorOf(), "--staleness must be >= 0");
}

}  // namespace
}  // namespace sieve
