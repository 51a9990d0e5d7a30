// TraceWriter: one process's timeline (docs/tracing.md) as a Chrome trace-event file, the "JSON
// Object Format" that Perfetto and chrome://tracing open:
//   {"displayTimeUnit":"ms","traceEvents":[...],"sieve":{...}}
// (the metadata object last: viewers read the events and ignore what follows them).
// Events: complete spans (ph "X", ts and dur in microseconds, args with at least the round),
// counters (ph "C") and the process / thread names (ph "M", "process_name" = "<role> <rank>").
// Every event has name, ph, ts, pid (this process's id) and tid.
//
// Clock: ts counts microseconds of the steady clock from the process's zero. The zero is the
// moment Open was called, or the moment of MarkZero when it is called before the first span or
// counter (sieve-worker: leaving the workers' start barrier; sieve-server: the start of serving).
// The "sieve" metadata object records what the zero is ("zero"), the system clock at that moment
// in microseconds since the Unix epoch ("zero_wall_us", read next to the steady clock), the role,
// rank, host, OS pid, the recorded rounds, the number of events and "complete": false when the
// writer was destroyed without Close or closed with complete = false (a process that ended early
// through its normal exit path still leaves a valid file). `sieve trace merge` aligns files on it
// (trace/trace_merge.h).
//
// Bounded: spans and counters of rounds outside options.rounds are dropped (check Wants(round)
// first to skip building them). Events are kept as JSON text in memory and appended to PATH.tmp
// whenever more than options.flush_bytes are buffered; Close writes the rest and renames PATH.tmp
// over PATH (base/staged_file.h: a reader never sees a part, and two writers of one PATH, e.g.
// a server and a worker of the same rank given one --trace_out without {role}, are refused at
// Open instead of mixing their files). A process killed by a signal it does not handle leaves
// only PATH.tmp behind.
//
// Errors: Open's are the file's (Unavailable, or FailedPrecondition when another writer holds
// PATH.tmp, with a hint at {role}). A failed append is remembered, later events are dropped, and
// Close returns it. Ownership: owns its file. Thread-safety: every method may be called from any
// thread (one mutex; events land in the file in the order the calls took it).
#ifndef SIEVE_TRACE_TRACE_WRITER_H_
#define SIEVE_TRACE_TRACE_WRITER_H_

#include <chrono>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/mutex.h"
#include "base/staged_file.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "trace/trace_rounds.h"

namespace sieve {

// One value of an event's args: a number, a bool or a string. Strings are copied into the
// event's text at once, so a view of a temporary is fine.
class TraceValue {
 public:
  TraceValue(bool v) : kind_(Kind::kBool), b_(v) {}  // NOLINT: implicit by design
  template <std::integral T>
  requires(!std::same_as<T, bool>) TraceValue(T v) {  // NOLINT: implicit by design
    if constexpr (std::is_signed_v<T>) {
      kind_ = Kind::kInt;
      i_ = v;
    } else {
      kind_ = Kind::kUint;
      u_ = v;
    }
  }
  TraceValue(double v) : kind_(Kind::kDouble), d_(v) {}              // NOLINT
  TraceValue(std::string_view v) : kind_(Kind::kString), s_(v) {}    // NOLINT
  TraceValue(const char* v) : kind_(Kind::kString), s_(v) {}         // NOLINT
  TraceValue(const std::string& v) : kind_(Kind::kString), s_(v) {}  // NOLINT

  // Appends the value as JSON text.
  void AppendJson(std::string* out) const;

 private:
  enum class Kind { kBool, kInt, kUint, kDouble, kString };
  Kind kind_;
  bool b_ = false;
  int64_t i_ = 0;
  uint64_t u_ = 0;
  double d_ = 0.0;
  std::string_view s_;
};

struct TraceArg {
  std::string_view key;
  TraceValue value;
};

struct TraceWriterOptions {
  std::string path;  // the file to write (patterns already expanded: ExpandRolePattern)
  std::string role;  // "worker" or "server": the process is named "<role> <rank>"
  int rank = 0;
  TraceRounds rounds;                    // the rounds recorded
  size_t flush_bytes = size_t{1} << 20;  // buffered event text appended to PATH.tmp beyond this
};

class TraceWriter {
 public:
  using Clock = std::chrono::steady_clock;

  // Creates PATH.tmp and starts the file (its process name). The zero is now until MarkZero.
  static StatusOr<std::unique_ptr<TraceWriter>> Open(const TraceWriterOptions& options);
  // Writes the file as Close does, with "complete": false when Close was not called; an error is
  // logged.
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Whether spans and counters of `round` are recorded.
  bool Wants(uint64_t round) const { return rounds_.Contains(round); }

  // Makes now the zero of the timestamps; `what` names the moment (e.g. "start_barrier").
  // FailedPrecondition after a span or counter was added (their times are already written).
  Status MarkZero(std::string_view what) EXCLUDES(mu_);

  // Names thread `tid` of this process in the viewer (a "thread_name" event).
  void SetThreadName(int tid, std::string_view name) EXCLUDES(mu_);

  // A complete event "name" of round `round` on thread `tid`, from `start` to `end` (a negative
  // duration is written as 0). Its args are {"round": round} and then `args`. Dropped unless
  // Wants(round), and after Close or a write error.
  void AddSpan(std::string_view name, int tid, uint64_t round, Clock::time_point start,
               Clock::time_point end, std::initializer_list<TraceArg> args = {}) EXCLUDES(mu_);

  // A counter event "name" of round `round` at `at`: each arg is one series of the counter's
  // track (numbers only, by the format). Dropped as AddSpan.
  void AddCounter(std::string_view name, int tid, uint64_t round, Clock::time_point at,
                  std::initializer_list<TraceArg> args) EXCLUDES(mu_);

  // Writes the rest and the metadata ("complete": `complete`, false for a process whose work
  // ended in an error), and renames PATH.tmp over PATH. Returns the first error (of this call or
  // of an earlier append); later calls return the same.
  Status Close(bool complete = true) EXCLUDES(mu_);

  const std::string& path() const { return path_; }

 private:
  TraceWriter(const TraceWriterOptions& options, std::unique_ptr<StagedFile> file);
  // The event's common fields up to its args: {"name":..,"ph":..,"ts":..,["dur":..,]"pid":..,
  // "tid":..
  void StartEvent(std::string_view name, char ph, int tid, Clock::time_point at) REQUIRES(mu_);
  void AppendArgs(uint64_t round, std::initializer_list<TraceArg> args) REQUIRES(mu_);
  // Appends the buffer to the file when it is large (or `always`).
  void MaybeFlush(bool always) REQUIRES(mu_);
  Status Finish(bool complete) EXCLUDES(mu_);

  const std::string path_;
  const std::string role_;
  const int rank_;
  const TraceRounds rounds_;
  const size_t flush_bytes_;
  const int pid_;  // this process's id, the events' pid

  Mutex mu_;
  std::unique_ptr<StagedFile> file_ GUARDED_BY(mu_);  // null once finished
  std::string buffer_ GUARDED_BY(mu_);                // event text not yet in the file
  Clock::time_point zero_ GUARDED_BY(mu_);
  int64_t zero_wall_us_ GUARDED_BY(mu_) = 0;
  std::string zero_what_ GUARDED_BY(mu_) = "open";
  uint64_t events_ GUARDED_BY(mu_) = 0;      // spans and counters written
  bool first_event_ GUARDED_BY(mu_) = true;  // no event in the array yet (no comma before it)
  Status status_ GUARDED_BY(mu_);            // the first write error, or Close's result
  bool finished_ GUARDED_BY(mu_) = false;
};

}  // namespace sieve

#endif  // SIEVE_TRACE_TRACE_WRITER_H_
