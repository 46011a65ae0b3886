#include "common/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error_codes.h"
#include "common/json_schema_nodes.h"
#include "common/status.h"

namespace gantry::json_schema {
namespace {

using namespace internal;  // NOLINT: the node graph's vocabulary, in this file only

// ---------------------------------------------------------------------------------------
// Validation.

class Validator {
 public:
  Validator(const std::vector<Node>& nodes, const ValidateOptions& options)
      : nodes_(nodes), options_(options) {}

  std::vector<Violation> Run(const json::Value& value) {
    std::vector<Violation> out;
    std::string path;
    Check(0, value, &path, &out, 0);
    if (exhausted_) {
      out.clear();
      out.push_back({"", "validation exceeded its work limit"});
    }
    if (out.size() > options_.max_violations) {
      out.resize(options_.max_violations);
      out.back() = {"", "further violations omitted"};
    }
    return out;
  }

  bool Valid(const json::Value& value, int node = 0) {
    std::string path;
    return Check(node, value, &path, nullptr, 0) && !exhausted_;
  }

 private:
  // Adds a violation at `path` (when collecting); always returns false.
  bool Add(const std::string& path, std::string message, std::vector<Violation>* out) {
    if (out != nullptr && out->size() <= options_.max_violations) {
      out->push_back({path, std::move(message)});
    }
    return false;
  }

  bool Spend(size_t steps) {
    steps_ += steps;
    if (steps_ > options_.max_steps) exhausted_ = true;
    return !exhausted_;
  }

  // Validates `v` against nodes_[index]; `path` is v's JSON Pointer (restored on return).
  // With out == nullptr it stops at the first failure.
  bool Check(int index, const json::Value& v, std::string* path, std::vector<Violation>* out,
             size_t depth) {
    if (!Spend(1)) return false;
    if (depth > options_.max_depth) {
      return Add(*path, "schema nesting exceeds the depth limit (a $ref cycle?)", out);
    }
    const Node& node = nodes_[index];
    if (node.reject_all) return Add(*path, "no value is allowed here", out);
    bool ok = true;
    auto failed = [&]() {
      ok = false;
      return out == nullptr || exhausted_;  // whether to stop now
    };
    if (node.has_type) {
      uint8_t type = TypeOf(v);
      if (!TypeMatches(node.types, type)) {
        Add(*path, absl::StrCat("expected ", node.type_text, ", got ", TypeName(type)), out);
        if (failed()) return false;
      }
    }
    if (node.has_enum) {
      std::string key = CanonicalKey(v);
      if (!std::binary_search(node.enum_keys.begin(), node.enum_keys.end(), key)) {
        Add(*path, absl::StrCat("must be one of ", node.enum_text, ", got ", Preview(v)), out);
        if (failed()) return false;
      }
    }
    if (node.has_const && CanonicalKey(v) != node.const_key) {
      Add(*path, absl::StrCat("must be ", node.const_text, ", got ", Preview(v)), out);
      if (failed()) return false;
    }
    if (v.is_number() && !CheckNumber(node, v, *path, out) && failed()) return false;
    if (v.is_string() && !CheckString(node, v, *path, out) && failed()) return false;
    if (v.is_array() && !CheckArray(node, v, path, out, depth) && failed()) return false;
    if (v.is_object() && !CheckObject(node, v, path, out, depth) && failed()) return false;
    if (!CheckCombinators(node, v, path, out, depth) && failed()) return false;
    return ok && !exhausted_;
  }

  bool CheckNumber(const Node& node, const json::Value& v, const std::string& path,
                   std::vector<Violation>* out) {
    if (!node.minimum && !node.maximum && !node.exclusive_minimum && !node.exclusive_maximum &&
        !node.multiple_of) {
      return true;
    }
    Decimal d = NumberOf(v);
    bool ok = true;
    auto bound = [&](const absl::optional<Decimal>& limit, const std::string& text,
                     bool pass_if_less, bool inclusive, const char* keyword, const char* words) {
      if (!limit || (!ok && out == nullptr)) return;
      int c = CompareDecimal(d, *limit);
      bool pass = (pass_if_less ? c < 0 : c > 0) || (inclusive && c == 0);
      if (!pass) {
        ok = Add(path,
                 absl::StrCat("must be ", words, " ", text, " (", keyword, "), got ",
                              v.number_literal()),
                 out);
      }
    };
    bound(node.minimum, node.minimum_text, false, true, "minimum", ">=");
    bound(node.maximum, node.maximum_text, true, true, "maximum", "<=");
    bound(node.exclusive_minimum, node.exclusive_minimum_text, false, false, "exclusiveMinimum",
          ">");
    bound(node.exclusive_maximum, node.exclusive_maximum_text, true, false, "exclusiveMaximum",
          "<");
    if (node.multiple_of && (ok || out != nullptr) &&
        !IsMultipleOf(d, *node.multiple_of, v.as_double(), node.multiple_of_double)) {
      ok = Add(path,
               absl::StrCat("must be a multiple of ", node.multiple_of_text, ", got ",
                            v.number_literal()),
               out);
    }
    return ok;
  }

  bool CheckString(const Node& node, const json::Value& v, const std::string& path,
                   std::vector<Violation>* out) {
    bool ok = true;
    if (node.min_length || node.max_length) {
      uint64_t n = CodePoints(v.as_string());
      if (node.min_length && n < *node.min_length) {
        ok = Add(path,
                 absl::StrCat("must have at least ", *node.min_length,
                              " characters (minLength), got ", n),
                 out);
        if (out == nullptr) return false;
      }
      if (node.max_length && n > *node.max_length) {
        ok = Add(path,
                 absl::StrCat("must have at most ", *node.max_length,
                              " characters (maxLength), got ", n),
                 out);
        if (out == nullptr) return false;
      }
    }
    if (node.pattern) {
      if (!Spend(1000)) return false;
      MatchResult r = node.pattern->Search(v.as_string());
      if (r == MatchResult::kNoMatch) {
        ok = Add(
            path,
            absl::StrCat("must match the pattern ",
                         Preview(json::Value::String(node.pattern->source)), ", got ", Preview(v)),
            out);
      } else if (r == MatchResult::kLimit) {
        ok = Add(path, "matching the pattern exceeded its work limit", out);
      }
    }
    return ok;
  }

  bool CheckArray(const Node& node, const json::Value& v, std::string* path,
                  std::vector<Violation>* out, size_t depth) {
    bool ok = true;
    const auto& items = v.items();
    if (node.min_items && items.size() < *node.min_items) {
      ok = Add(*path,
               absl::StrCat("must have at least ", *node.min_items, " items (minItems), got ",
                            items.size()),
               out);
      if (out == nullptr) return false;
    }
    if (node.max_items && items.size() > *node.max_items) {
      ok = Add(*path,
               absl::StrCat("must have at most ", *node.max_items, " items (maxItems), got ",
                            items.size()),
               out);
      if (out == nullptr) return false;
    }
    size_t base = path->size();
    for (size_t i = 0; i < items.size(); ++i) {
      int child = i < node.prefix_items.size() ? node.prefix_items[i] : node.items;
      if (child < 0) continue;
      absl::StrAppend(path, "/", i);
      bool item_ok = Check(child, items[i], path, out, depth + 1);
      path->resize(base);
      if (!item_ok) {
        ok = false;
        if (out == nullptr || exhausted_) return false;
      }
    }
    if (node.contains >= 0) {
      uint64_t matches = 0;
      for (const auto& item : items) {
        if (Check(node.contains, item, path, nullptr, depth + 1)) ++matches;
        if (exhausted_) return false;
      }
      if (matches < node.min_contains) {
        ok = Add(*path,
                 absl::StrCat("must contain at least ", node.min_contains,
                              " matching items (contains), got ", matches),
                 out);
      } else if (node.max_contains && matches > *node.max_contains) {
        ok = Add(*path,
                 absl::StrCat("must contain at most ", *node.max_contains,
                              " matching items (maxContains), got ", matches),
                 out);
      }
    }
    if (node.unique_items && (ok || out != nullptr)) {
      std::map<std::string, size_t> seen;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!Spend(1)) return false;
        auto [it, inserted] = seen.emplace(CanonicalKey(items[i]), i);
        if (!inserted) {
          ok = Add(*path,
                   absl::StrCat("items ", it->second, " and ", i, " are equal (uniqueItems)"), out);
          break;
        }
      }
    }
    return ok;
  }

  bool CheckObject(const Node& node, const json::Value& v, std::string* path,
                   std::vector<Violation>* out, size_t depth) {
    bool ok = true;
    for (const std::string& name : node.required) {
      if (v.Find(name) == nullptr) {
        ok = Add(*path,
                 absl::StrCat("missing required property ", Preview(json::Value::String(name))),
                 out);
        if (out == nullptr) return false;
      }
    }
    const auto& members = v.members();
    if (node.min_properties && members.size() < *node.min_properties) {
      ok = Add(*path,
               absl::StrCat("must have at least ", *node.min_properties,
                            " properties (minProperties), got ", members.size()),
               out);
      if (out == nullptr) return false;
    }
    if (node.max_properties && members.size() > *node.max_properties) {
      ok = Add(*path,
               absl::StrCat("must have at most ", *node.max_properties,
                            " properties (maxProperties), got ", members.size()),
               out);
      if (out == nullptr) return false;
    }
    for (const auto& [name, deps] : node.dependent_required) {
      if (v.Find(name) == nullptr) continue;
      for (const std::string& dep : deps) {
        if (v.Find(dep) == nullptr) {
          ok = Add(
              *path,
              absl::StrCat("property ", Preview(json::Value::String(name)), " requires property ",
                           Preview(json::Value::String(dep)), " (dependentRequired)"),
              out);
          if (out == nullptr) return false;
        }
      }
    }
    size_t base = path->size();
    for (const json::Value::Member& member : members) {
      const std::string& name = member.first;
      const json::Value& value = member.second;
      absl::StrAppend(path, "/", EscapePointerToken(name));
      bool member_ok = true;
      bool matched = false;
      auto check = [&](int child) {
        if (!Check(child, value, path, out, depth + 1)) member_ok = false;
      };
      auto found = node.properties.find(name);
      if (found != node.properties.end()) {
        matched = true;
        check(found->second);
      }
      for (const auto& [regex, child] : node.pattern_properties) {
        if (!member_ok && out == nullptr) break;
        if (!Spend(1000)) break;
        MatchResult r = regex.Search(name);
        if (r == MatchResult::kLimit) {
          member_ok = Add(*path, "matching a patternProperties regex exceeded its work limit", out);
        } else if (r == MatchResult::kMatch) {
          matched = true;
          check(child);
        }
      }
      if (!matched && node.additional_properties >= 0 && (member_ok || out != nullptr)) {
        if (nodes_[node.additional_properties].reject_all) {
          member_ok = Add(*path, "unexpected property (additionalProperties is false)", out);
        } else {
          check(node.additional_properties);
        }
      }
      if (node.property_names >= 0 && (member_ok || out != nullptr)) {
        if (!Check(node.property_names, json::Value::String(name), path, nullptr, depth + 1)) {
          member_ok = Add(*path, "property name does not match propertyNames", out);
        }
      }
      path->resize(base);
      if (!member_ok) {
        ok = false;
        if (out == nullptr || exhausted_) return false;
      }
    }
    return ok;
  }

  // The first violation of `v` against `index`, for anyOf/oneOf messages; "" when valid.
  std::string FirstViolation(int index, const json::Value& v, std::string* path, size_t depth) {
    std::vector<Violation> branch;
    size_t base = path->size();
    Check(index, v, path, &branch, depth + 1);
    if (branch.empty()) return "";
    Violation first = branch.front();
    // Relative to the value the combinator applies to.
    first.path = first.path.substr(std::min(base, first.path.size()));
    return first.path.empty() ? first.message : first.ToString();
  }

  bool CheckCombinators(const Node& node, const json::Value& v, std::string* path,
                        std::vector<Violation>* out, size_t depth) {
    bool ok = true;
    if (node.ref >= 0 && !Check(node.ref, v, path, out, depth + 1)) {
      ok = false;
      if (out == nullptr || exhausted_) return false;
    }
    for (int child : node.all_of) {
      if (!Check(child, v, path, out, depth + 1)) {
        ok = false;
        if (out == nullptr || exhausted_) return false;
      }
    }
    if (!node.any_of.empty()) {
      bool any = false;
      for (int child : node.any_of) {
        if (Check(child, v, path, nullptr, depth + 1)) {
          any = true;
          break;
        }
        if (exhausted_) return false;
      }
      if (!any) ok = Add(*path, BranchMessage("anyOf", node.any_of, v, path, depth), out);
      if (!ok && out == nullptr) return false;
    }
    if (!node.one_of.empty()) {
      std::vector<size_t> valid;
      for (size_t i = 0; i < node.one_of.size() && valid.size() < 2; ++i) {
        if (Check(node.one_of[i], v, path, nullptr, depth + 1)) valid.push_back(i);
        if (exhausted_) return false;
      }
      if (valid.empty()) {
        ok = Add(*path, BranchMessage("oneOf", node.one_of, v, path, depth), out);
      } else if (valid.size() > 1) {
        ok = Add(*path,
                 absl::StrCat("matches more than one schema in oneOf (", valid[0], " and ",
                              valid[1], ")"),
                 out);
      }
      if (!ok && out == nullptr) return false;
    }
    if (node.not_schema >= 0) {
      bool matched = Check(node.not_schema, v, path, nullptr, depth + 1);
      if (exhausted_) return false;
      if (matched) ok = Add(*path, "must not match the schema in not", out);
      if (!ok && out == nullptr) return false;
    }
    if (node.if_schema >= 0) {
      bool condition = Check(node.if_schema, v, path, nullptr, depth + 1);
      if (exhausted_) return false;
      int branch = condition ? node.then_schema : node.else_schema;
      if (branch >= 0 && !Check(branch, v, path, out, depth + 1)) ok = false;
    }
    return ok;
  }

  std::string BranchMessage(const char* keyword, const std::vector<int>& branches,
                            const json::Value& v, std::string* path, size_t depth) {
    std::string message = absl::StrCat("does not match any schema in ", keyword);
    if (out_of_detail_) return message;
    // Details cost a second pass; keep them for the top-level report only.
    out_of_detail_ = true;
    std::vector<std::string> parts;
    for (size_t i = 0; i < branches.size() && i < 4; ++i) {
      std::string first = FirstViolation(branches[i], v, path, depth);
      if (!first.empty()) parts.push_back(absl::StrCat("[", i, "] ", first));
    }
    if (branches.size() > 4) parts.push_back("...");
    out_of_detail_ = false;
    if (!parts.empty()) absl::StrAppend(&message, " (", absl::StrJoin(parts, "; "), ")");
    return message;
  }

  const std::vector<Node>& nodes_;
  const ValidateOptions& options_;
  size_t steps_ = 0;
  bool exhausted_ = false;
  bool out_of_detail_ = false;
};

}  // namespace

std::string Violation::ToString() const {
  return absl::StrCat(path.empty() ? "(root)" : path, ": ", message);
}

std::string JoinViolations(const std::vector<Violation>& violations) {
  std::vector<std::string> parts;
  for (const Violation& v : violations) parts.push_back(v.ToString());
  return absl::StrJoin(parts, "; ");
}

Schema::Schema() : Schema(nullptr) {}

Schema::Schema(std::shared_ptr<const internal::CompiledSchema> compiled)
    : compiled_(std::move(compiled)) {}

absl::StatusOr<Schema> Schema::Compile(const json::Value& schema, const CompileOptions& options) {
  auto compiled = std::make_shared<internal::CompiledSchema>();
  GANTRY_RETURN_IF_ERROR(internal::CompileNodes(schema, options, &compiled->nodes));
  return Schema(std::move(compiled));
}

absl::StatusOr<Schema> Schema::CompileText(absl::string_view text, const CompileOptions& options) {
  GANTRY_ASSIGN_OR_RETURN(json::Value value, json::Parse(text));
  return Compile(value, options);
}

std::vector<Violation> Schema::Validate(const json::Value& value,
                                        const ValidateOptions& options) const {
  if (compiled_ == nullptr) return {};
  return Validator(compiled_->nodes, options).Run(value);
}

bool Schema::IsValid(const json::Value& value, const ValidateOptions& options) const {
  if (compiled_ == nullptr) return true;
  return Validator(compiled_->nodes, options).Valid(value);
}

bool Schema::IsValidAt(int node, const json::Value& value, const ValidateOptions& options) const {
  if (compiled_ == nullptr) return true;
  if (node < 0 || node >= static_cast<int>(compiled_->nodes.size())) return false;
  return Validator(compiled_->nodes, options).Valid(value, node);
}

namespace {

uint8_t DeclaredTypes(const std::vector<Node>& nodes, int index, int budget) {
  if (index < 0 || budget <= 0) return 0;
  const Node& node = nodes[index];
  uint8_t types = node.has_type ? node.types : 0;
  types |= node.enum_types;
  if (node.has_const && !node.const_key.empty()) {
    switch (node.const_key[0]) {
      case 'z': types |= kTypeNull; break;
      case 't':
      case 'f': types |= kTypeBoolean; break;
      case 'n': types |= kTypeNumber; break;
      case 's': types |= kTypeString; break;
      case 'a': types |= kTypeArray; break;
      case 'o': types |= kTypeObject; break;
    }
  }
  if (types != 0) return types;
  types |= DeclaredTypes(nodes, node.ref, budget - 1);
  for (int child : node.any_of) types |= DeclaredTypes(nodes, child, budget - 1);
  for (int child : node.one_of) types |= DeclaredTypes(nodes, child, budget - 1);
  return types;
}

}  // namespace

uint8_t Schema::PropertyTypes(absl::string_view key) const {
  if (compiled_ == nullptr) return 0;
  const std::vector<Node>& nodes = compiled_->nodes;
  // Follow a root that is only a $ref (a schema kept in $defs).
  int root = 0;
  for (int hops = 0; hops < 8 && nodes[root].ref >= 0 && nodes[root].properties.empty(); ++hops) {
    root = nodes[root].ref;
  }
  const Node& node = nodes[root];
  auto found = node.properties.find(std::string(key));
  if (found != node.properties.end()) return DeclaredTypes(nodes, found->second, 8);
  return DeclaredTypes(nodes, node.additional_properties, 8);
}

}  // namespace gantry::json_schema
