#include "base/json_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace sieve {
namespace {

// The length of the well-formed UTF-8 sequence at the start of `s` (1..4), or 0 when the bytes
// there are not one (a stray continuation byte, an overlong form, a surrogate, a truncation).
size_t Utf8Length(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto cont = [&](size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // UTF-16 surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // beyond U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
      ++i;
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out->append(esc);
      ++i;
    } else if (c < 0x80) {
      out->push_back(static_cast<char>(c));
      ++i;
    } else if (const size_t n = Utf8Length(s.substr(i)); n > 0) {
      out->append(s.substr(i, n));
      i += n;
    } else {
      out->append("\xEF\xBF\xBD");  // U+FFFD for one bad byte
      ++i;
    }
  }
  out->push_back('"');
}

void AppendJsonNumber(double v, std::string* out) {
  if (!std::isfinite(v)) {
    out->append("null");
    return;
  }
  // Whole numbers that a double holds exactly: as integers (pids, rounds, byte counts).
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
    out->append(std::to_string(static_cast<int64_t>(v)));
    return;
  }
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) {
    out->append("null");
    return;
  }
  out->append(buf, end);
}

void AppendMicros(int64_t ns, std::string* out) {
  const bool negative = ns < 0;
  // In unsigned arithmetic so that the most negative count has a magnitude too.
  const uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%llu.%03llu", negative ? "-" : "",
                static_cast<unsigned long long>(magnitude / 1000),
                static_cast<unsigned long long>(magnitude % 1000));
  out->append(buf);
}

}  // namespace sieve
