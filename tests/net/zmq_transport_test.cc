// ZmqTransport's two send modes on one connection: a TrySend (the I/O thread's ERROR) racing a
// Send (the owner's replies) to the same peer is not dropped, while a TrySend to a peer whose
// queue is full (a Send waits for space there) is dropped at once.
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

TEST(ZmqTransportTest, ATrySendToAPeerThatDoesNotReadIsDroppedAtOnce) {
  auto receiver = Bound();  // never reads after the first message
  TransportOptions o;
  o.bind_host = "127.0.0.1";
  o.send_timeout = std::chrono::milliseconds(3000);
  auto sender_or = CreateZmqTransport(o);
  ASSERT_TRUE(receiver && sender_or.ok());
  auto& sender = *sender_or;
  ASSERT_TRUE(sender->Connect(1, "127.0.0.1", receiver->port()).ok());
  // Fill the queues (ZeroMQ's high-water marks and the kernel's buffers) with 1 MiB messages.
  const std::string big(1 << 20, 'x');
  int queued = 0;
  while (sender->TrySend(1, One(big)).ok()) {
    ASSERT_LT(++queued, 100000) << "the queue never filled";
  }
  // A Send now waits for space; a TrySend meanwhile gives up at once, not after the Send's wait.
  std::thread waiting([&] { (void)sender->Send(1, One(big)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(sender->TrySend(1, One("error")).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
  waiting.join();
}

}  // namespace
}  // namespace sieve
