#include "tokenizer-svc/tokenizer/tiny_tokenizers.h"

#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/utf8.h"
#include "tokenizer-svc/tokenizer/byte_level.h"

namespace gantry::tokenizer {
namespace {

std::string Quote(const std::string& s) {
  std::string out;
  json::AppendQuoted(s, /*ensure_ascii=*/false, &out);
  return out;
}

std::string ByteLevelText(const std::string& raw) {
  std::string out;
  AppendByteLevelText(raw, &out);
  return out;
}

}  // namespace

std::string TinyByteLevelTokenizerJson() {
  std::string vocab;
  int id = 0;
  for (int b = 0; b < 256; ++b) {
    std::string text;
    AppendUtf8(ByteLevelCodePoint(static_cast<uint8_t>(b)), &text);
    absl::StrAppend(&vocab, id ? "," : "", Quote(text), ":", id);
    ++id;
  }
  const std::vector<std::pair<std::string, std::string>> merges = {
      {" ", "t"}, {"h", "e"}, {" t", "he"}, {"i", "n"}, {" ", "in"}};
  std::string merge_list;
  for (const auto& [l, r] : merges) {
    absl::StrAppend(&vocab, ",", Quote(ByteLevelText(l + r)), ":", id++);
    absl::StrAppend(&merge_list, merge_list.empty() ? "" : ",", "[", Quote(ByteLevelText(l)), ",",
                    Quote(ByteLevelText(r)), "]");
  }
  auto added = [](int id, const char* content, bool special, bool lstrip, bool rstrip,
                  bool single_word) {
    return absl::StrCat("{\"id\":", id, ",\"content\":\"", content, "\",\"single_word\":",
                        single_word ? "true" : "false", ",\"lstrip\":", lstrip ? "true" : "false",
                        ",\"rstrip\":", rstrip ? "true" : "false",
                        ",\"normalized\":false,\"special\":", special ? "true" : "false", "}");
  };
  return absl::StrCat(
      "{\"version\":\"1.0\",\"added_tokens\":[", added(id, "<|im_start|>", true, false, false, false),
      ",", added(id + 1, "<tool_call>", false, false, false, false), ",",
      added(id + 2, "<|l|>", true, true, false, false), ",",
      added(id + 3, "<|r|>", true, false, true, false), ",",
      added(id + 4, "<w>", false, false, false, true),
      "],\"normalizer\":{\"type\":\"NFC\"},"
      "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
      "{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "
      "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
      "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":"
      "false,\"trim_offsets\":false,\"use_regex\":false}]},"
      "\"post_processor\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,"
      "\"use_regex\":false},"
      "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,"
      "\"use_regex\":false},"
      "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":"
      "\"\",\"end_of_word_suffix\":\"\",\"fuse_unk\":false,\"byte_fallback\":false,"
      "\"ignore_merges\":false,\"vocab\":{",
      vocab, "},\"merges\":[", merge_list, "]}}");
}

std::string TinySentencePieceTokenizerJson() {
  std::string vocab = "\"<unk>\":0,\"<s>\":1,\"</s>\":2";
  int id = 3;
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    absl::StrAppend(&vocab, ",\"", name, "\":", id++);
  }
  const char* kSpace = "\xE2\x96\x81";
  for (const char* letter : {"a", "b", "c", "h", "i", "l", "o", "e"}) {
    absl::StrAppend(&vocab, ",\"", letter, "\":", id++);
  }
  absl::StrAppend(&vocab, ",\"", kSpace, "\":", id++);
  const std::vector<std::pair<std::string, std::string>> merges = {
      {kSpace, "h"}, {"e", "l"}, {"el", "l"}, {"ell", "o"}, {std::string(kSpace) + "h", "ello"}};
  std::string merge_list;
  for (const auto& [l, r] : merges) {
    absl::StrAppend(&vocab, ",", Quote(l + r), ":", id++);
    absl::StrAppend(&merge_list, merge_list.empty() ? "" : ",", Quote(l + " " + r));
  }
  return absl::StrCat(
      "{\"version\":\"1.0\",\"added_tokens\":["
      "{\"id\":0,\"content\":\"<unk>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
      "\"normalized\":false,\"special\":true},"
      "{\"id\":1,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
      "\"normalized\":false,\"special\":true},"
      "{\"id\":2,\"content\":\"</s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
      "\"normalized\":false,\"special\":true}],"
      "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"",
      kSpace, "\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"", kSpace,
      "\"}]},\"pre_tokenizer\":null,"
      "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":"
      "\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],"
      "\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}},"
      "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{"
      "\"String\":\"",
      kSpace,
      "\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\","
      "\"content\":\" \",\"start\":1,\"stop\":0}]},"
      "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":\"<unk>\",\"fuse_unk\":true,"
      "\"byte_fallback\":true,\"vocab\":{",
      vocab, "},\"merges\":[", merge_list, "]}}");
}

}  // namespace gantry::tokenizer
