// The worker's periodic progress line, written by sieve-worker (worker/trainer/progress.h) when its
// stdout is not a terminal and read by `sieve launch` (deploy/local/job_progress.h):
//
//   progress: epoch 2/10 round 1234/18740 loss 0.4321 bytes_up 123456
//
// epoch is 1-based (the epoch the round belongs to, of `epochs`); round counts the rounds done of
// `rounds` in the whole run; bytes_up is what this worker pushed so far. FormatProgressLine() and
// ParseProgressLine() are inverses up to the loss's printed precision; a line that is not exactly
// in this form (any other text, a missing or extra field) does not parse.
#ifndef SIEVE_PROTO_PROGRESS_LINE_H_
#define SIEVE_PROTO_PROGRESS_LINE_H_

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace sieve {

struct ProgressPoint {
  uint64_t epoch = 0;  // 1-based
  uint64_t epochs = 0;
  uint64_t round = 0;  // rounds done
  uint64_t rounds = 0;
  double loss = 0;
  uint64_t bytes_up = 0;
};

// "1h02m03s", "4m05s", "7s" (durations in progress displays: the worker's bar, the launcher's ETA).
inline std::string FormatDuration(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  const uint64_t s = static_cast<uint64_t>(seconds + 0.5);
  char buf[64];
  if (s >= 3600) {
    std::snprintf(
        buf, sizeof(buf), "%lluh%02llum%02llus", static_cast<unsigned long long>(s / 3600),
        static_cast<unsigned long long>(s / 60 % 60), static_cast<unsigned long long>(s % 60));
  } else if (s >= 60) {
    std::snprintf(buf, sizeof(buf), "%llum%02llus", static_cast<unsigned long long>(s / 60),
                  static_cast<unsigned long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%llus", static_cast<unsigned long long>(s));
  }
  return buf;
}

inline std::string FormatProgressLine(const ProgressPoint& p) {
  char line[192];
  std::snprintf(line, sizeof(line),
                "progress: epoch %llu/%llu round %llu/%llu loss %.4f bytes_up %llu",
                static_cast<unsigned long long>(p.epoch), static_cast<unsigned long long>(p.epochs),
                static_cast<unsigned long long>(p.round), static_cast<unsigned long long>(p.rounds),
                p.loss, static_cast<unsigned long long>(p.bytes_up));
  return line;
}

inline std::optional<ProgressPoint> ParseProgressLine(std::string_view line) {
  if (!line.starts_with("progress: ") || line.size() >= 192) return std::nullopt;
  const std::string text(line);
  unsigned long long epoch = 0, epochs = 0, round = 0, rounds = 0, bytes = 0;
  double loss = 0;
  int end = -1;
  if (std::sscanf(text.c_str(),
                  "progress: epoch %llu/%llu round %llu/%llu loss %lf bytes_up %llu%n", &epoch,
                  &epochs, &round, &rounds, &loss, &bytes, &end) != 6 ||
      end != static_cast<int>(text.size())) {
    return std::nullopt;
  }
  return ProgressPoint{epoch, epochs, round, rounds, loss, bytes};
}

}  // namespace sieve

#endif  // SIEVE_PROTO_PROGRESS_LINE_H_
