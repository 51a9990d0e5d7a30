#include "tests/net/daemon_paths.h"

namespace sieve::testing {

std::string SchedulerBinary() { return SIEVE_SCHEDULER_BINARY; }
std::string ServerBinary() { return SIEVE_SERVER_BINARY; }
std::string WorkerBinary() { return SIEVE_WORKER_BINARY; }
std::string SieveBinary() { return SIEVE_SIEVE_BINARY; }
std::string TestNodeBinary() { return SIEVE_TEST_NODE_BINARY; }

std::vector<std::string> LocalSchedulerArgv(int servers, int workers,
                                            const std::filesystem::path& port_file) {
  return {SchedulerBinary(),
          "--port=0",
          "--bind=127.0.0.1",
          "--host=127.0.0.1",
          "--num_servers=" + std::to_string(servers),
          "--num_workers=" + std::to_string(workers),
          "--port_file=" + port_file.string()};
}

}  // namespace sieve::testing
