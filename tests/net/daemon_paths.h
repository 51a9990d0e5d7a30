// Where the build put sieve's programs, for tests that run them as subprocesses. The paths come
// from CMake ($<TARGET_FILE:...>) when the test helpers are compiled, so they follow the build
// tree's layout instead of guessing it from the test binary's directory. Pure functions.
#ifndef SIEVE_TESTS_NET_DAEMON_PATHS_H_
#define SIEVE_TESTS_NET_DAEMON_PATHS_H_

#include <string>

namespace sieve::testing {

std::string SchedulerBinary();  // sieve-scheduler
std::string ServerBinary();     // sieve-server
std::string WorkerBinary();     // sieve-worker
std::string SieveBinary();      // sieve (launch, compare, keygen)
std::string TestNodeBinary();   // tests/net/test_node, a bare node for cluster tests

}  // namespace sieve::testing

#endif  // SIEVE_TESTS_NET_DAEMON_PATHS_H_
