// The names of a small enum's values as one table, read both ways: the Name function of an enum
// and its Parse function (and the list of accepted names in the latter's error) share one list,
// so they cannot drift apart.
//
//   constexpr EnumName<Color> kColorNames[] = {{Color::kRed, "red"}, {Color::kBlue, "blue"}};
//   EnumNameOf(kColorNames, Color::kRed, "?")  // "red"
//   EnumValueOf(kColorNames, "blue")           // Color::kBlue; std::nullopt for a name not listed
//   EnumNameList(kColorNames)                  // "red or blue"
//   ParseEnumName(kColorNames, "pink", "color")  // InvalidArgument: unknown color 'pink' (...)
//
// A table lists every value once; names are string literals, so a returned name's data() is
// NUL-terminated and lives for the whole program. Unlike a switch, a table does not make the
// compiler flag an enum value added later: a test of the enum's names has to catch that.
#ifndef SIEVE_BASE_ENUM_NAMES_H_
#define SIEVE_BASE_ENUM_NAMES_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace sieve {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// The name of `value`; `unknown` where the table lacks it (a value cast from outside the list).
template <typename E, size_t N>
constexpr std::string_view EnumNameOf(const EnumName<E> (&names)[N], E value,
                                      std::string_view unknown) {
  for (const EnumName<E>& n : names) {
    if (n.value == value) return n.name;
  }
  return unknown;
}

// The value named exactly `name` (case-sensitive); std::nullopt for any other text.
template <typename E, size_t N>
constexpr std::optional<E> EnumValueOf(const EnumName<E> (&names)[N], std::string_view name) {
  for (const EnumName<E>& n : names) {
    if (n.name == name) return n.value;
  }
  return std::nullopt;
}

// The names in table order as English prose for an error message: "a", "a or b", "a, b or c".
template <typename E, size_t N>
std::string EnumNameList(const EnumName<E> (&names)[N]) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i != 0) out += i + 1 == N ? " or " : ", ";
    out += names[i].name;
  }
  return out;
}

// The value named `name`; otherwise InvalidArgument "unknown <what> '<name>' (expected <list>)".
template <typename E, size_t N>
StatusOr<E> ParseEnumName(const EnumName<E> (&names)[N], std::string_view name,
                          std::string_view what) {
  if (std::optional<E> value = EnumValueOf(names, name)) return *value;
  return InvalidArgumentError("unknown " + std::string(what) + " '" + std::string(name) +
                              "' (expected " + EnumNameList(names) + ")");
}

}  // namespace sieve

#endif  // SIEVE_BASE_ENUM_NAMES_H_
