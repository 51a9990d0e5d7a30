#include "worker/trainer/progress.h"

#include <glog/logging.h>

#include <cstdio>

namespace sieve {

ProgressReporter::ProgressReporter(bool tty, uint64_t total_rounds, uint64_t rounds_per_epoch)
    : tty_(tty),
      total_(total_rounds),
      per_epoch_(rounds_per_epoch == 0 ? 1 : rounds_per_epoch),
      start_(Clock::now()),
      last_draw_(start_) {}

void ProgressReporter::Round(uint64_t done, double loss, uint64_t bytes_up) {
  const auto now = Clock::now();
  if (!tty_) {
    if (drawn_ && done < total_ && now - last_draw_ < std::chrono::seconds(1)) return;
    last_draw_ = now;
    drawn_ = true;
    ProgressPoint p;
    p.epoch = done == 0 ? 1 : (done - 1) / per_epoch_ + 1;
    p.epochs = (total_ + per_epoch_ - 1) / per_epoch_;
    p.round = done;
    p.rounds = total_;
    p.loss = loss;
    p.bytes_up = bytes_up;
    std::printf("%s\n", FormatProgressLine(p).c_str());
    std::fflush(stdout);
    return;
  }
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
                "epoch %llu/%llu: loss %.4f test_acc %s bytes_up %llu selected/round %.1f",
                static_cast<unsigned long long>(epoch + 1),
                static_cast<unsigned long long>((total_ + per_epoch_ - 1) / per_epoch_), mean_loss,
                acc, static_cast<unsigned long long>(bytes_up_total), selected_per_round);
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
