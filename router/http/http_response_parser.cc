#include "router/http/http_response_parser.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "llhttp.h"

namespace gantry::http {
namespace {

absl::Status Malformed(absl::string_view message) {
  return Error(absl::StatusCode::kDataLoss, "protocol_error", message);
}
absl::Status ClosedEarly(absl::string_view message) {
  return Error(absl::StatusCode::kUnavailable, "unavailable", message);
}

}  // namespace

std::string ReceivedResponse::Header(absl::string_view lowercase_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lowercase_name) return value;
  }
  return "";
}

struct ResponseParser::Impl {
  ResponseParser* owner;
  size_t max_header_bytes, max_body_bytes;
  llhttp_settings_t settings;
  llhttp_t parser;
  ReceivedResponse response;
  std::string field, value;  // the header line being read (llhttp may split it)
  size_t head_bytes = 0;
  size_t chunk_start = 0;  // where the current chunk's data begins in the body
  bool headers_done = false, done = false, stopped = false;
  absl::Status error;
  absl::Status callback_error;

  Impl(ResponseParser* o, size_t header_limit, size_t body_limit)
      : owner(o), max_header_bytes(header_limit), max_body_bytes(body_limit) {
    llhttp_settings_init(&settings);
    settings.on_status = [](llhttp_t* p, const char*, size_t n) { return Of(p)->OnHead(n); };
    settings.on_header_field = [](llhttp_t* p, const char* at, size_t n) {
      Impl* i = Of(p);
      i->field.append(at, n);
      return i->OnHead(n);
    };
    settings.on_header_value = [](llhttp_t* p, const char* at, size_t n) {
      Impl* i = Of(p);
      i->value.append(at, n);
      return i->OnHead(n);
    };
    settings.on_header_value_complete = [](llhttp_t* p) {
      Impl* i = Of(p);
      if (!i->headers_done) {  // trailers are read and dropped
        i->response.headers.emplace_back(absl::AsciiStrToLower(i->field),
                                         std::string(absl::StripAsciiWhitespace(i->value)));
      }
      i->field.clear();
      i->value.clear();
      return i->OnHead(4);  // ": " and CRLF, near enough
    };
    settings.on_headers_complete = [](llhttp_t* p) { return Of(p)->OnHeadersComplete(); };
    settings.on_body = [](llhttp_t* p, const char* at, size_t n) { return Of(p)->OnBody(at, n); };
    settings.on_chunk_header = [](llhttp_t* p) { return Of(p)->OnChunkHeader(); };
    settings.on_chunk_complete = [](llhttp_t* p) { return Of(p)->OnChunkComplete(); };
    settings.on_message_complete = [](llhttp_t* p) { return Of(p)->OnMessageComplete(); };
    llhttp_init(&parser, HTTP_RESPONSE, &settings);
    parser.data = this;
  }

  static Impl* Of(llhttp_t* p) { return static_cast<Impl*>(p->data); }

  int Stop(absl::Status status) {
    callback_error = std::move(status);
    return HPE_USER;
  }

  int OnHead(size_t n) {
    head_bytes += n;
    if (head_bytes > max_header_bytes) {
      return Stop(Malformed(absl::StrCat("header section over ", max_header_bytes, " bytes")));
    }
    return 0;
  }

  int OnHeadersComplete() {
    if (parser.status_code < 200) return 0;  // an interim response: skipped at its end
    headers_done = true;
    response.status = parser.status_code;
    response.chunked = (parser.flags & F_CHUNKED) != 0;
    if ((parser.flags & F_CONTENT_LENGTH) != 0 && parser.content_length > max_body_bytes) {
      return Stop(Malformed(absl::StrCat("Content-Length ", parser.content_length, " over ",
                                         max_body_bytes, " bytes")));
    }
    return 0;
  }

  int OnBody(const char* at, size_t n) {
    if (n > max_body_bytes - response.body.size()) {
      return Stop(Malformed(absl::StrCat("body over ", max_body_bytes, " bytes")));
    }
    response.body.append(at, n);
    return 0;
  }

  int OnChunkHeader() {
    if (parser.content_length > max_body_bytes - response.body.size()) {
      return Stop(Malformed(absl::StrCat("body over ", max_body_bytes, " bytes")));
    }
    chunk_start = response.body.size();
    return 0;
  }

  int OnChunkComplete() {
    const size_t start = chunk_start;
    chunk_start = response.body.size();
    if (start == response.body.size() || !owner->on_chunk) return 0;  // the last chunk
    if (owner->on_chunk(absl::string_view(response.body).substr(start))) return 0;
    stopped = true;
    return HPE_PAUSED;
  }

  int OnMessageComplete() {
    if (!headers_done) {  // the end of an interim response
      response.headers.clear();
      head_bytes = 0;
      return 0;
    }
    done = true;
    return HPE_PAUSED;  // the next response's bytes stay with the caller
  }

  absl::StatusOr<size_t> Feed(absl::string_view data) {
    if (!error.ok()) return error;
    if (done || stopped) return 0;
    static const char kNothing[1] = {0};
    const char* base = data.empty() ? kNothing : data.data();  // llhttp does pointer math
    callback_error = absl::OkStatus();
    llhttp_errno_t err = llhttp_execute(&parser, base, data.size());
    if (err == HPE_OK) return data.size();
    if (err == HPE_PAUSED) {
      const size_t used = static_cast<size_t>(llhttp_get_error_pos(&parser) - base);
      llhttp_resume(&parser);
      return used;
    }
    error = !callback_error.ok()
                ? callback_error
                : Malformed(absl::StrCat("malformed response: ", llhttp_get_error_reason(&parser)));
    return error;
  }

  absl::Status Finish() {
    if (!error.ok()) return error;
    if (done || stopped) return absl::OkStatus();
    if (!headers_done) return ClosedEarly("the connection closed before a whole response");
    // Only a body that runs to the close ends here: llhttp completes it (and our
    // on_message_complete pauses, as always).
    const llhttp_errno_t finished = llhttp_finish(&parser);
    if ((finished == HPE_OK || finished == HPE_PAUSED) && done) return absl::OkStatus();
    return ClosedEarly("the connection closed inside the response body");
  }
};

ResponseParser::ResponseParser(size_t max_header_bytes, size_t max_body_bytes)
    : impl_(std::make_unique<Impl>(this, max_header_bytes, max_body_bytes)) {}
ResponseParser::~ResponseParser() = default;

absl::StatusOr<size_t> ResponseParser::Feed(absl::string_view data) { return impl_->Feed(data); }
absl::Status ResponseParser::Finish() { return impl_->Finish(); }
bool ResponseParser::headers_complete() const { return impl_->headers_done; }
bool ResponseParser::complete() const { return impl_->done; }
bool ResponseParser::stopped() const { return impl_->stopped; }
const ReceivedResponse& ResponseParser::response() const { return impl_->response; }

ReceivedResponse ResponseParser::TakeResponse() {
  ReceivedResponse out = std::move(impl_->response);
  Impl& i = *impl_;
  i.response = ReceivedResponse();
  i.field.clear();
  i.value.clear();
  i.head_bytes = i.chunk_start = 0;
  i.headers_done = i.done = i.stopped = false;
  llhttp_reset(&i.parser);
  i.parser.data = &i;
  return out;
}

}  // namespace gantry::http
