// TLS for the gateway's HTTP listener, on OpenSSL 3. OpenSSL's headers stay in tls.cc:
// this header and http_server.h only name the context.
//
// Policy: TLS 1.2 and 1.3 only; for TLS 1.2 only ECDHE key exchange with AES-GCM or
// ChaCha20-Poly1305 (forward secrecy, AEAD); the server's cipher order; no compression,
// no renegotiation, no session tickets or cache (no ticket keys to rotate); ALPN answers
// "http/1.1" when offered. The certificate file is a PEM chain (leaf first), the key a
// PEM private key matching it.
//
// Thread-safety: a TlsContext is immutable after Load() and may be shared; each
// Transport it makes belongs to one thread (the server's loop).
#ifndef GANTRY_ROUTER_HTTP_TLS_H_
#define GANTRY_ROUTER_HTTP_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "router/http/transport.h"

namespace gantry::http {

class TlsContext {
 public:
  // Errors: INVALID_ARGUMENT invalid_tls_config naming the file and OpenSSL's reason
  // (unreadable, not PEM, key does not match the certificate).
  static absl::StatusOr<std::shared_ptr<TlsContext>> Load(const std::string& cert_path,
                                                          const std::string& key_path);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // The server side of a new connection on the non-blocking socket `fd` (not owned).
  // The handshake runs inside the first Read/Write calls. nullptr when OpenSSL cannot
  // allocate the connection (the caller closes the socket).
  std::unique_ptr<Transport> NewServerTransport(int fd) const;

  struct Impl;

 private:
  explicit TlsContext(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::http

#endif  // GANTRY_ROUTER_HTTP_TLS_H_
