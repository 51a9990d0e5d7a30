#include "worker/trainer/straggler.h"

#include <gtest/gtest.h>

#include <cmath>

namespace sieve {
namespace {

using Kind = StragglerSpec::Kind;

TEST(WorkerTrainerStraggler, ParsesEveryKindAndUnit) {
  struct Case {
    const char* text;
    Kind kind;
    double seconds, factor;
  };
  for (const Case& c :
       {Case{"none", Kind::kNone, 0.0, 1.0}, Case{"delay:5ms", Kind::kDelay, 0.005, 1.0},
        Case{"delay:250us", Kind::kDelay, 250e-6, 1.0}, Case{"exp:1.5s", Kind::kExp, 1.5, 1.0},
        Case{"x3", Kind::kScale, 0.0, 3.0}, Case{"x1.25", Kind::kScale, 0.0, 1.25}}) {
    auto spec = ParseStragglerSpec(c.text);
    ASSERT_TRUE(spec.ok()) << c.text << ": " << spec.status().message();
    EXPECT_EQ(spec->kind, c.kind) << c.text;
    EXPECT_DOUBLE_EQ(spec->seconds, c.seconds) << c.text;
    EXPECT_DOUBLE_EQ(spec->factor, c.factor) << c.text;
    EXPECT_EQ(spec->text, c.text);
    EXPECT_EQ(spec->active(), c.kind != Kind::kNone);
  }
}

TEST(WorkerTrainerStraggler, RejectsBadSpecsNamingThem) {
  for (const char* bad : {"", "slow", "x", "x0.5", "xx3", "x3ms", "delay:5", "delay:-1ms",
                          "delay:ms", "exp:", "exp:5m", "delay:5ms:1", "delay:nanms", "3"}) {
    auto spec = ParseStragglerSpec(bad);
    ASSERT_FALSE(spec.ok()) << bad;
    std::string quoted = "'";
    quoted.append(bad).append("'");
    EXPECT_NE(spec.status().message().find(quoted), std::string::npos) << spec.status().message();
  }
}

TEST(WorkerTrainerStraggler, PlanGivesEachRankItsSpec) {
  auto plan = ParseStragglerPlan("exp:2ms,0:none,3:x3");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->ForRank(0).kind, Kind::kNone);
  EXPECT_EQ(plan->ForRank(1).kind, Kind::kExp);
  EXPECT_EQ(plan->ForRank(2).kind, Kind::kExp);
  EXPECT_EQ(plan->ForRank(3).kind, Kind::kScale);
  EXPECT_TRUE(plan->CheckRanks(4).ok());
  Status too_few = plan->CheckRanks(3);
  ASSERT_FALSE(too_few.ok());
  EXPECT_NE(too_few.message().find("worker 3 (3:x3)"), std::string::npos) << too_few.message();

  auto empty = ParseStragglerPlan("");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->ForRank(0).active());
  auto one = ParseStragglerPlan("1:delay:5ms");
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->ForRank(0).active());
  EXPECT_DOUBLE_EQ(one->ForRank(1).seconds, 0.005);
}

TEST(WorkerTrainerStraggler, PlanRejectsDuplicatesAndBadItems) {
  for (const char* bad : {"1:x3,1:x2", "x2,x3", "1:slow", "1:", ",", "x3,", "-1:x3"}) {
    EXPECT_FALSE(ParseStragglerPlan(bad).ok()) << bad;
  }
  auto bad = ParseStragglerPlan("0:none,2:x0.5");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'x0.5'"), std::string::npos);
}

TEST(WorkerTrainerStraggler, FixedAndScaledExtraTime) {
  Straggler delay(*ParseStragglerSpec("delay:5ms"), 1, 0);
  EXPECT_DOUBLE_EQ(delay.ExtraSeconds(0, 0.1), 0.005);
  EXPECT_DOUBLE_EQ(delay.ExtraSeconds(7, 0.0), 0.005);
  Straggler x3(*ParseStragglerSpec("x3"), 1, 0);
  EXPECT_DOUBLE_EQ(x3.ExtraSeconds(0, 0.004), 0.008);  // 3 × 4 ms in all
  Straggler none(*ParseStragglerSpec("none"), 1, 0);
  EXPECT_EQ(none.ExtraSeconds(3, 1.0), 0.0);
}

TEST(WorkerTrainerStraggler, ExpDrawsAreReproducibleAndHaveTheStatedMean) {
  const StragglerSpec spec = *ParseStragglerSpec("exp:5ms");
  Straggler a(spec, 7, 2), again(spec, 7, 2), other_rank(spec, 7, 3), other_seed(spec, 8, 2);
  int differ_rank = 0, differ_seed = 0;
  double sum = 0.0, sum_sq = 0.0;
  constexpr int kN = 200000;
  for (int t = 0; t < kN; ++t) {
    const double x = a.ExtraSeconds(t, 0.0);
    ASSERT_EQ(x, again.ExtraSeconds(t, 0.0));
    ASSERT_GE(x, 0.0);
    ASSERT_TRUE(std::isfinite(x));
    differ_rank += x != other_rank.ExtraSeconds(t, 0.0);
    differ_seed += x != other_seed.ExtraSeconds(t, 0.0);
    sum += x;
    sum_sq += x * x;
  }
  EXPECT_GT(differ_rank, kN * 0.99);
  EXPECT_GT(differ_seed, kN * 0.99);
  // Exponential(mean 5 ms): mean 5 ms and standard deviation 5 ms; the sample mean of 2e5 draws
  // has a standard error of 5 ms / sqrt(2e5) ≈ 0.011 ms (0.2 %): a 1 % tolerance is 4.5 sigma.
  const double mean = sum / kN;
  EXPECT_NEAR(mean, 0.005, 0.005 * 0.01);
  const double sd = std::sqrt(sum_sq / kN - mean * mean);
  EXPECT_NEAR(sd, 0.005, 0.005 * 0.03);
}

}  // namespace
}  // namespace sieve
