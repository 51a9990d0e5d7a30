#include "deploy/local/line_prefixer.h"

#include <utility>

namespace sieve {

LinePrefixer::LinePrefixer(std::string prefix, size_t max_line)
    : prefix_(std::move(prefix)), max_line_(max_line == 0 ? 1 : max_line) {}

std::vector<std::string> LinePrefixer::Append(std::string_view chunk) {
  std::vector<std::string> lines;
  while (!chunk.empty()) {
    size_t nl = chunk.find('\n');
    std::string_view piece = chunk.substr(0, nl);
    // Take at most what still fits in the current line.
    size_t room = max_line_ - pending_.size();
    if (piece.size() >= room && (nl == std::string_view::npos || piece.size() > room)) {
      pending_.append(piece.substr(0, room));
      lines.push_back(std::move(pending_));
      pending_.clear();
      chunk.remove_prefix(room);
      continue;
    }
    pending_.append(piece);
    if (nl == std::string_view::npos) break;
    lines.push_back(std::move(pending_));
    pending_.clear();
    chunk.remove_prefix(nl + 1);
  }
  return lines;
}

std::vector<std::string> LinePrefixer::Flush() {
  std::vector<std::string> lines;
  if (!pending_.empty()) {
    lines.push_back(std::move(pending_));
    pending_.clear();
  }
  return lines;
}

std::string LinePrefixer::Decorate(std::string_view line) const {
  std::string out;
  out.reserve(prefix_.size() + line.size() + 1);
  out.append(prefix_).append(line).push_back('\n');
  return out;
}

}  // namespace sieve
