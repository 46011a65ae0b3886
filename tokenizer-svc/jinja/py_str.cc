#include "tokenizer-svc/jinja/py_str.h"

#include "absl/strings/str_format.h"
#include "common/utf8.h"

namespace gantry::jinja::pystr {
namespace {

// One-to-one case pairs (upper, lower) by range, enough for European scripts.
uint32_t ToLowerCp(uint32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
    return (c % 2 == 0) ? c + 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF)) return (c % 2 == 0) ? c + 1 : c;
  return c;
}

uint32_t ToUpperCp(uint32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
    return (c % 2 == 1) ? c - 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 0) ? c - 1 : c;
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF)) return (c % 2 == 1) ? c - 1 : c;
  return c;
}

bool IsCased(uint32_t c) { return ToLowerCp(c) != c || ToUpperCp(c) != c || c == 0xDF; }

void Append(uint32_t cp, std::string* out) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    // Only reachable for invalid input bytes decoded as themselves (< 0x100).
    out->push_back(static_cast<char>(cp & 0xFF));
    return;
  }
  AppendUtf8(cp, out);
}

template <typename F>
std::string MapCodePoints(absl::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    uint32_t cp = NextCodePoint(s, &i);
    uint32_t mapped = f(cp);
    if (mapped == cp) {
      out.append(s.data() + start, i - start);  // keeps invalid bytes as they were
    } else {
      Append(mapped, &out);
    }
  }
  return out;
}

bool InSet(uint32_t cp, const std::vector<uint32_t>& set) {
  for (uint32_t c : set) {
    if (c == cp) return true;
  }
  return false;
}

bool IsPrintable(uint32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c >= 0x80 && c <= 0xA0) return false;
  if (c == 0xAD || c == 0x1680 || c == 0x3000 || c == 0xFEFF) return false;
  if (c >= 0x2000 && c <= 0x200F) return false;
  if (c >= 0x2028 && c <= 0x202F) return false;
  if (c >= 0x205F && c <= 0x206F) return false;
  if (c >= 0xD800 && c <= 0xF8FF) return false;
  if (c >= 0xFFF9 && c <= 0xFFFB) return false;
  return c <= 0x10FFFF;
}

}  // namespace

uint32_t NextCodePoint(absl::string_view s, size_t* i) {
  uint32_t cp = 0;
  size_t n = Utf8SequenceLength(s, *i, &cp);
  if (n == 0) {
    cp = static_cast<unsigned char>(s[*i]);
    n = 1;
  }
  *i += n;
  return cp;
}

std::vector<uint32_t> CodePoints(absl::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) out.push_back(NextCodePoint(s, &i));
  return out;
}

std::string FromCodePoints(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end && i < cps.size(); ++i) Append(cps[i], &out);
  return out;
}

size_t Length(absl::string_view s) {
  size_t n = 0, i = 0;
  while (i < s.size()) {
    NextCodePoint(s, &i);
    ++n;
  }
  return n;
}

bool IsSpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool IsLineBreak(uint32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
         c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
}

std::string Strip(absl::string_view s, const absl::optional<std::string>& chars, bool left,
                  bool right) {
  std::vector<uint32_t> cps = CodePoints(s);
  std::vector<uint32_t> set;
  if (chars) set = CodePoints(*chars);
  auto strip = [&](uint32_t cp) { return chars ? InSet(cp, set) : IsSpace(cp); };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip(cps[e - 1])) --e;
  }
  return FromCodePoints(cps, b, e);
}

std::vector<std::string> Split(absl::string_view s, const absl::optional<std::string>& sep,
                               int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    const std::string& d = *sep;
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        size_t hit = s.find(d, pos);
        if (hit == absl::string_view::npos) break;
        parts.emplace_back(s.substr(pos, hit - pos));
        pos = hit + d.size();
      }
      parts.emplace_back(s.substr(pos));
    } else {
      size_t end = s.size();
      std::vector<std::string> rev;
      while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
        if (end < d.size()) break;
        size_t hit = s.rfind(d, end - d.size());
        if (hit == absl::string_view::npos) break;
        rev.emplace_back(s.substr(hit + d.size(), end - hit - d.size()));
        end = hit;
      }
      rev.emplace_back(s.substr(0, end));
      parts.assign(rev.rbegin(), rev.rend());
    }
    return parts;
  }
  // Whitespace split: runs of whitespace separate, no empty strings.
  std::vector<uint32_t> cps = CodePoints(s);
  if (!from_right) {
    size_t i = 0, n = cps.size();
    while (true) {
      while (i < n && IsSpace(cps[i])) ++i;
      if (i == n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = n;
        while (e > i && IsSpace(cps[e - 1])) --e;
        parts.push_back(FromCodePoints(cps, i, e));
        break;
      }
      size_t j = i;
      while (j < n && !IsSpace(cps[j])) ++j;
      parts.push_back(FromCodePoints(cps, i, j));
      i = j;
    }
  } else {
    size_t e = cps.size();
    std::vector<std::string> rev;
    while (true) {
      while (e > 0 && IsSpace(cps[e - 1])) --e;
      if (e == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(rev.size()) == maxsplit) {
        size_t b = 0;
        while (b < e && IsSpace(cps[b])) ++b;
        rev.push_back(FromCodePoints(cps, b, e));
        break;
      }
      size_t b = e;
      while (b > 0 && !IsSpace(cps[b - 1])) --b;
      rev.push_back(FromCodePoints(cps, b, e));
      e = b;
    }
    parts.assign(rev.rbegin(), rev.rend());
  }
  return parts;
}

std::string Replace(absl::string_view s, absl::string_view old_text,
                    absl::string_view new_text, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old_text.empty()) {
    size_t i = 0;
    while (true) {
      if (count < 0 || done < count) {
        out.append(new_text.data(), new_text.size());
        ++done;
      }
      if (i >= s.size()) break;
      size_t start = i;
      NextCodePoint(s, &i);
      out.append(s.data() + start, i - start);
    }
    return out;
  }
  size_t pos = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(old_text, pos);
    if (hit == absl::string_view::npos) break;
    out.append(s.data() + pos, hit - pos);
    out.append(new_text.data(), new_text.size());
    pos = hit + old_text.size();
    ++done;
  }
  out.append(s.data() + pos, s.size() - pos);
  return out;
}

std::string Upper(absl::string_view s) {
  std::string out = MapCodePoints(s, ToUpperCp);
  // The one one-to-many mapping common in European text: "ß".upper() == "SS".
  return Replace(out, "\xC3\x9F", "SS", -1);
}
std::string Lower(absl::string_view s) { return MapCodePoints(s, ToLowerCp); }

std::string Capitalize(absl::string_view s) {
  std::vector<uint32_t> cps = CodePoints(s);
  for (size_t i = 0; i < cps.size(); ++i) cps[i] = i == 0 ? ToUpperCp(cps[i]) : ToLowerCp(cps[i]);
  return FromCodePoints(cps, 0, cps.size());
}

std::string Title(absl::string_view s) {
  std::vector<uint32_t> cps = CodePoints(s);
  bool prev_cased = false;
  for (uint32_t& c : cps) {
    if (IsCased(c)) {
      c = prev_cased ? ToLowerCp(c) : ToUpperCp(c);
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return FromCodePoints(cps, 0, cps.size());
}

std::string JinjaTitle(absl::string_view s) {
  std::vector<uint32_t> cps = CodePoints(s);
  bool word_start = true;
  for (uint32_t& c : cps) {
    bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsSpace(c);
    if (sep) {
      word_start = true;
    } else {
      c = word_start ? ToUpperCp(c) : ToLowerCp(c);
      word_start = false;
    }
  }
  return FromCodePoints(cps, 0, cps.size());
}

bool IsLower(absl::string_view s) {
  bool cased = false;
  for (uint32_t c : CodePoints(s)) {
    if (ToLowerCp(c) != c) return false;
    if (ToUpperCp(c) != c || c == 0xDF) cased = true;
  }
  return cased;
}

bool IsUpper(absl::string_view s) {
  bool cased = false;
  for (uint32_t c : CodePoints(s)) {
    if (ToUpperCp(c) != c && c != 0xB5) return false;
    if (ToLowerCp(c) != c) cased = true;
  }
  return cased;
}

bool IsAlpha(absl::string_view s) {
  std::vector<uint32_t> cps = CodePoints(s);
  if (cps.empty()) return false;
  for (uint32_t c : cps) {
    bool letter = IsCased(c) || c == 0xAA || c == 0xBA || (c >= 0x3040 && c <= 0x9FFF) ||
                  (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0x5D0 && c <= 0x6FF && c != 0x60C);
    if (!letter) return false;
  }
  return true;
}

bool IsDigit(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool IsAlnum(absl::string_view s) {
  std::vector<uint32_t> cps = CodePoints(s);
  if (cps.empty()) return false;
  for (uint32_t c : cps) {
    std::string one;
    Append(c, &one);
    if (!IsAlpha(one) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::string Repr(absl::string_view s) {
  bool has_single = s.find('\'') != absl::string_view::npos;
  bool has_double = s.find('"') != absl::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  size_t i = 0;
  while (i < s.size()) {
    uint32_t c = NextCodePoint(s, &i);
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (IsPrintable(c)) {
      Append(c, &out);
    } else if (c < 0x100) {
      out += absl::StrFormat("\\x%02x", c);
    } else if (c < 0x10000) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += absl::StrFormat("\\U%08x", c);
    }
  }
  out.push_back(quote);
  return out;
}

}  // namespace gantry::jinja::pystr
