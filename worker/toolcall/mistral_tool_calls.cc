// mistral_tool_calls (Mistral v3 tokenizer models: Mistral 7B v0.3, Mixtral 8x22B, Nemo;
// docs/tool-protocols.md, "mistral_tool_calls"):
//   [TOOL_CALLS][{"name": "...", "arguments": {...}}, ...]
#include "absl/strings/str_cat.h"
#include "worker/toolcall/call_syntax.h"

namespace gantry::toolcall {
namespace {

constexpr absl::string_view kProtocol = "mistral_tool_calls";

class MistralToolCallsSyntax : public CallSyntax {
 public:
  std::vector<std::string> OpenMarkers() const override { return {"[TOOL_CALLS]"}; }

  void Reset() override { in_array_ = false; }

  absl::StatusOr<ScanResult> Scan(absl::string_view body, bool at_end) override {
    ScanResult result;
    if (!in_array_) {
      size_t pos = SkipJsonSpace(body, 0);
      if (pos >= body.size()) {
        if (at_end) return Malformed(kProtocol, "[TOOL_CALLS] without a list of calls");
        return result;
      }
      if (body[pos] != '[') {
        return Malformed(kProtocol, absl::StrCat("expected a JSON array after [TOOL_CALLS], got ",
                                                 Excerpt(body.substr(pos))));
      }
      extent_.Reset(pos);
      in_array_ = true;
    }
    size_t end = extent_.Advance(body);
    if (end == absl::string_view::npos) {
      if (!at_end) return result;
      return Malformed(kProtocol, absl::StrCat("unterminated [TOOL_CALLS] list: ",
                                               Excerpt(body.substr(extent_.start()), 60)));
    }
    GANTRY_ASSIGN_OR_RETURN(json::Value list,
                            ParseCallJson(kProtocol, "the [TOOL_CALLS] list",
                                          body.substr(extent_.start(), end - extent_.start())));
    if (!list.is_array() || list.items().empty()) {
      return Malformed(kProtocol, "[TOOL_CALLS] must be followed by a non-empty JSON array");
    }
    for (const json::Value& item : list.items()) {
      // A model trained on histories may write a call "id"; ids are issued by the server.
      GANTRY_ASSIGN_OR_RETURN(RawToolCall call,
                              CallFromObject(kProtocol, item, {"arguments"}, {"id"}));
      result.calls.push_back(std::move(call));
    }
    result.done = true;
    result.consumed = end;
    in_array_ = false;
    return result;
  }

 private:
  JsonExtent extent_;
  bool in_array_ = false;
};

}  // namespace

std::unique_ptr<CallSyntax> NewMistralToolCallsSyntax() {
  return std::make_unique<MistralToolCallsSyntax>();
}

}  // namespace gantry::toolcall
