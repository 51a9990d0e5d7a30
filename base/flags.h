// The command line of a sieve daemon: gflags flags, read so that every usage error exits 2 with a
// message naming the flag, plus a --help of the program's own flags in groups and --version.
//
// Contract: main() calls ParseCommandLine(program, argc, argv) instead of
// gflags::ParseCommandLineFlags and returns its value at once when it has one; nullopt means the
// flags are set and the program runs.
// - `--help`, `--helpshort`, `-h`: prints "<name> <version>: <summary>", "usage: <usage>", then the
//   program's own flags under the group titles, in table order, each as `--name=default` (doubles
//   as the shortest decimal that reads back the same: 0.1, not 0.10000000000000001; empty strings
//   as "") and its help text. Flags defined in the same source files as the grouped ones but in no
//   group come last, under "Other". The flags of libraries (glog, gflags) are not listed; a final
//   line points at --helpfull. Exit 0.
// - `--helpfull`: the same, then the library flags. Exit 0.
// - `--version`: "<name> <version>" (base/version.h, the VERSION of CMake's project()). Exit 0.
// - Everything else is read by ParseFlagWords (base/flag_args.h; flag files included, every line
//   checked) and set through gflags. An unknown flag (with a "did you mean" suggestion), a typo in
//   a flag file (named with its line), a bad value or a positional argument prints one line
//   "<name>: <message> (see --help)" to stderr: exit 2.
// - gflags' other reporting flags (--helpxml, which `sieve launch` reads, --helpon, --helpmatch,
//   --helppackage) are left to gflags: it prints and exits 1, as it always has.
// A group naming a flag that is not defined is a programming error (CHECK-style abort).
#ifndef SIEVE_BASE_FLAGS_H_
#define SIEVE_BASE_FLAGS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sieve {

// A titled list of flag names, e.g. {"Training", {"epochs", "lr", "momentum"}}.
struct FlagGroup {
  std::string_view title;
  std::vector<std::string_view> flags;
};

struct ProgramInfo {
  std::string_view name;     // "sieve-worker"
  std::string_view summary;  // one sentence: what the program does
  std::string_view usage;    // "sieve-worker --scheduler=HOST:PORT [--model=fnn3] ..."
  std::vector<FlagGroup> groups;
};

// The exit status main() must return now, or nullopt to run.
std::optional<int> ParseCommandLine(const ProgramInfo& program, int argc, char** argv);

// A flag's default as --help shows it: `value` (gflags' text of a default of gflags type `type`)
// with doubles shortened to the shortest decimal that reads back the same, and "" for an empty
// string.
std::string ReadableDefault(std::string_view type, std::string_view value);

// The --help text of `program` (see the contract above); `full` adds the library flags.
std::string HelpText(const ProgramInfo& program, bool full);

}  // namespace sieve

#endif  // SIEVE_BASE_FLAGS_H_
