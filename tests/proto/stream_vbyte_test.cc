// proto/stream_vbyte against Debian's libstreamvbyte (the format's reference implementation):
// the same bytes for the same list, on the vector and the scalar paths, and back.
#include "proto/stream_vbyte.h"

#include <gtest/gtest.h>
#include <streamvbyte.h>
#include <streamvbytedelta.h>

#include <random>
#include <vector>

namespace sieve {
namespace {

// Ascending lists (wrap-around gaps included: the coding takes any list) of every shape the
// vector loop and its scalar tail meet: lengths 0..70 and large, gaps of 1-4 bytes mixed.
std::vector<std::vector<uint32_t>> Lists() {
  std::mt19937_64 rng(11);
  std::vector<std::vector<uint32_t>> lists;
  for (size_t n : {0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 70, 1000, 100003}) {
    for (int shape = 0; shape < 5; ++shape) {
      std::vector<uint32_t> v(n);
      uint32_t x = 0;
      for (size_t j = 0; j < n; ++j) {
        uint32_t gap = 0;
        switch (shape) {
          case 0:
            gap = 1;
            break;  // a run
          case 1:
            gap = 1 + static_cast<uint32_t>(rng() % 255);
            break;  // 1 byte
          case 2:
            gap = static_cast<uint32_t>(rng() >> (8 * (rng() % 4)));
            break;  // 1-4 bytes
          case 3:
            gap = 0xFFFFFFFFu - static_cast<uint32_t>(rng() % 3);
            break;  // maximal
          default:
            gap = static_cast<uint32_t>(rng());
            break;
        }
        x += gap;
        v[j] = x;
      }
      lists.push_back(std::move(v));
    }
  }
  return lists;
}

TEST(StreamVByteTest, SameBytesAsTheLibraryAndBack) {
  for (const auto& v : Lists()) {
    const uint32_t n = static_cast<uint32_t>(v.size());
    std::vector<uint8_t> ref(streamvbyte_max_compressedbytes(n) + 16);
    const size_t ref_size = streamvbyte_delta_encode(v.data(), n, ref.data(), 0);
    ref.resize(ref_size);
    for (bool vector_path : {true, false}) {
      std::vector<uint8_t> ours(SvbEncodeBound(n));
      const size_t size = vector_path ? SvbDeltaEncode(v.data(), n, ours.data())
                                      : SvbDeltaEncodeScalar(v.data(), n, ours.data());
      ours.resize(size);
      ASSERT_EQ(ours, ref) << "n=" << n << " vector=" << vector_path;
      size_t announced = SvbAnnouncedBytes(ours.data(), n);
      if (n % 4 != 0) announced -= 4 - n % 4;
      EXPECT_EQ(announced, size);
      // Decoded from an exact-size heap copy: a read past the end would be an ASan/valgrind
      // error and, on the vector path, reads past `size` are what the loop must not do.
      std::unique_ptr<uint8_t[]> exact(new uint8_t[std::max<size_t>(size, 1)]);
      std::copy(ours.begin(), ours.end(), exact.get());
      std::vector<uint32_t> back(n + 1, 0xDEADBEEFu);
      if (vector_path) {
        SvbDeltaDecode(exact.get(), size, n, back.data());
      } else {
        SvbDeltaDecodeScalar(exact.get(), size, n, back.data());
      }
      EXPECT_EQ(back[n], 0xDEADBEEFu) << "wrote past n";
      back.resize(n);
      ASSERT_EQ(back, v) << "n=" << n << " vector=" << vector_path;
      // The library decodes ours.
      std::vector<uint32_t> lib(n);
      EXPECT_EQ(streamvbyte_delta_decode(ref.data(), lib.data(), n, 0), ref_size);
      EXPECT_EQ(lib, v);
    }
  }
}

}  // namespace
}  // namespace sieve
