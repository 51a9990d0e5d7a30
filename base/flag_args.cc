#include "base/flag_args.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace sieve {
namespace {

constexpr size_t kMaxSuggestions = 3;

// Optimal string alignment distance: Levenshtein plus transpositions of adjacent characters.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string_view Strip(std::string_view s) {
  const char* space = " \t\r\n\f\v";
  const size_t first = s.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

std::string Prefix(const std::string& origin) { return origin.empty() ? "" : origin + ": "; }

class Parser {
 public:
  Parser(const FlagKindFn& kind_of, const std::vector<std::string>& known)
      : kind_of_(kind_of), known_(known) {}

  Status Words(const std::vector<std::string>& words) {
    for (size_t i = 0; i < words.size(); ++i) {
      const std::string& word = words[i];
      std::string_view body = word;
      if (body.starts_with("--") && body.size() > 2) {
        body.remove_prefix(2);
      } else if (body.starts_with("-") && body.size() > 1 && body[1] != '-') {
        body.remove_prefix(1);
      } else {
        return InvalidArgumentError("unexpected argument '" + word +
                                    "': only flags (--name=value) are accepted");
      }
      const bool has_value = body.find('=') != std::string_view::npos;
      const std::string name(body.substr(0, body.find('=')));
      const std::string* next = nullptr;
      if (!has_value && i + 1 < words.size() && TakesNextWord(name)) next = &words[++i];
      if (Status s = One(body, next, ""); !s.ok()) return s;
    }
    return Status::Ok();
  }

  std::vector<FlagAssignment> Take() { return std::move(out_); }

 private:
  // True when `--name` without `=` takes the next word as its value (gflags' rule).
  bool TakesNextWord(const std::string& name) const {
    if (name == "flagfile") return true;
    return kind_of_(name) == FlagKind::kValued;
  }

  // One flag: `body` is the word without its dashes; `next` the following word when the flag
  // took it as its value.
  Status One(std::string_view body, const std::string* next, const std::string& origin) {
    const size_t eq = body.find('=');
    const std::string name(body.substr(0, eq));
    const std::string shown = "--" + std::string(body);
    if (name.empty())
      return InvalidArgumentError(Prefix(origin) + "malformed flag '" + shown + "'");
    std::string value;
    bool has_value = eq != std::string_view::npos;
    if (has_value) value = std::string(body.substr(eq + 1));
    if (!has_value && next != nullptr) {
      value = *next;
      has_value = true;
    }
    if (name == "flagfile") {
      if (!has_value || value.empty()) {
        return InvalidArgumentError(Prefix(origin) + "flag --flagfile needs a file name");
      }
      return FlagFiles(value, origin);
    }
    const FlagKind kind = kind_of_(name);
    if (kind == FlagKind::kUnknown) {
      if (name.starts_with("no") && kind_of_(name.substr(2)) != FlagKind::kUnknown) {
        const std::string positive = name.substr(2);
        if (!has_value && kind_of_(positive) == FlagKind::kBool) {
          out_.push_back({positive, "false", origin});
          return Status::Ok();
        }
        return InvalidArgumentError(Prefix(origin) + "unknown flag --" + name + " (--" + positive +
                                    " is not a plain bool flag: write --" + positive + "=VALUE)");
      }
      return InvalidArgumentError(Prefix(origin) + "unknown flag --" + name +
                                  DidYouMean(name, known_));
    }
    if (has_value) {
      out_.push_back({name, value, origin});
      return Status::Ok();
    }
    switch (kind) {
      case FlagKind::kBool:
        out_.push_back({name, "true", origin});
        return Status::Ok();
      case FlagKind::kConflicting:
        return InvalidArgumentError(Prefix(origin) + "flag --" + name +
                                    " has different types in different programs; write --" + name +
                                    "=VALUE");
      default:
        return InvalidArgumentError(Prefix(origin) + "flag --" + name + " needs a value");
    }
  }

  Status FlagFiles(const std::string& list, const std::string& origin) {
    std::stringstream files(list);
    for (std::string path; std::getline(files, path, ',');) {
      if (path.empty()) continue;
      if (Status s = FlagFile(path, origin); !s.ok()) return s;
    }
    return Status::Ok();
  }

  Status FlagFile(const std::string& path, const std::string& origin) {
    std::error_code ec;
    const std::string key = std::filesystem::weakly_canonical(path, ec).string();
    if (std::find(open_.begin(), open_.end(), key) != open_.end()) {
      return InvalidArgumentError(Prefix(origin) + "flag file " + path + " includes itself");
    }
    std::ifstream in(path);
    if (!in) {
      return InvalidArgumentError(Prefix(origin) + "cannot read flag file " + path + ": " +
                                  std::strerror(errno));
    }
    open_.push_back(key);
    int number = 0;
    for (std::string raw; std::getline(in, raw);) {
      ++number;
      const std::string_view line = Strip(raw);
      if (line.empty() || line[0] == '#') continue;
      const std::string where = path + ":" + std::to_string(number);
      if (line[0] != '-') {
        return InvalidArgumentError(
            where + ": '" + std::string(line) +
            "' is not a flag (flag files hold one --name=value a line; program-name sections "
            "are not supported)");
      }
      std::string_view body = line.substr(line.starts_with("--") ? 2 : 1);
      if (Status s = One(body, nullptr, where); !s.ok()) return s;
    }
    open_.pop_back();
    return Status::Ok();
  }

  const FlagKindFn& kind_of_;
  const std::vector<std::string>& known_;
  std::vector<FlagAssignment> out_;
  std::vector<std::string> open_;  // flag files being read, outermost first
};

}  // namespace

StatusOr<std::vector<FlagAssignment>> ParseFlagWords(const std::vector<std::string>& words,
                                                     const FlagKindFn& kind_of,
                                                     const std::vector<std::string>& known_names) {
  Parser parser(kind_of, known_names);
  if (Status s = parser.Words(words); !s.ok()) return s;
  return parser.Take();
}

std::vector<std::string> SuggestFlags(std::string_view name,
                                      const std::vector<std::string>& known_names) {
  const size_t limit = name.size() <= 4 ? 1 : 2;
  std::vector<std::pair<size_t, size_t>> close;  // (distance, index)
  for (size_t i = 0; i < known_names.size(); ++i) {
    if (known_names[i] == name) continue;
    const size_t d = EditDistance(name, known_names[i]);
    if (d <= limit) close.emplace_back(d, i);
  }
  std::stable_sort(close.begin(), close.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (const auto& [d, i] : close) {
    if (out.size() == kMaxSuggestions) break;
    if (std::find(out.begin(), out.end(), known_names[i]) == out.end()) {
      out.push_back(known_names[i]);
    }
  }
  return out;
}

std::string DidYouMean(std::string_view name, const std::vector<std::string>& known_names) {
  const std::vector<std::string> close = SuggestFlags(name, known_names);
  if (close.empty()) return "";
  std::string text = " (did you mean ";
  for (size_t i = 0; i < close.size(); ++i) {
    if (i > 0) text += i + 1 == close.size() ? " or " : ", ";
    text += "--" + close[i];
  }
  return text + "?)";
}

}  // namespace sieve
