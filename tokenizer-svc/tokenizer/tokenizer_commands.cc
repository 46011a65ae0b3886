#include "tokenizer-svc/tokenizer/tokenizer_commands.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"

namespace gantry::tokenizer {
namespace {

// Inputs beyond this are refused rather than read into memory.
constexpr size_t kMaxInputBytes = 256u << 20;

absl::StatusOr<std::string> ReadInput(const std::string& name) {
  std::FILE* f = name == "-" ? stdin : std::fopen(name.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", name));
  std::string data;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) {
    data.append(buffer, n);
    if (data.size() > kMaxInputBytes) break;
  }
  bool failed = std::ferror(f) != 0;
  if (f != stdin) std::fclose(f);
  if (failed) return absl::DataLossError(absl::StrCat("error reading ", name));
  if (data.size() > kMaxInputBytes) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is larger than ", kMaxInputBytes, " bytes"));
  }
  return data;
}

struct Args {
  std::string tokenizer;
  std::string input = "-";
  bool add_special = false;
  bool split_special = false;
  bool skip_special = false;
};

// Parses the shared options; `allowed` lists the boolean flags this command takes.
// Returns false (after printing why) on a usage error.
bool ParseArgs(const char* command, const std::vector<std::string>& args,
               const std::vector<std::string>& allowed, Args* out) {
  bool have_input = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto allowed_flag = [&](const char* flag) {
      for (const auto& a : allowed) {
        if (a == flag) return arg == flag;
      }
      return false;
    };
    if (arg == "--tokenizer") {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "gantry %s: --tokenizer needs a PATH\n", command);
        return false;
      }
      out->tokenizer = args[++i];
    } else if (absl::StartsWith(arg, "--tokenizer=")) {
      out->tokenizer = arg.substr(12);
    } else if (allowed_flag("--add-special")) {
      out->add_special = true;
    } else if (allowed_flag("--split-special")) {
      out->split_special = true;
    } else if (allowed_flag("--skip-special")) {
      out->skip_special = true;
    } else if (arg != "-" && absl::StartsWith(arg, "-")) {
      std::fprintf(stderr, "gantry %s: unknown option '%s'\n", command, arg.c_str());
      return false;
    } else if (have_input) {
      std::fprintf(stderr, "gantry %s: more than one input file\n", command);
      return false;
    } else {
      out->input = arg;
      have_input = true;
    }
  }
  if (out->tokenizer.empty()) {
    std::fprintf(stderr, "gantry %s: --tokenizer PATH is required\n", command);
    return false;
  }
  return true;
}

int Fail(const char* command, const absl::Status& status) {
  std::fprintf(stderr, "gantry %s: %s\n", command, status.ToString().c_str());
  return 1;
}

int RunTokenize(const std::vector<std::string>& args) {
  Args a;
  if (!ParseArgs("tokenize", args, {"--add-special", "--split-special"}, &a)) return 2;
  auto tokenizer = Tokenizer::Load(a.tokenizer);
  if (!tokenizer.ok()) return Fail("tokenize", tokenizer.status());
  auto text = ReadInput(a.input);
  if (!text.ok()) return Fail("tokenize", text.status());
  EncodeOptions options;
  options.add_special = a.add_special;
  options.split_special = a.split_special;
  auto ids = (*tokenizer)->Encode(*text, options);
  if (!ids.ok()) return Fail("tokenize", ids.status());
  std::string out = "[";
  for (size_t i = 0; i < ids->size(); ++i) absl::StrAppend(&out, i ? "," : "", (*ids)[i]);
  out += "]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int RunDetokenize(const std::vector<std::string>& args) {
  Args a;
  if (!ParseArgs("detokenize", args, {"--skip-special"}, &a)) return 2;
  auto tokenizer = Tokenizer::Load(a.tokenizer);
  if (!tokenizer.ok()) return Fail("detokenize", tokenizer.status());
  auto input = ReadInput(a.input);
  if (!input.ok()) return Fail("detokenize", input.status());
  auto value = json::Parse(*input);
  if (!value.ok()) return Fail("detokenize", value.status());
  if (!value->is_array()) {
    return Fail("detokenize", absl::InvalidArgumentError("input must be a JSON array of token ids"));
  }
  std::vector<int32_t> ids;
  for (const json::Value& item : value->items()) {
    auto id = item.as_int64();
    if (!item.is_integer() || !id.has_value() || *id < 0 || *id > INT32_MAX) {
      return Fail("detokenize", absl::InvalidArgumentError("input must be a JSON array of token ids"));
    }
    ids.push_back(static_cast<int32_t>(*id));
  }
  auto text = (*tokenizer)->Decode(ids, a.skip_special);
  if (!text.ok()) return Fail("detokenize", text.status());
  std::fwrite(text->data(), 1, text->size(), stdout);
  return 0;
}

}  // namespace

const Subcommand kTokenizeCommand = {
    "tokenize", "print the token ids of a text as a JSON array",
    "Usage: gantry tokenize --tokenizer PATH [--add-special] [--split-special] [FILE|-]\n\n"
    "Reads FILE (or stdin) as raw UTF-8 bytes and prints its token ids as one JSON array.\n"
    "  --tokenizer PATH  a directory holding tokenizer.json (and tokenizer_config.json),\n"
    "                    or a GGUF file (its tokenizer.ggml.* vocabulary: byte-level or\n"
    "                    SentencePiece BPE)\n"
    "  --add-special     add the tokenizer's template tokens (BOS, ...), as HF\n"
    "                    add_special_tokens=True\n"
    "  --split-special   treat special tokens in the text as plain text (for untrusted\n"
    "                    user content: \"<|im_start|>\" typed by a user stays text)\n"
    "Exit status: 0 success, 1 failure, 2 usage error.\n",
    &RunTokenize};

const Subcommand kDetokenizeCommand = {
    "detokenize", "print the text of a JSON array of token ids",
    "Usage: gantry detokenize --tokenizer PATH [--skip-special] [FILE|-]\n\n"
    "Reads a JSON array of token ids from FILE (or stdin) and prints their text exactly\n"
    "(no newline added; invalid UTF-8 from partial byte tokens becomes U+FFFD).\n"
    "  --tokenizer PATH  a directory holding tokenizer.json, or a GGUF file\n"
    "  --skip-special    leave out special tokens\n"
    "Exit status: 0 success, 1 failure, 2 usage error.\n",
    &RunDetokenize};

}  // namespace gantry::tokenizer
