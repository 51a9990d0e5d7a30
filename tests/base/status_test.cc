// Status / StatusOr contracts (base/status.h): an OK status cannot pose as a value, reading the
// value of an error aborts, and SIEVE_ASSIGN_OR_RETURN forwards errors and moves values.
#include "base/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <string_view>

namespace sieve {
namespace {

StatusOr<std::unique_ptr<int>> MakeBox(int v) {
  if (v < 0) return InvalidArgumentError("negative: " + std::to_string(v));
  return std::make_unique<int>(v);
}

// Adds 1 to the boxed value; errors pass through unchanged.
StatusOr<int> BoxPlusOne(int v) {
  SIEVE_ASSIGN_OR_RETURN(std::unique_ptr<int> box, MakeBox(v));
  return *box + 1;
}

Status AssignToExisting(int v, int* out) {
  std::unique_ptr<int> box;
  SIEVE_ASSIGN_OR_RETURN(box, MakeBox(v));
  SIEVE_ASSIGN_OR_RETURN(auto again, MakeBox(*box * 2));  // two uses in one scope
  *out = *again;
  return Status::Ok();
}

// Every code has its own name (a code added to the enum needs one in StatusCodeName's table).
TEST(StatusTest, EveryCodeHasADistinctName) {
  std::set<std::string_view> names;
  for (int c = 0; c <= static_cast<int>(StatusCode::kNonFinite); ++c) {
    const std::string_view name = StatusCodeName(static_cast<StatusCode>(c));
    EXPECT_NE(name, "UNKNOWN") << c;
    EXPECT_TRUE(names.insert(name).second) << name;
  }
  EXPECT_EQ(StatusCodeName(StatusCode::kDataLoss), "DATA_LOSS");
  EXPECT_EQ(StatusCodeName(static_cast<StatusCode>(99)), "UNKNOWN");
}

TEST(StatusOrTest, BuiltFromAnOkStatusIsAnInternalError) {
  StatusOr<int> v(Status::Ok());
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInternal);
  EXPECT_NE(v.status().message().find("OK status"), std::string::npos);
}

TEST(StatusOrTest, KeepsTheValueOrTheError) {
  StatusOr<std::string> v(std::string("abc"));
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v.status().ok());
  EXPECT_EQ(*v, "abc");
  EXPECT_EQ(v->size(), 3u);
  StatusOr<std::string> e(NotFoundError("gone"));
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(e.status().message(), "gone");
}

TEST(StatusOrDeathTest, ValueOfAnErrorAbortsNamingTheStatus) {
  StatusOr<int> e(DataLossError("truncated checkpoint"));
  EXPECT_DEATH((void)e.value(), "truncated checkpoint");
  EXPECT_DEATH((void)*e, "DATA_LOSS");
  StatusOr<std::string> s(NotFoundError("nope"));
  EXPECT_DEATH((void)s->size(), "nope");
}

TEST(StatusOrTest, AssignOrReturnForwardsErrorsAndMovesValues) {
  StatusOr<int> ok = BoxPlusOne(41);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 42);
  StatusOr<int> bad = BoxPlusOne(-3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "negative: -3");

  int out = 0;
  ASSERT_TRUE(AssignToExisting(5, &out).ok());
  EXPECT_EQ(out, 10);
  out = 7;
  Status s = AssignToExisting(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, 7);  // untouched on error
}

}  // namespace
}  // namespace sieve
