// InprocNetwork (net/inproc_transport.h): the in-process transport behaves as the contract says:
// ordered delivery, ports bound once, drops counted for absent peers and oversized frames, Close
// wakes a blocked Recv.
#include "net/inproc_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "base/duration.h"

namespace sieve {
namespace {

Frames OneFrame(const std::string& text) {
  Frames f;
  f.emplace_back(text.data(), text.size());
  return f;
}

std::string Text(const Frames& f) {
  return std::string(static_cast<const char*>(f[0].data()), f[0].size());
}

TEST(InprocTransportTest, DeliversInOrderAndBindsEachPortOnce) {
  InprocNetwork net;
  auto a = net.Create({});
  auto b = net.Create({});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->host(), "inproc");
  EXPECT_NE((*a)->port(), (*b)->port());
  TransportOptions same;
  same.port = (*a)->port();
  EXPECT_EQ(net.Create(same).status().code(), StatusCode::kUnavailable);

  EXPECT_EQ((*a)->Send(7, OneFrame("x")).code(), StatusCode::kNotFound);  // never connected
  ASSERT_TRUE((*a)->Connect(7, "inproc", (*b)->port()).ok());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE((*a)->Send(7, OneFrame(std::to_string(i))).ok());
  for (int i = 0; i < 100; ++i) {
    Frames got;
    auto r = (*b)->Recv(&got, std::chrono::milliseconds(1000));
    ASSERT_TRUE(r.ok() && *r);
    EXPECT_EQ(Text(got), std::to_string(i));
  }
  Frames none;
  auto r = (*b)->Recv(&none, std::chrono::milliseconds(10));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);  // timeout
}

TEST(InprocTransportTest, AbsentPeersAndOversizedFramesAreDroppedAndCounted) {
  InprocNetwork net;
  TransportOptions small;
  small.max_message_bytes = 4;
  auto a = net.Create({});
  auto b = net.Create(small);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Connect(1, "inproc", 1).ok());  // nobody holds port 1
  EXPECT_TRUE((*a)->Send(1, OneFrame("lost")).ok());
  ASSERT_TRUE((*a)->Connect(2, "inproc", (*b)->port()).ok());
  EXPECT_TRUE((*a)->Send(2, OneFrame("too long")).ok());
  EXPECT_TRUE((*a)->Send(2, OneFrame("fits")).ok());
  EXPECT_EQ(net.dropped(), 2u);
  Frames got;
  auto r = (*b)->Recv(&got, std::chrono::milliseconds(1000));
  ASSERT_TRUE(r.ok() && *r);
  EXPECT_EQ(Text(got), "fits");
}

TEST(InprocTransportTest, CloseWakesABlockedRecvAndFreesThePort) {
  InprocNetwork net;
  auto a = net.Create({});
  ASSERT_TRUE(a.ok());
  const uint16_t port = (*a)->port();
  Transport* t = a->get();
  std::thread closer([t] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    t->Close();
  });
  Frames got;
  EXPECT_EQ(t->Recv(&got, kForever).status().code(), StatusCode::kAborted);
  closer.join();
  TransportOptions again;
  again.port = port;
  EXPECT_TRUE(net.Create(again).ok());
}

}  // namespace
}  // namespace sieve
