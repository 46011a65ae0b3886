// The JSON Schema compiler: a schema document to the node graph of
// json_schema_nodes.h, $refs resolved, limits of CompileOptions enforced.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error_codes.h"
#include "common/json_schema_nodes.h"
#include "common/status.h"

namespace gantry::json_schema::internal {
namespace {

class Compiler {
 public:
  Compiler(const json::Value& root, const CompileOptions& options)
      : root_(root), options_(options) {}

  absl::Status Run(std::vector<Node>* nodes) {
    GANTRY_ASSIGN_OR_RETURN(int root, Reserve());
    GANTRY_RETURN_IF_ERROR(Fill(root, root_, "", 0));
    // $ref targets are compiled here, not where the $ref is, so that a chain of $defs
    // referring to each other never deepens the C++ stack.
    while (!pending_.empty()) {
      auto [index, target] = pending_.back();
      pending_.pop_back();
      GANTRY_RETURN_IF_ERROR(Fill(index, *target.first, target.second, 0));
    }
    *nodes = std::move(nodes_);
    return absl::OkStatus();
  }

 private:
  absl::Status Fail(const std::string& pointer, absl::string_view what) {
    return ReasonError("invalid_request",
                       absl::StrCat("schema ", pointer.empty() ? "(root)" : pointer, ": ", what));
  }

  absl::StatusOr<int> Reserve() {
    if (nodes_.size() >= options_.max_nodes) {
      return ReasonError("invalid_request",
                         absl::StrCat("schema has more than ", options_.max_nodes, " subschemas"));
    }
    nodes_.emplace_back();
    return static_cast<int>(nodes_.size() - 1);
  }

  absl::StatusOr<int> Sub(const json::Value& v, const std::string& pointer, size_t depth) {
    GANTRY_ASSIGN_OR_RETURN(int index, Reserve());
    GANTRY_RETURN_IF_ERROR(Fill(index, v, pointer, depth + 1));
    return index;
  }

  absl::StatusOr<std::vector<int>> SubArray(const json::Value& v, const std::string& pointer,
                                            size_t depth, bool non_empty) {
    if (!v.is_array() || (non_empty && v.items().empty())) {
      return Fail(pointer, non_empty ? "expected a non-empty array of schemas"
                                     : "expected an array of schemas");
    }
    std::vector<int> out;
    for (size_t i = 0; i < v.items().size(); ++i) {
      GANTRY_ASSIGN_OR_RETURN(int index, Sub(v.items()[i], absl::StrCat(pointer, "/", i), depth));
      out.push_back(index);
    }
    return out;
  }

  absl::StatusOr<uint64_t> Count(const json::Value& v, const std::string& pointer) {
    if (!v.is_number()) return Fail(pointer, "expected a non-negative integer");
    Decimal d = NumberOf(v);
    if (d.negative || !IsIntegral(d)) return Fail(pointer, "expected a non-negative integer");
    if (d.digits.empty()) return 0;
    if (static_cast<int64_t>(d.digits.size()) + d.exponent > 19) return UINT64_MAX;
    unsigned __int128 x = 0;
    for (char c : d.digits) x = x * 10 + (c - '0');
    for (int64_t e = 0; e < d.exponent; ++e) x *= 10;
    return x > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(x);
  }

  absl::StatusOr<std::string> PatternSource(const json::Value& v, const std::string& pointer) {
    if (!v.is_string()) return Fail(pointer, "expected a regex string");
    if (v.as_string().size() > options_.max_pattern_bytes) {
      return Fail(pointer,
                  absl::StrCat("regex longer than ", options_.max_pattern_bytes, " bytes"));
    }
    if (++patterns_ > options_.max_patterns) {
      return Fail(pointer, absl::StrCat("more than ", options_.max_patterns, " regexes"));
    }
    return v.as_string();
  }

  absl::StatusOr<Regex> Pattern(const std::string& source, const std::string& pointer) {
    auto regex = CompileRegex(source);
    if (!regex.ok()) return Fail(pointer, regex.status().message());
    return std::move(regex).value();
  }

  // Resolves a local JSON Pointer reference ("#", "#/a/b") within the root document.
  absl::StatusOr<const json::Value*> Resolve(const std::string& ref, const std::string& pointer) {
    if (ref.empty() || ref[0] != '#') {
      return Fail(pointer, absl::StrCat("$ref \"", ref,
                                        "\" is not local: only \"#\" and \"#/...\" JSON Pointers "
                                        "are supported"));
    }
    const json::Value* at = &root_;
    absl::string_view rest = absl::string_view(ref).substr(1);
    if (!rest.empty() && rest[0] != '/') {
      return Fail(pointer, absl::StrCat("$ref \"", ref, "\": anchors are not supported"));
    }
    while (!rest.empty()) {
      rest.remove_prefix(1);
      size_t end = rest.find('/');
      absl::string_view raw = rest.substr(0, end);
      rest = end == absl::string_view::npos ? absl::string_view() : rest.substr(end);
      // Undo URI percent-encoding, then JSON Pointer escapes.
      std::string token;
      for (size_t i = 0; i < raw.size(); ++i) {
        auto hex = [](char c) {
          return c >= '0' && c <= '9'   ? c - '0'
                 : c >= 'a' && c <= 'f' ? c - 'a' + 10
                 : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                        : -1;
        };
        if (raw[i] == '%' && i + 2 < raw.size() && hex(raw[i + 1]) >= 0 && hex(raw[i + 2]) >= 0) {
          token += static_cast<char>(hex(raw[i + 1]) * 16 + hex(raw[i + 2]));
          i += 2;
        } else if (raw[i] == '~' && i + 1 < raw.size() &&
                   (raw[i + 1] == '0' || raw[i + 1] == '1')) {
          token += raw[i + 1] == '0' ? '~' : '/';
          ++i;
        } else {
          token += raw[i];
        }
      }
      const json::Value* next = nullptr;
      if (at->is_object()) {
        next = at->Find(token);
      } else if (at->is_array() && !token.empty() && token.size() < 10 &&
                 token.find_first_not_of("0123456789") == std::string::npos &&
                 (token == "0" || token[0] != '0')) {
        size_t i = 0;
        for (char c : token) i = i * 10 + static_cast<size_t>(c - '0');
        if (i < at->items().size()) next = &at->items()[i];
      }
      if (next == nullptr) return Fail(pointer, absl::StrCat("$ref \"", ref, "\" points nowhere"));
      at = next;
    }
    return at;
  }

  absl::Status Fill(int index, const json::Value& v, const std::string& pointer, size_t depth) {
    if (depth > options_.max_depth) {
      return Fail(pointer, absl::StrCat("nested deeper than ", options_.max_depth));
    }
    Node node;
    if (v.is_bool()) {
      node.reject_all = !v.as_bool();
      nodes_[index] = std::move(node);
      return absl::OkStatus();
    }
    if (!v.is_object()) return Fail(pointer, "a schema must be an object or a boolean");
    const json::Value* additional_items = nullptr;
    bool items_is_array = false;
    const json::Value* minimum_draft4 = nullptr;
    const json::Value* maximum_draft4 = nullptr;
    for (const auto& [key, value] : v.members()) {
      const std::string at = absl::StrCat(pointer, "/", EscapePointerToken(key));
      if (key == "type") {
        node.has_type = true;
        std::vector<const json::Value*> names;
        if (value.is_string()) {
          names.push_back(&value);
        } else if (value.is_array()) {
          for (const auto& item : value.items()) names.push_back(&item);
        } else {
          return Fail(at, "expected a type name or an array of type names");
        }
        for (const json::Value* name : names) {
          uint8_t bit = name->is_string() ? TypeBitFromName(name->as_string()) : 0;
          if (bit == 0) {
            return Fail(at, absl::StrCat("unknown type ", Preview(*name),
                                         " (null, boolean, integer, number, string, array, "
                                         "object)"));
          }
          if (!(node.types & bit)) {
            absl::StrAppend(&node.type_text, node.types ? " or " : "", TypeName(bit));
          }
          node.types |= bit;
        }
        if (node.type_text.empty()) node.type_text = "nothing (an empty type array)";
      } else if (key == "properties" || key == "patternProperties" || key == "dependentSchemas") {
        if (!value.is_object()) return Fail(at, "expected an object of schemas");
        for (const auto& [name, sub] : value.members()) {
          std::string sub_at = absl::StrCat(at, "/", EscapePointerToken(name));
          if (key == "dependentSchemas") continue;  // not enforced (documented)
          if (key == "patternProperties") {
            GANTRY_ASSIGN_OR_RETURN(std::string source,
                                    PatternSource(json::Value::String(name), sub_at));
            GANTRY_ASSIGN_OR_RETURN(Regex regex, Pattern(source, sub_at));
            GANTRY_ASSIGN_OR_RETURN(int child, Sub(sub, sub_at, depth));
            node.pattern_properties.emplace_back(std::move(regex), child);
          } else {
            GANTRY_ASSIGN_OR_RETURN(int child, Sub(sub, sub_at, depth));
            node.properties[name] = child;
          }
        }
      } else if (key == "additionalProperties") {
        GANTRY_ASSIGN_OR_RETURN(node.additional_properties, Sub(value, at, depth));
      } else if (key == "propertyNames") {
        GANTRY_ASSIGN_OR_RETURN(node.property_names, Sub(value, at, depth));
      } else if (key == "required") {
        if (value.is_bool()) continue;  // draft 3's per-property form: ignored
        if (!value.is_array()) return Fail(at, "expected an array of property names");
        for (const auto& name : value.items()) {
          if (!name.is_string()) return Fail(at, "expected an array of property names");
          node.required.push_back(name.as_string());
        }
      } else if (key == "minProperties") {
        GANTRY_ASSIGN_OR_RETURN(node.min_properties, Count(value, at));
      } else if (key == "maxProperties") {
        GANTRY_ASSIGN_OR_RETURN(node.max_properties, Count(value, at));
      } else if (key == "dependentRequired") {
        if (!value.is_object()) return Fail(at, "expected an object of name arrays");
        for (const auto& [name, list] : value.members()) {
          std::vector<std::string> names;
          if (!list.is_array()) return Fail(at, "expected an object of name arrays");
          for (const auto& item : list.items()) {
            if (!item.is_string()) return Fail(at, "expected an object of name arrays");
            names.push_back(item.as_string());
          }
          node.dependent_required.emplace_back(name, std::move(names));
        }
      } else if (key == "prefixItems") {
        GANTRY_ASSIGN_OR_RETURN(node.prefix_items, SubArray(value, at, depth, false));
      } else if (key == "items") {
        if (value.is_array()) {  // drafts 4-2019: tuple form
          items_is_array = true;
          GANTRY_ASSIGN_OR_RETURN(node.prefix_items, SubArray(value, at, depth, false));
        } else {
          GANTRY_ASSIGN_OR_RETURN(node.items, Sub(value, at, depth));
        }
      } else if (key == "additionalItems") {
        additional_items = &value;
      } else if (key == "contains") {
        GANTRY_ASSIGN_OR_RETURN(node.contains, Sub(value, at, depth));
      } else if (key == "minContains") {
        GANTRY_ASSIGN_OR_RETURN(node.min_contains, Count(value, at));
      } else if (key == "maxContains") {
        GANTRY_ASSIGN_OR_RETURN(node.max_contains, Count(value, at));
      } else if (key == "minItems") {
        GANTRY_ASSIGN_OR_RETURN(node.min_items, Count(value, at));
      } else if (key == "maxItems") {
        GANTRY_ASSIGN_OR_RETURN(node.max_items, Count(value, at));
      } else if (key == "uniqueItems") {
        if (!value.is_bool()) return Fail(at, "expected a boolean");
        node.unique_items = value.as_bool();
      } else if (key == "minLength") {
        GANTRY_ASSIGN_OR_RETURN(node.min_length, Count(value, at));
      } else if (key == "maxLength") {
        GANTRY_ASSIGN_OR_RETURN(node.max_length, Count(value, at));
      } else if (key == "pattern") {
        GANTRY_ASSIGN_OR_RETURN(std::string source, PatternSource(value, at));
        GANTRY_ASSIGN_OR_RETURN(node.pattern, Pattern(source, at));
      } else if (key == "minimum" || key == "maximum" || key == "multipleOf" ||
                 key == "exclusiveMinimum" || key == "exclusiveMaximum") {
        if (value.is_bool() && key == "exclusiveMinimum") {
          if (value.as_bool()) minimum_draft4 = &value;
          continue;
        }
        if (value.is_bool() && key == "exclusiveMaximum") {
          if (value.as_bool()) maximum_draft4 = &value;
          continue;
        }
        if (!value.is_number()) return Fail(at, "expected a number");
        Decimal d = NumberOf(value);
        std::string text = value.number_literal();
        if (key == "minimum") node.minimum = d, node.minimum_text = text;
        if (key == "maximum") node.maximum = d, node.maximum_text = text;
        if (key == "exclusiveMinimum")
          node.exclusive_minimum = d, node.exclusive_minimum_text = text;
        if (key == "exclusiveMaximum")
          node.exclusive_maximum = d, node.exclusive_maximum_text = text;
        if (key == "multipleOf") {
          if (d.negative || d.digits.empty()) return Fail(at, "expected a number > 0");
          node.multiple_of = d;
          node.multiple_of_text = text;
          node.multiple_of_double = value.as_double();
        }
      } else if (key == "enum") {
        if (!value.is_array()) return Fail(at, "expected an array");
        node.has_enum = true;
        for (const auto& item : value.items()) {
          node.enum_keys.push_back(CanonicalKey(item));
          node.enum_types |= TypeOf(item);
          node.enum_values.push_back(json::DumpCompact(item));
        }
        std::sort(node.enum_keys.begin(), node.enum_keys.end());
        node.enum_text = Preview(value, 200);
      } else if (key == "const") {
        node.has_const = true;
        node.const_key = CanonicalKey(value);
        node.const_text = Preview(value);
        node.const_value = json::DumpCompact(value);
      } else if (key == "allOf") {
        GANTRY_ASSIGN_OR_RETURN(node.all_of, SubArray(value, at, depth, true));
      } else if (key == "anyOf") {
        GANTRY_ASSIGN_OR_RETURN(node.any_of, SubArray(value, at, depth, true));
      } else if (key == "oneOf") {
        GANTRY_ASSIGN_OR_RETURN(node.one_of, SubArray(value, at, depth, true));
      } else if (key == "not") {
        GANTRY_ASSIGN_OR_RETURN(node.not_schema, Sub(value, at, depth));
      } else if (key == "if") {
        GANTRY_ASSIGN_OR_RETURN(node.if_schema, Sub(value, at, depth));
      } else if (key == "then") {
        GANTRY_ASSIGN_OR_RETURN(node.then_schema, Sub(value, at, depth));
      } else if (key == "else") {
        GANTRY_ASSIGN_OR_RETURN(node.else_schema, Sub(value, at, depth));
      } else if (key == "$ref") {
        if (!value.is_string()) return Fail(at, "expected a string");
        GANTRY_ASSIGN_OR_RETURN(const json::Value* target, Resolve(value.as_string(), at));
        auto found = ref_nodes_.find(target);
        if (found != ref_nodes_.end()) {
          node.ref = found->second;
        } else {
          GANTRY_ASSIGN_OR_RETURN(node.ref, Reserve());
          ref_nodes_[target] = node.ref;
          pending_.emplace_back(node.ref, std::make_pair(target, value.as_string().substr(1)));
        }
      }
      // Everything else is an annotation or a keyword we do not know: ignored.
    }
    if (items_is_array && additional_items != nullptr) {
      GANTRY_ASSIGN_OR_RETURN(node.items,
                              Sub(*additional_items, pointer + "/additionalItems", depth));
    }
    // Draft 4: a boolean exclusiveMinimum makes `minimum` exclusive.
    if (minimum_draft4 != nullptr && node.minimum) {
      node.exclusive_minimum = node.minimum;
      node.exclusive_minimum_text = node.minimum_text;
      node.minimum.reset();
    }
    if (maximum_draft4 != nullptr && node.maximum) {
      node.exclusive_maximum = node.maximum;
      node.exclusive_maximum_text = node.maximum_text;
      node.maximum.reset();
    }
    nodes_[index] = std::move(node);
    return absl::OkStatus();
  }

  const json::Value& root_;
  const CompileOptions& options_;
  std::vector<Node> nodes_;
  std::map<const json::Value*, int> ref_nodes_;
  std::vector<std::pair<int, std::pair<const json::Value*, std::string>>> pending_;
  size_t patterns_ = 0;
};

}  // namespace

absl::Status CompileNodes(const json::Value& root, const CompileOptions& options,
                          std::vector<Node>* nodes) {
  Compiler compiler(root, options);
  return compiler.Run(nodes);
}

}  // namespace gantry::json_schema::internal
