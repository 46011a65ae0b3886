// Sentence-sized text for accessibility clients (docs/router.md, "Accessibility").
//
// A screen reader speaks what it receives; token fragments ("Hel", "lo, wor", "ld.")
// make it stutter or wait on its own heuristics. For principals of the `accessibility`
// priority class the gateway regroups the visible text into chunks that end at:
//   - a sentence end: `.` `!` `?` `…` followed by whitespace (a closing quote or
//     bracket `"` `'` `)` `]` `”` `’` may come between), the whitespace character
//     included in the chunk; "3.14" or "e.g.," does not end a sentence;
//   - `。` `！` `？` on their own (CJK text has no space after them), with a closing
//     `」` `』` `）` `”` `’` that follows at once;
//   - a newline (included);
//   - or, with no such end, `max_chunk_bytes` of text: cut after the last whitespace
//     within the limit, else at the last UTF-8 character boundary within it. A
//     character is never split.
// Whatever is held when the stream moves on (a reasoning delta, a tool call, the
// Terminal) or ends is released first, so order is kept and nothing is lost. Text held
// for kSentenceHoldMaxMs while the model pauses (a slow CPU worker, a long think before
// the next word) is released up to its last whitespace, so a listener is never left
// waiting on half a sentence (the gateway keeps the time: Gateway::Call::Next).
//
// SentenceChunker works on text; SentenceChunkedStream applies it to a request's
// StreamEvents: text deltas are regrouped, every other event passes unchanged (after the
// held text), and events are renumbered (seq 0, 1, ...) as the stream they form.
//
// Thread-safety: one object per stream; not thread-safe.
#ifndef GANTRY_ROUTER_SENTENCE_CHUNKER_H_
#define GANTRY_ROUTER_SENTENCE_CHUNKER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gantry/v1/inference.pb.h"

namespace gantry::router {

// The default cap on a chunk without a sentence end, in bytes.
inline constexpr size_t kSentenceChunkMaxBytes = 200;
// The longest an open sentence is held while no more text comes, in milliseconds.
inline constexpr int kSentenceHoldMaxMs = 1000;

class SentenceChunker {
 public:
  // Precondition: max_chunk_bytes >= 4 (one character of UTF-8 always fits).
  explicit SentenceChunker(size_t max_chunk_bytes = kSentenceChunkMaxBytes);

  // Takes `delta` and appends each chunk it completes to `out`, in order.
  void Add(absl::string_view delta, std::vector<std::string>* out);
  // Everything held ("" when nothing); the chunker is then empty.
  std::string Flush();
  // The held text up to and including its last whitespace (all of it when it has none,
  // "" when nothing is held); the rest stays held. A word is not cut while it may still
  // be growing.
  std::string TakeWords();
  bool empty() const { return held_.empty(); }

 private:
  // Bytes of held_ that form the next chunk; 0 when none is complete yet.
  size_t NextCut() const;

  size_t max_;
  std::string held_;
};

class SentenceChunkedStream {
 public:
  explicit SentenceChunkedStream(size_t max_chunk_bytes = kSentenceChunkMaxBytes);

  // Appends to `out` the events `event` releases: none while a sentence is open, one
  // text event per complete chunk, or the held text and then `event` itself for any
  // other kind of event. Each keeps `event`'s request_id and gets the next seq.
  void Push(const v1::StreamEvent& event, std::vector<v1::StreamEvent>* out);
  // Releases held text as one text event (SentenceChunker::TakeWords) because it was
  // held too long; nothing when nothing is held.
  void ReleaseHeld(const std::string& request_id, std::vector<v1::StreamEvent>* out);
  // Whether text is held (an open sentence).
  bool holding() const { return !chunker_.empty(); }

 private:
  void Emit(v1::StreamEvent event, std::vector<v1::StreamEvent>* out);
  void EmitText(const std::string& request_id, std::string text,
                std::vector<v1::StreamEvent>* out);

  SentenceChunker chunker_;
  uint64_t seq_ = 0;
};

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_SENTENCE_CHUNKER_H_
