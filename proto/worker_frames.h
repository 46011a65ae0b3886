// Codec for GNTW/1, the router <-> worker protocol over ZeroMQ (docs/protocol.md,
// "Worker protocol"). Pure: it turns typed messages into frames and frames into typed
// messages, and never touches a socket, so that it can be fuzzed and tested alone.
//
// Frames as sent by a worker's DEALER and as received by it (the router's ROUTER socket
// adds / strips one identity frame in front):
//
//   frame 0  empty delimiter
//   frame 1  "GNTW01"            protocol signature and version
//   frame 2  one command byte    0x01 READY ... 0x07 CANCEL
//   frame 3  body                the command's protobuf message, serialized
//
// Thread-safety: all functions are pure.
#ifndef GANTRY_PROTO_WORKER_FRAMES_H_
#define GANTRY_PROTO_WORKER_FRAMES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gantry/v1/worker.pb.h"

namespace gantry::wire {

inline constexpr absl::string_view kWorkerProtocolSignature = "GNTW01";
inline constexpr uint32_t kWorkerProtocolVersion = 1;
// A body above this size is rejected before parsing (a request carries a whole
// conversation; 64 MiB is far above any context we serve).
inline constexpr size_t kMaxBodyBytes = 64u << 20;
// Heartbeats (docs/protocol.md, "Heartbeats").
inline constexpr uint32_t kHeartbeatIntervalMs = 1000;
inline constexpr uint32_t kHeartbeatLiveness = 3;

enum class Command : uint8_t {
  kReady = 0x01,
  kRequest = 0x02,
  kPartial = 0x03,
  kFinal = 0x04,
  kHeartbeat = 0x05,
  kDisconnect = 0x06,
  kCancel = 0x07,
};

// "READY", "REQUEST", ... for logs; "UNKNOWN" otherwise.
const char* CommandName(Command command);

// Which way a message travels; each command is legal in one or both directions.
enum class Direction { kWorkerToRouter, kRouterToWorker };

// One protocol message; the alternative held decides the command.
using WorkerMessage = std::variant<v1::Ready, v1::Request, v1::Partial, v1::Final,
                                   v1::Heartbeat, v1::Disconnect, v1::Cancel>;

Command CommandOf(const WorkerMessage& message);

// Whether `command` may travel in `direction`.
bool IsAllowed(Command command, Direction direction);

// The four frames of `message` (starting with the empty delimiter).
std::vector<std::string> EncodeFrames(const WorkerMessage& message);

// Decodes frames that start at the empty delimiter (strip the ROUTER identity first).
// Checks, in order: four frames, empty delimiter, signature, known command, command
// allowed in `direction`, body size, body parses, and the body's required fields
// (request ids present, READY's protocol version and slots).
// Errors: INVALID_ARGUMENT with reason "protocol_error" and a message naming the first
// check that failed. Never aborts on any input.
absl::StatusOr<WorkerMessage> DecodeFrames(const std::vector<std::string>& frames,
                                           Direction direction);

}  // namespace gantry::wire

#endif  // GANTRY_PROTO_WORKER_FRAMES_H_
