// The merge of per-process traces (trace/trace_merge.h): files with different zeros end up on one
// timeline (workers on the start barrier, servers by their wall clocks), each process gets its
// own pid, and a truncated or malformed file is an error naming it.
#include "trace/trace_merge.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/rank_pattern.h"
#include "tests/base/temp_dir.h"
#include "tests/trace/trace_json.h"
#include "trace/trace_writer.h"

namespace sieve::testing {
namespace {

// A trace as sieve's writer lays it out: a process name, then spans "<name>" at the given local
// times (µs) of round 0.
std::string SyntheticTrace(const std::string& role, int rank, const std::string& zero,
                           double zero_wall_us, int os_pid,
                           const std::vector<std::pair<std::string, double>>& spans) {
  std::string t = "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"ts\":0,\"pid\":" +
                  std::to_string(os_pid) + ",\"tid\":0,\"args\":{\"name\":\"" + role + " " +
                  std::to_string(rank) + "\"}}";
  for (const auto& [name, ts] : spans) {
    t += ",\n{\"name\":\"" + name + "\",\"ph\":\"X\",\"ts\":" + std::to_string(ts) +
         ",\"dur\":10.5,\"pid\":" + std::to_string(os_pid) + ",\"tid\":1,\"args\":{\"round\":0}}";
  }
  char wall[64];
  std::snprintf(wall, sizeof wall, "%.0f", zero_wall_us);
  t += "\n],\"displayTimeUnit\":\"ms\",\"sieve\":{\"format\":\"sieve-trace\",\"version\":1,"
       "\"role\":\"" +
       role + "\",\"rank\":" + std::to_string(rank) + ",\"zero\":\"" + zero +
       "\",\"zero_wall_us\":" + wall + ",\"complete\":true}}\n";
  return t;
}

constexpr double kWall = 1.7e15;  // µs since the epoch, late 2023

// Merged events by process name: name -> its span events.
std::map<std::string, std::vector<google::protobuf::Struct>> SpansByProcess(
    const std::vector<google::protobuf::Struct>& events) {
  std::map<double, std::string> names;
  for (const auto& e : EventsNamed(events, "process_name", "M")) {
    names[Get(e, "pid").number_value()] = Get(Get(e, "args").struct_value(), "name").string_value();
  }
  std::map<std::string, std::vector<google::protobuf::Struct>> out;
  for (const auto& e : events) {
    if (Get(e, "ph").string_value() != "X") continue;
    out[names.at(Get(e, "pid").number_value())].push_back(e);
  }
  return out;
}

double TsOf(const std::vector<google::protobuf::Struct>& spans, const std::string& name) {
  for (const auto& e : spans) {
    if (Get(e, "name").string_value() == name) return Get(e, "ts").number_value();
  }
  ADD_FAILURE() << "no span " << name;
  return -1;
}

TEST(TraceMerge, AlignsWorkersOnTheStartBarrierWhateverTheirClocks) {
  // Worker 1's clock is 5 s ahead of worker 0's: their zeros are still the same moment.
  const std::vector<TraceSource> sources = {
      {"w1.json", SyntheticTrace("worker", 1, "start_barrier", kWall + 5e6, 222,
                                 {{"at_zero", 0}, {"later", 250.25}})},
      {"w0.json",
       SyntheticTrace("worker", 0, "start_barrier", kWall, 111, {{"at_zero", 0}, {"later", 100}})},
  };
  auto merged = MergeTraces(sources);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->workers, 2);
  EXPECT_EQ(merged->servers, 0);
  const auto root = ParseJson(merged->json);
  const auto events = CheckedEvents(root);
  const auto spans = SpansByProcess(events);
  ASSERT_EQ(spans.size(), 2u);
  const auto& w0 = spans.at("worker 0");
  const auto& w1 = spans.at("worker 1");
  EXPECT_EQ(TsOf(w0, "at_zero"), TsOf(w1, "at_zero"));
  EXPECT_EQ(TsOf(w0, "at_zero"), 0.0);
  EXPECT_DOUBLE_EQ(TsOf(w1, "later") - TsOf(w1, "at_zero"), 250.25);
  EXPECT_EQ(Get(w0[0], "dur").number_value(), 10.5);
  // One pid each, new ones (not the OS pids), worker 0 first.
  EXPECT_EQ(Get(w0[0], "pid").number_value(), 1);
  EXPECT_EQ(Get(w1[0], "pid").number_value(), 2);
  const auto& meta = Get(root, "sieve").struct_value();
  EXPECT_EQ(Get(meta, "format").string_value(), "sieve-trace-merged");
  EXPECT_EQ(Get(meta, "zero").string_value(), "start_barrier");
  EXPECT_EQ(Get(meta, "zero_ts_us").number_value(), 0.0);
  // The barrier is marked across the timeline.
  EXPECT_EQ(EventsNamed(events, "start barrier", "i").size(), 1u);
}

TEST(TraceMerge, PlacesServersByTheirWallClocks) {
  // The server started serving 2 s before the workers left the barrier (same machine clock).
  const std::vector<TraceSource> sources = {
      {"w0.json", SyntheticTrace("worker", 0, "start_barrier", kWall, 11, {{"at_zero", 0}})},
      {"w1.json", SyntheticTrace("worker", 1, "start_barrier", kWall + 40, 12, {{"at_zero", 0}})},
      {"s0.json", SyntheticTrace("server", 0, "serving", kWall - 2e6, 13,
                                 {{"half_s_after_barrier", 2.5e6}, {"before_barrier", 1e6}})},
  };
  auto merged = MergeTraces(sources);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->servers, 1);
  EXPECT_EQ(merged->processes, 3);
  const auto root = ParseJson(merged->json);
  const auto spans = SpansByProcess(CheckedEvents(root));
  const double zero = TsOf(spans.at("worker 0"), "at_zero");
  EXPECT_EQ(zero, TsOf(spans.at("worker 1"), "at_zero"));
  // The barrier's wall time: the workers' median (kWall + 20 µs).
  EXPECT_DOUBLE_EQ(TsOf(spans.at("server 0"), "half_s_after_barrier") - zero, 0.5e6 - 20);
  EXPECT_DOUBLE_EQ(TsOf(spans.at("server 0"), "before_barrier") - zero, -1e6 - 20);
  // Nothing before 0: the timeline moved, and the metadata says where the barrier is.
  EXPECT_DOUBLE_EQ(zero, 1e6 + 20);
  EXPECT_DOUBLE_EQ(Get(Get(root, "sieve").struct_value(), "zero_ts_us").number_value(), zero);
  // Servers come first.
  EXPECT_EQ(Get(spans.at("server 0")[0], "pid").number_value(), 1);
}

TEST(TraceMerge, MergesWhatTheWriterWrites) {
  TempDir dir;
  for (int rank : {0, 1}) {
    for (const char* role : {"worker", "server"}) {
      TraceWriterOptions o;
      o.path = ExpandRolePattern((dir.path() / "{role}-{rank}.json").string(), role, rank);
      o.role = role;
      o.rank = rank;
      auto w = TraceWriter::Open(o);
      ASSERT_TRUE(w.ok()) << w.status().ToString();
      ASSERT_TRUE((*w)->MarkZero(role == std::string("worker") ? "start_barrier" : "serving").ok());
      (*w)->SetThreadName(1, "t");
      const auto t = TraceWriter::Clock::now();
      for (uint64_t round = 0; round < 3; ++round) {
        (*w)->AddSpan("span", 1, round, t, t + std::chrono::microseconds(7), {{"bytes", 9}});
      }
      ASSERT_TRUE((*w)->Close().ok());
    }
  }
  const std::string out = (dir.path() / "merged.json").string();
  auto merged = MergeTraceDirectory(dir.path().string(), out);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->processes, 4);
  const auto events = CheckedEvents(ParseJson(ReadText(out)));
  const auto spans = SpansByProcess(events);
  ASSERT_EQ(spans.size(), 4u);
  std::set<double> pids;
  for (const auto& [name, list] : spans) {
    EXPECT_EQ(list.size(), 3u) << name;
    for (const auto& e : list) {
      pids.insert(Get(e, "pid").number_value());
      EXPECT_GE(Get(e, "ts").number_value(), 0.0);
    }
  }
  EXPECT_EQ(pids, (std::set<double>{1, 2, 3, 4}));
  EXPECT_EQ(EventsNamed(events, "thread_name", "M").size(), 4u);
  // Merging again skips its own output (and a merged file under another name).
  std::filesystem::copy_file(out, dir.path() / "old-merge.json");
  auto again = MergeTraceDirectory(dir.path().string(), out);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->processes, 4);
  ASSERT_EQ(again->notes.size(), 1u);
  EXPECT_NE(again->notes[0].find("old-merge.json: a merged trace, skipped"), std::string::npos);
}

void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(TraceMerge, ATruncatedFileIsAnErrorNamingIt) {
  TempDir dir;
  const std::string good = SyntheticTrace("worker", 0, "start_barrier", kWall, 1, {{"a", 0}});
  WriteFile(dir.path() / "worker-0.json", good);
  const auto cut = dir.path() / "worker-1.json";
  WriteFile(cut, good.substr(0, good.size() / 2));
  const auto out = dir.path() / "merged.json";
  auto merged = MergeTraceDirectory(dir.path().string(), out.string());
  ASSERT_FALSE(merged.ok());
  EXPECT_EQ(merged.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(merged.status().message().find(cut.string() + ": not valid JSON"), std::string::npos)
      << merged.status().message();
  EXPECT_FALSE(std::filesystem::exists(out));
  // An empty file too.
  WriteFile(cut, "");
  merged = MergeTraceDirectory(dir.path().string(), out.string());
  ASSERT_FALSE(merged.ok());
  EXPECT_NE(merged.status().message().find(cut.string()), std::string::npos);
}

TEST(TraceMerge, MalformedEventsAreErrorsNamingTheFileAndEvent) {
  const std::string ok = SyntheticTrace("worker", 0, "start_barrier", kWall, 1, {{"a", 0}});
  struct Case {
    std::string from, to, what;
  };
  const std::vector<Case> cases = {
      {"\"ts\":0.000000,", "", "event 1: no numeric \"ts\""},
      {"\"dur\":10.5,", "", "event 1: a complete event (ph X) without a \"dur\" >= 0"},
      {"\"dur\":10.5,", "\"dur\":-1,", "without a \"dur\" >= 0"},
      {"\"tid\":1,", "\"tid\":\"one\",", "event 1: no numeric \"tid\""},
      {"\"traceEvents\"", "\"events\"", "no \"traceEvents\" array"},
      {"\"zero_wall_us\"", "\"wall\"", "lacks role, rank, zero or zero_wall_us"},
  };
  for (const Case& c : cases) {
    std::string text = ok;
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    auto merged = MergeTraces({{"bad.json", text}});
    ASSERT_FALSE(merged.ok()) << c.what;
    EXPECT_EQ(merged.status().code(), StatusCode::kDataLoss);
    EXPECT_EQ(merged.status().message().rfind("bad.json: ", 0), 0u) << merged.status().message();
    EXPECT_NE(merged.status().message().find(c.what), std::string::npos)
        << merged.status().message();
  }
}

TEST(TraceMerge, OtherJsonIsSkippedAndNoTraceIsAnError) {
  auto none = MergeTraces({{"other.json", "{\"a\":[1,2]}"}});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  auto merged =
      MergeTraces({{"other.json", "{\"a\":1}"},
                   {"w.json", SyntheticTrace("worker", 0, "start_barrier", kWall, 1, {{"a", 0}})}});
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  ASSERT_EQ(merged->notes.size(), 1u);
  EXPECT_EQ(merged->notes[0], "other.json: not a sieve trace (no \"sieve\" metadata), skipped");

  TempDir dir;
  auto empty = MergeTraceDirectory(dir.path().string(), (dir.path() / "m.json").string());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kNotFound);
  auto missing = MergeTraceDirectory((dir.path() / "nope").string(), "m.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
}

TEST(TraceMerge, WithoutABarrierEveryFileIsPlacedByItsClock) {
  auto merged = MergeTraces({
      {"s0.json", SyntheticTrace("server", 0, "serving", kWall + 1000, 1, {{"a", 0}})},
      {"s1.json", SyntheticTrace("server", 1, "serving", kWall, 2, {{"a", 0}})},
  });
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  const auto root = ParseJson(merged->json);
  const auto spans = SpansByProcess(CheckedEvents(root));
  EXPECT_DOUBLE_EQ(TsOf(spans.at("server 0"), "a") - TsOf(spans.at("server 1"), "a"), 1000.0);
  EXPECT_EQ(Get(Get(root, "sieve").struct_value(), "zero").string_value(), "wall_clock");
}

}  // namespace
}  // namespace sieve::testing
