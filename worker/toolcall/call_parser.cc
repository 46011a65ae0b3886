#include "worker/toolcall/call_parser.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/utf8.h"

namespace gantry::toolcall {
namespace {

constexpr absl::string_view kThinkOpen = "<think>";
constexpr absl::string_view kThinkClose = "</think>";
constexpr absl::string_view kPythonTag = "<|python_tag|>";
constexpr absl::string_view kNameKey = "\"name\"";

std::unique_ptr<CallSyntax> NewSyntax(ToolProtocol protocol, ParameterTypesFn parameter_types) {
  switch (protocol) {
    case ToolProtocol::kNone: return nullptr;
    case ToolProtocol::kHermesJson: return NewHermesJsonSyntax();
    case ToolProtocol::kQwen3CoderXml: return NewQwen3CoderXmlSyntax(std::move(parameter_types));
    case ToolProtocol::kLlama31Json: return NewLlama31JsonSyntax();
    case ToolProtocol::kMistralToolCalls: return NewMistralToolCallsSyntax();
  }
  return nullptr;
}

// Length of the longest suffix of `text` that is a proper prefix of one of `markers`.
size_t MarkerPrefixSuffix(absl::string_view text, const std::vector<absl::string_view>& markers) {
  size_t best = 0;
  for (absl::string_view marker : markers) {
    for (size_t n = std::min(marker.size() - 1, text.size()); n > best; --n) {
      if (text.substr(text.size() - n) == marker.substr(0, n)) {
        best = n;
        break;
      }
    }
  }
  return best;
}

// Bytes at the end of `text` that begin a UTF-8 sequence the next delta may complete.
size_t IncompleteUtf8Tail(absl::string_view text) {
  for (size_t k = 1; k <= 3 && k <= text.size(); ++k) {
    unsigned char b = static_cast<unsigned char>(text[text.size() - k]);
    if ((b & 0xC0) == 0x80) continue;
    size_t need = b >= 0xF0 && b <= 0xF4  ? 4
                  : b >= 0xE0 && b < 0xF0 ? 3
                  : b >= 0xC2 && b < 0xE0 ? 2
                                          : 1;
    return need > k ? k : 0;
  }
  return 0;
}

}  // namespace

ToolCallParser::ToolCallParser(ToolProtocol protocol, const ParserOptions& options,
                               ParameterTypesFn parameter_types)
    : options_(options), protocol_name_(ToolProtocolName(protocol)) {
  if (options_.parse_calls) syntax_ = NewSyntax(protocol, std::move(parameter_types));
  if (syntax_ != nullptr) call_markers_ = syntax_->OpenMarkers();
  if (options_.reasoning && options_.starts_in_reasoning) {
    mode_ = Mode::kReasoning;
  } else if (syntax_ != nullptr && syntax_->StartsMessageOnly()) {
    mode_ = Mode::kStart;
  }
}

absl::Status ToolCallParser::Feed(absl::string_view delta, std::vector<ParsedEvent>* out) {
  if (!failure_.ok()) return failure_;
  if (mode_ == Mode::kFinished) {
    return ReasonError("internal", "ToolCallParser::Feed after Finish");
  }
  buffer_.append(delta.data(), delta.size());
  return Process(/*at_end=*/false, out);
}

absl::Status ToolCallParser::Finish(std::vector<ParsedEvent>* out) {
  if (!failure_.ok()) return failure_;
  if (mode_ == Mode::kFinished) return absl::OkStatus();
  absl::Status status = Process(/*at_end=*/true, out);
  mode_ = Mode::kFinished;
  return status;
}

absl::Status ToolCallParser::Process(bool at_end, std::vector<ParsedEvent>* out) {
  while (true) {
    bool progressed = false;
    switch (mode_) {
      case Mode::kText:
      case Mode::kReasoning: progressed = StepPlain(at_end, out); break;
      case Mode::kStart: progressed = StepStart(at_end); break;
      case Mode::kCall: {
        absl::StatusOr<bool> stepped = StepCall(at_end, out);
        if (!stepped.ok()) {
          failure_ = stepped.status();
          mode_ = Mode::kFinished;
          buffer_.clear();
          return failure_;
        }
        progressed = *stepped;
        break;
      }
      case Mode::kFinished: return absl::OkStatus();
    }
    if (!progressed) return absl::OkStatus();
  }
}

bool ToolCallParser::StepPlain(bool at_end, std::vector<ParsedEvent>* out) {
  const bool reasoning = mode_ == Mode::kReasoning;
  const ParsedEvent::Kind kind =
      reasoning ? ParsedEvent::Kind::kReasoning : ParsedEvent::Kind::kText;
  std::vector<absl::string_view> markers;
  if (reasoning) {
    markers.push_back(kThinkClose);
  } else {
    for (const std::string& m : call_markers_) markers.push_back(m);
    if (options_.reasoning) markers.push_back(kThinkOpen);
  }
  size_t best = std::string::npos;
  absl::string_view found;
  for (absl::string_view marker : markers) {
    size_t at = absl::string_view(buffer_).find(marker);
    if (at < best) {
      best = at;
      found = marker;
    }
  }
  if (best != std::string::npos) {
    Emit(kind, absl::string_view(buffer_).substr(0, best), out);
    buffer_.erase(0, best + found.size());
    if (found == kThinkOpen) {
      mode_ = Mode::kReasoning;
    } else if (found == kThinkClose) {
      bool start_only = syntax_ != nullptr && syntax_->StartsMessageOnly();
      mode_ = start_only && !content_started_ ? Mode::kStart : Mode::kText;
    } else {
      EnterCall();
    }
    return true;
  }
  size_t hold = 0;
  if (!at_end) {
    hold = MarkerPrefixSuffix(buffer_, markers);
    if (hold == 0) hold = IncompleteUtf8Tail(buffer_);
  }
  Emit(kind, absl::string_view(buffer_).substr(0, buffer_.size() - hold), out);
  buffer_.erase(0, buffer_.size() - hold);
  return false;
}

bool ToolCallParser::StepStart(bool at_end) {
  size_t i = SkipJsonSpace(buffer_, 0);
  if (i == buffer_.size()) {
    if (!at_end) return false;
    mode_ = Mode::kText;
    return true;
  }
  absl::string_view rest = absl::string_view(buffer_).substr(i);
  if (options_.reasoning) {
    LiteralMatch think = MatchLiteral(rest, 0, kThinkOpen);
    if (think == LiteralMatch::kYes) {
      // Reasoning before the message's content: drop the whitespace before it.
      buffer_.erase(0, i + kThinkOpen.size());
      mode_ = Mode::kReasoning;
      return true;
    }
    if (think == LiteralMatch::kPartial && !at_end) return false;
  }
  LiteralMatch tag = MatchLiteral(rest, 0, kPythonTag);
  if (tag == LiteralMatch::kYes) {
    buffer_.erase(0, i + kPythonTag.size());
    EnterCall();
    return true;
  }
  if (tag == LiteralMatch::kPartial && !at_end) return false;
  if (rest[0] == '{') {
    LiteralMatch name = MatchLiteral(rest, SkipJsonSpace(rest, 1), kNameKey);
    if (name == LiteralMatch::kYes) {
      buffer_.erase(0, i);
      EnterCall();
      return true;
    }
    if (name == LiteralMatch::kPartial && !at_end) return false;
  }
  // Not a call: the message is plain text (and, for this syntax, stays so).
  content_started_ = true;
  mode_ = Mode::kText;
  return true;
}

absl::StatusOr<bool> ToolCallParser::StepCall(bool at_end, std::vector<ParsedEvent>* out) {
  if (buffer_.size() > options_.max_call_bytes) {
    return Malformed(protocol_name_,
                     absl::StrCat("a tool call longer than ", options_.max_call_bytes, " bytes"));
  }
  GANTRY_ASSIGN_OR_RETURN(ScanResult result, syntax_->Scan(buffer_, at_end));
  for (RawToolCall& call : result.calls) {
    ParsedEvent event;
    event.kind = ParsedEvent::Kind::kCall;
    event.call = std::move(call);
    out->push_back(std::move(event));
  }
  if (!result.done) {
    // Calls without the end of the syntax (llama31_json): scan again at once, which either
    // waits or reports what followed them.
    if (!result.calls.empty()) return true;
    if (at_end) return Malformed(protocol_name_, "unterminated tool call");
    return false;
  }
  buffer_.erase(0, std::min(result.consumed, buffer_.size()));
  mode_ = Mode::kText;
  return true;
}

void ToolCallParser::EnterCall() {
  mode_ = Mode::kCall;
  content_started_ = true;
  syntax_->Reset();
}

void ToolCallParser::Emit(ParsedEvent::Kind kind, absl::string_view bytes,
                          std::vector<ParsedEvent>* out) {
  if (bytes.empty()) return;
  if (kind == ParsedEvent::Kind::kText &&
      std::any_of(bytes.begin(), bytes.end(), [](char c) { return !IsJsonSpace(c); })) {
    content_started_ = true;
  }
  ParsedEvent event;
  event.kind = kind;
  event.text = SanitizeUtf8(bytes);
  out->push_back(std::move(event));
}

}  // namespace gantry::toolcall
