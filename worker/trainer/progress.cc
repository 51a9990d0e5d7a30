#include "worker/trainer/progress.h"

#include <glog/logging.h>

#include <cstdio>

namespace sieve {

std::string FormatDuration(double seconds) {
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

ProgressReporter::ProgressReporter(bool tty, uint64_t total_rounds)
    : tty_(tty), total_(total_rounds), start_(Clock::now()), last_draw_(start_) {}

void ProgressReporter::Round(uint64_t done, double loss) {
  if (!tty_) return;
  const auto now = Clock::now();
  if (drawn_ && done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drawn_ = true;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double frac = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  const double eta =
      done ? elapsed / static_cast<double>(done) * static_cast<double>(total_ - done) : 0.0;
  constexpr int kWidth = 30;
  std::string bar(kWidth, ' ');
  for (int i = 0; i < static_cast<int>(frac * kWidth); ++i) bar[i] = '=';
  std::printf("\r[%s] %llu/%llu %3.0f%% loss %.4f ETA %s   ", bar.c_str(),
              static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
              100.0 * frac, loss, FormatDuration(eta).c_str());
  std::fflush(stdout);
}

void ProgressReporter::EndEpoch(uint64_t epoch, double mean_loss, std::optional<double> test_acc,
                                uint64_t bytes_up_total, double selected_per_round) {
  char acc[32] = "-";
  if (test_acc) std::snprintf(acc, sizeof(acc), "%.4f", *test_acc);
  char line[256];
  std::snprintf(line, sizeof(line),
                "epoch %llu: loss %.4f test_acc %s bytes_up %llu selected/round %.1f",
                static_cast<unsigned long long>(epoch), mean_loss, acc,
                static_cast<unsigned long long>(bytes_up_total), selected_per_round);
  if (tty_) {
    std::printf("\r\033[K%s\n", line);
    std::fflush(stdout);
    drawn_ = false;
  } else {
    LOG(INFO) << line;
  }
}

void ProgressReporter::Finish() {
  if (tty_ && drawn_) {
    std::printf("\n");
    std::fflush(stdout);
  }
  drawn_ = false;
}

}  // namespace sieve
