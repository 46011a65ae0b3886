#include "tokenizer-svc/tokenizer/post_processor.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "tokenizer-svc/tokenizer/json_fields.h"

namespace gantry::tokenizer {
namespace {

// [token, id] as RobertaProcessing writes "cls" and "sep".
absl::StatusOr<int32_t> PairId(const json::Value& v, const std::string& where) {
  if (!v.is_array() || v.items().size() != 2 || !v.items()[1].is_integer()) {
    return JsonError(where, "expected [\"token\", id]");
  }
  auto id = v.items()[1].as_int64();
  if (!id.has_value() || *id < 0 || *id > INT32_MAX) return JsonError(where, "id out of range");
  return static_cast<int32_t>(*id);
}

}  // namespace

absl::Status PostProcessor::AddItems(const json::Value& v, const std::string& where,
                                     std::vector<Item>* items) {
  GANTRY_ASSIGN_OR_RETURN(std::string type, TypeOf(v, where));
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence") {
    const json::Value* list = Member(v, "processors");
    if (list == nullptr || !list->is_array()) return JsonError(where, "Sequence needs \"processors\"");
    // Each processor wraps the output of the previous one: fold templates inside out.
    for (size_t i = 0; i < list->items().size(); ++i) {
      std::vector<Item> inner;
      GANTRY_RETURN_IF_ERROR(AddItems(list->items()[i], absl::StrCat(where, ".processors[", i, "]"), &inner));
      if (inner.empty()) continue;
      if (items->empty()) {
        *items = std::move(inner);
        continue;
      }
      std::vector<Item> combined;
      for (Item& item : inner) {
        if (item.sequence) {
          combined.insert(combined.end(), items->begin(), items->end());
        } else {
          combined.push_back(std::move(item));
        }
      }
      // Nested Sequences multiply templates; real files have a handful of items.
      if (combined.size() > 1024) return JsonError(where, "template too large");
      *items = std::move(combined);
    }
    return absl::OkStatus();
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    const json::Value* cls = Member(v, "cls");
    const json::Value* sep = Member(v, "sep");
    if (cls == nullptr || sep == nullptr) return JsonError(where, "needs \"cls\" and \"sep\"");
    GANTRY_ASSIGN_OR_RETURN(int32_t cls_id, PairId(*cls, where + ".cls"));
    GANTRY_ASSIGN_OR_RETURN(int32_t sep_id, PairId(*sep, where + ".sep"));
    items->push_back(Item{false, {cls_id}});
    items->push_back(Item{true, {}});
    items->push_back(Item{false, {sep_id}});
    return absl::OkStatus();
  }
  if (type == "TemplateProcessing") {
    const json::Value* single = Member(v, "single");
    const json::Value* specials = Member(v, "special_tokens");
    if (single == nullptr || !single->is_array()) return JsonError(where, "needs \"single\"");
    bool has_sequence = false;
    for (size_t i = 0; i < single->items().size(); ++i) {
      const json::Value& piece = single->items()[i];
      std::string at = absl::StrCat(where, ".single[", i, "]");
      if (Member(piece, "Sequence") != nullptr) {
        items->push_back(Item{true, {}});
        has_sequence = true;
        continue;
      }
      const json::Value* special = Member(piece, "SpecialToken");
      const json::Value* name = special == nullptr ? nullptr : Member(*special, "id");
      if (name == nullptr || !name->is_string()) return JsonError(at, "expected Sequence or SpecialToken");
      const json::Value* entry = specials == nullptr ? nullptr : Member(*specials, name->as_string());
      const json::Value* ids = entry == nullptr ? nullptr : Member(*entry, "ids");
      if (ids == nullptr || !ids->is_array()) {
        return JsonError(at, absl::StrCat("special token '", name->as_string(), "' has no ids"));
      }
      Item item{false, {}};
      for (const json::Value& id : ids->items()) {
        auto value = id.as_int64();
        if (!id.is_integer() || !value.has_value() || *value < 0 || *value > INT32_MAX) {
          return JsonError(at, "invalid id");
        }
        item.ids.push_back(static_cast<int32_t>(*value));
      }
      items->push_back(std::move(item));
    }
    if (!has_sequence) return JsonError(where, "the single template has no Sequence");
    return absl::OkStatus();
  }
  return absl::UnimplementedError(
      absl::StrCat("tokenizer.json: ", where, ": post_processor type '", type, "' is not supported"));
}

absl::StatusOr<std::unique_ptr<PostProcessor>> PostProcessor::FromJson(const json::Value& v) {
  std::unique_ptr<PostProcessor> post(new PostProcessor());
  GANTRY_RETURN_IF_ERROR(AddItems(v, "post_processor", &post->items_));
  return post;
}

void PostProcessor::AddSpecialTokens(std::vector<int32_t>* ids) const {
  if (items_.empty()) return;
  std::vector<int32_t> out;
  out.reserve(ids->size() + 4);
  for (const Item& item : items_) {
    if (item.sequence) {
      out.insert(out.end(), ids->begin(), ids->end());
    } else {
      out.insert(out.end(), item.ids.begin(), item.ids.end());
    }
  }
  *ids = std::move(out);
}

}  // namespace gantry::tokenizer
