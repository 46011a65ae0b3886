// A caller of gantry-sandbox's Unix socket as another uid, for tool_service_test.
//
//   tool_service_peer --uid U --gid G --endpoint ipc://PATH [--timeout-ms N] [--probe]
//
// Started as root, it drops to U/G (no supplementary groups) and checks that it cannot
// get root back; then, with --probe, it only connect()s to PATH and prints "connected"
// or the errno's name; otherwise it sends the ToolCall read from stdin as one DEALER
// message ["", body] and writes the reply's body to stdout.
// Exit: 0 done, 3 no reply within the timeout, 2 usage or privilege-drop failure.
#include <errno.h>
#include <grp.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <string>

#include <zmq.hpp>

int main(int argc, char** argv) {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string endpoint;
  int timeout_ms = 10000;
  bool probe = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--probe") {
      probe = true;
      continue;
    }
    if (i + 1 >= argc) return 2;
    std::string v = argv[++i];
    if (a == "--uid") uid = static_cast<uid_t>(std::atoi(v.c_str()));
    else if (a == "--gid") gid = static_cast<gid_t>(std::atoi(v.c_str()));
    else if (a == "--endpoint") endpoint = v;
    else if (a == "--timeout-ms") timeout_ms = std::atoi(v.c_str());
    else return 2;
  }
  if (uid == 0 || endpoint.rfind("ipc://", 0) != 0) return 2;
  if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) return 2;
  if (setuid(0) == 0 || getuid() != uid || geteuid() != uid) return 2;
  if (probe) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = endpoint.substr(6);
    memcpy(addr.sun_path, path.data(), std::min(path.size(), sizeof addr.sun_path - 1));
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      std::printf("connected\n");
    } else {
      std::printf("%s\n", strerrorname_np(errno));
    }
    return 0;
  }
  std::string body((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  zmq::context_t context(1);
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(endpoint);
  dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(body), zmq::send_flags::none);
  zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) == 0) return 3;
  std::string last;
  for (;;) {
    zmq::message_t part;
    if (!dealer.recv(part)) return 3;
    last = part.to_string();
    if (!part.more()) break;
  }
  std::cout << last;
  return 0;
}
