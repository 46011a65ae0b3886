// qwen3_coder_xml (Qwen3-Coder; docs/tool-protocols.md, "qwen3_coder_xml"):
//   <tool_call>
//   <function=NAME>
//   <parameter=KEY>
//   raw value
//   </parameter>
//   </function>
//   </tool_call>
// Values are raw text, typed by the tool's schema.
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json_schema.h"
#include "common/utf8.h"
#include "worker/toolcall/call_syntax.h"

namespace gantry::toolcall {
namespace {

constexpr absl::string_view kProtocol = "qwen3_coder_xml";
constexpr absl::string_view kFunctionOpen = "<function=";
constexpr absl::string_view kFunctionClose = "</function>";
constexpr absl::string_view kParameterOpen = "<parameter=";
constexpr absl::string_view kParameterClose = "</parameter>";
constexpr absl::string_view kToolCallClose = "</tool_call>";
// Function and parameter names longer than this are malformed (and bound what is held).
constexpr size_t kMaxNameBytes = 256;

class Qwen3CoderXmlSyntax : public CallSyntax {
 public:
  explicit Qwen3CoderXmlSyntax(ParameterTypesFn parameter_types)
      : parameter_types_(std::move(parameter_types)) {}

  std::vector<std::string> OpenMarkers() const override { return {"<tool_call>"}; }

  void Reset() override {
    state_ = State::kExpectFunction;
    pos_ = 0;
    function_.clear();
    arguments_ = json::Value::EmptyObject();
  }

  absl::StatusOr<ScanResult> Scan(absl::string_view body, bool at_end) override {
    ScanResult result;
    while (true) {
      switch (state_) {
        case State::kExpectFunction: {
          pos_ = SkipJsonSpace(body, pos_);
          LiteralMatch m = MatchLiteral(body, pos_, kFunctionOpen);
          if (m == LiteralMatch::kNo) {
            return Malformed(kProtocol, absl::StrCat("expected <function=NAME> after <tool_call>, "
                                                     "got ",
                                                     Excerpt(body.substr(pos_))));
          }
          if (m == LiteralMatch::kPartial || pos_ >= body.size()) return Wait(body, at_end, result);
          pos_ += kFunctionOpen.size();
          name_start_ = pos_;
          state_ = State::kFunctionName;
          break;
        }
        case State::kFunctionName:
        case State::kParameterName: {
          const char* what = state_ == State::kFunctionName ? "function" : "parameter";
          while (pos_ < body.size() && body[pos_] != '>') {
            char c = body[pos_];
            if (c == '<' || c == '\n' || c == '\r') {
              return Malformed(kProtocol, absl::StrCat("unterminated <", what, "=NAME> tag: ",
                                                       Excerpt(body.substr(name_start_))));
            }
            if (++pos_ - name_start_ > kMaxNameBytes) {
              return Malformed(kProtocol,
                               absl::StrCat(what, " name longer than ", kMaxNameBytes, " bytes"));
            }
          }
          if (pos_ >= body.size()) return Wait(body, at_end, result);
          std::string name(body.substr(name_start_, pos_ - name_start_));
          ++pos_;  // '>'
          if (name.empty() || !IsValidUtf8(name)) {
            return Malformed(kProtocol, absl::StrCat("empty or invalid ", what, " name"));
          }
          if (state_ == State::kFunctionName) {
            function_ = std::move(name);
            state_ = State::kBetween;
          } else {
            if (arguments_.Find(name) != nullptr) {
              return Malformed(kProtocol,
                               absl::StrCat("parameter ", Excerpt(name),
                                            " appears twice in the call to \"", function_, "\""));
            }
            key_ = std::move(name);
            value_start_ = pos_;
            state_ = State::kParameterValue;
          }
          break;
        }
        case State::kBetween: {
          pos_ = SkipJsonSpace(body, pos_);
          LiteralMatch parameter = MatchLiteral(body, pos_, kParameterOpen);
          LiteralMatch end = MatchLiteral(body, pos_, kFunctionClose);
          if (parameter == LiteralMatch::kYes) {
            pos_ += kParameterOpen.size();
            name_start_ = pos_;
            state_ = State::kParameterName;
          } else if (end == LiteralMatch::kYes) {
            pos_ += kFunctionClose.size();
            state_ = State::kAfterFunction;
          } else if (parameter == LiteralMatch::kPartial || end == LiteralMatch::kPartial ||
                     pos_ >= body.size()) {
            return Wait(body, at_end, result);
          } else {
            // Also where a value contained a literal </parameter>: its rest lands here.
            return Malformed(
                kProtocol, absl::StrCat("expected <parameter=KEY> or </function> in the call to \"",
                                        function_, "\", got ", Excerpt(body.substr(pos_))));
          }
          break;
        }
        case State::kParameterValue: {
          size_t from = std::max(value_start_, pos_);
          size_t close = body.find(kParameterClose, from);
          if (close == absl::string_view::npos) {
            // Resume the search where a close tag could still begin.
            if (body.size() >= kParameterClose.size()) {
              pos_ = std::max(from, body.size() - kParameterClose.size() + 1);
            }
            return Wait(body, at_end, result);
          }
          GANTRY_RETURN_IF_ERROR(AddParameter(body.substr(value_start_, close - value_start_)));
          pos_ = close + kParameterClose.size();
          state_ = State::kBetween;
          break;
        }
        case State::kAfterFunction: {
          pos_ = SkipJsonSpace(body, pos_);
          LiteralMatch m = MatchLiteral(body, pos_, kToolCallClose);
          if (m == LiteralMatch::kNo) {
            return Malformed(kProtocol,
                             absl::StrCat("expected </tool_call> after </function>, got ",
                                          Excerpt(body.substr(pos_))));
          }
          if (m == LiteralMatch::kPartial || pos_ >= body.size()) return Wait(body, at_end, result);
          result.calls.push_back({function_, std::move(arguments_)});
          result.done = true;
          result.consumed = pos_ + kToolCallClose.size();
          Reset();
          return result;
        }
      }
    }
  }

 private:
  enum class State {
    kExpectFunction,
    kFunctionName,
    kBetween,
    kParameterName,
    kParameterValue,
    kAfterFunction,
  };

  absl::StatusOr<ScanResult> Wait(absl::string_view body, bool at_end, ScanResult result) {
    if (!at_end) return result;
    return Malformed(kProtocol, absl::StrCat("unterminated <tool_call>",
                                             function_.empty() ? "" : " to \"" + function_ + "\"",
                                             ": ", Excerpt(body, 60)));
  }

  // The value is raw text; the template writes it between newlines, so one leading and
  // one trailing "\n" are framing, not content.
  absl::Status AddParameter(absl::string_view raw) {
    if (!raw.empty() && raw.front() == '\n') raw.remove_prefix(1);
    if (!raw.empty() && raw.back() == '\n') raw.remove_suffix(1);
    if (!IsValidUtf8(raw)) {
      return Malformed(kProtocol, absl::StrCat("parameter ", Excerpt(key_), " of \"", function_,
                                               "\" is not valid UTF-8"));
    }
    uint8_t types = parameter_types_ ? parameter_types_(function_, key_) : 0;
    if (types == 0 || (types & json_schema::kTypeString)) {
      arguments_.Set(key_, json::Value::String(std::string(raw)));
      return absl::OkStatus();
    }
    auto value = json::Parse(raw);
    if (!value.ok()) {
      return Malformed(kProtocol, absl::StrCat("parameter ", Excerpt(key_), " of \"", function_,
                                               "\" is declared non-string but its value is not "
                                               "JSON (",
                                               value.status().message(), "): ", Excerpt(raw)));
    }
    arguments_.Set(key_, std::move(value).value());
    return absl::OkStatus();
  }

  ParameterTypesFn parameter_types_;
  State state_ = State::kExpectFunction;
  size_t pos_ = 0;
  size_t name_start_ = 0;
  size_t value_start_ = 0;
  std::string function_;
  std::string key_;
  json::Value arguments_ = json::Value::EmptyObject();
};

}  // namespace

std::unique_ptr<CallSyntax> NewQwen3CoderXmlSyntax(ParameterTypesFn parameter_types) {
  return std::make_unique<Qwen3CoderXmlSyntax>(std::move(parameter_types));
}

}  // namespace gantry::toolcall
