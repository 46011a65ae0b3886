#include "router/http/tls.h"

#include <errno.h>
#include <sys/socket.h>

#include <climits>
#include <cstdint>
#include <cstring>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"

namespace gantry::http {
namespace {

// TLS 1.2 suites: ECDHE only (forward secrecy), AEAD only. TLS 1.3 keeps OpenSSL's
// defaults (all AEAD with ephemeral key exchange).
constexpr char kTls12Ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// The first error on OpenSSL's thread-local queue, which is then cleared.
std::string TakeOpenSslError() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

// A socket BIO that sends with MSG_NOSIGNAL: a peer that vanished must be an error on
// this connection, never a SIGPIPE for the whole process. The fd is the BIO's data.
int BioFd(BIO* bio) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio))); }

int BioWrite(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  ssize_t n = send(BioFd(bio), data, static_cast<size_t>(size), MSG_NOSIGNAL);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_write(bio);
  }
  return static_cast<int>(n);
}

int BioRead(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  ssize_t n = recv(BioFd(bio), data, static_cast<size_t>(size), 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_read(bio);
  }
  return static_cast<int>(n);
}

long BioCtrl(BIO*, int command, long, void*) {
  return command == BIO_CTRL_FLUSH ? 1 : 0;  // nothing is buffered here
}

int BioCreate(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

const BIO_METHOD* SocketMethod() {
  static const BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "gantry socket");
    BIO_meth_set_write(m, BioWrite);
    BIO_meth_set_read(m, BioRead);
    BIO_meth_set_ctrl(m, BioCtrl);
    BIO_meth_set_create(m, BioCreate);
    return m;
  }();
  return method;
}

int SelectAlpn(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* in,
               unsigned int in_len, void*) {
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_len, kHttp11, sizeof(kHttp11), in, in_len) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;  // no HTTP/1.1 offered: no ALPN, the client decides
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

class TlsTransport : public Transport {
 public:
  explicit TlsTransport(SSL* ssl) : ssl_(ssl) {}
  ~TlsTransport() override { SSL_free(ssl_); }

  IoResult Read(char* buffer, size_t size) override {
    size_t n = 0;
    ERR_clear_error();  // SSL_get_error reads the queue: it must hold only this call's
    int rc = SSL_read_ex(ssl_, buffer, size, &n);
    return Outcome(rc, n);
  }

  IoResult Write(const char* data, size_t size) override {
    size_t n = 0;
    ERR_clear_error();
    int rc = SSL_write_ex(ssl_, data, size, &n);
    return Outcome(rc, n);
  }

  bool Established() const override { return SSL_is_init_finished(ssl_) == 1; }
  bool Buffers() const override { return true; }

  void Shutdown() override {
    if (!failed_ && SSL_is_init_finished(ssl_)) (void)SSL_shutdown(ssl_);  // close_notify
    ERR_clear_error();
  }

 private:
  IoResult Outcome(int rc, size_t n) {
    IoResult result;
    if (rc == 1) {
      result.bytes = n;
      return result;
    }
    switch (SSL_get_error(ssl_, rc)) {
      case SSL_ERROR_WANT_READ:
        result.wait = IoResult::Wait::kReadable;
        break;
      case SSL_ERROR_WANT_WRITE:
        result.wait = IoResult::Wait::kWritable;
        break;
      case SSL_ERROR_ZERO_RETURN:  // the peer's close_notify
        result.closed = true;
        break;
      case SSL_ERROR_SYSCALL:  // the socket failed or closed without close_notify
        failed_ = true;
        result.closed = true;
        result.error = "connection closed or reset";
        ERR_clear_error();
        break;
      default:  // SSL_ERROR_SSL: a protocol error, e.g. a failed handshake
        failed_ = true;
        result.closed = true;
        result.error = TakeOpenSslError();
        break;
    }
    return result;
  }

  SSL* ssl_;
  bool failed_ = false;  // no SSL_shutdown after a fatal error (OpenSSL's rule)
};

}  // namespace

struct TlsContext::Impl {
  SSL_CTX* ctx = nullptr;
  ~Impl() { SSL_CTX_free(ctx); }
};

TlsContext::TlsContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TlsContext::~TlsContext() = default;

absl::StatusOr<std::shared_ptr<TlsContext>> TlsContext::Load(const std::string& cert_path,
                                                             const std::string& key_path) {
  ERR_clear_error();
  auto impl = std::make_unique<Impl>();
  impl->ctx = SSL_CTX_new(TLS_server_method());
  if (impl->ctx == nullptr) return absl::InternalError("SSL_CTX_new: " + TakeOpenSslError());
  SSL_CTX* ctx = impl->ctx;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  // The server retries a write with its output buffer's current address and length,
  // which grows and may move while other threads append (http_server.cc).
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_alpn_select_cb(ctx, SelectAlpn, nullptr);
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) {
    return absl::InternalError("cipher list: " + TakeOpenSslError());
  }
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_path.c_str()) != 1) {
    return ReasonError("invalid_tls_config",
                       absl::StrCat("--tls-cert ", cert_path, ": ", TakeOpenSslError()));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key_path.c_str(), SSL_FILETYPE_PEM) != 1) {
    return ReasonError("invalid_tls_config",
                       absl::StrCat("--tls-key ", key_path, ": ", TakeOpenSslError()));
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return ReasonError("invalid_tls_config",
                       absl::StrCat("--tls-key ", key_path, " does not match --tls-cert ",
                                    cert_path, ": ", TakeOpenSslError()));
  }
  return std::shared_ptr<TlsContext>(new TlsContext(std::move(impl)));
}

std::unique_ptr<Transport> TlsContext::NewServerTransport(int fd) const {
  SSL* ssl = SSL_new(impl_->ctx);
  if (ssl == nullptr) return nullptr;
  BIO* bio = BIO_new(SocketMethod());
  if (bio == nullptr) {
    SSL_free(ssl);
    return nullptr;
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  SSL_set_bio(ssl, bio, bio);  // the SSL owns the BIO
  SSL_set_accept_state(ssl);
  return std::make_unique<TlsTransport>(ssl);
}

}  // namespace gantry::http
