#include "proto/worker_frames.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/status.h"

namespace gantry::wire {
namespace {

absl::Status ProtocolError(absl::string_view what) {
  return ReasonError("protocol_error", what);
}

// Parses `body` into the alternative of WorkerMessage that `command` names.
template <typename T>
absl::StatusOr<WorkerMessage> ParseBody(const std::string& body, Command command) {
  T message;
  if (!message.ParseFromString(body)) {
    return ProtocolError(absl::StrCat(CommandName(command), " body is not a valid ",
                                      T::descriptor()->full_name()));
  }
  return WorkerMessage(std::move(message));
}

absl::Status CheckRequired(const WorkerMessage& message) {
  struct Checker {
    absl::Status operator()(const v1::Ready& m) const {
      if (m.protocol_version() != kWorkerProtocolVersion) {
        return ProtocolError(absl::StrCat("READY protocol_version ", m.protocol_version(),
                                          ", this peer speaks ", kWorkerProtocolVersion));
      }
      if (m.worker_id().empty()) return ProtocolError("READY without worker_id");
      if (m.slots() == 0) return ProtocolError("READY with 0 slots");
      if (m.heartbeat_interval_ms() == 0) return ProtocolError("READY without heartbeat_interval_ms");
      if (m.free_slots() > m.slots()) return ProtocolError("READY free_slots > slots");
      if (m.bundle().identity_sha256().empty() || m.bundle().model().empty()) {
        return ProtocolError("READY without bundle identity");
      }
      return absl::OkStatus();
    }
    absl::Status operator()(const v1::Request& m) const {
      if (m.request().request_id().empty()) return ProtocolError("REQUEST without request_id");
      return absl::OkStatus();
    }
    absl::Status operator()(const v1::Partial& m) const {
      if (m.request_id().empty()) return ProtocolError("PARTIAL without request_id");
      for (const auto& event : m.events()) {
        if (event.has_terminal()) return ProtocolError("PARTIAL carries a terminal event");
        if (event.request_id() != m.request_id()) {
          return ProtocolError("PARTIAL event for another request_id");
        }
      }
      return absl::OkStatus();
    }
    absl::Status operator()(const v1::Final& m) const {
      if (m.request_id().empty()) return ProtocolError("FINAL without request_id");
      if (!m.terminal().has_terminal()) return ProtocolError("FINAL without terminal event");
      if (m.terminal().request_id() != m.request_id()) {
        return ProtocolError("FINAL terminal event for another request_id");
      }
      return absl::OkStatus();
    }
    absl::Status operator()(const v1::Heartbeat&) const { return absl::OkStatus(); }
    absl::Status operator()(const v1::Disconnect&) const { return absl::OkStatus(); }
    absl::Status operator()(const v1::Cancel& m) const {
      if (m.request_id().empty()) return ProtocolError("CANCEL without request_id");
      return absl::OkStatus();
    }
  };
  return std::visit(Checker{}, message);
}

}  // namespace

const char* CommandName(Command command) {
  switch (command) {
    case Command::kReady: return "READY";
    case Command::kRequest: return "REQUEST";
    case Command::kPartial: return "PARTIAL";
    case Command::kFinal: return "FINAL";
    case Command::kHeartbeat: return "HEARTBEAT";
    case Command::kDisconnect: return "DISCONNECT";
    case Command::kCancel: return "CANCEL";
  }
  return "UNKNOWN";
}

Command CommandOf(const WorkerMessage& message) {
  // Order of the alternatives in WorkerMessage.
  static constexpr Command kByIndex[] = {Command::kReady,     Command::kRequest,
                                         Command::kPartial,   Command::kFinal,
                                         Command::kHeartbeat, Command::kDisconnect,
                                         Command::kCancel};
  return kByIndex[message.index()];
}

bool IsAllowed(Command command, Direction direction) {
  switch (command) {
    case Command::kReady:
    case Command::kPartial:
    case Command::kFinal:
      return direction == Direction::kWorkerToRouter;
    case Command::kRequest:
    case Command::kCancel:
      return direction == Direction::kRouterToWorker;
    case Command::kHeartbeat:
    case Command::kDisconnect:
      return true;
  }
  return false;
}

std::vector<std::string> EncodeFrames(const WorkerMessage& message) {
  std::vector<std::string> frames(4);
  frames[1] = std::string(kWorkerProtocolSignature);
  frames[2] = std::string(1, static_cast<char>(CommandOf(message)));
  std::visit([&](const auto& body) { body.SerializeToString(&frames[3]); }, message);
  return frames;
}

absl::StatusOr<WorkerMessage> DecodeFrames(const std::vector<std::string>& frames,
                                           Direction direction) {
  if (frames.size() != 4) {
    return ProtocolError(absl::StrCat("expected 4 frames, got ", frames.size()));
  }
  if (!frames[0].empty()) return ProtocolError("frame 0 is not the empty delimiter");
  if (frames[1] != kWorkerProtocolSignature) {
    return ProtocolError("frame 1 is not the GNTW01 signature");
  }
  if (frames[2].size() != 1) return ProtocolError("frame 2 is not one command byte");
  const uint8_t byte = static_cast<uint8_t>(frames[2][0]);
  if (byte < 0x01 || byte > 0x07) {
    return ProtocolError(absl::StrCat("unknown command byte ", byte));
  }
  const Command command = static_cast<Command>(byte);
  if (!IsAllowed(command, direction)) {
    return ProtocolError(absl::StrCat(CommandName(command), " is not allowed ",
                                      direction == Direction::kWorkerToRouter
                                          ? "from a worker"
                                          : "from the router"));
  }
  const std::string& body = frames[3];
  if (body.size() > kMaxBodyBytes) {
    return ProtocolError(absl::StrCat(CommandName(command), " body of ", body.size(),
                                      " bytes exceeds ", kMaxBodyBytes));
  }
  absl::StatusOr<WorkerMessage> message;
  switch (command) {
    case Command::kReady: message = ParseBody<v1::Ready>(body, command); break;
    case Command::kRequest: message = ParseBody<v1::Request>(body, command); break;
    case Command::kPartial: message = ParseBody<v1::Partial>(body, command); break;
    case Command::kFinal: message = ParseBody<v1::Final>(body, command); break;
    case Command::kHeartbeat: message = ParseBody<v1::Heartbeat>(body, command); break;
    case Command::kDisconnect: message = ParseBody<v1::Disconnect>(body, command); break;
    case Command::kCancel: message = ParseBody<v1::Cancel>(body, command); break;
  }
  if (!message.ok()) return message.status();
  GANTRY_RETURN_IF_ERROR(CheckRequired(*message));
  return message;
}

}  // namespace gantry::wire
