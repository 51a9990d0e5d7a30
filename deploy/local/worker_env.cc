#include "deploy/local/worker_env.h"

#include <algorithm>
#include <set>

namespace sieve {

const char* const kWorkerEnvNames[11] = {
    "SIEVE_SCHEDULER", "SIEVE_RANK",         "SIEVE_NUM_WORKERS",    "SIEVE_NUM_SERVERS",
    "SIEVE_BIND",      "SIEVE_HOST",         "SIEVE_JOB_TOKEN_FILE", "SIEVE_CURVE_DIR",
    "SIEVE_CURVE_KEY", "SIEVE_METRICS_PORT", "SIEVE_WORKER_FLAGS"};

std::vector<std::string> WorkerEnvironment(const WorkerJob& job, int rank) {
  std::vector<std::string> env;
  std::set<std::string> set;
  auto add = [&](const std::string& name, const std::string& value) {
    env.push_back(name + "=" + value);
    set.insert(name);
  };
  add("SIEVE_SCHEDULER", job.scheduler);
  add("SIEVE_RANK", std::to_string(rank));
  add("SIEVE_NUM_WORKERS", std::to_string(job.num_workers));
  add("SIEVE_NUM_SERVERS", std::to_string(job.num_servers));
  add("SIEVE_BIND", job.bind);
  add("SIEVE_HOST", job.host);
  if (!job.job_token_file.empty()) add("SIEVE_JOB_TOKEN_FILE", job.job_token_file);
  if (!job.curve_dir.empty()) add("SIEVE_CURVE_DIR", job.curve_dir);
  if (rank >= 0 && static_cast<size_t>(rank) < job.curve_keys.size()) {
    add("SIEVE_CURVE_KEY", job.curve_keys[rank]);
  }
  if (rank >= 0 && static_cast<size_t>(rank) < job.metrics_ports.size()) {
    add("SIEVE_METRICS_PORT", std::to_string(job.metrics_ports[rank]));
  }
  add("SIEVE_WORKER_FLAGS", JoinShellWords(job.worker_flags));
  if (!job.python_path.empty()) env.push_back("PYTHONPATH=" + job.python_path);
  for (const char* name : kWorkerEnvNames) {
    if (!set.count(name)) env.push_back(name);  // unset: never inherited from the launcher
  }
  return env;
}

std::string ShellQuote(std::string_view word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
  });
  if (plain) return std::string(word);
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

std::string JoinShellWords(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out.push_back(' ');
    out += ShellQuote(w);
  }
  return out;
}

}  // namespace sieve
