// TraceWriter (trace/trace_writer.h), TraceRounds (trace/trace_rounds.h) and StagedFile
// (base/staged_file.h): the file parses as JSON with the trace-event schema, only the recorded
// rounds are in it, times are microseconds from the zero, large timelines are flushed and still
// valid, a writer destroyed without Close leaves a valid file, and two writers of one path are
// refused.
#include "trace/trace_writer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>

#include "base/rank_pattern.h"
#include "base/staged_file.h"
#include "tests/base/temp_dir.h"
#include "tests/trace/trace_json.h"
#include "trace/trace_rounds.h"

namespace sieve::testing {
namespace {

using Clock = TraceWriter::Clock;

TraceWriterOptions Options(const std::filesystem::path& path, TraceRounds rounds = {}) {
  TraceWriterOptions o;
  o.path = path.string();
  o.role = "worker";
  o.rank = 3;
  o.rounds = rounds;
  return o;
}

TEST(TraceRounds, ParsesAToB) {
  auto r = ParseTraceRounds("0:100");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->begin, 0u);
  EXPECT_EQ(r->end, 100u);
  EXPECT_TRUE(r->Contains(0));
  EXPECT_TRUE(r->Contains(99));
  EXPECT_FALSE(r->Contains(100));
  EXPECT_EQ(r->ToString(), "0:100");
  auto late = ParseTraceRounds("1000:1010");
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->Contains(999));
  EXPECT_TRUE(late->Contains(1000));
}

TEST(TraceRounds, RefusesWhatIsNotARange) {
  for (const char* bad : {"", "5", ":5", "5:", "a:b", "-1:4", "1:2:3", " 1:2", "1:2 ", "5:5", "7:3",
                          "99999999999999999999:1"}) {
    auto r = ParseTraceRounds(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << r.status().message();
  }
}

TEST(TraceWriter, ExpandsRoleAndRank) {
  EXPECT_EQ(ExpandRolePattern("d/{role}-{rank}.json", "server", 1), "d/server-1.json");
  EXPECT_EQ(ExpandRolePattern("{role}/{rank}/{role}{rank}", "worker", 12), "worker/12/worker12");
  EXPECT_EQ(ExpandRolePattern("plain.json", "worker", 0), "plain.json");
}

TEST(TraceWriter, WritesTraceEventJsonOfTheRecordedRoundsOnly) {
  TempDir dir;
  const auto path = dir.path() / "worker-3.json";
  auto w = TraceWriter::Open(Options(path, {2, 5}));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE((*w)->MarkZero("start_barrier").ok());
  (*w)->SetThreadName(1, "training");
  EXPECT_FALSE((*w)->Wants(1));
  EXPECT_TRUE((*w)->Wants(2));
  EXPECT_FALSE((*w)->Wants(5));
  const auto t = Clock::now();
  for (uint64_t round = 0; round < 8; ++round) {
    (*w)->AddSpan("compute", 1, round, t, t + std::chrono::microseconds(10),
                  {{"bytes_up", uint64_t{1000} * round}, {"note", "a \"quoted\"\nline"}});
    // A span that ends before it starts is written with dur 0.
    (*w)->AddSpan("backwards", 1, round, t, t - std::chrono::microseconds(5));
    (*w)->AddCounter("bytes per round", 1, round, t, {{"up", 7}, {"down", 9.5}});
  }
  EXPECT_FALSE(std::filesystem::exists(path));  // nothing visible before Close
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_TRUE((*w)->Close().ok());  // again: the same result
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));

  const auto root = ParseJson(ReadText(path.string()));
  const auto events = CheckedEvents(root);
  const auto spans = EventsNamed(events, "compute", "X");
  ASSERT_EQ(spans.size(), 3u);
  std::set<double> rounds;
  for (const auto& e : spans) {
    const auto& args = Get(e, "args").struct_value();
    rounds.insert(Get(args, "round").number_value());
    EXPECT_EQ(Get(args, "bytes_up").number_value(), 1000 * Get(args, "round").number_value());
    EXPECT_EQ(Get(args, "note").string_value(), "a \"quoted\"\nline");
    EXPECT_DOUBLE_EQ(Get(e, "dur").number_value(), 10.0);
    EXPECT_GE(Get(e, "ts").number_value(), 0.0);
  }
  EXPECT_EQ(rounds, (std::set<double>{2, 3, 4}));
  for (const auto& e : EventsNamed(events, "backwards", "X")) {
    EXPECT_EQ(Get(e, "dur").number_value(), 0.0);
  }
  const auto counters = EventsNamed(events, "bytes per round", "C");
  ASSERT_EQ(counters.size(), 3u);
  EXPECT_EQ(Get(Get(counters[0], "args").struct_value(), "down").number_value(), 9.5);
  const auto names = EventsNamed(events, "process_name", "M");
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(Get(Get(names[0], "args").struct_value(), "name").string_value(), "worker 3");
  ASSERT_EQ(EventsNamed(events, "thread_name", "M").size(), 1u);

  const auto& meta = Get(root, "sieve").struct_value();
  EXPECT_EQ(Get(meta, "format").string_value(), "sieve-trace");
  EXPECT_EQ(Get(meta, "role").string_value(), "worker");
  EXPECT_EQ(Get(meta, "rank").number_value(), 3);
  EXPECT_EQ(Get(meta, "zero").string_value(), "start_barrier");
  EXPECT_GT(Get(meta, "zero_wall_us").number_value(), 1.5e15);  // after 2017, in µs
  EXPECT_TRUE(Get(meta, "complete").bool_value());
  EXPECT_EQ(Get(meta, "events").number_value(), 9);  // 3 rounds x (2 spans + 1 counter)
}

TEST(TraceWriter, TimesAreMicrosecondsFromTheZero) {
  TempDir dir;
  const auto path = dir.path() / "t.json";
  auto w = TraceWriter::Open(Options(path));
  ASSERT_TRUE(w.ok());
  const auto before = Clock::now();
  ASSERT_TRUE((*w)->MarkZero("start_barrier").ok());
  const auto after = Clock::now();
  (*w)->AddSpan("s", 1, 0, after + std::chrono::milliseconds(5),
                after + std::chrono::milliseconds(5) + std::chrono::nanoseconds(1234567));
  // Once an event is written its time is fixed: the zero cannot move any more.
  EXPECT_EQ((*w)->MarkZero("later").code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*w)->Close().ok());
  const auto events = CheckedEvents(ParseJson(ReadText(path.string())));
  const auto spans = EventsNamed(events, "s", "X");
  ASSERT_EQ(spans.size(), 1u);
  const double slack_us = std::chrono::duration<double, std::micro>(after - before).count();
  EXPECT_GE(Get(spans[0], "ts").number_value(), 5000.0);
  EXPECT_LE(Get(spans[0], "ts").number_value(), 5000.0 + slack_us + 0.001);
  EXPECT_DOUBLE_EQ(Get(spans[0], "dur").number_value(), 1234.567);  // ns resolution
}

TEST(TraceWriter, FlushesALargeTimelineAndStaysValid) {
  TempDir dir;
  const auto path = dir.path() / "big.json";
  TraceWriterOptions o = Options(path, {0, 1000000});
  o.flush_bytes = 256;
  auto w = TraceWriter::Open(o);
  ASSERT_TRUE(w.ok());
  const auto t = Clock::now();
  for (uint64_t round = 0; round < 2000; ++round) {
    (*w)->AddSpan("wait", 1, round, t, t + std::chrono::microseconds(round));
  }
  // Flushed to PATH.tmp while running; PATH appears only at the end.
  EXPECT_GT(std::filesystem::file_size(path.string() + ".tmp"), 100000u);
  EXPECT_FALSE(std::filesystem::exists(path));
  ASSERT_TRUE((*w)->Close().ok());
  const auto events = CheckedEvents(ParseJson(ReadText(path.string())));
  EXPECT_EQ(EventsNamed(events, "wait", "X").size(), 2000u);
}

TEST(TraceWriter, DestroyedWithoutCloseLeavesAValidIncompleteFile) {
  TempDir dir;
  const auto path = dir.path() / "early.json";
  {
    auto w = TraceWriter::Open(Options(path));
    ASSERT_TRUE(w.ok());
    const auto t = Clock::now();
    (*w)->AddSpan("compute", 1, 0, t, t + std::chrono::microseconds(3));
  }  // an early return of its owner
  const auto root = ParseJson(ReadText(path.string()));
  EXPECT_EQ(EventsNamed(CheckedEvents(root), "compute", "X").size(), 1u);
  const auto& meta = Get(root, "sieve").struct_value();
  EXPECT_FALSE(Get(meta, "complete").bool_value());
  EXPECT_EQ(Get(meta, "zero").string_value(), "open");  // never marked
}

TEST(TraceWriter, RefusesASecondWriterOfTheSamePath) {
  TempDir dir;
  const auto path = dir.path() / "trace-0.json";
  auto first = TraceWriter::Open(Options(path));
  ASSERT_TRUE(first.ok());
  auto second = TraceWriter::Open(Options(path));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find(path.string() + ".tmp"), std::string::npos)
      << second.status().message();
  ASSERT_TRUE((*first)->Close().ok());
  // The first one's file is whole; a later writer may replace it.
  ParseJson(ReadText(path.string()));
  auto third = TraceWriter::Open(Options(path));
  EXPECT_TRUE(third.ok()) << third.status().ToString();
}

TEST(TraceWriter, UnwritablePathIsAnErrorNamingIt) {
  TempDir dir;
  const auto path = dir.path() / "no-such-dir" / "t.json";
  auto w = TraceWriter::Open(Options(path));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(w.status().message().find(path.string()), std::string::npos) << w.status().message();
}

TEST(TraceWriter, NamesThatAreNotUtf8StillParse) {
  TempDir dir;
  const auto path = dir.path() / "u.json";
  auto w = TraceWriter::Open(Options(path));
  ASSERT_TRUE(w.ok());
  (*w)->SetThreadName(2, std::string("bad \xff\xfe bytes \xc3\xa9 tab\t", 20));
  ASSERT_TRUE((*w)->Close().ok());
  const auto events = CheckedEvents(ParseJson(ReadText(path.string())));
  const auto names = EventsNamed(events, "thread_name", "M");
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(Get(Get(names[0], "args").struct_value(), "name").string_value(),
            "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes \xc3\xa9 tab\t");
}

TEST(StagedFile, UncommittedFileLeavesThePathAlone) {
  TempDir dir;
  const auto path = (dir.path() / "f").string();
  {
    auto f = StagedFile::Create(path);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append("partial").ok());
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto g = StagedFile::Create(path);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE((*g)->Append("whole").ok());
  ASSERT_TRUE((*g)->Commit().ok());
  EXPECT_EQ(ReadText(path), "whole");
  EXPECT_EQ((*g)->Append("more").code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace sieve::testing
