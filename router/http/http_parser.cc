#include "router/http/http_parser.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/error_codes.h"
#include "llhttp.h"

namespace gantry::http {
namespace {

absl::Status Bad(absl::string_view message) { return ReasonError("invalid_request", message); }
absl::Status TooLarge(absl::string_view message) {
  return ReasonError("headers_too_large", message);
}
absl::Status BodyTooLarge(size_t limit) {
  return ReasonError("body_too_large", absl::StrCat("the body exceeds ", limit, " bytes"));
}

// RFC 9110 5.6.2 tchar.
bool IsTokenChar(char c) {
  if (absl::ascii_isalnum(static_cast<unsigned char>(c))) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

// Field values: visible ASCII, obs-text, SP and HTAB; no CR, LF or NUL.
bool IsFieldValue(absl::string_view s) {
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u == '\t') continue;
    if (u < 0x20 || u == 0x7f) return false;
  }
  return true;
}

bool ParseDecimal(absl::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  uint64_t value = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = value;
  return true;
}

// Where the request line starts: after the empty lines before it.
size_t RequestLineStart(absl::string_view head) {
  size_t pos = 0;
  while (pos < head.size() && (head[pos] == '\r' || head[pos] == '\n')) ++pos;
  return pos;
}

constexpr size_t kReserveAtOnce = 1 << 20;  // of a declared body, before its bytes come

}  // namespace

absl::string_view HttpRequest::Header(absl::string_view lowercase_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lowercase_name) return value;
  }
  return "";
}

bool HttpRequest::HasHeader(absl::string_view lowercase_name) const {
  for (const auto& header : headers) {
    if (header.first == lowercase_name) return true;
  }
  return false;
}

// llhttp decodes the framing; the header section is also kept as received (bounded by
// max_header_bytes) and checked and split here, under the strict rules of the header
// comment, and llhttp's framing must agree with what those headers say.
struct RequestParser::Impl {
  HttpLimits limits;
  llhttp_settings_t settings;
  llhttp_t parser;
  HttpRequest request;
  std::string head;  // the header section as received, until it is complete
  bool started = false;
  bool headers_done = false;
  bool message_done = false;
  bool failed = false;
  bool expect_continue = false;
  uint64_t content_length = 0;  // declared (Content-Length), when has_content_length
  bool has_content_length = false;
  size_t trailer_bytes = 0;
  size_t chunk_extension_bytes = 0;
  absl::Status error;
  absl::Status callback_error;  // why a callback stopped llhttp

  explicit Impl(const HttpLimits& l) : limits(l) {
    llhttp_settings_init(&settings);
    settings.on_headers_complete = [](llhttp_t* p) -> int {
      Of(p)->headers_done = true;
      return HPE_PAUSED;  // Feed checks the head before any body byte is parsed
    };
    settings.on_message_complete = [](llhttp_t* p) -> int {
      Of(p)->message_done = true;
      return HPE_PAUSED;  // pipelined bytes behind it stay with the caller
    };
    settings.on_body = [](llhttp_t* p, const char* at, size_t n) -> int {
      return Of(p)->OnBody(at, n);
    };
    settings.on_chunk_header = [](llhttp_t* p) -> int { return Of(p)->OnChunkHeader(); };
    settings.on_chunk_extension_name = [](llhttp_t* p, const char*, size_t n) -> int {
      return Of(p)->OnChunkExtension(n);
    };
    settings.on_chunk_extension_value = [](llhttp_t* p, const char*, size_t n) -> int {
      return Of(p)->OnChunkExtension(n);
    };
    // The header section comes from `head`; these see only the trailers' bytes.
    settings.on_header_field = [](llhttp_t* p, const char*, size_t n) -> int {
      return Of(p)->OnTrailerBytes(n);
    };
    settings.on_header_value = [](llhttp_t* p, const char*, size_t n) -> int {
      return Of(p)->OnTrailerBytes(n);
    };
    settings.on_header_value_complete = [](llhttp_t* p) -> int {
      return Of(p)->OnTrailerBytes(4);  // ": " and CRLF, near enough
    };
    llhttp_init(&parser, HTTP_REQUEST, &settings);
    parser.data = this;
  }

  static Impl* Of(llhttp_t* p) { return static_cast<Impl*>(p->data); }

  int Stop(absl::Status status) {
    callback_error = std::move(status);
    return HPE_USER;
  }

  int OnBody(const char* at, size_t n) {
    std::string& body = request.body;
    if (n > limits.max_body_bytes - body.size()) return Stop(BodyTooLarge(limits.max_body_bytes));
    if (body.capacity() - body.size() < n) {
      // Growth by 4 (up to a declared length), never past the limit: the body is
      // appended once, and moved a few times at most (a third of its size in all).
      const size_t need = body.size() + n;
      size_t want = std::max<size_t>(4 * body.capacity(), 64 << 10);
      if (has_content_length) {
        want = static_cast<size_t>(std::min<uint64_t>(want, content_length));
      }
      body.reserve(std::max(need, std::min(want, limits.max_body_bytes)));
    }
    body.append(at, n);
    return 0;
  }

  int OnChunkHeader() {
    chunk_extension_bytes = 0;
    // The chunk's size is known before its data: refuse a body that will not fit now.
    if (parser.content_length > limits.max_body_bytes - request.body.size()) {
      return Stop(BodyTooLarge(limits.max_body_bytes));
    }
    return 0;
  }

  int OnChunkExtension(size_t n) {
    chunk_extension_bytes += n;
    if (chunk_extension_bytes > limits.max_chunk_line_bytes) {
      return Stop(Bad("chunk size line too long"));
    }
    return 0;
  }

  int OnTrailerBytes(size_t n) {
    if (!headers_done) return 0;
    trailer_bytes += n;
    if (trailer_bytes > limits.max_header_bytes) return Stop(TooLarge("trailer section too large"));
    return 0;
  }

  // The request line's length, as far as it arrived.
  absl::Status CheckRequestLine() const {
    size_t start = RequestLineStart(head);
    size_t lf = head.find('\n', start);
    if (lf == std::string::npos) {
      if (head.size() - start > limits.max_request_line_bytes + 1) {
        return TooLarge("request line too long");
      }
      return absl::OkStatus();
    }
    size_t length = lf - start - (lf > start && head[lf - 1] == '\r' ? 1 : 0);
    if (length > limits.max_request_line_bytes) return TooLarge("request line too long");
    return absl::OkStatus();
  }

  // The complete header section in `head`: checked and split into `request`.
  absl::Status TakeHead() {
    for (size_t i = head.find('\n'); i != std::string::npos; i = head.find('\n', i + 1)) {
      if (i == 0 || head[i - 1] != '\r') return Bad("a line of the header section ends in a bare LF");
    }
    absl::string_view rest(head);
    rest.remove_prefix(RequestLineStart(head));
    size_t eol = rest.find("\r\n");
    if (eol == absl::string_view::npos) return Bad("malformed request line");
    std::vector<absl::string_view> parts = absl::StrSplit(rest.substr(0, eol), ' ');
    rest.remove_prefix(eol + 2);
    if (parts.size() != 3) return Bad("malformed request line");
    if (!IsToken(parts[0])) return Bad("malformed method");
    absl::string_view target = parts[1];
    if (target.empty()) return Bad("empty request target");
    for (char c : target) {
      unsigned char u = static_cast<unsigned char>(c);
      if (u <= 0x20 || u >= 0x7f) return Bad("invalid byte in request target");
    }
    HttpRequest& out = request;
    if (parts[2] == "HTTP/1.1") {
      out.version_minor = 1;
    } else if (parts[2] == "HTTP/1.0") {
      out.version_minor = 0;
    } else {
      return Bad("unsupported HTTP version (HTTP/1.0 and HTTP/1.1 only)");
    }
    out.method = std::string(parts[0]);
    out.target = std::string(target);
    size_t q = target.find('?');
    out.path = std::string(target.substr(0, q));
    if (q != absl::string_view::npos) out.query = std::string(target.substr(q + 1));

    bool keep_alive_token = false, close_token = false;
    bool chunked = false, has_transfer_encoding = false;
    while (true) {
      eol = rest.find("\r\n");
      if (eol == absl::string_view::npos) return Bad("malformed header section");
      if (eol == 0) break;
      absl::string_view line = rest.substr(0, eol);
      rest.remove_prefix(eol + 2);
      if (line[0] == ' ' || line[0] == '\t') return Bad("obsolete line folding");
      size_t colon = line.find(':');
      if (colon == absl::string_view::npos) return Bad("header line without a colon");
      absl::string_view name = line.substr(0, colon);
      if (!IsToken(name)) return Bad("malformed header name");
      absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
      if (!IsFieldValue(value)) return Bad("invalid byte in header value");
      if (out.headers.size() >= limits.max_header_count) return TooLarge("too many header fields");
      std::string lower = absl::AsciiStrToLower(name);
      if (lower == "content-length") {
        uint64_t n = 0;
        if (!ParseDecimal(value, &n)) return Bad("malformed Content-Length");
        if (has_content_length) return Bad("more than one Content-Length");
        has_content_length = true;
        content_length = n;
      } else if (lower == "transfer-encoding") {
        has_transfer_encoding = true;
        for (absl::string_view coding : absl::StrSplit(value, ',')) {
          coding = absl::StripAsciiWhitespace(coding);
          if (coding.empty()) continue;
          if (!absl::EqualsIgnoreCase(coding, "chunked") || chunked) {
            return Bad("unsupported transfer coding (only a single 'chunked')");
          }
          chunked = true;
        }
        if (!chunked) return Bad("empty Transfer-Encoding");
      } else if (lower == "connection") {
        for (absl::string_view option : absl::StrSplit(value, ',')) {
          option = absl::StripAsciiWhitespace(option);
          if (absl::EqualsIgnoreCase(option, "close")) close_token = true;
          if (absl::EqualsIgnoreCase(option, "keep-alive")) keep_alive_token = true;
        }
      } else if (lower == "expect") {
        if (!absl::EqualsIgnoreCase(value, "100-continue")) return Bad("unsupported Expect");
        expect_continue = true;
      }
      out.headers.emplace_back(std::move(lower), std::string(value));
    }
    if (has_transfer_encoding && has_content_length) {
      return Bad("both Content-Length and Transfer-Encoding");
    }
    if (has_transfer_encoding && out.version_minor == 0) {
      return Bad("Transfer-Encoding in an HTTP/1.0 request");
    }
    if (out.version_minor == 1 && !out.HasHeader("host")) return Bad("missing Host header");
    // What llhttp will frame the body by must be what these headers say.
    const bool ll_chunked = (parser.flags & F_CHUNKED) != 0;
    const bool ll_length = (parser.flags & F_CONTENT_LENGTH) != 0;
    if (ll_chunked != chunked || ll_length != has_content_length ||
        (has_content_length && parser.content_length != content_length) ||
        llhttp_get_http_major(&parser) != 1 ||
        llhttp_get_http_minor(&parser) != out.version_minor) {
      return Bad("ambiguous request framing");
    }
    out.keep_alive = out.version_minor == 1 ? !close_token : (keep_alive_token && !close_token);
    if (has_content_length) {
      if (content_length > limits.max_body_bytes) {
        return ReasonError("body_too_large", absl::StrCat("Content-Length ", content_length,
                                                          " exceeds ", limits.max_body_bytes,
                                                          " bytes"));
      }
      out.body.reserve(std::min<uint64_t>(content_length, kReserveAtOnce));
    }
    std::string().swap(head);
    return absl::OkStatus();
  }

  Step Fail(absl::Status status, size_t consumed) {
    failed = true;
    error = std::move(status);
    return {Event::kError, consumed};
  }

  Step Feed(absl::string_view data) {
    if (failed) return {Event::kError, 0};
    if (message_done) return {Event::kComplete, 0};
    const bool in_head = !headers_done;
    size_t take = data.size();
    const size_t head_before = head.size();
    if (in_head) {
      // At most one byte past the limit: the parser never looks further into a head
      // that is too large.
      take = std::min(take, limits.max_header_bytes + 1 - head.size());
      head.append(data.data(), take);
      if (!started) {
        for (size_t i = head_before; i < head.size(); ++i) {
          if (head[i] != '\r' && head[i] != '\n') {
            started = true;
            break;
          }
        }
      }
    }
    callback_error = absl::OkStatus();
    static const char kNothing[1] = {0};
    const char* base = data.empty() ? kNothing : data.data();  // llhttp does pointer math
    llhttp_errno_t err = llhttp_execute(&parser, base, take);
    size_t consumed = take;
    bool ll_failed = false;
    if (err == HPE_PAUSED || err == HPE_PAUSED_UPGRADE) {
      consumed = static_cast<size_t>(llhttp_get_error_pos(&parser) - base);
      if (err == HPE_PAUSED) {
        llhttp_resume(&parser);
      } else {
        llhttp_resume_after_upgrade(&parser);
      }
    } else if (err != HPE_OK) {
      ll_failed = true;
      const char* pos = llhttp_get_error_pos(&parser);
      consumed = pos == nullptr || pos < base ? take : std::min<size_t>(take, pos - base);
    }
    if (in_head) {
      head.resize(head_before + consumed);
      absl::Status line = CheckRequestLine();
      if (!line.ok()) return Fail(line, consumed);
      if (!headers_done && head.size() > limits.max_header_bytes) {
        return Fail(TooLarge("header section too large"), consumed);
      }
    }
    if (ll_failed) {
      if (!callback_error.ok()) return Fail(callback_error, consumed);
      return Fail(Bad(absl::StrCat("malformed request: ", llhttp_get_error_reason(&parser))),
                  consumed);
    }
    if (in_head && headers_done) {
      absl::Status checked = TakeHead();
      if (!checked.ok()) return Fail(checked, consumed);
      return {Event::kHeadersComplete, consumed};
    }
    if (message_done) return {Event::kComplete, consumed};
    return {Event::kNeedMore, consumed};
  }

  void Reset() {
    request = HttpRequest();
    std::string().swap(head);
    started = headers_done = message_done = expect_continue = has_content_length = false;
    content_length = 0;
    trailer_bytes = chunk_extension_bytes = 0;
    llhttp_reset(&parser);
    parser.data = this;
  }
};

RequestParser::RequestParser(const HttpLimits& limits) : impl_(std::make_unique<Impl>(limits)) {}
RequestParser::~RequestParser() = default;

RequestParser::Step RequestParser::Feed(absl::string_view data) { return impl_->Feed(data); }
const HttpRequest& RequestParser::request() const { return impl_->request; }
HttpRequest RequestParser::TakeRequest() {
  HttpRequest out = std::move(impl_->request);
  impl_->Reset();
  return out;
}
const absl::Status& RequestParser::error() const { return impl_->error; }
bool RequestParser::started() const { return impl_->started; }
bool RequestParser::headers_complete() const { return impl_->headers_done; }
bool RequestParser::expect_continue() const { return impl_->expect_continue; }
size_t RequestParser::body_bytes() const { return impl_->request.body.size(); }

ParseOutcome ParseHttpRequest(absl::string_view buffer, const HttpLimits& limits,
                              HttpRequest* out) {
  *out = HttpRequest();
  RequestParser parser(limits);
  size_t pos = 0;
  ParseOutcome outcome;
  while (true) {
    RequestParser::Step step = parser.Feed(buffer.substr(pos));
    pos += step.consumed;
    switch (step.event) {
      case RequestParser::Event::kHeadersComplete:
        continue;
      case RequestParser::Event::kNeedMore:
        outcome.headers_complete = parser.headers_complete();
        outcome.expect_continue = parser.expect_continue();
        return outcome;
      case RequestParser::Event::kComplete:
        *out = parser.TakeRequest();
        outcome.state = ParseState::kComplete;
        outcome.consumed = pos;
        return outcome;
      case RequestParser::Event::kError:
        outcome.state = ParseState::kError;
        outcome.error = parser.error();
        return outcome;
    }
  }
}

}  // namespace gantry::http
