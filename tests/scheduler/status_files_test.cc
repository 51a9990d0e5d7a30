// StatusFiles (scheduler/status_files.h): the status file and the termination message on disk.
#include "scheduler/status_files.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "proto/job_status_text.h"
#include "tests/base/temp_dir.h"

namespace sieve {
namespace {

using Clock = std::chrono::steady_clock;

std::string Read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

pb::JobStatus StatusOf(pb::JobPhase phase, uint64_t round) {
  pb::JobStatus st;
  st.set_job("status-files-test");
  st.set_phase(phase);
  st.set_num_workers(2);
  st.mutable_progress()->set_round(round);
  return st;
}

class StatusFilesTest : public ::testing::Test {
 protected:
  sieve::testing::TempDir dir_{"status-files-test"};
  const std::filesystem::path status_ = dir_.path() / "status.json";
  const std::filesystem::path termination_ = dir_.path() / "termination";
};

TEST_F(StatusFilesTest, CheckWritesBothFiles) {
  StatusFiles files(status_.string(), termination_.string());
  const pb::JobStatus initial = StatusOf(pb::JOB_FORMING, 0);
  const Status s = files.Check(initial);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Read(status_), JobStatusToJson(initial));
  EXPECT_EQ(Read(termination_), JobStatusBrief(initial));
}

TEST_F(StatusFilesTest, EmptyPathsWriteNothing) {
  StatusFiles only_status(status_.string(), "");
  ASSERT_TRUE(only_status.Check(StatusOf(pb::JOB_FORMING, 0)).ok());
  EXPECT_TRUE(std::filesystem::exists(status_));
  EXPECT_FALSE(std::filesystem::exists(termination_));
  only_status.Take(StatusOf(pb::JOB_FINISHED, 5));
  EXPECT_FALSE(std::filesystem::exists(termination_));
  EXPECT_EQ(Read(status_), JobStatusToJson(StatusOf(pb::JOB_FINISHED, 5)));
}

// Within a second of the last write, a status of the same phase is not written; a new phase is,
// at once; the termination message changes only with the final status.
TEST_F(StatusFilesTest, SamePhaseWithinASecondIsWrittenOnce) {
  StatusFiles files(status_.string(), termination_.string());
  const pb::JobStatus forming = StatusOf(pb::JOB_FORMING, 0);
  const auto before_check = Clock::now();
  ASSERT_TRUE(files.Check(forming).ok());
  files.Take(StatusOf(pb::JOB_FORMING, 3));
  // Only meaningful if this thread was not held up for a second (the test asserts no timing).
  if (Clock::now() - before_check < std::chrono::milliseconds(900)) {
    EXPECT_EQ(Read(status_), JobStatusToJson(forming));
  }

  const pb::JobStatus running = StatusOf(pb::JOB_RUNNING, 5);
  const auto before_running = Clock::now();
  files.Take(running);  // a new phase: written
  EXPECT_EQ(Read(status_), JobStatusToJson(running));
  files.Take(StatusOf(pb::JOB_RUNNING, 7));
  if (Clock::now() - before_running < std::chrono::milliseconds(900)) {
    EXPECT_EQ(Read(status_), JobStatusToJson(running));
  }
  EXPECT_EQ(Read(termination_), JobStatusBrief(forming));  // not final yet: Check's

  const pb::JobStatus finished = StatusOf(pb::JOB_FINISHED, 9);
  files.Take(finished);
  EXPECT_EQ(Read(status_), JobStatusToJson(finished));
  EXPECT_EQ(Read(termination_), JobStatusBrief(finished));
}

// A final phase is always written, even right after a write of the same phase.
TEST_F(StatusFilesTest, FinalPhaseAlwaysWrites) {
  StatusFiles files(status_.string(), termination_.string());
  ASSERT_TRUE(files.Check(StatusOf(pb::JOB_RUNNING, 0)).ok());
  pb::JobStatus failed = StatusOf(pb::JOB_FAILED, 4);
  failed.mutable_failure()->set_node_id(-1);
  failed.mutable_failure()->set_code("FAILED_PRECONDITION");
  failed.mutable_failure()->set_message("only 1 of 2 workers finished");
  files.Take(failed);
  EXPECT_EQ(Read(status_), JobStatusToJson(failed));
  EXPECT_EQ(Read(termination_), JobStatusBrief(failed));
  failed.mutable_progress()->set_round(6);
  files.Take(failed);
  EXPECT_EQ(Read(status_), JobStatusToJson(failed));
  EXPECT_EQ(Read(termination_), JobStatusBrief(failed));
}

TEST_F(StatusFilesTest, CheckInAMissingDirectoryNamesThePath) {
  const std::string path = (dir_.path() / "no-such-dir" / "status.json").string();
  StatusFiles files(path, termination_.string());
  const Status s = files.Check(StatusOf(pb::JOB_FORMING, 0));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
}

TEST_F(StatusFilesTest, CheckWithATerminationFileInAMissingDirectoryNamesThePath) {
  const std::string path = (dir_.path() / "no-such-dir" / "termination").string();
  StatusFiles files(status_.string(), path);
  const Status s = files.Check(StatusOf(pb::JOB_FORMING, 0));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
}

// A write that fails later is not an error of Take: the job goes on.
TEST_F(StatusFilesTest, TakeSurvivesAnUnwritablePath) {
  const std::string path = (dir_.path() / "gone" / "status.json").string();
  StatusFiles files(path, "");
  files.Take(StatusOf(pb::JOB_RUNNING, 1));
  files.Take(StatusOf(pb::JOB_FINISHED, 2));
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace sieve
