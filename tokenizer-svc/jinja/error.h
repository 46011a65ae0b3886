// The one error form of the Jinja library: INVALID_ARGUMENT with reason
// template_render_failed (common/error_codes.h) and the message "line N: what".
//
// Thread-safety: pure functions.
#ifndef GANTRY_TOKENIZER_SVC_JINJA_ERROR_H_
#define GANTRY_TOKENIZER_SVC_JINJA_ERROR_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/error_codes.h"

namespace gantry::jinja {

inline absl::Status TemplateError(int line, absl::string_view what) {
  return ReasonError("template_render_failed", absl::StrCat("line ", line, ": ", what));
}

}  // namespace gantry::jinja

#endif  // GANTRY_TOKENIZER_SVC_JINJA_ERROR_H_
