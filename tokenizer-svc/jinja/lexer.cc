#include "tokenizer-svc/jinja/lexer.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "tokenizer-svc/jinja/error.h"
#include "tokenizer-svc/jinja/py_str.h"

namespace gantry::jinja {
namespace {

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Python's \s (Unicode whitespace) at s[i]: its byte length, or 0.
size_t SpaceLength(absl::string_view s, size_t i) {
  size_t j = i;
  uint32_t cp = pystr::NextCodePoint(s, &j);
  return pystr::IsSpace(cp) ? j - i : 0;
}

// Python str.rstrip() (Unicode whitespace).
absl::string_view RStripSpace(absl::string_view s) {
  std::vector<uint32_t> cps = pystr::CodePoints(s);
  size_t keep = s.size();
  for (size_t k = cps.size(); k > 0 && pystr::IsSpace(cps[k - 1]); --k) {
    std::string enc;
    AppendUtf8(cps[k - 1], &enc);
    keep -= enc.size();
  }
  return s.substr(0, keep);
}

bool OnlySpace(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t n = SpaceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

int CountNewlines(absl::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

class Lexer {
 public:
  explicit Lexer(absl::string_view src) : src_(src) {}

  absl::StatusOr<std::vector<Token>> Run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t tag = FindTagStart(pos_);
      if (tag == absl::string_view::npos) {
        EmitText(src_.substr(pos_));
        pos_ = src_.size();
        break;
      }
      absl::string_view text = src_.substr(pos_, tag - pos_);
      char kind = src_[tag + 1];  // '{', '%' or '#'
      char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      bool raw = kind == '%' && IsRawBegin(tag);
      if (sign == '-') {
        text = RStripSpace(text);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: only whitespace between the line start and the tag.
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == absl::string_view::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) && OnlySpace(text.substr(l_pos))) {
          text = text.substr(0, l_pos);
        }
      }
      EmitText(text);
      line_ += CountNewlines(src_.substr(pos_, tag - pos_));
      pos_ = tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      absl::Status status;
      if (raw) {
        status = LexRaw(&line_starting);
      } else if (kind == '#') {
        status = LexComment(&line_starting);
      } else {
        status = LexTag(kind == '{', &line_starting);
      }
      if (!status.ok()) return status;
    }
    tokens_.push_back({TokenKind::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return absl::string_view::npos;
  }

  void EmitText(absl::string_view text) {
    if (!text.empty()) tokens_.push_back({TokenKind::kText, std::string(text), line_});
  }

  // Matches `{%[-+]?\s*raw\s*-?%}` at `tag`.
  bool IsRawBegin(size_t tag) const {
    size_t i = tag + 2;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    i = SkipSpace(i);
    if (src_.substr(i, 3) != "raw") return false;
    i = SkipSpace(i + 3);
    if (i < src_.size() && src_[i] == '-') ++i;
    return src_.substr(i, 2) == "%}";
  }

  size_t SkipSpace(size_t i) const {
    while (i < src_.size()) {
      size_t n = SpaceLength(src_, i);
      if (n == 0) break;
      i += n;
    }
    return i;
  }

  // After the end marker: `-` strips all following whitespace; trim_blocks removes
  // one newline unless `+`.
  void AfterEnd(char sign, bool trim_newline, bool* line_starting) {
    *line_starting = false;
    if (sign == '-') {
      size_t end = SkipSpace(pos_);
      line_ += CountNewlines(src_.substr(pos_, end - pos_));
      *line_starting = end > pos_ && src_[end - 1] == '\n';
      pos_ = end;
    } else if (sign != '+' && trim_newline && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
      *line_starting = true;
    }
  }

  absl::Status LexRaw(bool* line_starting) {
    int start_line = line_;
    // Skip the `raw -%}` of the opening tag.
    size_t close = src_.find("%}", pos_);
    char open_sign = src_[close - 1];
    line_ += CountNewlines(src_.substr(pos_, close + 2 - pos_));
    pos_ = close + 2;
    if (open_sign == '-') AfterEnd('-', false, line_starting);
    // Find `{%[-+]?\s*endraw\s*[-+]?%}`.
    for (size_t i = pos_; i + 1 < src_.size(); ++i) {
      if (src_[i] != '{' || src_[i + 1] != '%') continue;
      size_t j = i + 2;
      char sign = '\0';
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) sign = src_[j++];
      j = SkipSpace(j);
      if (src_.substr(j, 6) != "endraw") continue;
      j = SkipSpace(j + 6);
      char end_sign = '\0';
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) end_sign = src_[j++];
      if (src_.substr(j, 2) != "%}") continue;
      absl::string_view text = src_.substr(pos_, i - pos_);
      if (sign == '-') {
        text = RStripSpace(text);
      } else if (sign != '+') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == absl::string_view::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || *line_starting) && OnlySpace(text.substr(l_pos))) {
          text = text.substr(0, l_pos);
        }
      }
      EmitText(text);
      line_ += CountNewlines(src_.substr(pos_, j + 2 - pos_));
      pos_ = j + 2;
      AfterEnd(end_sign, true, line_starting);
      return absl::OkStatus();
    }
    return TemplateError(start_line, "missing end of raw directive");
  }

  absl::Status LexComment(bool* line_starting) {
    int start_line = line_;
    size_t end = src_.find("#}", pos_);
    if (end == absl::string_view::npos) return TemplateError(start_line, "missing end of comment tag");
    char sign = (end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+')) ? src_[end - 1] : '\0';
    line_ += CountNewlines(src_.substr(pos_, end + 2 - pos_));
    pos_ = end + 2;
    AfterEnd(sign, true, line_starting);
    return absl::OkStatus();
  }

  absl::Status LexTag(bool variable, bool* line_starting) {
    int start_line = line_;
    tokens_.push_back({variable ? TokenKind::kVarBegin : TokenKind::kBlockBegin, "", line_});
    const char end_char = variable ? '}' : '%';
    int depth = 0;  // open brackets: an end marker inside them is read as brackets
    while (true) {
      if (pos_ >= src_.size()) {
        return TemplateError(start_line, variable ? "unexpected end of template, expected '}}'"
                                                  : "unexpected end of template, expected '%}'");
      }
      if (depth == 0) {
        char sign = '\0';
        size_t i = pos_;
        if (src_[i] == '-' || (!variable && src_[i] == '+')) sign = src_[i++];
        if (src_.substr(i, 2) == std::string{end_char, '}'}) {
          tokens_.push_back({variable ? TokenKind::kVarEnd : TokenKind::kBlockEnd, "", line_});
          pos_ = i + 2;
          AfterEnd(sign, !variable, line_starting);
          return absl::OkStatus();
        }
      }
      size_t space = SpaceLength(src_, pos_);
      if (space > 0) {
        line_ += src_[pos_] == '\n';
        pos_ += space;
        continue;
      }
      char c = src_[pos_];
      if (IsNameStart(c)) {
        size_t start = pos_;
        while (pos_ < src_.size() && (IsNameStart(src_[pos_]) || IsDigit(src_[pos_]))) ++pos_;
        tokens_.push_back({TokenKind::kName, std::string(src_.substr(start, pos_ - start)), line_});
      } else if (IsDigit(c)) {
        LexNumber();
      } else if (c == '\'' || c == '"') {
        absl::Status status = LexString();
        if (!status.ok()) return status;
      } else {
        static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "*",
                                          "/",  "%",  "~",  "<",  ">",  "=",  ".", ":", "|",
                                          ",",  "(",  ")",  "[",  "]",  "{",  "}", ";"};
        std::string op;
        for (const char* candidate : kOps) {
          if (src_.substr(pos_, std::char_traits<char>::length(candidate)) == candidate) {
            op = candidate;
            break;
          }
        }
        if (op.empty()) {
          return TemplateError(line_, absl::StrCat("unexpected char '", std::string(1, c), "'"));
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        pos_ += op.size();
        tokens_.push_back({TokenKind::kOperator, op, line_});
      }
    }
  }

  // Digits with single underscores between them.
  std::string Digits() {
    std::string out;
    while (pos_ < src_.size()) {
      if (IsDigit(src_[pos_])) {
        out.push_back(src_[pos_++]);
      } else if (src_[pos_] == '_' && pos_ + 1 < src_.size() && IsDigit(src_[pos_ + 1]) &&
                 !out.empty()) {
        ++pos_;
      } else {
        break;
      }
    }
    return out;
  }

  void LexNumber() {
    // Jinja2 reads no float directly after a '.', so that `a.0.1` is two lookups.
    bool after_dot = !tokens_.empty() && tokens_.back().kind == TokenKind::kOperator &&
                     tokens_.back().text == "." && pos_ > 0 && src_[pos_ - 1] == '.';
    size_t start = pos_;
    std::string text = Digits();
    bool is_float = false;
    if (!after_dot) {
      if (pos_ + 1 < src_.size() && src_[pos_] == '.' && IsDigit(src_[pos_ + 1])) {
        ++pos_;
        text += "." + Digits();
        is_float = true;
      }
      if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
        size_t save = pos_;
        std::string exp = "e";
        ++pos_;
        if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-')) exp += src_[pos_++];
        if (pos_ < src_.size() && IsDigit(src_[pos_])) {
          text += exp + Digits();
          is_float = true;
        } else {
          pos_ = save;
        }
      }
    }
    (void)start;
    tokens_.push_back({is_float ? TokenKind::kFloat : TokenKind::kInteger, text, line_});
  }

  // Python string literal escapes (Jinja2 decodes with "unicode-escape").
  absl::Status LexString() {
    int start_line = line_;
    char quote = src_[pos_++];
    std::string out;
    while (true) {
      if (pos_ >= src_.size()) return TemplateError(start_line, "unterminated string");
      char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= src_.size()) return TemplateError(start_line, "unterminated string");
      char e = src_[pos_++];
      switch (e) {
        case '\n': ++line_; break;  // line continuation
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            char h = pos_ < src_.size() ? src_[pos_] : '\0';
            int v = (h >= '0' && h <= '9') ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
            if (v < 0) return TemplateError(line_, "truncated \\x/\\u escape in string");
            cp = cp * 16 + static_cast<uint32_t>(v);
            ++pos_;
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return TemplateError(line_, "escape is not a Unicode scalar value");
          }
          AppendUtf8(cp, &out);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k) {
              cp = cp * 8 + static_cast<uint32_t>(src_[pos_++] - '0');
            }
            AppendUtf8(cp, &out);
          } else {
            out.push_back('\\');  // unknown escapes keep the backslash, as Python
            out.push_back(e);
          }
      }
    }
    tokens_.push_back({TokenKind::kString, std::move(out), start_line});
    return absl::OkStatus();
  }

  absl::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::string NormalizeNewlines(absl::string_view source) {
  std::string out;
  out.reserve(source.size());
  size_t i = 0;
  while (i < source.size()) {
    size_t start = i;
    uint32_t cp = pystr::NextCodePoint(source, &i);
    if (cp == '\r' && i < source.size() && source[i] == '\n') ++i;
    if (pystr::IsLineBreak(cp)) {
      out.push_back('\n');
    } else {
      out.append(source.data() + start, i - start);
    }
  }
  // splitlines() drops the line break that ends the text.
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view source, const LexerLimits& limits) {
  if (source.size() > limits.max_source_bytes) {
    return TemplateError(1, "template source is too large");
  }
  std::string normalized = NormalizeNewlines(source);
  return Lexer(normalized).Run();
}

}  // namespace gantry::jinja
