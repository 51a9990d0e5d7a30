// ZmqTransport's two send modes on one connection: a TrySend (the I/O thread's ERROR) racing a
// Send (the owner's replies) to the same peer is not dropped.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "net/transport.h"

namespace sieve {
namespace {

constexpr std::chrono::milliseconds kWait{5000};

Frames One(const std::string& s) {
  Frames f;
  f.emplace_back(s);
  return f;
}

std::unique_ptr<Transport> Bound() {
  TransportOptions o;
  o.bind_host = "127.0.0.1";
  auto t = CreateZmqTransport(o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t).value() : nullptr;
}

TEST(ZmqTransportTest, ATrySendRacingASendOnTheSameConnectionIsNotDropped) {
  auto receiver = Bound();
  auto sender = Bound();
  ASSERT_TRUE(receiver && sender);
  ASSERT_TRUE(sender->Connect(1, "127.0.0.1", receiver->port()).ok());
  ASSERT_TRUE(sender->Send(1, One("hello")).ok());
  Frames got;
  auto first = receiver->Recv(&got, kWait);
  ASSERT_TRUE(first.ok() && *first);

  constexpr int kEach = 400;  // both within the queues' high-water marks: nothing is full
  std::atomic<int> received{0};
  std::thread reader([&] {
    Frames f;
    while (received.load() < 2 * kEach) {
      auto r = receiver->Recv(&f, kWait);
      if (!r.ok() || !*r) break;
      received.fetch_add(1);
    }
  });
  std::thread replies([&] {
    for (int i = 0; i < kEach; ++i) ASSERT_TRUE(sender->Send(1, One("reply")).ok());
  });
  int dropped = 0;
  for (int i = 0; i < kEach; ++i) dropped += sender->TrySend(1, One("error")).ok() ? 0 : 1;
  replies.join();
  reader.join();
  EXPECT_EQ(dropped, 0) << "TrySend dropped messages while the other sender was only sending";
  EXPECT_EQ(received.load(), 2 * kEach - dropped);
}

}  // namespace
}  // namespace sieve
