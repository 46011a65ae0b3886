#include "router/http/transport.h"

#include <errno.h>
#include <sys/socket.h>

#include <cstring>

namespace gantry::http {
namespace {

class PlainTransport : public Transport {
 public:
  explicit PlainTransport(int fd) : fd_(fd) {}

  IoResult Read(char* buffer, size_t size) override {
    IoResult result;
    for (;;) {
      ssize_t n = recv(fd_, buffer, size, 0);
      if (n > 0) {
        result.bytes = static_cast<size_t>(n);
      } else if (n == 0) {
        result.closed = true;  // the peer closed (or half-closed) its side
      } else if (errno == EINTR) {
        continue;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        result.wait = IoResult::Wait::kReadable;
      } else {
        result.closed = true;
        result.error = std::strerror(errno);
      }
      return result;
    }
  }

  IoResult Write(const char* data, size_t size) override {
    IoResult result;
    for (;;) {
      ssize_t n = send(fd_, data, size, MSG_NOSIGNAL);
      if (n > 0) {
        result.bytes = static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        result.wait = IoResult::Wait::kWritable;
      } else {
        result.closed = true;  // EPIPE, ECONNRESET, ...
        result.error = n < 0 ? std::strerror(errno) : "send returned 0";
      }
      return result;
    }
  }

 private:
  int fd_;
};

}  // namespace

std::unique_ptr<Transport> NewPlainTransport(int fd) {
  return std::make_unique<PlainTransport>(fd);
}

}  // namespace gantry::http
