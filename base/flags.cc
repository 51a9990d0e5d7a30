#include "base/flags.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "base/flag_args.h"
#include "base/version.h"

namespace sieve {
namespace {

constexpr size_t kNameColumn = 34;  // help text starts here when `--name=default` fits
constexpr size_t kLineWidth = 100;
constexpr int kExitUsage = 2;

std::map<std::string, gflags::CommandLineFlagInfo> AllFlags() {
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  std::map<std::string, gflags::CommandLineFlagInfo> by_name;
  for (auto& f : all) by_name.emplace(f.name, std::move(f));
  return by_name;
}

// Appends `text` word-wrapped to kLineWidth, continuation lines indented by `indent`, starting at
// column `column`.
void AppendWrapped(std::string* out, std::string_view text, size_t column, size_t indent) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(' ', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(at, end - at);
    if (column > indent && column + 1 + word.size() > kLineWidth) {
      out->append("\n").append(indent, ' ');
      column = indent;
    } else if (column > indent) {
      *out += ' ';
      ++column;
    }
    *out += word;
    column += word.size();
    at = end + 1;
  }
  *out += '\n';
}

void AppendFlag(std::string* out, const gflags::CommandLineFlagInfo& f) {
  std::string head = "  --";
  head.append(f.name).append("=").append(ReadableDefault(f.type, f.default_value));
  out->append(head);
  if (head.size() + 2 > kNameColumn) {
    out->append("\n").append(kNameColumn, ' ');
  } else {
    out->append(kNameColumn - head.size(), ' ');
  }
  AppendWrapped(out, f.description, kNameColumn, kNameColumn);
}

// For --help, --helpshort, -h, --helpfull and --version (`flag` without its dashes): prints what
// they ask for and returns the exit status 0; nullopt for any other flag.
std::optional<int> Report(const ProgramInfo& program, std::string_view flag) {
  if (flag == "version") {
    std::printf("%.*s %s\n", static_cast<int>(program.name.size()), program.name.data(), kVersion);
    return 0;
  }
  if (flag != "help" && flag != "helpshort" && flag != "h" && flag != "helpfull") {
    return std::nullopt;
  }
  std::fputs(HelpText(program, flag == "helpfull").c_str(), stdout);
  return 0;
}

int UsageError(const ProgramInfo& program, const std::string& message) {
  std::fprintf(stderr, "%.*s: %s (see --help)\n", static_cast<int>(program.name.size()),
               program.name.data(), message.c_str());
  return kExitUsage;
}

}  // namespace

std::string ReadableDefault(std::string_view type, std::string_view value) {
  if (type == "string") return value.empty() ? "\"\"" : std::string(value);
  if (type != "double") return std::string(value);
  const std::string text(value);
  char* end = nullptr;
  const double d = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return text;
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), d);
  return ec == std::errc() ? std::string(buf, ptr) : text;
}

std::string HelpText(const ProgramInfo& program, bool full) {
  const auto flags = AllFlags();
  std::string out;
  AppendWrapped(
      &out, std::string(program.name) + " " + kVersion + ": " + std::string(program.summary), 0, 0);
  out += "usage: ";
  AppendWrapped(&out, program.usage, 7, 7);

  std::set<std::string> listed, own_files;
  for (const FlagGroup& group : program.groups) {
    out.append("\n").append(group.title).append(":\n");
    for (std::string_view name : group.flags) {
      auto it = flags.find(std::string(name));
      if (it == flags.end()) {
        std::fprintf(stderr, "%.*s: flag group '%.*s' names undefined flag --%.*s\n",
                     static_cast<int>(program.name.size()), program.name.data(),
                     static_cast<int>(group.title.size()), group.title.data(),
                     static_cast<int>(name.size()), name.data());
        std::abort();
      }
      AppendFlag(&out, it->second);
      listed.insert(it->first);
      own_files.insert(it->second.filename);
    }
  }
  std::string other, libraries;
  for (const auto& [name, info] : flags) {
    if (listed.count(name)) continue;
    AppendFlag(own_files.count(info.filename) ? &other : &libraries, info);
  }
  if (!other.empty()) out.append("\nOther:\n").append(other);
  if (full) {
    out.append("\nFlags of the glog and gflags libraries:\n").append(libraries);
  } else {
    out.append("\nThe flags of the glog and gflags libraries (logging, flag files): --helpfull.\n");
  }
  out.append("Exit status: 0 success, 1 failure, 2 usage error.\n");
  return out;
}

std::optional<int> ParseCommandLine(const ProgramInfo& program, int argc, char** argv) {
  gflags::SetUsageMessage(std::string(program.summary) +
                          "\n  usage: " + std::string(program.usage));
  gflags::SetVersionString(kVersion);
  gflags::SetArgv(argc, const_cast<const char**>(argv));

  // A bare --help or --version wins over anything else on the command line, errors included.
  const std::vector<std::string> words(argv + 1, argv + argc);
  for (std::string_view word : words) {
    if (!word.starts_with("-")) continue;
    word.remove_prefix(word.starts_with("--") ? 2 : 1);
    if (auto exit_code = Report(program, word)) return exit_code;
  }

  const auto flags = AllFlags();
  std::vector<std::string> names;
  for (const auto& [flag, info] : flags) names.push_back(flag);
  auto kind_of = [&flags](const std::string& flag) {
    auto it = flags.find(flag);
    if (it == flags.end()) return FlagKind::kUnknown;
    return it->second.type == "bool" ? FlagKind::kBool : FlagKind::kValued;
  };
  auto assignments = ParseFlagWords(words, kind_of, names);
  if (!assignments.ok()) return UsageError(program, assignments.status().message());
  for (const FlagAssignment& a : *assignments) {
    // `--help=true` and the like (as `sieve launch` renders bool flags), from a flag file too.
    if (a.value == "true" || a.value == "1") {
      if (auto exit_code = Report(program, a.name)) return exit_code;
    }
    if (gflags::SetCommandLineOption(a.name.c_str(), a.value.c_str()).empty()) {
      const std::string where = a.origin.empty() ? "" : a.origin + ": ";
      return UsageError(program, where + "invalid value '" + a.value + "' for --" + a.name +
                                     " (a " + flags.at(a.name).type + ")");
    }
  }
  gflags::HandleCommandLineHelpFlags();  // --helpxml and the like: prints, exits
  return std::nullopt;
}

}  // namespace sieve
