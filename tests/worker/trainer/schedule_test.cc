#include "worker/trainer/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "worker/data/partition.h"
#include "worker/trainer/trainer_options.h"

namespace sieve {
namespace {

TEST(WorkerTrainerSchedule, ConstantLearningRateWithoutWarmupOrSteps) {
  TrainerOptions o;
  o.lr = 0.05;
  for (uint64_t t : {0u, 1u, 99u, 10000u}) EXPECT_DOUBLE_EQ(LearningRate(o, t, 100), 0.05);
}

TEST(WorkerTrainerSchedule, LinearWarmupThenSteps) {
  TrainerOptions o;
  o.lr = 0.1;
  o.lr_warmup_epochs = 2;
  o.lr_steps = {3, 5};
  o.lr_gamma = 0.5;
  const int64_t spe = 10;  // warm-up T = 20 rounds
  EXPECT_DOUBLE_EQ(LearningRate(o, 0, spe), 0.1 * 1 / 20);
  EXPECT_DOUBLE_EQ(LearningRate(o, 9, spe), 0.1 * 10 / 20);
  EXPECT_DOUBLE_EQ(LearningRate(o, 19, spe), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(o, 20, spe), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(o, 29, spe), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(o, 30, spe), 0.05);   // epoch 3
  EXPECT_DOUBLE_EQ(LearningRate(o, 49, spe), 0.05);   // epoch 4
  EXPECT_DOUBLE_EQ(LearningRate(o, 50, spe), 0.025);  // epoch 5
  EXPECT_DOUBLE_EQ(LearningRate(o, 500, spe), 0.025);
}

TEST(WorkerTrainerSchedule, FractionalWarmupRoundsToWholeRounds) {
  TrainerOptions o;
  o.lr = 1.0;
  o.lr_warmup_epochs = 0.25;  // 0.25 * 10 = 2.5 -> 3 rounds (round half away from zero)
  EXPECT_DOUBLE_EQ(LearningRate(o, 0, 10), 1.0 / 3);
  EXPECT_DOUBLE_EQ(LearningRate(o, 2, 10), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(o, 3, 10), 1.0);
}

TEST(WorkerTrainerSchedule, DensityWarmupPerEpoch) {
  TrainerOptions o;
  o.density = 0.001;
  EXPECT_DOUBLE_EQ(DensityForEpoch(o, 0), 0.001);
  o.density_warmup = {0.015625, 0.004};
  EXPECT_DOUBLE_EQ(DensityForEpoch(o, 0), 0.015625);
  EXPECT_DOUBLE_EQ(DensityForEpoch(o, 1), 0.004);
  EXPECT_DOUBLE_EQ(DensityForEpoch(o, 2), 0.001);
  EXPECT_DOUBLE_EQ(DensityForEpoch(o, 77), 0.001);
}

TEST(WorkerTrainerSchedule, StepsPerEpochUsesTheSmallestPartition) {
  EXPECT_EQ(*StepsPerEpoch(60000, 4, 32), 15000 / 32);
  // 10 examples over 3 ranks: partitions 4, 3, 3 -> floor(3 / 2) = 1 step for everyone.
  EXPECT_EQ(*StepsPerEpoch(10, 3, 2), 1);
  EXPECT_EQ(*StepsPerEpoch(5, 8, 1), 0);
  EXPECT_FALSE(StepsPerEpoch(10, 0, 1).ok());
  EXPECT_FALSE(StepsPerEpoch(10, 1, 0).ok());
  EXPECT_FALSE(StepsPerEpoch(-1, 1, 1).ok());
}

TEST(WorkerTrainerSchedule, EveryRankGetsTheSameNumberOfBatchesFromItsOwnPartition) {
  for (int world : {1, 2, 3, 4, 7}) {
    const int64_t n = 1003;
    const int batch = 16;
    const int64_t steps = *StepsPerEpoch(n, world, batch);
    std::set<int64_t> seen;
    for (int rank = 0; rank < world; ++rank) {
      auto order = EpochBatchOrder(n, rank, world, batch, 42, 3);
      ASSERT_TRUE(order.ok());
      EXPECT_EQ(static_cast<int64_t>(order->size()), steps * batch);
      IndexRange range = *PartitionRange(n, rank, world);
      for (int64_t i : *order) {
        EXPECT_GE(i, range.lo);
        EXPECT_LT(i, range.hi);
        EXPECT_TRUE(seen.insert(i).second) << "index " << i << " visited twice";
      }
    }
  }
}

TEST(WorkerTrainerSchedule, BatchOrderIsDeterministicAndChangesWithEpoch) {
  auto a = *EpochBatchOrder(6000, 1, 2, 32, 7, 0);
  auto b = *EpochBatchOrder(6000, 1, 2, 32, 7, 0);
  auto c = *EpochBatchOrder(6000, 1, 2, 32, 7, 1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::sort(a.begin(), a.end());
  std::sort(c.begin(), c.end());
  EXPECT_EQ(a.size(), 2976u);  // 93 batches of 32 out of 3000
}

TEST(WorkerTrainerOptions, DefaultsAreValid) {
  EXPECT_TRUE(ValidateTrainerOptions(TrainerOptions{}).ok());
}

TEST(WorkerTrainerOptions, DefaultLearningRateShrinksWithDensityForRandomkOnly) {
  for (Compressor c : {Compressor::kNone, Compressor::kTopk, Compressor::kGaussiank,
                       Compressor::kGaussiankPaper, Compressor::kDgc}) {
    EXPECT_EQ(DefaultLearningRate(c, 0.001), 0.05);
  }
  EXPECT_DOUBLE_EQ(DefaultLearningRate(Compressor::kRandomk, 0.001), 0.025 * std::sqrt(0.001));
  EXPECT_DOUBLE_EQ(DefaultLearningRate(Compressor::kRandomk, 0.04), 0.005);
  EXPECT_EQ(DefaultLearningRate(Compressor::kRandomk, 1.0), 0.025);
  // A density the validator will reject does not produce a NaN rate first.
  EXPECT_EQ(DefaultLearningRate(Compressor::kRandomk, 0.0), 0.05);
  EXPECT_EQ(DefaultLearningRate(Compressor::kRandomk, std::nan("")), 0.05);
}

TEST(WorkerTrainerOptions, RejectsBadValuesNamingTheFlag) {
  struct Case {
    void (*mutate)(TrainerOptions*);
    const char* flag;
  };
  const Case cases[] = {
      {[](TrainerOptions* o) { o->model = "resnet"; }, "--model"},
      {[](TrainerOptions* o) { o->model = "synthetic"; }, "--num_params"},
      {[](TrainerOptions* o) { o->batch_size = 0; }, "--batch_size"},
      {[](TrainerOptions* o) { o->epochs = 0; }, "--epochs"},
      {[](TrainerOptions* o) { o->lr = -0.1; }, "--lr"},
      {[](TrainerOptions* o) { o->momentum = 1.0; }, "--momentum"},
      {[](TrainerOptions* o) { o->weight_decay = -1; }, "--weight_decay"},
      {[](TrainerOptions* o) { o->lr_warmup_epochs = -1; }, "--lr_warmup_epochs"},
      {[](TrainerOptions* o) {
         o->lr_steps = {5, 3};
       },
       "--lr_steps"},
      {[](TrainerOptions* o) { o->lr_gamma = 0; }, "--lr_gamma"},
      {[](TrainerOptions* o) { o->density = 0; }, "--density"},
      {[](TrainerOptions* o) { o->density = 1.5; }, "--density"},
      {[](TrainerOptions* o) {
         o->density_warmup = {0.5, 2.0};
       },
       "--density_warmup"},
      {[](TrainerOptions* o) { o->device = "tpu"; }, "--device"},
      {[](TrainerOptions* o) { o->eval_every = -1; }, "--eval_every"},
      {[](TrainerOptions* o) { o->metrics_every = 0; }, "--metrics_every"},
      {[](TrainerOptions* o) { o->contraction_every = -2; }, "--contraction_every"},
      {[](TrainerOptions* o) { o->barrier_probe = -1; }, "--barrier_probe"},
  };
  for (const Case& c : cases) {
    TrainerOptions o;
    c.mutate(&o);
    Status s = ValidateTrainerOptions(o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.flag;
    EXPECT_NE(s.message().find(c.flag), std::string::npos) << s.message();
  }
  TrainerOptions synthetic;
  synthetic.model = "synthetic";
  synthetic.num_params = 1000;
  EXPECT_TRUE(ValidateTrainerOptions(synthetic).ok());
  synthetic.rounds_per_epoch = 0;
  EXPECT_FALSE(ValidateTrainerOptions(synthetic).ok());
}

TEST(WorkerTrainerOptions, ParsesLists) {
  EXPECT_TRUE(ParseDoubleList("")->empty());
  EXPECT_EQ(*ParseDoubleList("0.015625,0.004"), (std::vector<double>{0.015625, 0.004}));
  EXPECT_EQ(*ParseIntList("30,60,90"), (std::vector<int>{30, 60, 90}));
  for (const char* bad : {",", "1,", ",1", "1,,2", "a", "1 ,2", "0.5x", "1;2"}) {
    EXPECT_EQ(ParseDoubleList(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(ParseIntList("1.5").ok());
  EXPECT_TRUE(ParseGradDist("laplace").ok());
  EXPECT_FALSE(ParseGradDist("cauchy").ok());
}

}  // namespace
}  // namespace sieve
