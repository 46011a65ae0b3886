// Fuzz target: GNTW/1 frame decoding (bytes from any peer on the router's socket).
// Invariant: DecodeFrames never crashes, and whatever it accepts re-encodes to frames
// that decode to the same message.
#include <cstdlib>

#include "proto/worker_frames.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gantry::wire::Direction;
  if (size == 0) return 0;
  Direction direction =
      (data[0] & 1) ? Direction::kWorkerToRouter : Direction::kRouterToWorker;
  auto frames = gantry::fuzz::SplitFrames(data + 1, size - 1);
  auto decoded = gantry::wire::DecodeFrames(frames, direction);
  if (!decoded.ok()) return 0;
  auto again = gantry::wire::DecodeFrames(gantry::wire::EncodeFrames(*decoded), direction);
  if (!again.ok() || again->index() != decoded->index()) std::abort();
  return 0;
}
