// sed and awk scripts (program_words.h): the commands they run, found by scanning the
// script as the program parses it; anything not understood is denied.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "sandbox-svc/command_rules.h"
#include "sandbox-svc/program_words.h"

namespace gantry::sandbox::programs {
namespace {

// --- sed (GNU sed): the e command and the s///e flag run commands ----------------------

// Scans a sed script. Returns "" (with the texts of `e COMMAND` in *runs) or why not.
std::string ScanSedScript(absl::string_view s, Argv* runs) {
  size_t i = 0;
  const size_t n = s.size();
  auto blank = [&] {
    while (i < n && (s[i] == ' ' || s[i] == '\t')) ++i;
  };
  auto to_eol = [&] {
    while (i < n && s[i] != '\n') ++i;
  };
  // Up to an unescaped `delim`; false when the script ends first.
  auto delimited = [&](char delim) {
    while (i < n && s[i] != delim) {
      if (s[i] == '\\') ++i;
      if (i < n && s[i] == '\n' && delim != '\n') return false;
      ++i;
    }
    if (i >= n) return false;
    ++i;
    return true;
  };
  auto address = [&]() -> bool {
    if (i < n && absl::ascii_isdigit(s[i])) {
      while (i < n && absl::ascii_isdigit(s[i])) ++i;
      if (i < n && s[i] == '~') {
        ++i;
        while (i < n && absl::ascii_isdigit(s[i])) ++i;
      }
    } else if (i < n && s[i] == '$') {
      ++i;
    } else if (i < n && (s[i] == '/' || s[i] == '\\')) {
      char delim = '/';
      if (s[i] == '\\') {
        if (i + 1 >= n || s[i + 1] == '\n' || s[i + 1] == '\\') return false;
        delim = s[++i];
      }
      ++i;
      if (!delimited(delim)) return false;
      while (i < n && (s[i] == 'I' || s[i] == 'M')) ++i;
    }
    return true;
  };
  while (true) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == ';')) ++i;
    if (i >= n) return "";
    if (!address()) return "an unterminated address";
    blank();
    if (i < n && s[i] == ',') {
      ++i;
      blank();
      if (i < n && (s[i] == '+' || s[i] == '~')) {
        ++i;
        while (i < n && absl::ascii_isdigit(s[i])) ++i;
      } else if (!address()) {
        return "an unterminated address";
      }
    }
    blank();
    while (i < n && (s[i] == '!' || s[i] == ' ' || s[i] == '\t')) ++i;
    if (i >= n) return "a missing command";
    const char c = s[i++];
    if (c == '{') continue;  // a block: a command may follow at once
    switch (c) {
      case '}': case '=': case 'd': case 'D': case 'F': case 'g': case 'G':
      case 'h': case 'H': case 'n': case 'N': case 'p': case 'P': case 'x': case 'z':
        break;
      case 'l': case 'L': case 'q': case 'Q':
        blank();
        while (i < n && absl::ascii_isdigit(s[i])) ++i;
        break;
      case '#': case 'r': case 'R': case 'w': case 'W':
        to_eol();
        break;
      case ':': case 'b': case 't': case 'T': case 'v':
        while (i < n && s[i] != '\n' && s[i] != ';') ++i;
        break;
      case 'a': case 'i': case 'c':
        // Text to the end of the line; a backslash continues it on the next.
        while (i < n && s[i] != '\n') i += s[i] == '\\' ? 2 : 1;
        break;
      case 'e': {
        blank();
        const size_t from = i;
        to_eol();
        std::string cmd(s.substr(from, i - from));
        if (cmd.empty()) return "its e command runs the pattern space as a command";
        runs->push_back(cmd);
        break;
      }
      case 's': case 'y': {
        if (i >= n || s[i] == '\n' || s[i] == '\\') return "a malformed s or y command";
        const char delim = s[i++];
        if (!delimited(delim) || !delimited(delim)) return "an unterminated s or y command";
        if (c == 'y') break;
        while (i < n) {
          const char f = s[i];
          if (f == 'e') return "its s///e flag runs the pattern space as a command";
          if (f == 'w') {
            to_eol();
            break;
          }
          if (f == 'g' || f == 'p' || f == 'i' || f == 'I' || f == 'm' || f == 'M' ||
              absl::ascii_isdigit(f)) {
            ++i;
            continue;
          }
          break;
        }
        break;
      }
      default:
        return absl::StrCat("sed command '", std::string(1, c), "' is not understood");
    }
    blank();
    if (i < n && !(s[i] == ';' || s[i] == '\n' || s[i] == '}' || s[i] == '#')) {
      return "extra characters after a command";
    }
  }
}

}  // namespace

Unwrapped UnwrapSed(const Argv& a) {
  static const Grammar g{"bsnrzuEe:f:l:i::",
                         {{"binary", Arity::kNone, "-b"},
                          {"debug", Arity::kNone, "--debug"},
                          {"expression", Arity::kRequired, "-e"},
                          {"file", Arity::kRequired, "-f"},
                          {"follow-symlinks", Arity::kNone, "--follow-symlinks"},
                          {"in-place", Arity::kOptional, "-i"},
                          {"line-length", Arity::kRequired, "-l"},
                          {"null-data", Arity::kNone, "-z"},
                          {"zero-terminated", Arity::kNone, "-z"},
                          {"quiet", Arity::kNone, "-n"},
                          {"silent", Arity::kNone, "-n"},
                          {"posix", Arity::kNone, "--posix"},
                          {"regexp-extended", Arity::kNone, "-E"},
                          {"sandbox", Arity::kNone, "--sandbox"},
                          {"separate", Arity::kNone, "-s"},
                          {"unbuffered", Arity::kNone, "-u"},
                          {"help", Arity::kNone, "--help"},
                          {"version", Arity::kNone, "--version"}}};
  Unwrapped u;
  u.runner = true;
  u.tail = Tail::kDenied;
  u.own.assign(a.begin() + 1, a.end());
  // GNU sed permutes: options may follow operands (until "--").
  std::vector<Option> opts;
  Argv operands;
  OptionReader r(&a, 1, g);
  Option o;
  while (true) {
    OptionReader::Result res = r.Next(&o, &u.error);
    if (res == OptionReader::kError) return u;
    if (res == OptionReader::kOption) {
      opts.push_back(o);
      continue;
    }
    size_t k = r.index();
    if (r.ended_by_dashdash() || k >= a.size()) {
      for (; k < a.size(); ++k) operands.push_back(a[k]);
      break;
    }
    operands.push_back(a[k]);
    r.Restart(&a, k + 1);
  }
  bool sandboxed = false, from_file = false;
  std::string script;
  bool has_e = false;
  for (const Option& x : opts) {
    if (x.key == "--sandbox") sandboxed = true;
    if (x.key == "-f") from_file = true;
    if (x.key == "-e") {
      absl::StrAppend(&script, has_e ? "\n" : "", x.value);
      has_e = true;
    }
  }
  if (sandboxed) return u;  // sed itself then refuses e, r and w
  if (from_file) {
    u.error = "a script file (-f) is not visible to the rules (use --sandbox)";
    return u;
  }
  if (!has_e) {
    if (operands.empty()) return u;  // sed fails without a script
    script = operands[0];
  }
  u.reparsed.push_back(script);
  Argv runs;
  std::string why = ScanSedScript(script, &runs);
  if (!why.empty()) {
    u.error = absl::StrCat("the script is denied: ", why);
    return u;
  }
  for (auto& cmd : runs) u.inner.push_back(ShellCommand(cmd));
  return u;
}

namespace {

// --- awk (mawk, gawk, original-awk): system() and pipes run commands ----------------------

// Scans an awk program. Returns "" (with the string literals given to system() in
// *runs) or why not. A '/' starts a regular expression only where no operand precedes
// it, so that a division is never skipped as one.
std::string ScanAwkProgram(absl::string_view p, Argv* runs) {
  size_t i = 0;
  const size_t n = p.size();
  bool regex_ok = true;
  auto skip_blank = [&] {
    while (i < n && (p[i] == ' ' || p[i] == '\t')) ++i;
  };
  // A string literal at i (p[i] == '"'); `*plain` false when it holds an escape.
  auto literal = [&](std::string* text, bool* plain) -> bool {
    *plain = true;
    for (++i; i < n && p[i] != '"'; ++i) {
      if (p[i] == '\n') return false;
      if (p[i] == '\\') {
        *plain = false;
        ++i;
      }
      if (i < n) text->push_back(p[i]);
    }
    if (i >= n) return false;
    ++i;
    return true;
  };
  while (i < n) {
    const char c = p[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
    } else if (c == '\n') {
      regex_ok = true;
      ++i;
    } else if (c == '#') {
      while (i < n && p[i] != '\n') ++i;
    } else if (c == '\\' && i + 1 < n && p[i + 1] == '\n') {
      i += 2;
    } else if (c == '"') {
      std::string text;
      bool plain;
      if (!literal(&text, &plain)) return "an unterminated string";
      regex_ok = false;
    } else if (c == '/' && regex_ok) {
      // Awks disagree on a '/' inside a bracket expression (gawk keeps it in the
      // regular expression, others may end it there): such a program is denied.
      bool bracket = false;
      for (++i; i < n && (bracket || p[i] != '/'); ++i) {
        if (p[i] == '\n') return "an unterminated regular expression";
        if (bracket && p[i] == '/') return "a '/' inside a bracket expression";
        if (p[i] == '\\') {
          ++i;
        } else if (!bracket && p[i] == '[') {
          bracket = true;
          if (i + 1 < n && p[i + 1] == '^') ++i;
          if (i + 1 < n && p[i + 1] == ']') ++i;  // a leading ']' is a member
        } else if (bracket && p[i] == ']') {
          bracket = false;
        }
      }
      if (i >= n) return "an unterminated regular expression";
      ++i;
      regex_ok = false;
    } else if (absl::ascii_isalpha(c) || c == '_') {
      const size_t from = i;
      while (i < n && (absl::ascii_isalnum(p[i]) || p[i] == '_')) ++i;
      const absl::string_view word = p.substr(from, i - from);
      if (word == "system") {
        skip_blank();
        std::string text;
        bool plain = false;
        if (i < n && p[i] == '(') {
          ++i;
          skip_blank();
          if (i < n && p[i] == '"' && literal(&text, &plain) && plain) {
            skip_blank();
            if (i < n && p[i] == ')') {
              ++i;
              runs->push_back(text);
              regex_ok = false;
              continue;
            }
          }
        }
        return "system() is given something other than one plain string literal";
      }
      static const std::set<absl::string_view> kBeforeOperand = {
          "print", "printf", "return", "case", "do", "else", "in"};
      regex_ok = kBeforeOperand.count(word) > 0;
    } else if (absl::ascii_isdigit(c) || c == '.') {
      while (i < n && (absl::ascii_isalnum(p[i]) || p[i] == '.')) ++i;
      regex_ok = false;
    } else if (c == '|') {
      if (i + 1 < n && p[i + 1] == '|') {
        i += 2;
        regex_ok = true;
        continue;
      }
      return "a pipe to or from a command";
    } else if (c == '@') {
      return "'@' (gawk's @load, @include, indirect calls)";
    } else if ((c == '+' || c == '-') && i + 1 < n && p[i + 1] == c) {
      i += 2;
      regex_ok = false;
    } else if (c == ')' || c == ']' || c == '$') {
      ++i;
      regex_ok = false;
    } else {
      ++i;
      regex_ok = true;  // an operator or punctuation: an operand comes next
    }
  }
  return "";
}

}  // namespace

Unwrapped UnwrapAwk(const Argv& a) {
  Unwrapped u;
  u.runner = true;
  u.tail = Tail::kDenied;
  u.own.assign(a.begin() + 1, a.end());
  size_t i = 1;
  for (; i < a.size() && IsFlag(a[i]); ++i) {
    const std::string& w = a[i];
    if (w == "--") {
      ++i;
      break;
    }
    if (absl::StartsWith(w, "-F") || absl::StartsWith(w, "-v")) {
      if (w.size() == 2) ++i;
      continue;
    }
    u.error = absl::StrCat("awk option '", Short(w),
                           "' is not modelled (program files, sources and extensions are "
                           "not visible to the rules)");
    return u;
  }
  if (i >= a.size()) return u;  // awk fails without a program
  u.reparsed.push_back(a[i]);
  Argv runs;
  std::string why = ScanAwkProgram(a[i], &runs);
  if (!why.empty()) {
    u.error = absl::StrCat("the program is denied: ", why);
    return u;
  }
  for (auto& cmd : runs) u.inner.push_back(ShellCommand(cmd));
  return u;
}

}  // namespace gantry::sandbox::programs
