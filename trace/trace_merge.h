// The merge of one job's per-process trace files (trace/trace_writer.h) into one trace-event file
// (`sieve trace merge`, docs/tracing.md).
//
// Contract: MergeTraces takes the sources' text; every source that is a sieve trace (its "sieve"
// metadata object says "format": "sieve-trace") becomes one process of the output, with a pid of
// its own (1, 2, ...: servers by rank, then workers by rank, then anything else by name; the
// viewer lists them in that order), its process name "<role> <rank>" and its events, their pid
// replaced and their ts moved onto the common timeline:
//   - a file whose zero is "start_barrier" (a worker that passed the job's start barrier) keeps
//     its ts: the workers' zeros are the same moment, whatever their clocks say;
//   - any other file (a server, whose zero is the start of serving; a worker that joined a
//     running job) is placed by its wall clock: ts + (its zero_wall_us - the barrier's wall
//     time), the barrier's wall time being the median of the barrier files' zero_wall_us. Exact
//     on one machine; across machines as good as their clocks agree.
//   Without a barrier file every file is placed by its wall clock from the earliest zero. Should
//   any event then fall before 0, the whole timeline is shifted so that none does; the merged
//   metadata gives the zero's ts ("zero_ts_us"), and a global instant event "start barrier"
//   marks it.
// Sources that are JSON but not a sieve trace, and merged traces, are skipped with a note.
// Timestamps are rounded to the nanosecond.
//
// Errors: DataLoss naming the source for text that is not JSON (a truncated or corrupt file) or a
// sieve trace that breaks the format (no traceEvents array, an event without a numeric ts, pid or
// tid, a span without a duration, missing metadata); NotFound when no source is a sieve trace.
// MergeTraceDirectory adds Unavailable for a directory or file it cannot read or an output it
// cannot write (base/staged_file.h).
// Thread-safety: pure functions but for the files MergeTraceDirectory reads and writes.
#ifndef SIEVE_TRACE_TRACE_MERGE_H_
#define SIEVE_TRACE_TRACE_MERGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace sieve {

struct TraceSource {
  std::string name;  // how messages name it (its path)
  std::string text;  // its content
};

struct MergedTrace {
  std::string json;  // the merged file
  int servers = 0;
  int workers = 0;
  int processes = 0;               // all of them (servers, workers and others)
  uint64_t events = 0;             // events copied from the sources
  std::vector<std::string> notes;  // one line per source skipped, or written by a process that
                                   // ended early
};

StatusOr<MergedTrace> MergeTraces(const std::vector<TraceSource>& sources);

// Merges every *.json file of `dir` (but `out` itself) into `out`. A PATH.json.tmp (the file of a
// process that is still running or did not end normally) is not read, only noted.
StatusOr<MergedTrace> MergeTraceDirectory(const std::string& dir, const std::string& out);

}  // namespace sieve

#endif  // SIEVE_TRACE_TRACE_MERGE_H_
