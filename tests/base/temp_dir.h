// Test helper: a fresh directory under the system temporary directory, removed with everything in
// it when the object goes. One owner; not thread-safe.
#ifndef SIEVE_TESTS_BASE_TEMP_DIR_H_
#define SIEVE_TESTS_BASE_TEMP_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace sieve::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "sieve-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace sieve::testing

#endif  // SIEVE_TESTS_BASE_TEMP_DIR_H_
