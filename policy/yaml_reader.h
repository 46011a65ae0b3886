// Strict reading of untrusted YAML for the policy loader: every value carries its YAML
// path and position, so each error reads
//   policy.yaml:12:5: grants[1].models.qwen3.temperature: expected a mapping with
//   min/max/action, got a scalar ('0.7')
//
// yaml-cpp is used only as a tokenizer/tree builder: its exceptions are caught here and
// turned into statuses, duplicate mapping keys (which yaml-cpp 0.7 silently accepts)
// are detected by walking each mapping's keys, and aliases are refused before the tree
// is built (an alias can multiply a small file into a huge tree and hides what a rule
// really says).
//
// Thread-safety: a YamlContext is immutable after construction; the functions are pure.
#ifndef GANTRY_POLICY_YAML_READER_H_
#define GANTRY_POLICY_YAML_READER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "yaml-cpp/yaml.h"

namespace gantry::policy {

// A YAML value with where it is: its YAML path ("grants[1].models") and position.
struct YamlValue {
  YAML::Node node;
  YAML::Mark mark;
  std::string path;
};

using YamlFields = std::vector<std::pair<std::string, YamlValue>>;

class YamlContext {
 public:
  explicit YamlContext(std::string source) : source_(std::move(source)) {}

  const std::string& source() const { return source_; }

  // INVALID_ARGUMENT "source:line:column: path: what" (1-based line and column).
  absl::Status Fail(const YamlValue& at, absl::string_view what) const;
  // "source:line:column" of `at`.
  std::string Where(const YamlValue& at) const;

  // Parses `text` as exactly one YAML document without aliases.
  // Errors: INVALID_ARGUMENT with the position of the syntax error.
  absl::StatusOr<YamlValue> Parse(absl::string_view text) const;

  // `at` as a mapping with unique scalar keys. With `allowed` non-empty, every key must
  // be one of them. `expected` describes the mapping in messages.
  absl::StatusOr<YamlFields> Map(const YamlValue& at, absl::string_view expected,
                                 const std::vector<absl::string_view>& allowed = {}) const;
  // `at` as a sequence; element paths are "path[i]".
  absl::StatusOr<std::vector<YamlValue>> Seq(const YamlValue& at,
                                             absl::string_view expected) const;

  // A non-empty scalar.
  absl::StatusOr<std::string> String(const YamlValue& at) const;
  // A name: 1-128 characters from [A-Za-z0-9._:@/-].
  absl::StatusOr<std::string> Name(const YamlValue& at) const;
  // An unquoted integer in [min, max].
  absl::StatusOr<int64_t> Int(const YamlValue& at, int64_t min, int64_t max) const;
  // An unquoted finite number.
  absl::StatusOr<double> Number(const YamlValue& at) const;
  // Unquoted true or false.
  absl::StatusOr<bool> Bool(const YamlValue& at) const;
  // A sequence of non-empty strings without duplicates.
  absl::StatusOr<std::vector<std::string>> StringList(const YamlValue& at) const;
  // A sequence of names without duplicates.
  absl::StatusOr<std::vector<std::string>> NameList(const YamlValue& at) const;

 private:
  std::string source_;
};

// Whether `node` is a plain (unquoted, untagged) scalar: `unlimited`, not "unlimited".
bool IsPlainScalar(const YAML::Node& node);

// "a mapping", "a sequence", "null", "a scalar ('text')".
std::string DescribeYaml(const YAML::Node& node);

// The value of `key` in `fields`, or nullptr.
const YamlValue* FindField(const YamlFields& fields, absl::string_view key);

}  // namespace gantry::policy

#endif  // GANTRY_POLICY_YAML_READER_H_
