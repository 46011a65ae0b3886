#include "policy/yaml_reader.h"

#include <cmath>
#include <exception>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "yaml-cpp/eventhandler.h"

namespace gantry::policy {
namespace {

// Finds the first alias and counts documents, without building a tree.
class AliasFinder : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override { ++documents; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    if (!found_alias) alias_mark = mark;
    found_alias = true;
  }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  int documents = 0;
  bool found_alias = false;
  YAML::Mark alias_mark;
};

std::string Child(const std::string& path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

}  // namespace

bool IsPlainScalar(const YAML::Node& node) {
  // yaml-cpp tags plain scalars "?" and quoted ones "!"; an explicit tag is neither.
  return node.IsScalar() && node.Tag() == "?";
}

std::string DescribeYaml(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Scalar: {
      std::string text = node.Scalar();
      if (text.size() > 40) text = text.substr(0, 40) + "...";
      std::string quoted;
      for (char c : text) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          quoted += '?';
        } else {
          quoted += c;
        }
      }
      return absl::StrCat(IsPlainScalar(node) ? "a scalar" : "a quoted string", " ('",
                          quoted, "')");
    }
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Undefined:
      return "nothing";
  }
  return "nothing";
}

const YamlValue* FindField(const YamlFields& fields, absl::string_view key) {
  for (const auto& [name, value] : fields) {
    if (name == key) return &value;
  }
  return nullptr;
}

std::string YamlContext::Where(const YamlValue& at) const {
  if (at.mark.line < 0 || at.mark.column < 0) return source_;
  return absl::StrCat(source_, ":", at.mark.line + 1, ":", at.mark.column + 1);
}

absl::Status YamlContext::Fail(const YamlValue& at, absl::string_view what) const {
  return absl::InvalidArgumentError(
      absl::StrCat(Where(at), ": ", at.path.empty() ? "" : at.path + ": ", what));
}

absl::StatusOr<YamlValue> YamlContext::Parse(absl::string_view text) const {
  YamlValue top;
  top.mark.line = 0;
  top.mark.column = 0;
  try {
    std::stringstream in{std::string(text)};
    YAML::Parser parser(in);
    AliasFinder finder;
    // yaml-cpp 0.7 can report the same empty document forever on a stray top-level
    // token such as ',' (jbeder/yaml-cpp#1040, fixed upstream by #1319): without this
    // bound the loop never ends. A policy is one document, so two are already too many.
    while (finder.documents < 2 && parser.HandleNextDocument(finder)) {
    }
    if (finder.found_alias) {
      YamlValue at{YAML::Node(), finder.alias_mark, ""};
      return Fail(at, "aliases (*name) are not allowed in a policy file; write each rule out");
    }
    if (finder.documents != 1) {
      return Fail(top, finder.documents == 0 ? std::string("expected a YAML document, found none")
                                             : std::string("expected exactly one YAML document"));
    }
    // Not LoadAll(): it has the unbounded loop above. The event pass saw exactly one
    // document, and Load() reads only the first.
    top.node = YAML::Load(std::string(text));
    if (top.node.Mark().line >= 0) top.mark = top.node.Mark();
    return top;
  } catch (const YAML::Exception& e) {
    YamlValue at{YAML::Node(), e.mark, ""};
    return Fail(at, absl::StrCat("YAML syntax: ", e.msg));
  } catch (const std::exception& e) {
    return Fail(top, absl::StrCat("YAML could not be read: ", e.what()));
  }
}

absl::StatusOr<YamlFields> YamlContext::Map(const YamlValue& at, absl::string_view expected,
                                            const std::vector<absl::string_view>& allowed) const {
  if (!at.node.IsMap()) {
    return Fail(at, absl::StrCat("expected ", expected, ", got ", DescribeYaml(at.node)));
  }
  YamlFields fields;
  absl::flat_hash_set<std::string> seen;
  for (auto it = at.node.begin(); it != at.node.end(); ++it) {
    YAML::Node key = it->first;
    YAML::Node value = it->second;
    YamlValue key_at{key, key.Mark(), at.path};
    if (!key.IsScalar() || key.Scalar().empty()) {
      return Fail(key_at, absl::StrCat("expected a non-empty scalar key, got ",
                                       DescribeYaml(key)));
    }
    const std::string& name = key.Scalar();
    if (!seen.insert(name).second) {
      return Fail(key_at, absl::StrCat("duplicate key '", name, "'"));
    }
    if (!allowed.empty()) {
      bool known = false;
      for (absl::string_view a : allowed) known = known || a == name;
      if (!known) {
        return Fail(key_at, absl::StrCat("unknown key '", name, "'; expected one of ",
                                         absl::StrJoin(allowed, ", ")));
      }
    }
    // A null value has no useful position of its own; point at its key.
    YAML::Mark mark = value.IsNull() || value.Mark().line < 0 ? key.Mark() : value.Mark();
    fields.emplace_back(name, YamlValue{value, mark, Child(at.path, name)});
  }
  return fields;
}

absl::StatusOr<std::vector<YamlValue>> YamlContext::Seq(const YamlValue& at,
                                                        absl::string_view expected) const {
  if (!at.node.IsSequence()) {
    return Fail(at, absl::StrCat("expected ", expected, ", got ", DescribeYaml(at.node)));
  }
  std::vector<YamlValue> items;
  size_t i = 0;
  for (auto it = at.node.begin(); it != at.node.end(); ++it, ++i) {
    YAML::Node item = *it;
    YAML::Mark mark = item.IsNull() || item.Mark().line < 0 ? at.mark : item.Mark();
    items.push_back(YamlValue{item, mark, absl::StrCat(at.path, "[", i, "]")});
  }
  return items;
}

absl::StatusOr<std::string> YamlContext::String(const YamlValue& at) const {
  if (!at.node.IsScalar() || at.node.Scalar().empty()) {
    return Fail(at, absl::StrCat("expected a non-empty string, got ", DescribeYaml(at.node)));
  }
  if (at.node.Scalar().find('\0') != std::string::npos) {
    return Fail(at, "a string must not contain NUL");
  }
  return at.node.Scalar();
}

absl::StatusOr<std::string> YamlContext::Name(const YamlValue& at) const {
  if (!at.node.IsScalar()) {
    return Fail(at, absl::StrCat("expected a name, got ", DescribeYaml(at.node)));
  }
  const std::string& text = at.node.Scalar();
  bool ok = !text.empty() && text.size() <= 128;
  for (char c : text) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == ':' || c == '@' || c == '/' || c == '-');
  }
  if (!ok) {
    return Fail(at, absl::StrCat("expected a name (1-128 characters from A-Z a-z 0-9 . _ : @ / -), "
                                 "got ",
                                 DescribeYaml(at.node)));
  }
  return text;
}

absl::StatusOr<int64_t> YamlContext::Int(const YamlValue& at, int64_t min, int64_t max) const {
  int64_t value = 0;
  if (!IsPlainScalar(at.node) || !absl::SimpleAtoi(at.node.Scalar(), &value)) {
    return Fail(at, absl::StrCat("expected an integer, got ", DescribeYaml(at.node)));
  }
  if (value < min || value > max) {
    return Fail(at, absl::StrCat("expected an integer in [", min, ", ", max, "], got ", value));
  }
  return value;
}

absl::StatusOr<double> YamlContext::Number(const YamlValue& at) const {
  double value = 0;
  if (!IsPlainScalar(at.node) || !absl::SimpleAtod(at.node.Scalar(), &value) ||
      !std::isfinite(value)) {
    return Fail(at, absl::StrCat("expected a number, got ", DescribeYaml(at.node)));
  }
  return value;
}

absl::StatusOr<bool> YamlContext::Bool(const YamlValue& at) const {
  if (IsPlainScalar(at.node) && at.node.Scalar() == "true") return true;
  if (IsPlainScalar(at.node) && at.node.Scalar() == "false") return false;
  return Fail(at, absl::StrCat("expected true or false, got ", DescribeYaml(at.node)));
}

absl::StatusOr<std::vector<std::string>> YamlContext::StringList(const YamlValue& at) const {
  auto items = Seq(at, "a sequence of strings");
  if (!items.ok()) return items.status();
  std::vector<std::string> out;
  absl::flat_hash_set<std::string> seen;
  for (const YamlValue& item : *items) {
    auto text = String(item);
    if (!text.ok()) return text.status();
    if (!seen.insert(*text).second) return Fail(item, absl::StrCat("duplicate entry '", *text, "'"));
    out.push_back(*std::move(text));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> YamlContext::NameList(const YamlValue& at) const {
  auto items = Seq(at, "a sequence of names");
  if (!items.ok()) return items.status();
  std::vector<std::string> out;
  absl::flat_hash_set<std::string> seen;
  for (const YamlValue& item : *items) {
    auto name = Name(item);
    if (!name.ok()) return name.status();
    if (!seen.insert(*name).second) return Fail(item, absl::StrCat("duplicate entry '", *name, "'"));
    out.push_back(*std::move(name));
  }
  return out;
}

}  // namespace gantry::policy
