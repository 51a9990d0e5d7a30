// LinePrefixer: turns a child's byte stream into whole, prefixed lines.
//
// Contract: Append() takes arbitrary chunks as they come off a pipe and returns only complete
// lines, each as "<prefix><line>\n"; bytes after the last newline are kept until more arrive.
// A line longer than max_line bytes is emitted in max_line pieces so memory stays bounded.
// Flush() returns the kept partial line (newline added), or nothing when none is kept; call it
// at end of stream. Not thread-safe: one prefixer per stream, used by one thread.
#ifndef SIEVE_DEPLOY_LOCAL_LINE_PREFIXER_H_
#define SIEVE_DEPLOY_LOCAL_LINE_PREFIXER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sieve {

class LinePrefixer {
 public:
  static constexpr size_t kDefaultMaxLine = 64 * 1024;

  explicit LinePrefixer(std::string prefix, size_t max_line = kDefaultMaxLine);

  // Complete lines (without prefix or newline) found once `chunk` is appended.
  std::vector<std::string> Append(std::string_view chunk);
  // The pending partial line, if any (without prefix or newline).
  std::vector<std::string> Flush();

  // "<prefix><line>\n".
  std::string Decorate(std::string_view line) const;
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
  size_t max_line_;
  std::string pending_;
};

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_LINE_PREFIXER_H_
