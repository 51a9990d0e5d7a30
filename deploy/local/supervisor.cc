#include "deploy/local/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "deploy/local/child_process.h"

namespace sieve {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int g_wake_read = -1;
int g_wake_write = -1;
volatile sig_atomic_t g_received_signal = 0;

void OnSignal(int sig) {
  int saved = errno;
  if (sig != SIGCHLD) g_received_signal = sig;
  if (g_wake_write >= 0) (void)!write(g_wake_write, "x", 1);
  errno = saved;
}

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        poll(&p, 1, 100);
        continue;
      }
      return;  // the reader went away; output is best effort
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

int MillisLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

}  // namespace

struct Supervisor::Child {
  ChildSpec spec;
  pid_t pid = -1;
  int fds[2] = {-1, -1};  // stdout, stderr
  LinePrefixer prefixers[2];
  int log_fd = -1;
  bool running = true;
  int wait_status = 0;

  Child(ChildSpec s, const std::string& prefix)
      : spec(std::move(s)), prefixers{LinePrefixer(prefix), LinePrefixer(prefix)} {}
};

Supervisor::Supervisor(SupervisorOptions options) : options_(std::move(options)) {}

Supervisor::~Supervisor() {
  if (!stopped_ || AnyRunning()) StopAll(milliseconds(0));
  for (auto& c : children_) CloseFd(c->log_fd);
}

Status Supervisor::Init() {
  if (g_wake_read < 0) {
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
      return InternalError(std::string("pipe2: ") + std::strerror(errno));
    }
    g_wake_read = p[0];
    g_wake_write = p[1];
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) {
    if (sigaction(sig, &sa, nullptr) != 0) {
      return InternalError(std::string("sigaction: ") + std::strerror(errno));
    }
  }
  signal(SIGPIPE, SIG_IGN);
  return Status::Ok();
}

int Supervisor::received_signal() const { return g_received_signal; }

StatusOr<size_t> Supervisor::Start(const ChildSpec& spec) {
  auto child = std::make_unique<Child>(spec, "[" + spec.name + "] ");
  if (!options_.log_dir.empty()) {
    std::string path = options_.log_dir + "/" + spec.log_name + ".log";
    // A restarted process (same log name) appends to its predecessor's log.
    const bool restart = !logs_opened_.insert(spec.log_name).second;
    child->log_fd = open(path.c_str(),
                         O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (restart ? 0 : O_TRUNC), 0644);
    if (child->log_fd < 0) {
      return UnavailableError("cannot open log file " + path + ": " + std::strerror(errno));
    }
  }
  auto spawned = SpawnChild(spec.argv, spec.env);
  if (!spawned.ok()) {
    CloseFd(child->log_fd);
    return Status(spawned.status().code(),
                  "cannot start " + spec.name + ": " + spawned.status().message());
  }
  child->pid = spawned->pid;
  child->fds[0] = spawned->stdout_fd;
  child->fds[1] = spawned->stderr_fd;
  children_.push_back(std::move(child));
  return children_.size() - 1;
}

const ChildSpec& Supervisor::spec(size_t i) const { return children_[i]->spec; }
const std::string& Supervisor::name(size_t i) const { return children_[i]->spec.name; }
pid_t Supervisor::pid(size_t i) const { return children_[i]->pid; }
bool Supervisor::running(size_t i) const { return children_[i]->running; }
int Supervisor::wait_status(size_t i) const { return children_[i]->wait_status; }

bool Supervisor::AnyRunning() const {
  for (const auto& c : children_) {
    if (c->running) return true;
  }
  return false;
}

void Supervisor::Emit(Child& c, bool is_stderr, const std::vector<std::string>& lines) {
  size_t index = 0;
  while (children_[index].get() != &c) ++index;
  for (const std::string& line : lines) {
    if (!observer_ || observer_(index, is_stderr, line)) {
      Write(is_stderr ? options_.err_fd : options_.out_fd, c.prefixers[is_stderr].Decorate(line));
    }
    if (c.log_fd >= 0) WriteAll(c.log_fd, line + "\n");
  }
}

void Supervisor::Write(int fd, std::string_view text) {
  if (status_.empty()) return WriteAll(fd, text);
  constexpr std::string_view kErase = "\r\033[K";
  if (fd == options_.out_fd) {
    WriteAll(fd, std::string(kErase).append(text).append(status_));
    return;
  }
  WriteAll(options_.out_fd, kErase);
  WriteAll(fd, text);
  WriteAll(options_.out_fd, status_);
}

void Supervisor::Print(bool to_stderr, std::string_view text) {
  Write(to_stderr ? options_.err_fd : options_.out_fd, text);
}

void Supervisor::SetStatusLine(std::string text) {
  if (text == status_) return;
  WriteAll(options_.out_fd, "\r\033[K" + text);
  status_ = std::move(text);
}

void Supervisor::ReadFrom(Child& c, bool is_stderr) {
  int& fd = c.fds[is_stderr];
  char buf[8192];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      Emit(c, is_stderr, c.prefixers[is_stderr].Append(std::string_view(buf, n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    // End of stream (or an error we treat as one): flush the partial line.
    Emit(c, is_stderr, c.prefixers[is_stderr].Flush());
    CloseFd(fd);
    return;
  }
}

void Supervisor::ReapExited() {
  for (size_t i = 0; i < children_.size(); ++i) {
    Child& c = *children_[i];
    if (!c.running) continue;
    int status = 0;
    pid_t done = waitpid(c.pid, &status, WNOHANG);
    if (done == c.pid) {
      c.running = false;
      c.wait_status = status;
      exit_order_.push_back(i);
    }
  }
}

void Supervisor::Pump(milliseconds timeout) {
  std::vector<pollfd> fds;
  std::vector<std::pair<Child*, bool>> owners;
  fds.push_back({g_wake_read, POLLIN, 0});
  owners.push_back({nullptr, false});
  for (auto& c : children_) {
    for (int s = 0; s < 2; ++s) {
      if (c->fds[s] < 0) continue;
      fds.push_back({c->fds[s], POLLIN, 0});
      owners.push_back({c.get(), s == 1});
    }
  }
  int n = poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
  if (n > 0) {
    if (fds[0].revents != 0) {
      char drain[64];
      while (read(g_wake_read, drain, sizeof(drain)) > 0) {
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) ReadFrom(*owners[i].first, owners[i].second);
    }
  }
  ReapExited();
}

void Supervisor::SignalRunning(int sig) {
  for (auto& c : children_) {
    if (c->running) kill(-c->pid, sig);
  }
}

void Supervisor::DrainOutput(milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    bool open = false;
    for (auto& c : children_) open = open || c->fds[0] >= 0 || c->fds[1] >= 0;
    if (!open) return;
    int left = MillisLeft(deadline);
    if (left == 0) break;
    Pump(milliseconds(left));
  }
  // Something (a detached grandchild) still holds a pipe: stop reading it.
  for (auto& c : children_) {
    for (int s = 0; s < 2; ++s) {
      if (c->fds[s] < 0) continue;
      Emit(*c, s == 1, c->prefixers[s].Flush());
      CloseFd(c->fds[s]);
    }
  }
}

void Supervisor::StopAll(milliseconds grace) {
  SetStatusLine("");
  stopped_ = true;
  ReapExited();
  if (AnyRunning()) {
    const int signal_before = g_received_signal;
    g_received_signal = 0;
    SignalRunning(SIGTERM);
    const auto deadline = Clock::now() + grace;
    while (AnyRunning() && g_received_signal == 0) {
      int left = MillisLeft(deadline);
      if (left == 0) break;
      Pump(milliseconds(left));
    }
    if (g_received_signal == 0) g_received_signal = signal_before;
    SignalRunning(SIGKILL);
    for (auto& c : children_) {
      if (!c->running) continue;
      int status = 0;
      while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR) {
      }
      c->running = false;
      c->wait_status = status;
    }
  }
  // Whatever the children started in their groups goes too, so no pipe stays held.
  for (auto& c : children_) kill(-c->pid, SIGKILL);
  DrainOutput(milliseconds(500));
}

}  // namespace sieve
