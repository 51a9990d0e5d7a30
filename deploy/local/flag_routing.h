// Flag routing for `sieve launch`: which pass-through flag goes to which daemon.
//
// Contract:
// - ParseGflagsHelpXml() reads the output of `<daemon> --helpxml` (gflags' XML: one <flag> per
//   flag, each with <name> and <type>) into a DaemonFlags. Output without <AllFlags> is an
//   InvalidArgument error (the program is not a gflags daemon).
// - ParsePassThrough() normalizes command-line words into PassThroughFlag values, as the daemons
//   read them (ParseFlagWords, base/flag_args.h): `--name=value`, `-name=value`, `--name value`
//   (value taken from the next word unless the flag is a bool), `--name` (bool true), `--noname`
//   (bool false); `--flagfile=F` is expanded into the flags of F, every line checked.
//   `kind_of(name)` says whether the daemons that define a name take it as a bool (see
//   KindAcross); `known_names` feed the "did you mean" suggestions.
//   Positional words, unknown names (in F too, named with F's line) and missing values are
//   InvalidArgument errors that name the offending word. Nothing is routed on error.
// - RouteFlags() assigns every flag to exactly the roles whose DaemonFlags define it; a flag no
//   role defines is an InvalidArgument error naming it.
// Everything here is pure (no I/O) and thread-compatible.
#ifndef SIEVE_DEPLOY_LOCAL_FLAG_ROUTING_H_
#define SIEVE_DEPLOY_LOCAL_FLAG_ROUTING_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/flag_args.h"
#include "base/status.h"

namespace sieve {

// The flags one daemon defines: name → gflags type ("bool", "int32", "string", ...).
struct DaemonFlags {
  std::string program;
  std::map<std::string, std::string> types;

  bool Defines(const std::string& name) const { return types.count(name) != 0; }
};

StatusOr<DaemonFlags> ParseGflagsHelpXml(std::string_view xml);

// One pass-through flag in canonical form; rendered as `--name=value`.
struct PassThroughFlag {
  std::string name;
  std::string value;

  std::string Render() const { return "--" + name + "=" + value; }
  bool operator==(const PassThroughFlag&) const = default;
};

StatusOr<std::vector<PassThroughFlag>> ParsePassThrough(
    const std::vector<std::string>& words, const FlagKindFn& kind_of,
    const std::vector<std::string>& known_names = {});

// FlagKind of `name` across the given daemons.
FlagKind KindAcross(const std::vector<const DaemonFlags*>& daemons, const std::string& name);

// role → the flags (rendered) it should receive, in command-line order. `roles` and `daemons`
// are parallel.
StatusOr<std::map<std::string, std::vector<std::string>>> RouteFlags(
    const std::vector<PassThroughFlag>& flags, const std::vector<std::string>& roles,
    const std::vector<const DaemonFlags*>& daemons);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_FLAG_ROUTING_H_
