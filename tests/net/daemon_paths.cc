#include "tests/net/daemon_paths.h"

namespace sieve::testing {

std::string SchedulerBinary() { return SIEVE_SCHEDULER_BINARY; }
std::string ServerBinary() { return SIEVE_SERVER_BINARY; }
std::string WorkerBinary() { return SIEVE_WORKER_BINARY; }
std::string SieveBinary() { return SIEVE_SIEVE_BINARY; }
std::string TestNodeBinary() { return SIEVE_TEST_NODE_BINARY; }

}  // namespace sieve::testing
