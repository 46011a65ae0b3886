#include "router/http/http_conn.h"

#include <time.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "router/http/error_response.h"

namespace gantry::http {

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string StatusLineAndHeaders(int status, const HeaderList& headers) {
  std::string out = absl::StrCat("HTTP/1.1 ", status, " ", ReasonPhrase(status), "\r\n");
  for (const auto& [name, value] : headers) absl::StrAppend(&out, name, ": ", value, "\r\n");
  return out;
}

ConnWriter::~ConnWriter() {
  bool unanswered;
  {
    std::lock_guard<std::mutex> lock(conn_->mu);
    unanswered = Current() && conn_->response == Conn::Response::kNone && !conn_->closed;
  }
  if (unanswered) {
    Send(ErrorResponse(ReasonError("internal", "the handler returned no response")));
  } else {
    bool streaming;
    {
      std::lock_guard<std::mutex> lock(conn_->mu);
      streaming = Current() && conn_->response == Conn::Response::kStreaming && !conn_->closed;
    }
    // A stream abandoned half-way: end the connection, never a clean end of stream.
    if (streaming) {
      std::lock_guard<std::mutex> lock(conn_->mu);
      conn_->keep_alive = false;
      conn_->overflow = true;
      server_->MarkDirty(conn_);
    }
  }
}

bool ConnWriter::Send(const HttpResponse& response) {
  std::lock_guard<std::mutex> lock(conn_->mu);
  if (!Current()) return false;
  if (conn_->closed || conn_->response != Conn::Response::kNone) return false;
  HeaderList headers = response.headers;
  headers.emplace_back("Content-Length", absl::StrCat(response.body.size()));
  if (!conn_->keep_alive) headers.emplace_back("Connection", "close");
  Append(StatusLineAndHeaders(response.status, headers) + "\r\n" + response.body);
  conn_->response = Conn::Response::kDone;
  Flush();
  return true;
}

bool ConnWriter::StartChunked(int status, const HeaderList& headers) {
  std::lock_guard<std::mutex> lock(conn_->mu);
  if (!Current()) return false;
  if (conn_->closed || conn_->response != Conn::Response::kNone) return false;
  HeaderList all = headers;
  all.emplace_back("Transfer-Encoding", "chunked");
  if (!conn_->keep_alive) all.emplace_back("Connection", "close");
  Append(StatusLineAndHeaders(status, all) + "\r\n");
  conn_->response = Conn::Response::kStreaming;
  Flush();
  return true;
}

bool ConnWriter::WriteChunk(absl::string_view data) {
  std::lock_guard<std::mutex> lock(conn_->mu);
  if (!Current()) return false;
  if (conn_->closed || conn_->response != Conn::Response::kStreaming) return false;
  if (data.empty()) return true;
  char size[32];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  Append(absl::StrCat(size, data, "\r\n"));
  Flush();
  return !conn_->overflow;
}

bool ConnWriter::EndChunked() {
  std::lock_guard<std::mutex> lock(conn_->mu);
  if (!Current()) return false;
  if (conn_->closed || conn_->response != Conn::Response::kStreaming) return false;
  Append("0\r\n\r\n");
  conn_->response = Conn::Response::kDone;
  Flush();
  return true;
}

bool ConnWriter::closed() const {
  std::lock_guard<std::mutex> lock(conn_->mu);
  return conn_->closed;
}

void ConnWriter::OnClose(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(conn_->mu);
    if (!conn_->closed) {
      conn_->on_close = std::move(fn);
      return;
    }
  }
  fn();
}

void ConnWriter::Flush() {
  if (!server_->direct_writes() || conn_->overflow || conn_->transport == nullptr) {
    server_->MarkDirty(conn_);
    return;
  }
  while (conn_->out_offset < conn_->out.size()) {
    IoResult w = conn_->transport->Write(conn_->out.data() + conn_->out_offset,
                                         conn_->out.size() - conn_->out_offset);
    if (w.bytes == 0) {
      server_->MarkDirty(conn_);  // would block, or failed: the loop takes over
      return;
    }
    conn_->out_offset += w.bytes;
    conn_->output_moved_ms = NowMs();
  }
  conn_->out.clear();
  conn_->out_offset = 0;
  if (conn_->response != Conn::Response::kDone) return;
  if (!conn_->keep_alive || conn_->input_buffered) {
    server_->MarkDirty(conn_);
    return;
  }
  conn_->ended_by_writer = true;
  conn_->on_close = nullptr;  // the response ended: nothing to cancel any more
}

void ConnWriter::Append(absl::string_view bytes) {
  if (conn_->out.size() - conn_->out_offset + bytes.size() > server_->max_output_bytes()) {
    conn_->overflow = true;  // the loop closes the connection
    return;
  }
  if (conn_->out.size() == conn_->out_offset) conn_->output_moved_ms = NowMs();
  conn_->out.append(bytes.data(), bytes.size());
}

}  // namespace gantry::http
