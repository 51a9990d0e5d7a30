// ParseNumber<T>: a number that is all of a piece of text, in std::from_chars' syntax (decimal; no
// leading spaces or '+'; a '-' only for signed and floating-point types; for floating point also
// "inf" and "nan", which callers that need finite values check). The one parser behind the
// command lines' and specs' numeric words.
#ifndef SIEVE_BASE_PARSE_NUMBER_H_
#define SIEVE_BASE_PARSE_NUMBER_H_

#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace sieve {

// The value of `text`; std::nullopt when it is empty, has characters after the number, or is out
// of T's range.
template <typename T>
std::optional<T> ParseNumber(std::string_view text) {
  T value{};
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(text.data(), last, value);
  if (ec != std::errc() || end != last) return std::nullopt;
  return value;
}

}  // namespace sieve

#endif  // SIEVE_BASE_PARSE_NUMBER_H_
