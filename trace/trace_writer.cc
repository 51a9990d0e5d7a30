#include "trace/trace_writer.h"

#include <glog/logging.h>
#include <unistd.h>

#include <climits>
#include <ctime>
#include <utility>

#include "base/json_text.h"
#include "base/rank_pattern.h"

namespace sieve {
namespace {

constexpr int kFormatVersion = 1;

int64_t WallMicros(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

// "2024-05-01T12:00:00.123456Z" of microseconds since the Unix epoch.
std::string UtcText(int64_t wall_us) {
  const std::time_t seconds = static_cast<std::time_t>(wall_us / 1000000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(wall_us % 1000000));
  return buf;
}

std::string HostName() {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "";
  return host;
}

}  // namespace

void TraceValue::AppendJson(std::string* out) const {
  switch (kind_) {
    case Kind::kBool:
      out->append(b_ ? "true" : "false");
      return;
    case Kind::kInt:
      out->append(std::to_string(i_));
      return;
    case Kind::kUint:
      out->append(std::to_string(u_));
      return;
    case Kind::kDouble:
      AppendJsonNumber(d_, out);
      return;
    case Kind::kString:
      AppendJsonString(s_, out);
      return;
  }
}

StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Open(const TraceWriterOptions& options) {
  if (options.path.empty()) return InvalidArgumentError("no trace file named");
  auto file = StagedFile::Create(options.path);
  if (!file.ok()) {
    if (file.status().code() != StatusCode::kFailedPrecondition) return file.status();
    // Most likely a server and a worker of one rank given the same pattern (`sieve launch`
    // passes --trace_out to both).
    return FailedPreconditionError(file.status().message() +
                                   " (one --trace_out for servers and workers needs {role} next "
                                   "to {rank}, e.g. DIR/{role}-{rank}.json)");
  }
  return std::unique_ptr<TraceWriter>(new TraceWriter(options, std::move(file).value()));
}

TraceWriter::TraceWriter(const TraceWriterOptions& options, std::unique_ptr<StagedFile> file)
    : path_(options.path),
      role_(options.role),
      rank_(options.rank),
      rounds_(options.rounds),
      flush_bytes_(options.flush_bytes),
      pid_(static_cast<int>(getpid())) {
  MutexLock lock(&mu_);
  file_ = std::move(file);
  zero_ = Clock::now();
  zero_wall_us_ = WallMicros(std::chrono::system_clock::now());
  buffer_ = "{\"displayTimeUnit\":\"ms\",\n\"traceEvents\":[\n";
  StartEvent("process_name", 'M', 0, zero_);
  buffer_.append(",\"args\":{\"name\":");
  AppendJsonString(role_ + " " + std::to_string(rank_), &buffer_);
  buffer_.append("}}");
}

TraceWriter::~TraceWriter() {
  Status s = Finish(/*complete=*/false);
  if (!s.ok()) LOG(WARNING) << "trace " << path_ << ": " << s.ToString();
}

Status TraceWriter::MarkZero(std::string_view what) {
  MutexLock lock(&mu_);
  if (events_ > 0) {
    return FailedPreconditionError("the trace's zero must be marked before its first event");
  }
  zero_ = Clock::now();
  zero_wall_us_ = WallMicros(std::chrono::system_clock::now());
  zero_what_ = std::string(what);
  return Status::Ok();
}

void TraceWriter::SetThreadName(int tid, std::string_view name) {
  MutexLock lock(&mu_);
  if (finished_ || !status_.ok()) return;
  StartEvent("thread_name", 'M', tid, zero_);
  buffer_.append(",\"args\":{\"name\":");
  AppendJsonString(name, &buffer_);
  buffer_.append("}}");
  MaybeFlush(false);
}

void TraceWriter::StartEvent(std::string_view name, char ph, int tid, Clock::time_point at) {
  buffer_.append(first_event_ ? "" : ",\n");
  first_event_ = false;
  buffer_.append("{\"name\":");
  AppendJsonString(name, &buffer_);
  buffer_.append(",\"ph\":\"");
  buffer_.push_back(ph);
  buffer_.append("\",\"ts\":");
  // Metadata events carry ts 0, the zero, whenever they are written.
  AppendMicros(
      ph == 'M' ? 0 : std::chrono::duration_cast<std::chrono::nanoseconds>(at - zero_).count(),
      &buffer_);
  buffer_.append(",\"pid\":");
  buffer_.append(std::to_string(pid_));
  buffer_.append(",\"tid\":");
  buffer_.append(std::to_string(tid));
}

void TraceWriter::AppendArgs(uint64_t round, std::initializer_list<TraceArg> args) {
  buffer_.append(",\"args\":{\"round\":");
  buffer_.append(std::to_string(round));
  for (const TraceArg& a : args) {
    buffer_.push_back(',');
    AppendJsonString(a.key, &buffer_);
    buffer_.push_back(':');
    a.value.AppendJson(&buffer_);
  }
  buffer_.append("}}");
}

void TraceWriter::AddSpan(std::string_view name, int tid, uint64_t round, Clock::time_point start,
                          Clock::time_point end, std::initializer_list<TraceArg> args) {
  if (!Wants(round)) return;
  MutexLock lock(&mu_);
  if (finished_ || !status_.ok()) return;
  StartEvent(name, 'X', tid, start);
  buffer_.append(",\"dur\":");
  const int64_t dur = std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count();
  AppendMicros(dur > 0 ? dur : 0, &buffer_);
  AppendArgs(round, args);
  ++events_;
  MaybeFlush(false);
}

void TraceWriter::AddCounter(std::string_view name, int tid, uint64_t round, Clock::time_point at,
                             std::initializer_list<TraceArg> args) {
  if (!Wants(round)) return;
  MutexLock lock(&mu_);
  if (finished_ || !status_.ok()) return;
  StartEvent(name, 'C', tid, at);
  // A counter's args are its series: no "round" among them (it would be drawn as one).
  buffer_.append(",\"args\":{");
  bool first = true;
  for (const TraceArg& a : args) {
    if (!first) buffer_.push_back(',');
    first = false;
    AppendJsonString(a.key, &buffer_);
    buffer_.push_back(':');
    a.value.AppendJson(&buffer_);
  }
  buffer_.append("}}");
  ++events_;
  MaybeFlush(false);
}

void TraceWriter::MaybeFlush(bool always) {
  if (!always && buffer_.size() < flush_bytes_) return;
  if (status_.ok()) status_ = file_->Append(buffer_);
  buffer_.clear();
}

Status TraceWriter::Close(bool complete) { return Finish(complete); }

Status TraceWriter::Finish(bool complete) {
  MutexLock lock(&mu_);
  if (finished_) return status_;
  finished_ = true;
  if (!status_.ok()) {
    file_.reset();  // PATH.tmp removed: its content is not a whole file
    return status_;
  }
  buffer_.append("\n],\n\"sieve\":{\"format\":\"sieve-trace\",\"version\":");
  buffer_.append(std::to_string(kFormatVersion));
  buffer_.append(",\"role\":");
  AppendJsonString(role_, &buffer_);
  buffer_.append(",\"rank\":");
  buffer_.append(std::to_string(rank_));
  buffer_.append(",\"os_pid\":");
  buffer_.append(std::to_string(pid_));
  buffer_.append(",\"host\":");
  AppendJsonString(HostName(), &buffer_);
  buffer_.append(",\"zero\":");
  AppendJsonString(zero_what_, &buffer_);
  buffer_.append(",\"zero_wall_us\":");
  buffer_.append(std::to_string(zero_wall_us_));
  buffer_.append(",\"zero_wall_utc\":");
  AppendJsonString(UtcText(zero_wall_us_), &buffer_);
  buffer_.append(",\"rounds\":[");
  buffer_.append(std::to_string(rounds_.begin));
  buffer_.push_back(',');
  buffer_.append(std::to_string(rounds_.end));
  buffer_.append("],\"events\":");
  buffer_.append(std::to_string(events_));
  buffer_.append(",\"complete\":");
  buffer_.append(complete ? "true" : "false");
  buffer_.append("}}\n");
  MaybeFlush(/*always=*/true);
  if (status_.ok()) status_ = file_->Commit();
  file_.reset();
  return status_;
}

}  // namespace sieve
