// SummaryRecord: one process's end-of-run summary as named fields in order, the one list that both
// of its forms are built from:
//   Line(prefix)  "sieve-worker summary: rank=0 rounds=300 loss=0.41 ..." for people: the fields
//                 marked kAlways and every other field whose value is not zero or empty;
//   Json()        {"rank":0,"rounds":300,...,"shards":[{...}]} for programs: every field, numbers
//                 as JSON numbers (integers exact, reals the shortest text that reads back as the
//                 same double, NaN and infinities as null), text as JSON strings, lists of
//                 records as arrays of objects (lists appear only in the JSON).
// A field's line text is formatted for reading (reals to the digits asked); its JSON value is
// exact. Keys are [a-z0-9_]; one key per record (CHECKed: keys are our own constants).
//
// WriteSummaryFile writes Json() atomically (base/atomic_file.h) to `pattern` with {role} and
// {rank} expanded (base/rank_pattern.h), the daemons' --summary_out. Thread-safety: a record is
// a value; no sharing.
#ifndef SIEVE_BASE_SUMMARY_RECORD_H_
#define SIEVE_BASE_SUMMARY_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sieve {

class SummaryRecord {
 public:
  // kAlways: on the line whatever the value; kNonZero: on the line when not 0 / 0.0 / "";
  // kHidden: in the JSON only (a value that means "none", e.g. restored_round=-1).
  enum class Show { kAlways, kNonZero, kHidden };

  SummaryRecord& Int(std::string_view key, int64_t v, Show show = Show::kNonZero);
  SummaryRecord& Uint(std::string_view key, uint64_t v, Show show = Show::kNonZero);
  // Real: `digits` significant digits on the line (%.*g); Fixed: `decimals` after the point.
  SummaryRecord& Real(std::string_view key, double v, int digits = 6, Show show = Show::kNonZero);
  SummaryRecord& Fixed(std::string_view key, double v, int decimals, Show show = Show::kNonZero);
  SummaryRecord& Text(std::string_view key, std::string_view v, Show show = Show::kNonZero);
  // JSON only: an array of records (e.g. a server's shards taken over at failover).
  SummaryRecord& List(std::string_view key, std::vector<SummaryRecord> items);

  std::string Line(std::string_view prefix) const;
  std::string Json() const;

 private:
  struct Field {
    std::string key;
    std::string line_value;  // as the line shows it
    std::string json_value;  // JSON text
    bool shown = false;      // on the line
  };
  SummaryRecord& Add(std::string_view key, std::string line_value, std::string json_value,
                     bool shown);

  std::vector<Field> fields_;
};

Status WriteSummaryFile(const std::string& pattern, std::string_view role, int rank,
                        const SummaryRecord& record);

}  // namespace sieve

#endif  // SIEVE_BASE_SUMMARY_RECORD_H_
