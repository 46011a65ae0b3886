// llama31_json (Llama 3.1 / 3.2 / 3.3 JSON tool calling; docs/tool-protocols.md,
// "llama31_json"): the whole assistant message is
//   [<|python_tag|>] {"name": "...", "parameters": {...}} [; {...}]...
// The streaming parser decides at the start of the message whether it is a call (it
// starts with <|python_tag|> or with `{` and then `"name"`); this syntax reads the body.
#include "absl/strings/str_cat.h"
#include "worker/toolcall/call_syntax.h"

namespace gantry::toolcall {
namespace {

constexpr absl::string_view kProtocol = "llama31_json";

class Llama31JsonSyntax : public CallSyntax {
 public:
  std::vector<std::string> OpenMarkers() const override { return {}; }
  bool StartsMessageOnly() const override { return true; }

  void Reset() override {
    deferred_ = absl::OkStatus();
    in_object_ = false;
    pos_ = 0;
    calls_ = 0;
    separator_seen_ = false;
  }

  // Calls completed before a failure in the same scan still go out (the parser scans again
  // and gets the failure), so that the events do not depend on how the text was split.
  absl::StatusOr<ScanResult> Scan(absl::string_view body, bool at_end) override {
    if (!deferred_.ok()) return deferred_;
    absl::StatusOr<ScanResult> result = ScanMore(body, at_end);
    if (!result.ok() && !pending_.calls.empty()) {
      deferred_ = result.status();
      result = std::move(pending_);
    }
    pending_ = ScanResult();
    return result;
  }

 private:
  absl::StatusOr<ScanResult> ScanMore(absl::string_view body, bool at_end) {
    ScanResult& result = pending_;
    while (true) {
      if (in_object_) {
        size_t end = extent_.Advance(body);
        if (end == absl::string_view::npos) {
          if (!at_end) return std::move(result);
          return Malformed(kProtocol, absl::StrCat("unterminated tool call object: ",
                                                   Excerpt(body.substr(extent_.start()), 60)));
        }
        GANTRY_ASSIGN_OR_RETURN(json::Value object,
                                ParseCallJson(kProtocol, "the tool call",
                                              body.substr(extent_.start(), end - extent_.start())));
        GANTRY_ASSIGN_OR_RETURN(RawToolCall call,
                                CallFromObject(kProtocol, object, {"parameters", "arguments"}, {}));
        result.calls.push_back(std::move(call));
        ++calls_;
        pos_ = end;
        in_object_ = false;
        separator_seen_ = false;
        continue;
      }
      pos_ = SkipJsonSpace(body, pos_);
      if (pos_ >= body.size()) {
        if (!at_end) return std::move(result);
        if (calls_ == 0) return Malformed(kProtocol, "<|python_tag|> without a tool call");
        result.done = true;
        result.consumed = body.size();
        return std::move(result);
      }
      char c = body[pos_];
      if (c == ';' && calls_ > 0 && !separator_seen_) {
        separator_seen_ = true;
        ++pos_;
      } else if (c == '{') {
        extent_.Reset(pos_);
        in_object_ = true;
      } else {
        return Malformed(kProtocol,
                         absl::StrCat(calls_ == 0 ? "expected a JSON tool call object, got "
                                                  : "unexpected text after a tool call: ",
                                      Excerpt(body.substr(pos_))));
      }
    }
  }

  absl::Status deferred_;
  ScanResult pending_;
  JsonExtent extent_;
  bool in_object_ = false;
  size_t pos_ = 0;
  size_t calls_ = 0;
  bool separator_seen_ = false;
};

}  // namespace

std::unique_ptr<CallSyntax> NewLlama31JsonSyntax() { return std::make_unique<Llama31JsonSyntax>(); }

}  // namespace gantry::toolcall
