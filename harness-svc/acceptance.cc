#include "harness-svc/acceptance.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "harness-svc/tools.h"

namespace gantry::harness {
namespace {

bool PathChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ||
         c == '/' || c == ':';
}

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The citation in `word`, or "".
std::string Citation(absl::string_view word) {
  while (!word.empty() && (word.back() == '.' || word.back() == ':')) word.remove_suffix(1);
  if (absl::StrContains(word, "://")) return "";
  size_t colon = word.find(':');
  if (colon != absl::string_view::npos) {
    absl::string_view lines = word.substr(colon + 1);
    std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(lines, absl::MaxSplits('-', 1));
    if (!AllDigits(range.first) || (!range.second.empty() && !AllDigits(range.second))) return "";
    if (lines.back() == '-') return "";
    word = word.substr(0, colon);
  }
  if (absl::StartsWith(word, "./")) word.remove_prefix(2);
  while (absl::StartsWith(word, "/")) word.remove_prefix(1);
  if (word.empty() || word.back() == '/') return "";
  std::vector<absl::string_view> parts = absl::StrSplit(word, '/');
  for (absl::string_view p : parts) {
    if (p.empty() || p == "." || p == "..") return "";
  }
  absl::string_view last = parts.back();
  size_t dot = last.rfind('.');
  if (dot == absl::string_view::npos || dot == 0 || dot + 1 == last.size()) return "";
  absl::string_view ext = last.substr(dot + 1);
  if (!std::any_of(ext.begin(), ext.end(), [](char c) { return absl::ascii_isalpha(static_cast<unsigned char>(c)); })) {
    return "";
  }
  if (parts.size() == 1 && dot < 2) return "";  // "e.g", "i.e"
  auto norm = NormalizeToolPath(word);
  return norm.ok() ? *norm : "";
}

bool IsBullet(absl::string_view line) {
  line = absl::StripLeadingAsciiWhitespace(line);
  for (absl::string_view marker : {"- ", "* ", "+ ", "\xE2\x80\xA2 "}) {
    if (absl::StartsWith(line, marker)) return true;
  }
  size_t i = 0;
  while (i < line.size() && i < 9 && line[i] >= '0' && line[i] <= '9') ++i;
  return i > 0 && i + 1 < line.size() && (line[i] == '.' || line[i] == ')') && line[i + 1] == ' ';
}

}  // namespace

std::vector<std::string> CitedFiles(absl::string_view answer) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < answer.size()) {
    if (!PathChar(answer[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < answer.size() && PathChar(answer[j])) ++j;
    std::string c = Citation(answer.substr(i, j - i));
    if (!c.empty() && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    i = j;
  }
  return out;
}

int CountBullets(absl::string_view answer) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(answer, '\n')) n += IsBullet(line);
  return n;
}

std::vector<CheckResult> EvaluateAcceptance(const std::vector<AcceptanceCheck>& checks,
                                            absl::string_view answer,
                                            const std::set<std::string>& files_read) {
  std::vector<CheckResult> out;
  for (const AcceptanceCheck& c : checks) {
    CheckResult r;
    r.check = c.Name();
    switch (c.kind) {
      case AcceptanceCheck::Kind::kAnswerContains:
        r.passed = absl::StrContains(answer, c.text);
        r.detail = absl::StrCat(r.passed ? "contains" : "does not contain", " '", c.text.substr(0, 80), "'");
        break;
      case AcceptanceCheck::Kind::kExactlyNBullets: {
        int n = CountBullets(answer);
        r.passed = n == c.n;
        r.detail = absl::StrCat(n, " bullets, expected ", c.n);
        break;
      }
      case AcceptanceCheck::Kind::kCitedFilesWereRead: {
        std::vector<std::string> cited = CitedFiles(answer), unread;
        for (const auto& f : cited) {
          if (!files_read.count(f)) unread.push_back(f);
        }
        r.passed = unread.empty();
        r.detail = unread.empty()
                       ? absl::StrCat("cited and read: ", cited.empty() ? "(none)" : absl::StrJoin(cited, ", "))
                       : absl::StrCat("cited but not read: ", absl::StrJoin(unread, ", "));
        break;
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace gantry::harness
