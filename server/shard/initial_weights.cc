#include "server/shard/initial_weights.h"

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

namespace sieve {

static_assert(std::endian::native == std::endian::little, "the weights file is little-endian");

Status CheckWeightsFile(const std::string& path, uint64_t d) {
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (ec) return NotFoundError("cannot read weights file " + path + ": " + ec.message());
  if (bytes != 4 * d) {
    return InvalidArgumentError("weights file " + path + " holds " + std::to_string(bytes) +
                                " bytes, but D = " + std::to_string(d) + " float32 values need " +
                                std::to_string(4 * d) +
                                " (a truncated file, or one of another model?)");
  }
  return Status::Ok();
}

Status ReadWeightsSlice(const std::string& path, uint64_t d, uint64_t lo, uint64_t hi, float* out) {
  if (lo > hi || hi > d) return InvalidArgumentError("weights slice outside [0, D)");
  SIEVE_RETURN_IF_ERROR(CheckWeightsFile(path, d));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (f == nullptr) {
    return NotFoundError("cannot open weights file " + path + ": " + std::strerror(errno));
  }
  const uint64_t n = hi - lo;
  if (std::fseek(f.get(), static_cast<long>(4 * lo), SEEK_SET) != 0 ||
      std::fread(out, sizeof(float), n, f.get()) != n) {
    return InvalidArgumentError("weights file " + path + " ended before index " +
                                std::to_string(hi));
  }
  for (uint64_t i = 0; i < n; ++i) {
    if (!std::isfinite(out[i])) {
      return InvalidArgumentError("weights file " + path + " holds a non-finite value at index " +
                                  std::to_string(lo + i));
    }
  }
  return Status::Ok();
}

}  // namespace sieve
