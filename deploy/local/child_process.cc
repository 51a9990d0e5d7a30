#include "deploy/local/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string_view>

extern char** environ;

namespace sieve {
namespace {

std::string ErrnoText(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// In the forked child only: async-signal-safe steps up to exec.
[[noreturn]] void ExecInChild(char* const* argv, char* const* envp, int out_w, int err_w,
                              pid_t parent) {
  // Die with the launcher, even when it is killed with SIGKILL (the setting survives exec). The
  // parent may have died before prctl: then we were reparented and exit at once.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  setpgid(0, 0);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  dup2(out_w, STDOUT_FILENO);
  dup2(err_w, STDERR_FILENO);
  execve(argv[0], argv, envp);
  const char* reason = strerror(errno);
  const char* head = "sieve launch: cannot execute ";
  (void)!write(STDERR_FILENO, head, strlen(head));
  (void)!write(STDERR_FILENO, argv[0], strlen(argv[0]));
  (void)!write(STDERR_FILENO, ": ", 2);
  (void)!write(STDERR_FILENO, reason, strlen(reason));
  (void)!write(STDERR_FILENO, "\n", 1);
  _exit(127);
}

}  // namespace

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

StatusOr<SpawnedChild> SpawnChild(const std::vector<std::string>& argv,
                                  const std::vector<std::string>& extra_env) {
  if (argv.empty()) return InvalidArgumentError("SpawnChild: empty argv");
  // Everything the child needs is built before fork: no allocation after it.
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::set<std::string_view> changed;  // names extra_env sets or removes
  for (const std::string& e : extra_env) changed.insert(std::string_view(e).substr(0, e.find('=')));
  std::vector<char*> cenv;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (!changed.count(entry.substr(0, entry.find('=')))) cenv.push_back(*e);
  }
  for (const std::string& e : extra_env) {
    if (e.find('=') != std::string::npos) cenv.push_back(const_cast<char*>(e.c_str()));
  }
  cenv.push_back(nullptr);

  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return InternalError(ErrnoText("pipe2"));
  if (pipe2(err, O_CLOEXEC) != 0) {
    Status s = InternalError(ErrnoText("pipe2"));
    close(out[0]);
    close(out[1]);
    return s;
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) ExecInChild(cargv.data(), cenv.data(), out[1], err[1], parent);
  Status fork_error = pid < 0 ? InternalError(ErrnoText("fork")) : Status::Ok();
  close(out[1]);
  close(err[1]);
  if (!fork_error.ok()) {
    close(out[0]);
    close(err[0]);
    return fork_error;
  }
  // Also set the group from the parent so it holds before either side signals it.
  setpgid(pid, pid);
  fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
  fcntl(err[0], F_SETFL, fcntl(err[0], F_GETFL) | O_NONBLOCK);
  return SpawnedChild{pid, out[0], err[0]};
}

StatusOr<CapturedRun> RunAndCapture(const std::vector<std::string>& argv,
                                    std::chrono::milliseconds timeout,
                                    const std::vector<std::string>& extra_env) {
  SIEVE_ASSIGN_OR_RETURN(auto spawned, SpawnChild(argv, extra_env));
  SpawnedChild child = spawned;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  CapturedRun run;
  char buf[4096];
  bool timed_out = false;
  while (child.stdout_fd >= 0 || child.stderr_fd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{child.stdout_fd, POLLIN, 0}, {child.stderr_fd, POLLIN, 0}};
    int n = poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t got = read(fds[i].fd, buf, sizeof(buf));
      if (got > 0) {
        if (i == 0) run.stdout_text.append(buf, static_cast<size_t>(got));
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        CloseFd(i == 0 ? child.stdout_fd : child.stderr_fd);
      }
    }
  }
  CloseFd(child.stdout_fd);
  CloseFd(child.stderr_fd);
  // The pipes are closed; give the program the rest of the deadline to exit, then kill it.
  while (!timed_out) {
    pid_t done = waitpid(child.pid, &run.wait_status, WNOHANG);
    if (done == child.pid || (done < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      break;
    }
    poll(nullptr, 0, 5);
  }
  if (timed_out) {
    kill(-child.pid, SIGKILL);
    while (waitpid(child.pid, &run.wait_status, 0) < 0 && errno == EINTR) {
    }
  }
  if (timed_out) {
    return DeadlineExceededError(argv[0] + " did not finish within " +
                                 std::to_string(timeout.count()) + " ms");
  }
  return run;
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) {
    return "exited with code " + std::to_string(WEXITSTATUS(wait_status));
  }
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    const char* name = strsignal(sig);
    return "killed by signal " + std::to_string(sig) + (name ? " (" + std::string(name) + ")" : "");
  }
  return "stopped (wait status " + std::to_string(wait_status) + ")";
}

}  // namespace sieve
