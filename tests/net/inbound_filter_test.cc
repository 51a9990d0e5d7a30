// InboundFilter: which messages the node runtime and the scheduler drop before believing them,
// and what each drop counts. The cases are the codec's outcomes crossed with the key check.
#include "net/inbound_filter.h"

#include <gtest/gtest.h>

#include "net/rejection_log.h"

namespace sieve {
namespace {

pb::Header HeaderFrom(int sender, pb::MsgType type) {
  pb::Header h;
  h.set_sender(sender);
  h.set_type(type);
  return h;
}

class InboundFilterTest : public ::testing::Test {
 protected:
  // The filter's counts of dropped messages so far.
  void ExpectCounted(uint64_t foreign, uint64_t impostors) {
    EXPECT_EQ(f_.foreign(), foreign);
    EXPECT_EQ(f_.impostors(), impostors);
  }

  RejectionLog log_;
  InboundFilter f_{&log_};
};

TEST_F(InboundFilterTest, AMessageOfAnotherJobIsDroppedAndCountedAsForeign) {
  const Status bad = InvalidArgumentError("job digest does not match");
  // Dropped whether or not its key matches: nothing in a foreign message is believed.
  EXPECT_FALSE(f_.Admit(HeaderFrom(3, pb::MSG_PUSH), pb::ERROR_FOREIGN_JOB, bad, true));
  EXPECT_FALSE(f_.Admit(HeaderFrom(3, pb::MSG_REGISTER), pb::ERROR_FOREIGN_JOB, bad, false));
  ExpectCounted(2u, 0u);
}

TEST_F(InboundFilterTest, AKeySpeakingForAnotherNodeIsDroppedAndCountedAsImpostor) {
  EXPECT_FALSE(f_.Admit(HeaderFrom(0, pb::MSG_NODE_TABLE), pb::ERROR_NONE, Status::Ok(), false));
  // A message that failed to decode for another reason is still an impostor's.
  EXPECT_FALSE(f_.Admit(HeaderFrom(2, pb::MSG_PUSH), pb::ERROR_BAD_COUNT,
                        InvalidArgumentError("count"), false));
  ExpectCounted(0u, 2u);
}

TEST_F(InboundFilterTest, EverythingElsePassesDecodeErrorsIncludedAndCountsNothing) {
  EXPECT_TRUE(f_.Admit(HeaderFrom(2, pb::MSG_PUSH), pb::ERROR_NONE, Status::Ok(), true));
  // The owner answers a decode error with an ERROR: the filter lets it through.
  EXPECT_TRUE(f_.Admit(HeaderFrom(2, pb::MSG_PUSH), pb::ERROR_INDEX_ORDER,
                       InvalidArgumentError("indices not ascending"), true));
  ExpectCounted(0u, 0u);
}

TEST_F(InboundFilterTest, AnotherInstanceOfThisJobCountsAsForeign) {
  for (int i = 0; i < 1000; ++i) f_.DropOtherInstance(HeaderFrom(0, pb::MSG_NODE_TABLE));
  ExpectCounted(1000u, 0u);
}

}  // namespace
}  // namespace sieve
