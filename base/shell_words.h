// SplitCommandWords: the words of a command line as a POSIX shell splits them, without
// expansions: blanks (space, tab, newline) separate words; '...' is literal; in "..." a backslash
// escapes " \ $ and `; outside quotes a backslash escapes any character. What `sieve launch`
// uses for --worker_cmd, and to read back SIEVE_WORKER_FLAGS (deploy/local/worker_env.h's
// ShellQuote writes it). Errors: InvalidArgument for an unterminated quote or a trailing
// backslash, or when there are no words. Pure; thread-safe.
#ifndef SIEVE_BASE_SHELL_WORDS_H_
#define SIEVE_BASE_SHELL_WORDS_H_

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sieve {

StatusOr<std::vector<std::string>> SplitCommandWords(std::string_view text);

}  // namespace sieve

#endif  // SIEVE_BASE_SHELL_WORDS_H_
