#include "deploy/local/flag_routing.h"

#include <utility>

namespace sieve {
namespace {

// Text between <tag> and </tag> inside `block`, or nullopt.
std::optional<std::string_view> ElementText(std::string_view block, std::string_view tag) {
  std::string open = "<";
  open.append(tag).append(">");
  std::string close = "</";
  close.append(tag).append(">");
  size_t begin = block.find(open);
  if (begin == std::string_view::npos) return std::nullopt;
  begin += open.size();
  size_t end = block.find(close, begin);
  if (end == std::string_view::npos) return std::nullopt;
  return block.substr(begin, end - begin);
}

}  // namespace

StatusOr<DaemonFlags> ParseGflagsHelpXml(std::string_view xml) {
  if (xml.find("<AllFlags>") == std::string_view::npos) {
    return InvalidArgumentError("no <AllFlags> element in --helpxml output");
  }
  DaemonFlags flags;
  if (auto program = ElementText(xml, "program")) flags.program = std::string(*program);
  size_t pos = 0;
  while ((pos = xml.find("<flag>", pos)) != std::string_view::npos) {
    size_t end = xml.find("</flag>", pos);
    if (end == std::string_view::npos) {
      return InvalidArgumentError("unterminated <flag> element in --helpxml output");
    }
    std::string_view block = xml.substr(pos, end - pos);
    auto name = ElementText(block, "name");
    auto type = ElementText(block, "type");
    if (!name || name->empty() || !type) {
      return InvalidArgumentError("<flag> without <name> or <type> in --helpxml output");
    }
    flags.types[std::string(*name)] = std::string(*type);
    pos = end;
  }
  return flags;
}

FlagKind KindAcross(const std::vector<const DaemonFlags*>& daemons, const std::string& name) {
  FlagKind kind = FlagKind::kUnknown;
  for (const DaemonFlags* d : daemons) {
    auto it = d->types.find(name);
    if (it == d->types.end()) continue;
    FlagKind here = it->second == "bool" ? FlagKind::kBool : FlagKind::kValued;
    if (kind == FlagKind::kUnknown) {
      kind = here;
    } else if (kind != here) {
      return FlagKind::kConflicting;
    }
  }
  return kind;
}

StatusOr<std::vector<PassThroughFlag>> ParsePassThrough(
    const std::vector<std::string>& words, const FlagKindFn& kind_of,
    const std::vector<std::string>& known_names) {
  SIEVE_ASSIGN_OR_RETURN(auto parsed, ParseFlagWords(words, kind_of, known_names));
  std::vector<PassThroughFlag> out;
  for (FlagAssignment& a : parsed) out.push_back({std::move(a.name), std::move(a.value)});
  return out;
}

StatusOr<std::map<std::string, std::vector<std::string>>> RouteFlags(
    const std::vector<PassThroughFlag>& flags, const std::vector<std::string>& roles,
    const std::vector<const DaemonFlags*>& daemons) {
  if (roles.size() != daemons.size()) {
    return InvalidArgumentError("RouteFlags: roles and daemons differ in length");
  }
  std::map<std::string, std::vector<std::string>> routed;
  for (const std::string& role : roles) routed[role];
  for (const PassThroughFlag& flag : flags) {
    bool delivered = false;
    for (size_t r = 0; r < roles.size(); ++r) {
      if (!daemons[r]->Defines(flag.name)) continue;
      routed[roles[r]].push_back(flag.Render());
      delivered = true;
    }
    if (!delivered) {
      return InvalidArgumentError("flag --" + flag.name + " is not defined by any daemon");
    }
  }
  return routed;
}

}  // namespace sieve
