// hermes_json: <tool_call>{"name": "...", "arguments": {...}}</tool_call>
// (Qwen2.5, Qwen3; docs/tool-protocols.md, "hermes_json").
#include "absl/strings/str_cat.h"
#include "worker/toolcall/call_syntax.h"

namespace gantry::toolcall {
namespace {

constexpr absl::string_view kProtocol = "hermes_json";
constexpr absl::string_view kClose = "</tool_call>";

class HermesJsonSyntax : public CallSyntax {
 public:
  std::vector<std::string> OpenMarkers() const override { return {"<tool_call>"}; }

  void Reset() override {
    pos_ = 0;
    in_string_ = false;
    escape_ = false;
  }

  // Looks for </tool_call> outside JSON strings, so that arguments may contain the text
  // "</tool_call>" (a model writing about tool calls).
  absl::StatusOr<ScanResult> Scan(absl::string_view body, bool at_end) override {
    ScanResult result;
    while (pos_ < body.size()) {
      char c = body[pos_];
      if (in_string_) {
        if (escape_) {
          escape_ = false;
        } else if (c == '\\') {
          escape_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
        ++pos_;
        continue;
      }
      if (c == '"') {
        in_string_ = true;
      } else if (c == '<') {
        LiteralMatch m = MatchLiteral(body, pos_, kClose);
        if (m == LiteralMatch::kPartial && !at_end) return result;  // wait for more
        if (m == LiteralMatch::kYes) {
          GANTRY_ASSIGN_OR_RETURN(
              json::Value object,
              ParseCallJson(kProtocol, "the body of <tool_call>", body.substr(0, pos_)));
          GANTRY_ASSIGN_OR_RETURN(RawToolCall call,
                                  CallFromObject(kProtocol, object, {"arguments"}, {}));
          result.calls.push_back(std::move(call));
          result.done = true;
          result.consumed = pos_ + kClose.size();
          return result;
        }
      }
      ++pos_;
    }
    if (at_end) {
      return Malformed(kProtocol, absl::StrCat("unterminated <tool_call> (no </tool_call> "
                                               "outside a JSON string): ",
                                               Excerpt(body)));
    }
    return result;
  }

 private:
  size_t pos_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
};

}  // namespace

std::unique_ptr<CallSyntax> NewHermesJsonSyntax() { return std::make_unique<HermesJsonSyntax>(); }

}  // namespace gantry::toolcall
