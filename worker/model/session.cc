#include "worker/model/session.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "worker/kernels/kernels.h"

namespace gantry::model {

absl::Status Session::Eval(const std::vector<int32_t>& tokens, std::vector<float>* last_logits) {
  if (tokens.empty()) return absl::InvalidArgumentError("no tokens to evaluate");
  if (n_past() + static_cast<int64_t>(tokens.size()) > capacity()) {
    return ReasonError("context_length_exceeded",
                       absl::StrCat(n_past(), " + ", tokens.size(), " tokens exceed the capacity of ",
                                    capacity()));
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= forward_.model().config().n_vocab) {
      return ReasonError("invalid_request", absl::StrCat("token id ", t, " is outside the vocabulary"));
    }
  }
  const int n = static_cast<int>(tokens.size());
  std::vector<Forward::Item> items(1);
  for (int i = 0; i < n; i += kMaxChunk) {
    const int m = std::min(kMaxChunk, n - i);
    items[0].cache = &cache_;
    items[0].tokens = tokens.data() + i;
    items[0].n = m;
    items[0].logits = i + m == n ? last_logits : nullptr;
    forward_.Eval(&items);
    if (!items[0].status.ok()) return items[0].status;  // checked above: not reached
  }
  return absl::OkStatus();
}

std::vector<std::pair<int32_t, float>> TopLogprobs(const std::vector<float>& logits, int k) {
  double max = logits[0];
  for (float v : logits) max = std::max<double>(max, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(v - max);
  const double lse = max + std::log(sum);
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  k = std::min<int>(k, static_cast<int>(ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  std::vector<std::pair<int32_t, float>> out;
  for (int i = 0; i < k; ++i) out.emplace_back(ids[i], static_cast<float>(logits[ids[i]] - lse));
  return out;
}

}  // namespace gantry::model
