#include "tests/net/summary_file.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>

namespace sieve::testing {
namespace {

google::protobuf::Struct ParseFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string json(std::istreambuf_iterator<char>(in), {});
  google::protobuf::Struct out;
  if (json.empty() || !google::protobuf::util::JsonStringToMessage(json, &out).ok()) out.Clear();
  return out;
}

KeyValues FieldsOf(const google::protobuf::Struct& s) {
  KeyValues kv;
  for (const auto& [key, value] : s.fields()) {
    if (value.has_string_value()) {
      kv[key] = value.string_value();
    } else if (value.has_bool_value()) {
      kv[key] = value.bool_value() ? "true" : "false";
    } else if (value.has_number_value()) {
      const double v = value.number_value();
      char buf[64];
      if (std::trunc(v) == v && std::fabs(v) < 9.007199254740992e15)
        std::snprintf(buf, sizeof buf, "%.0f", v);
      else
        std::snprintf(buf, sizeof buf, "%.17g", v);
      kv[key] = buf;
    }
  }
  return kv;
}

}  // namespace

KeyValues ReadSummaryFile(const std::string& path) { return FieldsOf(ParseFile(path)); }

std::vector<KeyValues> ReadShardSummaries(const std::string& path) {
  std::vector<KeyValues> shards;
  const auto parsed = ParseFile(path);
  const auto it = parsed.fields().find("shards");
  if (it == parsed.fields().end()) return shards;
  for (const auto& v : it->second.list_value().values())
    shards.push_back(FieldsOf(v.struct_value()));
  return shards;
}

}  // namespace sieve::testing
