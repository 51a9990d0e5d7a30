// Command-line flag words in gflags syntax, read the same way by the daemons (base/flags.h) and by
// `sieve launch` (deploy/local/flag_routing.h), so a typo is caught by the first program that
// reads it, with the same message.
//
// Contract:
// - ParseFlagWords() turns words into flag assignments, in order. Accepted forms: `--name=value`,
//   `-name=value`, `--name value` (the next word, unless the flag is a bool), `--name` (bool
//   true), `--noname` (bool false). Whether a name is known, and how, is asked of `kind_of`.
// - `--flagfile=F` (or `--flagfile F`; F may be a comma-separated list) is expanded in place, as
//   gflags reads flag files: each non-blank line that is not a `#` comment is one `--name=value`
//   (or `--name` / `--noname`) flag, the whole rest of the line being the value, surrounding
//   whitespace stripped; a `--flagfile` line is expanded in turn. Unlike gflags, nothing in a flag
//   file is ignored: an unknown flag, a flag without its value, a line without a leading dash
//   (gflags' program-name sections) and a file that includes itself are errors.
// - Every error is InvalidArgument and names the offending word (positional words, unknown names,
//   missing values, conflicting kinds) and, for a flag-file line, the file and line number; an
//   unknown name comes with "did you mean --x?" when known names are close (SuggestFlags). An
//   unreadable flag file is InvalidArgument too (it is a usage error of the caller).
// - A FlagAssignment's origin says where it came from: empty for the command line, else
//   "FILE:LINE", so later value checks can point at the same place.
// Pure apart from reading flag files; thread-compatible.
#ifndef SIEVE_BASE_FLAG_ARGS_H_
#define SIEVE_BASE_FLAG_ARGS_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sieve {

// How a flag name is taken by the program(s) that define it.
enum class FlagKind { kUnknown, kBool, kValued, kConflicting };
using FlagKindFn = std::function<FlagKind(const std::string& name)>;

struct FlagAssignment {
  std::string name;
  std::string value;
  std::string origin;  // "" = the command line, else "FILE:LINE"

  bool operator==(const FlagAssignment&) const = default;
};

// `known_names` only feeds the "did you mean" suggestions.
StatusOr<std::vector<FlagAssignment>> ParseFlagWords(const std::vector<std::string>& words,
                                                     const FlagKindFn& kind_of,
                                                     const std::vector<std::string>& known_names);

// The known names closest to `name` by edit distance (insertions, deletions, substitutions and
// transpositions of neighbours), at most 2 edits away (1 for names of 4 characters or fewer),
// nearest first, at most 3, in `known_names` order among equals. Empty when none is close.
std::vector<std::string> SuggestFlags(std::string_view name,
                                      const std::vector<std::string>& known_names);

// " (did you mean --a or --b?)" for SuggestFlags(name, known_names), or "" when it is empty.
std::string DidYouMean(std::string_view name, const std::vector<std::string>& known_names);

}  // namespace sieve

#endif  // SIEVE_BASE_FLAG_ARGS_H_
