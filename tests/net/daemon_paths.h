// Where the build put sieve's programs, for tests that run them as subprocesses. The paths come
// from CMake ($<TARGET_FILE:...>) when the test helpers are compiled, so they follow the build
// tree's layout instead of guessing it from the test binary's directory. Also the scheduler's
// command line for a job on this machine. Pure functions.
#ifndef SIEVE_TESTS_NET_DAEMON_PATHS_H_
#define SIEVE_TESTS_NET_DAEMON_PATHS_H_

#include <filesystem>
#include <string>
#include <vector>

namespace sieve::testing {

std::string SchedulerBinary();  // sieve-scheduler
std::string ServerBinary();     // sieve-server
std::string WorkerBinary();     // sieve-worker
std::string SieveBinary();      // sieve (launch, compare, keygen)
std::string TestNodeBinary();   // tests/net/test_node, a bare node for cluster tests

// sieve-scheduler's command line for a job of `servers` servers and `workers` workers on this
// machine: an OS-assigned port on 127.0.0.1 (the address it names to the nodes), written as
// "HOST:PORT\n" to `port_file` once it listens. Further flags go after these.
std::vector<std::string> LocalSchedulerArgv(int servers, int workers,
                                            const std::filesystem::path& port_file);

}  // namespace sieve::testing

#endif  // SIEVE_TESTS_NET_DAEMON_PATHS_H_
