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

TEST(InboundFilterTest, AMessageOfAnotherJobIsDroppedAndCountedAsForeign) {
  RejectionLog log;
  InboundFilter f(&log);
  const Status bad = InvalidArgumentError("job digest does not match");
  // Dropped whether or not its key matches: nothing in a foreign message is believed.
  EXPECT_FALSE(f.Admit(HeaderFrom(3, pb::MSG_PUSH), pb::ERROR_FOREIGN_JOB, bad, true));
  EXPECT_FALSE(f.Admit(HeaderFrom(3, pb::MSG_REGISTER), pb::ERROR_FOREIGN_JOB, bad, false));
  EXPECT_EQ(f.foreign(), 2u);
  EXPECT_EQ(f.impostors(), 0u);
}

TEST(InboundFilterTest, AKeySpeakingForAnotherNodeIsDroppedAndCountedAsImpostor) {
  RejectionLog log;
  InboundFilter f(&log);
  EXPECT_FALSE(f.Admit(HeaderFrom(0, pb::MSG_NODE_TABLE), pb::ERROR_NONE, Status::Ok(), false));
  // A message that failed to decode for another reason is still an impostor's.
  EXPECT_FALSE(f.Admit(HeaderFrom(2, pb::MSG_PUSH), pb::ERROR_BAD_COUNT,
                       InvalidArgumentError("count"), false));
  EXPECT_EQ(f.impostors(), 2u);
  EXPECT_EQ(f.foreign(), 0u);
}

TEST(InboundFilterTest, EverythingElsePassesDecodeErrorsIncludedAndCountsNothing) {
  RejectionLog log;
  InboundFilter f(&log);
  EXPECT_TRUE(f.Admit(HeaderFrom(2, pb::MSG_PUSH), pb::ERROR_NONE, Status::Ok(), true));
  // The owner answers a decode error with an ERROR: the filter lets it through.
  EXPECT_TRUE(f.Admit(HeaderFrom(2, pb::MSG_PUSH), pb::ERROR_INDEX_ORDER,
                      InvalidArgumentError("indices not ascending"), true));
  EXPECT_EQ(f.foreign(), 0u);
  EXPECT_EQ(f.impostors(), 0u);
}

TEST(InboundFilterTest, AnotherInstanceOfThisJobCountsAsForeign) {
  RejectionLog log;
  InboundFilter f(&log);
  for (int i = 0; i < 1000; ++i) f.DropOtherInstance(HeaderFrom(0, pb::MSG_NODE_TABLE));
  EXPECT_EQ(f.foreign(), 1000u);
  EXPECT_EQ(f.impostors(), 0u);
}

}  // namespace
}  // namespace sieve
