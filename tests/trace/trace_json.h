// Test helper: a trace file's JSON read back with protobuf's parser (google.protobuf.Struct), and
// the checks every sieve trace must pass: the trace-event schema the viewers need.
#ifndef SIEVE_TESTS_TRACE_TRACE_JSON_H_
#define SIEVE_TESTS_TRACE_TRACE_JSON_H_

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace sieve::testing {

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// `text` parsed; a failure of the test when it is not JSON.
inline google::protobuf::Struct ParseJson(const std::string& text) {
  google::protobuf::Struct root;
  const auto status = google::protobuf::util::JsonStringToMessage(text, &root);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << text;
  return root;
}

inline const google::protobuf::Value& Get(const google::protobuf::Struct& s,
                                          const std::string& key) {
  static const google::protobuf::Value kMissing;
  auto it = s.fields().find(key);
  return it == s.fields().end() ? kMissing : it->second;
}

// The events of a trace file's root, each checked against the schema: name, ph, ts, pid and tid
// present (numbers where numbers), and a complete event's dur >= 0.
inline std::vector<google::protobuf::Struct> CheckedEvents(const google::protobuf::Struct& root) {
  std::vector<google::protobuf::Struct> out;
  const auto& events = Get(root, "traceEvents");
  EXPECT_TRUE(events.has_list_value());
  EXPECT_EQ(Get(root, "displayTimeUnit").string_value(), "ms");
  for (const auto& v : events.list_value().values()) {
    EXPECT_TRUE(v.has_struct_value());
    const auto& e = v.struct_value();
    EXPECT_TRUE(Get(e, "name").has_string_value());
    EXPECT_TRUE(Get(e, "ph").has_string_value());
    for (const char* key : {"ts", "pid", "tid"}) {
      EXPECT_TRUE(Get(e, key).has_number_value()) << key;
    }
    if (Get(e, "ph").string_value() == "X") {
      EXPECT_TRUE(Get(e, "dur").has_number_value());
      EXPECT_GE(Get(e, "dur").number_value(), 0.0);
    }
    out.push_back(e);
  }
  return out;
}

// The events named `name` of phase `ph`.
inline std::vector<google::protobuf::Struct> EventsNamed(
    const std::vector<google::protobuf::Struct>& events, const std::string& name,
    const std::string& ph) {
  std::vector<google::protobuf::Struct> out;
  for (const auto& e : events) {
    if (Get(e, "name").string_value() == name && Get(e, "ph").string_value() == ph) {
      out.push_back(e);
    }
  }
  return out;
}

}  // namespace sieve::testing

#endif  // SIEVE_TESTS_TRACE_TRACE_JSON_H_
