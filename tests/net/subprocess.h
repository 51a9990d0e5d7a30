// Test helper: a child process with its stdout+stderr captured line by line, for multi-process
// integration tests. Every wait is bounded. The destructor SIGKILLs and reaps a still-running
// child, so a failing test leaves nothing behind. Not thread-safe; one owner.
#ifndef SIEVE_TESTS_NET_SUBPROCESS_H_
#define SIEVE_TESTS_NET_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace sieve::testing {

class Subprocess {
 public:
  explicit Subprocess(std::vector<std::string> argv);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Next output line, or nullopt on timeout / end of output.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout);
  // Reads lines until one contains `needle`; returns it, or nullopt on timeout / EOF.
  std::optional<std::string> WaitFor(const std::string& needle, std::chrono::milliseconds timeout);
  // Waits for exit; returns the wait status, or nullopt on timeout. Drains output meanwhile.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  void Kill(int signo);
  const std::vector<std::string>& lines() const { return lines_; }  // every line read so far

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buffer_;
  std::vector<std::string> lines_;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace sieve::testing

#endif  // SIEVE_TESTS_NET_SUBPROCESS_H_
