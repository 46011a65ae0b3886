#include "tokenizer-svc/jinja/runtime/env.h"

#include "absl/strings/str_cat.h"

namespace gantry::jinja {

absl::Status BindArgs(const CallArgs& args, absl::string_view function,
                      const std::vector<const char*>& params,
                      std::vector<absl::optional<Value>>* out) {
  out->assign(params.size(), absl::nullopt);
  if (args.pos.size() > params.size()) {
    return PyError(absl::StrCat(function, "() takes at most ", params.size(),
                                " argument(s) (", args.pos.size(), " given)"));
  }
  for (size_t i = 0; i < args.pos.size(); ++i) (*out)[i] = args.pos[i];
  for (const auto& kw : args.kw) {
    size_t i = 0;
    while (i < params.size() && kw.first != params[i]) ++i;
    if (i == params.size()) {
      return PyError(absl::StrCat(function, "() got an unexpected keyword argument '", kw.first, "'"));
    }
    if ((*out)[i]) {
      return PyError(absl::StrCat(function, "() got multiple values for argument '", kw.first, "'"));
    }
    (*out)[i] = kw.second;
  }
  return absl::OkStatus();
}

}  // namespace gantry::jinja
