#include "server/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace sieve {
namespace {

constexpr char kMagic[8] = {'S', 'I', 'E', 'V', 'E', 'C', 'K', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 * 5;  // magic, version, reserved, 5 × uint64

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

template <typename T>
T Get(const std::string& in, size_t* at) {
  T v;
  std::memcpy(&v, in.data() + *at, sizeof(v));
  *at += sizeof(v);
  return v;
}

uint32_t Crc(const char* data, size_t n) {
  uLong c = crc32(0, nullptr, 0);
  // zlib takes uInt lengths: feed large buffers in pieces.
  while (n > 0) {
    const size_t piece = n > (1u << 30) ? (1u << 30) : n;
    c = crc32(c, reinterpret_cast<const Bytef*>(data), static_cast<uInt>(piece));
    data += piece;
    n -= piece;
  }
  return static_cast<uint32_t>(c);
}

Status Errno(const std::string& what, const std::string& path) {
  return UnavailableError(what + " " + path + ": " + std::strerror(errno));
}

Status WriteAll(int fd, const std::string& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("write", path);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

uint64_t ConfigHash(const CheckpointConfig& c) {
  const std::string text = "model=" + c.model + ";D=" + std::to_string(c.num_params) +
                           ";lo=" + std::to_string(c.lo) + ";hi=" + std::to_string(c.hi) +
                           ";consistency=" + c.consistency + ";seed=" + std::to_string(c.seed);
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

std::string CheckpointPath(const std::string& dir, int rank) {
  return dir + "/server-" + std::to_string(rank) + ".ckpt";
}

Status WriteCheckpoint(const std::string& path, const Checkpoint& ckpt) {
  if (ckpt.hi < ckpt.lo || ckpt.weights.size() != ckpt.hi - ckpt.lo) {
    return InvalidArgumentError("checkpoint of [" + std::to_string(ckpt.lo) + ", " +
                                std::to_string(ckpt.hi) + ") holds " +
                                std::to_string(ckpt.weights.size()) + " values");
  }
  std::string bytes;
  bytes.reserve(kHeaderBytes + ckpt.weights.size() * sizeof(float) + 4);
  bytes.append(kMagic, sizeof(kMagic));
  Put<uint32_t>(&bytes, kVersion);
  Put<uint32_t>(&bytes, 0);
  Put<uint64_t>(&bytes, ckpt.config_hash);
  Put<uint64_t>(&bytes, ckpt.round);
  Put<uint64_t>(&bytes, ckpt.lo);
  Put<uint64_t>(&bytes, ckpt.hi);
  Put<uint64_t>(&bytes, ckpt.weights.size());
  bytes.append(reinterpret_cast<const char*>(ckpt.weights.data()),
               ckpt.weights.size() * sizeof(float));
  Put<uint32_t>(&bytes, Crc(bytes.data(), bytes.size()));

  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("open", tmp);
  Status s = WriteAll(fd, bytes, tmp);
  if (s.ok() && ::fsync(fd) != 0) s = Errno("fsync", tmp);
  if (::close(fd) != 0 && s.ok()) s = Errno("close", tmp);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    s = Errno("rename to", path);
    ::unlink(tmp.c_str());
    return s;
  }
  const std::string dir = DirOf(path);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Errno("open directory", dir);
  if (::fsync(dfd) != 0) s = Errno("fsync directory", dir);
  ::close(dfd);
  return s;
}

StatusOr<Checkpoint> ReadCheckpointFile(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) {
    return NotFoundError("no checkpoint at " + path);
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) return Errno("open", path);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return Errno("read", path);
  if (bytes.size() < kHeaderBytes + 4) {
    return DataLossError("checkpoint " + path + " is truncated (" + std::to_string(bytes.size()) +
                         " bytes)");
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return DataLossError(path + " is not a sieve checkpoint (bad magic)");
  }
  size_t at = sizeof(kMagic);
  const uint32_t version = Get<uint32_t>(bytes, &at);
  if (version != kVersion) {
    return DataLossError("checkpoint " + path + " has version " + std::to_string(version) +
                         ", expected " + std::to_string(kVersion));
  }
  (void)Get<uint32_t>(bytes, &at);
  Checkpoint c;
  c.config_hash = Get<uint64_t>(bytes, &at);
  c.round = Get<uint64_t>(bytes, &at);
  c.lo = Get<uint64_t>(bytes, &at);
  c.hi = Get<uint64_t>(bytes, &at);
  const uint64_t count = Get<uint64_t>(bytes, &at);
  const uint64_t payload = bytes.size() - kHeaderBytes - 4;
  if (c.hi < c.lo || count != c.hi - c.lo || payload % sizeof(float) != 0 ||
      count != payload / sizeof(float)) {
    return DataLossError("checkpoint " + path + " is truncated or inconsistent (count " +
                         std::to_string(count) + ", " + std::to_string(payload) +
                         " payload bytes)");
  }
  uint32_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - 4, 4);
  if (Crc(bytes.data(), bytes.size() - 4) != stored) {
    return DataLossError("checkpoint " + path + " is corrupt (CRC mismatch)");
  }
  c.weights.resize(count);
  std::memcpy(c.weights.data(), bytes.data() + kHeaderBytes, count * sizeof(float));
  return c;
}

StatusOr<Checkpoint> ReadCheckpoint(const std::string& path, uint64_t expected_config_hash,
                                    uint64_t expected_lo, uint64_t expected_hi) {
  SIEVE_ASSIGN_OR_RETURN(Checkpoint c, ReadCheckpointFile(path));
  if (c.config_hash != expected_config_hash) {
    return FailedPreconditionError("checkpoint " + path +
                                   " belongs to another configuration (model, D, shard, "
                                   "consistency or seed differ)");
  }
  if (c.lo != expected_lo || c.hi != expected_hi) {
    return FailedPreconditionError("checkpoint " + path + " holds [" + std::to_string(c.lo) + ", " +
                                   std::to_string(c.hi) + "), this shard is [" +
                                   std::to_string(expected_lo) + ", " +
                                   std::to_string(expected_hi) + ")");
  }
  return c;
}

}  // namespace sieve
