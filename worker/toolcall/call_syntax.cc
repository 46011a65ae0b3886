#include "worker/toolcall/call_syntax.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error_codes.h"

namespace gantry::toolcall {

absl::Status Malformed(absl::string_view protocol, absl::string_view what) {
  return ReasonError("invalid_tool_call", absl::StrCat(protocol, ": ", what));
}

std::string Excerpt(absl::string_view text, size_t limit) {
  bool cut = text.size() > limit;
  if (cut) {
    size_t n = limit;
    while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
    text = text.substr(0, n);
  }
  std::string out;
  json::AppendQuoted(text, /*ensure_ascii=*/true, &out);
  if (cut) out += "...";
  return out;
}

LiteralMatch MatchLiteral(absl::string_view text, size_t pos, absl::string_view literal) {
  absl::string_view rest = pos <= text.size() ? text.substr(pos) : absl::string_view();
  if (rest.size() >= literal.size()) {
    return rest.substr(0, literal.size()) == literal ? LiteralMatch::kYes : LiteralMatch::kNo;
  }
  return literal.substr(0, rest.size()) == rest ? LiteralMatch::kPartial : LiteralMatch::kNo;
}

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t SkipJsonSpace(absl::string_view text, size_t pos) {
  while (pos < text.size() && IsJsonSpace(text[pos])) ++pos;
  return pos;
}

void JsonExtent::Reset(size_t start) {
  start_ = start;
  pos_ = start;
  depth_ = 0;
  in_string_ = false;
  escape_ = false;
}

size_t JsonExtent::Advance(absl::string_view text) {
  while (pos_ < text.size()) {
    char c = text[pos_++];
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      if (--depth_ <= 0) return pos_;
    }
  }
  return absl::string_view::npos;
}

absl::StatusOr<json::Value> ParseCallJson(absl::string_view protocol, absl::string_view what,
                                          absl::string_view text) {
  auto value = json::Parse(text);
  if (!value.ok()) {
    return Malformed(protocol, absl::StrCat(what, " is not valid JSON (", value.status().message(),
                                            "): ", Excerpt(text)));
  }
  return std::move(value).value();
}

absl::StatusOr<RawToolCall> CallFromObject(absl::string_view protocol, const json::Value& object,
                                           std::initializer_list<absl::string_view> argument_keys,
                                           std::initializer_list<absl::string_view> ignored_keys) {
  if (!object.is_object()) return Malformed(protocol, "a tool call must be a JSON object");
  RawToolCall call;
  const json::Value* name = object.Find("name");
  if (name == nullptr || !name->is_string() || name->as_string().empty()) {
    return Malformed(protocol, "a tool call needs \"name\": a non-empty string");
  }
  call.name = name->as_string();
  const json::Value* arguments = nullptr;
  for (const auto& [key, value] : object.members()) {
    if (key == "name") continue;
    if (std::find(argument_keys.begin(), argument_keys.end(), key) != argument_keys.end()) {
      if (arguments != nullptr) {
        return Malformed(protocol,
                         absl::StrCat("call to \"", call.name, "\" has its arguments twice"));
      }
      arguments = &value;
      continue;
    }
    if (std::find(ignored_keys.begin(), ignored_keys.end(), key) != ignored_keys.end()) continue;
    return Malformed(protocol, absl::StrCat("call to \"", call.name, "\" has an unexpected member ",
                                            Excerpt(key)));
  }
  if (arguments == nullptr) {
    call.arguments = json::Value::EmptyObject();
  } else if (!arguments->is_object()) {
    return Malformed(protocol,
                     absl::StrCat("the arguments of \"", call.name, "\" must be a JSON object"));
  } else {
    call.arguments = *arguments;
  }
  return call;
}

}  // namespace gantry::toolcall
