#include "trace/trace_merge.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <system_error>
#include <tuple>
#include <utility>

#include "base/staged_file.h"
#include "base/json_text.h"

namespace sieve {
namespace {

namespace gpb = google::protobuf;
namespace fs = std::filesystem;

constexpr char kTraceFormat[] = "sieve-trace";
constexpr char kMergedFormat[] = "sieve-trace-merged";
constexpr char kBarrierZero[] = "start_barrier";

// One sieve trace, parsed.
struct Process {
  const TraceSource* source = nullptr;
  gpb::Struct root;
  std::string role;
  int64_t rank = 0;
  std::string zero;
  double zero_wall_us = 0;
  bool complete = true;
  std::string host;
  int64_t os_pid = 0;
  gpb::ListValue* events = nullptr;  // inside root
  // Assigned by the merge.
  int pid = 0;
  double offset_us = 0;
  std::string name;
};

const gpb::Value* Field(const gpb::Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? nullptr : &it->second;
}

bool IsNumber(const gpb::Value* v) { return v != nullptr && v->has_number_value(); }
bool IsString(const gpb::Value* v) { return v != nullptr && v->has_string_value(); }

void AppendValue(const gpb::Value& v, std::string* out);

// An object with its keys in sorted order (the output does not depend on hash order).
void AppendStruct(const gpb::Struct& s, std::string* out) {
  std::vector<std::pair<const std::string*, const gpb::Value*>> fields;
  for (const auto& f : s.fields()) fields.emplace_back(&f.first, &f.second);
  std::sort(fields.begin(), fields.end(),
            [](const auto& a, const auto& b) { return *a.first < *b.first; });
  out->push_back('{');
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out->push_back(',');
    AppendJsonString(*fields[i].first, out);
    out->push_back(':');
    AppendValue(*fields[i].second, out);
  }
  out->push_back('}');
}

void AppendValue(const gpb::Value& v, std::string* out) {
  switch (v.kind_case()) {
    case gpb::Value::kNumberValue:
      AppendJsonNumber(v.number_value(), out);
      return;
    case gpb::Value::kStringValue:
      AppendJsonString(v.string_value(), out);
      return;
    case gpb::Value::kBoolValue:
      out->append(v.bool_value() ? "true" : "false");
      return;
    case gpb::Value::kStructValue:
      AppendStruct(v.struct_value(), out);
      return;
    case gpb::Value::kListValue: {
      out->push_back('[');
      const auto& items = v.list_value().values();
      for (int i = 0; i < items.size(); ++i) {
        if (i > 0) out->push_back(',');
        AppendValue(items[i], out);
      }
      out->push_back(']');
      return;
    }
    default:
      out->append("null");
  }
}

Status Malformed(const TraceSource& s, const std::string& what) {
  return DataLossError(s.name + ": " + what);
}

// Checks every event of a sieve trace: what the merge reads and what a viewer needs.
Status CheckEvents(const TraceSource& s, const gpb::ListValue& events) {
  for (int i = 0; i < events.values_size(); ++i) {
    const gpb::Value& e = events.values(i);
    const std::string at = "event " + std::to_string(i) + ": ";
    if (!e.has_struct_value()) return Malformed(s, at + "not an object");
    const gpb::Struct& ev = e.struct_value();
    if (!IsString(Field(ev, "name"))) return Malformed(s, at + "no \"name\" string");
    const gpb::Value* ph = Field(ev, "ph");
    if (!IsString(ph) || ph->string_value().empty()) return Malformed(s, at + "no \"ph\" string");
    for (const char* key : {"ts", "pid", "tid"}) {
      const gpb::Value* v = Field(ev, key);
      if (!IsNumber(v) || !std::isfinite(v->number_value())) {
        return Malformed(s, at + "no numeric \"" + key + "\"");
      }
    }
    if (ph->string_value() == "X") {
      const gpb::Value* dur = Field(ev, "dur");
      if (!IsNumber(dur) || !(dur->number_value() >= 0)) {
        return Malformed(s, at + "a complete event (ph X) without a \"dur\" >= 0");
      }
    }
  }
  return Status::Ok();
}

// Parses one source: the process, nullopt-like (`*skip` set) for JSON that is not a sieve
// trace, or the error.
Status Parse(const TraceSource& s, Process* p, std::string* skip) {
  gpb::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto parsed = gpb::util::JsonStringToMessage(s.text, &p->root, options);
  if (!parsed.ok()) {
    return Malformed(s, "not valid JSON (a truncated or corrupt file?): " + parsed.ToString());
  }
  const gpb::Value* meta = Field(p->root, "sieve");
  const gpb::Value* format =
      meta != nullptr && meta->has_struct_value() ? Field(meta->struct_value(), "format") : nullptr;
  if (!IsString(format)) {
    *skip = s.name + ": not a sieve trace (no \"sieve\" metadata), skipped";
    return Status::Ok();
  }
  if (format->string_value() == kMergedFormat) {
    *skip = s.name + ": a merged trace, skipped";
    return Status::Ok();
  }
  if (format->string_value() != kTraceFormat) {
    *skip = s.name + ": unknown trace format '" + format->string_value() + "', skipped";
    return Status::Ok();
  }
  const gpb::Struct& m = meta->struct_value();
  const gpb::Value* role = Field(m, "role");
  const gpb::Value* rank = Field(m, "rank");
  const gpb::Value* zero = Field(m, "zero");
  const gpb::Value* wall = Field(m, "zero_wall_us");
  if (!IsString(role) || !IsNumber(rank) || !IsString(zero) || !IsNumber(wall)) {
    return Malformed(s, "its \"sieve\" metadata lacks role, rank, zero or zero_wall_us");
  }
  p->source = &s;
  p->role = role->string_value();
  p->rank = static_cast<int64_t>(rank->number_value());
  p->zero = zero->string_value();
  p->zero_wall_us = wall->number_value();
  if (const gpb::Value* c = Field(m, "complete"); c != nullptr && c->has_bool_value()) {
    p->complete = c->bool_value();
  }
  if (const gpb::Value* h = Field(m, "host"); IsString(h)) p->host = h->string_value();
  if (const gpb::Value* o = Field(m, "os_pid"); IsNumber(o)) {
    p->os_pid = static_cast<int64_t>(o->number_value());
  }
  auto it = p->root.mutable_fields()->find("traceEvents");
  if (it == p->root.mutable_fields()->end() || !it->second.has_list_value()) {
    return Malformed(s, "no \"traceEvents\" array");
  }
  p->events = it->second.mutable_list_value();
  return CheckEvents(s, *p->events);
}

int RoleOrder(const std::string& role) {
  if (role == "server") return 0;
  if (role == "worker") return 1;
  return 2;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Microseconds rounded to the nanosecond.
double RoundToNs(double us) { return std::round(us * 1000.0) / 1000.0; }

// A metadata event of the merged file.
void AppendMetadata(const char* name, int pid, const std::string& key, const gpb::Value& value,
                    std::string* out) {
  gpb::Struct ev;
  (*ev.mutable_fields())["name"].set_string_value(name);
  (*ev.mutable_fields())["ph"].set_string_value("M");
  (*ev.mutable_fields())["ts"].set_number_value(0);
  (*ev.mutable_fields())["pid"].set_number_value(pid);
  (*ev.mutable_fields())["tid"].set_number_value(0);
  (*(*ev.mutable_fields())["args"].mutable_struct_value()->mutable_fields())[key] = value;
  AppendStruct(ev, out);
}

gpb::Value StringValue(const std::string& s) {
  gpb::Value v;
  v.set_string_value(s);
  return v;
}

gpb::Value NumberValue(double d) {
  gpb::Value v;
  v.set_number_value(d);
  return v;
}

}  // namespace

StatusOr<MergedTrace> MergeTraces(const std::vector<TraceSource>& sources) {
  MergedTrace merged;
  std::vector<std::unique_ptr<Process>> procs;
  for (const TraceSource& s : sources) {
    auto p = std::make_unique<Process>();
    std::string skip;
    SIEVE_RETURN_IF_ERROR(Parse(s, p.get(), &skip));
    if (!skip.empty()) {
      merged.notes.push_back(skip);
      continue;
    }
    if (!p->complete) {
      merged.notes.push_back(s.name + ": its process ended early (\"complete\": false)");
    }
    procs.push_back(std::move(p));
  }
  if (procs.empty()) return NotFoundError("no sieve trace among the files read");
  std::stable_sort(procs.begin(), procs.end(), [](const auto& a, const auto& b) {
    return std::make_tuple(RoleOrder(a->role), a->rank, a->role, a->source->name) <
           std::make_tuple(RoleOrder(b->role), b->rank, b->role, b->source->name);
  });

  // The common zero: the start barrier (its wall time: the barrier files' median), else the
  // earliest zero of all.
  std::vector<double> barrier_walls;
  for (const auto& p : procs) {
    if (p->zero == kBarrierZero) barrier_walls.push_back(p->zero_wall_us);
  }
  const bool by_barrier = !barrier_walls.empty();
  double ref_wall = 0;
  if (by_barrier) {
    ref_wall = Median(barrier_walls);
  } else {
    ref_wall = procs.front()->zero_wall_us;
    for (const auto& p : procs) ref_wall = std::min(ref_wall, p->zero_wall_us);
  }
  std::map<std::pair<std::string, int64_t>, int> seen;  // role, rank -> files
  for (const auto& p : procs) ++seen[{p->role, p->rank}];
  double earliest = 0;
  for (size_t i = 0; i < procs.size(); ++i) {
    Process& p = *procs[i];
    p.pid = static_cast<int>(i) + 1;
    p.offset_us = p.zero == kBarrierZero ? 0.0 : p.zero_wall_us - ref_wall;
    p.name = p.role + " " + std::to_string(p.rank);
    if (seen[{p.role, p.rank}] > 1)
      p.name += " (" + fs::path(p.source->name).filename().string() + ")";
    if (p.role == "server") ++merged.servers;
    if (p.role == "worker") ++merged.workers;
    for (const gpb::Value& e : p.events->values()) {
      const gpb::Struct& ev = e.struct_value();
      if (Field(ev, "ph")->string_value() == "M") continue;
      earliest = std::min(earliest, Field(ev, "ts")->number_value() + p.offset_us);
    }
  }
  merged.processes = static_cast<int>(procs.size());
  const double shift = RoundToNs(-earliest);  // >= 0

  std::string& out = merged.json;
  out = "{\"displayTimeUnit\":\"ms\",\n\"traceEvents\":[\n";
  bool first = true;
  auto next = [&] {
    out.append(first ? "" : ",\n");
    first = false;
  };
  for (const auto& p : procs) {
    next();
    AppendMetadata("process_name", p->pid, "name", StringValue(p->name), &out);
    next();
    AppendMetadata("process_sort_index", p->pid, "sort_index", NumberValue(p->pid), &out);
    std::string labels = p->source->name;
    if (!p->host.empty()) labels += ", host " + p->host;
    if (p->os_pid != 0) labels += ", pid " + std::to_string(p->os_pid);
    next();
    AppendMetadata("process_labels", p->pid, "labels", StringValue(labels), &out);
  }
  if (by_barrier) {
    next();
    gpb::Struct mark;
    (*mark.mutable_fields())["name"].set_string_value("start barrier");
    (*mark.mutable_fields())["ph"].set_string_value("i");
    (*mark.mutable_fields())["s"].set_string_value("g");
    (*mark.mutable_fields())["ts"].set_number_value(shift);
    (*mark.mutable_fields())["pid"].set_number_value(procs.front()->pid);
    (*mark.mutable_fields())["tid"].set_number_value(0);
    AppendStruct(mark, &out);
  }
  for (const auto& p : procs) {
    for (gpb::Value& e : *p->events->mutable_values()) {
      gpb::Struct& ev = *e.mutable_struct_value();
      const std::string& ph = Field(ev, "ph")->string_value();
      if (ph == "M") {
        const std::string& name = Field(ev, "name")->string_value();
        // The merge names and orders the processes itself.
        if (name == "process_name" || name == "process_sort_index" || name == "process_labels") {
          continue;
        }
      } else {
        gpb::Value& ts = (*ev.mutable_fields())["ts"];
        ts.set_number_value(RoundToNs(ts.number_value() + p->offset_us + shift));
      }
      (*ev.mutable_fields())["pid"].set_number_value(p->pid);
      next();
      AppendStruct(ev, &out);
      ++merged.events;
    }
  }
  out.append("\n],\n\"sieve\":");
  gpb::Struct meta;
  auto& mf = *meta.mutable_fields();
  mf["format"].set_string_value(kMergedFormat);
  mf["version"].set_number_value(1);
  mf["zero"].set_string_value(by_barrier ? kBarrierZero : "wall_clock");
  mf["zero_ts_us"].set_number_value(shift);
  mf["zero_wall_us"].set_number_value(std::round(ref_wall));
  gpb::ListValue* list = mf["sources"].mutable_list_value();
  for (const auto& p : procs) {
    auto& f = *list->add_values()->mutable_struct_value()->mutable_fields();
    f["file"].set_string_value(p->source->name);
    f["role"].set_string_value(p->role);
    f["rank"].set_number_value(static_cast<double>(p->rank));
    f["pid"].set_number_value(p->pid);
    f["zero"].set_string_value(p->zero);
    f["aligned_by"].set_string_value(p->zero == kBarrierZero ? kBarrierZero : "wall_clock");
    f["offset_us"].set_number_value(RoundToNs(p->offset_us));
    f["complete"].set_bool_value(p->complete);
  }
  AppendStruct(meta, &out);
  out.append("}\n");
  return merged;
}

StatusOr<MergedTrace> MergeTraceDirectory(const std::string& dir, const std::string& out) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return UnavailableError(dir + " is not a directory" +
                            (ec ? " (" + ec.message() + ")" : std::string()));
  }
  std::vector<fs::path> files;
  std::vector<std::string> notes;
  const fs::path out_path = fs::weakly_canonical(out, ec);
  fs::directory_iterator it(dir, ec);
  if (ec) return UnavailableError("cannot read " + dir + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path& path = it->path();
    const std::string name = path.filename().string();
    if (name.size() > 9 && name.ends_with(".json.tmp")) {
      notes.push_back(path.string() +
                      ": an unfinished trace (its process is running or did not end normally), "
                      "not read");
      continue;
    }
    if (path.extension() != ".json" || !it->is_regular_file(ec)) continue;
    std::error_code same;
    if (fs::weakly_canonical(path, same) == out_path) continue;
    files.push_back(path);
  }
  if (ec) return UnavailableError("cannot read " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  std::vector<TraceSource> sources;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in.good() && !in.eof()) return UnavailableError("cannot read " + f.string());
    sources.push_back({f.string(), text.str()});
  }
  if (sources.empty()) {
    return NotFoundError("no *.json trace files in " + dir +
                         " (write them with the daemons' --trace_out)");
  }
  auto merged = MergeTraces(sources);
  if (!merged.ok()) {
    if (merged.status().code() == StatusCode::kNotFound) {
      return NotFoundError("no sieve trace among the *.json files of " + dir);
    }
    return merged.status();
  }
  merged->notes.insert(merged->notes.begin(), notes.begin(), notes.end());
  SIEVE_ASSIGN_OR_RETURN(std::unique_ptr<StagedFile> file, StagedFile::Create(out));
  SIEVE_RETURN_IF_ERROR(file->Append(merged->json));
  SIEVE_RETURN_IF_ERROR(file->Commit());
  return merged;
}

}  // namespace sieve
