#include "router/sentence_chunker.h"

#include <utility>

namespace gantry::router {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool At(absl::string_view s, size_t i, absl::string_view literal) {
  return s.substr(i, literal.size()) == literal;
}

// UTF-8 of the marks the chunker knows.
constexpr absl::string_view kEllipsis = "\xE2\x80\xA6";            // …
constexpr absl::string_view kCjkEnds[] = {"\xE3\x80\x82",          // 。
                                          "\xEF\xBC\x81",          // ！
                                          "\xEF\xBC\x9F"};         // ？
constexpr absl::string_view kQuoteCloses[] = {"\xE2\x80\x9D",      // ”
                                              "\xE2\x80\x99"};     // ’
constexpr absl::string_view kCjkCloses[] = {"\xE3\x80\x8D",        // 」
                                            "\xE3\x80\x8F",        // 』
                                            "\xEF\xBC\x89"};       // ）

// Length of a closing quote or bracket at s[i]; 0 when there is none.
size_t CloserAt(absl::string_view s, size_t i, bool cjk) {
  if (!cjk && (s[i] == '"' || s[i] == '\'' || s[i] == ')' || s[i] == ']')) return 1;
  for (absl::string_view mark : kQuoteCloses) {
    if (At(s, i, mark)) return mark.size();
  }
  if (cjk) {
    for (absl::string_view mark : kCjkCloses) {
      if (At(s, i, mark)) return mark.size();
    }
  }
  return 0;
}

}  // namespace

SentenceChunker::SentenceChunker(size_t max_chunk_bytes)
    : max_(max_chunk_bytes < 4 ? 4 : max_chunk_bytes) {}

size_t SentenceChunker::NextCut() const {
  const absl::string_view s = held_;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '\n') return i + 1;
    size_t end = 0;
    bool cjk = false;
    if (s[i] == '.' || s[i] == '!' || s[i] == '?') {
      end = 1;
    } else if (At(s, i, kEllipsis)) {
      end = kEllipsis.size();
    } else {
      for (absl::string_view mark : kCjkEnds) {
        if (At(s, i, mark)) {
          end = mark.size();
          cjk = true;
        }
      }
    }
    if (end == 0) {
      ++i;
      continue;
    }
    size_t j = i + end;
    while (j < s.size()) {
      size_t closer = CloserAt(s, j, cjk);
      if (closer == 0) break;
      j += closer;
    }
    if (cjk) return j;
    if (j >= s.size()) break;  // what follows decides: wait for it
    if (IsSpace(s[j])) return j + 1;
    i = j;
  }
  // No sentence end: the cap, once the held text is over it.
  if (s.size() <= max_) return 0;
  for (size_t k = max_; k > 0; --k) {
    if (IsSpace(s[k - 1])) return k;
  }
  // One long word: the last character boundary within the cap (s[k] is not a UTF-8
  // continuation byte).
  size_t k = max_;
  while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  return k > 0 ? k : max_;
}

void SentenceChunker::Add(absl::string_view delta, std::vector<std::string>* out) {
  held_.append(delta.data(), delta.size());
  for (size_t cut = NextCut(); cut > 0; cut = NextCut()) {
    out->push_back(held_.substr(0, cut));
    held_.erase(0, cut);
  }
}

std::string SentenceChunker::Flush() {
  std::string out;
  out.swap(held_);
  return out;
}

std::string SentenceChunker::TakeWords() {
  size_t cut = held_.find_last_of(" \t\n\r");
  cut = cut == std::string::npos ? held_.size() : cut + 1;
  std::string out = held_.substr(0, cut);
  held_.erase(0, cut);
  return out;
}

SentenceChunkedStream::SentenceChunkedStream(size_t max_chunk_bytes)
    : chunker_(max_chunk_bytes) {}

void SentenceChunkedStream::Emit(v1::StreamEvent event, std::vector<v1::StreamEvent>* out) {
  event.set_seq(seq_++);
  out->push_back(std::move(event));
}

void SentenceChunkedStream::EmitText(const std::string& request_id, std::string text,
                                     std::vector<v1::StreamEvent>* out) {
  v1::StreamEvent event;
  event.set_request_id(request_id);
  event.mutable_text()->set_text(std::move(text));
  Emit(std::move(event), out);
}

void SentenceChunkedStream::ReleaseHeld(const std::string& request_id,
                                        std::vector<v1::StreamEvent>* out) {
  std::string words = chunker_.TakeWords();
  if (!words.empty()) EmitText(request_id, std::move(words), out);
}

void SentenceChunkedStream::Push(const v1::StreamEvent& event,
                                 std::vector<v1::StreamEvent>* out) {
  if (event.has_text()) {
    std::vector<std::string> chunks;
    chunker_.Add(event.text().text(), &chunks);
    for (std::string& chunk : chunks) EmitText(event.request_id(), std::move(chunk), out);
    return;
  }
  std::string held = chunker_.Flush();
  if (!held.empty()) EmitText(event.request_id(), std::move(held), out);
  Emit(event, out);
}

}  // namespace gantry::router
