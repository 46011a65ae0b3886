// The byte stream under one HTTP connection (http_server.cc): plain TCP, or TLS over
// it (tls.h). Non-blocking: an operation that cannot make progress says what it waits
// for, which for TLS may be the opposite direction (a read that must first write a
// handshake record, a write that must first read one).
//
// Thread-safety: none; the server's loop thread owns each Transport.
#ifndef GANTRY_ROUTER_HTTP_TRANSPORT_H_
#define GANTRY_ROUTER_HTTP_TRANSPORT_H_

#include <cstddef>
#include <memory>
#include <string>

namespace gantry::http {

struct IoResult {
  enum class Wait { kNone, kReadable, kWritable };
  size_t bytes = 0;         // > 0: that many bytes were read or written
  Wait wait = Wait::kNone;  // bytes == 0 and not closed: retry when the socket is ...
  bool closed = false;      // the peer closed, or a fatal error (then `error` says why)
  std::string error;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Precondition: size > 0.
  virtual IoResult Read(char* buffer, size_t size) = 0;
  virtual IoResult Write(const char* data, size_t size) = 0;
  // Best-effort orderly end before the socket is closed (TLS close_notify); never blocks.
  virtual void Shutdown() {}
  // Whether the connection is ready for application bytes (TLS: the handshake is done).
  virtual bool Established() const { return true; }
  // Whether Read may leave bytes inside the transport that the socket no longer shows
  // (TLS: records read and not yet returned), so that a reader must go on to EAGAIN.
  virtual bool Buffers() const { return false; }
};

// Plain TCP on the non-blocking socket `fd` (not owned: the server closes it).
std::unique_ptr<Transport> NewPlainTransport(int fd);

}  // namespace gantry::http

#endif  // GANTRY_ROUTER_HTTP_TRANSPORT_H_
