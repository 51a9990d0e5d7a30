// proto/error_code.h: every wire code of the schema is an error Status carrying it, in the
// category docs/protocol.md ("Errors") lists for it (restated here by hand as the reference);
// codes this build does not know and statuses no peer caused carry none.
#include "proto/error_code.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace sieve {
namespace {

// docs/protocol.md, "Errors": the category of each code, by number.
std::map<int, StatusCode> Documented() {
  std::map<int, StatusCode> m;
  for (int c : {1, 3, 4, 5, 7, 8, 11, 14, 17, 22, 27}) m[c] = StatusCode::kInvalidArgument;
  for (int c : {6, 16, 18}) m[c] = StatusCode::kOutOfRange;
  m[10] = StatusCode::kDataLoss;
  for (int c : {12, 13, 20}) m[c] = StatusCode::kAlreadyExists;
  for (int c : {2, 9, 15, 19, 21, 23, 24, 25, 26}) m[c] = StatusCode::kFailedPrecondition;
  return m;
}

TEST(ErrorCodeTest, EveryCodeOfTheSchemaIsItsDocumentedCategory) {
  const std::map<int, StatusCode> documented = Documented();
  const google::protobuf::EnumDescriptor* d = pb::ErrorCode_descriptor();
  std::set<int> seen;
  for (int i = 0; i < d->value_count(); ++i) {
    const auto code = static_cast<pb::ErrorCode>(d->value(i)->number());
    if (code == pb::ERROR_NONE) continue;
    seen.insert(code);
    ASSERT_TRUE(documented.count(code)) << d->value(i)->name() << " is not documented";
    EXPECT_EQ(StatusCodeOf(code), documented.at(code)) << d->value(i)->name();
    const Status s = WireError(code, "why");
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.code(), documented.at(code)) << d->value(i)->name();
    EXPECT_EQ(WireCodeOf(s), code);
    EXPECT_TRUE(HasWireCode(s, code));
    EXPECT_EQ(s.message(), d->value(i)->name() + ": why");
  }
  EXPECT_EQ(seen.size(), documented.size()) << "a documented code left the schema";
}

TEST(ErrorCodeTest, NoneIsOkAndOtherStatusesCarryNoCode) {
  EXPECT_EQ(StatusCodeOf(pb::ERROR_NONE), StatusCode::kOk);
  EXPECT_TRUE(WireError(pb::ERROR_NONE, "x").ok());
  EXPECT_EQ(WireCodeOf(Status::Ok()), pb::ERROR_NONE);
  const Status local = FailedPreconditionError("a local refusal");
  EXPECT_EQ(WireCodeOf(local), pb::ERROR_NONE);
  EXPECT_FALSE(HasWireCode(local, pb::ERROR_UNKNOWN_ROUND));
  // An OK status takes no code.
  EXPECT_EQ(Status::Ok().WithWireCode(pb::ERROR_UNKNOWN_ROUND).wire_code(), 0);
}

TEST(ErrorCodeTest, ACodeFromANewerPeerIsAFailedPreconditionWithoutAName) {
  const auto future = static_cast<pb::ErrorCode>(999);
  EXPECT_EQ(StatusCodeOf(future), StatusCode::kFailedPrecondition);
  // Kept as received, but not a code this build can name.
  const Status s = FailedPreconditionError("x").WithWireCode(999);
  EXPECT_EQ(s.wire_code(), 999);
  EXPECT_EQ(WireCodeOf(s), pb::ERROR_NONE);
}

TEST(ErrorCodeTest, PrefixedKeepsTheCodes) {
  const Status s = WireError(pb::ERROR_JOIN_TOO_LATE, "round 7 passed").Prefixed("rejoin: ");
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(WireCodeOf(s), pb::ERROR_JOIN_TOO_LATE);
  EXPECT_EQ(s.message(), "rejoin: ERROR_JOIN_TOO_LATE: round 7 passed");
  EXPECT_TRUE(Status::Ok().Prefixed("x").ok());
}

}  // namespace
}  // namespace sieve
