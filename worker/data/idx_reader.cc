#include "worker/data/idx_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

namespace sieve {
namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Checks the magic and the number of dimensions, and that exactly the promised data follows.
// Returns the dimensions.
StatusOr<std::vector<uint32_t>> ParseHeader(const std::string& path,
                                            const std::vector<uint8_t>& bytes, uint32_t magic,
                                            int num_dims) {
  const size_t header = 4 + 4 * static_cast<size_t>(num_dims);
  if (bytes.size() < 4) return DataLossError(path + ": truncated IDX header");
  const uint32_t got = BigEndian32(bytes.data());
  if (got != magic) {
    char msg[96];
    std::snprintf(msg, sizeof(msg), ": wrong IDX magic number 0x%08x (expected 0x%08x)", got,
                  magic);
    return InvalidArgumentError(path + msg);
  }
  if (bytes.size() < header) return DataLossError(path + ": truncated IDX header");
  std::vector<uint32_t> dims(num_dims);
  uint64_t total = 1;
  for (int i = 0; i < num_dims; ++i) {
    dims[i] = BigEndian32(bytes.data() + 4 + 4 * i);
    // Saturate instead of wrapping: an absurd header must read as truncated, not as small.
    if (dims[i] != 0 && total > (uint64_t{1} << 48) / dims[i]) {
      total = uint64_t{1} << 48;
    } else {
      total *= dims[i];
    }
  }
  const uint64_t have = bytes.size() - header;
  if (have < total) {
    return DataLossError(path + ": truncated IDX file: header promises " + std::to_string(total) +
                         " data bytes, found " + std::to_string(have));
  }
  if (have > total) {
    return InvalidArgumentError(path + ": " + std::to_string(have - total) +
                                " unexpected bytes after the IDX data");
  }
  return dims;
}

}  // namespace

StatusOr<std::vector<uint8_t>> ReadMaybeGzipFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return NotFoundError(path + ": no such file");
  }
  GzHandle f(gzopen(path.c_str(), "rb"));
  if (!f) return NotFoundError(path + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> out;
  constexpr size_t kChunk = size_t{1} << 20;
  while (true) {
    const size_t old = out.size();
    out.resize(old + kChunk);
    const int n = gzread(f.get(), out.data() + old, static_cast<unsigned>(kChunk));
    if (n < 0) {
      int errnum = 0;
      const char* msg = gzerror(f.get(), &errnum);
      return DataLossError(path + ": corrupt gzip stream: " + (msg ? msg : "unknown error"));
    }
    out.resize(old + static_cast<size_t>(n));
    if (n == 0) break;
  }
  // gzread reports a stream cut short only through gzerror (Z_BUF_ERROR) at the end.
  int errnum = Z_OK;
  const char* msg = gzerror(f.get(), &errnum);
  if (errnum != Z_OK) {
    return DataLossError(path +
                         ": truncated or corrupt gzip stream: " + (msg ? msg : "unknown error"));
  }
  return out;
}

StatusOr<IdxImages> ReadIdxImages(const std::string& path) {
  SIEVE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadMaybeGzipFile(path));
  SIEVE_ASSIGN_OR_RETURN(std::vector<uint32_t> dims, ParseHeader(path, bytes, kIdxImagesMagic, 3));
  IdxImages images;
  images.count = dims[0];
  images.rows = static_cast<int>(dims[1]);
  images.cols = static_cast<int>(dims[2]);
  images.pixels.assign(bytes.begin() + 16, bytes.end());
  return images;
}

StatusOr<std::vector<uint8_t>> ReadIdxLabels(const std::string& path) {
  SIEVE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadMaybeGzipFile(path));
  SIEVE_ASSIGN_OR_RETURN(std::vector<uint32_t> dims, ParseHeader(path, bytes, kIdxLabelsMagic, 1));
  return std::vector<uint8_t>(bytes.begin() + 8, bytes.end());
}

}  // namespace sieve
