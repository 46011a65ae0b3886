#include "router/http/http_parser.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/error_codes.h"

namespace gantry::http {
namespace {

ParseOutcome Fail(absl::string_view reason, absl::string_view message) {
  ParseOutcome outcome;
  outcome.state = ParseState::kError;
  outcome.error = ReasonError(reason, message);
  return outcome;
}

ParseOutcome Bad(absl::string_view message) { return Fail("invalid_request", message); }

ParseOutcome NeedMore(bool headers_complete, bool expect_continue) {
  ParseOutcome outcome;
  outcome.headers_complete = headers_complete;
  outcome.expect_continue = expect_continue;
  return outcome;
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

// Finds "\r\n" at or after `from`; npos when absent. A bare '\n' (not preceded by
// '\r') before it is reported through *bare_lf.
size_t FindCrlf(absl::string_view buf, size_t from, bool* bare_lf) {
  size_t lf = buf.find('\n', from);
  if (lf == absl::string_view::npos) return lf;
  if (lf == from || buf[lf - 1] != '\r') {
    *bare_lf = true;
    return absl::string_view::npos;
  }
  return lf - 1;
}

bool ParseHexSize(absl::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 15) return false;  // 15 hex digits: < 2^60, no overflow
  uint64_t value = 0;
  for (char c : s) {
    int digit;
    if (c >= '0' && c <= '9') digit = c - '0';
    else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    else return false;
    value = value * 16 + static_cast<uint64_t>(digit);
  }
  *out = value;
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

// Decodes a chunked body starting at `pos`. kComplete sets *end to the first byte
// after the trailer section.
ParseOutcome ParseChunked(absl::string_view buf, size_t pos, const HttpLimits& limits,
                          std::string* body, size_t* end) {
  body->clear();
  size_t trailer_bytes = 0;
  while (true) {
    bool bare_lf = false;
    size_t eol = FindCrlf(buf, pos, &bare_lf);
    if (bare_lf) return Bad("chunk size line ends in a bare LF");
    if (eol == absl::string_view::npos) {
      if (buf.size() - pos > limits.max_chunk_line_bytes) return Bad("chunk size line too long");
      return NeedMore(true, false);
    }
    if (eol - pos > limits.max_chunk_line_bytes) return Bad("chunk size line too long");
    absl::string_view line = buf.substr(pos, eol - pos);
    size_t semi = line.find(';');
    absl::string_view size_text = absl::StripTrailingAsciiWhitespace(line.substr(0, semi));
    uint64_t size = 0;
    if (!ParseHexSize(size_text, &size)) return Bad("malformed chunk size");
    pos = eol + 2;
    if (size == 0) {
      // Trailer section: fields until an empty line; read and discarded.
      while (true) {
        bool trailer_bare_lf = false;
        size_t t_eol = FindCrlf(buf, pos, &trailer_bare_lf);
        if (trailer_bare_lf) return Bad("trailer line ends in a bare LF");
        if (t_eol == absl::string_view::npos) {
          if (trailer_bytes + (buf.size() - pos) > limits.max_header_bytes) {
            return Fail("headers_too_large", "trailer section too large");
          }
          return NeedMore(true, false);
        }
        trailer_bytes += t_eol - pos + 2;
        if (trailer_bytes > limits.max_header_bytes) {
          return Fail("headers_too_large", "trailer section too large");
        }
        if (t_eol == pos) {
          *end = pos + 2;
          ParseOutcome done;
          done.state = ParseState::kComplete;
          return done;
        }
        pos = t_eol + 2;
      }
    }
    if (size > limits.max_body_bytes || body->size() + size > limits.max_body_bytes) {
      return Fail("body_too_large", absl::StrCat("the chunked body exceeds ",
                                                 limits.max_body_bytes, " bytes"));
    }
    if (buf.size() - pos < size + 2) return NeedMore(true, false);
    if (buf.substr(pos + size, 2) != "\r\n") return Bad("chunk data not followed by CRLF");
    body->append(buf.data() + pos, size);
    pos += size + 2;
  }
}

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

ParseOutcome ParseHttpRequest(absl::string_view buf, const HttpLimits& limits,
                              HttpRequest* out) {
  *out = HttpRequest();
  size_t pos = 0;
  // RFC 9112 2.2: ignore at least one empty line before the request line.
  if (absl::StartsWith(buf, "\r\n")) pos = 2;
  if (buf.size() == pos) return NeedMore(false, false);

  // Request line.
  bool bare_lf = false;
  size_t eol = FindCrlf(buf, pos, &bare_lf);
  if (bare_lf) return Bad("request line ends in a bare LF");
  if (eol == absl::string_view::npos) {
    if (buf.size() - pos > limits.max_request_line_bytes) {
      return Fail("headers_too_large", "request line too long");
    }
    return NeedMore(false, false);
  }
  if (eol - pos > limits.max_request_line_bytes) {
    return Fail("headers_too_large", "request line too long");
  }
  std::vector<absl::string_view> parts = absl::StrSplit(buf.substr(pos, eol - pos), ' ');
  if (parts.size() != 3) return Bad("malformed request line");
  if (!IsToken(parts[0])) return Bad("malformed method");
  absl::string_view target = parts[1];
  if (target.empty()) return Bad("empty request target");
  for (char c : target) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return Bad("invalid byte in request target");
  }
  if (parts[2] == "HTTP/1.1") {
    out->version_minor = 1;
  } else if (parts[2] == "HTTP/1.0") {
    out->version_minor = 0;
  } else {
    return Bad("unsupported HTTP version (HTTP/1.0 and HTTP/1.1 only)");
  }
  out->method = std::string(parts[0]);
  out->target = std::string(target);
  size_t q = target.find('?');
  out->path = std::string(target.substr(0, q));
  if (q != absl::string_view::npos) out->query = std::string(target.substr(q + 1));
  pos = eol + 2;

  // Header fields.
  bool keep_alive_token = false, close_token = false, expect_continue = false;
  bool has_content_length = false, chunked = false, has_transfer_encoding = false;
  uint64_t content_length = 0;
  while (true) {
    bool header_bare_lf = false;
    size_t line_end = FindCrlf(buf, pos, &header_bare_lf);
    if (header_bare_lf) return Bad("header line ends in a bare LF");
    if (line_end == absl::string_view::npos) {
      if (buf.size() > limits.max_header_bytes) {
        return Fail("headers_too_large", "header section too large");
      }
      return NeedMore(false, false);
    }
    if (line_end + 2 > limits.max_header_bytes) {
      return Fail("headers_too_large", "header section too large");
    }
    if (line_end == pos) {
      pos += 2;
      break;
    }
    absl::string_view line = buf.substr(pos, line_end - pos);
    pos = line_end + 2;
    if (line[0] == ' ' || line[0] == '\t') return Bad("obsolete line folding");
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) return Bad("header line without a colon");
    absl::string_view name = line.substr(0, colon);
    if (!IsToken(name)) return Bad("malformed header name");
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (!IsFieldValue(value)) return Bad("invalid byte in header value");
    if (out->headers.size() >= limits.max_header_count) {
      return Fail("headers_too_large", "too many header fields");
    }
    std::string lower = absl::AsciiStrToLower(name);
    if (lower == "content-length") {
      uint64_t n = 0;
      if (!ParseDecimal(value, &n)) return Bad("malformed Content-Length");
      if (has_content_length && n != content_length) return Bad("conflicting Content-Length");
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
    out->headers.emplace_back(std::move(lower), std::string(value));
  }
  if (has_transfer_encoding && has_content_length) {
    return Bad("both Content-Length and Transfer-Encoding");
  }
  if (has_transfer_encoding && out->version_minor == 0) {
    return Bad("Transfer-Encoding in an HTTP/1.0 request");
  }
  if (out->version_minor == 1 && !out->HasHeader("host")) return Bad("missing Host header");
  out->keep_alive = out->version_minor == 1 ? !close_token : (keep_alive_token && !close_token);

  // Body.
  size_t end = pos;
  if (chunked) {
    ParseOutcome chunk = ParseChunked(buf, pos, limits, &out->body, &end);
    if (chunk.state != ParseState::kComplete) {
      chunk.expect_continue = expect_continue;
      return chunk;
    }
  } else if (has_content_length) {
    if (content_length > limits.max_body_bytes) {
      return Fail("body_too_large", absl::StrCat("Content-Length ", content_length,
                                                 " exceeds ", limits.max_body_bytes, " bytes"));
    }
    if (buf.size() - pos < content_length) return NeedMore(true, expect_continue);
    out->body.assign(buf.data() + pos, content_length);
    end = pos + content_length;
  }
  ParseOutcome done;
  done.state = ParseState::kComplete;
  done.consumed = end;
  return done;
}

}  // namespace gantry::http
