#include "worker/trainer/straggler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "base/parse_number.h"
#include "kernels/model/param_init.h"

namespace sieve {
namespace {

// Keeps the exp draws of a straggler apart from every other CounterHash stream of a worker.
constexpr uint64_t kStragglerStream = 0x57a6'6100'0000'0000ULL;

Status BadSpec(std::string_view text, const std::string& why) {
  return InvalidArgumentError("bad straggler spec '" + std::string(text) + "': " + why +
                              " (expected none, delay:T, xF or exp:T with T like 5ms, 200us, 1s)");
}

// A finite number that consumes all of `text`.
bool ParseFinite(std::string_view text, double* out) {
  const std::optional<double> v = ParseNumber<double>(text);
  if (!v || !std::isfinite(*v)) return false;
  *out = *v;
  return true;
}

// "5ms", "200us", "1.5s" -> seconds (>= 0).
bool ParseDuration(std::string_view text, double* seconds) {
  double scale = 1.0;
  if (text.ends_with("us")) {
    scale = 1e-6;
    text.remove_suffix(2);
  } else if (text.ends_with("ms")) {
    scale = 1e-3;
    text.remove_suffix(2);
  } else if (text.ends_with("s")) {
    text.remove_suffix(1);
  } else {
    return false;
  }
  double v = 0.0;
  if (!ParseFinite(text, &v) || v < 0) return false;
  *seconds = v * scale;
  return true;
}

}  // namespace

StatusOr<StragglerSpec> ParseStragglerSpec(std::string_view text) {
  StragglerSpec s;
  s.text = std::string(text);
  if (text == "none") return s;
  if (text.starts_with("x")) {
    if (!ParseFinite(text.substr(1), &s.factor) || s.factor < 1.0) {
      return BadSpec(text, "the factor of xF must be a number >= 1");
    }
    s.kind = StragglerSpec::Kind::kScale;
    return s;
  }
  for (auto [prefix, kind] : {std::pair{std::string_view("delay:"), StragglerSpec::Kind::kDelay},
                              std::pair{std::string_view("exp:"), StragglerSpec::Kind::kExp}}) {
    if (!text.starts_with(prefix)) continue;
    if (!ParseDuration(text.substr(prefix.size()), &s.seconds)) {
      return BadSpec(text, "the time must be a number >= 0 followed by us, ms or s");
    }
    s.kind = kind;
    return s;
  }
  return BadSpec(text, "unknown kind");
}

const StragglerSpec& StragglerPlan::ForRank(int r) const {
  auto it = rank.find(r);
  return it == rank.end() ? every : it->second;
}

Status StragglerPlan::CheckRanks(int workers) const {
  for (const auto& [r, spec] : rank) {
    if (r >= workers) {
      return InvalidArgumentError("--straggler names worker " + std::to_string(r) + " (" +
                                  std::to_string(r) + ":" + spec.text + ") but the job has " +
                                  std::to_string(workers) + " workers (ranks 0.." +
                                  std::to_string(workers - 1) + ")");
    }
  }
  return Status::Ok();
}

StatusOr<StragglerPlan> ParseStragglerPlan(std::string_view text) {
  StragglerPlan plan;
  plan.every.text = "none";
  if (text.empty()) return plan;
  bool have_every = false;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string_view item =
        text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    start = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    const size_t colon = item.find(':');
    std::string_view head = item.substr(0, colon);
    int r = -1;
    const bool ranked = colon != std::string_view::npos && !head.empty() &&
                        head.find_first_not_of("0123456789") == std::string_view::npos;
    if (ranked) {
      const std::optional<int> rank = ParseNumber<int>(head);
      if (!rank) {
        return InvalidArgumentError("bad worker rank '" + std::string(head) + "' in --straggler");
      }
      r = *rank;
    }
    SIEVE_ASSIGN_OR_RETURN(auto spec, ParseStragglerSpec(ranked ? item.substr(colon + 1) : item));
    if (!ranked) {
      if (have_every) {
        return InvalidArgumentError("--straggler '" + std::string(text) +
                                    "' has two specs for every worker; give RANK:SPEC for one");
      }
      have_every = true;
      plan.every = std::move(spec);
    } else if (!plan.rank.emplace(r, std::move(spec)).second) {
      return InvalidArgumentError("--straggler names worker " + std::to_string(r) + " twice");
    }
  }
  return plan;
}

double Straggler::ExtraSeconds(uint64_t round, double measured_compute_s) const {
  switch (spec_.kind) {
    case StragglerSpec::Kind::kNone:
      return 0.0;
    case StragglerSpec::Kind::kDelay:
      return spec_.seconds;
    case StragglerSpec::Kind::kScale:
      return (spec_.factor - 1.0) * std::max(0.0, measured_compute_s);
    case StragglerSpec::Kind::kExp: {
      const uint64_t key = CounterHash(seed_, kStragglerStream + static_cast<uint32_t>(rank_));
      // u in (0, 1] from the top 53 bits: -ln(u) is exponential with mean 1 and never infinite.
      const double u = (static_cast<double>(CounterHash(key, round) >> 11) + 1.0) * 0x1.0p-53;
      return -spec_.seconds * std::log(u);
    }
  }
  return 0.0;
}

double Straggler::Stall(uint64_t round, double measured_compute_s) const {
  if (!spec_.active()) return 0.0;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::this_thread::sleep_for(
      std::chrono::duration<double>(ExtraSeconds(round, measured_compute_s)));
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace sieve
