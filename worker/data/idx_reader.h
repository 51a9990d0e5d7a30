// Readers for the IDX files of (Fashion-)MNIST, gzip-compressed or not (zlib reads both).
//
// IDX layout: big-endian u32 magic (0x00000803 for 3-d u8 images, 0x00000801 for 1-d u8 labels),
// then one big-endian u32 per dimension, then the u8 data, row-major. Every problem a file can have
// is returned as a Status, never a crash:
//   NotFound       the file does not exist or cannot be opened
//   DataLoss       gzip stream corrupt, or fewer bytes than the header promises (truncated)
//   InvalidArgument wrong magic number, or trailing bytes after the data
// Thread-safety: free functions without shared state; safe to call concurrently.
#ifndef SIEVE_WORKER_DATA_IDX_READER_H_
#define SIEVE_WORKER_DATA_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace sieve {

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;

// The raw u8 pixels of an images file: count x rows x cols, row-major, one byte per pixel.
struct IdxImages {
  int64_t count = 0;
  int rows = 0;
  int cols = 0;
  std::vector<uint8_t> pixels;
};

// The whole (decompressed) contents of `path`. Plain files are returned as they are.
StatusOr<std::vector<uint8_t>> ReadMaybeGzipFile(const std::string& path);

// An IDX images file (magic 0x803, 3 dimensions).
StatusOr<IdxImages> ReadIdxImages(const std::string& path);

// An IDX labels file (magic 0x801, 1 dimension): one byte per example. Values are not range
// checked here (see LoadDataset).
StatusOr<std::vector<uint8_t>> ReadIdxLabels(const std::string& path);

}  // namespace sieve

#endif  // SIEVE_WORKER_DATA_IDX_READER_H_
