#include "policy/path_glob.h"

#include <cstdint>
#include <vector>

namespace gantry::policy {
namespace {

constexpr size_t kMaxPathBytes = 4096;

// Memoised matcher over (pattern position, path position).
class Matcher {
 public:
  Matcher(absl::string_view pattern, absl::string_view path)
      : p_(pattern), s_(path), memo_((p_.size() + 1) * (s_.size() + 1), -1) {}

  bool Match(size_t pi, size_t si) {
    int8_t& slot = memo_[pi * (s_.size() + 1) + si];
    if (slot < 0) slot = Compute(pi, si) ? 1 : 0;
    return slot == 1;
  }

 private:
  bool AtSegmentStart(size_t pi) const { return pi == 0 || p_[pi - 1] == '/'; }

  bool Compute(size_t pi, size_t si) {
    if (pi == p_.size()) return si == s_.size();
    if (p_.compare(pi, 3, "**/") == 0 && AtSegmentStart(pi)) {
      // Zero segments, or one or more whole segments ending in '/'.
      if (Match(pi + 3, si)) return true;
      for (size_t k = si; k < s_.size(); ++k) {
        if (s_[k] == '/' && k > si && Match(pi + 3, k + 1)) return true;
      }
      return false;
    }
    if (p_.compare(pi, 2, "**") == 0 && pi + 2 == p_.size()) {
      return si < s_.size();  // the rest, at least one character
    }
    char c = p_[pi];
    if (c == '*') {
      for (size_t k = si; k <= s_.size(); ++k) {
        if (Match(pi + 1, k)) return true;
        if (k < s_.size() && s_[k] == '/') break;
      }
      return false;
    }
    if (si >= s_.size()) return false;
    if (c == '?') return s_[si] != '/' && Match(pi + 1, si + 1);
    return s_[si] == c && Match(pi + 1, si + 1);
  }

  absl::string_view p_;
  absl::string_view s_;
  std::vector<int8_t> memo_;
};

}  // namespace

bool IsCleanPath(absl::string_view path) {
  if (path.empty() || path.size() > kMaxPathBytes) return false;
  if (path.size() > 1 && path.back() == '/') return false;
  size_t start = path[0] == '/' ? 1 : 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == absl::string_view::npos) end = path.size();
    absl::string_view segment = path.substr(start, end - start);
    if (segment.empty() && !(path == "/")) return false;
    if (segment == "." || segment == "..") return false;
    if (segment.find('\0') != absl::string_view::npos) return false;
    start = end + 1;
  }
  return true;
}

std::string AbsoluteCleanPath(absl::string_view cwd, absl::string_view operand) {
  if (operand.empty() || (operand[0] != '/' && (cwd.empty() || cwd[0] != '/'))) return "";
  std::vector<absl::string_view> parts;
  auto add = [&parts](absl::string_view path) {
    size_t start = 0;
    while (start <= path.size()) {
      size_t end = path.find('/', start);
      if (end == absl::string_view::npos) end = path.size();
      absl::string_view segment = path.substr(start, end - start);
      if (segment == "..") {
        if (!parts.empty()) parts.pop_back();
      } else if (!segment.empty() && segment != ".") {
        parts.push_back(segment);
      }
      start = end + 1;
    }
  };
  if (operand[0] != '/') add(cwd);
  add(operand);
  std::string out;
  for (absl::string_view part : parts) {
    out.push_back('/');
    out.append(part.data(), part.size());
  }
  if (out.empty()) out = "/";
  return IsCleanPath(out) ? out : "";
}

bool GlobMatch(absl::string_view pattern, absl::string_view path) {
  if (!IsCleanPath(path)) return false;
  Matcher matcher(pattern, path);
  return matcher.Match(0, 0);
}

}  // namespace gantry::policy
