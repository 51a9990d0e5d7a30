// FlagsToSchedulerOptions (scheduler/scheduler_flags.h): sieve-scheduler's flags to its options,
// in process; each test sets flags under a gflags::FlagSaver.
#include "scheduler/scheduler_flags.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <chrono>

#include "net/listen_flags.h"
#include "scheduler/scheduler.h"

namespace sieve {
namespace {

TEST(SchedulerFlagsTest, DefaultsGiveTheDefaultJob) {
  gflags::FlagSaver saver;
  auto d = FlagsToSchedulerOptions();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->scheduler.num_workers, 1u);
  EXPECT_EQ(d->scheduler.num_servers, 1u);
  EXPECT_EQ(d->scheduler.min_workers, 0u);
  EXPECT_EQ(d->scheduler.num_params, 0u);
  EXPECT_TRUE(d->scheduler.wait_for_server_restart);
  EXPECT_EQ(d->scheduler.heartbeat_timeout, std::chrono::milliseconds(10000));
  EXPECT_EQ(d->scheduler.startup_timeout, std::chrono::milliseconds(600000));
  EXPECT_EQ(d->scheduler.server_restart_timeout, std::chrono::milliseconds(60000));
  EXPECT_FALSE(d->scheduler.allow_unbound_keys);
  EXPECT_EQ(d->scheduler.replication, 0u);
  // Only header-sized messages come to the scheduler.
  EXPECT_EQ(d->scheduler.transport.max_message_bytes, MaxFrameBytes(0));
  EXPECT_EQ(d->metrics.role, "scheduler");
  EXPECT_EQ(d->metrics.port, 0u);
}

TEST(SchedulerFlagsTest, FlagsReachTheOptions) {
  gflags::FlagSaver saver;
  FLAGS_num_workers = 4;
  FLAGS_num_servers = 2;
  FLAGS_min_workers = 3;
  FLAGS_num_params = 1000;
  FLAGS_allow_unbound_keys = true;
  FLAGS_heartbeat_timeout_ms = 500;
  FLAGS_startup_timeout_ms = 7000;
  FLAGS_server_failure = "fail";
  FLAGS_server_restart_timeout_ms = 900;
  FLAGS_bind = "127.0.0.1";
  FLAGS_port = 9400;
  FLAGS_host = "example.test";
  FLAGS_metrics_port = 9401;
  auto d = FlagsToSchedulerOptions();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const SchedulerOptions& s = d->scheduler;
  EXPECT_EQ(s.num_workers, 4u);
  EXPECT_EQ(s.num_servers, 2u);
  EXPECT_EQ(s.min_workers, 3u);
  EXPECT_EQ(s.num_params, 1000u);
  EXPECT_TRUE(s.allow_unbound_keys);
  EXPECT_EQ(s.heartbeat_timeout, std::chrono::milliseconds(500));
  EXPECT_EQ(s.startup_timeout, std::chrono::milliseconds(7000));
  EXPECT_FALSE(s.wait_for_server_restart);
  EXPECT_EQ(s.server_restart_timeout, std::chrono::milliseconds(900));
  EXPECT_EQ(s.transport.bind_host, "127.0.0.1");
  EXPECT_EQ(s.transport.port, 9400);
  EXPECT_EQ(s.transport.advertise_host, "example.test");
  EXPECT_EQ(d->metrics.bind, "127.0.0.1");
  EXPECT_EQ(d->metrics.port, 9401u);
}

// Backups live on other servers: r >= S is refused when the scheduler is created (the flags
// alone do not know S's use), naming both numbers.
TEST(SchedulerFlagsTest, ReplicationReachesTheOptionsAndTooManyBackupsAreRefused) {
  gflags::FlagSaver saver;
  FLAGS_num_servers = 2;
  FLAGS_replication = 1;
  auto d = FlagsToSchedulerOptions();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->scheduler.replication, 1u);
  d->scheduler.transport.port = 0;
  d->scheduler.transport.bind_host = "127.0.0.1";
  EXPECT_TRUE(Scheduler::Create(d->scheduler).ok());
  d->scheduler.replication = 2;
  auto refused = Scheduler::Create(d->scheduler);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--replication=2 needs at least 3 servers"),
            std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("--num_servers=2"), std::string::npos);
}

TEST(SchedulerFlagsTest, BadServerFailureIsAUsageError) {
  gflags::FlagSaver saver;
  FLAGS_server_failure = "retry";
  auto d = FlagsToSchedulerOptions();
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.status().message(), "--server_failure must be wait or fail");
}

TEST(SchedulerFlagsTest, BadListenFlagIsReported) {
  gflags::FlagSaver saver;
  FLAGS_port = 70000;
  auto d = FlagsToSchedulerOptions();
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("--port"), std::string::npos) << d.status().message();
}

}  // namespace
}  // namespace sieve
