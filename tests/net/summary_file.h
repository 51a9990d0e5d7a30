// The daemons' run summaries as the multi-process tests read them: the JSON file each sieve-worker
// and sieve-server writes at its end under --summary_out (base/summary_record.h), never their
// summary lines. Numbers come back as text that reads back as the same double (integers without a
// fraction, reals with 17 significant digits), strings as they are; lists and nulls are left out
// of the fields. A file that is absent or not a JSON object gives an empty map. Pure functions;
// thread-safe.
#ifndef SIEVE_TESTS_NET_SUMMARY_FILE_H_
#define SIEVE_TESTS_NET_SUMMARY_FILE_H_

#include <map>
#include <string>
#include <vector>

namespace sieve::testing {

using KeyValues = std::map<std::string, std::string>;

// The summary's top-level fields.
KeyValues ReadSummaryFile(const std::string& path);

// A server summary's "shards": the shards it took over at failover, one map each.
std::vector<KeyValues> ReadShardSummaries(const std::string& path);

}  // namespace sieve::testing

#endif  // SIEVE_TESTS_NET_SUMMARY_FILE_H_
